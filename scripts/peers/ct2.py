"""Peer: CTranslate2 on the bundle's T5 (the text path only: CTranslate2 has no image fusion).

  python -m scripts.peers.ct2 --model DIR --inputs inputs.json --threads 2 [--compute-type int8] [--json OUT]
  python -m scripts.peers.ct2 --model DIR --inputs inputs.json --verify   # tokens/log-probs vs PyTorch T5

CTranslate2 (the engine people pick for fast T5 on CPU) runs a plain encoder-decoder
Transformer: Auto-UI's fusion (image token -> 1-head attention -> sigmoid gate on the encoder
output) is not an operation it has, and it is not the identity even for zero image features
(biases and the gate remain). So this peer runs what it can: tokenize (the bundle's
tokenizer.json, as the other peers), then one `translate_batch` call = encoder on the prompt +
greedy decoding (beam 1) of exactly N tokens (min_decoding_length = max_decoding_length = N, so
`</s>` is masked until then, as for every runner), then detokenize/parse. The decoder attends
to the plain encoder output — the same shapes and cost as the fused states. No vision tower,
no fusion: those stages are absent from its report, and its tokens differ from ours by design.

Weights: the very T5 weights of the bundle. A random bundle records its source in the manifest
(exporter.source = "random:SIZE:seed=N..."), and scripts.autoui_model.random_model rebuilds the
same model in memory (as the PyTorch peer does); `--checkpoint` takes an Auto-UI checkpoint.
The model object goes straight into CTranslate2's own T5 loader through a small
`ctranslate2.converters.Converter` subclass (`InMemoryT5Converter`): nothing is read with
`from_pretrained`, so 4.8.5's `from_pretrained(..., dtype=...)` — which transformers 4.46.3
does not accept — is never called, and nothing in transformers or ctranslate2 is patched.
Conversions (float32 and int8) are cached in `<bundle>-ct2/<quantization>/`, with a stamp of
what they were made from.

Timing: `translate_batch(callback=...)` calls back once per generated token (beam 1), so the
time to the first callback is encoder + first decoder step (reported as `first_step`, with
`first_step_includes_encoder`), the callbacks after it give `later_steps` and `decode_step`,
and the whole call is `generate`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import List, Optional

from ..bundle_files import sha256_file
from . import common

STAMP = "autoui_ct2.json"
FILLER = "<autoui_ct2_fill_%d>"  # vocabulary rows past the tokenizer's (the lm_head keeps FLAN-T5's 32128)


# ---------------------------------------------------------------- conversion


class VocabAdapter:
    """The few tokenizer methods CTranslate2's T5 loader calls, over a `tokenizers` Tokenizer."""

    def __init__(self, tok, pad_id: int, eos_id: int, unk_id: int):
        self.tok = tok
        self.pad_token = tok.id_to_token(pad_id)
        self.eos_token = tok.id_to_token(eos_id)
        self.unk_token = tok.id_to_token(unk_id)

    def get_vocab(self) -> dict:
        return self.tok.get_vocab(with_added_tokens=True)

    def convert_ids_to_tokens(self, i: int) -> str:
        return self.tok.id_to_token(int(i))


def vocabulary(tok, vocab_size: int) -> List[str]:
    """Token strings by id, padded to the model's vocab_size with names no tokenizer uses.
    (CTranslate2's T5 loader pads with "<extra_id_%d>", which this project's tokenizer already
    has — duplicate tokens would break the string-to-id map.)"""
    vocab = tok.get_vocab(with_added_tokens=True)
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    if [vocab[t] for t in tokens] != list(range(len(tokens))):
        raise ValueError("tokenizer ids are not 0..n-1")
    if len(tokens) > vocab_size:
        raise ValueError(f"tokenizer has {len(tokens)} tokens, the model {vocab_size} rows")
    taken = set(tokens)
    fill = [FILLER % i for i in range(vocab_size - len(tokens))]
    if taken.intersection(fill):
        raise ValueError("filler token collides with the tokenizer")
    return tokens + fill


def _loader_class():
    from ctranslate2.converters.transformers import T5Loader

    class AutoUIT5Loader(T5Loader):
        """CTranslate2's own T5 loader, with the vocabulary padded by `vocabulary` (unique names)."""

        def get_vocabulary(self, model, tokenizer):
            return vocabulary(tokenizer.tok, model.config.vocab_size)

    return AutoUIT5Loader


def converter(model, tok, pad_id: int, eos_id: int, unk_id: int):
    """A ctranslate2 Converter for an in-memory transformers T5 (or AutoUIModel: only its
    encoder, decoder and lm_head are read)."""
    import torch
    from ctranslate2.converters import Converter

    class InMemoryT5Converter(Converter):
        def _load(self):
            with torch.no_grad():
                return _loader_class()()(model, VocabAdapter(tok, pad_id, eos_id, unk_id))

    return InMemoryT5Converter()


