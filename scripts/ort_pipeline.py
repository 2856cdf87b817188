"""The bundle run with ONNX Runtime from Python: the same steps the Go engine takes
(vision -> encoder -> fusion -> cross-attention K/V once -> greedy loop of the with-past decoder,
starting from a zero-length past). Used to check fixtures and in tests. Bundle format 2 only
(`python -m scripts.upgrade_bundle DIR` upgrades a format-1 bundle)."""

from __future__ import annotations

import json
import os

import numpy as np

from .bundle_format import format_error


class Bundle:
    def __init__(self, bundle_dir: str, threads: int = 1):
        import onnxruntime as ort
        self.dir = bundle_dir
        with open(os.path.join(bundle_dir, "manifest.json")) as f:
            self.manifest = json.load(f)
        if err := format_error(bundle_dir, self.manifest):
            raise ValueError(err)
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        self.sessions = {role: ort.InferenceSession(os.path.join(bundle_dir, spec["path"]), so,
                                                    providers=["CPUExecutionProvider"])
                         for role, spec in self.manifest["files"].items() if role != "tokenizer"}
        m = self.manifest["model"]
        self.layers, self.heads, self.d_kv = m["num_decoder_layers"], m["num_heads"], m["d_kv"]
        self.tokens = self.manifest["tokens"]
        # the K/V cache's type: float32, or float16 (scripts.half --fp16-cache)
        past = next(t for t in self.manifest["files"]["decoder"]["inputs"] if t["name"].startswith("past_key_values."))
        self.cache_dtype = np.float16 if past["dtype"] == "float16" else np.float32

    def prompt_ids(self, text: str) -> list[int]:
        """The source text as the engine feeds it: whitespace collapsed, the bundle's tokenizer,
        </s> last, right-truncated at the manifest's max_source_tokens."""
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(os.path.join(self.dir, self.manifest["files"]["tokenizer"]["path"]))
        eos, limit = self.tokens["eos_id"], self.manifest["prompt"]["max_source_tokens"]
        ids = tok.encode(" ".join(text.split())).ids
        if not ids or ids[-1] != eos:
            ids.append(eos)
        return ids[:limit - 1] + [eos] if len(ids) > limit else ids

    def image_features(self, pixel_values: np.ndarray) -> np.ndarray:
        return self.sessions["vision"].run(["image_features"], {"pixel_values": pixel_values[None]})[0][0]

    def encode(self, input_ids, image_features) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ids = np.asarray([input_ids], dtype=np.int64)
        mask = np.ones_like(ids)
        h = self.sessions["encoder"].run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask})[0]
        fused = self.sessions["fusion"].run(["fused_hidden_states"], {
            "encoder_hidden_states": h, "attention_mask": mask,
            "image_features": np.asarray([image_features], dtype=np.float32)})[0]
        return h[0], fused[0], mask

    def cross_kv(self, fused) -> list:
        """The cross-attention K/V of the fused states ([T, d_model]): per layer key, value."""
        names = [f"present.{i}.encoder.{kv}" for i in range(self.layers) for kv in ("key", "value")]
        return self.sessions["decoder_cross"].run(names, {"encoder_hidden_states": fused[None]})

    def decoder_step(self, ids, fused, mask, past):
        """Logits [len(ids), vocab] and the state for the next call. past None: the first call
        (cross K/V computed here, zero-length self-attention past); else the returned state."""
        if past is None:
            empty = np.zeros((1, self.heads, 0, self.d_kv), self.cache_dtype)
            past = ([empty] * (2 * self.layers), self.cross_kv(fused))
        self_kv, cross = past
        feed = {"input_ids": np.asarray([ids], dtype=np.int64), "encoder_attention_mask": mask}
        for i in range(self.layers):
            for j, kv in enumerate(("key", "value")):
                feed[f"past_key_values.{i}.decoder.{kv}"] = self_kv[2 * i + j]
                feed[f"past_key_values.{i}.encoder.{kv}"] = cross[2 * i + j]
        names = ["logits"] + [f"present.{i}.decoder.{kv}" for i in range(self.layers) for kv in ("key", "value")]
        outs = self.sessions["decoder"].run(names, feed)
        return outs[0][0], (list(outs[1:]), cross)

    def greedy(self, input_ids, image_features, max_new_tokens: int = 128):
        """Generated ids (without the start token, with </s> if produced) and the logits of each step."""
        _, fused, mask = self.encode(input_ids, image_features)
        past = None
        token = self.tokens["decoder_start_id"]
        out, logits = [], []
        for _ in range(max_new_tokens):
            step_logits, past = self.decoder_step([token], fused, mask, past)
            logits.append(step_logits[-1])
            token = int(np.argmax(step_logits[-1]))
            out.append(token)
            if token == self.tokens["eos_id"]:
                break
        return out, np.stack(logits)
