"""Upgrade a bundle in place: format 1 (merged decoder) to format 2 (with-past decoder + cross
graph), and a format-2 decoder without the logits_argmax output to one with it.

  python -m scripts.upgrade_bundle BUNDLE_DIR [BUNDLE_DIR ...]

The two graphs are cut out of the merged decoder's If branches (scripts/decoder_split.py), so the
weights are the same bytes (int8 bundles stay int8). Before the manifest is rewritten, the new
graphs are run against the merged one with ONNX Runtime on random inputs (a first call of 1 and
3 tokens, then cached calls of 1 and 4); a difference beyond the export tolerance aborts and
leaves the bundle as it was. The argmax output is one ArgMax node appended to the decoder graph
(its weights, inline or external, are not rewritten); the new graph must give the old one's
logits and presents and the exact argmax of its logits on the same random calls.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
import onnx

from . import graph_check as gc
from .bundle_files import file_entry, graph_io, save_graph, save_manifest, strip_graph
from .bundle_format import ARGMAX_OUTPUT, FILES, GRAPHS_REVISION
from .decoder_split import SplitError, merged_branches, split_decoder
from .onnx_graphs import add_argmax

CROSS_FILE = FILES["decoder_cross"]
DECODER_FILE = FILES["decoder"]


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


def upgrade(bundle: str) -> str:
    mpath = os.path.join(bundle, "manifest.json")
    try:
        with open(mpath) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        raise UpgradeError(f"{mpath}: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != "autoui-bundle":
        raise UpgradeError(f"{mpath}: not an autoui bundle manifest")
    version = manifest.get("format_version")
    if version == 2:
        return _add_argmax(bundle, manifest)
    if version != 1:
        raise UpgradeError(f"{bundle}: format_version {version!r}; this tool upgrades 1 to 2")
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
    try:
        worst = _check(merged_path, os.path.join(bundle, DECODER_FILE), os.path.join(bundle, CROSS_FILE), model)
    except Exception:
        for p in written:
            os.remove(p)
        raise
    # The roles in the exporter's order (decoder_cross after decoder).
    manifest["files"] = {r: files[r] for r in list(FILES) + ["tokenizer"] if r in files}
    manifest["files"].update({r: v for r, v in files.items() if r not in manifest["files"]})
    manifest["format_version"] = 2
    _bump_revision(manifest)
    q = manifest.get("quantization")
    if isinstance(q, dict) and "decoder" in q.get("graphs", []) and "decoder_cross" not in q["graphs"]:
        q["graphs"].insert(q["graphs"].index("decoder") + 1, "decoder_cross")  # cut from the int8 merged graph
    save_manifest(bundle, manifest)
    for old in [entry["path"]] + [x["path"] for x in entry.get("external_data", [])]:
        os.remove(os.path.join(bundle, old))
    return f"{bundle}: format 2 ({DECODER_FILE}, {CROSS_FILE}); worst |diff| vs the merged decoder {worst:.2g}"


def _bump_revision(manifest: dict) -> None:
    """Graphs revision 2 (the exporter's before the argmax output) becomes 3. An older revision
    stays: its other graphs still lack revision 2's changes; the engine reads the decoder's
    outputs, not the revision."""
    exp = manifest.get("exporter")
    if isinstance(exp, dict) and exp.get("graphs_revision") == 2:
        exp["graphs_revision"] = GRAPHS_REVISION


def _add_argmax(bundle: str, manifest: dict) -> str:
    """A format-2 bundle's decoder gains the logits_argmax output, checked against the old graph."""
    entry = manifest["files"]["decoder"]
    if any(o.get("name") == ARGMAX_OUTPUT for o in entry.get("outputs", [])):
        return f"{bundle}: already format 2 with {ARGMAX_OUTPUT}"
    path = os.path.join(bundle, entry["path"])
    # Only the graph proto is rewritten: external weights stay where they are, inline ones inline.
    m = add_argmax(onnx.load(path, load_external_data=False))
    tmp = path + ".argmax.tmp"
    onnx.save_model(m, tmp)
    try:
        onnx.checker.check_model(tmp)
        worst = _check(path, tmp, os.path.join(bundle, manifest["files"]["decoder_cross"]["path"]),
                       manifest["model"], ref="the decoder without argmax")
    except Exception:
        os.remove(tmp)
        raise
    os.replace(tmp, path)
    new = file_entry(bundle, entry["path"])
    entry.update(sha256=new["sha256"], size=new["size"])
    entry["inputs"], entry["outputs"] = graph_io(m)
    _bump_revision(manifest)
    save_manifest(bundle, manifest)
    return f"{bundle}: {entry['path']} gains {ARGMAX_OUTPUT}; worst |diff| vs the old decoder {worst:.2g}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.upgrade_bundle", description=__doc__.splitlines()[0])
    p.add_argument("bundles", nargs="+", metavar="BUNDLE_DIR")
    args = p.parse_args(argv)
    for b in args.bundles:
        try:
            print(upgrade(b), flush=True)
        except (UpgradeError, OSError, KeyError, TypeError) as e:
            print(f"upgrade_bundle: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
