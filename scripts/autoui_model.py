"""The Auto-UI model (T5 + one-token image fusion), its checkpoint loader and the
reference prompt/target text.

This module is the Python reference the Go engine is checked against: the fusion follows
Auto-UI's model.py (image_dense -> 1-head MultiheadAttention -> sigmoid gate, applied to
the encoder output after its final norm), and the text helpers produce exactly the
source/target strings of Auto-UI's utils_data.py (see docs/bundle-format.md).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Iterable, Optional, Sequence

import numpy as np
import torch
from torch import nn
from transformers import T5Config, T5ForConditionalGeneration
from transformers.modeling_outputs import BaseModelOutput

BLIP2_IMAGE_DIM = 1408
PAD_ID, EOS_ID, UNK_ID = 0, 1, 2
MAX_SOURCE_TOKENS = 512
# Auto-UI's output_len: targets are truncated to 128 tokens (with </s>) in training, and
# evaluation runs generate(max_length=128), which counts the decoder start token: so at most
# 127 new tokens. MAX_NEW_TOKENS is the generation cap a bundle records (max_target_tokens).
MAX_TARGET_TOKENS = 128
MAX_NEW_TOKENS = MAX_TARGET_TOKENS - 1
HISTORY_WINDOW = 8

# T5 backbones. base/large are FLAN-Alpaca (FLAN-T5) sizes; tiny is for fixtures.
T5_SIZES = {
    "tiny": dict(d_model=128, d_kv=32, d_ff=256, num_layers=2, num_decoder_layers=2, num_heads=4),
    "base": dict(d_model=768, d_kv=64, d_ff=2048, num_layers=12, num_decoder_layers=12, num_heads=12),
    "large": dict(d_model=1024, d_kv=64, d_ff=2816, num_layers=24, num_decoder_layers=24, num_heads=16),
}
FLAN_VOCAB_SIZE = 32128


def round_vocab(n: int, multiple: int = 64) -> int:
    return (n + multiple - 1) // multiple * multiple


def t5_config(size: str, vocab_size: int = FLAN_VOCAB_SIZE) -> T5Config:
    """A FLAN-T5-style config (gated-gelu, untied lm_head) of the given size."""
    if size not in T5_SIZES:
        raise ValueError(f"unknown T5 size {size!r} (want one of {sorted(T5_SIZES)})")
    return T5Config(
        vocab_size=vocab_size,
        feed_forward_proj="gated-gelu",
        tie_word_embeddings=False,
        relative_attention_num_buckets=32,
        relative_attention_max_distance=128,
        layer_norm_epsilon=1e-6,
        dropout_rate=0.1,
        decoder_start_token_id=PAD_ID,
        pad_token_id=PAD_ID,
        eos_token_id=EOS_ID,
        is_encoder_decoder=True,
        use_cache=True,
        **T5_SIZES[size],
    )


class AutoUIModel(T5ForConditionalGeneration):
    """T5ForConditionalGeneration plus Auto-UI's fusion modules.

    State-dict names match Auto-UI's T5ForMultimodalGeneration: image_dense,
    mha_layer.{in_proj_weight,in_proj_bias,out_proj.weight,out_proj.bias}, gate_dense.
    """

    def __init__(self, config: T5Config, image_dim: int = BLIP2_IMAGE_DIM):
        super().__init__(config)
        d = config.d_model
        self.image_dim = image_dim
        self.image_dense = nn.Linear(image_dim, d)
        self.mha_layer = nn.MultiheadAttention(embed_dim=d, kdim=d, vdim=d, num_heads=1, batch_first=True)
        self.gate_dense = nn.Linear(2 * d, d)
        self.sigmoid = nn.Sigmoid()

    def fuse(self, hidden_states: torch.Tensor, image_features: torch.Tensor) -> torch.Tensor:
        """Fuse encoder output (b, n, d) with pooled image features (b, image_dim): one image token."""
        image_embedding = self.image_dense(image_features.to(hidden_states.dtype))
        if image_embedding.dim() == 2:
            image_embedding = image_embedding.unsqueeze(1)
        image_att, _ = self.mha_layer(hidden_states, image_embedding, image_embedding, need_weights=False)
        merge = torch.cat([hidden_states, image_att], dim=-1)
        gate = self.sigmoid(self.gate_dense(merge))
        return (1 - gate) * hidden_states + gate * image_att

    def forward(self, input_ids=None, attention_mask=None, image_features=None, encoder_outputs=None,
                return_dict=None, **kwargs):
        if image_features is None:
            raise ValueError("AutoUIModel needs image_features (batch, image_dim)")
        if encoder_outputs is None:
            encoder_outputs = self.encoder(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
        hidden = encoder_outputs[0]
        fused = self.fuse(hidden, image_features)
        # The decoder cross-attends to the fused states; the parent forward skips encoding.
        return super().forward(attention_mask=attention_mask, encoder_outputs=BaseModelOutput(last_hidden_state=fused),
                               return_dict=True, **kwargs)

    @torch.no_grad()
    def generate_action(self, input_ids: torch.Tensor, image_features: torch.Tensor,
                        attention_mask: Optional[torch.Tensor] = None,
                        max_new_tokens: int = MAX_NEW_TOKENS) -> torch.Tensor:
        """Greedy decoding as Auto-UI evaluates (no sampling, one beam). Returns the ids
        including the decoder start token, like HF generate."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        return self.generate(input_ids=input_ids, attention_mask=attention_mask, image_features=image_features,
                             max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                             decoder_start_token_id=self.config.decoder_start_token_id,
                             eos_token_id=self.config.eos_token_id, pad_token_id=self.config.pad_token_id,
                             use_cache=True)


