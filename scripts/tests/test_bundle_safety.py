"""The tools that write or rewrite a bundle (export, quantize, half, attention, skip_norm,
merge_qkv, cuda_bundle, upgrade_bundle) against hostile use: an --out that is the input (through a symlink) or nests with
it, an existing bundle at --out and a run that fails or is interrupted late, corrupt input
files, invalid flags, and errors that must be one line with a non-zero exit, not a traceback.
Tiny bundles only (copies of the committed one; models/ is never written)."""

import errno
import json
import os
import shutil
import signal

import pytest

from scripts import attention as pa
from scripts import bundle_files
from scripts import cuda_bundle as cb
from scripts import export
from scripts import half as h
from scripts import merge_qkv as mq
from scripts import quantize as q
from scripts import skip_norm as sn
from scripts import upgrade_bundle as ub
from scripts.tests.conftest import GOLDEN, TESTDATA, TINY, TOKENIZER

DEFAULT = os.path.join(os.path.dirname(TESTDATA), "default")


def copy_tiny(dst) -> str:
    shutil.copytree(TINY, dst)
    return str(dst)


def snapshot(d) -> dict:
    """Every entry of the directory d (hidden ones too): file name -> sha256."""
    return {n: bundle_files.sha256_file(os.path.join(d, n)) for n in sorted(os.listdir(d))}


def one_line_error(capsys, prefix: str) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(prefix), err
    return last


# ---------------------------------------------------------------- --out against --in

TOOLS = {
    "quantize": (q.main, []),
    "half": (h.main, ["--steps", "1"]),
    "attention": (pa.main, ["--decoder", "plain"]),
    "skip_norm": (sn.main, []),
    "merge_qkv": (mq.main, []),
    "cuda_bundle": (cb.main, []),
}


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_symlinked_out_is_the_input(tool, tmp_path, capsys):
    # `ln -s tcopy tlink; --in tcopy --out tlink` once rewrote tcopy's graphs under its old manifest
    src = copy_tiny(tmp_path / "tcopy")
    os.symlink("tcopy", tmp_path / "tlink")
    before = snapshot(src)
    main, extra = TOOLS[tool]
    assert main(["--in", src, "--out", str(tmp_path / "tlink")] + extra) == 1
    assert one_line_error(capsys, f"{tool}: ") == f"{tool}: --out must differ from --in"
    assert snapshot(src) == before and sorted(os.listdir(tmp_path)) == ["tcopy", "tlink"]


@pytest.mark.parametrize("out,why", [
    ("tcopy/sub", "lies inside --in"),
    (".", "holds --in"),
    ("tcopy/manifest.json", "lies inside --in"),
    ("afile", "exists and is not a directory"),
    ("notes", "without a manifest.json (not a bundle)"),
])
def test_out_refused(out, why, tmp_path, capsys):
    src = copy_tiny(tmp_path / "tcopy")
    (tmp_path / "afile").write_text("x")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("keep me")
    before = snapshot(src)
    listing = sorted(os.listdir(tmp_path))
    assert q.main(["--in", src, "--out", str(tmp_path / out)]) == 1
    assert why in one_line_error(capsys, "quantize: ")
    assert snapshot(src) == before and sorted(os.listdir(tmp_path)) == listing
    assert (tmp_path / "notes" / "todo.txt").read_text() == "keep me"


def test_in_inside_out_refused(tmp_path, capsys):
    outer = tmp_path / "outer"
    outer.mkdir()
    (outer / "manifest.json").write_text("{}")
    src = copy_tiny(outer / "tcopy")
    assert q.main(["--in", src, "--out", str(outer)]) == 1
    assert "holds --in" in one_line_error(capsys, "quantize: ")
    assert os.path.isfile(os.path.join(src, "manifest.json"))


# ---------------------------------------------------------------- an existing bundle at --out

