"""Upgrade a bundle in place to the current decoder graphs: format 1 (merged decoder) to format 2
(with-past decoder + cross graph), a with-past decoder without the logits_argmax output to one
with it, and a bundle without decoder_static_model.onnx (the static-cache decoder for CUDA-graph
capture, scripts/static_decoder.py) to one with it.

  python -m scripts.upgrade_bundle [--static-check full|short|none] BUNDLE_DIR [BUNDLE_DIR ...]

The two graphs are cut out of the merged decoder's If branches (scripts/decoder_split.py), so the
weights are the same bytes (int8 bundles stay int8). Before the manifest is rewritten, the new
graphs are run against the merged one with ONNX Runtime on random inputs (a first call of 1 and
3 tokens, then cached calls of 1 and 4); a difference beyond the export tolerance aborts and
leaves the bundle as it was. The argmax output is one ArgMax node appended to the decoder graph
(its weights, inline or external, are not rewritten); the new graph must give the old one's
logits and presents and the exact argmax of its logits on the same random calls. The static
decoder is derived from the (final) with-past decoder by graph surgery: its initializers point
at the decoder's own external-data file (inline weights are copied into it), so the bundle grows
by one graph file; it must match the with-past decoder on sequences of calls at batch 2 with
the rows at different positions (static_decoder.check_static; --static-check short runs one
scenario, none skips it). A converted decoder (int8, or fp16 by scripts.half --roles all) gets
no static decoder (see _converted_decoder). Each step bumps exporter.graphs_revision from the
one before it (2 -> 3 -> 4); an older revision stays. A bundle that has all of it is left
unchanged. Graphs revision 5 (the vision tower's CLS-only last layer) comes from exporting
again only.

The vision graph's Concat on the device ([CLS; patches]) is rewritten as Pads and an Add
(scripts/cuda_capture.py: under ORT 1.29 a CUDA-graph replay of Concat reads host memory that
other runs reuse), checked against the graph as it was, and its manifest entry marked
capture_safe: the engine captures the vision tower only then (revision 5 -> 6).
"""

from __future__ import annotations

import argparse
import os
import re
import sys

import numpy as np
import onnx
from google.protobuf.message import DecodeError

from . import cuda_capture
from . import graph_check as gc
from . import static_decoder as sd
from .bundle_files import (deferred_interrupts, file_entry, graph_io, read_manifest, save_graph, save_manifest,
                           sigterm_as_interrupt, stopped, strip_graph, verify_files)
from .bundle_format import ARGMAX_OUTPUT, FILES
from .decoder_split import SplitError, merged_branches, split_decoder
from .onnx_graphs import add_argmax

CROSS_FILE = FILES["decoder_cross"]
DECODER_FILE = FILES["decoder"]
STATIC_FILE = FILES["decoder_static"]
# --static-check: the scenarios static_decoder.check_static runs (short: one, at large positions).
STATIC_CHECKS = {"full": sd.SCENARIOS, "short": sd.SCENARIOS[-1:], "none": ()}


class UpgradeError(RuntimeError):
    pass


