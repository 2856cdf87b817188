"""The fp16 variant of the tiny bundle: float32 graph IO, fp16 weights, the values that leave
fp16's range kept fp32, and its predictions agree with fp32 (ONNX Runtime's CPU provider runs
the fp16 graphs)."""

import json
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from scripts import bundle_files
from scripts import half as h
from scripts.quantize import agreement
from scripts.tests.conftest import GOLDEN, TINY

# Measured on the 23 golden cases (ORT 1.29 CPU, --roles all): greedy 23/23 outputs identical,
# teacher-forced 2115/2115 top-1, max |logit diff| 0.14 (first step 0.05), feature cosine
# >= 0.9999997 on the 6 screens. Bounds leave room for another CPU's fp16 kernels.
MIN_TEACHER_FORCED_TOP1 = 0.99
MIN_GREEDY_IDENTICAL = 21 / 23
MAX_FIRST_STEP_LOGIT_DIFF = 0.5
MIN_FEATURE_COSINE = 0.9999


@pytest.fixture(scope="module")
def halved(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("tiny-fp16"))
    return out, h.half_bundle(TINY, out, roles=h.ALL_ROLES, steps=8)


def _graph(out, manifest, role):
    return onnx.load(os.path.join(out, manifest["files"][role]["path"]))


def test_manifest_and_io(halved):
    out, manifest = halved
    with open(os.path.join(TINY, "manifest.json")) as f:
        fp32 = json.load(f)
    assert manifest["precision"] == "fp16"
    assert manifest["half"]["graphs"] == ["vision", "encoder", "fusion", "decoder", "decoder_cross", "decoder_static"]
    same = {k: v for k, v in fp32.items() if k not in ("files", "precision")}
    assert {k: v for k, v in manifest.items() if k not in ("files", "precision", "half")} == same
    for role, spec in manifest["files"].items():
        for f in [spec] + spec.get("external_data", []):
            p = os.path.join(out, f["path"])
            assert os.path.getsize(p) == f["size"] and bundle_files.sha256_file(p) == f["sha256"], role
        if role == "tokenizer":
            continue
        ins, outs = bundle_files.graph_io(_graph(out, manifest, role))
        assert (ins, outs) == (fp32["files"][role]["inputs"], fp32["files"][role]["outputs"]), role
        weights = [t for t in _graph(out, manifest, role).graph.initializer if len(t.dims) == 2 and min(t.dims) >= 32]
        assert weights and all(t.data_type == TensorProto.FLOAT16 for t in weights), role
    # the fp16 tower (casts, the same ops) is still one the engine may capture
    assert manifest["files"]["vision"].get("capture_safe") is True


def test_overflowing_values_stay_fp32(halved):
    # T5's relative-position buckets take log(0) = -inf and its mask is (1 - m) x -3.4e38: both
    # are out of fp16's range, so their nodes stay fp32, with no fp16 round trip between them.
    out, manifest = halved
    blocked = manifest["half"]["fp32_nodes"]
    assert blocked["vision"] == [] and blocked["decoder_cross"] == []
    assert blocked["encoder"] and blocked["decoder"]
    for role in ("encoder", "decoder"):
        g = _graph(out, manifest, role).graph
        big = [n for n in g.node if n.op_type == "Constant" and any(
            a.t.data_type == TensorProto.FLOAT and a.t.dims == [] and numpy_helper.to_array(a.t) < -1e38
            for a in n.attribute)]
        assert big, role
        producer = {o: n for n in g.node for o in n.output}
        for n in g.node:
            if n.op_type == "Cast" and n.attribute[0].i == TensorProto.FLOAT and n.input[0] in producer:
                src = producer[n.input[0]]
                assert not (src.op_type == "Cast" and src.attribute[0].i == TensorProto.FLOAT16), (role, n.name)


