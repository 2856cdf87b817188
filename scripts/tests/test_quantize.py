"""The int8 variant of the tiny bundle: graphs quantized (If branches included), IO and
manifest unchanged except precision/files, and its predictions agree with fp32."""

import json
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from scripts import export
from scripts import quantize as q
from scripts.tests.conftest import TESTDATA

TINY = os.path.join(TESTDATA, "tiny")
GOLDEN = os.path.join(TESTDATA, "golden", "cases.json")

# Measured on the 23 golden cases (ORT 1.29, AVX2 CPU, 7-bit weights, int8 embeddings): first
# step 23/23 with max |logit diff| 0.93 (logits span about -40..60), teacher-forced 2111/2115
# = 99.8%, greedy 22/23 outputs identical and 99.8% of tokens. The tiny model's top-2 margin is below the
# int8 noise at a few positions, so exact agreement is not a property to test. The integer
# arithmetic is exact, so these numbers do not depend on the CPU's int8 kernel. Full-range
# 8-bit weights on AVX2 (VPMADDUBSW saturation) gave max |diff| 6.8 and 19/23 identical
# outputs: the bounds below catch that, a wrong scale axis or an unquantized/broken branch.
MIN_FIRST_STEP_TOP1 = 0.9          # at most 2 of 23 first tokens may flip
MAX_FIRST_STEP_LOGIT_DIFF = 3.0
MIN_TEACHER_FORCED_TOP1 = 0.98     # the no-cache branch over whole targets
MIN_GREEDY_IDENTICAL = 20 / 23     # exercises the cache branch
MIN_GREEDY_TOKEN_AGREEMENT = 0.98


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("tiny-int8"))
    return out, q.quantize_bundle(TINY, out)


def _ops(graph: onnx.GraphProto, counts: dict) -> dict:
    for n in graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                _ops(a.g, counts)
    return counts


def test_quantize_weight_per_channel():
    w = np.array([[0.5, -0.5, 0.0], [-2.0, 0.125, 0.0]], np.float32)
    qw, scale = q.quantize_weight(w, 63)
    assert qw.dtype == np.int8 and scale.shape == (3,)
    np.testing.assert_allclose(scale, [2 / 63, 0.5 / 63, 1.0])
    assert qw[:, 0].tolist() == [16, -63] and qw[:, 1].tolist() == [-63, 16] and qw[:, 2].tolist() == [0, 0]
    assert np.max(np.abs(qw * scale - w)) <= np.max(scale) / 2 + 1e-7


def test_outer_scope_weight_quantized_once():
    # Two If branches read one outer initializer: it becomes one int8 tensor in the outer graph.
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4), "W")
    def branch(name):
        return helper.make_graph([helper.make_node("MatMul", ["x", "W"], [name + "_y"])], name, [],
                                 [helper.make_tensor_value_info(name + "_y", TensorProto.FLOAT, None)])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=branch("a"), else_branch=branch("b"))],
                          "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                                helper.make_tensor_value_info("c", TensorProto.BOOL, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], initializer=[w])
    m, stats = q.quantize_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert stats == {"matmuls": 2, "weights": 1, "embeddings": 0, "params": 12}
    assert sorted(t.name for t in m.graph.initializer) == ["W_int8", "W_scale"]
    for a in m.graph.node[0].attribute:
        assert [n.op_type for n in a.g.node] == ["DynamicQuantizeMatMul"] and not a.g.initializer


