#!/usr/bin/env bash
# The fp16 variants scripts/gpu_check.sh measures, as small deltas in .gpuextra/ (ignored by git), so
# that they travel beside the checkout instead of as whole bundles:
#   base-vitg-fp16.manifest.json   base-vitg-fp16 = base-vitg's text graphs + base-vitg-fp16all's
#                                  vision graph (the same file: checked here) + this manifest
#   default-fp16v/, default-fp16/  the files of build/default-fp16v and build/default-fp16 that differ
#                                  from models/default's
# Run from the repository root after the scripts.half commands in scripts/gpu_check.sh's header.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
x=.gpuextra
for f in vision_model.onnx vision_model.onnx.data; do
  cmp -s "bench-models/base-vitg-fp16/$f" "bench-models/base-vitg-fp16all/$f" ||
    { echo "gpu_extra: bench-models/base-vitg-fp16/$f differs from base-vitg-fp16all's: remake both from one base-vitg" >&2; exit 1; }
done
rm -rf "$x"; mkdir -p "$x"
cp bench-models/base-vitg-fp16/manifest.json "$x/base-vitg-fp16.manifest.json"
for v in default-fp16v default-fp16; do
  mkdir "$x/$v"
  for f in "build/$v"/*; do cmp -s "$f" "models/default/$(basename "$f")" || cp "$f" "$x/$v/"; done
done
ex=$(git rev-parse --git-path info/exclude); mkdir -p "$(dirname "$ex")"
grep -qx '/.gpuextra/' "$ex" 2>/dev/null || echo '/.gpuextra/' >> "$ex"
echo "gpu_extra: $(du -sh "$x" | cut -f1) in $x/"
