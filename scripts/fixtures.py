"""Regenerate every fixture under models/testdata (what `make fixtures` runs).

  python -m scripts.fixtures [--skip-train]

1. the tokenizer fixture (scripts.tokenizer_fixture), if present;
2. the sample screens (scripts.screens);
3. the tiny model: briefly trained (scripts.train_tiny), saved as an Auto-UI checkpoint
   directory plus a BLIP-2-style vision directory, exported with --checkpoint/--vision into
   models/testdata/tiny; the two source directories are kept as models/testdata/tiny_checkpoint
   and models/testdata/tiny_blip2 (tests re-export and re-run them);
4. goldens: models/testdata/golden/cases.json + tensors/*.npy from PyTorch, each case also
   replayed through the bundle with ONNX Runtime (ids must match exactly; the worst tensor
   differences set the tolerances written into cases.json).

Byte-identical on rerun on the same machine (fixed seeds, 1 thread, no timestamps).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import torch
from PIL import Image

from . import autoui_model as am
from . import screens as scr
from . import vision as vis

ROOT = scr.ROOT
TESTDATA = os.path.join(ROOT, "models", "testdata")
TOKENIZER = os.path.join(TESTDATA, "tokenizer", "tokenizer.json")
BUNDLE = os.path.join(TESTDATA, "tiny")
CHECKPOINT = os.path.join(TESTDATA, "tiny_checkpoint")
BLIP2 = os.path.join(TESTDATA, "tiny_blip2")
GOLDEN = os.path.join(TESTDATA, "golden")
LOGIT_STEPS = 3


def A(kind, touch=am.NO_POINT, lift=None, text=""):
    return am.Action(kind, tuple(touch), tuple(lift if lift is not None else touch), text)


TAP_SETTINGS = A("DUAL_POINT", (0.405, 0.155))
TAP_SEARCH = A("DUAL_POINT", (0.105, 0.5))
SWIPE_UP = A("DUAL_POINT", (0.8, 0.5), (0.2, 0.5))
SWIPE_DOWN = A("DUAL_POINT", (0.2, 0.5), (0.8, 0.5))
SWIPE_LEFT = A("DUAL_POINT", (0.5, 0.8), (0.5, 0.2))
SWIPE_RIGHT = A("DUAL_POINT", (0.5, 0.2), (0.5, 0.8))
ALL_TYPES = [A("TYPE", text="wifi"), A("DUAL_POINT", (0.7262, 0.4187)), SWIPE_UP, SWIPE_DOWN, SWIPE_LEFT,
             SWIPE_RIGHT, A("PRESS_BACK"), A("PRESS_HOME"), A("PRESS_ENTER"), A("STATUS_TASK_COMPLETE"),
             A("STATUS_TASK_IMPOSSIBLE")]
LONG_TEXT = ("please find the cheapest refurbished laptop with at least sixteen gigabytes of memory, "
             "a backlit keyboard, two usb-c ports and free shipping to zürich before friday")

# (screen, goal, history, max_new_tokens, with pixel_values)
CASES = [
    ("home_1080x2400.png", "Open the settings app", [], 128, True),
    ("home_720x1280.png", "Open Chrome", [], 128, True),
    ("settings_1080x2400.png", "Turn on wifi", [TAP_SETTINGS], 128, False),
    ("search_720x1280.png", "Search for paris hotels", [TAP_SEARCH], 128, True),
    ("search_720x1280.png", "Search for café au lait", [TAP_SEARCH, A("TYPE", text="café au lait")], 128, False),
    ("list_1080x1920.png", "Find Gaming mouse in the list", [], 128, False),
    ("list_1080x1920.png", "Find Gaming mouse in the list", [SWIPE_UP], 128, False),
    ("list_1080x1920.png", "Go to the home screen", [A("PRESS_BACK")], 128, False),
    ("settings_720x1600.png", "Go back", [TAP_SETTINGS, A("DUAL_POINT", (0.945, 0.5))], 128, False),
    ("home_1080x2400.png", "Send 👍 to Zoë and say “bonjour” — 東京 ☕",
     [A("TYPE", text="👍 ça va? 😀")], 128, False),
    ("home_1080x2400.png", "Open the Maps app", ALL_TYPES[:10], 128, False),
    ("home_1080x2400.png", "Search for a laptop", [A("TYPE", text=LONG_TEXT)] * 9 + [A("PRESS_ENTER")], 128, False),
    ("home_720x1280.png", "Open the settings app", [], 16, False),
    ("search_720x1280.png", "Search for it's \"quoted\"",
     [TAP_SEARCH, A("TYPE", text="it's \"quoted\" C:\\Users\\me")], 128, False),
    ("home_1080x2400.png", "Open Photos", ALL_TYPES[3:11], 128, False),
    ("home_1080x2400.png", "Open Photos", ALL_TYPES[2:11], 128, False),
    ("home_720x1280.png", "  Open\n\tthe   Maps\u00a0 app  ", [], 128, False),
    ("home_720x1280.png", "Launch YouTube", [A("PRESS_HOME")], 128, False),
    ("home_1080x2400.png", "Teleport me to Paris", [], 128, False),
    ("settings_1080x2400.png", "Turn on bluetooth",
     [A("DUAL_POINT", (0.0625, 0.9375)), A("DUAL_POINT", (0.5, 0.2))], 128, False),
    ("home_1080x2400.png", "Look up how tall is the eiffel tower", [A("PRESS_HOME"), A("STATUS_TASK_IMPOSSIBLE")],
     128, False),
    ("home_1080x2400.png", "", [], 128, False),
    ("list_1080x1920.png", "Show me the 4K monitor 27 inch",
     [SWIPE_LEFT, SWIPE_RIGHT, SWIPE_DOWN, A("PRESS_ENTER")], 128, False),
]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def _save_npy(rel: str, arr: np.ndarray) -> str:
    path = os.path.join(GOLDEN, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, np.ascontiguousarray(arr, dtype="<f4"), allow_pickle=False)
    return rel


@torch.no_grad()
def golden_case(i: int, spec, model: am.AutoUIModel, tower: vis.VisionTower, tok, write: bool = True) -> tuple[dict, dict]:
    """One case from PyTorch; returns (case json, tensors)."""
    screen, goal, history, max_new, with_pixels = spec
    cid = f"case{i:02d}"
    img = Image.open(os.path.join(TESTDATA, "screens", screen))
    pixels = vis.preprocess(img)
    feats = tower.reference(torch.from_numpy(pixels)[None])[0]  # Hugging Face's pooler_output
    src = am.source_text(goal, history)
    ids, truncated = am.encode_source(tok, src)
    ids_t = torch.tensor([ids])
    mask = torch.ones_like(ids_t)
    hidden = model.encoder(input_ids=ids_t, attention_mask=mask).last_hidden_state
    fused = model.fuse(hidden, feats[None])
    out = model.generate_action(ids_t, feats[None], attention_mask=mask, max_new_tokens=max_new)[0].tolist()
    assert out[0] == model.config.decoder_start_token_id
    generated = out[1:]
    steps = min(LOGIT_STEPS, len(generated))
    dec_in = torch.tensor([[model.config.decoder_start_token_id] + generated[:steps - 1]])
    logits = model(encoder_outputs=(hidden,), attention_mask=mask, image_features=feats[None],
                   decoder_input_ids=dec_in).logits[0]
    tensors = {"image_features": feats.numpy(), "encoder_hidden_states": hidden[0].numpy(),
               "fused_hidden_states": fused[0].numpy(), "logits": logits.numpy()}
    if with_pixels:
        tensors = {"pixel_values": pixels, **tensors}
    case = {
        "id": cid, "screen": f"screens/{screen}", "goal": goal,
        "history": [a.to_json() for a in history],
        "source_text": src, "input_ids": ids, "truncated": truncated, "max_new_tokens": max_new,
        "generated_ids": generated,
        "text": am.decode(tok, generated, cleanup=True),
        "text_no_cleanup": am.decode(tok, generated, cleanup=False),
        "tensors": {name: f"tensors/{cid}_{name}.npy" for name in tensors},
    }
    if write:
        for name, arr in tensors.items():
            _save_npy(case["tensors"][name], arr)
    return case, tensors


def _bound(x: float) -> float:
    """A round tolerance about 10x above the measured worst difference (at least 1e-5)."""
    x = max(x * 10, 1e-5)
    return float(f"{10 ** math.ceil(math.log10(x)):.0e}")


def check_with_ort(cases: list[dict], tensors: list[dict]) -> dict:
    """Replay every case through the bundle with ORT; ids must match, returns worst diffs."""
    from .ort_pipeline import Bundle
    b = Bundle(BUNDLE)
    worst = {k: 0.0 for k in ("image_features", "encoder_hidden_states", "fused_hidden_states", "logits")}
    for case, t in zip(cases, tensors):
        if "pixel_values" in t:
            f = b.image_features(t["pixel_values"])
            worst["image_features"] = max(worst["image_features"], float(np.abs(f - t["image_features"]).max()))
        h, fused, _ = b.encode(case["input_ids"], t["image_features"])
        worst["encoder_hidden_states"] = max(worst["encoder_hidden_states"],
                                             float(np.abs(h - t["encoder_hidden_states"]).max()))
        worst["fused_hidden_states"] = max(worst["fused_hidden_states"],
                                           float(np.abs(fused - t["fused_hidden_states"]).max()))
        ids, logits = b.greedy(case["input_ids"], t["image_features"], case["max_new_tokens"])
        if ids != case["generated_ids"]:
            raise RuntimeError(f"{case['id']}: ORT greedy ids differ from PyTorch:\n  ort   {ids}\n  torch {case['generated_ids']}")
        n = t["logits"].shape[0]
        worst["logits"] = max(worst["logits"], float(np.abs(logits[:n] - t["logits"]).max()))
    return worst


def write_goldens(model, tower) -> dict:
    tok = am.load_tokenizer(TOKENIZER)
    if os.path.isdir(GOLDEN):
        shutil.rmtree(GOLDEN)
    os.makedirs(os.path.join(GOLDEN, "tensors"))
    cases, tensors = [], []
    for i, spec in enumerate(CASES):
        c, t = golden_case(i, spec, model, tower, tok)
        cases.append(c)
        tensors.append(t)
    worst = check_with_ort(cases, tensors)
    log("ORT vs PyTorch on the golden cases, worst |diff|: " + ", ".join(f"{k} {v:.2g}" for k, v in worst.items()))
    tol = {"pixel_values": {"atol": 1e-5, "rtol": 0.0}}
    for k, v in worst.items():
        tol[k] = {"atol": _bound(v), "rtol": 0.0}
    doc = {"bundle": "tiny",
           "tolerances": tol,
           "tolerances_note": "max |got - want| per element, ORT fp32 on CPU vs PyTorch; ids and texts must match exactly",
           "cases": cases}
    with open(os.path.join(GOLDEN, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    return doc


def run_tokenizer_fixture() -> None:
    try:
        from . import tokenizer_fixture
    except ImportError:
        log("scripts/tokenizer_fixture.py not present yet: keeping models/testdata/tokenizer as is")
        return
    tokenizer_fixture.main(["--quiet"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Regenerate models/testdata fixtures.")
    ap.add_argument("--skip-train", action="store_true",
                    help="reuse models/testdata/tiny_checkpoint and tiny_blip2 instead of training")
    ap.add_argument("--steps", type=int, default=None, help="training steps (default: train_tiny's)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    t0 = time.time()
    run_tokenizer_fixture()
    scr.write_all()
    from . import export, train_tiny
    with tempfile.TemporaryDirectory(prefix="autoui-fixtures-") as tmp:
        ck = os.path.join(tmp, "tiny_checkpoint")
        vd = os.path.join(tmp, "tiny_blip2")
        if args.skip_train:
            shutil.copytree(CHECKPOINT, ck)
            shutil.copytree(BLIP2, vd)
        else:
            t1 = time.time()
            model, tower, stats = train_tiny.train(TOKENIZER, scr.OUT_DIR, **({"steps": args.steps} if args.steps else {}))
            log(f"trained tiny model: {stats} ({time.time() - t1:.0f}s)")
            am.save_checkpoint(model, ck)
            export.write_blip2_vision_dir(tower, vd)
        t2 = time.time()
        if os.path.isdir(BUNDLE):
            shutil.rmtree(BUNDLE)
        export.main(["--out", BUNDLE, "--checkpoint", ck, "--vision", vd, "--tokenizer", TOKENIZER, "--name", "tiny",
                     "--scroll-map", "fixed"])
        log(f"exported {BUNDLE} in {time.time() - t2:.0f}s")
        for src, dst in ((ck, CHECKPOINT), (vd, BLIP2)):
            if os.path.abspath(src) != os.path.abspath(dst):
                if os.path.isdir(dst):
                    shutil.rmtree(dst)
                shutil.copytree(src, dst)
    model = am.load_checkpoint(CHECKPOINT)
    tower = vis.load_vision(BLIP2)
    t3 = time.time()
    doc = write_goldens(model, tower)
    log(f"wrote {len(doc['cases'])} golden cases in {time.time() - t3:.0f}s; total {time.time() - t0:.0f}s")
    for c in doc["cases"][:3]:
        log(f"  {c['id']} {c['goal']!r} -> {c['text']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
