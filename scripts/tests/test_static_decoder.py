"""The static-cache decoder (scripts/static_decoder.py, bundle role decoder_static): derived from
the with-past decoder by scripts.upgrade_bundle, equal to it on calls at different positions
per row, sharing its weights file, placing nothing where ONNX Runtime's CUDA provider would copy
between host and device; bundles without it still work."""

import json
import os
import shutil

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from scripts import bundle_files
from scripts import cuda_capture as cc
from scripts import graph_check as gc
from scripts import static_decoder as sd
from scripts import upgrade_bundle as ub
from scripts.ort_pipeline import Bundle
from scripts.tests.conftest import TESTDATA, TINY

DEFAULT = os.path.join(TESTDATA, "..", "default")
DEC, STATIC = "decoder_with_past_model.onnx", "decoder_static_model.onnx"


def without_static(src: str, dst: str) -> dict:
    """A copy of the bundle src as from before graphs revision 4: no decoder_static."""
    shutil.copytree(src, dst)
    with open(os.path.join(dst, "manifest.json")) as f:
        m = json.load(f)
    if "decoder_static" in m["files"]:
        os.remove(os.path.join(dst, m["files"].pop("decoder_static")["path"]))
        if m["exporter"].get("graphs_revision", 0) >= 4:
            m["exporter"]["graphs_revision"] = 3
    bundle_files.save_manifest(dst, m)
    return m


def _shas(d: str) -> dict:
    return {n: bundle_files.sha256_file(os.path.join(d, n)) for n in os.listdir(d)}


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("static") / "tiny")
    before = without_static(TINY, d)
    shas = _shas(d)
    said = ub.upgrade(d)
    assert said.startswith(f"{d}: {STATIC} added; static vs with-past decoder "), said
    with open(os.path.join(d, "manifest.json")) as f:
        m = json.load(f)
    return d, before, shas, m


def test_upgrade_adds_the_static_graph(upgraded, tiny_manifest):
    d, before, shas, m = upgraded
    assert m["exporter"]["graphs_revision"] == 4
    assert list(m["files"]) == ["vision", "encoder", "fusion", "decoder", "decoder_cross", "decoder_static",
                                "tokenizer"]
    assert {k: v for k, v in m.items() if k not in ("files", "exporter")} == \
        {k: v for k, v in before.items() if k not in ("files", "exporter")}
    assert {r: v for r, v in m["files"].items() if r != "decoder_static"} == before["files"]
    # Every other file byte-identical; one graph file more, no new weights file.
    after = _shas(d)
    assert sorted(after) == sorted(list(shas) + [STATIC])
    assert {n: s for n, s in after.items() if n not in (STATIC, "manifest.json")} == \
        {n: s for n, s in shas.items() if n != "manifest.json"}
    e = m["files"]["decoder_static"]
    p = os.path.join(d, STATIC)
    assert e["path"] == STATIC and e["size"] == os.path.getsize(p) and e["sha256"] == after[STATIC]
    assert e["external_data"] == m["files"]["decoder"]["external_data"]
    if "decoder_static" in tiny_manifest["files"]:  # the committed fixture: the same bytes
        assert e == tiny_manifest["files"]["decoder_static"]


def test_contract(upgraded):
    d, _, _, m = upgraded
    cfg = m["model"]
    H, dkv, L = cfg["num_heads"], cfg["d_kv"], cfg["num_decoder_layers"]
    dyn, e = m["files"]["decoder"], m["files"]["decoder_static"]
    names = [i["name"] for i in e["inputs"]]
    assert names == ["input_ids", "position"] + [i["name"] for i in dyn["inputs"]][1:]
    ins = {i["name"]: i for i in e["inputs"]}
    assert ins["position"] == {"name": "position", "dtype": "int64", "dims": ["batch_size"]}
    assert ins["input_ids"] == {"name": "input_ids", "dtype": "int64",
                                "dims": ["batch_size", "decoder_sequence_length"]}
    for i in range(L):
        for kv in ("key", "value"):
            assert ins[f"past_key_values.{i}.decoder.{kv}"]["dims"] == ["batch_size", H, "cache_length", dkv]
            enc = ins[f"past_key_values.{i}.encoder.{kv}"]
            assert enc["dims"] == ["batch_size", H, "encoder_sequence_length", dkv]
    outs = {o["name"]: o for o in e["outputs"]}
    assert [o["name"] for o in e["outputs"]] == [o["name"] for o in dyn["outputs"]]
    assert outs["logits"] == {o["name"]: o for o in dyn["outputs"]}["logits"]
    assert outs["logits_argmax"] == {"name": "logits_argmax", "dtype": "int64",
                                     "dims": ["batch_size", "decoder_sequence_length"]}
    assert outs["present.1.decoder.value"]["dims"] == ["batch_size", H, "cache_length", dkv]


def test_weights_shared_not_copied(upgraded):
    d, _, _, m = upgraded
    dyn = onnx.load(os.path.join(d, DEC), load_external_data=False).graph
    sta = onnx.load(os.path.join(d, STATIC), load_external_data=False).graph
    ext = {t.name: list(t.external_data) for t in dyn.initializer if t.data_location == TensorProto.EXTERNAL}
    got = {t.name: list(t.external_data) for t in sta.initializer if t.data_location == TensorProto.EXTERNAL}
    assert got == ext and ext  # the same location, offset and length for every external tensor
    rel = [t.name for t in dyn.initializer if t.name.endswith("relative_attention_bias.weight")]
    assert rel and not any(t.name in rel for t in sta.initializer)  # replaced by the bias table
    assert os.path.getsize(os.path.join(d, STATIC)) < 200_000


