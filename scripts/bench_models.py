"""`make bench-models`: deterministic random-weight bundles at the real sizes, cached outside git.

  python -m scripts.bench_models [--out bench-models] [NAME ...]

NAME is SIZE-VISION: base-vitg (T5-base + the full BLIP-2 ViT-g tower, Auto-UI-base's real
shapes), base-vtiny (T5-base + a tiny tower: the text path at full size, vision ~free — the
"features precomputed" case), large-vitg, large-vtiny. Default: all four. Seed 0 throughout,
so the same command gives byte-identical bundles and the PyTorch peer rebuilds the same
weights from the manifest. A bundle whose manifest already records the same source and the
current bundle format is kept; exports go to a temporary directory and are renamed into place,
so an interrupted run never leaves half a bundle. The exporter's ORT-vs-PyTorch check is skipped here (--no-check): the
parity tests cover the graphs, and `make bench` compares the greedy tokens of ours, ORT-Python
and PyTorch on every run anyway.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLES = {
    "base-vitg": ("base", "vitg"),
    "base-vtiny": ("base", "tiny"),
    "large-vitg": ("large", "vitg"),
    "large-vtiny": ("large", "tiny"),
}
SEED = 0


def source(size: str, vision: str) -> str:
    return f"random:{size}:seed={SEED};vision=random:{vision}"  # as scripts.export records it


def up_to_date(path: str, size: str, vision: str) -> bool:
    from .bundle_format import FORMAT_VERSION, GRAPHS_REVISION
    try:
        with open(os.path.join(path, "manifest.json")) as f:
            m = json.load(f)
        # An older bundle format (format 1: the merged decoder) or older graphs are exported again.
        return (m["exporter"]["source"] == source(size, vision) and m.get("format_version") == FORMAT_VERSION
                and m["exporter"].get("graphs_revision", 1) == GRAPHS_REVISION)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def build(out_root: str, name: str) -> None:
    from . import export
    size, vision = BUNDLES[name]
    dst = os.path.join(out_root, name)
    if up_to_date(dst, size, vision):
        print(f"{name}: up to date ({dst})", file=sys.stderr)
        return
    tmp = dst + ".partial"
    shutil.rmtree(tmp, ignore_errors=True)
    t = time.time()
    print(f"{name}: exporting T5-{size} + {vision} vision (seed {SEED}) ...", file=sys.stderr, flush=True)
    rc = export.main(["--random", "--size", size, "--vision-size", vision, "--seed", str(SEED),
                      "--name", name, "--out", tmp, "--no-check"])
    if rc:
        raise SystemExit(f"{name}: export failed ({rc})")
    shutil.rmtree(dst, ignore_errors=True)
    os.replace(tmp, dst)
    print(f"{name}: done in {time.time() - t:.0f}s", file=sys.stderr)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Build the benchmark bundles (random weights, real sizes).")
    p.add_argument("--out", default=os.path.join(ROOT, "bench-models"))
    p.add_argument("names", nargs="*", help=f"bundles to build (default all: {', '.join(BUNDLES)})")
    args = p.parse_args(argv)
    names = args.names or list(BUNDLES)
    for n in names:
        if n not in BUNDLES:
            raise SystemExit(f"unknown bench bundle {n!r} (want {', '.join(BUNDLES)})")
    os.makedirs(args.out, exist_ok=True)
    for n in names:
        build(args.out, n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