def _check(merged_path: str, dec_path: str, cross_path: str, model: dict, seed: int = 7,
           ref: str = "the merged decoder") -> float:
    """Worst |diff| of logits and presents, new graphs vs the merged decoder (or, when
    merged_path is a with-past decoder, vs that one); the new decoder's logits_argmax, where it
    has one, must be the argmax of its logits."""
    L, H, dkv, d = model["num_decoder_layers"], model["num_heads"], model["d_kv"], model["d_model"]
    rng = np.random.default_rng(seed)
    merged, dec, cross = gc.session(merged_path), gc.session(dec_path), gc.session(cross_path)
    with_past_ref = "use_cache_branch" not in {i.name for i in merged.get_inputs()}
    report: dict = {}

    def cmp(what, got, want):
        try:
            gc.compare(what, got, want, gc.TOLERANCES["decoder"], report, ref=ref)
        except gc.ExportCheckError as e:
            raise UpgradeError(str(e)) from None

    for enc_len in (5, 17):
        states = rng.standard_normal((2, enc_len, d)).astype(np.float32)
        mask = np.ones((2, enc_len), np.int64)
        mask[1, enc_len - 2:] = 0
        kv = cross.run(None, {"encoder_hidden_states": states})
        empty = [np.zeros((2, H, 0, dkv), np.float32)] * (2 * L)
        for first in (1, 3):
            ids = rng.integers(3, model["vocab_size"], (2, first + 5)).astype(np.int64)
            ids[:, 0] = 0
            if not with_past_ref:
                feed = {"input_ids": ids[:, :first], "encoder_attention_mask": mask, "encoder_hidden_states": states,
                        "use_cache_branch": np.array([False]), **gc.past_feed(empty, empty, L)}
                want = dict(zip([o.name for o in merged.get_outputs()], merged.run(None, feed)))
                for i in range(L):
                    for j, k in enumerate(("key", "value")):
                        cmp(f"cross present.{i}.encoder.{k}", kv[2 * i + j], want[f"present.{i}.encoder.{k}"])
            past_self = empty
            start = 0
            for new in (first, 1, 4):
                f2 = {"input_ids": ids[:, start:start + new], "encoder_attention_mask": mask,
                      **gc.past_feed(past_self, kv, L)}
                got = dict(zip([o.name for o in dec.get_outputs()], dec.run(None, f2)))
                if with_past_ref:
                    want = dict(zip([o.name for o in merged.get_outputs()], merged.run(None, f2)))
                elif start > 0:
                    mf = dict(f2, encoder_hidden_states=states, use_cache_branch=np.array([True]))
                    want = dict(zip([o.name for o in merged.get_outputs()], merged.run(None, mf)))
                what = f"enc {enc_len}, past {start}, new {new}"
                cmp(f"logits ({what})", got["logits"], want["logits"])
                if ARGMAX_OUTPUT in got:
                    try:
                        gc.check_argmax(what, got)
                    except gc.ExportCheckError as e:
                        raise UpgradeError(str(e)) from None
                past_self = []
                for i in range(L):
                    for k in ("key", "value"):
                        name = f"present.{i}.decoder.{k}"
                        cmp(name, got[name], want[name])
                        past_self.append(got[name])
                start += new
    return max(report.values(), default=0.0)


def upgrade(bundle: str, static_check: str = "full") -> str:
    said = _upgrade_decoder(bundle, static_check)
    return f"{said}; {_upgrade_vision(bundle)}"


def _upgrade_vision(bundle: str) -> str:
    """The vision graph without a Concat on the device (cuda_capture.stage_free: the same
    features, checked against the graph as it was with ONNX Runtime on random screens at batches
    1 and 3) and its entry marked capture_safe, which the engine needs to capture the tower as a
    CUDA graph. Only the graph proto is rewritten; nothing is replaced before the check passes.
    A graph that cannot be made capture-safe is left as it is, unmarked, and the line says why."""
    manifest = read_manifest(bundle, UpgradeError)
    entry = manifest["files"]["vision"]
    if entry.get("capture_safe"):
        return "vision graph already capture-safe"
    path = os.path.join(bundle, entry["path"])
    try:
        new, n = cuda_capture.stage_free(onnx.load(path, load_external_data=False))
    except cuda_capture.CaptureError as e:
        return f"vision graph left as it is, not capture-safe ({e}): the engine runs its tower uncaptured"
    except DecodeError as e:
        raise UpgradeError(f"{path}: not a readable ONNX graph ({e})") from None
    tmp = path + ".capture.tmp"
    try:
        said = "vision graph"
        if n:
            # Only the graph proto is rewritten (external data untouched, inline weights inline),
            # checked beside the old one; the file and the manifest are replaced together.
            onnx.save_model(new, tmp)
            worst = _check_vision(path, tmp, manifest["vision"]["image_size"])
            entry.update({k: v for k, v in file_entry(bundle, os.path.basename(tmp)).items() if k != "path"})
            entry["inputs"], entry["outputs"] = graph_io(new)
            said += f": {n} Concat as Pads and Adds; worst |diff| vs the graph as it was {worst:.2g}"
        else:
            new = onnx.load(path, load_external_data=False)
        cuda_capture.mark("vision", entry, new)
        if entry.get("capture_safe"):
            _bump_revision(manifest, 5, 6)
            said += ", capture_safe" if n else " capture-safe as it was: marked"
        else:
            why = (cuda_capture.unmarked_ops(new)
                   or [f"{node} reads {x}" for node, x in cuda_capture.memcpy_edges(new)[:3]])
            said += f"; not capture-safe ({', '.join(why)}): the engine runs its tower uncaptured"
        if n or entry.get("capture_safe"):
            with deferred_interrupts():
                if n:
                    os.replace(tmp, path)
                save_manifest(bundle, manifest)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return said