def build_model(manifest: dict, checkpoint: Optional[str] = None):
    """The bundle's T5 (inside an AutoUIModel), rebuilt as scripts.export built it."""
    from .. import autoui_model as am
    from .torch_ref import parse_source
    if checkpoint:
        return am.load_checkpoint(checkpoint)
    src = parse_source(manifest["exporter"]["source"])
    if not src:
        raise SystemExit(f"bundle was exported from {manifest['exporter']['source']!r}: pass --checkpoint")
    cfg = manifest["model"]
    return am.random_model(src[0], cfg["vocab_size"], cfg["image_dim"], src[1])


def stamp_for(bundle: str, manifest: dict, quantization: str, checkpoint: Optional[str]) -> dict:
    import ctranslate2
    return {"source": manifest["exporter"]["source"], "checkpoint": os.path.abspath(checkpoint) if checkpoint else None,
            "tokenizer_sha256": sha256_file(os.path.join(bundle, manifest["files"]["tokenizer"]["path"])),
            "quantization": quantization, "ctranslate2": ctranslate2.__version__}


def pending(bundle: str, quantizations, out_root: Optional[str] = None, checkpoint: Optional[str] = None):
    """({quantization: directory}, [(quantization, directory, stamp) not converted yet])."""
    manifest = common.load_manifest(bundle)
    out_root = out_root or os.path.normpath(bundle) + "-ct2"
    dirs, todo = {}, []
    for q in quantizations:
        d = os.path.join(out_root, q)
        dirs[q] = d
        want = stamp_for(bundle, manifest, q, checkpoint)
        try:
            with open(os.path.join(d, STAMP)) as f:
                if json.load(f) == want and os.path.exists(os.path.join(d, "model.bin")):
                    continue
        except (OSError, ValueError):
            pass
        todo.append((q, d, want))
    return dirs, todo


def ensure_converted(bundle: str, quantizations=("float32", "int8"), out_root: Optional[str] = None,
                     checkpoint: Optional[str] = None, model=None) -> dict:
    """Converts the bundle's T5 to CTranslate2 for each quantization unless an up-to-date
    conversion exists; returns {quantization: directory}."""
    from tokenizers import Tokenizer
    dirs, todo = pending(bundle, quantizations, out_root, checkpoint)
    if not todo:
        return dirs
    manifest = common.load_manifest(bundle)
    t = time.perf_counter()
    if model is None:
        model = build_model(manifest, checkpoint)
    tok = Tokenizer.from_file(os.path.join(bundle, manifest["files"]["tokenizer"]["path"]))
    ids = manifest["tokens"]
    for q, d, want in todo:
        tmp = d + ".partial"
        converter(model, tok, ids["pad_id"], ids["eos_id"], ids["unk_id"]).convert(tmp, quantization=q, force=True)
        with open(os.path.join(tmp, STAMP), "w") as f:
            json.dump(want, f, indent=1)
        if os.path.exists(d):
            import shutil
            shutil.rmtree(d)
        os.replace(tmp, d)
        print(f"ctranslate2: converted {bundle} -> {d} ({q}) in {time.perf_counter() - t:.0f}s", file=sys.stderr)
    return dirs


# ---------------------------------------------------------------- the peer


def translator(path: str, compute_type: str, threads: int):
    import ctranslate2
    return ctranslate2.Translator(path, device="cpu", compute_type=compute_type, inter_threads=1,
                                  intra_threads=threads)


def translate(tr, tokens: List[str], n: int, callback=None, **kw):
    """Greedy, exactly n tokens (</s> masked until then), no truncation of the prompt."""
    return tr.translate_batch([tokens], beam_size=1, min_decoding_length=n, max_decoding_length=n,
                              max_input_length=0, callback=callback, **kw)[0]


