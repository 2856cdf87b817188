"""Export an Auto-UI model to an autoui bundle (ONNX graphs + tokenizer + manifest).

  python -m scripts.export --out DIR --checkpoint CKPT_DIR --vision BLIP2_DIR
  python -m scripts.export --out DIR --random --size tiny|base|large --vision-size tiny|vitg --seed N
  (either with --int8 DIR8: also write the int8 variant, see scripts/quantize.py)

Writes vision_model.onnx, encoder_model.onnx, fusion_model.onnx, decoder_with_past_model.onnx
(HF optimum's with-past decoder; the first call feeds a zero-length past), decoder_cross_model.onnx
(encoder_hidden_states -> the cross-attention K/V, once per request), decoder_static_model.onnx
(the with-past decoder over a fixed-length cache, for CUDA-graph capture; derived from the
decoder graph by scripts/static_decoder.py, sharing its external data), tokenizer.json and
manifest.json (bundle format 2, docs/bundle-format.md). Every graph is
checked against PyTorch with ONNX Runtime (the static decoder against the with-past one) before
the manifest is written; a failed check aborts. The same command gives byte-identical files. A
checkpoint without tokenizer.json gets one converted from its spiece.model by transformers
(recorded in the manifest).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import warnings

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

from . import autoui_model as am
from . import cuda_capture
from . import vision as vis
from .bundle_files import (check_output, file_entry, graph_io, log, save_graph, save_manifest, sigterm_as_interrupt,
                           staged_output, stopped, strip_graph)
from .bundle_format import FILES, FORMAT_VERSION, GRAPHS_REVISION
from .decoder_split import split_decoder
from .graph_check import TOLERANCES, ExportCheckError, check_argmax, compare, past_feed, session
from .onnx_graphs import DecoderGraph, EncoderGraph, FusionGraph, add_argmax, contrib_attention, fuse_vision_norms
from .static_decoder import check_static, write_static

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_TOKENIZER = os.path.join(ROOT, "models", "testdata", "tokenizer", "tokenizer.json")
# manifest exporter.tokenizer_source for a tokenizer.json taken as is (the checkpoint's or --tokenizer)
TOKENIZER_JSON = "tokenizer.json"


# ---------------------------------------------------------------- onnx helpers

def _torch_export(module, args, path, input_names, output_names, dynamic_axes, opset):
    # A fresh wrapper is in training mode and torch.onnx restores that mode afterwards,
    # recursively, which would leave the model's dropout on.
    module.eval()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, path, input_names=input_names, output_names=output_names,
                          dynamic_axes=dynamic_axes, opset_version=opset, do_constant_folding=True,
                          export_params=True, verbose=False)
    return onnx.load(path)


def _ensure_inputs(model: onnx.ModelProto, specs: list[tuple[str, int, list]]) -> None:
    """Re-add interface inputs the exporter dropped because the math does not use them."""
    have = {i.name for i in model.graph.input}
    for pos, (name, elem, dims) in enumerate(specs):
        if name not in have:
            vi = helper.make_tensor_value_info(name, elem, dims)
            model.graph.input.insert(pos, vi)


def _set_output_dims(model: onnx.ModelProto, dims: dict) -> None:
    """Declare output shapes exactly (the exporter invents names for dims it could not infer)."""
    for out in model.graph.output:
        if out.name in dims:
            shape = out.type.tensor_type.shape
            del shape.dim[:]
            for d in dims[out.name]:
                dim = shape.dim.add()
                if isinstance(d, str):
                    dim.dim_param = d
                else:
                    dim.dim_value = d


# ---------------------------------------------------------------- export

def _export_graphs(model: am.AutoUIModel, tower: vis.VisionTower, tmp: str, opset: int) -> dict:
    cfg = model.config
    L, H, dkv, d = cfg.num_decoder_layers, cfg.num_heads, cfg.d_kv, cfg.d_model
    graphs = {}
    t0 = time.time()
    size = tower.config.image_size
    px = torch.randn(1, 3, size, size)
    graphs["vision"] = _torch_export(tower, (px,), os.path.join(tmp, "vision.onnx"), ["pixel_values"],
                                     ["image_features"],
                                     {"pixel_values": {0: "batch_size"}, "image_features": {0: "batch_size"}}, opset)
    graphs["vision"] = fuse_vision_norms(graphs["vision"], tower.config.num_attention_heads,
                                         tower.config.hidden_size)
    _set_output_dims(graphs["vision"], {"image_features": ["batch_size", tower.config.hidden_size]})
    log(f"  vision graph traced in {time.time() - t0:.1f}s")
    ids = torch.randint(3, cfg.vocab_size, (1, 9))
    mask = torch.ones_like(ids)
    graphs["encoder"] = _torch_export(
        EncoderGraph(model), (ids, mask), os.path.join(tmp, "encoder.onnx"), ["input_ids", "attention_mask"],
        ["last_hidden_state"],
        {"input_ids": {0: "batch_size", 1: "encoder_sequence_length"},
         "attention_mask": {0: "batch_size", 1: "encoder_sequence_length"},
         "last_hidden_state": {0: "batch_size", 1: "encoder_sequence_length"}}, opset)
    hs = torch.randn(1, 9, d)
    img = torch.randn(1, model.image_dim)
    graphs["fusion"] = _torch_export(
        FusionGraph(model), (hs, mask, img), os.path.join(tmp, "fusion.onnx"),
        ["encoder_hidden_states", "attention_mask", "image_features"], ["fused_hidden_states"],
        {"encoder_hidden_states": {0: "batch_size", 1: "encoder_sequence_length"},
         "attention_mask": {0: "batch_size", 1: "encoder_sequence_length"},
         "image_features": {0: "batch_size"},
         "fused_hidden_states": {0: "batch_size", 1: "encoder_sequence_length"}}, opset)
    _set_output_dims(graphs["encoder"], {"last_hidden_state": ["batch_size", "encoder_sequence_length", d]})
    _set_output_dims(graphs["fusion"], {"fused_hidden_states": ["batch_size", "encoder_sequence_length", d]})
    _ensure_inputs(graphs["fusion"], [
        ("encoder_hidden_states", TensorProto.FLOAT, ["batch_size", "encoder_sequence_length", d]),
        ("attention_mask", TensorProto.INT64, ["batch_size", "encoder_sequence_length"]),
        ("image_features", TensorProto.FLOAT, ["batch_size", model.image_dim])])

    present_names = []
    for i in range(L):
        present_names += [f"present.{i}.decoder.key", f"present.{i}.decoder.value",
                          f"present.{i}.encoder.key", f"present.{i}.encoder.value"]
    dec_ids = torch.zeros(1, 2, dtype=torch.long)
    dyn = {"input_ids": {0: "batch_size", 1: "decoder_sequence_length"},
           "encoder_attention_mask": {0: "batch_size", 1: "encoder_sequence_length"},
           "logits": {0: "batch_size", 1: "decoder_sequence_length"}}
    nopast_dyn = dict(dyn, encoder_hidden_states={0: "batch_size", 1: "encoder_sequence_length"})
    for name in present_names:
        nopast_dyn[name] = {0: "batch_size", 2: "present_decoder_sequence_length" if ".decoder." in name
                            else "present_encoder_sequence_length"}
    t0 = time.time()
    no_past = _torch_export(DecoderGraph(model, with_past=False), (dec_ids, mask, hs),
                            os.path.join(tmp, "decoder_no_past.onnx"),
                            ["input_ids", "encoder_attention_mask", "encoder_hidden_states"], ["logits"] + present_names,
                            nopast_dyn, opset)
    past = []
    past_names = []
    for i in range(L):
        past += [torch.randn(1, H, 3, dkv), torch.randn(1, H, 3, dkv), torch.randn(1, H, 9, dkv),
                 torch.randn(1, H, 9, dkv)]
        past_names += [f"past_key_values.{i}.decoder.key", f"past_key_values.{i}.decoder.value",
                       f"past_key_values.{i}.encoder.key", f"past_key_values.{i}.encoder.value"]
    past_dyn = dict(dyn)
    for name in past_names:
        past_dyn[name] = {0: "batch_size", 2: "past_decoder_sequence_length" if ".decoder." in name
                          else "encoder_sequence_length_out"}
    for name in present_names:
        past_dyn[name] = {0: "batch_size", 2: "present_decoder_sequence_length" if ".decoder." in name
                          else "encoder_sequence_length_out"}
    with_past = _torch_export(DecoderGraph(model, with_past=True, fused_attention=True), (dec_ids, mask, *past),
                              os.path.join(tmp, "decoder_with_past.onnx"),
                              ["input_ids", "encoder_attention_mask"] + past_names, ["logits"] + present_names,
                              past_dyn, opset)
    with_past = contrib_attention(with_past)
    graphs["decoder"], graphs["decoder_cross"] = split_decoder(no_past, with_past, L, H, dkv, cfg.vocab_size, d)
    graphs["decoder"] = add_argmax(graphs["decoder"])
    log(f"  decoder graphs traced and split in {time.time() - t0:.1f}s")
    return graphs


# ---------------------------------------------------------------- checks

@torch.no_grad()
def check_bundle(out_dir: str, model: am.AutoUIModel, tower: vis.VisionTower, seed: int = 1234) -> dict:
    """ORT vs PyTorch on random inputs at two sizes per graph; raises ExportCheckError. The decoder:
    the cross graph's K/V, then the with-past decoder from a zero-length past (1 or 3 tokens),
    then two cached calls (1 and 4 new tokens), logits and self-attention presents each time."""
    g = torch.Generator().manual_seed(seed)
    model.eval()
    tower.eval()
    cfg = model.config
    L, H, dkv = cfg.num_decoder_layers, cfg.num_heads, cfg.d_kv
    report: dict = {}

    sess = session(os.path.join(out_dir, FILES["vision"]))
    for b in (1, 2):
        px = torch.randn(b, 3, tower.config.image_size, tower.config.image_size, generator=g)
        got = sess.run(["image_features"], {"pixel_values": px.numpy()})[0]
        compare(f"vision batch={b}", got, tower.reference(px).numpy(), TOLERANCES["vision"], report)
    del sess

    enc = session(os.path.join(out_dir, FILES["encoder"]))
    fus = session(os.path.join(out_dir, FILES["fusion"]))
    dec = session(os.path.join(out_dir, FILES["decoder"]))
    cross = session(os.path.join(out_dir, FILES["decoder_cross"]))
    dec_names = [o.name for o in dec.get_outputs()]
    cross_names = [o.name for o in cross.get_outputs()]
    for n in (7, 23):
        ids = torch.randint(3, cfg.vocab_size, (2, n), generator=g)
        mask = torch.ones(2, n, dtype=torch.long)
        mask[1, n - 3:] = 0
        ids[1, n - 3:] = am.PAD_ID
        feed = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
        got = enc.run(["last_hidden_state"], feed)[0]
        ref = model.encoder(input_ids=ids, attention_mask=mask).last_hidden_state
        compare(f"encoder n={n}", got, ref.numpy(), TOLERANCES["encoder"], report)

        img = torch.randn(2, model.image_dim, generator=g)
        got = fus.run(["fused_hidden_states"], {"encoder_hidden_states": ref.numpy(), "attention_mask": mask.numpy(),
                                                "image_features": img.numpy()})[0]
        fused = model.fuse(ref, img)
        compare(f"fusion n={n}", got, fused.numpy(), TOLERANCES["fusion"], report)

        # Decoder: reference is the HF decoder run on the whole sequence without a cache.
        def reference(dec_ids):
            out = model.decoder(input_ids=dec_ids, encoder_hidden_states=fused, encoder_attention_mask=mask,
                                use_cache=True, return_dict=True)
            h = out.last_hidden_state
            if cfg.tie_word_embeddings:
                h = h * cfg.d_model ** -0.5
            return model.lm_head(h), out.past_key_values

        # The cross graph: once per request, its K/V are every decoder call's encoder pasts.
        cross_kv = cross.run(None, {"encoder_hidden_states": fused.numpy()})
        _, pkv = reference(torch.zeros(2, 1, dtype=torch.long))
        for i in range(L):
            for j in range(2):
                compare(f"decoder cross {cross_names[2 * i + j]}", cross_kv[2 * i + j], pkv[i][2 + j].numpy(),
                         TOLERANCES["decoder"], report)
        empty = np.zeros((2, H, 0, dkv), np.float32)
        seq = torch.cat([torch.zeros(2, 1, dtype=torch.long), torch.randint(3, cfg.vocab_size, (2, 7), generator=g)], 1)
        for k_first in (1, 3):
            past = [empty] * (2 * L)  # the first call: zero-length self-attention past
            start = 0
            for new in (k_first, 1, 4):
                feed = {"input_ids": seq[:, start:start + new].numpy(), "encoder_attention_mask": mask.numpy()}
                feed.update(past_feed(past, cross_kv, L))
                outs = dict(zip(dec_names, dec.run(None, feed)))
                logits, pkv = reference(seq[:, :start + new])
                what = f"decoder n={n} past={start} new={new}"
                compare(f"{what} logits", outs["logits"], logits[:, start:].numpy(), TOLERANCES["decoder"], report)
                check_argmax(what, outs)
                for i in range(L):
                    for j, kv in enumerate(("key", "value")):
                        compare(f"{what} present.{i}.decoder.{kv}", outs[f"present.{i}.decoder.{kv}"],
                                 pkv[i][j].numpy(), TOLERANCES["decoder"], report)
                past = [outs[f"present.{i}.decoder.{kv}"] for i in range(L) for kv in ("key", "value")]
                start += new
    return report


# ---------------------------------------------------------------- tokenizer

def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def check_tokenizer(path: str, vocab_size: int) -> None:
    """The bundle's tokenizer must load with T5's special ids and fit the model's vocabulary."""
    try:
        tok = am.load_tokenizer(path)
    except Exception as e:  # tokenizers' parse errors are plain Exceptions
        raise ValueError(f"tokenizer {path}: cannot load ({_first_line(e)})") from e
    if len(tok) > vocab_size:
        raise ValueError(f"tokenizer {path}: {len(tok)} ids, more than the model's vocab_size {vocab_size}")


