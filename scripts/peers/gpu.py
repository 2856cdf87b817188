"""GPU peers beside ours on the same card, in one run: PyTorch eager fp32 and bf16, and ONNX
Runtime from Python with IO binding, at the batch sizes ours is measured at.

  python -m scripts.peers.gpu --model DIR [--batches 1,8,32] [--runs 3] [--warmup 1]
                              [--autoui build/autoui] [--device cuda|cpu] [--out build/bench-gpu/NAME]

Runners, each in its own process, one after another:
  ours        `autoui bench --provider cuda --replay typical --batch B --prompt-groups 1` (B screens per
              PredictBatch, every prompt padded to the batch's longest as the peers' are; by default
              ours encodes a batch's prompts in groups of similar length, which gpu_check.sh times)
  torch_fp32  scripts.autoui_model + the BLIP-2 tower in PyTorch on the GPU, HF generate on the batch
  torch_bf16  the same in bfloat16
  ort_iobind  onnxruntime (CUDA provider) on the bundle's graphs; IO binding keeps the cross-attention
              K/V and the self-attention cache on the device (ORT-owned outputs fed back to the next
              call), so only the token ids go up and the logits come down
Same shapes for all: batch B holds the cases of ours' inputs file round-robin (0, 4 and 8 previous
actions), prompts right-padded to the batch's longest, the same number of generated tokens (ours
replays a typical action, the peers mask </s> until that length). A batch's time runs from the
encoded screenshots to the ids on the host, so screens/s counts image decoding too (Python decodes
one screen after another; ours spreads them over the cores).

--device cpu runs the same code on the CPU (ORT's CPU provider, torch on the CPU): what the tests
run. With --device cuda, a runner whose library has no CUDA (torch without a GPU, the CPU build of
onnxruntime, no /dev/nvidia0 for ours) is reported as skipped, with the reason, and is not an error.
Writes OUT/<runner>_b<B>.json and OUT/gpu.md (the table, also printed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import List, Optional

import numpy as np

from . import common, ort_python, torch_ref

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNNERS = {"ours": "autoui (Go + ORT)", "torch_fp32": "PyTorch eager fp32", "torch_bf16": "PyTorch eager bf16",
           "ort_iobind": "ONNX Runtime, Python, IO binding"}


def skip_reason(runner: str, device: str) -> Optional[str]:
    """Why runner cannot run on device here, or None."""
    if device != "cuda":
        return None
    if runner == "ours":
        return None if os.path.exists("/dev/nvidia0") else "no GPU here (/dev/nvidia0)"
    try:
        if runner.startswith("torch"):
            import torch
            return None if torch.cuda.is_available() else f"torch {torch.__version__} sees no CUDA device"
        import onnxruntime as ort
    except ImportError as e:
        return f"not installed here ({e})"
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return f"onnxruntime {ort.__version__} here has no CUDA provider (the GPU build is onnxruntime-gpu)"
    return None


def batch_cases(inputs: dict, batch: int) -> List[dict]:
    cases = inputs["cases"]
    return [cases[i % len(cases)] for i in range(batch)]


def load_screen(path: str):
    from PIL import Image
    img = Image.open(path)
    img.load()
    return img.convert("RGB")


def pad(rows: List[List[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Right-padded ids [B, n] and their mask."""
    n = max(len(r) for r in rows)
    ids = np.full((len(rows), n), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), n), dtype=np.int64)
    for i, r in enumerate(rows):
        ids[i, :len(r)], mask[i, :len(r)] = r, 1
    return ids, mask