def test_graphs_quantized_and_io_unchanged(quantized):
    out, manifest = quantized
    with open(os.path.join(TINY, "manifest.json")) as f:
        fp32 = json.load(f)
    for role in ("vision", "encoder", "decoder", "fusion"):
        m = onnx.load(os.path.join(out, manifest["files"][role]["path"]))
        ins, outs = export._io(m)
        assert (ins, outs) == (fp32["files"][role]["inputs"], fp32["files"][role]["outputs"]), role
        ops = _ops(m.graph, {})
        if role == "fusion":
            assert "DynamicQuantizeMatMul" not in ops
        else:
            # Left as MatMul: only activation x activation products (attention).
            assert ops.get("DynamicQuantizeMatMul", 0) > 0, role
            assert ops.get("MatMul", 0) == {"vision": 4, "encoder": 4, "decoder": 16}[role], (role, ops)
            assert manifest["files"][role]["size"] < fp32["files"][role]["size"], role
            assert ops.get("GatherBlockQuantized", 0) == {"vision": 0, "encoder": 1, "decoder": 2}[role], (role, ops)
    dec = onnx.load(os.path.join(out, "decoder_model_merged.onnx"))
    assert [n.op_type for n in dec.graph.node] == ["If"]
    # Shared by both branches, so stored once in the outer graph; no fp32 matrix is left there.
    assert sum(t.data_type == TensorProto.INT8 for t in dec.graph.initializer) == 19
    assert [t.name for t in dec.graph.initializer if t.data_type == TensorProto.UINT8] == ["stack.embed_tokens.weight_uint8"]
    assert not [t.name for t in dec.graph.initializer if t.data_type == TensorProto.FLOAT and len(t.dims) == 2
                and min(t.dims) >= 64]


def test_embedding_roundtrip():
    w = np.random.default_rng(0).standard_normal((300, 48)).astype(np.float32)
    qw, scale = q.quantize_embedding(w, 16)
    assert qw.dtype == np.uint8 and scale.shape == (300, 3)
    back = (qw.astype(np.float32) - 128).reshape(300, 3, 16) * scale[..., None]
    assert np.max(np.abs(back.reshape(300, 48) - w)) <= np.max(scale) / 2 + 1e-6


def test_manifest(quantized):
    out, manifest = quantized
    with open(os.path.join(TINY, "manifest.json")) as f:
        fp32 = json.load(f)
    with open(os.path.join(out, "manifest.json")) as f:
        assert json.load(f) == manifest
    assert manifest["precision"] == "int8" and manifest["quantization"]["graphs"] == ["vision", "encoder", "decoder"]
    same = {k: v for k, v in fp32.items() if k not in ("files", "precision")}
    assert {k: v for k, v in manifest.items() if k not in ("files", "precision", "quantization")} == same
    assert manifest["files"].keys() == fp32["files"].keys()
    for role, spec in manifest["files"].items():
        p = os.path.join(out, spec["path"])
        assert os.path.getsize(p) == spec["size"] and export.sha256_file(p) == spec["sha256"], role
        assert {k: v for k, v in spec.items() if k not in ("sha256", "size")} == \
            {k: v for k, v in fp32["files"][role].items() if k not in ("sha256", "size")}, role
    assert manifest["files"]["tokenizer"] == fp32["files"]["tokenizer"]
    assert manifest["files"]["fusion"] == fp32["files"]["fusion"]


def test_refuses_int8_input(quantized, tmp_path):
    out, _ = quantized
    with pytest.raises(q.QuantizeError, match="want an fp32 bundle"):
        q.quantize_bundle(out, str(tmp_path / "again"))


def test_agrees_with_fp32_on_golden_cases(quantized):
    out, _ = quantized
    r = q.agreement(TINY, out, GOLDEN)
    assert r["cases"] == 23
    assert r["first_step"]["top1_agreement"] >= MIN_FIRST_STEP_TOP1, r
    assert r["first_step"]["max_abs_diff"] <= MAX_FIRST_STEP_LOGIT_DIFF, r
    assert r["teacher_forced"]["top1_agreement"] >= MIN_TEACHER_FORCED_TOP1, r
    assert r["greedy"]["identical_outputs"] >= MIN_GREEDY_IDENTICAL - 1e-9, r
    assert r["greedy"]["token_agreement"] >= MIN_GREEDY_TOKEN_AGREEMENT, r


def test_deterministic(quantized, tmp_path):
    out, manifest = quantized
    assert q.quantize_bundle(TINY, str(tmp_path / "again")) == manifest