@contextlib.contextmanager
def _quiet_transformers():
    # The slow T5 tokenizer warns about its default `legacy` mode on every load.
    from transformers.utils import logging as hf_logging
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        hf_logging.set_verbosity(level)


def convert_spiece(ckpt_dir: str, out_path: str) -> str:
    """Write tokenizer.json converted from ckpt_dir/spiece.model by transformers' slow->fast
    converter; returns the manifest's tokenizer_source. Loading the directory (not the file)
    applies its tokenizer_config.json / special_tokens_map.json as Auto-UI's AutoTokenizer does."""
    import transformers
    from transformers import T5TokenizerFast
    spiece = os.path.join(ckpt_dir, "spiece.model")
    try:
        with _quiet_transformers():
            fast = T5TokenizerFast.from_pretrained(ckpt_dir, from_slow=True, local_files_only=True)
        fast.backend_tokenizer.save(out_path)
    except Exception as e:  # sentencepiece/protobuf errors for a bad file: name it
        raise am.CheckpointError(f"{spiece}: cannot convert to tokenizer.json ({_first_line(e)})") from e
    return f"converted from spiece.model by transformers {transformers.__version__}"


def checkpoint_tokenizer(ckpt_dir: str, explicit: str | None, tmp: str) -> tuple[str, str]:
    """(tokenizer.json path, tokenizer_source) for a checkpoint export: --tokenizer, else the
    checkpoint's tokenizer.json, else one converted from its spiece.model into tmp."""
    if explicit:
        if not os.path.isfile(explicit):
            raise am.CheckpointError(f"--tokenizer {explicit}: no such file")
        return explicit, TOKENIZER_JSON
    path = os.path.join(ckpt_dir, "tokenizer.json")
    if os.path.isfile(path):
        return path, TOKENIZER_JSON
    if os.path.isfile(os.path.join(ckpt_dir, "spiece.model")):
        out = os.path.join(tmp, "tokenizer.json")
        source = convert_spiece(ckpt_dir, out)
        log(f"tokenizer: {source}")
        return out, source
    raise am.CheckpointError(f"checkpoint {ckpt_dir}: no tokenizer.json or spiece.model (pass --tokenizer)")