class OrtBound(ort_python.Runner):
    """ORT-Python's loop for a batch, the decoder's state on the device by IO binding."""

    def __init__(self, bundle: str, threads: int, device: str):
        super().__init__(bundle, threads, provider=device)
        self.device = device

    def batch(self, items: List[dict], tokens: int) -> dict:
        clk = common.Clock()
        imgs = clk.time("decode_image", lambda: [load_screen(c["screen"]) for c in items])
        px = clk.time("preprocess", lambda: np.stack([ort_python.preprocess(i, self.manifest["preprocess"]) for i in imgs]))
        feats = clk.time("vision", self.vision.run, None, {"pixel_values": px})[0]
        rows = clk.time("tokenize", lambda: [self.tok.encode(c["source_text"]).ids for c in items])
        ids, mask = pad(rows, self.manifest["tokens"]["pad_id"])
        hidden = clk.time("encoder", self.encoder.run, None, {"input_ids": ids, "attention_mask": mask})[0]
        fused = clk.time("fusion", self.fusion.run, None, {"encoder_hidden_states": hidden, "attention_mask": mask,
                                                            "image_features": feats})[0]
        rows, calls = self.greedy_bound(fused, mask, tokens, clk)
        return {"stages": clk.stages, "ids": rows[0], "all_ids": rows, "decoder_calls": calls}

    def greedy_bound(self, fused, mask, tokens: int, clk: common.Clock):
        import onnxruntime as ort
        B = fused.shape[0]
        t = time.perf_counter()
        io = self.cross.io_binding()
        io.bind_cpu_input("encoder_hidden_states", fused)
        for n in self.cross_names:
            io.bind_output(n, self.device)
        self.cross.run_with_iobinding(io)
        past = {n.replace("present.", "past_key_values."): v for n, v in zip(self.cross_names, io.get_outputs())}
        mask_v = ort.OrtValue.ortvalue_from_numpy(mask, self.device, 0)
        empty = ort.OrtValue.ortvalue_from_numpy(np.zeros((B, self.heads, 0, self.dkv), np.float32), self.device, 0)
        for i in range(self.layers):
            for kv in ("key", "value"):
                past[f"past_key_values.{i}.decoder.{kv}"] = empty
        cross_s = time.perf_counter() - t
        tok = np.full((B, 1), self.start, dtype=np.int64)
        out, calls = [], 0
        while calls < tokens:
            io = self.decoder.io_binding()
            io.bind_cpu_input("input_ids", tok)
            io.bind_ortvalue_input("encoder_attention_mask", mask_v)
            for k, v in past.items():
                io.bind_ortvalue_input(k, v)
            for n in self.out_names:
                io.bind_output(n, "cpu" if n == "logits" else self.device)
            t = time.perf_counter()
            self.decoder.run_with_iobinding(io)
            named = dict(zip(self.out_names, io.get_outputs()))
            logits = named["logits"].numpy()[:, -1]  # the copy down is part of the call
            dt = time.perf_counter() - t
            clk.add("first_step" if calls == 0 else "later_steps", dt + (cross_s if calls == 0 else 0.0))
            calls += 1
            for i in range(self.layers):
                for kv in ("key", "value"):
                    past[f"past_key_values.{i}.decoder.{kv}"] = named[f"present.{i}.decoder.{kv}"]
            logits[:, self.eos] = -np.inf  # the fixed length: </s> masked throughout
            tok = np.argmax(logits, axis=-1).astype(np.int64)[:, None]
            out.append(tok[:, 0])
        return np.stack(out, axis=1).tolist(), calls


def torch_batch(r: torch_ref.Runner, items: List[dict], tokens: int) -> dict:
    """The PyTorch peer on a batch: HF generate, stage times from its hooks (synchronized)."""
    torch, am = r.torch, r.am
    r.clk = clk = common.Clock()
    r.steps = 0
    imgs = clk.time("decode_image", lambda: [load_screen(c["screen"]) for c in items])
    px = clk.time("preprocess", lambda: torch.from_numpy(np.stack([r.vis.preprocess(i, r.tower.config.image_size)
                                                                   for i in imgs])).to(r.device, r.dtype))
    with torch.inference_mode():
        feats = clk.time("vision", lambda: (r.tower.reference(px), r.sync())[0])
        rows = clk.time("tokenize", lambda: [am.encode_source(r.tok, c["source_text"], r.max_source)[0] for c in items])
        ids, mask = (torch.from_numpy(a).to(r.device) for a in pad(rows, r.model.config.pad_token_id))
        t = time.perf_counter()
        gen = r.model.generate(input_ids=ids, attention_mask=mask, image_features=feats, max_new_tokens=tokens,
                               min_new_tokens=tokens, do_sample=False, num_beams=1, use_cache=True,
                               decoder_start_token_id=r.model.config.decoder_start_token_id,
                               eos_token_id=r.model.config.eos_token_id, pad_token_id=r.model.config.pad_token_id)
        rows = gen[:, 1:].tolist()  # on the host: synchronized
        clk.add("generate", time.perf_counter() - t)
    return {"stages": clk.stages, "ids": rows[0], "all_ids": rows, "decoder_calls": r.steps}


