"""The merged-projection variant: a self-attention's Q, K and V projections as one MatMul, one
Transpose and one Split give the separate projections' heads bit for bit on the CPU, ORT's own
optimizer keeps the kernels it saves, the tiny bundle's variant decodes the golden cases as the
original does, and the GPU's bundle (attention, norms, merge, fp16) converts whole."""

import collections
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from scripts import attention as pa
from scripts import cuda_capture as cc
from scripts import half as h
from scripts import merge_qkv as mq
from scripts import skip_norm as sn
from scripts.bundle_files import read_manifest
from scripts.quantize import agreement
from scripts.tests.conftest import TINY, graph_ops

H, D = 2, 3  # heads, head width


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("tiny-plain") / "b")
    pa.attention_bundle(TINY, out, decoder="plain")
    return out


@pytest.fixture(scope="module")
def merged(plain, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("tiny-mq") / "b")
    return out, mq.merge_bundle(plain, out)


def _optimized_ops(path, tmp_path) -> collections.Counter:
    """The op types of the graph at path after ORT's session optimizer (CPU, extended level)."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return collections.Counter(n.op_type for n in onnx.load(so.optimized_model_filepath, load_external_data=False).graph.node)


def test_merge_bundle(plain, merged, tmp_path):
    out, manifest = merged
    assert manifest["merge_qkv"]["groups"] == {"decoder": 2, "decoder_static": 2}  # one a layer
    orig = read_manifest(plain)
    for role, spec in manifest["files"].items():
        if role == "tokenizer":
            continue
        assert (spec["inputs"], spec["outputs"]) == (orig["files"][role]["inputs"], orig["files"][role]["outputs"])
        if role in mq.GRAPHS:
            ops, was = collections.Counter(graph_ops(out, manifest, role)), collections.Counter(graph_ops(plain, orig, role))
            assert (ops["MatMul"], ops["Split"]) == (was["MatMul"] - 4, 2), role
            onnx.checker.check_model(os.path.join(out, spec["path"]))
            # what the GPU runs: ORT's optimizer must not move each Transpose back past the Split
            opt, opt_was = (_optimized_ops(os.path.join(d, spec["path"]), tmp_path) for d in (out, plain))
            assert (opt["Transpose"], opt["MatMul"]) == (opt_was["Transpose"] - 4, opt_was["MatMul"] - 4), role
        else:
            assert spec["sha256"] == orig["files"][role]["sha256"], role
    got = agreement(TINY, out)
    assert got["greedy"]["identical_outputs"] == 1.0
    assert got["teacher_forced"]["top1_agreement"] == 1.0 and got["teacher_forced"]["max_abs_diff"] < 1e-4
    with pytest.raises(mq.MergeError, match="already merged"):
        mq.merge_bundle(out, str(tmp_path / "again"))


def test_gpu_bundle_in_fp16(tmp_path):
    # attention plain, norms fused, projections merged, fp16 everywhere with an fp16 cache: the
    # bounds of the same bundle without the merge (scripts/tests/test_skip_norm.py)
    attn, fused, merged, half = (str(tmp_path / d) for d in ("attn", "sn", "mq", "fp16"))
    pa.attention_bundle(TINY, attn, decoder="plain", vision="fused")
    sn.skip_norm_bundle(attn, fused)
    mq.merge_bundle(fused, merged)
    m = h.half_bundle(merged, half, roles=h.ALL_ROLES, steps=8, fp32_ops=(), fp16_cache=True)
    assert m["merge_qkv"]["tool"] == "scripts.merge_qkv" and m["skip_norm"]["tool"] == "scripts.skip_norm"
    ops = graph_ops(half, m, "decoder_static")
    assert ops.count("Split") == 2 and ops.count(sn.FUSED) == 6
    # captured under --cuda-graph: the Split of equal parts passes its pointers by value, and the
    # new shapes and sizes are host inputs, so nothing stages in host memory or crosses the bus
    static = onnx.load(os.path.join(half, m["files"]["decoder_static"]["path"]), load_external_data=False)
    assert cc.host_staged(static) == [] and cc.memcpy_edges(static) == []
    got = agreement(TINY, half)
    assert got["greedy"]["identical_outputs"] >= 21 / 23
    assert got["teacher_forced"]["top1_agreement"] >= 0.99


def test_refuses_fused_attention(tmp_path, capsys):
    # the export's decoder hands q, k, v to MultiHeadAttention unsplit: nothing of this shape to merge
    with pytest.raises(mq.MergeError, match="must be plain"):
        mq.merge_bundle(TINY, str(tmp_path / "out"))
    assert os.listdir(tmp_path) == []
    assert mq.main(["--in", TINY, "--out", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err.startswith("merge_qkv: decoder: no projections")


def _graph(shared_weight: bool) -> onnx.ModelProto:
    """x [2, 4, 5] through three projections split into heads (the third's weight also read by a
    MatMul of its own when shared_weight), a fourth projection whose Reshape is not into heads,
    and a fifth reading another input."""
    f = TensorProto.FLOAT
    rng = np.random.default_rng(1)
    inits, nodes, outs = [numpy_helper.from_array(np.array([0, 0, H, -1], np.int64), "heads")], [], []
    inits.append(numpy_helper.from_array(np.array([0, -1], np.int64), "flat"))
    for i, src in enumerate(["x", "x", "x", "x", "y"]):
        inits.append(numpy_helper.from_array(rng.standard_normal((5, H * D)).astype(np.float32), f"w{i}"))
        nodes.append(helper.make_node("MatMul", [src, f"w{i}"], [f"p{i}"], name=f"mm{i}"))
        if i == 3:
            nodes.append(helper.make_node("Reshape", [f"p{i}", "flat"], [f"o{i}"]))
        else:
            nodes += [helper.make_node("Reshape", [f"p{i}", "heads"], [f"r{i}"]),
                      helper.make_node("Transpose", [f"r{i}"], [f"o{i}"], perm=[0, 2, 1, 3])]
        outs.append(helper.make_tensor_value_info(f"o{i}", f, [2, 4 * H * D] if i == 3 else [2, H, 4, D]))
    if shared_weight:
        nodes.append(helper.make_node("MatMul", ["y", "w2"], ["o5"]))
        outs.append(helper.make_tensor_value_info("o5", f, [2, 4, H * D]))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, f, [2, 4, 5]) for n in ("x", "y")], outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("shared_weight", [False, True])
def test_merge_against_numpy(shared_weight):
    m = _graph(shared_weight)
    w = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    got, count = mq.merge_qkv(m)
    assert count == 1
    onnx.checker.check_model(got)
    ops = collections.Counter(n.op_type for n in got.graph.node)
    assert (ops["MatMul"], ops["Split"], ops["Transpose"]) == (3 + shared_weight, 1, 2)
    names = {t.name for t in got.graph.initializer}
    assert ("w2" in names) == shared_weight and not {"w0", "w1"} & names and {"w3", "w4"} <= names
    rng = np.random.default_rng(2)
    x, y = (rng.standard_normal((2, 4, 5)).astype(np.float32) for _ in range(2))
    res = ort.InferenceSession(got.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x, "y": y})
    for i, r in enumerate(res[:5]):
        p = (y if i == 4 else x) @ w[f"w{i}"]
        want = p.reshape(2, -1) if i == 3 else p.reshape(2, 4, H, D).transpose(0, 2, 1, 3)
        np.testing.assert_allclose(r, want, rtol=1e-5, atol=1e-5)
    if shared_weight:
        np.testing.assert_allclose(res[5], y @ w["w2"], rtol=1e-5, atol=1e-5)