# ---------------------------------------------------------------- manifest

def size_label(cfg) -> str:
    for name, s in am.T5_SIZES.items():
        if all(getattr(cfg, k) == v for k, v in s.items()):
            if name != "tiny" and cfg.vocab_size != am.FLAN_VOCAB_SIZE:
                continue
            return name
    return "custom"


def versions() -> dict:
    import onnxruntime
    import transformers
    return {"python": platform.python_version(), "torch": torch.__version__.split("+")[0],
            "transformers": transformers.__version__, "onnx": onnx.__version__,
            "onnxruntime": onnxruntime.__version__}


def static_config(cfg) -> dict:
    """What static_decoder reads of the manifest's "model", from a T5 config."""
    return {"num_decoder_layers": cfg.num_decoder_layers, "num_heads": cfg.num_heads, "d_kv": cfg.d_kv,
            "vocab_size": cfg.vocab_size, "relative_attention_num_buckets": cfg.relative_attention_num_buckets,
            "relative_attention_max_distance": cfg.relative_attention_max_distance}


def write_manifest(out_dir: str, name: str, model: am.AutoUIModel, tower: vis.VisionTower, graphs_ext: dict,
                   source: str, opset: int, scroll_map: str, tokenizer_source: str = TOKENIZER_JSON) -> dict:
    cfg, vcfg = model.config, tower.config
    files = {}
    for role, fname in FILES.items():
        entry = file_entry(out_dir, fname)
        entry["external_data"] = [file_entry(out_dir, e) for e in graphs_ext[role]]
        m = onnx.load(os.path.join(out_dir, fname), load_external_data=False)
        entry["inputs"], entry["outputs"] = graph_io(m)
        cuda_capture.mark(role, entry, m)
        files[role] = entry
    files["tokenizer"] = file_entry(out_dir, "tokenizer.json")
    manifest = {
        "format": "autoui-bundle", "format_version": FORMAT_VERSION, "name": name,
        "model": {"size": size_label(cfg), "d_model": cfg.d_model, "d_kv": cfg.d_kv, "d_ff": cfg.d_ff,
                  "num_layers": cfg.num_layers, "num_decoder_layers": cfg.num_decoder_layers,
                  "num_heads": cfg.num_heads, "vocab_size": cfg.vocab_size,
                  "feed_forward_proj": cfg.feed_forward_proj, "image_dim": model.image_dim,
                  "relative_attention_num_buckets": cfg.relative_attention_num_buckets,
                  "relative_attention_max_distance": cfg.relative_attention_max_distance,
                  "layer_norm_epsilon": cfg.layer_norm_epsilon},
        "vision": {"image_size": vcfg.image_size, "patch_size": vcfg.patch_size, "hidden_size": vcfg.hidden_size,
                   "num_layers": vcfg.num_hidden_layers, "num_heads": vcfg.num_attention_heads,
                   "output_dim": vcfg.hidden_size},
        "files": files,
        "tokens": {"pad_id": am.PAD_ID, "eos_id": am.EOS_ID, "unk_id": am.UNK_ID,
                   "decoder_start_id": cfg.decoder_start_token_id},
        "preprocess": vis.preprocess_config(vcfg.image_size),
        "prompt": {"history_window": am.HISTORY_WINDOW, "max_source_tokens": am.MAX_SOURCE_TOKENS,
                   "max_target_tokens": am.MAX_NEW_TOKENS},
        "action": {"scroll_map": scroll_map},
        "precision": "fp32",
        "exporter": {"tool": "scripts.export", "source": source, "tokenizer_source": tokenizer_source,
                     "opset": opset, "graphs_revision": GRAPHS_REVISION, "versions": versions()},
    }
    save_manifest(out_dir, manifest)
    return manifest


