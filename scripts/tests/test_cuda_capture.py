"""scripts.cuda_capture: which device nodes stage kernel arguments in host memory (a CUDA-graph
replay under ONNX Runtime 1.29 reads them from recycled host memory), the rewrite of Concat as
Pads and Adds (the same values: outputs compared with ONNX Runtime's Concat; a -0.0 becomes +0.0), and the
manifest mark the engine captures the vision tower by."""

import os
import shutil

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from scripts import cuda_capture as cc
from scripts import graph_check as gc
from scripts import upgrade_bundle as ub
from scripts.bundle_files import file_entry, read_manifest, save_manifest
from scripts.tests.conftest import TINY


def _model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _f(name, dims):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def _run(model, feed):
    import onnxruntime as ort
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)


def test_concat_rewritten_same_values():
    # three inputs of runtime lengths along a middle axis, one of them negative-indexed
    for axis in (1, -2):
        m = _model([helper.make_node("Concat", ["a", "b", "c"], ["y"], name="cat", axis=axis),
                    helper.make_node("Relu", ["y"], ["z"])],
                   [_f("a", ["n", "p", 4]), _f("b", ["n", "q", 4]), _f("c", ["n", "r", 4])], [_f("z", ["n", "t", 4])])
        assert cc.host_staged(m) == ["cat (Concat)"]
        new, n = cc.stage_free(m)
        assert n == 1 and cc.host_staged(new) == [] and cc.memcpy_edges(new) == []
        assert not any(x.op_type == "Concat" and x.name == "cat" for x in new.graph.node)
        onnx.checker.check_model(new, full_check=True)
        rng = np.random.default_rng(3)
        for p, q, r in ((1, 256, 2), (5, 1, 0)):
            feed = {"a": rng.standard_normal((2, p, 4)).astype(np.float32),
                    "b": rng.standard_normal((2, q, 4)).astype(np.float32),
                    "c": rng.standard_normal((2, r, 4)).astype(np.float32)}
            feed["a"][0, 0, 0] = -0.0
            want, got = _run(m, feed)[0], _run(new, feed)[0]
            assert got.shape == want.shape
            assert np.array_equal(got, want)


def test_what_is_staged():
    shape = helper.make_node("Shape", ["x"], ["s"])
    # shape arithmetic runs on the host: its Concat stages nothing
    host_cat = helper.make_node("Concat", ["s", "one"], ["s2"], name="shape_cat", axis=0)
    equal = helper.make_node("Split", ["x"], ["e0", "e1"], name="equal", axis=2)
    unequal = helper.make_node("Split", ["x", "sizes"], ["u0", "u1"], name="unequal", axis=2)
    scatter = helper.make_node("ScatterND", ["x", "idx", "upd"], ["sc"], name="scatter")
    inits = [numpy_helper.from_array(np.array([1], np.int64), "one"),
             numpy_helper.from_array(np.array([1, 3], np.int64), "sizes"),
             numpy_helper.from_array(np.zeros((1, 1), np.int64), "idx"),
             numpy_helper.from_array(np.zeros((1, 2, 4), np.float32), "upd")]
    m = _model([shape, host_cat, equal, unequal, scatter], [_f("x", [2, 2, 4])],
               [helper.make_tensor_value_info("s2", TensorProto.INT64, None)] + [_f(o, None) for o in
                                                                             ("e0", "e1", "u0", "u1", "sc")], inits)
    assert cc.host_staged(m) == ["unequal (Split)", "scatter (ScatterND)"]
    with pytest.raises(cc.CaptureError, match="unequal"):
        cc.stage_free(m)


def test_bundle_graphs():
    vision = onnx.load(os.path.join(TINY, "vision_model.onnx"), load_external_data=False)
    static = onnx.load(os.path.join(TINY, "decoder_static_model.onnx"), load_external_data=False)
    assert cc.host_staged(vision) == [] and cc.memcpy_edges(vision) == []
    assert cc.host_staged(static) == [] and cc.memcpy_edges(static) == []
    assert read_manifest(TINY)["files"]["vision"]["capture_safe"] is True
    entry = {}
    cc.mark("vision", entry, vision)
    assert entry == {"capture_safe": True}
    cc.mark("encoder", entry, vision)  # not a role the engine captures by the mark
    assert entry == {}