def test_attention_stays_fp32(halved, tmp_path):
    # The decoder's MultiHeadAttention nodes (fp16: ~9x slower on CUDA) stay fp32 by default, and
    # convert when --fp32-ops is empty.
    out, manifest = halved
    assert manifest["half"]["fp32_ops"] == ["MultiHeadAttention"]
    g = _graph(out, manifest, "decoder").graph
    mha = [n for n in g.node if n.op_type == "MultiHeadAttention"]
    assert mha and all(n.name in manifest["half"]["fp32_nodes"]["decoder"] for n in mha)
    values = {v.name: v.type.tensor_type.elem_type for v in list(g.value_info) + list(g.input) + list(g.output)}
    init = {t.name: t.data_type for t in g.initializer}
    for n in mha:
        assert all(values.get(x, init.get(x, TensorProto.FLOAT)) == TensorProto.FLOAT for x in n.input if x), n.name
    # the static decoder converts with it: attention and the surgery's cache writes stay fp32
    static = _graph(out, manifest, "decoder_static").graph
    kept = set(manifest["half"]["fp32_nodes"]["decoder_static"])
    assert all(n.name in kept for n in static.node if n.op_type in ("MultiHeadAttention", "ScatterElements"))
    assert manifest["files"]["decoder_static"]["external_data"][0]["path"] == "decoder_static_model.onnx.data"
    bare = h.half_bundle(TINY, str(tmp_path / "bare"), roles=("decoder",), steps=4, fp32_ops=())
    assert not any(n in bare["half"]["fp32_nodes"]["decoder"] for n in (m.name for m in mha))


def test_blocked_nodes_read_or_write_large_values():
    g = helper.make_graph([helper.make_node("Mul", ["x", "c"], ["y"], name="big"),
                           helper.make_node("Relu", ["y"], ["z"], name="reads_big"),
                           helper.make_node("Relu", ["x"], ["w"], name="small")], "g", [], [])
    ranges = {"x": 1.0, "c": 2.0, "y": 1e5, "z": 0.0, "w": 1.0}
    assert h.blocked_nodes(g, ranges, h.FP16_MAX / 8) == ["big", "reads_big"]


def test_drop_cast_round_trips():
    f = TensorProto.FLOAT
    g = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["x16"], to=TensorProto.FLOAT16),
         helper.make_node("Cast", ["x16"], ["x32"], to=f),
         helper.make_node("Relu", ["x32"], ["y"]),
         helper.make_node("Cast", ["x"], ["k16"], to=TensorProto.FLOAT16),
         helper.make_node("Relu", ["k16"], ["k"])],
        "g", [helper.make_tensor_value_info("x", f, [2])],
        [helper.make_tensor_value_info("y", f, [2]), helper.make_tensor_value_info("k", TensorProto.FLOAT16, [2])])
    assert h.drop_cast_round_trips(g) == 1
    assert [(n.op_type, list(n.input)) for n in g.node] == [("Relu", ["x"]), ("Cast", ["x"]), ("Relu", ["k16"])]


