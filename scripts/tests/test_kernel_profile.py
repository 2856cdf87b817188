"""scripts.kernel_profile on a kernel summary written as nsys writes it and a bench report."""

import csv
import json

import pytest

from scripts import kernel_profile as kp

KERNELS = [  # name, total ns, instances
    ("void cutlass::Kernel2<cutlass_80_tensorop_f16_s16816gemm_relu_f16_256x128_32x3_nn_align8>(T1::Params)", 240e6, 600),
    ("void onnxruntime::contrib::cuda::flash::flash_fwd_kernel<Flash_fwd_kernel_traits<96, 128, 64, 4>, false>(Flash_fwd_params)", 60e6, 78),
    ("void onnxruntime::cuda::_BinaryElementWise<__half, __half, __half, OP_Add<__half>>(int, const T1 *)", 30e6, 300),
    ("void onnxruntime::contrib::cuda::SkipLayerNormKernelSmall<__half, float, __half, 256, 8, true>(int)", 20e6, 158),
    ("sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nchw_tilesize128x128x64", 10e6, 2),
    ("void onnxruntime::cuda::_UnaryElementWise<float, __half, CastFunctor>(const T1 *)", 40e6, 400),
]


def write(tmp_path, kernels, runs=1, warmup=1, walls=(250.0,)):
    p = tmp_path / "k_cuda_gpu_kern_sum.csv"
    total = sum(t for _, t, _ in kernels)
    with open(p, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Time (%)", "Total Time (ns)", "Instances", "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)",
                    "StdDev (ns)", "Name"])
        for name, t, c in kernels:
            w.writerow([f"{100 * t / total:.1f}", int(t), c, int(t / c), int(t / c), 1, 1, 0, name])
    b = tmp_path / "bench.json"
    b.write_text(json.dumps({"runs": runs, "warmup": warmup,
                             "batches": [{"screens": 64, "wall_ms": w, "run": i} for i, w in enumerate(walls)]}))
    return str(b), str(p)


def test_per_batch_families_and_top(tmp_path, capsys):
    bench, csv_path = write(tmp_path, KERNELS)
    s = kp.summarize(json.load(open(bench)), kp.read_kernels(csv_path))
    assert s["batches"] == 2 and s["batch_size"] == 64  # one measured batch and the warm-up's
    assert s["kernel_ms_per_batch"] == pytest.approx(200.0)  # 400 ms of kernels over 2 batches
    assert s["busy"] == pytest.approx(0.8)
    fam = s["families"]
    assert fam["gemm"] == pytest.approx(0.6) and fam["attention"] == pytest.approx(0.15)
    assert fam["cast"] == pytest.approx(0.1) and fam["conv"] == pytest.approx(0.025)  # not a gemm
    assert fam["norm"] == pytest.approx(0.05) and fam["elementwise"] == pytest.approx(0.075)
    assert [k["kernel"] for k in s["top"][:2]] == ["cutlass::Kernel2",
                                                  "onnxruntime::contrib::cuda::flash::flash_fwd_kernel"]
    assert kp.main([bench, csv_path]) == 0
    out = capsys.readouterr().out
    assert out.startswith("GPU kernels 200.0 ms a batch of 64 over 2 batches, against a median wall of 250.0 ms (80% of it)")
    assert "gemm 60%" in out and "attention 15%" in out


def test_batches_with_more_runs(tmp_path):
    bench, csv_path = write(tmp_path, KERNELS, runs=3, warmup=1, walls=(240.0, 250.0, 260.0))
    s = kp.summarize(json.load(open(bench)), kp.read_kernels(csv_path))
    assert s["batches"] == 4 and s["wall_ms_median"] == 250.0


def test_refusals(tmp_path, capsys):
    bench, csv_path = write(tmp_path, KERNELS)
    bad = tmp_path / "other.csv"
    bad.write_text("a,b\n1,2\n")
    assert kp.main([bench, str(bad)]) == 1
    assert "not nsys's kernel summary" in capsys.readouterr().err
    single = tmp_path / "single.json"
    single.write_text(json.dumps({"runs": 1, "warmup": 1, "batches": []}))
    assert kp.main([str(single), csv_path]) == 1
    assert "--batch N" in capsys.readouterr().err
    assert kp.main([str(tmp_path / "missing.json"), csv_path]) == 1
