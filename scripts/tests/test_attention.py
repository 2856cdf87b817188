"""The attention variants: each com.microsoft.MultiHeadAttention node of the decoder as MatMul,
Add, Softmax and MatMul gives what the fused node and a numpy reference give; the vision tower's
attention fused into that op gives the plain one's features; the tiny bundle's variant decodes
the golden cases as the original does, and it converts to fp16 whole."""

import json
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from scripts import half as h
from scripts import attention as pa
from scripts.quantize import agreement
from scripts.tests.conftest import TINY, graph_ops

H, D, B, S, P, E = 2, 8, 2, 3, 4, 5  # heads, model width, batch, new positions, past, encoder positions


def _mha_model(cross: bool, scale=0.5, extra=None) -> onnx.ModelProto:
    f = TensorProto.FLOAT
    d = D // H
    ins = [helper.make_tensor_value_info("q", f, [B, S, D])]
    if cross:
        ins += [helper.make_tensor_value_info(n, f, [B, H, E, d]) for n in ("k", "v")]
        ins += [helper.make_tensor_value_info("bias", f, [B, 1, S, E])]
        node_in, outs = ["q", "k", "v", "", "", "bias"], ["out"]
    else:
        ins += [helper.make_tensor_value_info(n, f, [B, S, D]) for n in ("k", "v")]
        ins += [helper.make_tensor_value_info("bias", f, [1, H, S, P + S])]
        ins += [helper.make_tensor_value_info(n, f, [B, H, P, d]) for n in ("past_k", "past_v")]
        node_in, outs = ["q", "k", "v", "", "", "bias", "past_k", "past_v"], ["out", "present_k", "present_v"]
    attrs = {"num_heads": H, **({"scale": scale} if scale is not None else {}), **(extra or {})}
    node = helper.make_node("MultiHeadAttention", node_in, outs, name="mha", domain="com.microsoft", **attrs)
    g = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info(o, f, None) for o in outs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])


def _feeds(cross: bool, rng) -> dict:
    d = D // H
    x = {"q": rng.standard_normal((B, S, D))}
    if cross:
        x |= {"k": rng.standard_normal((B, H, E, d)), "v": rng.standard_normal((B, H, E, d)),
              # the second row's last two encoder positions padded
              "bias": np.broadcast_to(np.where(np.arange(E) < E - 2, 0, -1e9) * np.array([0, 1]).reshape(B, 1, 1, 1),
                                      (B, 1, S, E))}
    else:
        x |= {"k": rng.standard_normal((B, S, D)), "v": rng.standard_normal((B, S, D)),
              "bias": rng.standard_normal((1, H, S, P + S)),
              "past_k": rng.standard_normal((B, H, P, d)), "past_v": rng.standard_normal((B, H, P, d))}
    return {k: np.asarray(v, np.float32) for k, v in x.items()}


