"""The committed fixtures: manifest and files agree, the tokenizer layouts exist, goldens
reproduce from the committed checkpoint, and exporting it again gives the same graphs."""

import json
import os

import numpy as np
import pytest

from scripts import autoui_model as am
from scripts import export, fixtures
from scripts import bundle_files
from scripts import vision as vis
from scripts.tests.conftest import TESTDATA, TINY


def test_tokenizer_layouts_present():
    d = os.path.join(TESTDATA, "tokenizer")
    for name in ("tokenizer.json", "tokenizer_legacy.json", "spiece.model"):
        assert os.path.getsize(os.path.join(d, name)) > 1000, name


def test_manifest_shas(tiny_manifest):
    assert tiny_manifest["format"] == "autoui-bundle" and tiny_manifest["format_version"] == export.FORMAT_VERSION == 2
    assert set(tiny_manifest["files"]) == {"vision", "encoder", "fusion", "decoder", "decoder_cross", "decoder_static",
                                           "tokenizer"}
    for role, spec in tiny_manifest["files"].items():
        for f in [spec] + spec.get("external_data", []):
            p = os.path.join(TINY, f["path"])
            assert os.path.getsize(p) == f["size"], role
            assert bundle_files.sha256_file(p) == f["sha256"], role
    assert tiny_manifest["model"]["vocab_size"] % 64 == 0
    assert tiny_manifest["model"]["image_dim"] == tiny_manifest["vision"]["output_dim"]
    # generate(max_length=128) counts the decoder start token: 127 new tokens at most.
    assert tiny_manifest["prompt"]["max_target_tokens"] == am.MAX_NEW_TOKENS == 127


def test_default_manifest_limits():
    with open(os.path.join(TESTDATA, "..", "default", "manifest.json")) as f:
        default = json.load(f)
    assert default["prompt"]["max_target_tokens"] == am.MAX_NEW_TOKENS
    assert default["exporter"]["tokenizer_source"] == "tokenizer.json"


def test_screens_present():
    from PIL import Image
    for name, _, w, h in fixtures.scr.SCREENS:
        with Image.open(os.path.join(TESTDATA, "screens", name)) as im:
            assert im.size == (w, h)


def test_golden_shape(golden):
    cases = golden["cases"]
    assert len(cases) >= 20
    assert any(c["truncated"] for c in cases)
    assert any(len(c["generated_ids"]) == c["max_new_tokens"] and c["generated_ids"][-1] != 1 for c in cases)
    assert sum("pixel_values" in c["tensors"] for c in cases) >= 3
    for c in cases:
        assert c["input_ids"][-1] == am.EOS_ID and len(c["input_ids"]) <= 512
        for rel in c["tensors"].values():
            arr = np.load(os.path.join(TESTDATA, "golden", rel))
            assert arr.dtype == np.dtype("<f4")
    # The trained model answers in the Auto-UI format.
    stopped = [c for c in cases if c["generated_ids"] and c["generated_ids"][-1] == am.EOS_ID]
    assert len(stopped) >= len(cases) - 2
    for c in stopped:
        am.parse_action_output(c["text"])


@pytest.fixture(scope="module")
def committed_model():
    return am.load_checkpoint(fixtures.CHECKPOINT), vis.load_vision(fixtures.BLIP2)


@pytest.mark.parametrize("index", [0, 11])
def test_goldens_reproduce(golden, committed_model, tokenizer, index):
    model, tower = committed_model
    want = golden["cases"][index]
    got, tensors = fixtures.golden_case(index, fixtures.CASES[index], model, tower, tokenizer, write=False)
    for k in ("source_text", "input_ids", "truncated", "generated_ids", "text", "text_no_cleanup", "history"):
        assert got[k] == want[k], k
    for name, rel in want["tensors"].items():
        ref = np.load(os.path.join(TESTDATA, "golden", rel))
        # PyTorch against itself: a few float32 ulps, relative to each value
        # (the logits reach ~20, where one ulp is 2e-6; thread scheduling on
        # a shared machine changed the worst element by 1.1e-5).
        np.testing.assert_allclose(tensors[name], ref, rtol=1e-5, atol=1e-5, err_msg=name)


def test_reexport_is_byte_identical(tiny_manifest, tmp_path):
    out = str(tmp_path / "tiny")
    export.main(["--out", out, "--checkpoint", fixtures.CHECKPOINT, "--vision", fixtures.BLIP2,
                 "--tokenizer", fixtures.TOKENIZER, "--name", "tiny", "--scroll-map", "fixed", "--no-check"])
    with open(os.path.join(out, "manifest.json")) as f:
        again = json.load(f)
    for role in ("vision", "encoder", "fusion", "decoder", "decoder_cross", "decoder_static", "tokenizer"):
        assert again["files"][role]["sha256"] == tiny_manifest["files"][role]["sha256"], role
    # The committed manifest is what the exporter writes today (tool versions aside).
    for m in (again, tiny_manifest):
        m["exporter"].pop("versions")
    assert again == tiny_manifest
