"""Golden data for the Go image preprocessing (engine/preprocess).

    python -m scripts.preprocess_golden [--out DIR]

Draws a few small deterministic test images with PIL (RGB, RGBA with varying
alpha, gray, paletted, JPEG, odd sizes, an upscale, a 1080x2400 phone screen)
and writes, for each, into engine/preprocess/testdata/:

  <name>.png|.jpg                  the input
  <name>.resized.png               PIL's convert("RGB").resize((224, 224), BICUBIC), uint8
  <name>.pixel_values.npy.gz       BlipImageProcessor (transformers 4.46.3) pixel_values[0],
                                   float32 (3, 224, 224), little-endian, gzip with mtime 0
  cases.json                       the list of cases

The script checks that the processor's output is exactly the rescale/normalize
of PIL's resized image, so the two goldens agree. Output is byte-deterministic.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
from pathlib import Path

import numpy as np
import PIL
from PIL import Image, ImageDraw, ImageFont

SIZE = 224
MEAN = [0.48145466, 0.4578275, 0.40821073]
STD = [0.26862954, 0.26130258, 0.27577711]
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "engine" / "preprocess" / "testdata"


def _gradient(w: int, h: int) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    r = (x * 255 // max(w - 1, 1)).astype(np.uint8)
    g = (y * 255 // max(h - 1, 1)).astype(np.uint8)
    b = ((x + y) * 7 % 256).astype(np.uint8)
    return np.stack([r, g, b], axis=-1)


def _shapes(im: Image.Image, seed: int) -> None:
    """Sharp edges (bicubic overshoot, clipping) and a small noise patch."""
    rng = np.random.RandomState(seed)
    d = ImageDraw.Draw(im)
    w, h = im.size
    full = "RGBA" if im.mode == "RGBA" else im.mode
    for i in range(6):
        x0, y0 = int(rng.randint(0, w - 8)), int(rng.randint(0, h - 8))
        x1, y1 = x0 + int(rng.randint(4, w // 2)), y0 + int(rng.randint(4, h // 2))
        col = tuple(int(c) for c in rng.randint(0, 256, size=4 if full == "RGBA" else 3))
        if full == "L":
            col = col[0]
        (d.rectangle if i % 2 else d.ellipse)([x0, y0, x1, y1], fill=col)
    d.line([0, 0, w - 1, h - 1], fill=(255, 255, 255, 255)[: len(im.getbands())] if full != "L" else 255, width=1)
    d.text((3, h // 2), "Settings 12:45", fill=(0, 0, 0, 255)[: len(im.getbands())] if full != "L" else 0)
    pw, ph = min(24, w // 3), min(24, h // 3)
    noise = rng.randint(0, 256, size=(ph, pw, len(im.getbands()))).astype(np.uint8)
    patch = Image.fromarray(noise[..., 0] if full == "L" else noise, mode=im.mode)
    im.paste(patch, (w - pw - 1, h - ph - 1))


def make_rgb(w: int, h: int, seed: int) -> Image.Image:
    im = Image.fromarray(_gradient(w, h), mode="RGB")
    _shapes(im, seed)
    return im


def make_rgba(w: int, h: int, seed: int) -> Image.Image:
    rgb = _gradient(w, h)
    y, x = np.mgrid[0:h, 0:w]
    # Alpha from 0 to 255 across, with fully transparent pixels whose colour
    # must survive (convert("RGB") drops alpha; it does not composite).
    a = (x * 255 // max(w - 1, 1)).astype(np.uint8)
    a[: h // 4, :] = 0
    im = Image.fromarray(np.dstack([rgb, a]), mode="RGBA")
    _shapes(im, seed)
    return im


def make_gray(w: int, h: int, seed: int) -> Image.Image:
    y, x = np.mgrid[0:h, 0:w]
    im = Image.fromarray(((x * 3 + y * 5) % 256).astype(np.uint8), mode="L")
    _shapes(im, seed)
    return im


def make_palette(w: int, h: int, seed: int) -> Image.Image:
    im = make_rgb(w, h, seed).quantize(colors=64, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    im.info["transparency"] = 3  # a tRNS entry: Go's decoder then uses NRGBA palette colours
    return im


def make_phone(w: int = 1080, h: int = 2400) -> Image.Image:
    """A home-screen-like picture: status bar, wallpaper, icon grid, labels, dock."""
    im = Image.new("RGB", (w, h))
    y = np.arange(h)[:, None]
    wall = np.zeros((h, w, 3), np.uint8)
    wall[..., 0] = (30 + y * 60 // h).astype(np.uint8)
    wall[..., 1] = (60 + y * 90 // h).astype(np.uint8)
    wall[..., 2] = (120 + y * 100 // h).astype(np.uint8)
    im.paste(Image.fromarray(wall, "RGB"))
    d = ImageDraw.Draw(im)
    font = ImageFont.load_default(size=36)
    d.rectangle([0, 0, w, 90], fill=(20, 20, 28))
    d.text((40, 22), "12:45", fill=(255, 255, 255), font=font)
    d.text((w - 200, 22), "87%", fill=(255, 255, 255), font=font)
    d.rounded_rectangle([60, 200, w - 60, 330], radius=60, fill=(245, 245, 250))
    d.text((130, 242), "Search", fill=(90, 90, 100), font=font)
    palette = [(219, 68, 55), (15, 157, 88), (66, 133, 244), (244, 180, 0), (171, 71, 188), (0, 172, 193)]
    labels = ["Phone", "Chrome", "Maps", "Photos", "Settings", "Clock", "Gmail", "Camera",
              "Play", "Files", "Music", "Notes", "Calendar", "Contacts", "YouTube", "Drive"]
    for i, label in enumerate(labels):
        r, c = divmod(i, 4)
        cx, cy = 150 + c * 260, 600 + r * 330
        d.rounded_rectangle([cx - 80, cy - 80, cx + 80, cy + 80], radius=40, fill=palette[i % len(palette)])
        d.ellipse([cx - 30, cy - 30, cx + 30, cy + 30], fill=(255, 255, 255))
        tw = d.textlength(label, font=font)
        d.text((cx - tw / 2, cy + 100), label, fill=(255, 255, 255), font=font)
    d.rounded_rectangle([40, h - 330, w - 40, h - 130], radius=70, fill=(255, 255, 255, 0), outline=(230, 230, 240), width=4)
    d.rectangle([w // 2 - 150, h - 50, w // 2 + 150, h - 38], fill=(240, 240, 240))
    return im


def cases() -> list[tuple[str, str, Image.Image]]:
    """(name, format, image) for every golden case."""
    return [
        ("rgb_333x517", "png", make_rgb(333, 517, 1)),
        ("rgba_300x200", "png", make_rgba(300, 200, 2)),
        ("gray_160x300", "png", make_gray(160, 300, 3)),  # width up, height down
        ("palette_240x160", "png", make_palette(240, 160, 4)),
        ("small_100x60", "png", make_rgb(100, 60, 5)),  # upscale both ways
        ("rgb_224x100", "png", make_rgb(224, 100, 6)),  # no horizontal pass
        ("photo_400x300", "jpg", make_rgb(400, 300, 7)),
        ("phone_1080x2400", "png", make_phone()),
    ]


def encode(im: Image.Image, fmt: str) -> bytes:
    buf = io.BytesIO()
    if fmt == "png":
        im.save(buf, format="PNG", optimize=False, compress_level=9)
    else:
        im.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def png_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr, mode="RGB").save(buf, format="PNG", compress_level=9)
    return buf.getvalue()


def npy_gz_bytes(arr: np.ndarray) -> bytes:
    raw = io.BytesIO()
    np.save(raw, np.ascontiguousarray(arr, dtype="<f4"))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9, mtime=0, filename="") as f:
        f.write(raw.getvalue())
    return out.getvalue()


def process(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(PIL-resized uint8 HxWx3, BlipImageProcessor pixel_values CHW float32) of an encoded image."""
    from transformers import BlipImageProcessor
    from transformers.image_transforms import normalize, rescale

    im = Image.open(io.BytesIO(data))
    im.load()
    proc = BlipImageProcessor(size={"height": SIZE, "width": SIZE}, image_mean=MEAN, image_std=STD,
                              rescale_factor=1 / 255, resample=Image.Resampling.BICUBIC)
    pv = proc(images=im, return_tensors="np")["pixel_values"][0]
    assert pv.dtype == np.float32 and pv.shape == (3, SIZE, SIZE), (pv.dtype, pv.shape)

    resized = np.asarray(im.convert("RGB").resize((SIZE, SIZE), Image.Resampling.BICUBIC), dtype=np.uint8)
    again = normalize(rescale(resized, 1 / 255), MEAN, STD).transpose(2, 0, 1)
    if not np.array_equal(again, pv):
        raise AssertionError("BlipImageProcessor output differs from PIL resize + rescale/normalize")
    return resized, pv


