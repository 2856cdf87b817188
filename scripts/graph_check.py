"""Checking a bundle's graphs with ONNX Runtime against a reference (PyTorch for the exporter, the
old graph for upgrade_bundle): the tolerances, the comparison, the decoder's past inputs and its
argmax output. numpy only (onnxruntime when a session is opened), no torch."""

from __future__ import annotations

import numpy as np

from .bundle_format import ARGMAX_OUTPUT

# ORT vs PyTorch, fp32 on CPU: |ort - torch| <= atol + rtol * max|torch| per output.
# Measured worst cases are reported by the checks; these bounds leave ~10-100x headroom.
TOLERANCES = {
    "vision": {"atol": 1e-4, "rtol": 1e-4},
    "encoder": {"atol": 1e-4, "rtol": 1e-4},
    "fusion": {"atol": 1e-5, "rtol": 1e-5},
    "decoder": {"atol": 1e-4, "rtol": 1e-4},
}


class ExportCheckError(RuntimeError):
    pass


def session(path: str):
    """A one-thread CPU session: the checks compare numbers, not speed."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def compare(what: str, got: np.ndarray, want: np.ndarray, tol: dict, report: dict, ref: str = "PyTorch") -> None:
    """Raises ExportCheckError when ORT's output is off the reference's (ref names it) by more
    than atol + rtol * max|want|; report[first word of what] keeps the worst |diff|."""
    want = np.asarray(want, dtype=np.float32)
    if got.shape != want.shape:
        raise ExportCheckError(f"{what}: shape {got.shape}, {ref} gives {want.shape}")
    diff = float(np.max(np.abs(got - want))) if got.size else 0.0
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    bound = tol["atol"] + tol["rtol"] * scale
    key = what.split(" ")[0]
    report[key] = max(report.get(key, 0.0), diff)
    if not np.isfinite(got).all() or diff > bound:
        raise ExportCheckError(f"{what}: ORT worst |diff| {diff:.3g} > {bound:.3g} against {ref} "
                               f"(atol {tol['atol']}, rtol {tol['rtol']}, max|ref| {scale:.3g})")


def past_feed(self_kv: list, cross_kv: list, n_layers: int) -> dict:
    """The decoder's past inputs: per layer self-attention key, value, then cross key, value."""
    feed = {}
    for i in range(n_layers):
        for j, kv in enumerate(("key", "value")):
            feed[f"past_key_values.{i}.decoder.{kv}"] = np.ascontiguousarray(self_kv[2 * i + j], dtype=np.float32)
            feed[f"past_key_values.{i}.encoder.{kv}"] = np.ascontiguousarray(cross_kv[2 * i + j], dtype=np.float32)
    return feed


def check_argmax(what: str, outs: dict) -> None:
    """The graph's logits_argmax is exactly numpy's argmax of its own logits (first index of a tie)."""
    want = np.argmax(outs["logits"], axis=-1)
    got = outs.get(ARGMAX_OUTPUT)
    if got is None or got.dtype != np.int64 or not np.array_equal(got, want):
        raise ExportCheckError(f"{what}: {ARGMAX_OUTPUT} is not the argmax of the logits")
