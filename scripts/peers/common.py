"""What every Python peer shares: flags, inputs, stage timing, statistics and the JSON report.

A peer's JSON has the fields of `autoui bench --json` that it can fill: runner, model, threads,
provider, stages {name: {n, min_ms, median_ms, p90_ms}}, total_median_ms, text_path_median_ms,
tokens, decoder_calls, peak_rss_mb, plus generated_ids (the first case's ids, to check that
runners decode the same tokens) and notes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import sys
import time
from typing import Callable, Dict, List, Optional

STAGES = ["decode_image", "preprocess", "vision", "tokenize", "encoder", "fusion", "first_step",
          "decode_step", "later_steps", "parse", "text_path", "total"]


ACTION_RE = re.compile(r"Action Plan: \[([^\]]*)\]\s*;\s*Action Decision:\s*(.*)$")
FIELD_RE = re.compile(r'"(\w+)": "([^"]*)"')


def decode_and_parse(tok, ids) -> str:
    """Detokenizes as Auto-UI does and parses the action's fields (timed as the parse stage)."""
    text = tok.decode(ids, skip_special_tokens=True)
    m = ACTION_RE.search(text)  # random weights: usually no match; the cost is what counts
    if m:
        dict(FIELD_RE.findall(m.group(2)))
    return text


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--model", required=True, help="bundle directory (manifest.json + ONNX graphs)")
    p.add_argument("--inputs", required=True, help="cases written by `autoui bench --peer-inputs FILE`")
    p.add_argument("--threads", type=int, default=2, help="intra-op threads (the same for every runner)")
    p.add_argument("--runs", type=int, default=3, help="measured passes over the cases")
    p.add_argument("--warmup", type=int, default=1, help="discarded passes first")
    p.add_argument("--json", help="write the report here (default: stdout)")
    return p


def load_inputs(path: str) -> dict:
    with open(path) as f:
        inputs = json.load(f)
    if not inputs.get("cases"):
        raise SystemExit(f"{path}: no cases")
    return inputs


def load_manifest(bundle: str) -> dict:
    with open(os.path.join(bundle, "manifest.json")) as f:
        return json.load(f)


def peak_rss_mb() -> float:
    # ru_maxrss is in kilobytes on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class Clock:
    """Accumulates named stage durations (seconds) for one action."""

    def __init__(self):
        self.stages: Dict[str, float] = {}

    def time(self, stage: str, fn: Callable, *args, **kwargs):
        t = time.perf_counter()
        out = fn(*args, **kwargs)
        self.add(stage, time.perf_counter() - t)
        return out

    def add(self, stage: str, seconds: float) -> None:
        self.stages[stage] = self.stages.get(stage, 0.0) + seconds


def summarize(samples: List[float]) -> dict:
    """min / median / p90 in milliseconds, as the Go report computes them (median of an even
    count = mean of the middle two; p90 = nearest rank)."""
    s = sorted(samples)
    n = len(s)
    med = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    rank = -(-9 * n // 10)
    return {"n": n, "min_ms": round(s[0] * 1e3, 3), "median_ms": round(med * 1e3, 3),
            "p90_ms": round(s[rank - 1] * 1e3, 3)}


def median(v: List[float]) -> float:
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def finish_action(stages: Dict[str, float]) -> Dict[str, float]:
    """Adds the derived stages (text_path, total, decode_step) the way the Go report does."""
    text = ["tokenize", "encoder", "fusion", "first_step", "later_steps", "parse"]
    out = dict(stages)
    if "generate" in out:  # a runner whose decoding is one opaque call (HF generate)
        text = ["tokenize", "generate", "parse"]
    out["text_path"] = sum(out.get(k, 0.0) for k in text)
    out["total"] = out["text_path"] + sum(out.get(k, 0.0) for k in ("decode_image", "preprocess", "vision"))
    return out


def run_cases(inputs: dict, runs: int, warmup: int, one: Callable[[dict, int], dict]) -> List[dict]:
    """Runs one(case, tokens) warmup + runs times over the cases; returns the measured actions
    (each {"case", "run", "stages": {name: seconds}, "tokens", "decoder_calls", "ids"})."""
    out = []
    for r in range(-warmup, runs):
        for case in inputs["cases"]:
            a = one(case, inputs["tokens"])
            if len(a["ids"]) != inputs["tokens"]:
                raise SystemExit(f"case {case['id']}: generated {len(a['ids'])} tokens, want {inputs['tokens']}")
            a["stages"] = finish_action(a["stages"])
            a["case"], a["run"] = case["id"], r
            if r >= 0:
                out.append(a)
        print(f"  pass {r + 1 if r >= 0 else 'warm-up'} done", file=sys.stderr, flush=True)
    return out


def report(runner: str, model: str, threads: int, actions: List[dict], inputs: dict, notes: List[str],
           extra: Optional[dict] = None) -> dict:
    stages = {}
    for name in STAGES + ["generate"]:
        samples = [a["stages"][name] for a in actions if name in a["stages"]]
        if samples:
            stages[name] = summarize(samples)
    doc = {
        "runner": runner, "model": model, "threads": threads, "provider": "cpu",
        "stages": stages,
        "total_median_ms": stages["total"]["median_ms"],
        "text_path_median_ms": stages["text_path"]["median_ms"],
        "tokens": median([len(a["ids"]) for a in actions]),
        "decoder_calls": median([a["decoder_calls"] for a in actions]),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "fixed_length": f"EOS suppressed until {inputs['tokens']} tokens, then stop",
        "generated_ids": [int(i) for i in actions[0]["ids"]],
        "notes": notes,
    }
    if extra:
        doc.update(extra)
    return doc


def write(doc: dict, path: Optional[str]) -> None:
    text = json.dumps(doc, indent=2) + "\n"
    if path:
        with open(path, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
