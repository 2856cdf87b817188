#!/usr/bin/env bash
# What scripts/gpu_check.sh needs beside the kit, small enough to travel with the checkout, in
# .gpuextra/ (ignored by git). Parts (default: both; together with the ~45 MB checkout they pass the
# GPU tool's 64 MiB, so a run carries one):
#   fp16     base-vitg-fp16.manifest.json: base-vitg-fp16 = base-vitg's text graphs + base-vitg-fp16all's
#            vision graph (the same file: checked here) + this manifest; default-fp16v/, default-fp16/:
#            the files of build/default-fp16v and build/default-fp16 that differ from models/default's;
#            tiny-fp16/: those of the tiny bundle in fp16 everywhere (TestCUDAFP16); tiny-attn/ and
#            tiny-fp16attn/: its attention variant (scripts.attention: the decoder's plain, the
#            vision tower's fused) with its norms fused (scripts.skip_norm) and its Q/K/V projections
#            merged (scripts.merge_qkv), fp32, and fp16 everywhere with an fp16 cache (--fp16-cache)
#   ortpy    ortpy.tar.xz (8 MB): onnxruntime-gpu 1.29's Python package without its libraries, for the
#            ORT-Python IO-binding peer (gpu_check.sh links the kit's CUDA provider into it); the wheel
#            is the one pack.sh downloads
#   parity   simdata/test/: the synthetic test split (autoui dataset --episodes 3600 --seed 0),
#            cpu-default.jsonl: models/default's predictions on it on this machine's CPU, the reference
#            the GPU's are compared with (the GPU machine generates the split 2x slower than here), and
#            default-static/: the files scripts.upgrade_bundle adds to models/default (its static decoder
#            graph, for gpu_check.sh's evalc: --cuda-graph, --continuous), home_1080x2400.png: serve's
#            screen where the checkout travels without models/testdata
#   host     aitw_runner.test.xz (4 MB): aitw/runner's test binary, for BenchmarkRunHost (what eval
#            run can feed an engine from this host's cores, full-size AITW steps; CPU only)
# Run from the repository root after `make build` and the scripts.half commands in gpu_check.sh.
# GPU_EXTRA_DIR (default .gpuextra) names the directory, so that two sets can wait for two calls
# (gpu_check.sh reads EXTRA).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
x=${GPU_EXTRA_DIR:-.gpuextra}
case $x in .gpuextra*) ;; *) echo "gpu_extra: GPU_EXTRA_DIR $x: want .gpuextra or .gpuextra-NAME (ignored by git)" >&2; exit 2 ;; esac
parts=${*:-fp16 parity}   # ortpy and host on request
rm -rf "$x"; mkdir -p "$x"
if [[ " $parts " == *" fp16 "* ]]; then
  for f in vision_model.onnx vision_model.onnx.data; do
    cmp -s "bench-models/base-vitg-fp16/$f" "bench-models/base-vitg-fp16all/$f" ||
      { echo "gpu_extra: bench-models/base-vitg-fp16/$f differs from base-vitg-fp16all's: remake both from one base-vitg" >&2; exit 1; }
  done
  cp bench-models/base-vitg-fp16/manifest.json "$x/base-vitg-fp16.manifest.json"
  for v in default-fp16v default-fp16; do
    mkdir "$x/$v"
    for f in "build/$v"/*; do cmp -s "$f" "models/default/$(basename "$f")" || cp "$f" "$x/$v/"; done
  done
  # the tiny bundle in fp16 everywhere, for TestCUDAFP16 (its files that differ from tiny's)
  d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
  .venv/bin/python -m scripts.half --in models/testdata/tiny --out "$d/tiny-fp16" --roles all >/dev/null
  # its attention variant with the norms fused and the projections merged (fp32: the CUDA tests' golden
  # tokens through the rewritten attention, SkipSimplifiedLayerNormalization and the merged projections)
  # and that in fp16 everywhere (TestCUDAFP16 again)
  .venv/bin/python -m scripts.attention --in models/testdata/tiny --out "$d/tiny-attn0" --decoder plain --vision fused 2>/dev/null
  .venv/bin/python -m scripts.skip_norm --in "$d/tiny-attn0" --out "$d/tiny-attnsn" >/dev/null
  .venv/bin/python -m scripts.merge_qkv --in "$d/tiny-attnsn" --out "$d/tiny-attn" >/dev/null
  .venv/bin/python -m scripts.half --in "$d/tiny-attn" --out "$d/tiny-fp16attn" --roles all --fp32-ops '' --fp16-cache >/dev/null
  # a graph that differs travels with its external data even where that is the same: ORT refuses
  # external data outside the directory of the graph's file (gpu_check.sh links the files)
  for v in tiny-fp16 tiny-attn tiny-fp16attn; do
    mkdir "$x/$v"
    for f in "$d/$v"/*; do
      base=models/testdata/tiny/$(basename "$f")
      graph=${f%.data}   # a data file's graph (the file itself otherwise)
      if ! cmp -s "$f" "$base" || ! cmp -s "$graph" "${base%.data}"; then cp "$f" "$x/$v/"; fi
    done
  done
fi
if [[ " $parts " == *" parity "* ]]; then
  d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
  build/autoui dataset --out "$d/sim" --episodes 3600 --seed 0 --size 360x800 >/dev/null
  rm -rf "$d/sim/train" "$d/sim/validation"; mv "$d/sim" "$x/simdata"   # dataset.json names the subsets
  build/autoui eval run --model models/default --data "$x/simdata/test" --out "$d/cpu" >/dev/null
  cp "$d/cpu/predictions.jsonl" "$x/cpu-default.jsonl"
  cp -r models/default "$d/default-static"
  .venv/bin/python -m scripts.upgrade_bundle "$d/default-static" >/dev/null
  mkdir "$x/default-static"
  for f in "$d/default-static"/*; do cmp -s "$f" "models/default/$(basename "$f")" || cp "$f" "$x/default-static/"; done
  cp models/testdata/screens/home_1080x2400.png "$x/"   # serve's screen: this call leaves models/testdata out
fi
if [[ " $parts " == *" ortpy "* ]]; then
  whl=$(ls "${XDG_CACHE_HOME:-$HOME/.cache}"/autoui-gpu/onnxruntime_gpu-1.29.0-*.whl 2>/dev/null | head -1)
  [ -n "$whl" ] || { echo "gpu_extra: no onnxruntime-gpu wheel: run ../shared/gpu/pack.sh first" >&2; exit 1; }
  d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
  # the pybind module links ORT statically; the providers come from the kit
  unzip -q "$whl" 'onnxruntime/__init__.py' 'onnxruntime/capi/*' -x 'onnxruntime/capi/libonnxruntime*.so*' -d "$d"
  tar -C "$d" -cf - onnxruntime | xz -T0 -6 > "$x/ortpy.tar.xz"
fi
if [[ " $parts " == *" host "* ]]; then
  go test -c -o "$x/aitw_runner.test" ./aitw/runner && xz -T0 -6 "$x/aitw_runner.test"
fi
ex=$(git rev-parse --git-path info/exclude); mkdir -p "$(dirname "$ex")"
grep -qx "/$x/" "$ex" 2>/dev/null || echo "/$x/" >> "$ex"
echo "gpu_extra: $(du -sh "$x" | cut -f1) in $x/ ($parts)"