def _reference(x: dict, cross: bool, scale: float) -> list:
    """Attention in numpy, from the op's definition."""
    def heads(t):
        return t.reshape(B, -1, H, D // H).transpose(0, 2, 1, 3)
    q = heads(x["q"])
    if cross:
        k, v = x["k"], x["v"]
    else:
        k = np.concatenate([x["past_k"], heads(x["k"])], 2)
        v = np.concatenate([x["past_v"], heads(x["v"])], 2)
    s = q @ k.transpose(0, 1, 3, 2) * scale + x["bias"]
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    out = (w @ v).transpose(0, 2, 1, 3).reshape(B, S, D)
    return [out] if cross else [out, k, v]


def _run(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.parametrize("cross", [False, True])
def test_rewrite_matches_fused_and_numpy(cross):
    feeds = _feeds(cross, np.random.default_rng(3))
    fused = _run(_mha_model(cross), feeds)
    model, n = pa.plain_attention(_mha_model(cross))
    assert n == 1 and not any(x.op_type == "MultiHeadAttention" for x in model.graph.node)
    plain_ops = {"Reshape", "Transpose", "Concat", "MatMul", "Mul", "Add", "Softmax"}
    assert {x.op_type for x in model.graph.node} <= plain_ops
    plain = _run(model, feeds)
    for got, want, ref in zip(plain, fused, _reference(feeds, cross, 0.5)):
        assert got.shape == ref.shape
        np.testing.assert_allclose(got, ref, atol=1e-5)
        np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("extra,why", [
    ({"unidirectional": 1}, "unidirectional"),
    ({"scale": None}, "no scale attribute"),
])
def test_uncovered_nodes_refused(extra, why):
    extra = dict(extra)  # the parameter is shared between runs
    scale = extra.pop("scale", 0.5)
    with pytest.raises(pa.AttentionError, match=why):
        pa.plain_attention(_mha_model(False, scale=scale, extra=extra))


def test_key_padding_mask_refused():
    model = _mha_model(True)
    model.graph.node[0].input[4] = "mask"
    with pytest.raises(pa.AttentionError, match="key padding mask"):
        pa.plain_attention(model)


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("tiny-plain"))
    return out, pa.attention_bundle(TINY, out, decoder="plain", vision="fused")


def test_attention_bundle(plain):
    out, manifest = plain
    with open(os.path.join(TINY, "manifest.json")) as f:
        fused = json.load(f)
    assert manifest["attention"]["nodes"] == {"decoder": 4, "decoder_static": 4, "vision": 2}
    assert (manifest["attention"]["decoder"], manifest["attention"]["vision"]) == ("plain", "fused")
    assert manifest["precision"] == "fp32"
    for role, spec in manifest["files"].items():
        if role == "tokenizer":
            continue
        assert (spec["inputs"], spec["outputs"]) == (fused["files"][role]["inputs"], fused["files"][role]["outputs"])
        ops = graph_ops(out, manifest, role)
        if role == "vision":  # fused: no Softmax left, what only it read gone
            assert ops.count("MultiHeadAttention") == 2 and "Softmax" not in ops and "Gather" in ops
            # The first layer's packed projection splits into q, k, v; the last (CLS-only) one's
            # into k, v, its query the CLS token's own projection.
            g = onnx.load(os.path.join(out, spec["path"]), load_external_data=False).graph
            assert sorted(len(n.output) for n in g.node if n.op_type == "Split") == [2, 3]
        else:
            assert "MultiHeadAttention" not in ops, role
        if role not in pa.DECODER_GRAPHS + ("vision",):  # copied as they were
            assert spec["sha256"] == fused["files"][role]["sha256"], role
    # the golden cases decode as with the fused attention
    got = agreement(TINY, out)
    assert got["greedy"]["identical_outputs"] == 1.0
    assert got["teacher_forced"]["top1_agreement"] == 1.0 and got["teacher_forced"]["max_abs_diff"] < 1e-4
    with pytest.raises(pa.AttentionError, match="already rewritten"):
        pa.attention_bundle(out, out + "-again", decoder="plain")
    with pytest.raises(pa.AttentionError, match="want decoder plain"):
        pa.attention_bundle(TINY, out + "-nothing")


def test_attention_bundle_in_fp16(plain, tmp_path):
    # With no fused op left, scripts.half converts the attention too; the calibration keeps the
    # mask's and the position buckets' nodes fp32 as before. Bounds as scripts/tests/test_half.py's.
    out, _ = plain
    half = h.half_bundle(out, str(tmp_path / "fp16"), roles=h.ALL_ROLES, steps=8, fp32_ops=())
    assert half["attention"]["tool"] == "scripts.attention"
    g = onnx.load(str(tmp_path / "fp16" / half["files"]["decoder"]["path"])).graph
    kept = set(half["half"]["fp32_nodes"]["decoder"])
    softmax = [n for n in g.node if n.op_type == "Softmax"]
    assert len(softmax) == 4 and not any(n.name in kept for n in softmax)
    vision = onnx.load(str(tmp_path / "fp16" / half["files"]["vision"]["path"])).graph
    assert not half["half"]["fp32_nodes"]["vision"] and sum(n.op_type == "MultiHeadAttention" for n in vision.node) == 2
    got = agreement(TINY, str(tmp_path / "fp16"))
    assert got["greedy"]["identical_outputs"] >= 21 / 23
    assert got["teacher_forced"]["top1_agreement"] >= 0.99


def test_vision_pattern_refused():
    # a Softmax the rewrite does not know (here: no scale Mul before it) is an error, not a skip
    f = TensorProto.FLOAT
    g = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], "g",
                          [helper.make_tensor_value_info("x", f, [1, 2, 3, 3])],
                          [helper.make_tensor_value_info("y", f, None)])
    with pytest.raises(pa.AttentionError, match="not the BLIP-2 attention pattern"):
        pa.fuse_vision_attention(helper.make_model(g), heads=2, hidden=4)


def test_failed_check_writes_nothing(tmp_path, monkeypatch):
    # a variant that fails its checks is not written: --out is not created, nothing is left beside it
    def differs(*args, **kw):
        raise pa.AttentionError("logits: plain attention differs from the fused by up to 1")
    monkeypatch.setattr(pa, "check_decoder", differs)
    out = tmp_path / "bad"
    with pytest.raises(pa.AttentionError, match="bad not written"):
        pa.attention_bundle(TINY, str(out), decoder="plain")
    assert os.listdir(tmp_path) == []


def test_failed_run_writes_nothing(tmp_path, monkeypatch):
    # ORT refusing a rewritten graph (its own exception, not the tool's) writes nothing either
    def refused(*args, **kw):
        raise RuntimeError("ORT: Load model failed")
    monkeypatch.setattr(pa, "check_decoder", refused)
    out = tmp_path / "bad"
    with pytest.raises(RuntimeError, match="Load model failed"):
        pa.attention_bundle(TINY, str(out), decoder="plain")
    assert os.listdir(tmp_path) == []


def test_vision_rewrite_of_unnamed_nodes():
    # each attention keeps its own output when the traced nodes have no names
    path = os.path.join(TINY, "vision_model.onnx")
    model = onnx.load(path)
    for n in model.graph.node:
        n.name = ""
    plain = onnx.load(path)
    fused, count = pa.fuse_vision_attention(model, heads=4, hidden=64)
    mha = [n for n in fused.graph.node if n.op_type == "MultiHeadAttention"]
    assert count == 2 and len({n.output[0] for n in mha}) == 2
    x = {"pixel_values": np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)}
    np.testing.assert_allclose(_run(fused, x)[0], _run(plain, x)[0], atol=1e-5)
