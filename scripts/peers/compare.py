"""`make bench`: ours and every peer on one bundle, one comparison table and one chart.

  python -m scripts.peers.compare --model DIR [--threads 2] [--runs 3] [--warmup 1] [--tokens 80]
                                  [--out build/bench/NAME] [--autoui build/autoui]
                                  [--peers torch,ort,tjs,ov,ct2,ct2_int8] [--docs]

Order: `autoui bench` first (it also writes the shared inputs: screens, prompts, token count),
then each peer in its own process, one after another (so each has the cores to itself and its
own peak RSS). Peers: PyTorch (torch), ONNX Runtime from Python (ort), transformers.js (tjs),
OpenVINO on the bundle's graphs (ov), CTranslate2 fp32 and int8 on the bundle's T5, text path
only (ct2, ct2_int8; scripts/peers/requirements.txt, installed by `make bench`).
Writes OUT/{ours,torch,ort,tjs,ov,ct2,ct2_int8}.json, OUT/report.md and OUT/bench.svg; --docs
also copies the table into docs/bench.md (between the bench:begin/end markers) and the chart to
docs/bench.svg. A peer that fails is reported in the table and makes the exit status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from typing import Dict, List, Optional

from . import svg

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PEERS = {
    "torch": ("PyTorch + HF generate", lambda a, inp, out: [sys.executable, "-m", "scripts.peers.torch_ref", *a, "--inputs", inp, "--json", out]),
    "ort": ("ONNX Runtime, Python", lambda a, inp, out: [sys.executable, "-m", "scripts.peers.ort_python", *a, "--inputs", inp, "--json", out]),
    "tjs": ("transformers.js, Node", lambda a, inp, out: ["node", os.path.join(ROOT, "bench", "node", "run.mjs"), *a, "--inputs", inp, "--json", out]),
    "ov": ("OpenVINO (bundle's ONNX graphs)", lambda a, inp, out: [sys.executable, "-m", "scripts.peers.ov", *a, "--inputs", inp, "--json", out]),
    "ct2": ("CTranslate2 fp32, text path", lambda a, inp, out: [sys.executable, "-m", "scripts.peers.ct2", *a, "--compute-type", "float32", "--inputs", inp, "--json", out]),
    "ct2_int8": ("CTranslate2 int8, text path", lambda a, inp, out: [sys.executable, "-m", "scripts.peers.ct2", *a, "--compute-type", "int8", "--inputs", inp, "--json", out]),
}
DEFAULT_PEERS = "torch,ort,tjs,ov,ct2,ct2_int8"
OURS = "autoui (Go + ORT)"
# Extra runs of ours beside the default one: same cases, other settings.
VARIANTS = {"ours_greedy": "autoui, greedy (one call per token)", "ours_int8": "autoui, int8 bundle"}
CHART_STAGES = [("image decode + preprocess", ("decode_image", "preprocess")), ("vision", ("vision",)),
                ("tokenize", ("tokenize",)), ("encoder", ("encoder",)), ("fusion", ("fusion",)),
                ("first decode step", ("first_step",)), ("later decode steps", ("later_steps",)),
                ("parse", ("parse",)), ("other (framework overhead)", ())]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(cmd: List[str], what: str, stdout: Optional[str] = None) -> Optional[str]:
    """Runs cmd from the project root, its stdout into the file stdout if
    given; returns an error string or None."""
    log(f"== {what}: {' '.join(cmd)}" + (f" > {stdout}" if stdout else ""))
    t = time.time()
    env = dict(os.environ, ORT_DISABLE_TELEMETRY="1")
    if stdout:
        with open(stdout, "wb") as f:
            p = subprocess.run(cmd, cwd=ROOT, env=env, stdout=f)
    else:
        p = subprocess.run(cmd, cwd=ROOT, env=env)
    log(f"== {what}: exit {p.returncode} after {time.time() - t:.0f}s")
    return None if p.returncode == 0 else f"exit status {p.returncode}"


def med(doc: dict, stage: str) -> Optional[float]:
    s = doc.get("stages", {}).get(stage)
    return s["median_ms"] if s else None


def fmt_ms(v: Optional[float]) -> str:
    if v is None:
        return "–"
    return f"{v / 1000:.2f} s" if v >= 1000 else (f"{v:.1f} ms" if v >= 10 else f"{v:.2f} ms")


def ratio(peer: Optional[float], ours: Optional[float]) -> str:
    if not peer or not ours:
        return "–"
    return f"{peer / ours:.2f}×"


def same_prefix(a: List[int], b: List[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def chart_values(doc: dict) -> List[float]:
    vals = []
    fusion_inside = doc.get("fusion_inside_steps", False)
    for name, stages in CHART_STAGES:
        if name == "fusion" and fusion_inside:
            vals.append(0.0)
            continue
        vals.append(sum(med(doc, s) or 0.0 for s in stages) / 1000)
    total = (med(doc, "total") or 0.0) / 1000
    vals[-1] = max(0.0, total - sum(vals[:-1]))
    return vals


def machine_line(ours: dict) -> str:
    m = ours.get("machine") or {}
    cpu = m.get("cpu") or platform.processor() or "unknown CPU"
    parts = [f"{cpu}, {os.cpu_count()} logical CPUs, {ours.get('threads')} threads per runner"]
    if m:
        parts.append(f"measured read bandwidth {m['bandwidth_gbps']:.1f} GB/s, ORT fp32 matmul {m['gemm_gflops']:.0f} GFLOP/s")
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
        parts.append(f"{kb / 2**20:.0f} GiB RAM")
    except (OSError, ValueError, IndexError):
        pass
    return "; ".join(parts)


def table(docs: Dict[str, dict], errors: Dict[str, str], names: Dict[str, str]) -> List[str]:
    ours = docs.get("ours")
    lines = ["| runner | per action (full) | text path | text path vs ours | vision | encoder | first step | decode step | decoder calls | peak RSS | RSS vs ours |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for key in ["ours", *VARIANTS, *PEERS]:
        if key in errors:
            lines.append(f"| {names[key]} | failed: {errors[key]} | | | | | | | | | |")
            continue
        d = docs.get(key)
        if d is None:
            continue
        full = med(d, "total") if "vision" in d.get("stages", {}) else None
        tp = med(d, "text_path")
        rss = d.get("peak_rss_mb")
        first = fmt_ms(med(d, "first_step"))
        if d.get("first_step_includes_encoder") and first != "–":
            first += " (incl. encoder)"
        lines.append("| " + " | ".join([
            names[key], fmt_ms(full), fmt_ms(tp), "1.00×" if key == "ours" else ratio(tp, ours and med(ours, "text_path")),
            fmt_ms(med(d, "vision")), fmt_ms(med(d, "encoder")), first, fmt_ms(med(d, "decode_step")),
            f"{d['decoder_calls']:g}" if d.get("decoder_calls") is not None else "–",
            f"{rss:.0f} MB" if rss else "–",
            "1.00×" if key == "ours" else (f"{rss / ours['peak_rss_mb']:.2f}×" if rss and ours else "–"),
        ]) + " |")
    return lines


def limits(ours: dict) -> List[str]:
    if not ours.get("limits"):
        return []
    out = ["| stage | measured (median) | lower bound | measured / bound | bound by |", "|---|---:|---:|---:|---|"]
    for l in ours["limits"]:
        out.append(f"| {l['stage']} | {fmt_ms(l['measured_ms'])} | {fmt_ms(l['bound_ms'])} | {l['ratio']:.2f}× | {l['basis']} |")
    return out


def write_report(out_dir: str, model: str, docs: Dict[str, dict], errors: Dict[str, str], args) -> str:
    names = {"ours": OURS, **VARIANTS, **{k: v[0] for k, v in PEERS.items()}}
    ours = docs.get("ours", {})
    # what ours actually ran with (the flags may differ with --report-only)
    tokens, threads = int(ours.get("tokens", args.tokens)), ours.get("threads", args.threads)
    runs, warmup = ours.get("runs", args.runs), ours.get("warmup", args.warmup)
    lines = [f"### Bundle `{model}` ({ours.get('model', '?')}), {tokens} tokens per action, {threads} threads",
             "", f"Machine: {machine_line(ours)}.", "", *([f"**{getattr(args, 'note', '')}**", ""] if getattr(args, "note", "") else []),
             f"Medians over {runs} passes × {len(ours.get('cases', []))} cases (histories of 0/4/8 actions; "
             f"prompt tokens {', '.join(str(c['source_tokens']) for c in ours.get('cases', []))}) after {warmup} warm-up pass(es). "
             + (f"Ours decodes a replayed typical action ({tokens} tokens with `</s>`: real decoder calls, the random model's "
                "choices replaced by the action's tokens, so speculative decoding accepts drafts as it would for a trained model); "
                "the peers generate the same number of tokens with `</s>` masked until then. "
                if ours.get("replay") else
                "Every runner generates exactly the same number of tokens: `</s>` is masked until then (random weights). ")
             +
             "Ratios are peer / ours: above 1 means ours is faster or smaller. "
             + (f"Ours decodes {ours['decoding']} (speculative verifies drafted tokens several per call, same tokens "
                "as greedy" + ("" if ours.get("replay") else "; with random weights drafts are rarely accepted")
                + "); the peers" if ours.get("decoding") else "The peers")
             + " make one decoder call per token.", ""]
    lines += table(docs, errors, names)
    lines += ["", "Text path = tokenize + encoder + fusion + all decoder steps + detokenize/parse (transformers.js has no "
              "vision or fusion; PyTorch re-runs the fusion inside every step, as Auto-UI's model does).", ""]
    if any(k in docs for k in ("ct2", "ct2_int8")):
        lines += ["CTranslate2 runs the text path only: the bundle's T5 (same weights) as a plain encoder-decoder, "
                  "one `translate_batch` (greedy, min = max decoding length = the token count) — no vision tower and "
                  "no fusion (the decoder attends to the unfused encoder output: same shapes and cost), so its tokens "
                  "differ from ours by design; its first step includes the encoder (one call, timed by per-token "
                  "callbacks). OpenVINO runs the bundle's four ONNX graphs with ONNX Runtime-Python's loop.", ""]
    lim = limits(ours)
    if lim:
        lines += ["Ours against this machine's limits (lower bound = max(bytes read / bandwidth, FLOPs / matmul rate)):", ""] + lim + [""]
    ids = {k: d.get("generated_ids", []) for k, d in docs.items() if d.get("generated_ids")}
    # A replaying run's tokens are the replayed action's, not the model's: the peers' greedy
    # tokens are then compared with ONNX Runtime-Python's (ours' greedy parity is `make test`'s).
    ref = "ort" if ours.get("replay") else "ours"
    if ref in ids:
        agree = []
        for k in ("ours", "ort", "torch", "ov"):
            if k != ref and k in ids and not (k == "ours" and ours.get("replay")):
                agree.append(f"{names[k]} {same_prefix(ids[ref], ids[k])}/{len(ids[ref])}")
        if agree:
            lead = (f"Ours replays a fixed action, so its tokens are the action's; same greedy tokens as "
                    f"{names[ref]} on the first case" if ref != "ours" else "Same greedy tokens as ours on the first case")
            lines += [f"{lead} (identical prefix length): {', '.join(agree)}.", ""]
    if "ct2" in ids and "ct2_int8" in ids:
        lines += [f"CTranslate2 int8 vs fp32 on the first case (identical prefix length): "
                  f"{same_prefix(ids['ct2'], ids['ct2_int8'])}/{len(ids['ct2'])} (fp32 is checked token-for-token against "
                  "PyTorch's T5 by `python -m scripts.peers.ct2 --verify`).", ""]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(text)
    rows = [(names[k], chart_values(docs[k])) for k in ["ours", *VARIANTS, *PEERS] if k in docs]
    chart = svg.stacked_bars(f"Time per action by stage ({ours.get('model', model)}, {threads} threads, "
                             f"{tokens} tokens; median per stage)", "seconds", [n for n, _ in CHART_STAGES], rows)
    with open(os.path.join(out_dir, "bench.svg"), "w") as f:
        f.write(chart)
    return text


def update_docs(report: str, out_dir: str) -> None:
    path = os.path.join(ROOT, "docs", "bench.md")
    begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
    with open(path) as f:
        doc = f.read()
    if begin not in doc or end not in doc:
        raise SystemExit(f"{path}: no {begin} ... {end} markers")
    head, rest = doc.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(path, "w") as f:
        f.write(head + begin + "\n" + report + end + tail)
    with open(os.path.join(out_dir, "bench.svg")) as src, open(os.path.join(ROOT, "docs", "bench.svg"), "w") as dst:
        dst.write(src.read())
    log(f"updated {path} and docs/bench.svg")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Run autoui bench and the peers on one bundle; write one comparison.")
    p.add_argument("--model", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--tokens", type=int, default=80)
    p.add_argument("--replay", default="", help="ours decodes this action (or 'typical'); the peers the same token count")
    p.add_argument("--ours-greedy", action="store_true", help="also run ours with greedy decoding (a row of its own)")
    p.add_argument("--int8", default="", help="also run ours on this int8 variant of the bundle (a row of its own)")
    p.add_argument("--out", help="output directory (default build/bench/<bundle dir name>)")
    p.add_argument("--autoui", default=os.path.join(ROOT, "build", "autoui"), help="the autoui binary")
    p.add_argument("--peers", default=DEFAULT_PEERS, help=f"comma-separated subset of {DEFAULT_PEERS} ('' for none)")
    p.add_argument("--docs", action="store_true", help="also update docs/bench.md and docs/bench.svg")
    p.add_argument("--note", default="", help="a sentence to print under the table's heading (e.g. measurement conditions)")
    p.add_argument("--report-only", action="store_true",
                   help="run nothing: rebuild the report and chart from the JSON files already in --out")
    args = p.parse_args(argv)
    model = os.path.abspath(args.model)
    name = os.path.basename(os.path.normpath(model))
    out = os.path.abspath(args.out or os.path.join(ROOT, "build", "bench", name))
    os.makedirs(out, exist_ok=True)
    peers = [x for x in args.peers.split(",") if x]
    for x in peers:
        if x not in PEERS:
            raise SystemExit(f"unknown peer {x!r} (want {', '.join(PEERS)})")
    common = ["--model", model, "--threads", str(args.threads), "--runs", str(args.runs), "--warmup", str(args.warmup)]
    docs: Dict[str, dict] = {}
    errors: Dict[str, str] = {}
    inputs = os.path.join(out, "inputs.json")
    t0 = time.time()
    if args.report_only:
        for key in ["ours", *VARIANTS, *peers]:
            path = os.path.join(out, key + ".json")
            if key in VARIANTS and not os.path.exists(path):
                continue
            if os.path.exists(path):
                with open(path) as f:
                    docs[key] = json.load(f)
            else:
                errors[key] = "not run"
        if "ours" not in docs:
            raise SystemExit(f"{out}/ours.json missing")
        errors.pop("ours", None)
        report = write_report(out, name, docs, errors, args)
        print(report)
        if args.docs:
            update_docs(report, out)
        return 0
    length = ["--replay", args.replay] if args.replay else ["--tokens", str(args.tokens)]
    err = run([args.autoui, "bench", *common, *length, "--json",
               "--peer-inputs", inputs, "--benchstat", os.path.join(out, "ours.benchstat"), "--no-verify"], OURS,
              stdout=os.path.join(out, "ours.json"))
    if err:
        raise SystemExit(f"autoui bench failed ({err}); nothing to compare")
    variants = {}
    if args.ours_greedy:
        variants["ours_greedy"] = [*common, "--decoding", "greedy"]
    if args.int8:
        variants["ours_int8"] = ["--model", os.path.abspath(args.int8), *common[2:]]
    for key, flags in variants.items():
        err = run([args.autoui, "bench", *flags, *length, "--probe=false", "--json",
                   "--benchstat", os.path.join(out, key + ".benchstat"), "--no-verify"], VARIANTS[key],
                  stdout=os.path.join(out, key + ".json"))
        if err:
            errors[key] = err
            continue
        with open(os.path.join(out, key + ".json")) as f:
            docs[key] = json.load(f)
    for key in ["ours", *peers]:
        path = os.path.join(out, key + ".json")
        if key != "ours":
            err = run(PEERS[key][1](common, inputs, path), PEERS[key][0])
            if err:
                errors[key] = err
                continue
        with open(path) as f:
            docs[key] = json.load(f)
    report = write_report(out, name, docs, errors, args)
    print(report)
    log(f"wrote {out}/report.md and {out}/bench.svg in {time.time() - t0:.0f}s")
    if args.docs:
        update_docs(report, out)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