def random_model(size: str, vocab_size: int, image_dim: int, seed: int) -> AutoUIModel:
    torch.manual_seed(seed)
    model = AutoUIModel(t5_config(size, vocab_size), image_dim=image_dim)
    return model.eval()


# ---------------------------------------------------------------- checkpoints

# Keys a checkpoint may carry or omit: the embeddings tied to `shared` (old torch.save
# checkpoints store them, safetensors drops them as duplicates).
TIED_EMBEDDING_KEYS = ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight")
# With tie_word_embeddings (original T5 configs; the default when config.json omits it)
# lm_head is shared.weight too, and safetensors checkpoints leave it out.
TIED_HEAD_KEY = "lm_head.weight"
# Some transformers versions saved a cross-attention position bias T5 never uses;
# transformers and Auto-UI's model.py ignore it on load, so do we. Nothing else is ignored.
IGNORED_KEYS = ("decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight",)


class CheckpointError(ValueError):
    pass


def _load_weights_file(path: str) -> dict:
    try:
        if path.endswith(".safetensors"):
            from safetensors.torch import load_file
            return load_file(path)
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # safetensors, pickle and zip errors alike: name the file
        detail = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise CheckpointError(f"{path}: cannot read weights ({detail})") from e


def _read_state_dict(ckpt_dir: str) -> tuple[dict, str]:
    """The checkpoint's tensors and the file they came from (for error messages)."""
    for name in ("model.safetensors", "pytorch_model.bin"):
        path = os.path.join(ckpt_dir, name)
        if os.path.exists(path):
            return _load_weights_file(path), path
    for name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        index = os.path.join(ckpt_dir, name)
        if os.path.exists(index):
            try:
                with open(index) as f:
                    shards = sorted(set(json.load(f)["weight_map"].values()))
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
                raise CheckpointError(f"{index}: not a weight index ({type(e).__name__}: {e})") from e
            out = {}
            for shard in shards:
                out.update(_load_weights_file(os.path.join(ckpt_dir, shard)))
            return out, index
    raise CheckpointError(f"checkpoint {ckpt_dir}: no model.safetensors or pytorch_model.bin")