def measure(fn, items: List[dict], tokens: int, runs: int, warmup: int) -> List[dict]:
    """fn(items, tokens) warmup + runs times; each measured batch with its wall time."""
    out = []
    for r in range(-warmup, runs):
        t = time.perf_counter()
        b = fn(items, tokens)
        b["wall"] = time.perf_counter() - t
        if len(b["ids"]) != tokens:
            raise SystemExit(f"generated {len(b['ids'])} tokens, want {tokens}")
        if r >= 0:
            out.append(b)
    return out


def batch_report(runner: str, device: str, batch: int, batches: List[dict], notes: List[str]) -> dict:
    per_s = [batch / b["wall"] for b in batches]
    stages = {}
    for name in {k for b in batches for k in b["stages"]}:
        stages[name] = common.summarize([b["stages"][name] for b in batches if name in b["stages"]])
    calls = [b["decoder_calls"] for b in batches if b["decoder_calls"] > 1]
    if calls and "later_steps" in stages:
        stages["decode_step"] = common.summarize([b["stages"]["later_steps"] / (b["decoder_calls"] - 1)
                                                  for b in batches if b["decoder_calls"] > 1])
    return {"runner": runner, "provider": device, "batch": batch, "stages": stages,
            "wall": common.summarize([b["wall"] for b in batches]),
            "screens_per_s": {"min": round(min(per_s), 3), "median": round(common.median(per_s), 3),
                              "max": round(max(per_s), 3)},
            "decoder_calls": common.median([b["decoder_calls"] for b in batches]),
            "generated_ids": batches[0]["ids"], "peak_rss_mb": round(common.peak_rss_mb(), 1), "notes": notes}


def run_peer(args) -> int:
    inputs = common.load_inputs(args.inputs)
    items, tokens = batch_cases(inputs, args.batch), inputs["tokens"]
    if args.runner == "ort_iobind":
        import onnxruntime
        r = OrtBound(args.model, args.threads, args.device)
        fn, notes = r.batch, [f"onnxruntime {onnxruntime.__version__}, IO binding: cross K/V and cache on the device"]
    else:
        dtype = args.runner.split("_")[1]
        r = torch_ref.Runner(args.model, args.threads, args.checkpoint, args.vision, device=args.device, dtype=dtype)
        fn, notes = (lambda items, tokens: torch_batch(r, items, tokens)), [
            f"torch {r.torch.__version__} eager {dtype}, HF generate, min_new_tokens = max_new_tokens"]
    doc = batch_report(args.runner, args.device, args.batch, measure(fn, items, tokens, args.runs, args.warmup), notes)
    common.write(doc, args.json)
    return 0


def fmt(v: Optional[float]) -> str:
    return "–" if v is None else (f"{v:.1f}" if v >= 10 else f"{v:.2f}")


