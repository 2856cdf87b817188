"""The skip-norm variant: T5's residual Adds and the RMS norms after them as
SkipSimplifiedLayerNormalization give the exported graphs' outputs bit for bit on the CPU, the
tiny bundle's variant decodes the golden cases as the original does, and it converts to fp16 on
top of the attention variant."""

import json
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from scripts import attention as pa
from scripts import half as h
from scripts import skip_norm as sn
from scripts.quantize import agreement
from scripts.tests.conftest import TINY, graph_ops


@pytest.fixture(scope="module")
def fused(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("tiny-sn"))
    return out, sn.skip_norm_bundle(TINY, out)


def test_skip_norm_bundle(fused):
    out, manifest = fused
    with open(os.path.join(TINY, "manifest.json")) as f:
        orig = json.load(f)
    # 2 layers: the encoder's 5 norms and the decoder's 7, all but the first (on the embeddings)
    # after a residual Add
    assert manifest["skip_norm"]["nodes"] == {"encoder": 4, "decoder": 6, "decoder_static": 6}
    for role, spec in manifest["files"].items():
        if role == "tokenizer":
            continue
        assert (spec["inputs"], spec["outputs"]) == (orig["files"][role]["inputs"], orig["files"][role]["outputs"])
        if role in sn.GRAPHS:
            ops = graph_ops(out, manifest, role)
            # the first norm back as the export's operators; no RMS norm's ReduceMean but its
            assert ops.count(sn.FUSED) == manifest["skip_norm"]["nodes"][role] and ops.count("ReduceMean") == 1, role
            assert "SimplifiedLayerNormalization" not in ops and ops.count("Add") < graph_ops(TINY, orig, role).count("Add")
            onnx.checker.check_model(os.path.join(out, spec["path"]))
        else:
            assert spec["sha256"] == orig["files"][role]["sha256"], role
    got = agreement(TINY, out)
    assert got["greedy"]["identical_outputs"] == 1.0
    assert got["teacher_forced"]["top1_agreement"] == 1.0 and got["teacher_forced"]["max_abs_diff"] == 0.0
    with pytest.raises(sn.SkipNormError, match="already fused"):
        sn.skip_norm_bundle(out, out + "-again")


def test_on_attention_variant_in_fp16(tmp_path):
    # the GPU's bundle: the attention variant, its norms fused, fp16 everywhere with an fp16 cache;
    # the same agreement as the attention variant's fp16 without the fusion (the bounds of
    # scripts/tests/test_attention.py)
    attn, fused, half = (str(tmp_path / d) for d in ("attn", "sn", "fp16"))
    pa.attention_bundle(TINY, attn, decoder="plain", vision="fused")
    sn.skip_norm_bundle(attn, fused)
    m = h.half_bundle(fused, half, roles=h.ALL_ROLES, steps=8, fp32_ops=(), fp16_cache=True)
    assert m["attention"]["tool"] == "scripts.attention" and m["skip_norm"]["tool"] == "scripts.skip_norm"
    assert graph_ops(half, m, "decoder").count(sn.FUSED) == 6
    got = agreement(TINY, half)
    assert got["greedy"]["identical_outputs"] >= 21 / 23
    assert got["teacher_forced"]["top1_agreement"] >= 0.99


@pytest.mark.parametrize("opset", [17, 18])
def test_lone_norm_expanded(opset):
    # a norm with no residual Add before it runs as the export's operators, to the op's value
    # (ReduceMean's axes an attribute before opset 18, an input from it)
    f = TensorProto.FLOAT
    w = np.linspace(0.5, 1.5, 8, dtype=np.float32)
    node = helper.make_node("SimplifiedLayerNormalization", ["x", "w"], ["y"], name="n", axis=-1, epsilon=1e-6)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", f, [2, 3, 8])],
                          [helper.make_tensor_value_info("y", f, [2, 3, 8])], [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    sn._expand_lone_norms(m.graph, opset)
    onnx.checker.check_model(m, full_check=True)
    x = np.random.default_rng(3).standard_normal((2, 3, 8)).astype(np.float32)
    y = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    want = w * x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    bad = helper.make_node("SimplifiedLayerNormalization", ["x", "w"], ["y"], name="n", axis=1)
    with pytest.raises(sn.SkipNormError, match="does not cover"):
        sn._expand_lone_norms(helper.make_graph([bad], "g", [], []), opset)


def test_failed_check_writes_nothing(tmp_path, monkeypatch):
    def differs(*args, **kw):
        raise sn.SkipNormError("encoder: the fused norms differ from the plain ones by up to 1")
    monkeypatch.setattr(sn, "check_encoder", differs)
    out = tmp_path / "bad"
    with pytest.raises(sn.SkipNormError, match="bad not written"):
        sn.skip_norm_bundle(TINY, str(out))
    assert os.listdir(tmp_path) == []


def test_unreadable_manifest(tmp_path):
    # a missing or corrupt manifest is the tool's one-line error, not a traceback
    with pytest.raises(sn.SkipNormError, match="manifest.json"):
        sn.skip_norm_bundle(str(tmp_path / "none"), str(tmp_path / "out"))
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "manifest.json").write_text("{")
    with pytest.raises(sn.SkipNormError, match="manifest.json"):
        sn.skip_norm_bundle(str(tmp_path / "bad"), str(tmp_path / "out"))
    assert sn.main(["--in", str(tmp_path / "bad"), "--out", str(tmp_path / "out")]) == 1


def test_refuses_fp16(tmp_path):
    half = str(tmp_path / "fp16")
    h.half_bundle(TINY, half, roles=("vision",), steps=4)
    with pytest.raises(sn.SkipNormError, match="want an fp32 bundle"):
        sn.skip_norm_bundle(half, str(tmp_path / "out"))
