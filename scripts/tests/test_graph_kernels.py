"""scripts.graph_kernels: inputs fed from the manifest for every graph of the tiny bundle (run on
ORT's CPU provider), the kernels of a Chrome trace as torch.profiler exports it, and the summary's
arithmetic."""

import json

import pytest

from scripts import graph_kernels as gk
from scripts.bundle_files import read_manifest
from scripts.tests.conftest import TINY


def test_every_graph_runs_on_its_feeds():
    m = read_manifest(TINY)
    for role in ("vision", "encoder", "fusion", "decoder", "decoder_cross", "decoder_static"):
        s = gk.profile(TINY, role, dict(gk.DIMS, batch_size=2, encoder_sequence_length=9), runs=1, warmup=0,
                       provider="cpu")
        assert s["runs"] == 1 and s["wall_ms_median"] > 0 and s["families"] == {}, role
    f = gk.feeds(m, "decoder_static", dict(gk.DIMS, batch_size=3))
    assert f["input_ids"].shape == (3, 13) and f["input_ids"].max() < m["model"]["vocab_size"]
    assert f["position"].tolist() == [0, 0, 0] and f["encoder_attention_mask"].min() == 1
    assert f["past_key_values.0.decoder.key"].shape == (3, 4, 140, 32)
    with pytest.raises(gk.GraphKernelsError, match="cache_length"):
        gk.feeds(m, "decoder_static", {"batch_size": 1, "decoder_sequence_length": 1, "encoder_sequence_length": 4})


def test_trace_kernels_and_summary():
    trace = {"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "void cutlass::Kernel2<x>(p)", "dur": 100.0},
        {"ph": "X", "cat": "kernel", "name": "void cutlass::Kernel2<x>(p)", "dur": 60.0},
        {"ph": "X", "cat": "kernel", "name": "onnxruntime::cuda::_UnaryElementWise<half>", "dur": 40.0},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "dur": 20.0},
        {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "dur": 4.0},
        {"ph": "X", "cat": "Kernel", "name": "void cutlass::Kernel2<x>(p)", "dur": 40.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "dur": 500.0},
        {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep", "dur": 900.0},
        {"ph": "i", "cat": "kernel", "name": "marker"},
    ]}
    k, copies = gk.trace_kernels(trace)
    assert sorted(k) == [("onnxruntime::cuda::_UnaryElementWise<half>", 40000.0, 1),
                         ("void cutlass::Kernel2<x>(p)", 200000.0, 3)]
    assert copies == 24000.0
    s = gk.summarize(k, runs=2, walls_ms=[0.5, 0.2, 0.3], copies_ns=copies)
    assert s["kernel_ms_per_run"] == pytest.approx(0.12) and s["wall_ms_median"] == 0.3
    assert s["copy_ms_per_run"] == pytest.approx(0.012)
    assert s["busy"] == pytest.approx(0.12 / 0.3) and s["kernels_per_run"] == 2
    assert list(s["families"]) == ["gemm", "elementwise"]
    assert s["top"][0] == {"kernel": "cutlass::Kernel2", "family": "gemm", "share": pytest.approx(200 / 240),
                           "ms_per_run": pytest.approx(0.1), "per_run": 1.5}
    assert "GPU kernels 0.12 ms a run (2 kernels; copies 0.01 ms)" in gk.line("b vision at 2", s)


def test_refusals(capsys):
    assert gk.main([TINY, "nope", "--provider", "cpu"]) == 1
    assert "no graph 'nope'" in capsys.readouterr().err
    assert gk.main([TINY, "vision", "--provider", "cpu", "--dim", "batch_size=0"]) == 1
    assert "--dim" in capsys.readouterr().err
    assert gk.main([TINY, "vision", "--provider", "cpu", "--dim", "batch_size=2", "--runs", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"] == 1
