"""Phone-shaped sample screenshots for fixtures and the demo (deterministic PIL drawing).

  python -m scripts.screens [--out models/testdata/screens]

Each screen is laid out in normalized coordinates, so a screen drawn at two resolutions
has its elements at the same [y, x]; `layout(kind)` returns those elements (label and
normalized box y, x, h, w as AITW writes them) for building training targets.
"""

from __future__ import annotations

import argparse
import os
import sys

from PIL import Image, ImageDraw, ImageFont

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "models", "testdata", "screens")

HOME_APPS = ["Phone", "Messages", "Chrome", "Camera",
             "Settings", "Gmail", "Maps", "Photos",
             "Play Store", "YouTube", "Clock", "Calendar",
             "Contacts", "Files", "Drive", "Spotify"]
SETTINGS_ROWS = ["Network & internet", "Connected devices", "Apps", "Notifications", "Battery",
                 "Storage", "Sound & vibration", "Display", "Wallpaper", "Accessibility",
                 "Security", "Location"]
LIST_ITEMS = ["Wireless headphones", "USB-C cable 2m", "Bluetooth speaker", "Laptop stand",
              "Mechanical keyboard", "Gaming mouse", "4K monitor 27 inch", "Phone case"]
SEARCH_SUGGESTIONS = ["weather tomorrow", "news today", "best pizza near me", "paris hotels",
                      "flights to tokyo"]

# (file name, kind, width, height); home_1080x2400.png is the demo screen.
SCREENS = [
    ("home_1080x2400.png", "home", 1080, 2400),
    ("home_720x1280.png", "home", 720, 1280),
    ("settings_1080x2400.png", "settings", 1080, 2400),
    ("search_720x1280.png", "search", 720, 1280),
    ("list_1080x1920.png", "list", 1080, 1920),
    ("settings_720x1600.png", "settings", 720, 1600),
]

PALETTE = [(66, 133, 244), (219, 68, 55), (244, 180, 0), (15, 157, 88), (171, 71, 188), (0, 172, 193),
           (255, 112, 67), (92, 107, 192)]


def layout(kind: str) -> list[dict]:
    """Elements of a screen kind: {"label", "type", "box": [y, x, h, w]} (normalized)."""
    els = []
    if kind == "home":
        els.append({"label": "Search", "type": "search", "box": [0.08, 0.06, 0.05, 0.88]})
        for i, app in enumerate(HOME_APPS):
            r, c = divmod(i, 4)
            els.append({"label": app, "type": "icon", "box": [0.20 + r * 0.15, 0.06 + c * 0.225, 0.11, 0.19]})
        for j, app in enumerate(["Phone", "Messages", "Chrome", "Camera"]):
            els.append({"label": app + " dock", "type": "dock", "box": [0.86, 0.06 + j * 0.225, 0.07, 0.19]})
    elif kind == "settings":
        els.append({"label": "Search settings", "type": "search", "box": [0.07, 0.05, 0.05, 0.9]})
        for i, row in enumerate(SETTINGS_ROWS):
            els.append({"label": row, "type": "row", "box": [0.14 + i * 0.07, 0.0, 0.07, 1.0]})
    elif kind == "search":
        els.append({"label": "Search field", "type": "search", "box": [0.06, 0.04, 0.06, 0.92]})
        for i, s in enumerate(SEARCH_SUGGESTIONS):
            els.append({"label": s, "type": "row", "box": [0.14 + i * 0.065, 0.0, 0.065, 1.0]})
        els.append({"label": "Keyboard", "type": "keyboard", "box": [0.62, 0.0, 0.38, 1.0]})
    elif kind == "list":
        els.append({"label": "Search field", "type": "search", "box": [0.06, 0.04, 0.05, 0.92]})
        for i, item in enumerate(LIST_ITEMS):
            els.append({"label": item, "type": "row", "box": [0.13 + i * 0.105, 0.0, 0.105, 1.0]})
    else:
        raise ValueError(f"unknown screen kind {kind!r}")
    return els


def center(el: dict) -> tuple[float, float]:
    y, x, h, w = el["box"]
    return (y + h / 2, x + w / 2)


def _font(px: int):
    return ImageFont.load_default(size=max(8, px))


def _status_bar(d: ImageDraw.ImageDraw, w: int, h: int, dark: bool) -> None:
    bar = int(h * 0.03)
    fg = (240, 240, 240) if dark else (40, 40, 40)
    d.rectangle([0, 0, w, bar], fill=(20, 20, 30) if dark else (235, 235, 240))
    f = _font(int(bar * 0.6))
    d.text((int(w * 0.04), int(bar * 0.18)), "12:30", font=f, fill=fg)
    # battery, signal, wifi glyphs
    bx = int(w * 0.88)
    d.rectangle([bx, int(bar * 0.3), bx + int(w * 0.06), int(bar * 0.75)], outline=fg, width=2)
    d.rectangle([bx + 3, int(bar * 0.3) + 3, bx + int(w * 0.045), int(bar * 0.75) - 3], fill=fg)
    for k in range(4):
        x0 = int(w * 0.78) + k * int(w * 0.012)
        d.rectangle([x0, int(bar * (0.75 - 0.12 * (k + 1))), x0 + int(w * 0.008), int(bar * 0.75)], fill=fg)


