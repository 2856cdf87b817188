"""Golden table for the Go `action` package, produced by CPython itself.

The Go side must render action text exactly as Auto-UI's Python does (float repr,
round(x, 4), string cleaning, whitespace collapse of the target) and match actions
exactly as AITW's JAX code does in float32. This script writes the expected values
so Go tests compare against real Python output rather than against a re-derivation.

AITW's matching is JAX float32; JAX is not installed here, so it is emulated with
numpy float32 scalars, one correctly rounded operation at a time (which is what XLA
does for these element-wise ops and two-element sums).

Run from the repository root:
    .venv/bin/python -m scripts.action_golden [--out action/testdata/render_golden.json]
"""

import argparse
import json
import math
import random
import struct

import numpy as np

F32 = np.float32

SCROLL_FIXED = {
    "up": [[0.8000, 0.5000], [0.2000, 0.5000]],
    "down": [[0.2000, 0.5000], [0.8000, 0.5000]],
    "left": [[0.5000, 0.8000], [0.5000, 0.2000]],
    "right": [[0.5000, 0.2000], [0.5000, 0.8000]],
}
# Auto-UI's first public code (the checkpoints were trained with it) maps
# left/right onto the vertical vectors.
SCROLL_LEGACY = {
    "up": [[0.8000, 0.5000], [0.2000, 0.5000]],
    "down": [[0.2000, 0.5000], [0.8000, 0.5000]],
    "left": [[0.8000, 0.5000], [0.2000, 0.5000]],
    "right": [[0.2000, 0.5000], [0.8000, 0.5000]],
}

ACTION_NAMES = ["TYPE", "DUAL_POINT", "PRESS_BACK", "PRESS_HOME", "PRESS_ENTER",
                "STATUS_TASK_COMPLETE", "STATUS_TASK_IMPOSSIBLE"]


def norm32(a, b):
    """jnp.linalg.norm(jnp.array(a) - jnp.array(b)) in float32."""
    dy = F32(a[0]) - F32(b[0])
    dx = F32(a[1]) - F32(b[1])
    return np.sqrt(F32(dy * dy) + F32(dx * dx))


def is_tap(touch, lift):
    return bool(norm32(touch, lift) <= F32(0.04))


def drag_direction(touch, lift):
    deltas = [F32(lift[0]) - F32(touch[0]), F32(lift[1]) - F32(touch[1])]
    mags = np.abs(np.array(deltas, dtype=F32))
    axis = int(np.argmax(mags))
    if axis == 0:
        return "up" if deltas[0] < 0 else "down"
    return "left" if deltas[1] < 0 else "right"


def clean_text(t):
    return t.replace("\\", "").replace('"', "").replace("'", "")


def action_text(name, touch, lift, text):
    return (f'"action_type": "{name}", "touch_point": "{touch}", '
            f'"lift_point": "{lift}", "typed_text": "{text}"')


def autoui_normalize(name, touch, lift, text, scroll_map):
    """Auto-UI's load_data transform for one step (transform_axis on)."""
    text = clean_text(text)
    if name == "DUAL_POINT":
        if is_tap(touch, lift):
            touch = [round(v, 4) for v in touch]
            lift = touch
        else:
            touch, lift = scroll_map[drag_direction(touch, lift)]
    return touch, lift, text


def autoui_target(plan, name, touch, lift, text):
    label = "Action Plan: [" + ",".join(plan) + "]\n" + "; Action Decision: " + \
        action_text(name, touch, lift, text)
    return " ".join(label.split())


