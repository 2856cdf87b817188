"""Exporting the checkpoints users hold: a spiece.model without tokenizer.json, a tied-embedding
(original T5) checkpoint without lm_head.weight, and one-line errors for bad checkpoints."""

import json
import os

import numpy as np
import pytest
import torch

from scripts import autoui_model as am
from scripts import bundle_files, export
from scripts import tokenizer_fixture as tf
from scripts.ort_pipeline import Bundle
from scripts.tests.conftest import TOKENIZER

IMAGE_DIM = 64  # the tiny random vision tower's output
STRINGS = [
    "Goal: Open the settings app",
    "Previous Actions: \"action_type\": \"DUAL_POINT\", \"touch_point\": \"[0.7262, 0.4187]\" Goal: Turn on wifi",
    "Action Plan: [TYPE,PRESS_ENTER] ; Action Decision: \"typed_text\": \"paris hotels\"",
    "  spaces   and\ttabs\n", "Zürich café 東京 😀", "x</s>y", "",
]


def _corpus() -> list[str]:
    words = ["open", "settings", "wifi", "chrome", "search", "paris", "hotel", "tap", "Goal:", "Action",
             "Plan:", "Decision:", "[0.5, 0.2]", "DUAL_POINT", "TYPE", "zürich", "café"]
    return [" ".join(words[(i * k) % len(words)] for k in range(1, 9)) + f" {i / 300:.4f}" for i in range(300)]


@pytest.fixture(scope="module")
def spiece_checkpoint(tmp_path_factory):
    """A checkpoint directory with spiece.model (T5 ids: pad 0, </s> 1, unk 2) and no tokenizer.json."""
    ck = tmp_path_factory.mktemp("spiece_ckpt")
    tf.train_spiece(str(ck / "spiece.model"), corpus=_corpus(), vocab_size=200, hard_vocab_limit=False)
    n_ids = 200 + tf.EXTRA_IDS  # at most: sentencepiece pieces + T5's <extra_id_*>
    am.save_checkpoint(am.random_model("tiny", am.round_vocab(n_ids), IMAGE_DIM, seed=7), str(ck))
    return ck


def _slow(ck):
    from transformers import T5Tokenizer
    with export._quiet_transformers():
        return T5Tokenizer.from_pretrained(str(ck), local_files_only=True)


def test_spiece_checkpoint_exports_converted_tokenizer(spiece_checkpoint, tmp_path):
    import transformers
    out = tmp_path / "bundle"
    assert export.main(["--out", str(out), "--checkpoint", str(spiece_checkpoint), "--vision", "random"]) == 0
    with open(out / "manifest.json") as f:
        manifest = json.load(f)
    assert manifest["exporter"]["tokenizer_source"] == \
        f"converted from spiece.model by transformers {transformers.__version__}"
    assert manifest["files"]["tokenizer"]["sha256"] == bundle_files.sha256_file(str(out / "tokenizer.json"))
    fast, slow = am.load_tokenizer(str(out / "tokenizer.json")), _slow(spiece_checkpoint)
    for s in STRINGS:
        assert fast(s)["input_ids"] == slow(s)["input_ids"], s
    assert len(fast) == len(slow) > 100 + tf.EXTRA_IDS


def test_conversion_honours_tokenizer_config_and_is_deterministic(spiece_checkpoint, tmp_path):
    ck = tmp_path / "ck"
    ck.mkdir()
    os.symlink(spiece_checkpoint / "spiece.model", ck / "spiece.model")
    (ck / "tokenizer_config.json").write_text(json.dumps({"legacy": False, "extra_ids": 100}))
    a, b = str(tmp_path / "a.json"), str(tmp_path / "b.json")
    export.convert_spiece(str(ck), a)
    export.convert_spiece(str(ck), b)
    assert open(a, "rb").read() == open(b, "rb").read()
    with open(a) as f:
        assert json.load(f)["pre_tokenizer"]["prepend_scheme"] == "first"  # legacy=False reached the converter
    fast, slow = am.load_tokenizer(a), _slow(ck)
    for s in STRINGS:
        assert fast(s)["input_ids"] == slow(s)["input_ids"], s


def test_checkpoint_tokenizer_prefers_tokenizer_json(spiece_checkpoint, tmp_path):
    assert export.checkpoint_tokenizer(str(spiece_checkpoint), TOKENIZER, str(tmp_path)) == (TOKENIZER, "tokenizer.json")
    with pytest.raises(am.CheckpointError, match="no tokenizer.json or spiece.model"):
        export.checkpoint_tokenizer(str(tmp_path), None, str(tmp_path))


