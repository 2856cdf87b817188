"""Checkpoint round trips the way Auto-UI's training saves them (HF save_pretrained)."""

import json

import pytest
import torch

from scripts import autoui_model as am


@pytest.fixture(scope="module")
def tiny_model():
    return am.random_model("tiny", 2112, 64, seed=3)


def _same(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k


def test_safetensors_round_trip(tiny_model, tmp_path):
    am.save_checkpoint(tiny_model, str(tmp_path))
    with open(tmp_path / "config.json") as f:
        assert json.load(f)["architectures"] == ["T5ForMultimodalGeneration"]
    loaded = am.load_checkpoint(str(tmp_path))
    assert loaded.image_dim == 64
    _same(tiny_model, loaded)


def test_pytorch_bin_with_tied_keys(tiny_model, tmp_path):
    # Older transformers wrote pytorch_model.bin with every key, the tied embeddings included.
    am.save_checkpoint(tiny_model, str(tmp_path), safe=False)
    sd = torch.load(tmp_path / "pytorch_model.bin", weights_only=True)
    sd["encoder.embed_tokens.weight"] = sd["shared.weight"]
    sd["decoder.embed_tokens.weight"] = sd["shared.weight"]
    torch.save(sd, tmp_path / "pytorch_model.bin")
    _same(tiny_model, am.load_checkpoint(str(tmp_path)))


@pytest.mark.parametrize("edit,needle", [
    (lambda sd: sd.update({"extra_head.weight": torch.zeros(3)}), "unexpected keys ['extra_head.weight']"),
    (lambda sd: sd.pop("gate_dense.bias"), "missing keys ['gate_dense.bias']"),
    (lambda sd: sd.pop("mha_layer.in_proj_weight"), "mha_layer.in_proj_weight"),
    (lambda sd: sd.pop("lm_head.weight"), "lm_head.weight"),  # untied (FLAN-T5, Auto-UI): required
])
def test_bad_keys_fail(tiny_model, tmp_path, edit, needle):
    am.save_checkpoint(tiny_model, str(tmp_path), safe=False)
    sd = torch.load(tmp_path / "pytorch_model.bin", weights_only=True)
    edit(sd)
    torch.save(sd, tmp_path / "pytorch_model.bin")
    with pytest.raises(am.CheckpointError) as e:
        am.load_checkpoint(str(tmp_path))
    assert needle in str(e.value)


def test_state_dict_names_match_auto_ui(tiny_model):
    keys = set(tiny_model.state_dict())
    for k in ("image_dense.weight", "image_dense.bias", "mha_layer.in_proj_weight", "mha_layer.in_proj_bias",
              "mha_layer.out_proj.weight", "mha_layer.out_proj.bias", "gate_dense.weight", "gate_dense.bias",
              "shared.weight", "lm_head.weight"):
        assert k in keys
    assert tuple(tiny_model.state_dict()["mha_layer.in_proj_weight"].shape) == (3 * 128, 128)


def test_fusion_is_one_token_attention(tiny_model):
    h = torch.randn(2, 5, 128)
    v = torch.randn(2, 64)
    with torch.no_grad():
        fused = tiny_model.fuse(h, v)
        e = tiny_model.image_dense(v)
        w, b = tiny_model.mha_layer.in_proj_weight[256:], tiny_model.mha_layer.in_proj_bias[256:]
        a = tiny_model.mha_layer.out_proj(e @ w.T + b)[:, None, :]
        g = torch.sigmoid(tiny_model.gate_dense(torch.cat([h, a.expand_as(h)], -1)))
        want = (1 - g) * h + g * a
    assert torch.allclose(fused, want, atol=1e-6)


def test_generate_stops_and_strips(tiny_model, tokenizer):
    ids, _ = am.encode_source(tokenizer, am.source_text("Open Chrome", []))
    out = tiny_model.generate_action(torch.tensor([ids]), torch.randn(1, 64), max_new_tokens=5)
    assert out.shape == (1, 6) and int(out[0, 0]) == 0


IGNORED = "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight"


def _edit_bin(model, path, edit):
    am.save_checkpoint(model, str(path), safe=False)
    sd = torch.load(path / "pytorch_model.bin", weights_only=True)
    edit(sd)
    torch.save(sd, path / "pytorch_model.bin")


def test_cross_attention_bias_is_ignored(tiny_model, tmp_path):
    # Some transformers versions saved it; T5 never uses it (Auto-UI's model.py ignores it too).
    _edit_bin(tiny_model, tmp_path, lambda sd: sd.update({IGNORED: torch.randn(32, 4)}))
    _same(tiny_model, am.load_checkpoint(str(tmp_path)))


@pytest.mark.parametrize("key", [
    "decoder.block.1.layer.1.EncDecAttention.relative_attention_bias.weight",  # only block 0's is ignored
    "encoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight",
    IGNORED + "_extra",
])
def test_other_unexpected_keys_still_fail(tiny_model, tmp_path, key):
    _edit_bin(tiny_model, tmp_path, lambda sd: sd.update({IGNORED: torch.randn(32, 4), key: torch.randn(32, 4)}))
    with pytest.raises(am.CheckpointError) as e:
        am.load_checkpoint(str(tmp_path))
    assert f"unexpected keys ['{key}']" in str(e.value)
    assert str(tmp_path / "pytorch_model.bin") in str(e.value)


@pytest.fixture(scope="module")
def tied_model():
    cfg = am.t5_config("tiny", 2112)
    cfg.tie_word_embeddings = True
    torch.manual_seed(4)
    return am.AutoUIModel(cfg, image_dim=64).eval()


def test_tied_safetensors_without_lm_head(tied_model, tmp_path):
    am.save_checkpoint(tied_model, str(tmp_path))
    from safetensors.torch import load_file
    assert "lm_head.weight" not in load_file(tmp_path / "model.safetensors")
    loaded = am.load_checkpoint(str(tmp_path))
    assert loaded.lm_head.weight is loaded.shared.weight
    _same(tied_model, loaded)


def test_tied_bin_with_lm_head_copy(tied_model, tmp_path):
    _edit_bin(tied_model, tmp_path, lambda sd: sd.update({"lm_head.weight": sd["shared.weight"].clone()}))
    loaded = am.load_checkpoint(str(tmp_path))
    assert loaded.lm_head.weight is loaded.shared.weight
    _same(tied_model, loaded)


def test_tied_lm_head_that_differs_fails(tied_model, tmp_path):
    _edit_bin(tied_model, tmp_path, lambda sd: sd.update({"lm_head.weight": sd["shared.weight"] + 1}))
    with pytest.raises(am.CheckpointError, match="lm_head.weight differs from shared.weight"):
        am.load_checkpoint(str(tmp_path))


@pytest.mark.parametrize("config,needle", [
    ("{not json", "config.json: not valid JSON"),
    ('{"model_type": "bert"}', "config.json: model_type 'bert', want t5"),
])
def test_bad_config_names_the_file(tiny_model, tmp_path, config, needle):
    am.save_checkpoint(tiny_model, str(tmp_path))
    (tmp_path / "config.json").write_text(config)
    with pytest.raises(am.CheckpointError, match=needle):
        am.load_checkpoint(str(tmp_path))
