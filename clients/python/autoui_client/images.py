"""Screens to PNG/JPEG bytes, with numpy and Pillow optional.

A screen may be PNG/JPEG bytes, a path to such a file, a PIL image, or an
HxWx3 (RGB) / HxWx4 (RGBA) / HxW (gray) uint8 numpy array. Arrays are encoded
as PNG by Pillow when it is installed, else by the small encoder below (zlib
from the standard library): PNG is lossless, so the server decodes the same
pixels either way.
"""

from __future__ import annotations

import os
import struct
import zlib
from typing import Any

__all__ = ["encode_screen", "png_encode"]

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _is_pil_image(obj: Any) -> bool:
    return type(obj).__module__.startswith("PIL.") and hasattr(obj, "save") and hasattr(obj, "mode")


def _is_array(obj: Any) -> bool:
    return hasattr(obj, "shape") and hasattr(obj, "dtype") and hasattr(obj, "tobytes")


def encode_screen(screen: Any) -> bytes:
    """The screen as image bytes for the server (PNG or JPEG)."""
    if isinstance(screen, (bytes, bytearray, memoryview)):
        return bytes(screen)
    if isinstance(screen, (str, os.PathLike)):
        with open(screen, "rb") as f:
            return f.read()
    if _is_pil_image(screen):
        import io

        img = screen
        if img.mode not in ("RGB", "RGBA", "L", "LA", "P", "I;16", "1"):
            img = img.convert("RGB")
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        return buf.getvalue()
    if _is_array(screen):
        return _encode_array(screen)
    raise TypeError(
        f"screen of type {type(screen).__name__}: want PNG/JPEG bytes, a path, a PIL image or an HxWx3/4 uint8 array"
    )


def _encode_array(arr: Any) -> bytes:
    shape = tuple(arr.shape)
    if str(arr.dtype) != "uint8":
        raise TypeError(f"screen array of dtype {arr.dtype}: want uint8")
    if len(shape) == 3 and shape[2] == 1:
        arr = arr.reshape(shape[:2])
        shape = shape[:2]
    if not (len(shape) == 2 or (len(shape) == 3 and shape[2] in (3, 4))):
        raise TypeError(f"screen array of shape {shape}: want HxW, HxWx3 or HxWx4")
    try:
        import io

        from PIL import Image
    except ImportError:
        channels = 1 if len(shape) == 2 else shape[2]
        return png_encode(arr.tobytes(), shape[1], shape[0], channels)  # tobytes is C order
    mode = {2: "L"}.get(len(shape)) or ("RGB" if shape[2] == 3 else "RGBA")
    import numpy as np

    img = Image.fromarray(np.ascontiguousarray(arr), mode)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_encode(pixels: bytes, width: int, height: int, channels: int) -> bytes:
    """A PNG of 8-bit pixels, row-major, ``channels`` of 1 (gray), 3 (RGB) or 4
    (RGBA) interleaved; rows unfiltered (filter 0), deflated by zlib."""
    color = {1: 0, 3: 2, 4: 6}[channels]
    stride = width * channels
    if len(pixels) != stride * height:
        raise ValueError(f"png_encode: {len(pixels)} bytes for {width}x{height}x{channels}")
    raw = bytearray()
    for row in range(height):
        raw += b"\x00"
        raw += pixels[row * stride : (row + 1) * stride]
    ihdr = struct.pack(">IIBBBBB", width, height, 8, color, 0, 0, 0)
    return _PNG_MAGIC + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(bytes(raw), 6)) + _chunk(b"IEND", b"")