def build() -> dict[str, bytes]:
    """All golden files, name -> bytes."""
    files: dict[str, bytes] = {}
    index = []
    for name, fmt, im in cases():
        src = f"{name}.{fmt}"
        data = encode(im, fmt)
        resized, pv = process(data)
        files[src] = data
        files[f"{name}.resized.png"] = png_bytes(resized)
        files[f"{name}.pixel_values.npy.gz"] = npy_gz_bytes(pv)
        index.append({"name": name, "input": src, "format": fmt, "mode": Image.open(io.BytesIO(data)).mode,
                      "width": im.size[0], "height": im.size[1],
                      "resized": f"{name}.resized.png", "pixel_values": f"{name}.pixel_values.npy.gz"})
    meta = {"size": [SIZE, SIZE], "resample": "bicubic", "rescale_factor": 1 / 255, "mean": MEAN, "std": STD,
            "processor": "transformers.BlipImageProcessor 4.46.3", "pillow": PIL.__version__,
            "cases": index}
    files["cases.json"] = (json.dumps(meta, indent=1) + "\n").encode()
    return files


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    total = 0
    for name, data in sorted(build().items()):
        (args.out / name).write_bytes(data)
        total += len(data)
    print(f"wrote {args.out} ({total / 1e6:.2f} MB)")


if __name__ == "__main__":
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    main()
