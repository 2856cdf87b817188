"""Peer: the PyTorch reference — the Auto-UI model in Python with Hugging Face generate, which is
what Auto-UI users run today.

  python -m scripts.peers.torch_ref --model DIR --inputs inputs.json --threads 2 [--json OUT]
  (add --checkpoint CKPT_DIR [--vision BLIP2_DIR] for a bundle exported from a checkpoint)

A random-weight bundle records its source in the manifest (exporter.source =
"random:SIZE:seed=N[;vision=random:VSIZE]"); the same seed rebuilds the same weights here, as
scripts.export built them. Generation: greedy, one beam, KV cache, min_new_tokens =
max_new_tokens = the fixed length (HF masks </s> until then). As in Auto-UI's model, the fusion
runs again inside every decoder step; the encoder runs once (timed with a forward hook).
"""

from __future__ import annotations

import os
import re
import sys
import time

from . import common


def parse_source(source: str):
    """("base", 0, "vitg") from "random:base:seed=0;vision=random:vitg"; vision None = same as size."""
    m = re.fullmatch(r"random:(\w+):seed=(\d+)(?:;vision=random:(\w+))?", source)
    if not m:
        return None
    return m.group(1), int(m.group(2)), m.group(3)


class Runner:
    def __init__(self, bundle: str, threads: int, checkpoint: str | None = None, vision: str | None = None,
                 device: str = "cpu", dtype: str = "fp32"):
        import torch
        from .. import autoui_model as am
        from .. import vision as vis
        self.torch, self.am, self.vis = torch, am, vis
        torch.set_num_threads(threads)
        self.manifest = m = common.load_manifest(bundle)
        src = parse_source(m["exporter"]["source"])
        cfg = m["model"]
        if checkpoint:
            self.model = am.load_checkpoint(checkpoint)
        elif src:
            size, seed, _ = src
            self.model = am.random_model(size, cfg["vocab_size"], cfg["image_dim"], seed)
        else:
            raise SystemExit(f"bundle {bundle} was exported from {m['exporter']['source']!r}: pass --checkpoint")
        if vision:
            self.tower = vis.load_vision(vision)
        elif "vision=blip2:" in m["exporter"]["source"]:
            raise SystemExit(f"bundle {bundle} has a BLIP-2 vision tower ({m['exporter']['source']!r}): pass --vision")
        else:
            vsize = None
            for name, vc in vis.VISION_SIZES.items():
                if vc["hidden_size"] == m["vision"]["hidden_size"] and vc["num_hidden_layers"] == m["vision"]["num_layers"]:
                    vsize = name
            if vsize is None:
                raise SystemExit(f"bundle {bundle}: vision tower {m['vision']} is none of {sorted(vis.VISION_SIZES)}")
            vseed = src[1] if src else int(re.search(r"vision=random:\w+:seed=(\d+)", m["exporter"]["source"]).group(1))
            self.tower = vis.random_vision(vsize, vseed)
        # cuda / bf16: the GPU peers (scripts.peers.gpu); hooks then synchronize to time the work
        self.device, self.dtype = torch.device(device), {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
        self.model.to(self.device, self.dtype).eval()
        self.tower.to(self.device, self.dtype).eval()
        self.tok = am.load_tokenizer(os.path.join(bundle, m["files"]["tokenizer"]["path"]))
        self.max_source = m["prompt"]["max_source_tokens"]
        self.clk = None
        self._hooks()

    def _hooks(self):
        """Per-call timings inside generate: the encoder once, then one model forward per step."""
        starts = {}

        def pre(name):
            def f(_mod, _args, _kwargs=None):
                self.sync()
                starts[name] = time.perf_counter()
            return f

        def post(name):
            def f(_mod, _args, _out, _kwargs=None):
                self.sync()
                dt = time.perf_counter() - starts.pop(name)
                if name == "encoder":
                    self.clk.add("encoder", dt)
                elif self.steps == 0:
                    self.clk.add("first_step", dt)
                    self.steps += 1
                else:
                    self.clk.add("later_steps", dt)
                    self.steps += 1
            return f

        self.model.encoder.register_forward_pre_hook(pre("encoder"))
        self.model.encoder.register_forward_hook(post("encoder"))
        self.model.register_forward_pre_hook(pre("step"))
        self.model.register_forward_hook(post("step"))
        fuse = self.model.fuse

        def timed_fuse(*a, **k):
            t = time.perf_counter()
            out = fuse(*a, **k)
            if self.steps == 0:  # the first fusion; later ones are inside the steps' time
                self.clk.add("fusion", time.perf_counter() - t)
            return out

        self.model.fuse = timed_fuse

    def sync(self):
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def one(self, case: dict, tokens: int) -> dict:
        from PIL import Image
        torch, am = self.torch, self.am
        self.clk = clk = common.Clock()
        self.steps = 0

        def load():
            img = Image.open(case["screen"])
            img.load()
            return img.convert("RGB")

        img = clk.time("decode_image", load)
        pixels = clk.time("preprocess", lambda: torch.from_numpy(self.vis.preprocess(img, self.tower.config.image_size))[None]
                          .to(self.device, self.dtype))
        with torch.inference_mode():
            feats = clk.time("vision", lambda: (self.tower.reference(pixels), self.sync())[0])
            ids, _ = clk.time("tokenize", am.encode_source, self.tok, case["source_text"], self.max_source)
            input_ids = torch.tensor([ids], dtype=torch.long, device=self.device)
            t = time.perf_counter()
            out = self.model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                                      image_features=feats, max_new_tokens=tokens, min_new_tokens=tokens,
                                      do_sample=False, num_beams=1, use_cache=True,
                                      decoder_start_token_id=self.model.config.decoder_start_token_id,
                                      eos_token_id=self.model.config.eos_token_id,
                                      pad_token_id=self.model.config.pad_token_id)
            clk.add("generate", time.perf_counter() - t)
        gen = [int(i) for i in out[0, 1:]]

        def parse():
            try:
                am.parse_action_output(am.decode(self.tok, gen))
            except ValueError:
                pass  # random weights: not an action; the cost is what counts

        clk.time("parse", parse)
        stages = dict(clk.stages)
        if self.steps > 1:
            stages["decode_step"] = stages["later_steps"] / (self.steps - 1)
        return {"stages": stages, "ids": gen, "decoder_calls": self.steps}


def main(argv=None) -> int:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--checkpoint", help="Auto-UI checkpoint the bundle was exported from (non-random bundles)")
    p.add_argument("--vision", help="BLIP-2 directory the bundle's vision tower came from (vision=blip2:... bundles)")
    args = p.parse_args(argv)
    inputs = common.load_inputs(args.inputs)
    t = time.perf_counter()
    r = Runner(args.model, args.threads, args.checkpoint, args.vision)
    load_s = time.perf_counter() - t
    actions = common.run_cases(inputs, args.runs, args.warmup, r.one)
    import torch
    import transformers
    doc = common.report("pytorch-hf-generate", r.manifest["model"]["size"], args.threads, actions, inputs,
                        [f"torch {torch.__version__}, transformers {transformers.__version__}, fp32, inference_mode",
                         "HF generate: greedy, KV cache, min_new_tokens = max_new_tokens",
                         "fusion re-runs inside every step (Auto-UI's forward); the steps' times include it",
                         "preprocess: HF BlipImageProcessor"],
                        {"load_s": round(load_s, 2), "fusion_inside_steps": True})
    common.write(doc, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
