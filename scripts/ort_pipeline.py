"""The bundle run with ONNX Runtime from Python: the same steps the Go engine takes
(vision -> encoder -> fusion -> greedy decoder loop with the merged decoder's cache).
Used to check fixtures and in tests."""

from __future__ import annotations

import json
import os

import numpy as np


class Bundle:
    def __init__(self, bundle_dir: str, threads: int = 1):
        import onnxruntime as ort
        with open(os.path.join(bundle_dir, "manifest.json")) as f:
            self.manifest = json.load(f)
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

    def decoder_step(self, ids, fused, mask, past):
        feed = {"input_ids": np.asarray([ids], dtype=np.int64), "encoder_attention_mask": mask,
                "encoder_hidden_states": fused[None], "use_cache_branch": np.array([past is not None])}
        if past is None:
            empty = np.zeros((1, self.heads, 0, self.d_kv), np.float32)
            past = [empty] * (4 * self.layers)
        for i in range(self.layers):
            for j, name in enumerate(("decoder.key", "decoder.value", "encoder.key", "encoder.value")):
                feed[f"past_key_values.{i}.{name}"] = past[4 * i + j]
        outs = self.sessions["decoder"].run(None, feed)
        present = list(outs[1:])
        if feed["use_cache_branch"][0]:
            # the cached branch returns empty cross K/V (optimum layout): keep the first call's
            for i in range(self.layers):
                present[4 * i + 2], present[4 * i + 3] = past[4 * i + 2], past[4 * i + 3]
        return outs[0][0], present

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
