"""The bundle format version this repository reads and writes (docs/bundle-format.md), its file
names and the exporter's graphs revision, and the one-line refusal of any other version, for every
Python reader and writer: the exporter and quantizer, and the
torch-free ones (the reference ORT pipeline, the peers), which is why this module imports
nothing."""

from __future__ import annotations

FORMAT_VERSION = 2
# Each graph role's file in a bundle, in the manifest's order. decoder_static (graphs revision 4)
# is optional for readers: bundles from before it, and the int8/fp16 variants of a converted
# decoder, do not have it.
FILES = {"vision": "vision_model.onnx", "encoder": "encoder_model.onnx", "fusion": "fusion_model.onnx",
         "decoder": "decoder_with_past_model.onnx", "decoder_cross": "decoder_cross_model.onnx",
         "decoder_static": "decoder_static_model.onnx"}
# Bumped when the exported graphs change within a bundle format (same IO, faster ops), so that
# scripts.bench_models exports its bundles again. 2: vision norms fused (fuse_vision_norms).
# 3: the with-past decoder has a logits_argmax output (add_argmax; scripts.upgrade_bundle adds it).
# 4: decoder_static_model.onnx, the with-past decoder over a fixed-length cache written at a
#    position input, for CUDA-graph capture (scripts/static_decoder.py; scripts.upgrade_bundle adds it).
# 5: the vision tower's last layer for the CLS token alone (scripts/vision.py); exported only.
# 6: the vision tower without a Concat on the device, and its manifest entry's capture_safe
#    (scripts/cuda_capture.py; scripts.upgrade_bundle adds both).
GRAPHS_REVISION = 6
# The with-past decoder's argmax output (exporter graphs revision 3): int64 token ids per position.
ARGMAX_OUTPUT = "logits_argmax"


def format_error(bundle: str, manifest: dict) -> str | None:
    """None when manifest is of FORMAT_VERSION, else why the bundle at path bundle is refused,
    naming the command that upgrades it."""
    version = manifest.get("format_version")
    if version == FORMAT_VERSION:
        return None
    return (f"{bundle}: bundle format {version!r}, want {FORMAT_VERSION} "
            f"(python -m scripts.upgrade_bundle {bundle})")