def test_upgrade_marks_vision(tmp_path):
    """A vision graph with [CLS; patches] as a Concat (the exporter's before revision 6, rebuilt
    here from the committed one) is rewritten by scripts.upgrade_bundle, checked against the graph
    as it was, and marked; a second run leaves it as it is."""
    b = str(tmp_path / "b")
    shutil.copytree(TINY, b)
    path = os.path.join(b, "vision_model.onnx")
    m = onnx.load(path)
    g = m.graph
    pads = [n for n in g.node if n.name.startswith(cc.ADDED_PREFIX) and n.op_type == "Pad"]
    out = next(n for n in g.node if n.name.startswith(cc.ADDED_PREFIX) and n.op_type == "Add"
               and not n.output[0].startswith(cc.ADDED_PREFIX)).output[0]
    cat = helper.make_node("Concat", [p.input[0] for p in pads], [out], name="/embeddings/Concat_2", axis=1)
    keep = [n for n in g.node if not n.name.startswith(cc.ADDED_PREFIX)]
    first = next(i for i, n in enumerate(g.node) if n.name.startswith(cc.ADDED_PREFIX))
    del g.node[:]
    g.node.extend(keep[:first] + [cat] + keep[first:])
    del g.initializer[:]
    g.initializer.extend(t for t in onnx.load(path).graph.initializer if not t.name.startswith(cc.ADDED_PREFIX))
    onnx.save_model(m, path)
    manifest = read_manifest(b)
    manifest["files"]["vision"].pop("capture_safe")
    manifest["exporter"]["graphs_revision"] = 5
    from scripts.bundle_files import file_entry
    manifest["files"]["vision"].update({k: v for k, v in file_entry(b, "vision_model.onnx").items() if k != "path"})
    save_manifest(b, manifest)
    old = gc.session(path).run(None, {"pixel_values": np.ones((2, 3, 224, 224), np.float32)})[0]

    said = ub.upgrade(b, static_check="none")
    assert "1 Concat as Pads and Adds; worst |diff| vs the graph as it was 0, capture_safe" in said
    up = read_manifest(b)
    assert up["files"]["vision"]["capture_safe"] is True and up["exporter"]["graphs_revision"] == 6
    assert up["files"]["vision"]["sha256"] == file_entry(b, "vision_model.onnx")["sha256"]
    new = gc.session(path).run(None, {"pixel_values": np.ones((2, 3, 224, 224), np.float32)})[0]
    assert np.array_equal(new, old)
    assert ub.upgrade(b).endswith("vision graph already capture-safe")


def test_what_is_not_rewritten():
    """Concats of types ORT's CUDA Pad and Add do not both take stay refused; two Concats of one
    name get tags of their own."""
    for elem in (TensorProto.INT64, TensorProto.BOOL):
        m = _model([helper.make_node("Concat", ["a", "b"], ["y"], name="cat", axis=0),
                    helper.make_node("Identity", ["y"], ["z"])],
                   [helper.make_tensor_value_info("a", elem, [2]), helper.make_tensor_value_info("b", elem, [3])],
                   [helper.make_tensor_value_info("z", elem, [5])])
        assert cc.host_staged(m) == ["cat (Concat)"]
        with pytest.raises(cc.CaptureError, match="only float"):
            cc.stage_free(m)
    m = _model([helper.make_node("Concat", ["a", "b"], ["y"], name="cat", axis=1),
                helper.make_node("Concat", ["y", "a"], ["z"], name="cat", axis=1)],
               [_f("a", [2, "p"]), _f("b", [2, "q"])], [_f("z", [2, "t"])])
    new, n = cc.stage_free(m)
    assert n == 2
    onnx.checker.check_model(new, full_check=True)
    feed = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones((2, 1), np.float32)}
    # (ORT itself refuses the original: its node names repeat)
    want = np.concatenate([feed["a"], feed["b"], feed["a"]], axis=1)
    assert np.array_equal(_run(new, feed)[0], want)
    old = _model([helper.make_node("Concat", ["a", "b"], ["y"], name="cat", axis=1)],
                 [_f("a", [2, "p"]), _f("b", [2, "q"])], [_f("y", [2, "t"])])
    old.opset_import[0].version = 10
    with pytest.raises(cc.CaptureError, match="opset 10"):
        cc.stage_free(old)


