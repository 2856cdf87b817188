"""A small random export into tmp_path: the export's own ORT-vs-PyTorch checks pass, the
manifest describes the files, and a greedy ORT decode equals PyTorch generate."""

import json
import os

import numpy as np
import pytest
import torch

from scripts import autoui_model as am
from scripts import export
from scripts import bundle_files
from scripts import vision as vis
from scripts.ort_pipeline import Bundle
from scripts.tests.conftest import TOKENIZER


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("bundle"))
    tower = vis.random_vision("tiny", 5)
    model = am.random_model("tiny", 2112, 64, seed=5)
    manifest = export.export_bundle(model, tower, TOKENIZER, out, name="t", source="random:tiny:seed=5")
    return out, manifest, model, tower


def test_manifest_matches_files(bundle):
    out, manifest, _, _ = bundle
    with open(os.path.join(out, "manifest.json")) as f:
        assert json.load(f) == manifest
    for role, spec in manifest["files"].items():
        p = os.path.join(out, spec["path"])
        assert os.path.getsize(p) == spec["size"]
        assert bundle_files.sha256_file(p) == spec["sha256"], role
        assert spec.get("external_data", []) == [] or role != "tokenizer"
    assert manifest["format_version"] == 2
    assert list(manifest["files"]) == ["vision", "encoder", "fusion", "decoder", "decoder_cross", "decoder_static",
                                       "tokenizer"]
    dec = manifest["files"]["decoder"]
    assert dec["path"] == "decoder_with_past_model.onnx"
    names = [i["name"] for i in dec["inputs"]]
    assert names[:2] == ["input_ids", "encoder_attention_mask"] and len(names) == 2 + 4 * 2
    assert "use_cache_branch" not in names and "encoder_hidden_states" not in names
    ins = {i["name"]: i for i in dec["inputs"]}
    assert ins["past_key_values.1.decoder.key"]["dims"] == ["batch_size", 4, "past_decoder_sequence_length", 32]
    assert ins["past_key_values.1.encoder.value"]["dims"] == ["batch_size", 4, "encoder_sequence_length", 32]
    assert dec["outputs"][0] == {"name": "logits", "dtype": "float32",
                                 "dims": ["batch_size", "decoder_sequence_length", 2112]}
    assert [o["name"] for o in dec["outputs"][1:-1]] == [f"present.{i}.decoder.{kv}" for i in range(2)
                                                        for kv in ("key", "value")]
    assert dec["outputs"][-1] == {"name": "logits_argmax", "dtype": "int64",
                                  "dims": ["batch_size", "decoder_sequence_length"]}
    cross = manifest["files"]["decoder_cross"]
    assert cross["path"] == "decoder_cross_model.onnx"
    assert cross["inputs"] == [{"name": "encoder_hidden_states", "dtype": "float32",
                                "dims": ["batch_size", "encoder_sequence_length", 128]}]
    assert cross["outputs"] == [{"name": f"present.{i}.encoder.{kv}", "dtype": "float32",
                                 "dims": ["batch_size", 4, "encoder_sequence_length", 32]}
                                for i in range(2) for kv in ("key", "value")]
    assert manifest["files"]["vision"]["outputs"][0]["dims"] == ["batch_size", 64]
    assert manifest["files"]["fusion"]["inputs"][1]["name"] == "attention_mask"
    assert manifest["prompt"]["max_target_tokens"] == 127  # generate(max_length=128) counts the start token
    assert manifest["exporter"]["tokenizer_source"] == "tokenizer.json"


def test_vision_norms_fused(bundle):
    """Every residual Add + LayerNormalization of the tower is one SkipLayerNormalization (the
    export's check already held the fused graph to PyTorch); only the pooled CLS norm stays."""
    import onnx
    out, manifest, _, tower = bundle
    g = onnx.load(os.path.join(out, "vision_model.onnx"), load_external_data=False).graph
    ops = [n.op_type for n in g.node]
    layers = tower.config.num_hidden_layers
    assert ops.count("SkipLayerNormalization") == 2 * layers + 1
    assert ops.count("LayerNormalization") == 1 and ops.count("BiasGelu") == layers
    assert manifest["exporter"]["graphs_revision"] == export.GRAPHS_REVISION


