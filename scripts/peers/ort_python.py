"""Peer: ONNX Runtime from Python on the bundle's own graphs, with a KV-cache greedy loop.

  python -m scripts.peers.ort_python --model DIR --inputs inputs.json --threads 2 [--json OUT]

The decoder is bundle format 2's: the cross graph (decoder_cross_model.onnx) once per request,
then the with-past decoder from a zero-length past; first_step is both of the first call's runs.
Preprocessing is PIL's bicubic resize + numpy normalization (BlipImageProcessor's math),
tokenization the `tokenizers` library on the bundle's tokenizer.json. Neither torch nor
transformers is imported, so the peak RSS is ONNX Runtime's and numpy's alone.
"""

from __future__ import annotations

import os
import sys
import time


import numpy as np

from ..bundle_format import format_error
from . import common



def preprocess(img, pp: dict) -> np.ndarray:
    """(3, H, W) float32: bicubic resize, rescale, normalize (as BlipImageProcessor)."""
    from PIL import Image
    x = np.asarray(img.resize((pp["width"], pp["height"]), Image.BICUBIC), dtype=np.float32)
    x = x * np.float32(pp["rescale_factor"])
    x = (x - np.asarray(pp["mean"], dtype=np.float32)) / np.asarray(pp["std"], dtype=np.float32)
    return np.ascontiguousarray(x.transpose(2, 0, 1))


def session(path: str, threads: int, provider: str = "cpu"):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if provider == "cuda" else ["CPUExecutionProvider"]
    return ort.InferenceSession(path, sess_options=so, providers=providers)


def load_manifest(bundle: str) -> dict:
    """The bundle's manifest; a bundle of another format than 2 is refused (exits), in one line."""
    m = common.load_manifest(bundle)
    if err := format_error(bundle, m):
        raise SystemExit(err)
    return m


class Runner:
    def __init__(self, bundle: str, threads: int, provider: str = "cpu"):
        from tokenizers import Tokenizer
        self.manifest = m = load_manifest(bundle)
        files = m["files"]
        self.vision, self.encoder, self.fusion, self.decoder, self.cross = (
            session(os.path.join(bundle, files[role]["path"]), threads, provider)
            for role in ("vision", "encoder", "fusion", "decoder", "decoder_cross"))
        self.tok = Tokenizer.from_file(os.path.join(bundle, files["tokenizer"]["path"]))
        self.tok.no_padding()
        self.tok.enable_truncation(m["prompt"]["max_source_tokens"])
        cfg = m["model"]
        self.layers, self.heads, self.dkv = cfg["num_decoder_layers"], cfg["num_heads"], cfg["d_kv"]
        self.eos = m["tokens"]["eos_id"]
        self.start = m["tokens"]["decoder_start_id"]
        self.max_source = m["prompt"]["max_source_tokens"]
        self.out_names = [o.name for o in self.decoder.get_outputs()]
        self.cross_names = [o.name for o in self.cross.get_outputs()]

    def one(self, case: dict, tokens: int) -> dict:
        from PIL import Image
        clk = common.Clock()

        def load():
            img = Image.open(case["screen"])
            img.load()
            return img.convert("RGB")

        img = clk.time("decode_image", load)
        pixels = clk.time("preprocess", preprocess, img, self.manifest["preprocess"])
        feats = clk.time("vision", self.vision.run, None, {"pixel_values": pixels[None]})[0]
        ids = clk.time("tokenize", lambda: self.tok.encode(case["source_text"]).ids)
        if len(ids) != case["source_tokens"]:
            print(f"warning: case {case['id']}: {len(ids)} tokens here, {case['source_tokens']} in Go", file=sys.stderr)
        input_ids = np.asarray([ids], dtype=np.int64)
        mask = np.ones_like(input_ids)
        hidden = clk.time("encoder", self.encoder.run, None, {"input_ids": input_ids, "attention_mask": mask})[0]
        fused = clk.time("fusion", self.fusion.run, None, {"encoder_hidden_states": hidden, "attention_mask": mask,
                                                            "image_features": feats})[0]
        out, calls = self.greedy(fused, mask, tokens, clk)
        text = clk.time("parse", self.decode_and_parse, out)
        del text
        stages = dict(clk.stages)
        if calls > 1:
            stages["decode_step"] = stages["later_steps"] / (calls - 1)
        return {"stages": stages, "ids": out, "decoder_calls": calls}

    def first_past(self, fused) -> dict:
        """The first decoder call's pasts: the cross graph's K/V (every call's encoder pasts, run
        once per request) and zero-length self-attention pasts."""
        past = dict(zip([n.replace("present.", "past_key_values.") for n in self.cross_names],
                        self.cross.run(None, {"encoder_hidden_states": fused})))
        empty = np.zeros((fused.shape[0], self.heads, 0, self.dkv), dtype=np.float32)
        for i in range(self.layers):
            for kv in ("key", "value"):
                past[f"past_key_values.{i}.decoder.{kv}"] = empty
        return past

    def greedy(self, fused, mask, tokens: int, clk: common.Clock):
        L = self.layers
        t = time.perf_counter()
        past = self.first_past(fused)
        cross_s = time.perf_counter() - t
        tok, out, calls = self.start, [], 0
        while len(out) < tokens:
            feed = {"input_ids": np.asarray([[tok]], dtype=np.int64), "encoder_attention_mask": mask, **past}
            t = time.perf_counter()
            res = self.decoder.run(None, feed)
            dt = time.perf_counter() - t
            clk.add("first_step" if calls == 0 else "later_steps", dt + (cross_s if calls == 0 else 0.0))
            calls += 1
            named = dict(zip(self.out_names, res))
            for i in range(L):
                for kv in ("key", "value"):
                    past[f"past_key_values.{i}.decoder.{kv}"] = named[f"present.{i}.decoder.{kv}"]
            logits = named["logits"][0, -1]
            if len(out) < tokens:  # the fixed length: </s> masked until then
                logits[self.eos] = -np.inf
            tok = int(np.argmax(logits))
            out.append(tok)
        return out, calls

    def decode_and_parse(self, ids):
        return common.decode_and_parse(self.tok, ids)


def main(argv=None) -> int:
    args = common.parser(__doc__.splitlines()[0]).parse_args(argv)
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    inputs = common.load_inputs(args.inputs)
    t = time.perf_counter()
    r = Runner(args.model, args.threads)
    load_s = time.perf_counter() - t
    actions = common.run_cases(inputs, args.runs, args.warmup, r.one)
    import onnxruntime
    doc = common.report("onnxruntime-python", r.manifest["model"]["size"], args.threads, actions, inputs,
                        [f"onnxruntime {onnxruntime.__version__}, numpy feeds, a new dict of outputs per step",
                         "preprocess: PIL bicubic + numpy; tokenizer: tokenizers (Rust)"],
                        {"load_s": round(load_s, 2)})
    common.write(doc, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
