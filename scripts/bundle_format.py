"""The bundle format version this repository reads and writes (docs/bundle-format.md), and the
one-line refusal of any other, for every Python reader: the exporter and quantizer, and the
torch-free ones (the reference ORT pipeline, the peers), which is why this module imports
nothing."""

from __future__ import annotations

FORMAT_VERSION = 2
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