def export_bundle(model: am.AutoUIModel, tower: vis.VisionTower, tokenizer_path: str, out_dir: str, *,
                  name: str, source: str, opset: int = 17, scroll_map: str = "fixed", check: bool = True,
                  tokenizer_source: str = TOKENIZER_JSON) -> dict:
    if not 14 <= opset <= 20:
        # ORT 1.29 reads up to 26, but torch 2.5's TorchScript exporter writes at most 20.
        raise ValueError(f"opset {opset}: want 14..20 (torch 2.5 exporter range; ORT 1.29 reads up to 26)")
    if scroll_map not in am.SCROLL_MAPS:
        raise ValueError(f"scroll map {scroll_map!r}: want fixed or legacy")
    if model.image_dim != tower.config.hidden_size:
        raise ValueError(f"model image_dim {model.image_dim} != vision output {tower.config.hidden_size}")
    check_tokenizer(tokenizer_path, model.config.vocab_size)
    model.eval()
    tower.eval()
    torch.manual_seed(0)  # the dummy inputs of tracing; they do not end up in the graphs
    # Written beside out_dir and moved into place once checked: a failed or interrupted export
    # leaves an existing out_dir as it was (bundle_files.staged_output).
    with staged_output(out_dir, error=ValueError) as tmp:
        return _write_bundle(model, tower, tokenizer_path, tmp, name=name, source=source, opset=opset,
                             scroll_map=scroll_map, check=check, tokenizer_source=tokenizer_source)


