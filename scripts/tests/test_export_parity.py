"""A small random export into tmp_path: the export's own ORT-vs-PyTorch checks pass, the
manifest describes the files, and a greedy ORT decode equals PyTorch generate."""

import json
import os

import numpy as np
import pytest
import torch

from scripts import autoui_model as am
from scripts import export
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
        assert export.sha256_file(p) == spec["sha256"], role
        assert spec.get("external_data", []) == [] or role != "tokenizer"
    dec = manifest["files"]["decoder"]
    names = [i["name"] for i in dec["inputs"]]
    assert names[:3] == ["input_ids", "encoder_attention_mask", "encoder_hidden_states"]
    assert names[-1] == "use_cache_branch" and "past_key_values.1.encoder.value" in names
    assert dec["outputs"][0] == {"name": "logits", "dtype": "float32",
                                 "dims": ["batch_size", "decoder_sequence_length", 2112]}
    assert manifest["files"]["vision"]["outputs"][0]["dims"] == ["batch_size", 64]
    assert manifest["files"]["fusion"]["inputs"][1]["name"] == "attention_mask"
    assert manifest["prompt"]["max_target_tokens"] == 127  # generate(max_length=128) counts the start token
    assert manifest["exporter"]["tokenizer_source"] == "tokenizer.json"


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


def test_merged_decoder_shares_weights(bundle):
    import onnx
    out, _, model, _ = bundle
    m = onnx.load(os.path.join(out, "decoder_model_merged.onnx"))
    assert [n.op_type for n in m.graph.node] == ["If"]
    outer = sum(np.prod(t.dims) for t in m.graph.initializer)
    branch_local = 0
    for a in m.graph.node[0].attribute:
        branch_local += sum(np.prod(t.dims) for t in a.g.initializer)
    # Every weight is stored once: the merged graph holds no more than the decoder's parameters
    # (the cross-attention K/V projections live only in the no-past branch).
    params = sum(p.numel() for p in model.decoder.parameters()) + model.lm_head.weight.numel()
    assert outer + branch_local <= params + 1000
    assert outer > 10 * branch_local
    assert all(not n.doc_string for a in m.graph.node[0].attribute for n in a.g.node)


def test_external_data_bundle(bundle, tokenizer, tmp_path, monkeypatch):
    # Force the >2 GB path on a tiny model: every graph gets one .onnx.data file.
    _, _, model, tower = bundle
    monkeypatch.setattr(export, "EXTERNAL_DATA_BYTES", 0)
    out = str(tmp_path / "ext")
    manifest = export.export_bundle(model, tower, TOKENIZER, out, name="t", source="random:tiny:seed=5", check=False)
    for role in ("vision", "encoder", "fusion", "decoder"):
        ext = manifest["files"][role]["external_data"]
        assert [e["path"] for e in ext] == [manifest["files"][role]["path"] + ".data"]
        assert export.sha256_file(os.path.join(out, ext[0]["path"])) == ext[0]["sha256"]
    ids, _ = am.encode_source(tokenizer, am.source_text("Open Chrome", []))
    feats = np.ones(64, np.float32)
    want = model.generate_action(torch.tensor([ids]), torch.from_numpy(feats)[None], max_new_tokens=6)[0, 1:].tolist()
    assert Bundle(out).greedy(ids, feats, max_new_tokens=6)[0] == want