def _check_vision(old_path: str, new_path: str, image_size: int, seed: int = 5) -> float:
    """Worst |diff| of the two vision graphs' features on random pixels, batches 1 and 3."""
    old, new = gc.session(old_path), gc.session(new_path)
    inp = old.get_inputs()[0]
    dtype = np.float16 if inp.type == "tensor(float16)" else np.float32
    rng = np.random.default_rng(seed)
    report: dict = {}
    for b in (1, 3):
        px = rng.standard_normal((b, 3, image_size, image_size)).astype(dtype)
        want = old.run(None, {inp.name: px})[0]
        try:
            gc.compare(f"vision batch={b}", new.run(None, {inp.name: px})[0], want, gc.TOLERANCES["vision"], report,
                       ref="the graph as it was")
        except gc.ExportCheckError as e:
            raise UpgradeError(str(e)) from None
    return max(report.values(), default=0.0)


def _upgrade_decoder(bundle: str, static_check: str) -> str:
    mpath = os.path.join(bundle, "manifest.json")
    manifest = read_manifest(bundle, UpgradeError)
    if not isinstance(manifest, dict) or manifest.get("format") != "autoui-bundle":
        raise UpgradeError(f"{mpath}: not an autoui bundle manifest")
    version = manifest.get("format_version")
    if version not in (1, 2):
        raise UpgradeError(f"{bundle}: format_version {version!r}; this tool upgrades 1 to 2")
    check_manifest(bundle, manifest)
    if version == 2:
        return _upgrade_format2(bundle, manifest, static_check)
    entry = manifest["files"]["decoder"]
    merged_path = os.path.join(bundle, entry["path"])
    model = manifest["model"]
    merged = onnx.load(merged_path)
    try:
        no_past, with_past = merged_branches(merged)
        dec, cross = split_decoder(no_past, with_past, model["num_decoder_layers"], model["num_heads"],
                                   model["d_kv"], model["vocab_size"], model["d_model"])
        dec = add_argmax(dec)
    except SplitError as e:
        raise UpgradeError(f"{merged_path}: {e}") from None
    del merged, no_past, with_past
    written = []
    files = dict(manifest["files"])
    for role, name, m in (("decoder", DECODER_FILE, dec), ("decoder_cross", CROSS_FILE, cross)):
        path = os.path.join(bundle, name)
        ext = save_graph(strip_graph(m, os.path.splitext(name)[0]), path)
        written += [path] + [os.path.join(bundle, e) for e in ext]
        e = file_entry(bundle, name)
        e["external_data"] = [file_entry(bundle, x) for x in ext]
        e["inputs"], e["outputs"] = graph_io(onnx.load(path, load_external_data=False))
        files[role] = e
    converted = _converted_decoder(manifest)
    worst_static = None
    try:
        worst = _check(merged_path, os.path.join(bundle, DECODER_FILE), os.path.join(bundle, CROSS_FILE), model)
        if not converted:
            written.append(os.path.join(bundle, STATIC_FILE))
            files["decoder_static"], worst_static = _static(bundle, DECODER_FILE, STATIC_FILE, model, static_check)
    except BaseException:  # an interrupt too: the bundle stays format 1, without the new files
        for p in written:
            if os.path.exists(p):
                os.remove(p)
        raise
    # The roles in the exporter's order (decoder_cross after decoder).
    manifest["files"] = _ordered(files)
    manifest["format_version"] = 2
    _bump_revision(manifest, 2, 3)
    if not converted:
        _bump_revision(manifest, 3, 4)
    q = manifest.get("quantization")
    if isinstance(q, dict) and "decoder" in q.get("graphs", []) and "decoder_cross" not in q["graphs"]:
        q["graphs"].insert(q["graphs"].index("decoder") + 1, "decoder_cross")  # cut from the int8 merged graph
    with deferred_interrupts():
        save_manifest(bundle, manifest)
        for old in [entry["path"]] + [x["path"] for x in entry.get("external_data", [])]:
            os.remove(os.path.join(bundle, old))
    if converted:
        return (f"{bundle}: format 2 ({DECODER_FILE}, {CROSS_FILE}; no {STATIC_FILE} for an {converted} decoder); "
                f"worst |diff| vs the merged decoder {worst:.2g}")
    return (f"{bundle}: format 2 ({DECODER_FILE}, {CROSS_FILE}, {STATIC_FILE}); worst |diff| vs the merged "
            f"decoder {worst:.2g}, {_static_said(worst_static)}")