def table(docs: dict, skipped: dict, failed: dict, runners: List[str], batches: List[int]) -> List[str]:
    lines = ["| runner | batch | screens/s | per screen | vision (per batch) | decode step | vs ours |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for key in runners:
        name = RUNNERS[key]
        if key in skipped:
            lines.append(f"| {name} | – | skipped: {skipped[key]} | | | | |")
            continue
        for b in batches:
            d = docs.get((key, b))
            if d is None:
                lines.append(f"| {name} | {b} | failed: {failed.get((key, b), '?')} | | | | |")
                continue
            sps = d["screens_per_s"]["median"]
            ours = docs.get(("ours", b))
            st = d["stages"]
            lines.append("| " + " | ".join([
                name, str(b), fmt(sps), f"{fmt(1000 / sps)} ms" if sps else "–",
                f"{fmt(st['vision']['median_ms'])} ms" if "vision" in st else "–",
                f"{fmt(st['decode_step']['median_ms'])} ms" if "decode_step" in st else "–",
                f"{sps / ours['screens_per_s']['median']:.2f}×" if ours and sps else "–"]) + " |")
    return lines


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["peer"]:  # the child process of one runner at one batch size
        p = common.parser("one GPU peer at one batch size")
        p.add_argument("--runner", choices=["torch_fp32", "torch_bf16", "ort_iobind"], required=True)
        p.add_argument("--batch", type=int, required=True)
        p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
        p.add_argument("--checkpoint")
        p.add_argument("--vision")
        return run_peer(p.parse_args(argv[1:]))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True)
    p.add_argument("--batches", default="1,8,32")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=2, help="CPU threads of each runner's host side")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--autoui", default=os.path.join(ROOT, "build", "autoui"))
    p.add_argument("--runners", default=",".join(RUNNERS))
    p.add_argument("--checkpoint", help="for torch: the checkpoint a non-random bundle came from")
    p.add_argument("--vision", help="for torch: the BLIP-2 directory of a bundle's real tower")
    p.add_argument("--out", help="default build/bench-gpu/<bundle name>")
    args = p.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",") if b]
    out = args.out or os.path.join(ROOT, "build", "bench-gpu", os.path.basename(os.path.normpath(args.model)))
    os.makedirs(out, exist_ok=True)
    inputs = os.path.join(out, "inputs.json")
    provider = "cuda" if args.device == "cuda" else "cpu"
    docs, failed = {}, {}
    runners = [r for r in RUNNERS if r in args.runners.split(",")]
    skipped = {k: reason for k in runners if (reason := skip_reason(k, args.device))}
    for key, reason in skipped.items():
        print(f"== {key}: skipped: {reason}", file=sys.stderr)
    # The peers' inputs (screens, prompts, token count) come from one pass of ours over the cases,
    # on the CPU provider where ours cannot run here (whether or not ours is among the runners).
    cmd = [args.autoui, "bench", "--model", args.model, "--runs", "1", "--warmup", "0", "--replay", "typical",
           "--provider", "cpu" if skip_reason("ours", args.device) else provider, "--probe=false", "--no-verify", "--peer-inputs", inputs]
    if subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL).returncode:
        raise SystemExit("autoui bench could not write the peers' inputs")
    for key in runners:
        if key in skipped:
            continue
        for b in batches:
            path = os.path.join(out, f"{key}_b{b}.json")
            if key == "ours":
                cmd = [args.autoui, "bench", "--model", args.model, "--provider", provider, "--batch", str(b),
                       "--runs", str(args.runs), "--warmup", str(args.warmup), "--replay", "typical", "--no-verify",
                       "--prompt-groups", "1", "--threads", str(args.threads), "--json"]
            else:
                cmd = [sys.executable, "-m", "scripts.peers.gpu", "peer", "--runner", key, "--batch", str(b),
                       "--device", args.device, "--model", args.model, "--inputs", inputs, "--runs", str(args.runs),
                       "--warmup", str(args.warmup), "--threads", str(args.threads), "--json", path]
                cmd += [x for f, v in (("--checkpoint", args.checkpoint), ("--vision", args.vision)) if v for x in (f, v)]
            print(f"== {key} batch {b}: {' '.join(cmd)}", file=sys.stderr, flush=True)
            with open(path if key == "ours" else os.devnull, "wb") as f:
                rc = subprocess.run(cmd, cwd=ROOT, stdout=f, env=dict(os.environ, ORT_DISABLE_TELEMETRY="1")).returncode
            if rc:
                failed[(key, b)] = f"exit status {rc}"
                continue
            with open(path) as f:
                docs[(key, b)] = json.load(f)
    lines = [f"### GPU peers: bundle `{os.path.basename(os.path.normpath(args.model))}`, device {args.device}", "",
             f"Medians over {args.runs} batches after {args.warmup} warm-up; a batch = the 3 cases round-robin; "
             "screens/s includes image decoding; vs ours = screens/s over ours' at the same batch.", ""]
    lines += table(docs, skipped, failed, runners, batches)
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "gpu.md"), "w") as f:
        f.write(text)
    print(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
