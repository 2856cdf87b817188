"""scripts.cuda_bundle: the GPU variant in one command is the chain docs/cuda.md measured
(attention, norms, fp16 everywhere with an fp16 cache), optionally with the projections merged,
goes on from a bundle with some steps done, and leaves --out as it was and nothing beside it when
a step fails."""

import json
import os
import shutil

import pytest

from scripts import attention as pa
from scripts import cuda_bundle as cb
from scripts import half as h
from scripts import skip_norm as sn
from scripts.bundle_files import read_manifest
from scripts.quantize import agreement
from scripts.tests.conftest import TINY, graph_ops


def test_cuda_bundle(tmp_path):
    out = str(tmp_path / "out")
    m = cb.cuda_bundle(TINY, out)
    assert m["precision"] == "fp16" and read_manifest(out) == m
    assert (m["attention"]["decoder"], m["attention"]["vision"]) == ("plain", "fused")
    assert m["skip_norm"]["tool"] == "scripts.skip_norm" and "merge_qkv" not in m
    assert m["half"]["cache"] == "float16" and m["half"]["fp32_ops"] == []
    assert graph_ops(out, m, "decoder_static").count(sn.FUSED) == 6
    assert os.listdir(tmp_path) == ["out"]  # the fp32 steps' copies are gone
    # the bounds of the same chain run step by step (scripts/tests/test_skip_norm.py)
    got = agreement(TINY, out)
    assert got["greedy"]["identical_outputs"] >= 21 / 23
    assert got["teacher_forced"]["top1_agreement"] >= 0.99


def test_goes_on_from_a_variant_and_merges(tmp_path, capsys):
    attn = str(tmp_path / "attn")
    pa.attention_bundle(TINY, attn, decoder="plain", vision="fused")
    capsys.readouterr()
    assert cb.main(["--in", attn, "--out", str(tmp_path / "out"), "--merge-qkv"]) == 0
    err = capsys.readouterr().err
    steps = [line for line in err.splitlines() if line.startswith("step ")]
    assert steps == ["step 1/3: skip_norm", "step 2/3: merge_qkv", "step 3/3: half"]  # the attention step done
    m = read_manifest(str(tmp_path / "out"))
    assert m["merge_qkv"]["groups"] == {"decoder": 2, "decoder_static": 2} and m["precision"] == "fp16"
    assert graph_ops(str(tmp_path / "out"), m, "decoder_static").count("Split") == 2
    assert sorted(os.listdir(tmp_path)) == ["attn", "out"]


def test_failed_step_leaves_out_as_it_was(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").write_text("{}")  # a bundle there before: replaced only by a finished variant

    def fails(i, o):
        raise sn.SkipNormError("decoder: the fused norms differ from the plain ones by up to 1")
    monkeypatch.setattr(sn, "skip_norm_bundle", fails)
    with pytest.raises(cb.CudaBundleError, match="^skip_norm: decoder: the fused norms differ"):
        cb.cuda_bundle(TINY, str(out))
    assert os.listdir(tmp_path) == ["out"] and os.listdir(out) == ["manifest.json"]


def _edited(tmp_path, edit) -> str:
    d = str(tmp_path / "in")
    shutil.copytree(TINY, d)
    with open(os.path.join(d, "manifest.json")) as f:
        m = json.load(f)
    edit(m)
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(m, f)
    return d


def test_refused(tmp_path, capsys):
    def no_static(m):
        del m["files"]["decoder_static"]
    src = _edited(tmp_path, no_static)
    with pytest.raises(cb.CudaBundleError, match="upgrade_bundle"):
        cb.cuda_bundle(src, str(tmp_path / "out"))
    shutil.rmtree(src)

    def vision_plain(m):
        m["attention"] = {"tool": "scripts.attention", "decoder": "plain", "vision": "plain", "nodes": {}}
    src = _edited(tmp_path, vision_plain)
    with pytest.raises(cb.CudaBundleError, match="want the decoder plain and the vision tower fused"):
        cb.cuda_bundle(src, str(tmp_path / "out"))
    shutil.rmtree(src)

    half = str(tmp_path / "fp16")
    h.half_bundle(TINY, half, roles=("vision",), steps=4)
    capsys.readouterr()
    assert cb.main(["--in", half, "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("cuda_bundle: ") and "want an fp32 bundle" in err
    assert sorted(os.listdir(tmp_path)) == ["fp16"]