MODEL_INTS = ("num_decoder_layers", "num_heads", "d_kv", "d_model", "vocab_size", "relative_attention_num_buckets",
              "relative_attention_max_distance")


def check_manifest(bundle: str, manifest: dict) -> None:
    """What the upgrade reads of a format-1 or -2 manifest is there and of its type, the files are
    those it lists (bundle_files.verify_files), and its "model" fits the decoder graph (layers,
    heads, d_kv, d_model, vocabulary): else UpgradeError, one line naming the key."""
    mpath = os.path.join(bundle, "manifest.json")

    def need(obj, where: str, key: str, kind):
        v = obj.get(key) if isinstance(obj, dict) else None
        if not isinstance(v, kind) or isinstance(v, bool):
            what = {dict: "an object", str: "a string", int: "an integer"}[kind]
            raise UpgradeError(f"{mpath}: {where}{key} missing or not {what}")
        return v

    files = need(manifest, "", "files", dict)
    roles = ("vision", "decoder") + (("decoder_cross",) if manifest.get("format_version") == 2 else ())
    for role in roles:
        need(need(files, "files.", role, dict), f"files.{role}.", "path", str)
    model = need(manifest, "", "model", dict)
    for k in MODEL_INTS:
        need(model, "model.", k, int)
    need(need(manifest, "", "vision", dict), "vision.", "image_size", int)
    verify_files(bundle, manifest, UpgradeError)

    def fits(key: str, got, where: str):
        if isinstance(got, int) and got != model[key]:
            raise UpgradeError(f"{mpath}: model.{key} {model[key]}, but {where} has {got}")

    dec_path = os.path.join(bundle, files["decoder"]["path"])
    g = onnx.load(dec_path, load_external_data=False).graph
    dims = {v.name: [d.dim_value if d.HasField("dim_value") else d.dim_param for d in v.type.tensor_type.shape.dim]
            for v in list(g.input) + list(g.output)}
    past = {n: d for n, d in dims.items() if re.fullmatch(r"past_key_values\.\d+\.decoder\.key", n)}
    fits("num_decoder_layers", len(past), f"{dec_path} (decoder layers)")
    for d in past.values():
        if len(d) == 4:
            fits("num_heads", d[1], f"{dec_path} (heads)")
            fits("d_kv", d[3], f"{dec_path} (d_kv)")
    if len(dims.get("logits", [])) == 3:
        fits("vocab_size", dims["logits"][2], f"{dec_path} (logits)")
    src = dec_path  # the graph with encoder_hidden_states: the cross graph, or a merged decoder
    if "decoder_cross" in files:
        src = os.path.join(bundle, files["decoder_cross"]["path"])
        g = onnx.load(src, load_external_data=False).graph
        dims = {v.name: [d.dim_value if d.HasField("dim_value") else None for d in v.type.tensor_type.shape.dim]
                for v in g.input}
    states = dims.get("encoder_hidden_states", [])
    if len(states) == 3:
        fits("d_model", states[2], f"{src} (d_model)")


