"""BLIP-2 vision tower with Blip2Model.get_image_features pooled-output semantics, and
BlipImageProcessor preprocessing.

Auto-UI's screen feature is the pooler_output of the BLIP-2 (Salesforce/blip2-opt-2.7b)
vision model: post_layernorm over the sequence, then post_layernorm again on the CLS token.
HF Blip2VisionModel computes exactly that, so the tower is that class (its weights, its
reference output); this module builds it at the sizes we need, loads the vision weights out of a
full BLIP-2 directory, and runs its last layer for the CLS token alone (VisionTower).
"""

from __future__ import annotations

import json
import os

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from transformers import Blip2VisionConfig, Blip2VisionModel

IMAGE_SIZE = 224
MEAN = (0.48145466, 0.4578275, 0.40821073)  # OPENAI_CLIP_MEAN
STD = (0.26862954, 0.26130258, 0.27577711)  # OPENAI_CLIP_STD
RESCALE = 1 / 255

VISION_SIZES = {
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256),
    # EVA ViT-g/14 as in Salesforce/blip2-opt-2.7b.
    "vitg": dict(hidden_size=1408, num_hidden_layers=39, num_attention_heads=16, intermediate_size=6144),
}


class VisionTower(nn.Module):
    """pixel_values (b, 3, S, S) -> image_features (b, hidden): the pooled CLS output.

    Only the CLS token of the last layer's output reaches the pooled feature, and a layer's
    attention and MLP work per query token, so forward runs the last layer for that one query
    (over every token's keys and values): Blip2VisionModel's pooler_output (reference) without the
    last layer's work for the other tokens (about 2% of ViT-g's, at 257 tokens and 39 layers)."""

    def __init__(self, model: Blip2VisionModel):
        super().__init__()
        self.model = model

    @property
    def config(self) -> Blip2VisionConfig:
        return self.model.config

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        m = self.model
        if self.training and m.encoder.gradient_checkpointing:
            return self.reference(pixel_values)  # HF's layer loop is the one that checkpoints
        h = m.embeddings(pixel_values)
        *layers, last = m.encoder.layers
        for layer in layers:
            h = layer(h, None)[0]
        cls = _cls_layer(last, h)
        # HF norms the whole sequence, takes CLS and norms it again; the norm is per token.
        return m.post_layernorm(m.post_layernorm(cls))[:, 0]

    def reference(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Hugging Face's own pooler_output, every token through every layer."""
        return self.model(pixel_values=pixel_values, return_dict=True).pooler_output


def _cls_layer(layer: nn.Module, h: torch.Tensor) -> torch.Tensor:
    """A Blip2EncoderLayer's output for the first token of h (b, s, d) only, as (b, 1, d): its
    query from that token, keys and values from all of them (the q and the k/v rows of the packed
    qkv projection apart)."""
    a = layer.self_attn
    # Sizes from the config, not h.shape: a traced export then slices the weights once, as
    # constants, instead of on every call.
    d, heads, hd = a.embed_dim, a.num_heads, a.head_dim
    x = layer.layer_norm1(h)
    w, bias = a.qkv.weight, a.qkv.bias
    q = F.linear(x[:, :1], w[:d], None if bias is None else bias[:d])
    kv = F.linear(x, w[d:], None if bias is None else bias[d:])
    q = q.reshape(-1, 1, heads, hd).transpose(1, 2)
    kv = kv.reshape(kv.shape[0], kv.shape[1], 2, heads, hd).permute(2, 0, 3, 1, 4)
    k, v = kv[0], kv[1]
    probs = a.dropout(torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * a.scale, dim=-1))
    ctx = torch.matmul(probs, v).transpose(1, 2).reshape(-1, 1, d)
    y = h[:, :1] + a.projection(ctx)
    return y + layer.mlp(layer.layer_norm2(y))


def vision_config(size: str) -> Blip2VisionConfig:
    if size not in VISION_SIZES:
        raise ValueError(f"unknown vision size {size!r} (want one of {sorted(VISION_SIZES)})")
    # initializer_range: BLIP-2's default (1e-10) makes a random tower map every image to the
    # same vector; 0.02 keeps random towers discriminative.
    return Blip2VisionConfig(image_size=IMAGE_SIZE, patch_size=14, hidden_act="gelu", layer_norm_eps=1e-6,
                             qkv_bias=True, initializer_range=0.02, **VISION_SIZES[size])


