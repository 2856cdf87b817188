"""Peer: OpenVINO's CPU plugin on the bundle's own four ONNX graphs, with the ORT-Python loop.

  python -m scripts.peers.ov --model DIR --inputs inputs.json --threads 2 [--json OUT]
  python -m scripts.peers.ov --model DIR --inputs inputs.json --verify   # tokens vs ONNX Runtime

Each graph (vision, encoder, fusion, the decoder's cross graph and with-past graph) is read
by OpenVINO's ONNX frontend and compiled for "CPU" with INFERENCE_NUM_THREADS = --threads,
PERFORMANCE_HINT = LATENCY (one stream) and INFERENCE_PRECISION_HINT = f32 (the CPU plugin
would otherwise run bf16 on CPUs that have it). Everything else is scripts.peers.ort_python's
runner: the same PIL + numpy preprocessing, `tokenizers`, the same KV-cache greedy loop
(one infer request per graph, numpy feeds, `</s>` masked for the fixed length), the same stages.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from . import common, ort_python


class Output:
    def __init__(self, name: str):
        self.name = name


class Session:
    """An OpenVINO compiled model behind the two calls ort_python's runner makes of an
    onnxruntime.InferenceSession: run(None, feed) -> outputs in order, get_outputs().
    Ports are looked up by every tensor name they carry (OpenVINO may give a port an internal
    name first, e.g. pixel_values' port answers get_any_name() with a Cast's output), and an
    input missing from a feed is an error (OpenVINO would run on an empty tensor)."""

    def __init__(self, core, path: str, threads: int, spec: dict):
        cfg = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1,
               "INFERENCE_PRECISION_HINT": "f32"}
        self.compiled = core.compile_model(core.read_model(path), "CPU", cfg)
        self.request = self.compiled.create_infer_request()

        def ports(plist, want):
            by_name = {n: p for p in plist for n in p.get_names()}
            missing = [n for n in want if n not in by_name]
            if missing:
                raise SystemExit(f"{path}: OpenVINO model has no tensor named {missing}")
            return {n: by_name[n] for n in want}

        self.inputs = ports(self.compiled.inputs, [i["name"] for i in spec["inputs"]])
        self.names = [o["name"] for o in spec["outputs"]]
        self.outputs = list(ports(self.compiled.outputs, self.names).values())

    def get_outputs(self):
        return [Output(n) for n in self.names]

    def run(self, _names, feed: dict):
        if set(feed) != set(self.inputs):
            raise ValueError(f"feed {sorted(feed)} != inputs {sorted(self.inputs)}")
        res = self.request.infer({self.inputs[k]: v for k, v in feed.items()})
        # infer copies the outputs into fresh numpy arrays (share_outputs=False): safe to feed back
        return [res[p] for p in self.outputs]


class Runner(ort_python.Runner):
    def __init__(self, bundle: str, threads: int):  # noqa: super().__init__ would build ORT sessions
        import openvino as ov
        from tokenizers import Tokenizer
        self.manifest = m = ort_python.load_manifest(bundle)
        files = m["files"]
        core = ov.Core()
        self.vision = Session(core, os.path.join(bundle, files["vision"]["path"]), threads, files["vision"])
        self.encoder = Session(core, os.path.join(bundle, files["encoder"]["path"]), threads, files["encoder"])
        self.fusion = Session(core, os.path.join(bundle, files["fusion"]["path"]), threads, files["fusion"])
        cfg = m["model"]
        self.decoder = Session(core, os.path.join(bundle, files["decoder"]["path"]), threads, files["decoder"])
        self.cross = Session(core, os.path.join(bundle, files["decoder_cross"]["path"]), threads, files["decoder_cross"])
        self.tok = Tokenizer.from_file(os.path.join(bundle, files["tokenizer"]["path"]))
        self.tok.no_padding()
        self.tok.enable_truncation(m["prompt"]["max_source_tokens"])
        self.layers, self.heads, self.dkv = cfg["num_decoder_layers"], cfg["num_heads"], cfg["d_kv"]
        self.eos = m["tokens"]["eos_id"]
        self.start = m["tokens"]["decoder_start_id"]
        self.max_source = m["prompt"]["max_source_tokens"]
        self.out_names = self.decoder.names
        self.cross_names = self.cross.names
        props = self.decoder.compiled
        self.settings = {}
        for k in ("INFERENCE_NUM_THREADS", "PERFORMANCE_HINT", "NUM_STREAMS", "INFERENCE_PRECISION_HINT"):
            v = props.get_property(k)
            self.settings[k] = v.get_type_name() if hasattr(v, "get_type_name") else str(v)


def verify(bundle: str, inputs: dict, threads: int, log=print) -> dict:
    """Greedy tokens of OpenVINO vs ONNX Runtime (both through ort_python's loop) on every case,
    and the max |diff| of the first decoder call's logits."""
    ovr = Runner(bundle, threads)
    ortr = ort_python.Runner(bundle, threads)
    n = inputs["tokens"]
    out = {"cases": []}
    for case in inputs["cases"]:
        a, b = ovr.one(case, n)["ids"], ortr.one(case, n)["ids"]
        same = 0
        for x, y in zip(a, b):
            if x != y:
                break
            same += 1
        logit_diff = first_logits_diff(ovr, ortr, case)
        out["cases"].append({"id": case["id"], "equal": a == b, "same_prefix": same, "tokens": n,
                             "first_step_logit_maxdiff": logit_diff})
        log(f"case {case['id']}: {same}/{n} tokens equal to ONNX Runtime; first-step logits max |diff| {logit_diff:.2e}")
    return out


def first_logits_diff(ovr, ortr, case) -> float:
    from PIL import Image
    img = Image.open(case["screen"]).convert("RGB")
    px = ort_python.preprocess(img, ovr.manifest["preprocess"])[None]
    ids = np.asarray([ovr.tok.encode(case["source_text"]).ids], dtype=np.int64)
    mask = np.ones_like(ids)
    logits = []
    for r in (ovr, ortr):
        feats = r.vision.run(None, {"pixel_values": px})[0]
        hidden = r.encoder.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        fused = r.fusion.run(None, {"encoder_hidden_states": hidden, "attention_mask": mask, "image_features": feats})[0]
        feed = {"input_ids": np.asarray([[r.start]], dtype=np.int64), "encoder_attention_mask": mask,
                **r.first_past(fused)}
        res = dict(zip(r.out_names, r.decoder.run(None, feed)))
        logits.append(res["logits"][0, -1])
    return float(np.max(np.abs(logits[0] - logits[1])))


def main(argv=None) -> int:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--verify", action="store_true", help="compare greedy tokens with ONNX Runtime instead of timing")
    args = p.parse_args(argv)
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    inputs = common.load_inputs(args.inputs)
    if args.verify:
        res = verify(args.model, inputs, args.threads, log=lambda s: print(s, file=sys.stderr))
        common.write(res, args.json)
        return 0 if all(c["equal"] for c in res["cases"]) else 1
    t = time.perf_counter()
    r = Runner(args.model, args.threads)
    load_s = time.perf_counter() - t
    actions = common.run_cases(inputs, args.runs, args.warmup, r.one)
    import openvino
    doc = common.report("openvino", r.manifest["model"]["size"], args.threads, actions, inputs,
                        [f"openvino {openvino.__version__}, CPU plugin, "
                         + ", ".join(f"{k} {v}" for k, v in r.settings.items()),
                         "the bundle's ONNX graphs compiled by OpenVINO; ort_python's greedy KV-cache loop",
                         "preprocess: PIL bicubic + numpy; tokenizer: tokenizers (Rust)"],
                        {"load_s": round(load_s, 2)})
    common.write(doc, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
