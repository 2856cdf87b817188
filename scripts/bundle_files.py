"""Writing an autoui bundle's files, for every script that writes one (export, quantize, half,
upgrade_bundle): graphs with their weights in 4 KiB-aligned external data, the manifest's file
entries (hash, size, graph IO), the manifest itself, and the variants (int8, fp16) of an fp32
bundle. It imports no other module of this project but bundle_format, so that each of those
scripts can use it without importing another."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys

import onnx
from onnx import TensorProto

from . import cuda_capture
from .bundle_format import format_error

EXTERNAL_DATA_BYTES = 1_900_000_000  # protobuf's hard limit is 2 GiB; leave room for the graph itself
# Weights of at least this size go to the external-data file, at offsets ONNX Runtime can map.
EXTERNAL_MIN_BYTES = 4096
EXTERNAL_ALIGN = 4096

# A role named on a variant's command line stands for these graphs (the cross graph is the decoder's).
ROLE_GRAPHS = {"vision": ("vision",), "encoder": ("encoder",), "fusion": ("fusion",),
               "decoder": ("decoder", "decoder_cross")}
# Graphs derived from another role's graph whose weights they share (the static-cache decoder
# reads the with-past decoder's external data): a variant that converts that graph converts them
# too or drops them (they would read the converted graph's weights file as the old one's); one
# that does not copies them.
DERIVED_GRAPHS = {"decoder_static": "decoder"}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def strip_graph(model: onnx.ModelProto, graph_name: str) -> onnx.ModelProto:
    """Remove doc strings (they can carry source paths) and make the metadata fixed."""
    def graph_walk(g):
        g.doc_string = ""
        for n in g.node:
            n.doc_string = ""
            for a in n.attribute:
                a.doc_string = ""
                if a.type == onnx.AttributeProto.GRAPH:
                    graph_walk(a.g)
                for sg in a.graphs:
                    graph_walk(sg)
        for coll in (g.input, g.output, g.value_info):
            for v in coll:
                v.doc_string = ""
        for t in g.initializer:
            t.doc_string = ""
    graph_walk(model.graph)
    model.doc_string = ""
    model.graph.name = graph_name
    model.producer_name = "autoui-scripts.export"
    model.producer_version = "1"
    del model.metadata_props[:]
    return model


def initializer_bytes(model: onnx.ModelProto) -> int:
    """Bytes of weights inside the protobuf (external data not counted)."""
    total = 0
    def walk(g):
        nonlocal total
        for t in g.initializer:
            if t.data_location == TensorProto.EXTERNAL:
                continue
            total += len(t.raw_data) if t.raw_data else onnx.numpy_helper.to_array(t).nbytes
        for n in g.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
    walk(model.graph)
    return total


def save_graph(model: onnx.ModelProto, path: str) -> list[str]:
    """Save the graph with its weights in one external-data file beside it, each tensor at a
    4 KiB-aligned offset: ONNX Runtime then maps them from the file instead of copying them
    out of the protobuf (T5-base decoder: 734 -> 578 MB resident after load and runs, peak
    827 -> 631 MB), and no graph meets protobuf's 2 GiB limit. The model's initializers are
    moved out (their raw_data cleared). Returns the data file's name, or none when no
    tensor is large enough to move. ValueError when what stays inline is over EXTERNAL_DATA_BYTES."""
    data_name = os.path.basename(path) + ".data"
    data_path = os.path.join(os.path.dirname(path), data_name)
    for p in (path, data_path):
        if os.path.exists(p):
            os.remove(p)
    off = 0
    with open(data_path, "wb") as f:
        for t in model.graph.initializer:
            raw = t.raw_data
            if t.data_location == TensorProto.EXTERNAL or len(raw) < EXTERNAL_MIN_BYTES:
                continue
            pad = -off % EXTERNAL_ALIGN
            f.write(b"\0" * pad)
            off += pad
            f.write(raw)
            del t.external_data[:]
            for k, v in (("location", data_name), ("offset", str(off)), ("length", str(len(raw)))):
                e = t.external_data.add()
                e.key, e.value = k, v
            t.data_location = TensorProto.EXTERNAL
            t.ClearField("raw_data")
            off += len(raw)
    if off == 0:
        os.remove(data_path)
    if initializer_bytes(model) > EXTERNAL_DATA_BYTES:
        raise ValueError(f"{path}: {initializer_bytes(model)} bytes of weights stay inside the protobuf")
    onnx.save_model(model, path)
    onnx.checker.check_model(path)
    return [data_name] if off else []


_DTYPES = {TensorProto.FLOAT: "float32", TensorProto.INT64: "int64", TensorProto.BOOL: "bool",
           TensorProto.INT32: "int32", TensorProto.FLOAT16: "float16"}


def _dims(vi: onnx.ValueInfoProto) -> list:
    return [d.dim_param if d.dim_param else int(d.dim_value) for d in vi.type.tensor_type.shape.dim]


def graph_io(model: onnx.ModelProto) -> tuple[list, list]:
    """The manifest's "inputs" and "outputs" of a graph: name, dtype and dims of each."""
    inits = {t.name for t in model.graph.initializer}
    ins = [{"name": v.name, "dtype": _DTYPES[v.type.tensor_type.elem_type], "dims": _dims(v)}
           for v in model.graph.input if v.name not in inits]
    outs = [{"name": v.name, "dtype": _DTYPES[v.type.tensor_type.elem_type], "dims": _dims(v)}
            for v in model.graph.output]
    return ins, outs


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_entry(out_dir: str, name: str) -> dict:
    """The manifest's entry of the file name in out_dir: path, sha256, size."""
    p = os.path.join(out_dir, name)
    return {"path": name, "sha256": sha256_file(p), "size": os.path.getsize(p)}


