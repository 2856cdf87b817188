"""Summarize ONNX Runtime profiles (`autoui bench --ort-profile PREFIX`): per graph, the time of a run,
how much of it the nodes account for, where each node ran, and the op types that cost the most.

  python -m scripts.ort_profile PREFIX-decoder_*.json [...] [--json]

Under CUDA a node's time is what the host spends launching it (ORT's kernels are asynchronous), so
"nodes / run" near 100% with few microseconds per node says a run is bound by launches, not by the GPU.
Nodes on CPUExecutionProvider inside a CUDA session, and Memcpy nodes, are where data crosses the bus.
Standard library only: it runs on the GPU machine beside the profiles.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import statistics
import sys
from typing import List


def graph_name(path: str) -> str:
    m = re.match(r"(?:.*-)?([a-z_]+)_\d{4}-\d\d-\d\d_", os.path.basename(path))
    return m.group(1) if m else os.path.basename(path)


def summarize(path: str, top: int = 8) -> dict:
    with open(path) as f:
        events = json.load(f)
    runs = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "Session" and e.get("name") == "model_run")
    nodes = sorted((e for e in events if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time")),
                   key=lambda e: e["ts"])
    per_run = [[0, 0] for _ in runs]  # nodes, node microseconds
    by_op = collections.defaultdict(lambda: [0, 0])
    by_provider = collections.defaultdict(lambda: [0, 0])
    on_cpu = collections.Counter()
    i = 0
    for n in nodes:
        while i < len(runs) and n["ts"] > runs[i][1]:
            i += 1
        if i < len(runs) and runs[i][0] <= n["ts"]:
            per_run[i][0] += 1
            per_run[i][1] += n["dur"]
        args = n.get("args", {})
        op, prov = args.get("op_name", "?"), args.get("provider", "?")
        by_op[op][0] += 1
        by_op[op][1] += n["dur"]
        by_provider[prov][0] += 1
        by_provider[prov][1] += n["dur"]
        if prov == "CPUExecutionProvider":
            on_cpu[op] += 1
    walls = [b - a for a, b in runs]
    cuda = "CUDAExecutionProvider" in by_provider
    total = sum(v[1] for v in by_op.values()) or 1
    return {
        "graph": graph_name(path), "file": os.path.basename(path), "runs": len(runs),
        "run_us_median": statistics.median(walls) if walls else None,
        "nodes_per_run_median": statistics.median(r[0] for r in per_run) if per_run else None,
        "node_us_per_run_median": statistics.median(r[1] for r in per_run) if per_run else None,
        "us_per_node": round(sum(r[1] for r in per_run) / max(1, sum(r[0] for r in per_run)), 2),
        "providers": {k: {"nodes": v[0], "us": v[1]} for k, v in sorted(by_provider.items())},
        "cpu_ops_in_cuda_session": dict(on_cpu.most_common()) if cuda else {},
        "top_ops": [{"op": k, "nodes": v[0], "us": v[1], "share": round(v[1] / total, 3)}
                    for k, v in sorted(by_op.items(), key=lambda kv: -kv[1][1])[:top]],
    }


def render(s: dict) -> List[str]:
    share = (s["node_us_per_run_median"] / s["run_us_median"]) if s["run_us_median"] else 0
    lines = [f"{s['graph']}: {s['runs']} runs, median {s['run_us_median']} µs per run; "
             f"{s['nodes_per_run_median']} nodes per run, {s['node_us_per_run_median']} µs in nodes ({share:.0%}), "
             f"{s['us_per_node']} µs per node"]
    lines.append("  providers: " + ", ".join(f"{k} {v['nodes']} nodes {v['us']} µs" for k, v in s["providers"].items()))
    if s["cpu_ops_in_cuda_session"]:
        lines.append("  on the CPU inside a CUDA session: " + ", ".join(f"{k} x{v}" for k, v in s["cpu_ops_in_cuda_session"].items()))
    lines.append("  top ops: " + ", ".join(f"{o['op']} {o['share']:.0%} ({o['nodes']})" for o in s["top_ops"]))
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("profiles", nargs="+")
    p.add_argument("--json", action="store_true", help="print the summaries as JSON")
    args = p.parse_args(argv)
    out = []
    for path in args.profiles:
        try:
            out.append(summarize(path))
        except (OSError, ValueError, KeyError) as e:
            print(f"ort_profile: {path}: {e}", file=sys.stderr)
            return 1
    if args.json:
        json.dump(out, sys.stdout, indent=1)
        print()
    else:
        for s in out:
            print("\n".join(render(s)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