def _write_bundle(model, tower, tokenizer_path, out_dir, *, name, source, opset, scroll_map, check,
                  tokenizer_source) -> dict:
    t0 = time.time()
    ext = {}
    with tempfile.TemporaryDirectory(prefix="autoui-export-") as tmp:
        graphs = _export_graphs(model, tower, tmp, opset)
        for role, m in graphs.items():
            ext[role] = save_graph(strip_graph(m, role), os.path.join(out_dir, FILES[role]))
    # [CLS; patches] as Pads and an Add: a CUDA-graph replay of Concat reads recycled host memory
    # under ORT 1.29 (scripts/cuda_capture.py).
    cuda_capture.rewrite_file(os.path.join(out_dir, FILES["vision"]))
    # Derived from the decoder file as written, as scripts.upgrade_bundle derives it: the same bytes.
    static_cfg = static_config(model.config)
    ext["decoder_static"] = write_static(out_dir, static_cfg)
    shutil.copyfile(tokenizer_path, os.path.join(out_dir, "tokenizer.json"))
    log(f"exported graphs in {time.time() - t0:.1f}s")
    if check:
        t1 = time.time()
        report = check_bundle(out_dir, model, tower)
        check_static(os.path.join(out_dir, FILES["decoder"]), os.path.join(out_dir, FILES["decoder_static"]),
                     static_cfg, report=report)
        log(f"ORT vs PyTorch checks passed in {time.time() - t1:.1f}s; worst |diff|: "
            + ", ".join(f"{k} {v:.2g}" for k, v in report.items()))
    return write_manifest(out_dir, name, model, tower, ext, source, opset, scroll_map, tokenizer_source)