def save_manifest(out_dir: str, manifest: dict) -> None:
    """Write manifest.json whole or not at all (a tmp file renamed over it)."""
    path = os.path.join(out_dir, "manifest.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


# ---------------------------------------------------------------- variants of an fp32 bundle

def graph_bytes(spec: dict) -> int:
    """A graph's bytes on disk: the graph file and its external data."""
    return spec["size"] + sum(e["size"] for e in spec.get("external_data", []))


def read_manifest(bundle: str, error=RuntimeError) -> dict:
    """bundle's manifest.json, raising error("PATH: why") where it cannot be read or parsed."""
    path = os.path.join(bundle, "manifest.json")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise error(f"{path}: {e}") from None


def read_fp32_bundle(in_dir: str, out_dir: str, error=RuntimeError) -> dict:
    """The manifest of the fp32 bundle in_dir that a variant is made from, raising error(why)
    for a manifest that cannot be read, another format or precision, or an out_dir that is in_dir."""
    manifest = read_manifest(in_dir, error)
    if err := format_error(in_dir, manifest):
        raise error(err)
    if manifest.get("precision") != "fp32":
        raise error(f"{in_dir}: precision {manifest.get('precision')!r}, want an fp32 bundle")
    if os.path.abspath(in_dir) == os.path.abspath(out_dir):
        raise error("--out must differ from --in")
    return manifest


def write_variant(in_dir: str, out_dir: str, manifest: dict, graphs, convert, what: str, error=RuntimeError) -> dict:
    """Write the files of a variant of the bundle in_dir to out_dir: each role in graphs as
    convert(role, path) returns it (its IO checked against the manifest's), the other graphs and
    the tokenizer copied, a graph derived from a converted one (DERIVED_GRAPHS) left out unless
    graphs converts it too.
    Returns the manifest's new "files" (the caller writes the manifest)."""
    os.makedirs(out_dir, exist_ok=True)
    files = manifest["files"]
    new_files = {}
    copied = set()
    for role, spec in files.items():
        if role == "tokenizer" or (DERIVED_GRAPHS.get(role) in graphs and role not in graphs):
            continue
        src = os.path.join(in_dir, spec["path"])
        dst = os.path.join(out_dir, spec["path"])
        entry = {k: v for k, v in spec.items()}
        if role in graphs:
            ext = save_graph(convert(role, src), dst)
            written = onnx.load(dst, load_external_data=False)
            ins, outs = graph_io(written)
            if ins != spec["inputs"] or outs != spec["outputs"]:
                raise error(f"{role}: {what} graph IO differs from the manifest's")
            entry["external_data"] = [file_entry(out_dir, e) for e in ext]
            cuda_capture.mark(role, entry, written)  # the conversion's nodes decide it anew
        else:
            for name in [spec["path"]] + [e["path"] for e in spec.get("external_data", [])]:
                if name not in copied:  # a derived graph shares its source's external data
                    shutil.copyfile(os.path.join(in_dir, name), os.path.join(out_dir, name))
                    copied.add(name)
        entry.update(file_entry(out_dir, spec["path"]))
        new_files[role] = entry
    shutil.copyfile(os.path.join(in_dir, files["tokenizer"]["path"]), os.path.join(out_dir, files["tokenizer"]["path"]))
    new_files["tokenizer"] = file_entry(out_dir, files["tokenizer"]["path"])
    return {role: new_files[role] for role in files if role in new_files}


def checked_variant(out_dir: str, checks, error=RuntimeError) -> None:
    """Run checks() on a variant just written to out_dir (they read it through its manifest). If
    they fail in any way (error, ORT refusing a graph, an interrupt), the manifest is removed
    first, so that no engine loads a bundle that did not pass them; an error says so."""
    try:
        checks()
    except BaseException as e:
        os.remove(os.path.join(out_dir, "manifest.json"))
        if isinstance(e, error):
            raise error(f"{e} ({out_dir}/manifest.json removed)") from None
        raise


def save_variant_manifest(out_dir: str, manifest: dict, fp32_files: dict) -> None:
    """Write a variant's manifest and log its size beside the fp32 bundle's."""
    save_manifest(out_dir, manifest)
    before = sum(graph_bytes(s) for s in fp32_files.values())
    after = sum(graph_bytes(s) for s in manifest["files"].values())
    log(f"bundle {out_dir}: {after / 1e6:.1f} MB (fp32 {before / 1e6:.1f} MB)")