def _px(box, w, h):
    y, x, bh, bw = box
    return [int(x * w), int(y * h), int((x + bw) * w), int((y + bh) * h)]


def _nav_bar(d, w, h, dark):
    y0 = int(h * 0.95)
    d.rectangle([0, y0, w, h], fill=(15, 15, 20) if dark else (245, 245, 245))
    fg = (200, 200, 200) if dark else (90, 90, 90)
    cy = (y0 + h) // 2
    r = int(h * 0.012)
    d.polygon([(int(w * 0.25) - r, cy), (int(w * 0.25) + r, cy - r), (int(w * 0.25) + r, cy + r)], outline=fg)
    d.ellipse([w // 2 - r, cy - r, w // 2 + r, cy + r], outline=fg, width=2)
    d.rectangle([int(w * 0.75) - r, cy - r, int(w * 0.75) + r, cy + r], outline=fg, width=2)


def draw(kind: str, w: int, h: int) -> Image.Image:
    dark = kind == "home"
    img = Image.new("RGB", (w, h), (30, 60, 110) if dark else (250, 250, 252))
    d = ImageDraw.Draw(img)
    if kind == "home":
        for k in range(0, h, max(1, h // 64)):  # vertical wallpaper gradient
            c = int(30 + 50 * k / h)
            d.rectangle([0, k, w, k + h // 64], fill=(c, 60 + c // 2, 110 + c // 3))
    _status_bar(d, w, h, dark)
    label_font = _font(int(h * 0.014))
    row_font = _font(int(h * 0.018))
    for i, el in enumerate(layout(kind)):
        x0, y0, x1, y1 = _px(el["box"], w, h)
        t = el["type"]
        if t == "search":
            d.rounded_rectangle([x0, y0, x1, y1], radius=(y1 - y0) // 2, fill=(255, 255, 255),
                                outline=(200, 200, 200), width=2)
            r = (y1 - y0) // 4
            cx, cy = x0 + (y1 - y0) // 2, (y0 + y1) // 2
            d.ellipse([cx - r, cy - r, cx + r, cy + r], outline=(100, 100, 100), width=3)
            d.line([cx + r, cy + r, cx + 2 * r, cy + 2 * r], fill=(100, 100, 100), width=3)
            d.text((x0 + (y1 - y0), cy - int(h * 0.009)), el["label"], font=row_font, fill=(120, 120, 120))
        elif t in ("icon", "dock"):
            side = min(x1 - x0, int((y1 - y0) * (0.7 if t == "icon" else 1.0)))
            cx = (x0 + x1) // 2
            color = PALETTE[i % len(PALETTE)]
            d.rounded_rectangle([cx - side // 2, y0, cx + side // 2, y0 + side], radius=side // 4, fill=color)
            letter_font = _font(int(side * 0.5))
            d.text((cx, y0 + side // 2), el["label"][0], font=letter_font, fill=(255, 255, 255), anchor="mm")
            if t == "icon":
                d.text((cx, y0 + side + int(h * 0.012)), el["label"], font=label_font, fill=(255, 255, 255),
                       anchor="mm")
        elif t == "row":
            d.line([x0, y1 - 1, x1, y1 - 1], fill=(225, 225, 230), width=2)
            ic = (y1 - y0) // 2
            color = PALETTE[i % len(PALETTE)]
            d.ellipse([x0 + int(w * 0.05), y0 + ic // 2, x0 + int(w * 0.05) + ic, y0 + ic // 2 + ic], fill=color)
            d.text((x0 + int(w * 0.05) + ic + int(w * 0.04), (y0 + y1) // 2), el["label"], font=row_font,
                   fill=(30, 30, 30), anchor="lm")
        elif t == "keyboard":
            d.rectangle([x0, y0, x1, y1], fill=(210, 213, 220))
            rows = ["qwertyuiop", "asdfghjkl", "zxcvbnm"]
            kh = (y1 - y0) // 5
            for r, keys in enumerate(rows):
                kw = (x1 - x0) // 10
                off = x0 + (10 - len(keys)) * kw // 2
                for c, ch in enumerate(keys):
                    kx, ky = off + c * kw, y0 + int(kh * 0.3) + r * kh
                    d.rounded_rectangle([kx + 3, ky + 3, kx + kw - 3, ky + kh - 3], radius=6, fill=(255, 255, 255))
                    d.text((kx + kw // 2, ky + kh // 2), ch, font=row_font, fill=(20, 20, 20), anchor="mm")
            ky = y0 + int(kh * 0.3) + 3 * kh
            d.rounded_rectangle([x0 + int(w * 0.25), ky + 3, x0 + int(w * 0.75), ky + kh - 3], radius=6,
                                fill=(255, 255, 255))
    if kind == "settings":
        d.text((int(w * 0.05), int(h * 0.035)), "Settings", font=_font(int(h * 0.022)), fill=(20, 20, 20))
    _nav_bar(d, w, h, dark)
    return img


def write_all(out_dir: str = OUT_DIR) -> list[str]:
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for name, kind, w, h in SCREENS:
        p = os.path.join(out_dir, name)
        # PNG without timestamps or text chunks: byte-deterministic.
        draw(kind, w, h).save(p, format="PNG", optimize=True)
        paths.append(p)
    return paths


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Draw the sample phone screenshots.")
    ap.add_argument("--out", default=OUT_DIR)
    args = ap.parse_args(argv)
    for p in write_all(args.out):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
