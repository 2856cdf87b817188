"""Bundle format 2's decoder split: scripts.peers.merged_decoder (the optimum merged layout built
from a format-2 bundle) and scripts.upgrade_bundle (a format-1 bundle, merged decoder, upgraded in
place). The format-1 bundles here are made from the committed tiny bundle with the merged
builder: the If layout the exporter wrote before format 2."""

import json
import os
import re
import shutil

import numpy as np
import onnx
import pytest

from scripts import bundle_files
from scripts import graph_check
from scripts import quantize as q
from scripts import upgrade_bundle as ub
from scripts.ort_pipeline import Bundle
from scripts.peers import merged_decoder as md
from scripts.tests.conftest import GOLDEN, TESTDATA, TINY



def make_format1(src: str, dst: str) -> dict:
    """A copy of the format-2 bundle src as format 1: decoder_model_merged.onnx, no decoder_cross
    (nor decoder_static)."""
    shutil.copytree(src, dst)
    with open(os.path.join(dst, "manifest.json")) as f:
        m = json.load(f)
    if "decoder_static" in m["files"]:
        os.remove(os.path.join(dst, m["files"].pop("decoder_static")["path"]))
    for role in ("decoder", "decoder_cross"):
        for f in [m["files"][role]] + m["files"][role].get("external_data", []):
            os.remove(os.path.join(dst, f["path"]))
    name = "decoder_model_merged.onnx"
    md.write(src, os.path.join(dst, name))
    entry = bundle_files.file_entry(dst, name)
    entry["external_data"] = []
    entry["inputs"], entry["outputs"] = bundle_files.graph_io(onnx.load(os.path.join(dst, name)))
    m["files"] = {r: (entry if r == "decoder" else v) for r, v in m["files"].items() if r != "decoder_cross"}
    m["format_version"] = 1
    if "quantization" in m:
        m["quantization"]["graphs"].remove("decoder_cross")
    with open(os.path.join(dst, "manifest.json"), "w") as f:
        json.dump(m, f, indent=2)
    return m


# ---------------------------------------------------------------- merged builder

def _merged_feed(b, ids, fused, mask, cached, past):
    feed = {"input_ids": np.asarray([ids], np.int64), "encoder_attention_mask": mask,
            "encoder_hidden_states": fused[None], "use_cache_branch": np.array([cached])}
    for i in range(b.layers):
        for part in ("decoder", "encoder"):
            for kv in ("key", "value"):
                feed[f"past_key_values.{i}.{part}.{kv}"] = past[f"{i}.{part}.{kv}"]
    return feed


