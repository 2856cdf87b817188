"""The T5 tokenizer fixture and its goldens (tokenizer/testdata/golden_ids.json)."""

import json
import os

import pytest
from tokenizers import Tokenizer

from scripts import tokenizer_fixture as tf


@pytest.fixture(scope="module")
def golden():
    with open(tf.GOLDEN_PATH, encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def fast():
    return {name: Tokenizer.from_file(os.path.join(tf.TOKENIZER_DIR, tf.LAYOUT_FILES[name])) for name in tf.LAYOUTS}


def test_goldens_match_hf_tokenizers(golden, fast):
    assert len(golden["encode"]) >= 200
    for case in golden["encode"]:
        for name in tf.LAYOUTS:
            assert fast[name].encode(case["text"]).ids == case[name], (name, case["text"])


def test_layouts_agree_except_after_added_tokens(golden):
    """The two layouts differ only on text right after an added token, or on U+0085 (a
    White_Space character the charsmap keeps, which only the legacy WhitespaceSplit drops)."""
    specials = ("</s>", "<pad>", "<unk>", "<extra_id_")
    agree = [c for c in golden["encode"] if c["layouts_agree"]]
    assert len(agree) >= 200
    for case in golden["encode"]:
        assert case["layouts_agree"] == (case["legacy"] == case["modern"])
        if not case["layouts_agree"]:
            assert any(s in case["text"] for s in specials) or "\u0085" in case["text"], case["text"]
    for case in golden["encode"]:
        text = case["text"]
        if "Action" in text or "Goal" in text:
            assert case["legacy"] == case["modern"], text
            assert 2 not in case["modern"], f"<unk> in an Auto-UI text: {text!r}"


def test_layout_shapes(fast):
    legacy = json.loads(fast["legacy"].to_str())
    modern = json.loads(fast["modern"].to_str())
    assert legacy["normalizer"]["type"] == "Precompiled"
    assert [n["type"] for n in modern["normalizer"]["normalizers"]] == ["Precompiled", "Strip", "Replace"]
    assert modern["pre_tokenizer"]["prepend_scheme"] == "first"
    assert [p["type"] for p in legacy["pre_tokenizer"]["pretokenizers"]] == ["WhitespaceSplit", "Metaspace"]
    for tok in fast.values():
        assert tok.get_vocab_size(with_added_tokens=True) == 2100
        assert [tok.token_to_id(t) for t in ("<pad>", "</s>", "<unk>", "<extra_id_0>", "<extra_id_99>")] == [0, 1, 2, 2099, 2000]


def test_fixture_is_deterministic(tmp_path):
    tf.main(["--tokenizer-dir", str(tmp_path / "tok"), "--golden", str(tmp_path / "golden_ids.json"), "--quiet"])
    for name in ["spiece.model", *tf.LAYOUT_FILES.values()]:
        with open(os.path.join(tf.TOKENIZER_DIR, name), "rb") as f:
            assert (tmp_path / "tok" / name).read_bytes() == f.read(), name
    with open(tf.GOLDEN_PATH, "rb") as f:
        assert (tmp_path / "golden_ids.json").read_bytes() == f.read()