class Runner:
    def __init__(self, bundle: str, threads: int, compute_type: str, ct2_dir: Optional[str] = None,
                 checkpoint: Optional[str] = None):
        from tokenizers import Tokenizer
        self.manifest = m = common.load_manifest(bundle)
        quant = "int8" if compute_type.startswith("int8") else "float32"
        self.path = ensure_converted(bundle, (quant,), ct2_dir, checkpoint)[quant]
        self.compute_type = compute_type
        self.tr = translator(self.path, compute_type, threads)
        self.tok = Tokenizer.from_file(os.path.join(bundle, m["files"]["tokenizer"]["path"]))
        self.tok.no_padding()
        self.tok.enable_truncation(m["prompt"]["max_source_tokens"])
        self.to_id = {t: i for i, t in enumerate(vocabulary(self.tok, m["model"]["vocab_size"]))}

    def tokenize(self, text: str) -> List[str]:
        """Ids from the bundle's tokenizer (as every peer), then CTranslate2's token strings."""
        enc = self.tok.encode(text)
        return [self.tok.id_to_token(i) for i in enc.ids]

    def one(self, case: dict, tokens: int) -> dict:
        clk = common.Clock()
        src = clk.time("tokenize", self.tokenize, case["source_text"])
        if len(src) != case["source_tokens"]:
            print(f"warning: case {case['id']}: {len(src)} tokens here, {case['source_tokens']} in Go", file=sys.stderr)
        stamps = []

        def cb(_step):
            stamps.append(time.perf_counter())
            return False  # keep going

        t0 = time.perf_counter()
        res = translate(self.tr, src, tokens, callback=cb)
        t1 = time.perf_counter()
        clk.add("generate", t1 - t0)
        ids = [self.to_id[t] for t in res.hypotheses[0]]
        if stamps:
            clk.add("first_step", stamps[0] - t0)  # encoder + first decoder step
            clk.add("later_steps", stamps[-1] - stamps[0])
        clk.time("parse", self.decode_and_parse, ids)
        stages = dict(clk.stages)
        if len(stamps) > 1:
            stages["decode_step"] = stages["later_steps"] / (len(stamps) - 1)
        return {"stages": stages, "ids": ids, "decoder_calls": len(stamps)}

    def decode_and_parse(self, ids):
        return common.decode_and_parse(self.tok, ids)


# ---------------------------------------------------------------- correctness


