#!/usr/bin/env bash
# The GPU measurements of issue 21 items 3-5, in one run on a GPU machine packed by ../shared/gpu/pack.sh
# (autoui, ORT's CUDA build and the bundles come in the kit; python3's stdlib is enough; the Python
# peers need torch / onnxruntime-gpu there and report themselves skipped without them).
#
# Here, in the repository root, after `make build` (docs/cuda.md, "fp16" and "batches"):
#   python -m scripts.bench_models base-vitg
#   python -m scripts.half --in bench-models/base-vitg --out bench-models/base-vitg-fp16               # vision
#   python -m scripts.half --in bench-models/base-vitg --out bench-models/base-vitg-fp16all --roles all
#   python -m scripts.half --in models/default --out build/default-fp16v
#   python -m scripts.half --in models/default --out build/default-fp16 --roles all
#   ../shared/gpu/pack.sh bench-models/base-vitg bench-models/base-vitg-fp16 bench-models/base-vitg-fp16all
# There (the run tool, carry [".gpu", "build/default-fp16", "build/default-fp16v"], timeout 600):
#   bash .gpu/unpack.sh bash scripts/gpu_check.sh
# STEPS picks parts (default "fp16 batch peers"), BATCHES the batch sizes (default "1 8 32 64").
# Results go to $OUT (the run tool's, else /tmp/gpu-check): summary.txt and the JSON of every run.
set -u
out=${OUT:-/tmp/gpu-check}; mkdir -p "$out"
kit=${KIT:-/tmp/kit}
steps=${STEPS:-fp16 batch peers}
batches=${BATCHES:-1 8 32 64}
log() { echo "$*" | tee -a "$out/summary.txt"; }

if [[ " $steps " == *" fp16 "* ]]; then
  # fp16 agreement on the trained default model: the synthetic test split predicted on the GPU in fp32,
  # fp16 vision and fp16 everywhere, outputs compared step by step.
  autoui dataset --out "$out/simdata" --episodes 3600 --seed 0 --size 360x800 >/dev/null || exit 1
  for m in models/default build/default-fp16v build/default-fp16; do
    n=$(basename "$m")
    autoui eval run --provider cuda --model "$m" --data "$out/simdata/test" --out "$out/eval-$n" 2>"$out/eval-$n.log" || log "eval $n failed: $(tail -1 "$out/eval-$n.log")"
    log "eval $n: $(autoui eval score --gold "$out/simdata/test" --pred "$out/eval-$n" | grep overall)"
  done
  for n in default-fp16v default-fp16; do
    log "$n vs default (cuda): $(python3 - "$out/eval-default" "$out/eval-$n" <<'EOF'
import json, sys
a, b = ({(p["episode_id"], p["step_id"]): p for p in map(json.loads, open(d + "/predictions.jsonl"))} for d in sys.argv[1:])
k = a.keys() & b.keys()
print(f"{sum(a[x]['raw'] == b[x]['raw'] for x in k)}/{len(k)} identical outputs, "
      f"{sum(a[x]['action_type'] == b[x]['action_type'] for x in k)}/{len(k)} same action type")
EOF
)"
  done
fi

if [[ " $steps " == *" batch "* ]]; then
  # screens/s per batch size (the cuda default batch: the smallest within 10% of the best), and the
  # bound column from the device probe (machine.probe = device in each JSON).
  for b in base-vitg base-vitg-fp16 base-vitg-fp16all; do
    [ -d "$kit/bundles/$b" ] || { log "no bundle $b in the kit"; continue; }
    for n in $batches; do
      autoui bench --provider cuda --model "$kit/bundles/$b" --no-verify --replay typical --batch "$n" \
        --runs 3 --warmup 1 --json > "$out/bench-$b-b$n.json" 2>"$out/bench-$b-b$n.log" || log "bench $b batch $n failed: $(tail -1 "$out/bench-$b-b$n.log")"
    done
  done
  python3 - "$out" <<'EOF' | tee -a "$out/summary.txt"
import glob, json, os, sys
print("bundle batch screens/s per-screen-ms vision-ms(batch) decode-step-ms vision/bound decode-step/bound")
for p in sorted(glob.glob(os.path.join(sys.argv[1], "bench-*-b*.json")), key=lambda p: (p.rsplit("-b", 1)[0], int(p.rsplit("-b", 1)[1][:-5]))):
    try:
        d = json.load(open(p))
    except ValueError:
        continue
    s, lim = d["stages"], {l["stage"]: l["ratio"] for l in d.get("limits") or []}
    sps = d["screens_per_s"]["median"]
    print(os.path.basename(p)[6:-5], d["batch"], sps, round(1000 / sps, 2), s["vision"]["median_ms"],
          s.get("decode_step", {}).get("median_ms"), lim.get("vision"), lim.get("decode_step"))
m = next((json.load(open(p)).get("machine") for p in glob.glob(os.path.join(sys.argv[1], "bench-*.json"))), None)
print("device probe:", m)
EOF
fi

if [[ " $steps " == *" peers "* ]]; then
  python3 -m scripts.peers.gpu --model "$kit/bundles/base-vitg" --autoui "$(command -v autoui)" \
    --batches "$(echo 1 8 32 | tr ' ' ,)" --out "$out/peers" 2>"$out/peers.log" | tee -a "$out/summary.txt"
fi