def test_merged_decoder_matches_the_two_graphs(tmp_path, tiny_manifest):
    import onnxruntime as ort
    path = str(tmp_path / "decoder_model_merged.onnx")
    assert md.main([TINY, path]) == 0
    m = onnx.load(path)
    onnx.checker.check_model(m)
    assert [n.op_type for n in m.graph.node] == ["If"]
    names = [i.name for i in m.graph.input]
    assert names[:3] == ["input_ids", "encoder_attention_mask", "encoder_hidden_states"]
    assert names[-1] == "use_cache_branch" and "past_key_values.1.encoder.value" in names
    # Weights stored once, in the outer graph: the two graphs' initializers, nothing more.
    assert all(not a.g.initializer for a in m.graph.node[0].attribute)
    two = [onnx.load(os.path.join(TINY, tiny_manifest["files"][r]["path"])) for r in ("decoder", "decoder_cross")]
    assert sum(np.prod(t.dims) for t in m.graph.initializer) <= sum(np.prod(t.dims) for g in two
                                                                   for t in g.graph.initializer)
    assert os.path.getsize(path) < 1.05 * sum(bundle_files.graph_bytes(tiny_manifest["files"][r]) for r in ("decoder", "decoder_cross"))

    b = Bundle(TINY)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    out_names = [o.name for o in sess.get_outputs()]
    rng = np.random.default_rng(3)
    fused = rng.standard_normal((11, tiny_manifest["model"]["d_model"])).astype(np.float32)
    mask = np.ones((1, 11), np.int64)
    empty = np.zeros((1, b.heads, 0, b.d_kv), np.float32)
    # First call (else branch): the past inputs are not read; the cross K/V come out as presents.
    past = {f"{i}.{part}.{kv}": empty for i in range(b.layers) for part in ("decoder", "encoder") for kv in ("key", "value")}
    got = dict(zip(out_names, sess.run(None, _merged_feed(b, [0, 9, 4], fused, mask, False, past))))
    want, state = b.decoder_step([0, 9, 4], fused, mask, None)
    np.testing.assert_allclose(got["logits"][0], want, atol=1e-5, rtol=0)
    for i in range(b.layers):
        for j, kv in enumerate(("key", "value")):
            np.testing.assert_allclose(got[f"present.{i}.encoder.{kv}"], state[1][2 * i + j], atol=1e-6, rtol=0)
            past[f"{i}.decoder.{kv}"] = got[f"present.{i}.decoder.{kv}"]
            past[f"{i}.encoder.{kv}"] = got[f"present.{i}.encoder.{kv}"]
    # Cached call (then branch): cross K/V come back empty (optimum layout), the caller keeps its own.
    got = dict(zip(out_names, sess.run(None, _merged_feed(b, [17, 5], fused, mask, True, past))))
    want, state = b.decoder_step([17, 5], fused, mask, state)
    np.testing.assert_allclose(got["logits"][0], want, atol=1e-5, rtol=0)
    assert got["present.0.encoder.key"].shape == (0, b.heads, 1, b.d_kv)
    np.testing.assert_allclose(got["present.1.decoder.value"], state[0][3], atol=1e-6, rtol=0)


def test_merged_decoder_refuses_other_formats(tmp_path, capsys):
    shutil.copytree(TINY, tmp_path / "b")
    mp = tmp_path / "b" / "manifest.json"
    m = json.loads(mp.read_text())
    m["format_version"] = 1
    mp.write_text(json.dumps(m))
    assert md.main([str(tmp_path / "b"), str(tmp_path / "out.onnx")]) == 1
    assert "bundle format 1, want 2" in capsys.readouterr().err
    assert md.main([]) == 2


# ---------------------------------------------------------------- upgrade

def test_upgrade_format1_bundle(tmp_path, tiny_manifest, golden):
    cases = golden["cases"]
    old = str(tmp_path / "old")
    make_format1(TINY, old)
    assert Bundle(TINY).manifest["format_version"] == 2
    with pytest.raises(ValueError, match="scripts.upgrade_bundle"):
        Bundle(old)  # the reference pipeline runs format 2 only
    from scripts.peers import ort_python
    with pytest.raises(SystemExit, match=re.escape(f"bundle format 1, want 2 (python -m scripts.upgrade_bundle {old})")):
        ort_python.Runner(old, 1)
    assert ub.main([old]) == 0
    with open(os.path.join(old, "manifest.json")) as f:
        m = json.load(f)
    assert m["format_version"] == 2
    assert list(m["files"]) == ["vision", "encoder", "fusion", "decoder", "decoder_cross", "decoder_static",
                                "tokenizer"]
    assert not os.path.exists(os.path.join(old, "decoder_model_merged.onnx"))
    assert sorted(os.listdir(old)) == sorted(os.listdir(TINY))
    for role, spec in m["files"].items():
        for f in [spec] + spec.get("external_data", []):
            p = os.path.join(old, f["path"])
            assert os.path.getsize(p) == f["size"] and bundle_files.sha256_file(p) == f["sha256"], role
        # The same files and interface as the exporter's format-2 bundle.
        for k in ("path", "inputs", "outputs"):
            assert spec.get(k) == tiny_manifest["files"][role].get(k), (role, k)
        assert [e["path"] for e in spec.get("external_data", [])] == \
            [e["path"] for e in tiny_manifest["files"][role].get("external_data", [])], role
    assert {k: v for k, v in m.items() if k != "files"} == {k: v for k, v in tiny_manifest.items() if k != "files"}

    # Greedy tokens of the reference pipeline: the upgraded bundle = the exported one = the goldens.
    up, ref = Bundle(old), Bundle(TINY)
    for c in cases[:4]:
        feats = np.load(os.path.join(TESTDATA, "golden", c["tensors"]["image_features"]))
        got, logits_up = up.greedy(c["input_ids"], feats, c["max_new_tokens"])
        want, logits_ref = ref.greedy(c["input_ids"], feats, c["max_new_tokens"])
        assert got == want == c["generated_ids"], c["id"]
        assert np.max(np.abs(logits_up - logits_ref)) < 1e-3, c["id"]

    # Upgrading again: a no-op.
    before = {n: bundle_files.sha256_file(os.path.join(old, n)) for n in os.listdir(old)}
    assert ub.upgrade(old) == (f"{old}: already format 2 with logits_argmax and decoder_static_model.onnx; "
                               "vision graph already capture-safe")
    assert {n: bundle_files.sha256_file(os.path.join(old, n)) for n in os.listdir(old)} == before


