"""Writing an autoui bundle's files, for every script that writes one (export, quantize, half,
upgrade_bundle): graphs with their weights in 4 KiB-aligned external data, the manifest's file
entries (hash, size, graph IO), the manifest itself, and the variants (int8, fp16) of an fp32
bundle. It imports no other module of this project but bundle_format, so that each of those
scripts can use it without importing another."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import threading

import onnx
from onnx import TensorProto

from . import cuda_capture
from .bundle_format import FILES, format_error

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
    """Write manifest.json whole or not at all (a tmp file renamed over it). A manifest with a
    NaN or infinity, which JSON has no literal for, is a ValueError and writes nothing."""
    path = os.path.join(out_dir, "manifest.json")
    try:
        text = json.dumps(manifest, indent=2, allow_nan=False) + "\n"
    except ValueError as e:
        raise ValueError(f"{path}: not written ({e})") from None
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


# ---------------------------------------------------------------- writing a bundle directory
#
# Every tool that writes a bundle to --out (scripts.export, scripts.quantize, scripts.half,
# scripts.attention, scripts.skip_norm) writes it into a fresh hidden directory beside --out
# (staged_output) and moves it into place only once it is complete and checked: a failed or
# interrupted run leaves whatever --out held as it was (a killed one leaves a hidden
# .NAME.tmp-* directory, no more).

# Names a bundle's own files may have: an existing --out loses them when it is replaced;
# anything else in it (a README, a sample screen) moves into the new bundle.
BUNDLE_NAMES = ({"manifest.json", "manifest.json.tmp", "tokenizer.json",
                 "decoder_model_merged.onnx", "decoder_model_merged.onnx.data"}
                | set(FILES.values()) | {f + ".data" for f in FILES.values()})


def _inside(path: str, parent: str) -> bool:
    return path != parent and os.path.commonpath([path, parent]) == parent


def check_output(out_dir: str, inputs=(), error=RuntimeError, out_flag: str = "--out", in_flag: str = "--in") -> str:
    """Refuse, with error(why), an output directory (the flag out_flag) that staged_output must
    not replace: one that is (by real path: symlinks followed) or holds or lies inside one of the
    input directories (in_flag), one that exists and is not a directory, and a non-empty
    directory without a manifest.json (not a bundle). Returns its real path."""
    real = os.path.realpath(out_dir)
    for inp in inputs:
        r = os.path.realpath(inp)
        if r == real:
            raise error(f"{out_flag} must differ from {in_flag}")
        if _inside(r, real):
            raise error(f"{out_flag} {out_dir} holds {in_flag} {inp}")
        if _inside(real, r):
            raise error(f"{out_flag} {out_dir} lies inside {in_flag} {inp}")
    if os.path.lexists(real) and not os.path.isdir(real):
        raise error(f"{out_flag} {out_dir}: exists and is not a directory")
    if os.path.isdir(real) and os.listdir(real) and not os.path.isfile(os.path.join(real, "manifest.json")):
        raise error(f"{out_flag} {out_dir}: a non-empty directory without a manifest.json (not a bundle); "
                    "not replacing it")
    return real


@contextlib.contextmanager
def deferred_interrupts():
    """SIGINT and SIGTERM held back (then raised) while the block runs: a commit of several
    renames is not cut in half by Ctrl-C. Only in the main thread (elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got = []
    old = {s: signal.signal(s, lambda n, _f: got.append(n)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if got:
            signal.raise_signal(got[0])


def _bundle_files(out_dir: str) -> set:
    """The names of out_dir that belong to its bundle: the files its manifest lists and BUNDLE_NAMES."""
    names = set(BUNDLE_NAMES)
    try:
        with open(os.path.join(out_dir, "manifest.json")) as f:
            files = json.load(f).get("files", {})
        for spec in files.values():
            names.add(spec["path"])
            names.update(e["path"] for e in spec.get("external_data", []))
    except (OSError, ValueError, AttributeError, TypeError, KeyError):
        pass
    return names


def _replace_dir(tmp: str, out: str) -> None:
    """Move the complete bundle tmp to out (a real path). An existing out is renamed aside
    first, then removed once its files that are not bundle files have moved into the new one."""
    umask = os.umask(0)
    os.umask(umask)
    with deferred_interrupts():
        if not os.path.isdir(out):
            os.chmod(tmp, 0o777 & ~umask)
            os.rename(tmp, out)
            return
        os.chmod(tmp, os.stat(out).st_mode & 0o7777)
        ours = _bundle_files(out)
        keep = [n for n in os.listdir(out) if n not in ours and not os.path.lexists(os.path.join(tmp, n))]
        old = tempfile.mkdtemp(prefix="." + os.path.basename(out) + ".old-", dir=os.path.dirname(out))
        try:
            os.rename(out, old + "/b")
        except BaseException:
            os.rmdir(old)
            raise
        try:
            os.rename(tmp, out)
        except BaseException:
            os.rename(old + "/b", out)
            os.rmdir(old)
            raise
        try:
            for n in keep:
                os.rename(os.path.join(old, "b", n), os.path.join(out, n))
        except OSError as e:
            raise OSError(f"{out}: written, but moving the old directory's other files from {old}/b "
                          f"failed ({e})") from None
        shutil.rmtree(old)


@contextlib.contextmanager
def staged_output(out_dir: str, inputs=(), error=RuntimeError):
    """Yield a fresh directory beside out_dir to write a bundle into; when the block ends
    normally, that directory replaces out_dir (check_output's refusals first). When it raises
    (or is interrupted), the directory is removed and out_dir left as it was. A symlink out_dir
    keeps pointing where it did: its target is replaced."""
    real = check_output(out_dir, inputs, error)
    parent = os.path.dirname(real)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="." + os.path.basename(real) + ".tmp-", dir=parent)
    try:
        yield tmp
        _replace_dir(tmp, real)
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the tool is (sigterm_as_interrupt), so that what it stages is removed
    as after Ctrl-C."""


@contextlib.contextmanager
def sigterm_as_interrupt():
    """SIGTERM (a job's timeout, a scheduler's stop) raises Terminated while the block runs, as
    Ctrl-C raises KeyboardInterrupt: staged directories are removed on the way out (staged_output;
    a commit under way finishes first: deferred_interrupts). Only in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum, frame):
        raise Terminated
    old = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def stopped(tool: str, e: KeyboardInterrupt) -> int:
    """A tool stopped by Ctrl-C or SIGTERM (e): its one line, and the shell's status for it."""
    term = isinstance(e, Terminated)
    print(f"{tool}: stopped by {'SIGTERM' if term else 'Ctrl-C'}", file=sys.stderr)
    return 143 if term else 130


def run_tool(tool: str, run, errors=()) -> int:
    """run() as a command-line tool's body: its exit status, 0, or 1 with the one line "tool: why"
    on stderr for an error of errors (the tool's own), OSError or ValueError; stopped by Ctrl-C or
    SIGTERM, 130 or 143 (stopped)."""
    with sigterm_as_interrupt():
        try:
            run()
        except (*errors, OSError, ValueError) as e:
            print(f"{tool}: {e}", file=sys.stderr)
            return 1
        except KeyboardInterrupt as e:
            return stopped(tool, e)
    return 0


def check_number(name: str, value, error=RuntimeError, minimum=None, integer: bool = False):
    """value for the flag name, refused (error) when it is not a finite number (an integer with
    integer), or below minimum."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and integer:
        ok = float(value).is_integer()
    if not ok or (minimum is not None and value < minimum):
        want = "an integer" if integer else "a finite number"
        raise error(f"{name} {value}: want {want}" + (f" >= {minimum}" if minimum is not None else ""))
    return int(value) if integer else value


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


def verify_files(bundle: str, manifest: dict, error=RuntimeError) -> None:
    """Every file the manifest lists (graphs, their external data, the tokenizer) is there with
    the size and sha256 the manifest gives it; else error("PATH: why"), one line naming the file."""
    mpath = os.path.join(bundle, "manifest.json")
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or not files:
        raise error(f"{mpath}: no \"files\" object")
    done = set()  # the static decoder lists the decoder's external data too
    for role, spec in files.items():
        entries = [spec] + (spec.get("external_data") or []) if isinstance(spec, dict) else [spec]
        for e in entries:
            if not (isinstance(e, dict) and isinstance(e.get("path"), str) and isinstance(e.get("sha256"), str)
                    and isinstance(e.get("size"), int)):
                raise error(f"{mpath}: files.{role}: an entry without path, sha256 and size")
            path = os.path.join(bundle, e["path"])
            if (e["path"], e["size"], e["sha256"]) in done:
                continue
            done.add((e["path"], e["size"], e["sha256"]))
            try:
                size = os.path.getsize(path)
            except OSError as ex:
                raise error(f"{path}: cannot read ({ex.strerror or ex})") from None
            if size != e["size"]:
                raise error(f"{path}: {size} bytes, the manifest says {e['size']} (corrupt or not this bundle's file)")
            if sha256_file(path) != e["sha256"]:
                raise error(f"{path}: sha256 differs from the manifest's (corrupt or not this bundle's file)")


def read_fp32_bundle(in_dir: str, out_dir: str, error=RuntimeError) -> dict:
    """The manifest of the fp32 bundle in_dir that a variant is made from, raising error(why)
    for a manifest that cannot be read, another format or precision, an out_dir that
    check_output refuses, or a file that is not as the manifest says (verify_files)."""
    manifest = read_manifest(in_dir, error)
    if not isinstance(manifest, dict):
        raise error(f"{os.path.join(in_dir, 'manifest.json')}: not an autoui bundle manifest")
    if err := format_error(in_dir, manifest):
        raise error(err)
    if manifest.get("precision") != "fp32":
        raise error(f"{in_dir}: precision {manifest.get('precision')!r}, want an fp32 bundle")
    check_output(out_dir, [in_dir], error)
    verify_files(in_dir, manifest, error)
    return manifest


def check_roles(roles, known, error=RuntimeError) -> tuple:
    """roles as given (a variant's --roles), refused when empty or naming a role not in known."""
    roles = tuple(roles)
    if not roles:
        raise error(f"no roles given: want some of {', '.join(known)}")
    for role in roles:
        if role not in known:
            raise error(f"role {role!r}: want some of {', '.join(known)}")
    return roles


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


def rewrite_variant(in_dir: str, out_dir: str, key: str, already: str, roles, convert, record, checks, what: str,
                    error=RuntimeError) -> dict:
    """Write a graph rewrite's variant of the fp32 bundle in_dir to out_dir (scripts.attention,
    scripts.skip_norm, scripts.merge_qkv): each of roles the bundle has as convert(role, path,
    manifest) returns it, the manifest's key = record() once they are converted, then
    checks(at, staged, manifest) with at: role -> (its original path, its rewritten path) and
    staged the directory written (error from a check: out_dir not written). A bundle that already
    has key is refused (already: what that means). Returns the variant's manifest."""
    manifest = read_fp32_bundle(in_dir, out_dir, error)
    files = manifest["files"]
    if key in manifest:
        raise error(f"{in_dir}: {already} ({manifest[key]['tool']})")
    graphs = [r for r in roles if r in files]
    with staged_output(out_dir, [in_dir], error) as staged:  # written here, moved to out_dir when checked
        manifest["files"] = write_variant(in_dir, staged, manifest, graphs,
                                          lambda role, src: convert(role, src, manifest), what, error)
        manifest[key] = record()
        save_variant_manifest(staged, manifest, files, out_dir)
        at = {r: (os.path.join(in_dir, files[r]["path"]), os.path.join(staged, manifest["files"][r]["path"]))
              for r in graphs}
        checked_variant(out_dir, lambda: checks(at, staged, manifest), error)
    return manifest


def checked_variant(out_dir: str, checks, error=RuntimeError) -> None:
    """Run checks() on a variant just written (to staged_output's directory; they read it through
    its manifest). An error of theirs says that out_dir (the --out it was for) was not written:
    staged_output then removes the variant and leaves out_dir as it was."""
    try:
        checks()
    except error as e:
        raise error(f"{e} ({out_dir} not written)") from None


def save_variant_manifest(out_dir: str, manifest: dict, fp32_files: dict, name: str | None = None) -> None:
    """Write a variant's manifest to out_dir and log its size beside the fp32 bundle's (as the
    bundle name, its --out, when given)."""
    save_manifest(out_dir, manifest)
    before = sum(graph_bytes(s) for s in fp32_files.values())
    after = sum(graph_bytes(s) for s in manifest["files"].values())
    log(f"bundle {name or out_dir}: {after / 1e6:.1f} MB (fp32 {before / 1e6:.1f} MB)")
