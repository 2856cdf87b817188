"""The BLIP-2 vision tower: pooled-output semantics and loading from a BLIP-2 directory."""

import json

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import save_file

from scripts import export
from scripts import vision as vis


@pytest.fixture(scope="module")
def tower():
    return vis.random_vision("tiny", 11)


def test_pooled_output_is_cls_normed_twice(tower):
    px = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    m = tower.model
    with torch.no_grad():
        seq = m.encoder(inputs_embeds=m.embeddings(px)).last_hidden_state
        want = m.post_layernorm(m.post_layernorm(seq)[:, 0, :])
        got, ref = tower(px), tower.reference(px)
    assert got.shape == (2, 64)
    assert torch.allclose(ref, want, atol=1e-6)
    assert torch.allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("qkv_bias", [True, False])
def test_cls_only_last_layer_is_the_reference(qkv_bias):
    """forward runs the last layer for the CLS query alone: Hugging Face's pooler_output, for
    the work of one token less nearly a whole layer (FLOPs counted by torch)."""
    from torch.utils.flop_counter import FlopCounterMode
    cfg = vis.vision_config("tiny")
    cfg.qkv_bias, cfg.num_hidden_layers = qkv_bias, 3
    torch.manual_seed(3)
    tower = vis.VisionTower(vis.Blip2VisionModel(cfg)).eval()
    if qkv_bias:  # BLIP-2 initializes q and v biases to zero; make them count
        with torch.no_grad():
            for layer in tower.model.encoder.layers:
                layer.self_attn.qkv.bias.normal_()
    px = torch.randn(3, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    flops = []
    with torch.no_grad():
        for f in (tower, tower.reference):
            with FlopCounterMode(display=False) as fc:
                out = f(px)
            flops.append((out, fc.get_total_flops()))
    (got, pruned), (want, full) = flops
    assert got.shape == want.shape == (3, 64)
    assert torch.allclose(got, want, atol=1e-5, rtol=0)
    # A tiny layer is 257 tokens x (4 d^2 + 2 d ff) MACs plus attention; the last one keeps its
    # k/v projection for every token and the rest for one.
    d, ff, s = 64, 256, 257
    layer = 2 * 3 * s * (4 * d * d + 2 * d * ff + 2 * s * d)
    saved = full - pruned
    assert 0.7 * layer < saved < layer, (saved, layer)


def test_load_from_sharded_blip2_dir(tower, tmp_path):
    # A full BLIP-2 checkpoint: vision weights in one shard, everything else in another.
    export.write_blip2_vision_dir(tower, str(tmp_path))
    (tmp_path / "model.safetensors").unlink()
    vision = {f"vision_model.{k}": v.contiguous() for k, v in tower.model.state_dict().items()}
    other = {"qformer.layer.0.weight": torch.zeros(2), "language_model.lm_head.weight": torch.zeros(3, 2)}
    save_file(vision, str(tmp_path / "model-00001-of-00002.safetensors"))
    save_file(other, str(tmp_path / "model-00002-of-00002.safetensors"))
    wm = {k: "model-00001-of-00002.safetensors" for k in vision}
    wm.update({k: "model-00002-of-00002.safetensors" for k in other})
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": wm}))
    loaded = vis.load_vision(str(tmp_path))
    px = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        assert torch.equal(loaded(px), tower(px))


def test_missing_vision_key_fails(tower, tmp_path):
    export.write_blip2_vision_dir(tower, str(tmp_path))
    sd = {f"vision_model.{k}": v.contiguous() for k, v in tower.model.state_dict().items()
          if k != "post_layernorm.weight"}
    save_file(sd, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match="post_layernorm.weight"):
        vis.load_vision(str(tmp_path))


def test_preprocess_shape_and_range():
    img = Image.new("RGB", (720, 1280), (255, 0, 128))
    px = vis.preprocess(img)
    assert px.shape == (3, 224, 224) and px.dtype == np.float32
    want = (np.array([1.0, 0.0, 128 / 255]) - np.array(vis.MEAN)) / np.array(vis.STD)
    assert np.allclose(px[:, 100, 100], want, atol=1e-5)