def test_upgrade_int8_bundle_stays_int8(tmp_path):
    int8 = str(tmp_path / "int8")
    q.quantize_bundle(TINY, int8)
    old = str(tmp_path / "old")
    make_format1(int8, old)
    with open(os.path.join(old, "manifest.json")) as f:
        assert json.load(f)["quantization"]["graphs"] == ["vision", "encoder", "decoder"]
    ub.upgrade(old)
    with open(os.path.join(old, "manifest.json")) as f:
        m = json.load(f)
    assert m["precision"] == "int8" and m["quantization"]["graphs"] == ["vision", "encoder", "decoder", "decoder_cross"]
    assert "decoder_static" not in m["files"]  # none for an int8 decoder
    for role in ("decoder", "decoder_cross"):
        g = onnx.load(os.path.join(old, m["files"][role]["path"])).graph
        assert any(n.op_type == "DynamicQuantizeMatMul" for n in g.node), role
    with open(GOLDEN) as f:
        c = json.load(f)["cases"][0]
    feats = np.load(os.path.join(TESTDATA, "golden", c["tensors"]["image_features"]))
    got, logits_up = Bundle(old).greedy(c["input_ids"], feats, 20)
    want, logits_ref = Bundle(int8).greedy(c["input_ids"], feats, 20)
    assert got == want and np.max(np.abs(logits_up - logits_ref)) < 1e-3


