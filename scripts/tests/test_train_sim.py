"""Smoke test of scripts.train_sim: read AITW-format records, build Auto-UI samples, train a
few steps of the smallest model with the auxiliary layout head, save and export."""

import json
import os

import numpy as np
import pytest

from scripts import autoui_model as am
from scripts import train_sim as ts
from scripts import vision as vis
from scripts.aitw_fixtures import frame, make_example, write_gzip

H, W = 80, 36


def _step(ep, i, n, goal, action, rng):
    t = {v: k for k, v in am.ACTION_TYPES.items()}[action.action_type]
    px = rng.integers(0, 255, size=(H, W, 3), dtype=np.uint8).tobytes()
    return make_example({
        "episode_id": ("bytes", [ep.encode()]), "goal_info": ("bytes", [goal.encode()]),
        "step_id": ("int", [i]), "episode_length": ("int", [n]),
        "image/height": ("int", [H]), "image/width": ("int", [W]), "image/channels": ("int", [3]),
        "image/encoded": ("bytes", [px]),
        "image/ui_annotations_positions": ("float", [0.1, 0.2, 0.1, 0.3, 0.5, 0.5, 0.1, 0.2]),
        "image/ui_annotations_text": ("bytes", [b"Clock", b"Wi-Fi"]),
        "image/ui_annotations_ui_types": ("bytes", [b"TEXT", b"TEXT"]),
        "results/action_type": ("int", [t]),
        "results/yx_touch": ("float", list(action.touch_point)), "results/yx_lift": ("float", list(action.lift_point)),
        "results/type_action": ("bytes", [action.typed_text.encode()]),
    })


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("simdata")
    rng = np.random.default_rng(0)
    tap = am.Action("DUAL_POINT", (0.15, 0.35), (0.15, 0.35))
    acts = [tap, am.Action("TYPE", typed_text="hello"), am.Action("STATUS_TASK_COMPLETE")]
    counts = {}
    for split in ("train", "validation"):
        recs = b""
        for e in range(2):
            ep = f"sim_open_app_{split}{e}"
            for i, a in enumerate(acts):
                recs += frame(_step(ep, i, len(acts), "Open the Clock app", a, rng))
        write_gzip(os.path.join(d, split, "open_app.tfrecord.gz"), recs)
        counts[split] = 2 * len(acts)
    with open(os.path.join(d, "dataset.json"), "w") as f:
        json.dump({"steps": counts}, f)
    return str(d)


def test_records_and_samples(data_dir, tokenizer):
    eps = list(ts.stream_episodes(data_dir, "train"))
    assert [len(e) for e in eps] == [3, 3]
    s = eps[0][0]
    assert (s.height, s.width, len(s.pixels)) == (H, W, H * W * 3)
    assert s.ann == [["Clock", 0.15, 0.35], ["Wi-Fi", 0.55, 0.6]]
    src, tgt = ts.episode_samples(tokenizer, eps[0])[1]
    # Records hold float32: history and targets use the normalized (4-decimal) points.
    assert tokenizer.decode(src, skip_special_tokens=True) == am.source_text(
        "Open the Clock app", [am.Action("DUAL_POINT", (0.15, 0.35), (0.15, 0.35))])
    assert tokenizer.decode(tgt, skip_special_tokens=True) == am.target_text(
        ["TYPE", "STATUS_TASK_COMPLETE"], am.Action("TYPE", typed_text="hello"))
    assert ts.family_of(s.episode_id) == "open_app"


def test_keep_goal_truncation(tokenizer):
    hist = [am.Action("DUAL_POINT", (0.1234, 0.5678), (0.1234, 0.5678))] * 12
    ids = ts.build_source_ids(tokenizer, "Open the Clock app", hist, max_len=200)
    assert len(ids) <= 200
    assert tokenizer.decode(ids, skip_special_tokens=True).endswith("Goal: Open the Clock app")


def test_train_save_export(data_dir, tmp_path):
    out = str(tmp_path / "train")
    bundle = str(tmp_path / "bundle")
    ts.main(["--data", data_dir, "--out", out, "--size", "smoke", "--steps", "3", "--batch", "4",
             "--threads", "1", "--log-every", "1", "--save-every", "0", "--bundle", bundle])
    with open(os.path.join(out, "train_stats.json")) as f:
        stats = json.load(f)
    assert stats["steps"] == 3 and stats["train_samples"] == 6
    model = am.load_checkpoint(os.path.join(out, "checkpoint"))
    tower = vis.load_vision(os.path.join(out, "vision"))
    assert model.image_dim == tower.config.hidden_size
    with open(os.path.join(bundle, "manifest.json")) as f:
        manifest = json.load(f)
    assert manifest["action"]["scroll_map"] == "fixed" and manifest["name"] == "default"
    # The cache is reused on the next run.
    cached = ts.prepare(data_dir, "train", am.load_tokenizer(ts.DEFAULT_TOKENIZER), os.path.join(data_dir, "cache224"))
    assert cached.images.shape == (6, vis.IMAGE_SIZE, vis.IMAGE_SIZE, 3) and len(cached.ann) == 6


def test_sim_tokenizer(data_dir, tmp_path):
    from scripts import sim_tokenizer
    info = sim_tokenizer.build(data_dir, str(tmp_path / "tok"), vocab=400)
    tok = am.load_tokenizer(info["path"])
    # Goldens are the Hugging Face ids of validation prompts and targets.
    with open(os.path.join(str(tmp_path / "tok"), "golden_ids.json")) as f:
        golden = json.load(f)
    assert golden["vocab_size"] == len(tok) and golden["encode"]
    for c in golden["encode"]:
        assert tok(c["text"])["input_ids"] == c["ids"]
    # Every character an action target can hold is in the vocabulary (no <unk>).
    text = am.target_text(["TYPE"], am.Action("TYPE", typed_text="Zürich 4k-TV #1 (new)!"))
    assert am.UNK_ID not in tok(text)["input_ids"]
    # Deterministic: the same data gives the same files.
    again = sim_tokenizer.build(data_dir, str(tmp_path / "tok2"), vocab=400)
    for name in ("spiece.model", "tokenizer.json", "golden_ids.json"):
        with open(os.path.join(str(tmp_path / "tok"), name), "rb") as a, \
                open(os.path.join(str(tmp_path / "tok2"), name), "rb") as b:
            assert a.read() == b.read(), name
    assert again["vocab_size"] == info["vocab_size"]