def test_replacing_a_bundle_leaves_no_stale_file(tmp_path):
    # an fp32 bundle (with decoder_static_model.onnx) at --out: the int8 variant replaces it whole,
    # files that are not the bundle's move over, the result is exactly what its manifest lists
    out = copy_tiny(tmp_path / "out")
    (tmp_path / "out" / "README").write_text("mine")
    m = q.quantize_bundle(TINY, out)
    listed = {f for s in m["files"].values() for f in [s["path"]] + [e["path"] for e in s.get("external_data", [])]}
    assert "decoder_static" not in m["files"]
    assert set(os.listdir(out)) == listed | {"manifest.json", "README"}
    bundle_files.verify_files(out, m)
    assert (tmp_path / "out" / "README").read_text() == "mine"
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_failed_quantize_leaves_the_old_bundle(tmp_path, monkeypatch, capsys):
    out = copy_tiny(tmp_path / "out")
    before = snapshot(out)
    real, calls = q.quantize_model, []

    def third_fails(*a, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise q.QuantizeError("decoder: broken")
        return real(*a, **kw)
    monkeypatch.setattr(q, "quantize_model", third_fails)
    assert q.main(["--in", TINY, "--out", out]) == 1
    assert one_line_error(capsys, "quantize: ") == "quantize: decoder: broken"
    assert snapshot(out) == before and sorted(os.listdir(tmp_path)) == ["out"]


def test_interrupted_quantize_leaves_the_old_bundle(tmp_path, monkeypatch):
    out = copy_tiny(tmp_path / "out")
    before = snapshot(out)
    real = bundle_files.save_graph

    def interrupted(model, path):
        if os.path.basename(path).startswith("decoder"):
            raise KeyboardInterrupt
        return real(model, path)
    monkeypatch.setattr(bundle_files, "save_graph", interrupted)
    with pytest.raises(KeyboardInterrupt):
        q.quantize_bundle(TINY, out)
    assert snapshot(out) == before and sorted(os.listdir(tmp_path)) == ["out"]


def test_failed_half_check_leaves_the_old_bundle(tmp_path, monkeypatch):
    out = copy_tiny(tmp_path / "out")
    before = snapshot(out)

    def not_finite(*a, **kw):
        raise h.HalfError("non-finite logits")
    monkeypatch.setattr(h, "check_finite", not_finite)
    with pytest.raises(h.HalfError, match="non-finite logits"):
        h.half_bundle(TINY, out, steps=1)
    assert snapshot(out) == before and sorted(os.listdir(tmp_path)) == ["out"]


def _random_export(out, *extra):
    return export._cli(["--random", "--size", "tiny", "--out", str(out), *extra])


def test_failed_export_leaves_the_old_bundle(tmp_path, monkeypatch, capsys):
    out = copy_tiny(tmp_path / "out")
    before = snapshot(out)

    def fails(*a, **kw):
        raise export.ExportCheckError("vision batch=1: ORT worst |diff| 1 > 0.0001")
    monkeypatch.setattr(export, "check_bundle", fails)
    assert _random_export(out) == 1
    assert "vision batch=1" in one_line_error(capsys, "export: error: ")
    assert snapshot(out) == before and sorted(os.listdir(tmp_path)) == ["out"]


def test_interrupted_export_leaves_the_old_bundle(tmp_path, monkeypatch):
    out = copy_tiny(tmp_path / "out")
    before = snapshot(out)

    def interrupted(*a, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(export, "write_static", interrupted)  # after every graph was written
    with pytest.raises(KeyboardInterrupt):  # export.main; its command line: test_stopped_tool_leaves_nothing
        export.main(["--random", "--size", "tiny", "--out", str(out), "--no-check"])
    assert snapshot(out) == before and sorted(os.listdir(tmp_path)) == ["out"]


def test_export_over_a_bundle(tmp_path):
    out = copy_tiny(tmp_path / "out")
    assert _random_export(out, "--no-check") == 0
    with open(os.path.join(out, "manifest.json")) as f:
        m = json.load(f)
    assert m["exporter"]["source"].startswith("random:tiny")
    bundle_files.verify_files(out, m)
    assert sorted(os.listdir(tmp_path)) == ["out"]


# ---------------------------------------------------------------- the input's files

@pytest.mark.parametrize("tool", ["quantize", "half", "merge_qkv", "cuda_bundle"])
@pytest.mark.parametrize("damage", ["byte", "truncate", "missing"])
def test_corrupt_input_refused(tool, damage, tmp_path, capsys):
    src = copy_tiny(tmp_path / "in")
    path = os.path.join(src, "encoder_model.onnx.data")
    if damage == "byte":
        with open(path, "r+b") as f:
            f.seek(5000)
            b = f.read(1)
            f.seek(5000)
            f.write(bytes([b[0] ^ 1]))
    elif damage == "truncate":
        os.truncate(path, 100)
    else:
        os.remove(path)
    main, extra = TOOLS[tool]
    assert main(["--in", src, "--out", str(tmp_path / "out")] + extra) == 1
    assert one_line_error(capsys, f"{tool}: ").startswith(f"{tool}: {path}: ")
    assert not (tmp_path / "out").exists()


def test_upgrade_refuses_corrupt_files(tmp_path, capsys):
    src = copy_tiny(tmp_path / "b")
    os.truncate(os.path.join(src, "vision_model.onnx.data"), 100)
    assert ub.main([src]) == 1
    assert "vision_model.onnx.data: 100 bytes" in one_line_error(capsys, "upgrade_bundle: ")


# ---------------------------------------------------------------- flags

@pytest.mark.parametrize("flags,why", [
    (["--headroom", "nan"], "headroom nan: want a finite number >= 1"),
    (["--headroom", "inf"], "headroom inf: want a finite number >= 1"),
    (["--headroom", "0.5"], "headroom 0.5"),
    (["--steps", "0"], "steps 0: want an integer >= 1"),
    (["--steps", "-1"], "steps -1: want an integer >= 1"),
    (["--threads", "0"], "threads 0"),
    (["--roles", ","], "no roles given"),
])
def test_half_flags_refused(flags, why, tmp_path, capsys):
    assert h.main(["--in", TINY, "--out", str(tmp_path / "out"), "--steps", "2"] + flags) == 1
    assert why in one_line_error(capsys, "half: ")
    assert os.listdir(tmp_path) == []


def test_quantize_empty_roles_refused(tmp_path, capsys):
    assert q.main(["--in", TINY, "--out", str(tmp_path / "out"), "--roles", ","]) == 1
    assert "no roles given" in one_line_error(capsys, "quantize: ")
    assert os.listdir(tmp_path) == []


def test_manifest_without_nan(tmp_path):
    with pytest.raises(ValueError, match="manifest.json: not written"):
        bundle_files.save_manifest(str(tmp_path), {"half": {"limit": float("nan")}})
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------- agreement

def test_agreement_of_a_bundle_with_itself():
    # models/default has its own tokenizer and vocabulary: the golden ids of the tiny bundle are
    # not its outputs, so it is compared with its own greedy output
    r = q.agreement(DEFAULT, DEFAULT, GOLDEN)
    assert r["first_step"]["top1_agreement"] == 1.0 and r["teacher_forced"]["top1_agreement"] == 1.0, r
    assert r["greedy"] == {"identical_outputs": 1.0, "token_agreement": 1.0}, r


# ---------------------------------------------------------------- one-line errors

def test_disk_full_is_one_line(tmp_path, monkeypatch, capsys):
    def full(model, path):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
    monkeypatch.setattr(bundle_files, "save_graph", full)
    assert q.main(["--in", TINY, "--out", str(tmp_path / "out")]) == 1
    assert "No space left on device" in one_line_error(capsys, "quantize: ")
    assert os.listdir(tmp_path) == []


def test_half_on_a_read_only_bundle(tmp_path, monkeypatch):
    # calibration must not write into the input bundle: every write there fails here
    import builtins
    src = copy_tiny(tmp_path / "ro")
    before = snapshot(src)
    real_open, real_os_open = builtins.open, os.open
    inside = os.path.realpath(src) + os.sep

    def is_in(p):
        return isinstance(p, (str, bytes, os.PathLike)) and os.path.realpath(os.fsdecode(p)).startswith(inside)

    def ro_open(file, mode="r", *a, **kw):
        if is_in(file) and any(c in mode for c in "wax+"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), file)
        return real_open(file, mode, *a, **kw)

    def ro_os_open(path, flags, *a, **kw):
        if is_in(path) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
        return real_os_open(path, flags, *a, **kw)
    monkeypatch.setattr(builtins, "open", ro_open)
    monkeypatch.setattr(os, "open", ro_os_open)
    assert h.main(["--in", src, "--out", str(tmp_path / "out"), "--steps", "2"]) == 0
    monkeypatch.undo()
    assert snapshot(src) == before


def test_half_diff_missing_file(tmp_path, capsys):
    assert h.main(["--diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    assert "No such file" in one_line_error(capsys, "half: --diff: ")


def test_export_int8_into_out_refused_first(tmp_path, capsys):
    out = tmp_path / "b"
    assert _random_export(out, "--no-check", "--int8", str(out)) == 1
    assert one_line_error(capsys, "export: error: ") == "export: error: --int8 must differ from --out"
    assert not out.exists()
    assert _random_export(out, "--no-check", "--int8", str(out / "int8")) == 1
    assert "lies inside --out" in one_line_error(capsys, "export: error: ")
    assert not out.exists()


@pytest.mark.parametrize("kind", ["garbage", "folder", "missing"])
def test_export_bad_tokenizer(kind, tmp_path, capsys):
    tok = tmp_path / "tok"
    if kind == "garbage":
        tok.write_bytes(b"\x00not json")
    elif kind == "folder":
        tok.mkdir()
    assert _random_export(tmp_path / "b", "--no-check", "--tokenizer", str(tok)) == 1
    assert str(tok) in one_line_error(capsys, "export: error: ")
    assert not (tmp_path / "b").exists()


def test_export_vision_mismatch_before_building(tmp_path, monkeypatch, capsys):
    # the tiny checkpoint's image_dim is 64: a random ViT-g (1408, ~4 GB) is refused unbuilt
    def built(*a, **kw):
        raise AssertionError("the tower was built")
    monkeypatch.setattr(export.vis, "random_vision", built)
    assert export._cli(["--out", str(tmp_path / "b"), "--checkpoint", os.path.join(TESTDATA, "tiny_checkpoint"),
                        "--tokenizer", TOKENIZER, "--vision", "random", "--vision-size", "vitg", "--no-check"]) == 1
    assert "image_dim is 64" in one_line_error(capsys, "export: error: ")
    assert os.listdir(tmp_path) == []


def _no_static(dst) -> str:
    """A copy of the tiny bundle without its static decoder (upgrade_bundle derives and checks it)."""
    d = copy_tiny(dst)
    with open(os.path.join(d, "manifest.json")) as f:
        m = json.load(f)
    os.remove(os.path.join(d, m["files"].pop("decoder_static")["path"]))
    m["exporter"]["graphs_revision"] = 3
    bundle_files.save_manifest(d, m)
    return d


@pytest.mark.parametrize("edit,why", [
    (lambda m: m["model"].update(num_heads=8), "model.num_heads 8, but"),
    (lambda m: m["model"].update(num_decoder_layers=3), "model.num_decoder_layers 3, but"),
    (lambda m: m["model"].update(d_kv=16), "model.d_kv 16, but"),
    (lambda m: m["model"].pop("d_model"), "model.d_model missing"),
    (lambda m: m.pop("vision"), "vision missing or not an object"),
    (lambda m: m["files"].pop("vision"), "files.vision missing or not an object"),
    (lambda m: m["files"].update(decoder=[]), "files.decoder missing or not an object"),
])
def test_upgrade_hand_edited_manifest(edit, why, tmp_path, capsys):
    d = _no_static(tmp_path / "b")
    with open(os.path.join(d, "manifest.json")) as f:
        m = json.load(f)
    edit(m)
    bundle_files.save_manifest(d, m)
    before = snapshot(d)
    assert ub.main(["--static-check", "short", d]) == 1
    line = one_line_error(capsys, "upgrade_bundle: ")
    assert f"{d}/manifest.json: " in line and why in line, line
    assert snapshot(d) == before


def test_upgrade_interrupted_leaves_the_bundle(tmp_path, monkeypatch):
    d = _no_static(tmp_path / "b")
    before = snapshot(d)

    def interrupted(*a, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(ub.sd, "check_static", interrupted)  # the static decoder written, not yet checked
    with pytest.raises(KeyboardInterrupt):
        ub.upgrade(d)
    assert snapshot(d) == before


def _stop(how):
    """A stand-in for a tool's step that stops it halfway: Ctrl-C, or SIGTERM (a job's timeout)."""
    def stop(*a, **kw):
        if how == "ctrl-c":
            raise KeyboardInterrupt
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # the handler raises at the next bytecode
            pass
        raise AssertionError("SIGTERM did not stop the tool")
    return stop


@pytest.mark.parametrize("tool", ["cuda_bundle", "export", "upgrade_bundle"])
@pytest.mark.parametrize("how,rc", [("ctrl-c", 130), ("sigterm", 143)])
def test_stopped_tool_leaves_nothing(tool, how, rc, tmp_path, monkeypatch, capsys):
    # Ctrl-C or SIGTERM halfway (cuda_bundle in its second step, export after writing every graph,
    # upgrade_bundle before checking the static decoder): one line, the shell's status, the bundle
    # as it was, no staged or intermediate directory left
    if tool == "upgrade_bundle":
        out = _no_static(tmp_path / "out")
        monkeypatch.setattr(ub.sd, "check_static", _stop(how))
        run = lambda: ub.main([out])
    else:
        out = copy_tiny(tmp_path / "out")
        if tool == "export":
            monkeypatch.setattr(export, "write_static", _stop(how))
            run = lambda: _random_export(out, "--no-check")
        else:
            monkeypatch.setattr(sn, "skip_norm_bundle", _stop(how))
            run = lambda: cb.main(["--in", TINY, "--out", out])
    before, handler = snapshot(out), signal.getsignal(signal.SIGTERM)
    assert run() == rc
    assert one_line_error(capsys, f"{tool}: ") == f"{tool}: stopped by {'Ctrl-C' if rc == 130 else 'SIGTERM'}"
    assert snapshot(out) == before and sorted(os.listdir(tmp_path)) == ["out"]
    assert signal.getsignal(signal.SIGTERM) == handler