def write_blip2_vision_dir(tower: vis.VisionTower, out_dir: str) -> None:
    """Save a vision tower as a minimal local BLIP-2 directory (vision weights only)."""
    from safetensors.torch import save_file
    os.makedirs(out_dir, exist_ok=True)
    vc = tower.config.to_dict()
    keep = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "image_size",
            "patch_size", "hidden_act", "layer_norm_eps", "attention_dropout", "initializer_range", "qkv_bias")
    cfg = {"model_type": "blip-2", "architectures": ["Blip2ForConditionalGeneration"],
           "vision_config": {k: vc[k] for k in keep}}
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    state = {f"vision_model.{k}": v.contiguous() for k, v in tower.model.state_dict().items()}
    save_file(state, os.path.join(out_dir, "model.safetensors"))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Export an Auto-UI model to an autoui ONNX bundle.")
    p.add_argument("--out", required=True, help="bundle directory to write")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkpoint", help="Auto-UI checkpoint directory (config.json + weights)")
    src.add_argument("--random", action="store_true", help="random weights (for tests and benchmarks)")
    p.add_argument("--vision", help="local BLIP-2 directory (e.g. Salesforce/blip2-opt-2.7b); "
                                    "'random' for a random tower of --vision-size")
    p.add_argument("--size", choices=sorted(am.T5_SIZES), default="tiny", help="T5 size with --random")
    p.add_argument("--vision-size", choices=sorted(vis.VISION_SIZES), default=None,
                   help="random vision tower size (default: tiny for a tiny model, vitg otherwise)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--scroll-map", choices=sorted(am.SCROLL_MAPS), default=None,
                   help="swipe normalization the model was trained with (default: legacy for --checkpoint, "
                        "whose public releases predate the fix; fixed for --random)")
    p.add_argument("--tokenizer", help="tokenizer.json (default: the checkpoint's tokenizer.json, else one "
                                       "converted from its spiece.model; the test tokenizer with --random)")
    p.add_argument("--opset", type=int, default=17)
    p.add_argument("--name", help="bundle name (default: the size or the checkpoint directory name)")
    p.add_argument("--no-check", action="store_true", help="skip the ORT vs PyTorch checks")
    p.add_argument("--int8", metavar="DIR", help="also write the int8 variant of the bundle to DIR (scripts.quantize)")
    return p


