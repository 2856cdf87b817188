"""scripts.ort_profile on a profile ONNX Runtime writes itself: a two-node graph run three times on
the CPU provider, so every count is known."""

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

from scripts import ort_profile


def profile(tmp_path, runs=3):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])], "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "p-decoder")
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    for _ in range(runs):
        s.run(None, {"x": np.ones((2, 4), np.float32)})
    return s.end_profiling()


def test_counts(tmp_path):
    s = ort_profile.summarize(profile(tmp_path))
    assert s["graph"] == "decoder"
    assert s["runs"] == 3
    assert s["nodes_per_run_median"] == 2
    assert {o["op"] for o in s["top_ops"]} == {"Relu", "Neg"}
    assert s["providers"]["CPUExecutionProvider"]["nodes"] == 6
    assert s["cpu_ops_in_cuda_session"] == {}  # a CPU session: nothing crossed over
    assert 0 < s["node_us_per_run_median"] <= s["run_us_median"]


def test_main(tmp_path, capsys):
    path = profile(tmp_path, runs=1)
    assert ort_profile.main([path]) == 0
    assert capsys.readouterr().out.startswith("decoder: 1 runs")
    assert ort_profile.main([str(tmp_path / "missing.json")]) == 1