def _bump_revision(manifest: dict, before: int, after: int) -> None:
    """Graphs revision before (the exporter's before a step's change) becomes after. An older
    revision stays: its other graphs still lack the changes in between; the engine reads the
    graphs' IO and the manifest's files, not the revision."""
    exp = manifest.get("exporter")
    if isinstance(exp, dict) and exp.get("graphs_revision") == before:
        exp["graphs_revision"] = after


def _static_said(worst) -> str:
    return "static decoder not checked" if worst is None else f"static vs with-past decoder {worst:.2g}"


def _static(bundle: str, dec_name: str, out_name: str, model: dict, static_check: str):
    """Write the static decoder of bundle/dec_name to bundle/out_name and check it against that
    decoder: its manifest entry (path STATIC_FILE) and the worst logits |diff| (None unchecked)."""
    if static_check not in STATIC_CHECKS:
        raise UpgradeError(f"static check {static_check!r}: want {', '.join(STATIC_CHECKS)}")
    try:
        ext = sd.write_static(bundle, model, decoder_name=dec_name, out_name=out_name)
        worst = None
        if STATIC_CHECKS[static_check]:
            worst = sd.check_static(os.path.join(bundle, dec_name), os.path.join(bundle, out_name), model,
                                    scenarios=STATIC_CHECKS[static_check])
    except (sd.StaticError, gc.ExportCheckError) as e:
        raise UpgradeError(f"{bundle}: {STATIC_FILE}: {e}") from None
    e = file_entry(bundle, out_name)
    e["path"] = STATIC_FILE
    e["external_data"] = [file_entry(bundle, x) for x in ext]
    e["inputs"], e["outputs"] = graph_io(onnx.load(os.path.join(bundle, out_name), load_external_data=False))
    return e, worst


def _upgrade_format2(bundle: str, manifest: dict, static_check: str) -> str:
    """A format-2 bundle's decoder gains the logits_argmax output (checked against the old
    graph), and the bundle the static decoder derived from it (checked against the decoder)
    where either is missing; nothing is replaced before both checks pass."""
    files = manifest["files"]
    entry = files["decoder"]
    has_argmax = any(o.get("name") == ARGMAX_OUTPUT for o in entry.get("outputs", []))
    converted = _converted_decoder(manifest)
    if has_argmax and ("decoder_static" in files or converted):
        if converted:
            return f"{bundle}: already format 2 with {ARGMAX_OUTPUT}; no {STATIC_FILE} for an {converted} decoder"
        return f"{bundle}: already format 2 with {ARGMAX_OUTPUT} and {STATIC_FILE}"
    path = os.path.join(bundle, entry["path"])
    dec_tmp, static_tmp = path + ".argmax.tmp", os.path.join(bundle, STATIC_FILE + ".tmp")
    said = []
    try:
        dec_name = entry["path"]
        if not has_argmax:
            # Only the graph proto is rewritten: external weights stay where they are, inline ones inline.
            m = add_argmax(onnx.load(path, load_external_data=False))
            onnx.save_model(m, dec_tmp)
            onnx.checker.check_model(dec_tmp)
            worst = _check(path, dec_tmp, os.path.join(bundle, files["decoder_cross"]["path"]),
                           manifest["model"], ref="the decoder without argmax")
            said.append(f"{entry['path']} gains {ARGMAX_OUTPUT}; worst |diff| vs the old decoder {worst:.2g}")
            dec_name = os.path.basename(dec_tmp)
        # Derived from the decoder as it will be (again when the decoder changed).
        static_entry = None
        if not converted:
            static_entry, worst = _static(bundle, dec_name, os.path.basename(static_tmp), manifest["model"],
                                          static_check)
            said.append(f"{STATIC_FILE} added; {_static_said(worst)}")
        if not has_argmax:
            new = file_entry(bundle, os.path.basename(dec_tmp))
            entry.update(sha256=new["sha256"], size=new["size"])
            entry["inputs"], entry["outputs"] = graph_io(onnx.load(dec_tmp, load_external_data=False))
            _bump_revision(manifest, 2, 3)
        if static_entry is not None:
            files["decoder_static"] = static_entry
            _bump_revision(manifest, 3, 4)
        else:
            files.pop("decoder_static", None)  # it was derived from the decoder as it was
        manifest["files"] = _ordered(files)
        with deferred_interrupts():  # the new files and the manifest that lists them, together
            if not has_argmax:
                os.replace(dec_tmp, path)
            if static_entry is not None:
                os.replace(static_tmp, os.path.join(bundle, STATIC_FILE))
            save_manifest(bundle, manifest)
    finally:  # an interrupt too
        for p in (dec_tmp, static_tmp):
            if os.path.exists(p):
                os.remove(p)
    return f"{bundle}: " + "; ".join(said)