def torch_t5(model):
    """A plain transformers T5 with the AutoUIModel's text weights (no fusion)."""
    from transformers import T5ForConditionalGeneration
    t5 = T5ForConditionalGeneration(model.config)
    keys = set(t5.state_dict())
    state = {k: v for k, v in model.state_dict().items() if k in keys}
    res = t5.load_state_dict(state, strict=False)
    missing = [k for k in res.missing_keys if k not in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight")]
    if missing:
        raise RuntimeError(f"missing {missing}")
    return t5.eval()


def torch_greedy(t5, ids: List[int], n: int, eos_id: int):
    """PyTorch T5 greedy with </s> masked for n tokens: (tokens, per-step raw logits [n, vocab])."""
    import torch
    with torch.inference_mode():
        out = t5.generate(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                          max_new_tokens=n, min_new_tokens=n, do_sample=False, num_beams=1, use_cache=True,
                          decoder_start_token_id=t5.config.decoder_start_token_id, eos_token_id=eos_id,
                          pad_token_id=t5.config.pad_token_id, output_scores=True, return_dict_in_generate=True)
    toks = [int(i) for i in out.sequences[0, 1:]]
    # the raw logits at every position (generate's scores have </s> at -inf), teacher-forced on its tokens
    with torch.inference_mode():
        dec = torch.tensor([[t5.config.decoder_start_token_id] + toks[:-1]])
        logits = t5(input_ids=torch.tensor([ids]), decoder_input_ids=dec).logits[0]
    return toks, logits.float().numpy()


def verify(bundle: str, inputs: dict, threads: int, ct2_dir: Optional[str] = None, checkpoint: Optional[str] = None,
           model=None, log=print) -> dict:
    """CTranslate2 (float32 and int8) against PyTorch T5 on the same ids, without the fusion:
    greedy tokens, and CTranslate2's logits at every step (return_logits_vocab: raw logits, </s>
    masked) vs PyTorch's (max |diff| over the vocabulary without </s>, over the steps where the
    tokens so far agree; also relative to the largest |logit|)."""
    import numpy as np
    from tokenizers import Tokenizer
    m = common.load_manifest(bundle)
    if model is None:
        model = build_model(m, checkpoint)
    dirs = ensure_converted(bundle, ("float32", "int8"), ct2_dir, checkpoint, model=model)
    t5 = torch_t5(model)
    tok = Tokenizer.from_file(os.path.join(bundle, m["files"]["tokenizer"]["path"]))
    tok.no_padding()
    tok.enable_truncation(m["prompt"]["max_source_tokens"])
    eos = m["tokens"]["eos_id"]
    n = inputs["tokens"]
    to_id = {t: i for i, t in enumerate(vocabulary(tok, m["model"]["vocab_size"]))}
    out = {"cases": []}
    trs = {q: translator(d, q, threads) for q, d in dirs.items()}
    for case in inputs["cases"]:
        ids = tok.encode(case["source_text"]).ids
        src = [tok.id_to_token(i) for i in ids]
        ref, ref_lp = torch_greedy(t5, ids, n, eos)
        row = {"id": case["id"], "source_tokens": len(ids)}
        for q, tr in trs.items():
            res = translate(tr, src, n, return_logits_vocab=True)
            got = [to_id[t] for t in res.hypotheses[0]]
            same = 0
            for a, b in zip(got, ref):
                if a != b:
                    break
                same += 1
            diffs, scale = [], 0.0
            for step in range(min(same + 1, n)):  # the steps both decoded from the same prefix
                lg = np.asarray(res.logits[0][step], dtype=np.float32).reshape(-1)
                keep = np.ones(lg.shape[0], bool)
                keep[eos] = False
                diffs.append(float(np.max(np.abs(lg[keep] - ref_lp[step][keep]))))
                scale = max(scale, float(np.max(np.abs(ref_lp[step][keep]))))
            row[q] = {"same_prefix": same, "tokens": len(got), "equal": got == ref,
                      "first_step_logit_maxdiff": diffs[0], "logit_maxdiff": max(diffs),
                      "logit_maxdiff_rel": max(diffs) / scale}
        log(f"case {case['id']} ({len(ids)} prompt tokens): " + "; ".join(
            f"{q}: {row[q]['same_prefix']}/{n} tokens equal to PyTorch, logits max |diff| "
            f"{row[q]['logit_maxdiff']:.2e} (first step {row[q]['first_step_logit_maxdiff']:.2e}, "
            f"{row[q]['logit_maxdiff_rel']:.1e} of max |logit|)" for q in trs))
        out["cases"].append(row)
    return out


def main(argv=None) -> int:
    p = common.parser(__doc__.splitlines()[0])
    p.add_argument("--compute-type", default="float32", help="float32 or int8 (an int8 conversion is made for int8*)")
    p.add_argument("--ct2-dir", help="where the conversions are cached (default <bundle>-ct2)")
    p.add_argument("--checkpoint", help="Auto-UI checkpoint the bundle was exported from (non-random bundles)")
    p.add_argument("--verify", action="store_true", help="compare with PyTorch T5 (no fusion) instead of timing")
    p.add_argument("--convert-only", action="store_true", help="convert (if not up to date) and exit")
    args = p.parse_args(argv)
    quant = "int8" if args.compute_type.startswith("int8") else "float32"
    if args.convert_only:
        ensure_converted(args.model, (quant,), args.ct2_dir, args.checkpoint)
        return 0
    inputs = common.load_inputs(args.inputs)
    if args.verify:
        import torch
        torch.set_num_threads(args.threads)
        res = verify(args.model, inputs, args.threads, args.ct2_dir, args.checkpoint,
                     log=lambda s: print(s, file=sys.stderr))
        common.write(res, args.json)
        ok = all(c["float32"]["equal"] and c["float32"]["logit_maxdiff_rel"] < 1e-5 for c in res["cases"])
        return 0 if ok else 1
    if pending(args.model, (quant,), args.ct2_dir, args.checkpoint)[1]:
        # convert in a child process: building the PyTorch model must not count in this peer's peak RSS
        import subprocess
        cmd = [sys.executable, "-m", "scripts.peers.ct2", "--model", args.model, "--inputs", args.inputs,
               "--compute-type", args.compute_type, "--convert-only"]
        cmd += ["--ct2-dir", args.ct2_dir] if args.ct2_dir else []
        cmd += ["--checkpoint", args.checkpoint] if args.checkpoint else []
        if subprocess.run(cmd).returncode:
            raise SystemExit("ctranslate2 conversion failed")
    t = time.perf_counter()
    r = Runner(args.model, args.threads, args.compute_type, args.ct2_dir, args.checkpoint)
    load_s = time.perf_counter() - t
    actions = common.run_cases(inputs, args.runs, args.warmup, r.one)
    import ctranslate2
    doc = common.report(f"ctranslate2-{args.compute_type}", r.manifest["model"]["size"], args.threads, actions, inputs,
                        [f"ctranslate2 {ctranslate2.__version__}, compute_type {args.compute_type}, "
                         f"inter_threads 1, intra_threads {args.threads}",
                         "text path only: plain T5 encoder + greedy decoder (beam 1, min = max decoding length); "
                         "no vision tower, no fusion (the decoder attends to the unfused encoder output)",
                         "first_step = encoder + first decoder step (one translate_batch call; per-token callbacks)",
                         "tokenizer: tokenizers (Rust) on the bundle's tokenizer.json"],
                        {"load_s": round(load_s, 2), "first_step_includes_encoder": True, "text_only": True,
                         "ct2_model": r.path})
    common.write(doc, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