def test_batched_matmul_staged_only_when_broadcast():
    def mm(a, b):
        return _model([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")], [_f("a", a), _f("b", b)],
                      [_f("y", None)])
    assert cc.host_staged(mm(["n", 4, 1, 16], ["m", "h", 16, "s"])) == []  # attention: batch dims equal at run time
    assert cc.host_staged(mm(["n", 8, 16], [16, 4])) == []  # a projection: one GEMM
    assert cc.host_staged(mm([2, 1, 8, 16], [1, 4, 16, 8])) == ["mm (MatMul)"]  # a broadcast: pointer arrays
    assert cc.host_staged(mm([2, 8, 16], [3, 2, 16, 8])) == ["mm (MatMul)"]


def test_int8_tower_not_marked():
    m = _model([helper.make_node("DynamicQuantizeMatMul", ["x", "w", "s"], ["y"], name="q", domain="com.microsoft")],
               [_f("x", [1, 4])], [_f("y", [1, 4])],
               [numpy_helper.from_array(np.zeros((4, 4), np.int8), "w"),
                numpy_helper.from_array(np.ones(1, np.float32), "s")])
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    entry = {"capture_safe": True}
    cc.mark("vision", entry, m)
    assert entry == {} and cc.unmarked_ops(m) == ["DynamicQuantizeMatMul"]


def _unmarked_tiny(tmp_path):
    """A copy of the tiny bundle whose vision graph is not marked capture_safe (upgrade_bundle's work)."""
    b = str(tmp_path / "b")
    shutil.copytree(TINY, b)
    manifest = read_manifest(b)
    manifest["files"]["vision"].pop("capture_safe")
    save_manifest(b, manifest)
    return b


def _files(b):
    """Every file of bundle b, by name: its bytes."""
    out = {}
    for f in os.listdir(b):
        with open(os.path.join(b, f), "rb") as fh:
            out[f] = fh.read()
    return out


def test_upgrade_leaves_bundle_when_check_fails(tmp_path, monkeypatch):
    """A rewrite that fails its check against the graph as it was replaces nothing."""
    b = _unmarked_tiny(tmp_path)
    # the committed graph is already rewritten: put a device Concat back in front of its output
    path = os.path.join(b, "vision_model.onnx")
    m = onnx.load(path, load_external_data=False)
    out = m.graph.output[0].name
    for n in m.graph.node:
        n.output[:] = [x + "_pre" if x == out else x for x in n.output]
    m.graph.node.extend([helper.make_node("Concat", [out + "_pre"], [out], name="extra_cat", axis=1)])
    onnx.save_model(m, path)
    before = _files(b)

    def fail(*_):
        raise ub.UpgradeError("vision batch=1: off by 1 (test)")
    monkeypatch.setattr(ub, "_check_vision", fail)
    with pytest.raises(ub.UpgradeError, match="off by 1"):
        ub._upgrade_vision(b)
    assert _files(b) == before


def test_upgrade_refuses_corrupt_vision_graph(tmp_path, capsys):
    """A vision graph that is not ONNX (listed as it is: the manifest's size and sha256 are the
    truncated file's): a one-line error, exit 1, the bundle as it was."""
    b = _unmarked_tiny(tmp_path)
    path = os.path.join(b, "vision_model.onnx")
    with open(path, "rb") as f:
        head = f.read(3000)
    with open(path, "wb") as f:
        f.write(head)
    manifest = read_manifest(b)
    manifest["files"]["vision"].update(file_entry(b, "vision_model.onnx"))
    save_manifest(b, manifest)
    before = _files(b)
    assert ub.main(["--static-check", "none", b]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"upgrade_bundle: {path}: not a readable ONNX graph") and "\n" not in err
    assert _files(b) == before