def aitw_match(p, g, boxes):
    """AITW check_actions_match in float32 (non-empty boxes only)."""
    if p["type"] != "DUAL_POINT" or g["type"] != "DUAL_POINT":
        return p["type"] == g["type"]
    pt, gt = is_tap(p["touch"], p["lift"]), is_tap(g["touch"], g["lift"])
    if pt != gt:
        return False
    if pt:
        both = False
        for (y, x, h, w) in boxes:
            y, x, h, w = F32(y), F32(x), F32(h), F32(w)
            hc, wc = F32(1.4) * h, F32(1.4) * w
            top = np.maximum(F32(0), y - hc / F32(2))
            left = np.maximum(F32(0), x - wc / F32(2))
            hh = np.minimum(F32(1), h + hc)
            ww = np.minimum(F32(1), w + wc)
            bottom, right = top + hh, left + ww

            def inside(pt_):
                py, px = F32(pt_[0]), F32(pt_[1])
                return py >= top and py <= bottom and px >= left and px <= right
            if inside(p["touch"]) and inside(g["touch"]):
                both = True
        return both or bool(norm32(p["touch"], g["touch"]) <= F32(0.14))
    da = [abs(F32(p["lift"][i]) - F32(p["touch"][i])) for i in range(2)]
    db = [abs(F32(g["lift"][i]) - F32(g["touch"][i])) for i in range(2)]
    return int(np.argmax(np.array(da, dtype=F32))) == int(np.argmax(np.array(db, dtype=F32)))


def f32_next_up(v):
    b = struct.unpack("<I", struct.pack("<f", v))[0]
    return float(struct.unpack("<f", struct.pack("<I", b + 1))[0])