def _random_inputs(args) -> dict:
    vsize = args.vision_size or ("tiny" if args.size == "tiny" else "vitg")
    tok = args.tokenizer or DEFAULT_TOKENIZER
    if not os.path.isfile(tok):
        raise ValueError(f"--tokenizer {tok}: no such file")
    vocab = am.round_vocab(_tokenizer_size(tok)) if args.size == "tiny" else am.FLAN_VOCAB_SIZE
    tower = vis.random_vision(vsize, args.seed)
    model = am.random_model(args.size, vocab, tower.config.hidden_size, args.seed)
    source = f"random:{args.size}:seed={args.seed}" + ("" if vsize == "tiny" and args.size == "tiny"
                                                      else f";vision=random:{vsize}")
    return dict(model=model, tower=tower, tokenizer_path=tok, tokenizer_source=TOKENIZER_JSON, source=source,
                name=args.name or args.size, scroll_map=args.scroll_map or "fixed")


def _checkpoint_inputs(args, tmp: str) -> dict:
    model = am.load_checkpoint(args.checkpoint)
    ck_name = os.path.basename(os.path.normpath(args.checkpoint))
    tok, tok_source = checkpoint_tokenizer(args.checkpoint, args.tokenizer, tmp)  # before the (slow) vision load
    if args.vision == "random":
        vsize = args.vision_size or ("tiny" if model.image_dim == 64 else "vitg")
        _check_image_dim(model, vis.VISION_SIZES[vsize]["hidden_size"], f"--vision random --vision-size {vsize}")
        tower = vis.random_vision(vsize, args.seed)
        vsource = f"random:{vsize}:seed={args.seed}"
    else:
        _check_image_dim(model, vis.vision_dir_config(args.vision).hidden_size, f"--vision {args.vision}")
        tower = vis.load_vision(args.vision)
        vsource = "blip2:" + os.path.basename(os.path.normpath(args.vision))
    return dict(model=model, tower=tower, tokenizer_path=tok, tokenizer_source=tok_source,
                source=f"checkpoint:{ck_name};vision={vsource}", name=args.name or ck_name,
                scroll_map=args.scroll_map or "legacy")


def _check_image_dim(model: am.AutoUIModel, hidden_size: int, what: str) -> None:
    """Refuse a vision tower whose output does not fit the model, before it is built (ViT-g: 4 GB)."""
    if model.image_dim != hidden_size:
        raise ValueError(f"{what}: vision output {hidden_size}, but the checkpoint's image_dim is {model.image_dim}")


def main(argv=None) -> int:
    """Export as the command line says; errors raise (see _cli for the one-line form)."""
    p = _parser()
    args = p.parse_args(argv)
    if args.checkpoint and not args.vision:
        p.error("--checkpoint needs --vision (a local BLIP-2 directory, or 'random')")
    # What would only fail after the export (or replace what it must not) is refused first.
    check_output(args.out, error=ValueError)
    if args.int8:
        check_output(args.int8, [args.out], ValueError, out_flag="--int8", in_flag="--out")
    if args.tokenizer and not os.path.isfile(args.tokenizer):
        raise ValueError(f"--tokenizer {args.tokenizer}: no such file")
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="autoui-export-tok-") as tmp:
        inputs = _random_inputs(args) if args.random else _checkpoint_inputs(args, tmp)
        model, tower, tok = inputs.pop("model"), inputs.pop("tower"), inputs.pop("tokenizer_path")
        manifest = export_bundle(model, tower, tok, args.out, opset=args.opset, check=not args.no_check, **inputs)
    total = sum(f["size"] + sum(e["size"] for e in f.get("external_data", [])) for f in manifest["files"].values())
    log(f"bundle {args.out}: {total / 1e6:.1f} MB in {time.time() - t0:.1f}s")
    if args.int8:
        from . import quantize
        quantize.quantize_bundle(args.out, args.int8)
    return 0


def _cli(argv=None) -> int:
    """main for a user: a bad checkpoint, tokenizer or failed check is one line, not a traceback."""
    from .quantize import QuantizeError
    with sigterm_as_interrupt():
        try:
            return main(argv)
        except (am.CheckpointError, ExportCheckError, QuantizeError, ValueError, OSError) as e:
            log(f"export: error: {e}")
            return 1
        except KeyboardInterrupt as e:
            return stopped("export", e)


def _tokenizer_size(path: str) -> int:
    try:
        return len(am.load_tokenizer(path))
    except Exception as e:  # tokenizers' parse errors are plain Exceptions
        raise ValueError(f"tokenizer {path}: cannot load ({_first_line(e)})") from None


if __name__ == "__main__":
    sys.exit(_cli())