def _converted_decoder(manifest: dict) -> str | None:
    """"int8" or "fp16" when the bundle's decoder is a converted one (scripts.quantize,
    scripts.half --roles all): no static decoder then. Dynamic int8 quantizes each call's
    activations with one scale per tensor, so its logits depend on the batch's other rows and
    a static graph cannot be held to the with-past one row by row; the fp16 converter's casts
    are not a layout static_decoder knows."""
    for key, name in (("quantization", "int8"), ("half", "fp16")):
        rec = manifest.get(key)
        if isinstance(rec, dict) and "decoder" in rec.get("graphs", []):
            return name
    return None


def _ordered(files: dict) -> dict:
    """The roles in the exporter's order (FILES, then the tokenizer), any others after."""
    out = {r: files[r] for r in list(FILES) + ["tokenizer"] if r in files}
    out.update({r: v for r, v in files.items() if r not in out})
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.upgrade_bundle", description=__doc__.splitlines()[0])
    p.add_argument("--static-check", choices=list(STATIC_CHECKS), default="full",
                   help="how much of the static decoder's check against the with-past decoder to run "
                        "(short: one scenario, at positions past max_distance; default full)")
    p.add_argument("bundles", nargs="+", metavar="BUNDLE_DIR")
    args = p.parse_args(argv)
    with sigterm_as_interrupt():
        try:
            return _upgrade_all(args)
        except KeyboardInterrupt as e:  # each bundle is upgraded whole or left as it was
            return stopped("upgrade_bundle", e)


def _upgrade_all(args) -> int:
    """main's upgrades, bundle after bundle, until one fails (its one line, 1)."""
    for b in args.bundles:
        try:
            print(upgrade(b, args.static_check), flush=True)
        except (UpgradeError, OSError) as e:
            print(f"upgrade_bundle: {e}", file=sys.stderr)
            return 1
        except (KeyError, TypeError, ValueError) as e:  # what check_manifest does not cover
            print(f"upgrade_bundle: {b}/manifest.json: not as this tool reads it ({type(e).__name__}: {e})",
                  file=sys.stderr)
            return 1
        except DecodeError as e:  # a decoder graph that is not ONNX
            print(f"upgrade_bundle: {b}: a graph is not readable ONNX ({e})", file=sys.stderr)
            return 1
        except Exception as e:  # ONNX Runtime's own errors are plain Exceptions: one line, not a traceback
            if not type(e).__module__.startswith("onnxruntime"):
                raise
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            print(f"upgrade_bundle: {b}: ONNX Runtime: {first}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