def build(seed=0):
    rng = random.Random(seed)
    tricky = [0.72625, 0.00005, 1e-05, 0.1 + 0.2, 0.99995, 0.0001, 0.00012345, 1e-4 * 3,
              0.5, 0.2, 0.8, -1.0, 0.0, -0.0, 1.0, 2.0, 10.0, 123.456, 1e15, 1e16, 1.5e16,
              123456789012345678.0, 9007199254740993.0, 2.5e-7, 1e22, 1e-300, 5e-324,
              1.7976931348623157e308, 0.03125, 0.09375, 0.15625, 0.00625, 0.12345, 0.99999,
              0.99994999, 0.000049999, -0.00004, -0.00005, 0.7262, 0.4187, 1 / 3, 2 / 3,
              float(F32(0.7262)), float(F32(0.1)), 0.1 * 3, 4.35, 2.675, 1.0000000000000002,
              0.9999999999999999, 1e-7, 100.0, 1234567890123456.0, 12345678901234567.0]
    rand = [rng.random() for _ in range(150)]
    rand += [rng.uniform(-2, 2) for _ in range(30)]
    rand += [rng.random() * 10 ** rng.randint(-12, 20) for _ in range(60)]
    rand += [float(F32(rng.random())) for _ in range(60)]
    values = tricky + rand + [round(v, 4) for v in rand] + [round(v, 4) for v in tricky]

    out = {"generator": "scripts/action_golden.py", "seed": seed}
    out["repr"] = [{"x": v, "repr": repr(v)} for v in values]
    out["round4"] = [{"x": v, "round": round(v, 4), "repr": repr(round(v, 4))} for v in values]

    texts = ["", "hello", 'say "hi"', "it's", "back\\slash", "a\\\"b'c", "ÅÄÖ café 日本",
             "two  spaces", " lead", "trail ", "tab\there", "new\nline", "wide\u3000space",
             "fs\x1csep", "nbsp\u00a0x", "[0.5, 0.2]", "Action Decision: x", "a, b: c"]

    render = []
    for _ in range(150):
        name = rng.choice(ACTION_NAMES)
        t = [rng.choice(values), rng.choice(values)]
        l_ = [rng.choice(values), rng.choice(values)]
        text = rng.choice(texts)
        render.append({"type": name, "touch": t, "lift": l_, "text": text,
                       "out": action_text(name, t, l_, clean_text(text))})
    out["render"] = render

    norm = []

    def add_norm(name, t, l_, text):
        plan_len = rng.randint(0, 4)
        plan = [name] + [rng.choice(ACTION_NAMES) for _ in range(plan_len - 1)] if plan_len else []
        rec = {"type": name, "touch": t, "lift": l_, "text": text, "plan": plan}
        for key, smap in (("fixed", SCROLL_FIXED), ("legacy", SCROLL_LEGACY)):
            nt, nl, ntext = autoui_normalize(name, t, l_, text, smap)
            rec[key] = autoui_target(plan, name, nt, nl, ntext)
        norm.append(rec)

    for _ in range(120):  # taps
        t = [rng.random(), rng.random()]
        r, a = rng.random() * 0.05, rng.random() * 6.283
        add_norm("DUAL_POINT", t, [t[0] + r * math.cos(a), t[1] + r * math.sin(a)], "")
    for _ in range(120):  # swipes
        t = [rng.random(), rng.random()]
        add_norm("DUAL_POINT", t, [rng.random(), rng.random()], "")
    # Taps at the 0.04 boundary in float32, and exact ties on the main axis.
    add_norm("DUAL_POINT", [0.5, 0.5], [0.54, 0.5], "")
    add_norm("DUAL_POINT", [0.5, 0.5], [0.5, 0.46], "")
    add_norm("DUAL_POINT", [0.5, 0.5], [0.5 + f32_next_up(0.04), 0.5], "")
    add_norm("DUAL_POINT", [0.2, 0.2], [0.5, 0.5], "")
    add_norm("DUAL_POINT", [0.5, 0.5], [0.2, 0.8], "")
    add_norm("DUAL_POINT", [0.5, 0.5], [0.8, 0.2], "")
    add_norm("DUAL_POINT", [0.72625, 0.00005], [0.72625, 0.00005], "")
    add_norm("DUAL_POINT", [0.03125, 0.99995], [0.03125, 0.99995], "")
    for text in texts:
        add_norm("TYPE", [-1.0, -1.0], [-1.0, -1.0], text)
    for name in ACTION_NAMES:
        if name not in ("TYPE", "DUAL_POINT"):
            add_norm(name, [-1.0, -1.0], [-1.0, -1.0], "")
    out["normalize"] = norm

    match = []

    def rand_action():
        kind = rng.random()
        if kind < 0.15:
            return {"type": rng.choice(ACTION_NAMES), "touch": [-1.0, -1.0], "lift": [-1.0, -1.0]}
        t = [rng.random(), rng.random()]
        if kind < 0.7:
            r, a = rng.random() * 0.045, rng.random() * 6.283
            return {"type": "DUAL_POINT", "touch": t,
                    "lift": [t[0] + r * math.cos(a), t[1] + r * math.sin(a)]}
        return {"type": "DUAL_POINT", "touch": t, "lift": [rng.random(), rng.random()]}

    for _ in range(500):
        p, g = rand_action(), rand_action()
        if rng.random() < 0.5 and g["type"] == "DUAL_POINT" and p["type"] == "DUAL_POINT":
            # Bring the prediction near the gold so that both outcomes occur.
            s = rng.random() * 0.25
            p["touch"] = [g["touch"][0] + rng.uniform(-s, s), g["touch"][1] + rng.uniform(-s, s)]
            if is_tap(g["touch"], g["lift"]):
                p["lift"] = p["touch"]
        boxes = []
        for _ in range(rng.randint(1, 6)):
            h, w = rng.random() * 0.3, rng.random() * 0.5
            if rng.random() < 0.5 and g["type"] == "DUAL_POINT":  # box near the gold tap
                y, x = g["touch"][0] - rng.random() * h, g["touch"][1] - rng.random() * w
            else:
                y, x = rng.random(), rng.random()
            boxes.append([float(F32(y)), float(F32(x)), float(F32(h)), float(F32(w))])
        match.append({"pred": p, "gold": g, "boxes": boxes, "match": aitw_match(p, g, boxes)})
    out["match"] = match
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="action/testdata/render_golden.json")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    data = build(args.seed)
    with open(args.out, "w", encoding="utf-8") as f:
        # One record per line: small, diff-friendly, still plain JSON.
        f.write("{\n")
        items = list(data.items())
        for i, (k, v) in enumerate(items):
            f.write(json.dumps(k) + ": ")
            if isinstance(v, list):
                f.write("[\n" + ",\n".join(json.dumps(r, ensure_ascii=True) for r in v) + "\n]")
            else:
                f.write(json.dumps(v))
            f.write(",\n" if i + 1 < len(items) else "\n")
        f.write("}\n")
    print(f"wrote {args.out}: " + ", ".join(f"{k} {len(v)}" for k, v in data.items()
                                            if isinstance(v, list)))


if __name__ == "__main__":
    main()