def test_static_equals_dynamic_at_edges(upgraded):
    """Beyond the upgrade's own check: a cache exactly as long as the last call needs, and
    positions across max_distance within one batch."""
    d, _, _, m = upgraded
    report = {}
    worst = sd.check_static(os.path.join(d, DEC), os.path.join(d, STATIC), m["model"], seed=3, report=report,
                            scenarios=((13, (0, 5)), (140, (127, 128))), calls=(4, 4))
    assert worst < 1e-3 and report["static_present"] < 1e-4, report


def test_check_catches_a_wrong_bias(upgraded, tmp_path, monkeypatch):
    d, _, _, m = upgraded
    bad = str(tmp_path / "bad")
    shutil.copytree(d, bad)
    real = sd.bias_table

    def shifted(weight, nb, md):  # distance n read as n + 1 from 40 on: only far positions differ
        t = real(weight, nb, md)
        t[41:-1] = t[42:]
        return t

    monkeypatch.setattr(sd, "bias_table", shifted)
    sd.write_static(bad, m["model"])
    with pytest.raises(gc.ExportCheckError, match="static_logits .*cache 320, positions \\[140, 300\\]"):
        sd.check_static(os.path.join(bad, DEC), os.path.join(bad, STATIC), m["model"])
    # In an upgrade, the failed check leaves the bundle as it was.
    old = str(tmp_path / "old")
    without_static(TINY, old)
    shas = _shas(old)
    with pytest.raises(ub.UpgradeError, match=f"{STATIC}: static_logits"):
        ub.upgrade(old)
    assert _shas(old) == shas


def test_idempotent(upgraded):
    d, _, _, _ = upgraded
    shas = _shas(d)
    assert ub.main([d]) == 0
    assert ub.upgrade(d) == f"{d}: already format 2 with logits_argmax and {STATIC}; vision graph already capture-safe"
    assert _shas(d) == shas


def test_no_host_device_copies(upgraded):
    d, _, _, _ = upgraded
    dyn = onnx.load(os.path.join(d, DEC), load_external_data=False)
    sta = onnx.load(os.path.join(d, STATIC), load_external_data=False)
    assert cc.memcpy_edges(dyn)  # the with-past decoder's bias is shape math meeting device data
    assert cc.memcpy_edges(sta) == []
    ops = [n.op_type for n in sta.graph.node]
    L = 2
    assert ops.count("ScatterElements") == 2 * L and ops.count("MultiHeadAttention") == 2 * L
    assert "Range" not in ops and "Log" not in ops  # the old bias subgraph is gone


def test_inline_weights_and_plain_attention(tmp_path):
    """models/default: weights inside the graph file, attention as plain ONNX ops (an upgraded
    format-1 bundle): the static file gets its own inline copy and Concat becomes ScatterElements."""
    d = str(tmp_path / "default")
    without_static(DEFAULT, d)
    said = ub.upgrade(d, static_check="short")
    assert f"{STATIC} added" in said
    with open(os.path.join(d, "manifest.json")) as f:
        m = json.load(f)
    e = m["files"]["decoder_static"]
    assert e["external_data"] == [] and "graphs_revision" not in m.get("exporter", {})
    assert e["size"] > 0.9 * m["files"]["decoder"]["size"]
    sta = onnx.load(os.path.join(d, STATIC))
    assert [n.op_type for n in sta.graph.node].count("ScatterElements") == 4
    assert cc.memcpy_edges(sta) == []
    worst = sd.check_static(os.path.join(d, DEC), os.path.join(d, STATIC), m["model"], scenarios=sd.SCENARIOS[:1])
    assert worst < 1e-3


def test_refuses_other_graphs():
    cross = onnx.load(os.path.join(TINY, "decoder_cross_model.onnx"), load_external_data=False)
    with open(os.path.join(TINY, "manifest.json")) as f:
        cfg = json.load(f)["model"]
    with pytest.raises(sd.StaticError):
        sd.make_static(cross, cfg)


def test_bundle_without_static_still_works(tmp_path, golden):
    """Readers do not require the file: the reference pipeline decodes a bundle without it, and
    the variants handle it (copied with an unconverted decoder, dropped with a converted one)."""
    old = str(tmp_path / "old")
    without_static(TINY, old)
    c = golden["cases"][0]
    feats = np.load(os.path.join(TESTDATA, "golden", c["tensors"]["image_features"]))
    got, _ = Bundle(old).greedy(c["input_ids"], feats, c["max_new_tokens"])
    assert got == c["generated_ids"]
    new = str(tmp_path / "new")
    shutil.copytree(old, new)
    ub.upgrade(new, static_check="none")
    with open(os.path.join(new, "manifest.json")) as f:
        m = json.load(f)
    ident = lambda role, src: onnx.load(src)  # noqa: E731
    for graphs, has in (({"vision"}, True), ({"decoder", "decoder_cross"}, False)):
        out = str(tmp_path / f"variant-{has}")
        files = bundle_files.write_variant(new, out, m, graphs, ident, "test")
        assert ("decoder_static" in files) == has
        want = [n for n in os.listdir(new) if n != "manifest.json" and (has or n != STATIC)]
        assert sorted(os.listdir(out)) == sorted(want)
        if has:
            assert files["decoder_static"] == m["files"]["decoder_static"]
