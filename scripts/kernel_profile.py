"""Summarize the CUDA kernel sums of Nsight Systems (`nsys stats --report cuda_gpu_kern_sum --format
csv`) for an `autoui bench --batch N --json` run traced by `nsys profile`: the GPU's kernel time per
batch beside the batch's wall time, the kernel families that take it and the top kernels. ORT's own
profile (scripts.ort_profile) times the host's launch of each node under CUDA, not the kernel, so it
cannot say whether a batch is the GPU's work or the host's, nor which kernels the time goes to.

  python -m scripts.kernel_profile BENCH_JSON KERN_SUM_CSV [--top 8] [--json]

The trace holds every batch of the process, the warm-up's included, and one-time kernels such as
cuDNN's algorithm search: a batch's kernel time is the sum divided by the batches run, an upper
bound. Standard library only: it runs on the GPU machine beside the trace.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys

# Kernel families by name, first match wins (names are CUDA symbols: cuBLAS/CUTLASS GEMMs, ORT's
# contrib kernels, cuDNN, and elementwise templates).
FAMILIES = [
    ("attention", r"flash|fmha|attention|attn"),
    ("conv", r"conv|cudnn|fprop|implicit_convolve|winograd"),
    ("gemm", r"gemm|cutlass|xmma|cublas|sm\d+_"),
    ("norm", r"layernorm|layer_norm|skiplayernorm|rmsnorm|simplifiedlayernorm"),
    ("softmax", r"softmax"),
    ("cast", r"cast"),
    ("transpose/copy", r"transpose|copy|concat|slice|split|gather|scatter|pad|memcpy|memset"),
    ("reduce", r"reduce|argmax|topk"),
    ("elementwise", r"elementwise|binary|unary|gelu|add|mul|div|sub|where|expand|fill"),
]


class KernelProfileError(Exception):
    pass


def family(name: str) -> str:
    low = name.lower()
    return next((f for f, pat in FAMILIES if re.search(pat, low)), "other")


def short(name: str, width: int = 70) -> str:
    """A kernel's name without its template arguments and parameters, cut to width."""
    s = re.sub(r"^void ", "", name)
    depth, out = 0, []
    for ch in s:
        if ch in "<(":
            if depth == 0 and ch == "(":
                break
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    s = "".join(out).strip() or name
    return s if len(s) <= width else s[:width - 3] + "..."


def read_kernels(path: str) -> list[tuple[str, float, int]]:
    """(name, total ns, instances) per kernel from nsys's CSV (cuda_gpu_kern_sum, or gpukernsum of
    older versions: the same columns)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or not {"Total Time (ns)", "Instances", "Name"} <= set(rows[0]):
        raise KernelProfileError(f"{path}: not nsys's kernel summary (want the columns Total Time (ns), "
                                 f"Instances, Name)")
    return [(r["Name"], float(r["Total Time (ns)"]), int(float(r["Instances"]))) for r in rows]


def batches_run(bench: dict) -> int:
    """The PredictBatch calls of the bench's process: its measured batches and the warm-up's."""
    measured = len(bench.get("batches") or [])
    if not measured:
        raise KernelProfileError("the bench report has no batches (run it with --batch N)")
    runs = max(1, int(bench.get("runs") or 1))
    return measured + measured * int(bench.get("warmup") or 0) // runs


def shares(kernels: list[tuple[str, float, int]], top: int) -> tuple[dict, list]:
    """The kernel families' shares of the kernels' total time, largest first, and the top
    kernels, each (name, family, share, total ns, instances); both empty without time."""
    total = sum(t for _, t, _ in kernels)
    if not total:
        return {}, []
    fams: dict[str, float] = {}
    for name, t, _ in kernels:
        f = family(name)
        fams[f] = fams.get(f, 0.0) + t
    ranked = sorted(kernels, key=lambda k: -k[1])[:top]
    return ({f: t / total for f, t in sorted(fams.items(), key=lambda x: -x[1])},
            [(name, family(name), t / total, t, c) for name, t, c in ranked])


def summarize(bench: dict, kernels: list[tuple[str, float, int]], top: int = 8) -> dict:
    n = batches_run(bench)
    total = sum(t for _, t, _ in kernels)
    walls = sorted(b["wall_ms"] for b in bench["batches"])
    wall = walls[len(walls) // 2]
    fams, ranked = shares(kernels, top)
    return {
        "batches": n, "batch_size": bench["batches"][0]["screens"],
        "kernel_ms_per_batch": total / n / 1e6, "wall_ms_median": wall,
        "busy": total / n / 1e6 / wall if wall else None,
        "families": fams,
        "top": [{"kernel": short(name), "family": f, "share": share, "instances": c}
                for name, f, share, _, c in ranked],
    }


def line(s: dict) -> str:
    fams = ", ".join(f"{f} {v:.0%}" for f, v in s["families"].items() if v >= 0.01)
    top = "; ".join(f"{k['kernel']} {k['share']:.0%} (x{k['instances']})" for k in s["top"][:4])
    busy = f" ({s['busy']:.0%} of it)" if s["busy"] is not None else ""
    return (f"GPU kernels {s['kernel_ms_per_batch']:.1f} ms a batch of {s['batch_size']} over {s['batches']} "
            f"batches, against a median wall of {s['wall_ms_median']:.1f} ms{busy} | {fams} | top: {top}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Summarize nsys's CUDA kernel sums of an autoui bench --batch run.")
    p.add_argument("bench_json")
    p.add_argument("kern_sum_csv")
    p.add_argument("--top", type=int, default=8)
    p.add_argument("--json", action="store_true", help="the summary as JSON")
    args = p.parse_args(argv)
    try:
        with open(args.bench_json) as f:
            bench = json.load(f)
        s = summarize(bench, read_kernels(args.kern_sum_csv), args.top)
    except (OSError, ValueError, KeyError, KernelProfileError) as e:
        print(f"kernel_profile: {e}", file=sys.stderr)
        return 1
    print(json.dumps(s, indent=1) if args.json else line(s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
