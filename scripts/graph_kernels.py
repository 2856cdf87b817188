"""The GPU's own kernel times of one graph of a bundle where the machine has no Nsight Systems:
ONNX Runtime from Python (its CUDA provider) runs the graph on inputs shaped from the manifest,
under torch.profiler, whose CUPTI tracing records every kernel of the process, ORT's included.
ORT's own profile (scripts.ort_profile) times the host's launch of each node under CUDA, not the
kernel; this says how long a run keeps the GPU busy, and which kernel families and kernels take it
(scripts.kernel_profile's families). Inputs stay on the device and outputs are left there (IO
binding), as the engine keeps a decode's state; copies are summed apart from the kernels.

  python -m scripts.graph_kernels BUNDLE ROLE [--dim NAME=SIZE ...] [--runs 5] [--warmup 2]
                                  [--top 8] [--provider cuda|cpu] [--json]

Inputs: each of the role's graph inputs at its manifest dims, symbolic ones from --dim or DIMS
(a batch of 64 at the sizes a bench batch of base-vitg meets); floats normal(0, 0.5) of the
input's type, token ids uniform over the vocabulary, masks ones, positions zeros (a static
decoder's writes at the start of its cache). --provider cpu runs the same inputs without the
profiler: what the tests check.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

from .bundle_files import read_manifest
from .kernel_profile import shares, short

# Symbolic dims at a bench batch of 64 on base-vitg: the verify width of a speculative call at 64
# rows (13), a prompt bucket (320), a past midway through a typical answer, the static cache's
# capacity (127 new tokens + the widest call).
DIMS = {"batch_size": 64, "decoder_sequence_length": 13, "encoder_sequence_length": 320,
        "past_decoder_sequence_length": 48, "cache_length": 140}
_NP = {"float32": np.float32, "float16": np.float16, "int64": np.int64, "int32": np.int32}


class GraphKernelsError(Exception):
    pass


def feeds(manifest: dict, role: str, dims: dict, seed: int = 0) -> dict:
    """Inputs for the role's graph at its manifest dims (module doc)."""
    files = manifest.get("files", {})
    if role not in files or "inputs" not in files[role]:
        raise GraphKernelsError(f"no graph {role!r} in the bundle (roles: {', '.join(r for r in files if r != 'tokenizer')})")
    rng = np.random.default_rng(seed)
    vocab = manifest["model"]["vocab_size"]
    out = {}
    for spec in files[role]["inputs"]:
        shape = []
        for d in spec["dims"]:
            if isinstance(d, str) and d not in dims:
                raise GraphKernelsError(f"{spec['name']}: no size for dim {d!r} (--dim {d}=N)")
            shape.append(dims[d] if isinstance(d, str) else d)
        dtype = _NP.get(spec["dtype"])
        if dtype is None:
            raise GraphKernelsError(f"{spec['name']}: input type {spec['dtype']} not fed here")
        name = spec["name"]
        if np.issubdtype(dtype, np.floating):
            out[name] = (rng.standard_normal(shape) * 0.5).astype(dtype)
        elif name.endswith("input_ids"):
            out[name] = rng.integers(0, vocab, shape).astype(dtype)
        elif "mask" in name:
            out[name] = np.ones(shape, dtype)
        else:
            out[name] = np.zeros(shape, dtype)  # positions
    return out


def session(bundle: str, manifest: dict, role: str, provider: str):
    import warnings

    import onnxruntime as ort
    warnings.filterwarnings("ignore", message="Specified provider")  # said below, in one line
    so = ort.SessionOptions()
    so.log_severity_level = 3
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if provider == "cuda" else ["CPUExecutionProvider"]
    sess = ort.InferenceSession(os.path.join(bundle, manifest["files"][role]["path"]), so, providers=providers)
    if provider == "cuda" and "CUDAExecutionProvider" not in sess.get_providers():
        raise GraphKernelsError(f"onnxruntime {ort.__version__} gave no CUDA provider (the CPU build, or no GPU)")
    return sess


def trace_kernels(trace: dict) -> tuple[list[tuple[str, float, int]], float]:
    """(name, total ns, instances) per GPU kernel of a Chrome trace as torch.profiler exports it
    (those ORT launched included: uncorrelated to any torch op, which the profiler's own event
    tree may leave out), and the memcpys' and memsets' total ns beside them. Categories compared
    without case: torch 1.8 wrote Kernel and Memcpy."""
    sums: dict[str, list] = {}
    copies = 0.0
    for e in trace.get("traceEvents", []):
        cat = str(e.get("cat", "")).lower()
        if e.get("ph") != "X":
            continue
        if cat in ("gpu_memcpy", "gpu_memset", "memcpy", "memset"):
            copies += float(e.get("dur", 0)) * 1e3
        elif cat == "kernel":
            k = sums.setdefault(e.get("name", "?"), [0.0, 0])
            k[0] += float(e.get("dur", 0)) * 1e3  # µs
            k[1] += 1
    return [(n, t, c) for n, (t, c) in sums.items()], copies