def _read_config(ckpt_dir: str) -> T5Config:
    path = os.path.join(ckpt_dir, "config.json")
    if not os.path.exists(path):
        raise CheckpointError(f"checkpoint {ckpt_dir}: no config.json")
    try:
        with open(path) as f:
            cfg = json.load(f)
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: not valid JSON ({e})") from e
    if not isinstance(cfg, dict) or cfg.get("model_type", "t5") != "t5":
        kind = cfg.get("model_type") if isinstance(cfg, dict) else type(cfg).__name__
        raise CheckpointError(f"{path}: model_type {kind!r}, want t5 (an Auto-UI checkpoint is a T5)")
    return T5Config.from_dict(cfg)


def _optional_keys(config: T5Config) -> tuple[str, ...]:
    return TIED_EMBEDDING_KEYS + ((TIED_HEAD_KEY,) if config.tie_word_embeddings else ())


def _drop_tied_copies(state: dict, optional: Sequence[str], where: str) -> None:
    """Remove copies of shared.weight; a copy that differs is an error (the model ties them)."""
    for key in optional:
        if key in state:
            if "shared.weight" in state and not torch.equal(state[key], state["shared.weight"]):
                raise CheckpointError(f"{where}: {key} differs from shared.weight, but the model ties them")
            state.pop(key)


def load_checkpoint(ckpt_dir: str) -> AutoUIModel:
    """Load an Auto-UI checkpoint directory (HF save_pretrained of T5ForMultimodalGeneration).

    The image dimension comes from image_dense.weight. Any missing or unexpected key fails,
    except the tied copies of shared.weight (TIED_*) and IGNORED_KEYS.
    """
    config = _read_config(ckpt_dir)
    state, where = _read_state_dict(ckpt_dir)
    if "image_dense.weight" not in state:
        raise CheckpointError(f"{where}: missing key image_dense.weight (not an Auto-UI checkpoint?)")
    image_dim = int(state["image_dense.weight"].shape[1])
    with torch.device("meta"):
        skeleton = AutoUIModel(config, image_dim=image_dim)
    expected = set(skeleton.state_dict().keys())
    state = {k: v for k, v in state.items() if k not in IGNORED_KEYS}
    optional = _optional_keys(config)
    _drop_tied_copies(state, optional, where)
    required = expected - set(optional)
    missing = sorted(required - set(state))
    unexpected = sorted(set(state) - required)
    if missing or unexpected:
        raise CheckpointError(f"{where}: missing keys {missing}, unexpected keys {unexpected}")
    for k, v in skeleton.state_dict().items():
        if k in state and tuple(state[k].shape) != tuple(v.shape):
            raise CheckpointError(f"{where}: {k} has shape {tuple(state[k].shape)}, want {tuple(v.shape)}")
    # post_init ties lm_head (and the embeddings) to shared when the config says so, so
    # loading shared.weight fills them all.
    model = AutoUIModel(config, image_dim=image_dim)
    state = {k: v.float() for k, v in state.items()}
    result = model.load_state_dict(state, strict=False)
    leftover = [k for k in result.missing_keys if k not in optional]
    if leftover or result.unexpected_keys:
        raise CheckpointError(f"{where}: missing {leftover}, unexpected {result.unexpected_keys}")
    if config.tie_word_embeddings and model.lm_head.weight is not model.shared.weight:
        raise CheckpointError(f"{where}: tie_word_embeddings is set but lm_head is not tied to shared")
    return model.eval()