def test_greedy_ort_equals_torch(bundle, tokenizer):
    out, _, model, tower = bundle
    b = Bundle(out)
    ids, _ = am.encode_source(tokenizer, am.source_text("Open the settings app", [am.Action("PRESS_HOME")]))
    feats = torch.randn(64, generator=torch.Generator().manual_seed(1))
    want = model.generate_action(torch.tensor([ids]), feats[None], max_new_tokens=12)[0, 1:].tolist()
    got, logits = b.greedy(ids, feats.numpy(), max_new_tokens=12)
    assert got == want
    assert logits.shape == (len(got), 2112)


def test_check_catches_a_broken_graph(bundle, tmp_path):
    out, manifest, model, tower = bundle
    import shutil
    broken = tmp_path / "b"
    shutil.copytree(out, broken)
    other = am.random_model("tiny", 2112, 64, seed=6)  # different weights than the graphs hold
    with pytest.raises(export.ExportCheckError) as e:
        export.check_bundle(str(broken), other, tower)
    assert "worst |diff|" in str(e.value)


def test_decoder_graphs_hold_each_weight_once(bundle):
    import onnx
    out, manifest, model, _ = bundle
    dec = onnx.load(os.path.join(out, manifest["files"]["decoder"]["path"]))
    cross = onnx.load(os.path.join(out, manifest["files"]["decoder_cross"]["path"]))
    for m in (dec, cross):
        assert not [n.op_type for n in m.graph.node if n.op_type in ("If", "Loop", "Scan")]
        assert all(not n.doc_string for n in m.graph.node)
    cfg = model.config
    # The cross graph: the cross-attention K and V projections of every layer, nothing else.
    kv_params = 2 * cfg.num_decoder_layers * cfg.d_model * cfg.num_heads * cfg.d_kv
    assert sum(np.prod(t.dims) for t in cross.graph.initializer) == kv_params
    # The with-past decoder: everything else (plus a few small constants; the exporter stores
    # equal tensors once, such as a random model's all-ones norms).
    params = sum(p.numel() for p in model.decoder.parameters()) + model.lm_head.weight.numel()
    stored = sum(np.prod(t.dims) for t in dec.graph.initializer)
    assert 0.99 * (params - kv_params) <= stored <= params - kv_params + 1000


def test_weights_in_aligned_external_data(bundle, tokenizer, tmp_path, monkeypatch):
    # Every graph keeps its weights in one .onnx.data file beside it, each tensor at a 4 KiB
    # offset (ONNX Runtime maps them); the manifest lists the file with its hash.
    import onnx
    from onnx import TensorProto
    out, manifest, model, tower = bundle
    for role in ("vision", "encoder", "fusion", "decoder", "decoder_cross"):
        spec = manifest["files"][role]
        ext = spec["external_data"]
        assert [e["path"] for e in ext] == [spec["path"] + ".data"], role
        p = os.path.join(out, ext[0]["path"])
        assert os.path.getsize(p) == ext[0]["size"] and bundle_files.sha256_file(p) == ext[0]["sha256"], role
        g = onnx.load(os.path.join(out, spec["path"]), load_external_data=False).graph
        moved = [t for t in g.initializer if t.data_location == TensorProto.EXTERNAL]
        assert moved and all(int({e.key: e.value for e in t.external_data}["offset"]) % bundle_files.EXTERNAL_ALIGN == 0
                             for t in moved), role
        assert spec["size"] < ext[0]["size"], role
    # Tensors too small to move stay inline; more than EXTERNAL_DATA_BYTES of them is an error.
    monkeypatch.setattr(bundle_files, "EXTERNAL_DATA_BYTES", 0)
    with pytest.raises(ValueError, match="stay inside the protobuf"):
        export.export_bundle(model, tower, TOKENIZER, str(tmp_path / "x"), name="t", source="random:tiny:seed=5",
                             check=False)


def test_unfusable_vision_graph_is_kept(capsys):
    # A graph ORT's ViT fusions do not match is exported as traced, with one line saying so.
    from onnx import TensorProto, helper
    from scripts.onnx_graphs import fuse_vision_norms
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    m = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 17)])
    assert fuse_vision_norms(m, 1, 4) is m
    assert capsys.readouterr().err.strip() == ("export: vision graph left unfused "
                                               "(ORT's optimizer matched no residual + LayerNorm)")