def random_vision(size: str, seed: int) -> VisionTower:
    torch.manual_seed(seed)
    return VisionTower(Blip2VisionModel(vision_config(size))).eval()


def _vision_state(blip2_dir: str) -> dict:
    """Tensors under vision_model.* from a BLIP-2 checkpoint (single file or shards)."""
    files = []
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        p = os.path.join(blip2_dir, index)
        if os.path.exists(p):
            with open(p) as f:
                wm = json.load(f)["weight_map"]
            files = sorted({v for k, v in wm.items() if k.startswith("vision_model.")})
            break
    if not files:
        for single in ("model.safetensors", "pytorch_model.bin"):
            if os.path.exists(os.path.join(blip2_dir, single)):
                files = [single]
                break
    if not files:
        raise FileNotFoundError(f"BLIP-2 directory {blip2_dir}: no weights")
    state = {}
    for name in files:
        path = os.path.join(blip2_dir, name)
        if name.endswith(".safetensors"):
            from safetensors import safe_open
            with safe_open(path, framework="pt") as f:
                for k in f.keys():
                    if k.startswith("vision_model."):
                        state[k[len("vision_model."):]] = f.get_tensor(k)
        else:
            sd = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            state.update({k[len("vision_model."):]: v for k, v in sd.items() if k.startswith("vision_model.")})
    return state


def vision_dir_config(blip2_dir: str) -> Blip2VisionConfig:
    """The vision tower's config in a local BLIP-2 directory's config.json (nothing built)."""
    with open(os.path.join(blip2_dir, "config.json")) as f:
        cfg = json.load(f)
    # A full BLIP-2 config nests the tower under vision_config (absent/empty = ViT-g defaults);
    # a bare Blip2VisionConfig directory is the tower itself.
    vcfg = (cfg.get("vision_config") or {}) if cfg.get("model_type") in ("blip-2", "blip_2") else cfg
    return Blip2VisionConfig(**{k: v for k, v in vcfg.items() if k not in ("model_type", "architectures")})


def load_vision(blip2_dir: str) -> VisionTower:
    """The vision tower of a local BLIP-2 directory (config.json + weights); only the vision
    weights are read. Missing or unexpected vision keys fail."""
    model = Blip2VisionModel(vision_dir_config(blip2_dir))
    state = {k: v.float() for k, v in _vision_state(blip2_dir).items()}
    expected = set(model.state_dict())
    missing, unexpected = sorted(expected - set(state)), sorted(set(state) - expected)
    if missing or unexpected:
        raise ValueError(f"BLIP-2 {blip2_dir}: vision keys missing {missing}, unexpected {unexpected}")
    model.load_state_dict(state, strict=True)
    return VisionTower(model).eval()


def image_processor(size: int = IMAGE_SIZE):
    """HF BlipImageProcessor as BLIP-2 configures it (the reference preprocessing); size is the
    tower's square input (224 for BLIP-2, larger for towers trained here to read small text)."""
    from transformers import BlipImageProcessor
    from transformers.image_utils import PILImageResampling
    return BlipImageProcessor(do_resize=True, size={"height": size, "width": size},
                              resample=PILImageResampling.BICUBIC, do_rescale=True, rescale_factor=RESCALE,
                              do_normalize=True, image_mean=list(MEAN), image_std=list(STD), do_convert_rgb=True)


def preprocess(image, size: int = IMAGE_SIZE) -> np.ndarray:
    """PIL image -> float32 (3, size, size) pixel values."""
    out = image_processor(size)(images=image, return_tensors="np")["pixel_values"][0]
    return np.ascontiguousarray(out, dtype=np.float32)


def preprocess_config(size: int = IMAGE_SIZE) -> dict:
    return {"height": size, "width": size, "resample": "bicubic", "rescale_factor": RESCALE,
            "mean": list(MEAN), "std": list(STD)}