def save_checkpoint(model: AutoUIModel, out_dir: str, safe: bool = True) -> None:
    """Save like Auto-UI's trainer.save_model (HF save_pretrained); the image dim is not in
    config.json there either (it is a constructor argument), the loader reads it from the weights."""
    model.save_pretrained(out_dir, safe_serialization=safe)
    # Auto-UI's class name, so the directory looks like theirs.
    path = os.path.join(out_dir, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    cfg["architectures"] = ["T5ForMultimodalGeneration"]
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


# ---------------------------------------------------------------- action text

ACTION_TYPES = {3: "TYPE", 4: "DUAL_POINT", 5: "PRESS_BACK", 6: "PRESS_HOME", 7: "PRESS_ENTER",
                10: "STATUS_TASK_COMPLETE", 11: "STATUS_TASK_IMPOSSIBLE"}
ACTION_NAMES = set(ACTION_TYPES.values())
NO_POINT = (-1.0, -1.0)
TAP_DISTANCE = 0.04

# Swipe -> fixed vectors ([y, x] touch, lift). "legacy" is what the public checkpoints were
# trained with (utils_data.py before the fix): left/right map to the vertical vectors.
SCROLL_MAPS = {
    "fixed": {"up": ((0.8, 0.5), (0.2, 0.5)), "down": ((0.2, 0.5), (0.8, 0.5)),
              "left": ((0.5, 0.8), (0.5, 0.2)), "right": ((0.5, 0.2), (0.5, 0.8))},
    "legacy": {"up": ((0.8, 0.5), (0.2, 0.5)), "down": ((0.2, 0.5), (0.8, 0.5)),
               "left": ((0.8, 0.5), (0.2, 0.5)), "right": ((0.2, 0.5), (0.8, 0.5))},
}


@dataclasses.dataclass
class Action:
    action_type: str
    touch_point: Sequence[float] = NO_POINT
    lift_point: Sequence[float] = NO_POINT
    typed_text: str = ""

    def __post_init__(self):
        if self.action_type not in ACTION_NAMES:
            raise ValueError(f"unknown action type {self.action_type!r}")

    def to_json(self) -> dict:
        return {"action_type": self.action_type, "touch_point": [float(v) for v in self.touch_point],
                "lift_point": [float(v) for v in self.lift_point], "typed_text": self.typed_text}

    @staticmethod
    def from_json(d: dict) -> "Action":
        return Action(d["action_type"], tuple(d.get("touch_point", NO_POINT)), tuple(d.get("lift_point", NO_POINT)),
                      d.get("typed_text", ""))


def is_tap(touch: Sequence[float], lift: Sequence[float]) -> bool:
    # float32, as AITW's (JAX) matching code computes it.
    d = np.asarray(touch, dtype=np.float32) - np.asarray(lift, dtype=np.float32)
    return bool(np.linalg.norm(d) <= np.float32(TAP_DISTANCE))


def swipe_direction(touch: Sequence[float], lift: Sequence[float]) -> str:
    delta = np.asarray(lift, dtype=np.float32) - np.asarray(touch, dtype=np.float32)
    axis = int(np.argmax(np.abs(delta)))  # ties -> y
    if axis == 0:
        return "up" if delta[0] < 0 else "down"
    return "left" if delta[1] < 0 else "right"


def normalize_action(a: Action, scroll_map: str = "fixed") -> Action:
    """Training-time coordinate normalization: taps keep the touch point rounded to 4
    decimals (lift = touch), swipes become fixed vectors, other actions carry [-1.0, -1.0]."""
    if a.action_type != "DUAL_POINT":
        return Action(a.action_type, NO_POINT, NO_POINT, a.typed_text)
    if is_tap(a.touch_point, a.lift_point):
        p = (round(float(a.touch_point[0]), 4), round(float(a.touch_point[1]), 4))
        return Action("DUAL_POINT", p, p, a.typed_text)
    touch, lift = SCROLL_MAPS[scroll_map][swipe_direction(a.touch_point, a.lift_point)]
    return Action("DUAL_POINT", touch, lift, a.typed_text)


def render_point(p: Sequence[float]) -> str:
    return repr([float(p[0]), float(p[1])])


def clean_typed_text(text: str) -> str:
    return text.replace("\\", "").replace('"', "").replace("'", "")


def action_text(a: Action) -> str:
    """`"action_type": "DUAL_POINT", "touch_point": "[y, x]", "lift_point": "[y, x]", "typed_text": "..."`."""
    return (f'"action_type": "{a.action_type}", "touch_point": "{render_point(a.touch_point)}", '
            f'"lift_point": "{render_point(a.lift_point)}", "typed_text": "{clean_typed_text(a.typed_text)}"')


def collapse_whitespace(s: str) -> str:
    return " ".join(s.split())


def source_text(goal: str, history: Iterable[Action], window: int = HISTORY_WINDOW) -> str:
    """Auto-UI's source text, whitespace collapsed, before tokenization/truncation."""
    history = list(history)
    if window > 0:
        kept = history[-window:] if history else []
        s = "Previous Actions: " + "\n".join(action_text(a) for a in kept) + "\nGoal: " + goal
    else:
        s = "Goal: " + goal
    return collapse_whitespace(s)


def target_text(plan: Sequence[str], a: Action) -> str:
    """`Action Plan: [T1,T2,...] ; Action Decision: <action text>`, plan = current + up to 3 next types."""
    plan = list(plan)[:4]
    for t in plan:
        if t not in ACTION_NAMES:
            raise ValueError(f"unknown action type {t!r} in plan")
    return collapse_whitespace("Action Plan: [" + ",".join(plan) + "]\n; Action Decision: " + action_text(a))


def load_tokenizer(path: str):
    """The HF fast tokenizer on a tokenizer.json, with T5's special tokens set."""
    from transformers import PreTrainedTokenizerFast
    tok = PreTrainedTokenizerFast(tokenizer_file=path, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                                  model_max_length=MAX_SOURCE_TOKENS)
    if (tok.pad_token_id, tok.eos_token_id, tok.unk_token_id) != (PAD_ID, EOS_ID, UNK_ID):
        raise ValueError(f"tokenizer {path}: pad/eos/unk ids are {tok.pad_token_id}/{tok.eos_token_id}/"
                         f"{tok.unk_token_id}, want 0/1/2")
    return tok


def encode_source(tok, text: str, max_len: int = MAX_SOURCE_TOKENS) -> tuple[list[int], bool]:
    """Token ids with </s>, right-truncated at max_len as Auto-UI does; also whether it was cut."""
    full = tok(text, truncation=False, add_special_tokens=True, verbose=False)["input_ids"]
    ids = tok(text, truncation=True, max_length=max_len, add_special_tokens=True)["input_ids"]
    return ids, len(full) > max_len


def decode(tok, ids: Sequence[int], cleanup: bool = True) -> str:
    return tok.batch_decode([list(ids)], skip_special_tokens=True, clean_up_tokenization_spaces=cleanup)[0]


def parse_action_output(text: str) -> tuple[list[str], Action]:
    """Parse `Action Plan: [...] ; Action Decision: ...` (as Auto-UI's evaluation does, without eval)."""
    import re
    m = re.search(r"Action Plan: \[([^\]]*)\]\s*;\s*Action Decision:\s*(.*)$", text)
    if not m:
        raise ValueError(f"not an Auto-UI output: {text!r}")
    plan = [p.strip() for p in m.group(1).split(",") if p.strip()]
    fields = dict(re.findall(r'"(\w+)": "([^"]*)"', m.group(2)))
    for key in ("action_type", "touch_point", "lift_point", "typed_text"):
        if key not in fields:
            raise ValueError(f"missing {key} in {text!r}")

    def point(s):
        vals = [float(v) for v in s.strip("[]").split(",")]
        if len(vals) != 2:
            raise ValueError(f"bad point {s!r}")
        return tuple(vals)

    return plan, Action(fields["action_type"], point(fields["touch_point"]), point(fields["lift_point"]),
                        fields["typed_text"])
