"""Brief, deterministic training of the tiny Auto-UI model on synthetic episodes, so that
its greedy output is a well-formed Auto-UI action (the demo and the goldens print it).

  python -m scripts.train_tiny --out DIR [--steps N]

Writes an Auto-UI-style checkpoint directory (save_pretrained) and, next to it, the random
tiny vision tower as a minimal local BLIP-2 directory; scripts.fixtures exports both with
--checkpoint/--vision, which exercises the real export path.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time

import numpy as np
import torch
from PIL import Image

from . import autoui_model as am
from . import screens as scr
from . import vision as vis

SEED = 20240611
VISION_SEED = 7
DEFAULT_STEPS = 300
BATCH = 12
LR = 3e-3
MAX_SOURCE = 256  # training-only cap; histories in the synthetic data stay well below it

SETTING_ROWS = {"wifi": "Network & internet", "mobile data": "Network & internet", "hotspot": "Network & internet",
                "bluetooth": "Connected devices", "nfc": "Connected devices", "battery saver": "Battery",
                "dark mode": "Display", "auto-rotate": "Display", "location": "Location",
                "do not disturb": "Notifications", "ringtone": "Sound & vibration", "app permissions": "Apps"}
QUERIES = ["weather tomorrow", "news today", "best pizza near me", "paris hotels", "flights to tokyo",
           "usb-c hub", "café au lait", "東京 ramen", "razer blade 15", "how tall is the eiffel tower",
           "coffee shops open now", "macbook pro 16 inch", "nike shoes size 10", "crème brûlée recipe"]
IMPOSSIBLE = ["Order a pizza by drone to the moon", "Turn the phone into a toaster", "Call a dinosaur",
              "Teleport me to Paris", "Print a cake"]


def _tap(el) -> am.Action:
    y, x = scr.center(el)
    return am.normalize_action(am.Action("DUAL_POINT", (y, x), (y, x)))


def _el(kind, label):
    for el in scr.layout(kind):
        if el["label"] == label:
            return el
    raise KeyError(label)


def episode(rng: random.Random) -> tuple[str, list[tuple[str, am.Action]]]:
    """A goal and its (screen kind, action) steps."""
    k = rng.random()
    done = am.Action("STATUS_TASK_COMPLETE")
    if k < 0.3:
        app = rng.choice(scr.HOME_APPS)
        goal = rng.choice(["Open {a}", "Open the {a} app", "Launch {a}", "open {a}", "Go to {a}"]).format(a=app)
        return goal, [("home", _tap(_el("home", app))), ("list", done)]
    if k < 0.5:
        setting = rng.choice(sorted(SETTING_ROWS))
        goal = rng.choice(["Open the settings app and turn on {s}", "Turn on {s}", "Turn off {s}",
                           "Open settings and change {s}"]).format(s=setting)
        return goal, [("home", _tap(_el("home", "Settings"))), ("settings", _tap(_el("settings", SETTING_ROWS[setting]))),
                      ("settings", done)]
    if k < 0.72:
        q = rng.choice(QUERIES)
        goal = rng.choice(["Search for {q}", "Search for {q} on Google", "Look up {q}", "What's {q}?"]).format(q=q)
        return goal, [("home", _tap(_el("home", "Search"))), ("search", am.Action("TYPE", typed_text=q)),
                      ("search", am.Action("PRESS_ENTER")), ("list", done)]
    if k < 0.86:
        item = rng.choice(scr.LIST_ITEMS)
        goal = rng.choice(["Find {i} in the list", "Scroll down and open {i}", "Show me the {i}"]).format(i=item)
        swipe = am.normalize_action(am.Action("DUAL_POINT", (0.8, 0.5), (0.3, 0.5)))
        return goal, [("list", swipe), ("list", _tap(_el("list", item))), ("list", done)]
    if k < 0.95:
        if rng.random() < 0.5:
            return rng.choice(["Go back", "Go back to the previous screen"]), [("settings", am.Action("PRESS_BACK")),
                                                                                ("home", done)]
        return rng.choice(["Go to the home screen", "Go home"]), [("list", am.Action("PRESS_HOME")), ("home", done)]
    return rng.choice(IMPOSSIBLE), [("home", am.Action("STATUS_TASK_IMPOSSIBLE"))]


def random_history_action(rng: random.Random) -> am.Action:
    t = rng.choice(["DUAL_POINT", "DUAL_POINT", "TYPE", "PRESS_BACK", "PRESS_HOME", "PRESS_ENTER", "SWIPE"])
    if t == "DUAL_POINT":
        p = (rng.random(), rng.random())
        return am.normalize_action(am.Action("DUAL_POINT", p, p))
    if t == "SWIPE":
        d = rng.choice([((0.8, 0.5), (0.2, 0.5)), ((0.2, 0.5), (0.8, 0.5)), ((0.5, 0.8), (0.5, 0.2)),
                        ((0.5, 0.2), (0.5, 0.8))])
        return am.normalize_action(am.Action("DUAL_POINT", *d))
    if t == "TYPE":
        return am.Action("TYPE", typed_text=rng.choice(QUERIES))
    return am.Action(t)


def samples(n: int, seed: int) -> list[tuple[str, str, str]]:
    """(screen kind, source text, target text) triples."""
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        goal, steps = episode(rng)
        prefix = [random_history_action(rng) for _ in range(rng.choice([0, 0, 0, 0, 0, 0, 1, 2]))]
        history = list(prefix)
        for i, (kind, action) in enumerate(steps):
            plan = [a.action_type for _, a in steps[i:i + 4]]
            out.append((kind, am.source_text(goal, history), am.target_text(plan, action)))
            history.append(action)
    return out[:n]


def screen_features(tower: vis.VisionTower, screen_dir: str) -> dict[str, list[np.ndarray]]:
    feats: dict[str, list[np.ndarray]] = {}
    with torch.no_grad():
        for name, kind, _, _ in scr.SCREENS:
            px = vis.preprocess(Image.open(os.path.join(screen_dir, name)))
            feats.setdefault(kind, []).append(tower.reference(torch.from_numpy(px)[None])[0].numpy())
    return feats


def train(tokenizer_path: str, screen_dir: str, steps: int = DEFAULT_STEPS, seed: int = SEED,
          log_every: int = 50) -> tuple[am.AutoUIModel, vis.VisionTower, dict]:
    torch.set_num_threads(1)  # deterministic and within the 1-thread budget
    torch.use_deterministic_algorithms(True)
    tok = am.load_tokenizer(tokenizer_path)
    tower = vis.random_vision("tiny", VISION_SEED)
    feats = screen_features(tower, screen_dir)
    data = samples(steps * BATCH, seed)
    rng = random.Random(seed + 1)
    config = am.t5_config("tiny", am.round_vocab(len(tok)))
    config.dropout_rate = 0.0
    torch.manual_seed(seed)
    model = am.AutoUIModel(config, image_dim=tower.config.hidden_size)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / steps))))
    t0 = time.time()
    losses = []
    for step in range(steps):
        batch = data[step * BATCH:(step + 1) * BATCH]
        src = tok([s for _, s, _ in batch], truncation=True, max_length=MAX_SOURCE, padding=True, return_tensors="pt")
        tgt = tok([t for _, _, t in batch], truncation=True, max_length=am.MAX_TARGET_TOKENS, padding=True,
                  return_tensors="pt")
        labels = tgt["input_ids"].masked_fill(tgt["attention_mask"] == 0, -100)
        img = torch.from_numpy(np.stack([rng.choice(feats[k]) for k, _, _ in batch]))
        out = model(input_ids=src["input_ids"], attention_mask=src["attention_mask"], image_features=img,
                    labels=labels)
        opt.zero_grad()
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(out.loss))
        if log_every and (step + 1) % log_every == 0:
            print(f"  step {step + 1}/{steps} loss {np.mean(losses[-log_every:]):.3f} ({time.time() - t0:.0f}s)",
                  file=sys.stderr, flush=True)
    model.eval()
    stats = {"steps": steps, "batch": BATCH, "seconds": round(time.time() - t0, 1), "final_loss": float(np.mean(losses[-20:]))}
    return model, tower, stats


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="checkpoint directory")
    ap.add_argument("--vision-out", help="BLIP-2-style vision directory (default: OUT_blip2)")
    ap.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    ap.add_argument("--tokenizer", default=os.path.join(scr.ROOT, "models", "testdata", "tokenizer", "tokenizer.json"))
    ap.add_argument("--screens", default=scr.OUT_DIR)
    args = ap.parse_args(argv)
    from .export import write_blip2_vision_dir
    model, tower, stats = train(args.tokenizer, args.screens, args.steps)
    am.save_checkpoint(model, args.out)
    write_blip2_vision_dir(tower, args.vision_out or args.out.rstrip("/") + "_blip2")
    print(stats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
