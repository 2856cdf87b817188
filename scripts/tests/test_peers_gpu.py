"""The GPU peers (scripts.peers.gpu) on the CPU: IO binding and batched generate give the tokens of
the plain loops for every item of a padded batch, and without a GPU every GPU runner is skipped
with its reason."""

import os

import pytest

from scripts.peers import gpu, ort_python, torch_ref
from scripts.tests.conftest import TESTDATA, TINY

TOKENS = 5
SCREENS = [os.path.join(TESTDATA, "screens", n) for n in ("home_720x1280.png", "settings_720x1600.png")]
TEXTS = ["Previous Actions: Goal: Open the settings app",
         'Previous Actions: "action_type": "PRESS_HOME", "touch_point": "[-1.0, -1.0]", "lift_point": "[-1.0, -1.0]", '
         '"typed_text": "" "action_type": "TYPE", "touch_point": "[-1.0, -1.0]", "lift_point": "[-1.0, -1.0]", '
         '"typed_text": "coffee near me" Goal: Search for a coffee shop']


@pytest.fixture(scope="module")
def inputs():
    cases = [{"id": f"c{i}", "screen": s, "source_text": t, "source_tokens": -1} for i, (s, t) in enumerate(zip(SCREENS, TEXTS))]
    return {"tokens": TOKENS, "cases": cases}


def test_batch_cases_round_robin(inputs):
    assert [c["id"] for c in gpu.batch_cases(inputs, 5)] == ["c0", "c1", "c0", "c1", "c0"]


def test_pad():
    ids, mask = gpu.pad([[5, 6, 1], [7, 1]], 0)
    assert ids.tolist() == [[5, 6, 1], [7, 1, 0]] and mask.tolist() == [[1, 1, 1], [1, 1, 0]]


def test_ort_iobinding_batch_matches_the_plain_loop(inputs):
    items = gpu.batch_cases(inputs, 3)  # two prompt lengths: the short one is padded
    b = gpu.OrtBound(TINY, 1, "cpu").batch(items, TOKENS)
    plain = ort_python.Runner(TINY, 1)
    assert b["decoder_calls"] == TOKENS and len(b["all_ids"]) == 3
    for row, case in zip(b["all_ids"], items):
        assert row == plain.one(case, TOKENS)["ids"], case["id"]
    assert {"decode_image", "vision", "encoder", "first_step", "later_steps"} <= set(b["stages"])


def test_torch_batch_matches_one_case(inputs):
    r = torch_ref.Runner(TINY, 1, os.path.join(TESTDATA, "tiny_checkpoint"), os.path.join(TESTDATA, "tiny_blip2"))
    items = gpu.batch_cases(inputs, 2)
    b = gpu.torch_batch(r, items, TOKENS)
    for row, case in zip(b["all_ids"], items):
        assert row == r.one(case, TOKENS)["ids"], case["id"]
    assert b["decoder_calls"] == TOKENS and b["stages"]["generate"] > 0


def test_batch_report_and_table():
    batches = [{"wall": 0.5, "stages": {"vision": 0.01, "later_steps": 0.04}, "decoder_calls": 5, "ids": [3, 4]},
               {"wall": 0.25, "stages": {"vision": 0.02, "later_steps": 0.08}, "decoder_calls": 5, "ids": [3, 4]}]
    d = gpu.batch_report("ort_iobind", "cpu", 4, batches, [])
    assert d["screens_per_s"] == {"min": 8.0, "median": 12.0, "max": 16.0}
    assert d["stages"]["decode_step"]["median_ms"] == 15.0 and d["batch"] == 4
    ours = {"screens_per_s": {"median": 24.0}, "stages": {"vision": {"median_ms": 1.0}}}
    lines = gpu.table({("ours", 4): ours, ("ort_iobind", 4): d}, {"torch_fp32": "no GPU"}, {},
                      ["ours", "torch_fp32", "ort_iobind"], [4])
    assert lines[2].startswith("| autoui (Go + ORT) | 4 | 24.0 | 41.7 ms | 1.00 ms | – | 1.00× |")
    assert "skipped: no GPU" in lines[3] and lines[4].endswith("| 0.50× |")


def test_gpu_runners_skip_without_a_gpu():
    for r in gpu.RUNNERS:
        assert gpu.skip_reason(r, "cpu") is None
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("a GPU is here")
    assert "no GPU" in gpu.skip_reason("ours", "cuda")
    import torch
    if not torch.cuda.is_available():
        assert "no CUDA device" in gpu.skip_reason("torch_bf16", "cuda")