@pytest.mark.parametrize("text,message", [
    ('{"format": "autoui-bundle", "format_version": 3}', "format_version 3; this tool upgrades 1 to 2"),
    ('{"format": "autoui-bundle"}', "format_version None"),
    ("not json", "manifest.json: "),
    ("[1, 2]", "not an autoui bundle manifest"),
    ('{"format": "other", "format_version": 1}', "not an autoui bundle manifest"),
])
def test_upgrade_refuses(tmp_path, capsys, text, message):
    d = tmp_path / "b"
    d.mkdir()
    (d / "manifest.json").write_text(text)
    assert ub.main([str(d)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("upgrade_bundle: ") and message in err[0], err
    assert os.listdir(d) == ["manifest.json"] and (d / "manifest.json").read_text() == text


def test_failed_check_leaves_the_bundle_as_it_was(tmp_path, monkeypatch):
    old = str(tmp_path / "old")
    make_format1(TINY, old)
    before = {n: bundle_files.sha256_file(os.path.join(old, n)) for n in os.listdir(old)}
    monkeypatch.setitem(graph_check.TOLERANCES, "decoder", {"atol": -1.0, "rtol": 0.0})  # nothing passes
    with pytest.raises(ub.UpgradeError, match="against the merged decoder"):
        ub.upgrade(old)
    assert {n: bundle_files.sha256_file(os.path.join(old, n)) for n in os.listdir(old)} == before


def without_argmax(src: str, dst: str) -> dict:
    """A copy of the format-2 bundle src as the exporter wrote it before graphs revision 3: the
    decoder without the logits_argmax output (its ArgMax node dropped, weights untouched), no
    decoder_static."""
    shutil.copytree(src, dst)
    with open(os.path.join(dst, "manifest.json")) as f:
        m = json.load(f)
    if "decoder_static" in m["files"]:
        os.remove(os.path.join(dst, m["files"].pop("decoder_static")["path"]))
    e = m["files"]["decoder"]
    path = os.path.join(dst, e["path"])
    g = onnx.load(path, load_external_data=False)
    outs = [o for o in g.graph.output if o.name != "logits_argmax"]
    nodes = [n for n in g.graph.node if list(n.output) != ["logits_argmax"]]
    assert len(outs) == len(g.graph.output) - 1 and len(nodes) == len(g.graph.node) - 1
    del g.graph.output[:], g.graph.node[:]
    g.graph.output.extend(outs)
    g.graph.node.extend(nodes)
    onnx.save_model(g, path)
    new = bundle_files.file_entry(dst, e["path"])
    e.update(sha256=new["sha256"], size=new["size"])
    e["outputs"] = [o for o in e["outputs"] if o["name"] != "logits_argmax"]
    m["exporter"]["graphs_revision"] = 2
    with open(os.path.join(dst, "manifest.json"), "w") as f:
        json.dump(m, f, indent=2)
    return m


DEC = "decoder_with_past_model.onnx"


def test_upgrade_adds_argmax(tmp_path, tiny_manifest):
    """A format-2 bundle from before graphs revision 3 gains the argmax output in place (and the
    static decoder): the same decoder file as the exporter's, the external weights untouched,
    revision 2 -> 3 -> 4; again: a no-op."""
    old = str(tmp_path / "old")
    m = without_argmax(TINY, old)
    data = {x["path"]: x["sha256"] for x in m["files"]["decoder"]["external_data"]}
    assert ub.main([old]) == 0
    with open(os.path.join(old, "manifest.json")) as f:
        up = json.load(f)
    assert up["exporter"]["graphs_revision"] == 4
    assert {x["path"]: bundle_files.sha256_file(os.path.join(old, x["path"])) for x in up["files"]["decoder"]["external_data"]} == data
    # The exporter's manifest but for the decoder file's own bytes (node names differ), and so
    # the static graph's derived from it.
    want = json.loads(json.dumps(tiny_manifest))
    want["exporter"]["graphs_revision"] = 4  # 5 (the vision tower's CLS-only last layer) is the exporter's alone
    for m in (up, want):
        for role in ("decoder", "decoder_static"):
            for k in ("sha256", "size"):
                m["files"][role].pop(k)
    assert up == want
    got = [(n.op_type, list(n.input), list(n.output)) for n in onnx.load(os.path.join(old, DEC), load_external_data=False).graph.node]
    assert got == [(n.op_type, list(n.input), list(n.output))
                   for n in onnx.load(os.path.join(TINY, DEC), load_external_data=False).graph.node]
    before = {n: bundle_files.sha256_file(os.path.join(old, n)) for n in os.listdir(old)}
    assert ub.upgrade(old) == (f"{old}: already format 2 with logits_argmax and decoder_static_model.onnx; "
                               "vision graph already capture-safe")
    assert {n: bundle_files.sha256_file(os.path.join(old, n)) for n in os.listdir(old)} == before
    # An older revision is not claimed to be revision 3.
    older = str(tmp_path / "older")
    without_argmax(TINY, older)
    with open(os.path.join(older, "manifest.json")) as f:
        m = json.load(f)
    del m["exporter"]["graphs_revision"]
    with open(os.path.join(older, "manifest.json"), "w") as f:
        json.dump(m, f)
    assert ub.main([older]) == 0
    with open(os.path.join(older, "manifest.json")) as f:
        assert "graphs_revision" not in json.load(f)["exporter"]