def test_converted_graph_runs_on_cpu():
    # ONNX Runtime's CPU provider has fp16 kernels for what the bundle's graphs use; a plain
    # MatMul + Softmax through the converter gives the fp32 result to fp16 rounding.
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    f = TensorProto.FLOAT
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Softmax", ["m"], ["y"])],
                          "g", [helper.make_tensor_value_info("x", f, [4, 16])],
                          [helper.make_tensor_value_info("y", f, [4, 8])], initializer=[numpy_helper.from_array(w, "w")])
    model = onnx.shape_inference.infer_shapes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    half = h.half_model(model)
    assert [t.data_type for t in half.graph.initializer] == [TensorProto.FLOAT16]
    x = rng.standard_normal((4, 16)).astype(np.float32)
    sess = ort.InferenceSession(half.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"x": x})[0]
    m = x @ w
    want = np.exp(m - m.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    assert got.dtype == np.float32 and np.max(np.abs(got - want)) < 5e-3


def test_agrees_with_fp32(halved):
    out, _ = halved
    r = h.agreement(TINY, out, GOLDEN)
    assert r["cases"] == 23
    assert r["first_step"]["max_abs_diff"] <= MAX_FIRST_STEP_LOGIT_DIFF, r
    assert r["teacher_forced"]["top1_agreement"] >= MIN_TEACHER_FORCED_TOP1, r
    assert r["greedy"]["identical_outputs"] >= MIN_GREEDY_IDENTICAL - 1e-9, r
    assert r["screens"]["n"] == 6 and r["screens"]["feature_cosine_min"] >= MIN_FEATURE_COSINE, r


def test_vision_only_by_default(tmp_path):
    m = h.half_bundle(TINY, str(tmp_path / "v"), steps=2)
    assert m["half"]["graphs"] == ["vision"]
    with open(os.path.join(TINY, "manifest.json")) as f:
        fp32 = json.load(f)
    for role in ("encoder", "fusion", "decoder", "decoder_cross", "decoder_static", "tokenizer"):
        assert m["files"][role] == fp32["files"][role], role


def test_refusals(halved, tmp_path, capsys):
    out, _ = halved
    with pytest.raises(h.HalfError, match="want an fp32 bundle"):
        h.half_bundle(out, str(tmp_path / "again"))
    with pytest.raises(h.HalfError, match="role 'decoder_cross'"):
        h.half_bundle(TINY, str(tmp_path / "x"), roles=("decoder_cross",))
    assert h.main(["--in", TINY, "--out", TINY]) == 1
    assert capsys.readouterr().err.strip() == "half: --out must differ from --in"


def test_deterministic(halved, tmp_path):
    out, manifest = halved
    assert h.half_bundle(TINY, str(tmp_path / "again"), roles=h.ALL_ROLES, steps=8) == manifest


def test_runs_agreement(tmp_path, capsys):
    def run(name, rows):
        d = tmp_path / name
        d.mkdir()
        (d / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return str(d)
    row = lambda step, t, raw: {"episode_id": "e", "step_id": step, "action_type": t, "raw": raw}
    a = run("a", [row(0, "TYPE", "x"), row(1, "DUAL_POINT", "y"), row(2, "PRESS_BACK", "z")])
    b = run("b", [row(0, "TYPE", "x"), row(1, "DUAL_POINT", "y2"), row(3, "PRESS_BACK", "z")])
    assert h.runs_agreement(a, b) == {"steps": 2, "only_in_one": 2, "identical_outputs": 1, "same_action_type": 2}
    assert h.main(["--diff", a, os.path.join(b, "predictions.jsonl")]) == 0
    assert json.loads(capsys.readouterr().out)["identical_outputs"] == 1
    assert h.main(["--diff", a]) == 2


def test_fp16_peak_ignores_blocked_nodes():
    g = helper.make_graph([helper.make_node("Mul", ["x", "c"], ["y"], name="big"),
                           helper.make_node("Relu", ["x"], ["w"], name="small")], "g", [], [])
    assert h.fp16_peak(g, {"x": 3.0, "c": 2.0, "y": 1e5, "w": 2.5}, ["big"]) == 3.0


def test_fp16_cache(tmp_path):
    # --fp16-cache: the decoder graphs' K/V cross their boundary in fp16, with no cast of a whole
    # cache at a call, and the outputs are bit for bit those of the same conversion with float32 IO
    # (the values were fp16 inside already).
    io32 = h.half_bundle(TINY, str(tmp_path / "io32"), roles=h.ALL_ROLES, steps=4, fp32_ops=())
    io16 = h.half_bundle(TINY, str(tmp_path / "io16"), roles=h.ALL_ROLES, steps=4, fp32_ops=(), fp16_cache=True)
    assert io16["half"]["cache"] == "float16" and io32["half"]["cache"] == "float32"
    for role in ("decoder", "decoder_cross", "decoder_static"):
        for t in io16["files"][role]["inputs"] + io16["files"][role]["outputs"]:
            assert t["dtype"] == ("float16" if h.is_cache(t["name"]) else _dtype(io32, role, t["name"])), (role, t)
        g = onnx.load(str(tmp_path / "io16" / io16["files"][role]["path"]), load_external_data=False).graph
        ends = {v.name for v in list(g.input) + list(g.output) if h.is_cache(v.name)}
        casts = [n.name for n in g.node if n.op_type == "Cast" and (n.input[0] in ends or n.output[0] in ends)]
        assert not casts, (role, casts)
    got = agreement(str(tmp_path / "io32"), str(tmp_path / "io16"))
    assert got["teacher_forced"]["max_abs_diff"] == 0 and got["greedy"]["identical_outputs"] == 1.0
    with pytest.raises(h.HalfError, match="decoder converted"):
        h.half_bundle(TINY, str(tmp_path / "vision"), roles=("vision",), fp16_cache=True)


def _dtype(manifest, role, name):
    return next(t["dtype"] for t in manifest["files"][role]["inputs"] + manifest["files"][role]["outputs"]
                if t["name"] == name)