def summarize(kernel_list: list[tuple[str, float, int]], runs: int, walls_ms: list[float], top: int = 8,
              copies_ns: float = 0.0) -> dict:
    wall = statistics.median(walls_ms)
    fams, ranked = shares(kernel_list, top)
    per_run = sum(t for _, t, _ in kernel_list) / runs / 1e6
    return {
        "runs": runs, "kernel_ms_per_run": per_run, "copy_ms_per_run": copies_ns / runs / 1e6,
        "wall_ms_median": wall,
        "busy": per_run / wall if wall else None,
        "kernels_per_run": sum(c for _, _, c in kernel_list) / runs,
        "families": fams,
        "top": [{"kernel": short(n), "family": f, "share": share, "ms_per_run": t / runs / 1e6, "per_run": c / runs}
                for n, f, share, t, c in ranked],
    }


def line(what: str, s: dict) -> str:
    if not s["families"]:
        return f"{what}: no GPU trace (cpu provider): a median wall of {s['wall_ms_median']:.2f} ms"
    fams = ", ".join(f"{f} {v:.0%}" for f, v in s["families"].items() if v >= 0.01)
    top = "; ".join(f"{k['kernel']} {k['ms_per_run']:.2f} ms (x{k['per_run']:g})" for k in s["top"][:5])
    busy = f" ({s['busy']:.0%} of it)" if s["busy"] is not None else ""
    return (f"{what}: GPU kernels {s['kernel_ms_per_run']:.2f} ms a run ({s['kernels_per_run']:.0f} kernels; copies "
            f"{s['copy_ms_per_run']:.2f} ms) against a median wall of {s['wall_ms_median']:.2f} ms{busy} | {fams} | "
            f"top: {top}")


def profile(bundle: str, role: str, dims: dict, runs: int, warmup: int, provider: str, top: int = 8) -> dict:
    manifest = read_manifest(bundle, GraphKernelsError)
    feed = feeds(manifest, role, dims)
    sess = session(bundle, manifest, role, provider)
    walls = []
    if provider != "cuda":
        for _ in range(warmup):
            sess.run(None, feed)
        for _ in range(runs):
            t = time.perf_counter()
            sess.run(None, feed)
            walls.append((time.perf_counter() - t) * 1e3)
        return summarize([], runs, walls, top)
    import onnxruntime as ort
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile
    if ProfilerActivity.CUDA not in torch.profiler.supported_activities():
        raise GraphKernelsError(f"torch {torch.__version__} has no CUDA profiler (CUPTI)")
    # Inputs on the device once and outputs left there, as the engine keeps a decode's state: the
    # run's own kernels, not its inputs' trips across the bus.
    io = sess.io_binding()
    for name, x in feed.items():
        io.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(x, "cuda", 0))
    for o in sess.get_outputs():
        io.bind_output(o.name, "cuda")
    for _ in range(warmup):
        sess.run_with_iobinding(io)
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            t = time.perf_counter()
            sess.run_with_iobinding(io)  # ORT synchronizes the device at a run's end
            walls.append((time.perf_counter() - t) * 1e3)
    with tempfile.TemporaryDirectory() as d:
        prof.export_chrome_trace(os.path.join(d, "trace.json"))
        with open(os.path.join(d, "trace.json")) as f:
            found, copies = trace_kernels(json.load(f))
    if not found:
        raise GraphKernelsError("the profiler's trace holds no GPU kernel (CUPTI saw none of ORT's)")
    return summarize(found, runs, walls, top, copies)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.graph_kernels", description=__doc__.splitlines()[0])
    p.add_argument("bundle")
    p.add_argument("role", help="vision, encoder, fusion, decoder, decoder_cross, decoder_static")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=SIZE", help="a symbolic dim's size")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--top", type=int, default=8)
    p.add_argument("--provider", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--json", action="store_true", help="the summary as JSON")
    args = p.parse_args(argv)
    dims = dict(DIMS)
    try:
        for d in args.dim:
            name, _, size = d.partition("=")
            if not name or not size.isdigit() or int(size) < 1:
                raise GraphKernelsError(f"--dim {d!r}: want NAME=SIZE, SIZE at least 1")
            dims[name] = int(size)
        if args.runs < 1 or args.warmup < 0:
            raise GraphKernelsError(f"--runs {args.runs}, --warmup {args.warmup}: want at least 1 and 0")
        s = profile(args.bundle, args.role, dims, args.runs, args.warmup, args.provider, args.top)
    except (GraphKernelsError, OSError, ValueError, KeyError) as e:
        print(f"graph_kernels: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - ORT's own errors (a refused graph, out of memory): one line
        print(f"graph_kernels: {args.role}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
              file=sys.stderr)
        return 1
    what = f"{os.path.basename(os.path.normpath(args.bundle))} {args.role} at {dims['batch_size']}"
    print(json.dumps(s, indent=1) if args.json else line(what, s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