def test_bad_spiece_is_one_line_error(spiece_checkpoint, tmp_path, capsys):
    ck = tmp_path / "ck"
    ck.mkdir()
    for name in ("config.json", "model.safetensors"):
        os.symlink(spiece_checkpoint / name, ck / name)
    (ck / "spiece.model").write_bytes(b"not a sentencepiece model")
    assert export._cli(["--out", str(tmp_path / "b"), "--checkpoint", str(ck), "--vision", "random"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"export: error: {ck / 'spiece.model'}: cannot convert to tokenizer.json")
    assert not any("Traceback" in line for line in err)


def test_tokenizer_larger_than_vocab_fails(spiece_checkpoint, tmp_path):
    small = tmp_path / "small"
    am.save_checkpoint(am.random_model("tiny", 128, IMAGE_DIM, seed=7), str(small))
    os.symlink(spiece_checkpoint / "spiece.model", small / "spiece.model")
    with pytest.raises(ValueError, match=r"\d+ ids, more than the model's vocab_size 128"):
        export.main(["--out", str(tmp_path / "b"), "--checkpoint", str(small), "--vision", "random", "--no-check"])


# ---------------------------------------------------------------- tied embeddings

def _tied_model(seed: int = 11) -> am.AutoUIModel:
    cfg = am.t5_config("tiny", 2112)
    cfg.tie_word_embeddings = True
    torch.manual_seed(seed)
    return am.AutoUIModel(cfg, image_dim=IMAGE_DIM).eval()


@pytest.fixture(scope="module")
def tied_bundle(tmp_path_factory):
    ck = tmp_path_factory.mktemp("tied_ckpt")
    model = _tied_model()
    am.save_checkpoint(model, str(ck))  # safetensors: drops lm_head.weight as a duplicate of shared
    from safetensors.torch import load_file
    assert "lm_head.weight" not in load_file(str(ck / "model.safetensors"))
    out = tmp_path_factory.mktemp("tied_bundle")
    # The export's own ORT-vs-PyTorch checks run (no --no-check) and must pass.
    assert export.main(["--out", str(out), "--checkpoint", str(ck), "--vision", "random",
                        "--tokenizer", TOKENIZER]) == 0
    return str(out), model, str(ck)


def test_tied_checkpoint_loads_tied(tied_bundle):
    _, model, ck = tied_bundle
    loaded = am.load_checkpoint(ck)
    assert loaded.config.tie_word_embeddings
    assert loaded.lm_head.weight is loaded.shared.weight
    assert torch.equal(loaded.shared.weight, model.shared.weight)


@torch.no_grad()
def test_tied_logits_are_scaled_like_hf(tied_bundle, tokenizer):
    out, model, _ = tied_bundle
    b = Bundle(out)
    ids, _ = am.encode_source(tokenizer, am.source_text("Open the settings app", [am.Action("PRESS_HOME")]))
    feats = torch.randn(IMAGE_DIM, generator=torch.Generator().manual_seed(2))
    _, fused, mask = b.encode(ids, feats.numpy())
    seq = [0, 17, 256, 1033]
    got, _ = b.decoder_step(seq, fused, mask, None)

    ids_t, seq_t = torch.tensor([ids]), torch.tensor([seq])
    hf = model(input_ids=ids_t, attention_mask=torch.ones_like(ids_t), image_features=feats[None],
               decoder_input_ids=seq_t).logits[0].numpy()
    # Independently: T5 with tied embeddings scales the decoder output by d_model**-0.5 before lm_head.
    h = model.decoder(input_ids=seq_t, encoder_hidden_states=torch.from_numpy(fused)[None]).last_hidden_state[0]
    manual = ((h * model.config.d_model ** -0.5) @ model.shared.weight.T).numpy()
    unscaled = (h @ model.shared.weight.T).numpy()
    assert np.abs(got - hf).max() < 1e-4 * max(1.0, np.abs(hf).max())
    assert np.abs(got - manual).max() < 1e-4 * max(1.0, np.abs(manual).max())
    assert np.abs(got - unscaled).max() > 0.5 * np.abs(unscaled).max()


def test_tied_greedy_equals_torch(tied_bundle, tokenizer):
    out, model, _ = tied_bundle
    ids, _ = am.encode_source(tokenizer, am.source_text("Open Chrome", []))
    feats = torch.randn(IMAGE_DIM, generator=torch.Generator().manual_seed(3))
    want = model.generate_action(torch.tensor([ids]), feats[None], max_new_tokens=10)[0, 1:].tolist()
    assert Bundle(out).greedy(ids, feats.numpy(), max_new_tokens=10)[0] == want


# ---------------------------------------------------------------- one-line errors

def test_unreadable_weights_are_one_line_error(tmp_path, capsys):
    ck = tmp_path / "ck"
    am.save_checkpoint(am.random_model("tiny", 2112, IMAGE_DIM, seed=7), str(ck))
    (ck / "model.safetensors").write_bytes(b"\x00" * 16)
    assert export._cli(["--out", str(tmp_path / "b"), "--checkpoint", str(ck), "--vision", "random",
                        "--tokenizer", TOKENIZER]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"export: error: {ck / 'model.safetensors'}: cannot read weights")


def test_unexpected_key_is_one_line_error(tmp_path, capsys):
    ck = tmp_path / "ck"
    am.save_checkpoint(am.random_model("tiny", 2112, IMAGE_DIM, seed=7), str(ck), safe=False)
    sd = torch.load(ck / "pytorch_model.bin", weights_only=True)
    sd["decoder.block.1.layer.1.EncDecAttention.relative_attention_bias.weight"] = torch.zeros(32, 4)
    torch.save(sd, ck / "pytorch_model.bin")
    assert export._cli(["--out", str(tmp_path / "b"), "--checkpoint", str(ck), "--vision", "random"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"export: error: {ck / 'pytorch_model.bin'}: missing keys [], unexpected keys "
                   "['decoder.block.1.layer.1.EncDecAttention.relative_attention_bias.weight']"]
