#!/usr/bin/env bash
# Issue 21's GPU checks in one run on a GPU machine packed by ../shared/gpu/pack.sh: the CUDA tests,
# CUDA graphs against the device-resident decode, one action at batch 1, screens/s per batch size,
# one decoder call, ORT profiles, TF32 on and off, serve under load, PyTorch on the same card, and
# fp16 agreement. Steps run in that order (most needed
# first); a step starts only if its estimate fits in BUDGET_S, so a cut-short run still returns what it
# measured. Results: docs/cuda.md, "Measured on an H200".
#
# Here, in the repository root:
#   make build && python -m scripts.bench_models base-vitg   # graphs revision 5: with decoder_static, the CLS-only last vision layer
#   python -m scripts.upgrade_bundle bench-models/base-vitg   # (an older export: adds decoder_static)
#   python -m scripts.half --in bench-models/base-vitg --out bench-models/base-vitg-fp16all --roles all
#   python -m scripts.half --in bench-models/base-vitg --out bench-models/base-vitg-fp16
#   python -m scripts.half --in models/default --out build/default-fp16v
#   python -m scripts.half --in models/default --out build/default-fp16 --roles all
#   scripts/gpu_extra.sh [fp16] [parity] [ortpy] [host]   # what travels beside the checkout, in .gpuextra/:
#                                    # 30, 10, 8 and 4 MB; a call carries one beside the checkout (models/default left out)
#   python -m scripts.half --in bench-models/base-vitg --out bench-models/base-vitg-fp16mha --roles all --fp32-ops '' --fp16-cache
#   python -m scripts.attention --in bench-models/base-vitg --out /tmp/base-vitg-attn --decoder plain --vision fused
#   python -m scripts.half --in /tmp/base-vitg-attn --out bench-models/base-vitg-fp16attn --roles all --fp32-ops '' --fp16-cache
#   python -m scripts.cuda_bundle --in bench-models/base-vitg --out bench-models/base-vitg-fp16attnsn   # attention, skip_norm, half as above
#   python -m scripts.cuda_bundle --in bench-models/base-vitg --out bench-models/base-vitg-fp16attnsnqkv --merge-qkv
#   ../shared/gpu/pack.sh -s 56 bench-models/base-vitg bench-models/base-vitg-fp16all [bench-models/base-vitg-fp16mha ...]
# There, once every chunk of .gpu/ is in /tmp/k (a call carries at most 64 MiB with the checkout, so a
# big chunk goes in a call of its own), carrying .gpu/unpack.sh and .gpuextra:
#   STEPS="env tests graph action batch step" bash .gpu/unpack.sh bash scripts/gpu_check.sh
# STEPS picks steps (default: all), BATCHES the batch sizes of `batch` (BATCH_CASES its whole fp32 list,
# as "64 64v320 64g1 32c2 64d24" (case_flags), FP16_BATCH_CASES the fp16-everywhere one; GRAPH_BATCHES and FP16_GRAPH_BATCHES
# those of `graph`, FP16_GRAPH_DRAFTS its --max-draft values for fp16 (default 12); GRAPH_PROFILE=0 skips its profiles), SERVE_CFGS serve's configurations (graph plain c2 fp16 random by default; also
# fp16all, fp16all-c2, fp16all-graph, fp16all-graph64, fp16attn, fp16mha-a8, fp16all-cont, fp16all-cont-j1, fp16attn-cont,
# fp16attnsn, fp16attnsn-cont, fp16attnsn-graph64, fp16attnsn-mixed, fp16attnsn-cont-mixed, fp16attnsn-cont-mixed-ov), PEER_RUNNERS and PEER_BATCHES the peers'
# (scripts/peers/gpu.py's --runners, e.g. ours,torch_bf16, and --batches; PEER_EST their seconds),
# ATTN_CASES the attention A/B's cases (the attn step says how they read), E2E_CFGS e2e's (fp16attnsn-graph64
# fp16attnsn-graph64-read1 fp16attnsn-cont fp16attnsn-cont-ov; also fp16attnsn, fp32-graph64, -read8, -d20, -g1, -g2, -c2, -c3, -c2p, fp16attnsn-cont-ovp, fp16attnsn-b128, fp16attnsn-graph128, fp16attnsnqkv-graph64, fp16attnsnqkv-graph64-c2) and E2E_EPISODES its data's, EVALC_CFGS evalc's (batches graph64 cont
# cont-j1 cont-b128: eval run of models/default at 64 rows, the last on 128; also graph64-c2),
# PROVIDER=cpu dry-runs the plumbing on a machine without a GPU. $OUT (the run tool's, else /tmp/gpu-check) gets summary.txt,
# log.txt and results.tar.xz (every JSON and log), rewritten after each step.
set -u
out=${OUT:-/tmp/gpu-check}; mkdir -p "$out"
res=$(mktemp -d)
kit=${KIT:-/tmp/kit}
extra=${EXTRA:-.gpuextra}
steps=${STEPS:-env tests attn kprof graph action batch step profile tf32 e2e evalc serve host peers fp16}
batches=${BATCHES:-8 32 64}
budget=${BUDGET_S:-540}
prov=${PROVIDER:-cuda}   # cpu: a dry run of the plumbing on a machine without a GPU
t0=$SECONDS
log() { echo "[$((SECONDS - t0))s] $*" | tee -a "$out/summary.txt"; }
save() { tar -C "$res" -cJf "$out/results.tar.xz" . 2>/dev/null; }
want() { [[ " $steps " == *" $1 "* ]]; }
# fits SECONDS NAME: whether a step of about SECONDS still fits in the budget
fits() { (( SECONDS - t0 + $1 <= budget )) && return 0; log "skip $2: about $1 s, $((budget - SECONDS + t0)) s left"; return 1; }
exec 3>>"$out/log.txt"
run() { echo "[$((SECONDS - t0))s] \$ $*" >&3; "$@" 2>&3; }
# logmark, then since MARK PATTERN: the last line matching PATTERN that the log got after the mark (what the
# command run in between printed, not an earlier one's)
logmark() { wc -l < "$out/log.txt"; }
since() { tail -n +$(($1 + 1)) "$out/log.txt" | grep -h -E "$2" | tail -1; }
# eval_line MARK: what the eval run since MARK said of its pace (overall, after its first call) and text path
eval_line() { echo "$(since "$1" 'steps predicted') | $(since "$1" 'after the first') | $(since "$1" 'text path|continuous decode on')"; }
# capped SECONDS: a command's timeout, at most the budget left (at least 30 s)
capped() { local left=$((budget - SECONDS + t0)); (( left < $1 )) && set -- "$left"; echo $(( $1 < 30 ? 30 : $1 )); }

# bundle DST BASE DELTA: BASE's files with DELTA's over them, as symbolic links (ORT reads a graph's
# external data beside the link, which is a link too)
bundle() {
  mkdir -p "$1"
  for f in "$2"/* "$3"/*; do ln -sf "$(readlink -f "$f")" "$1/"; done
}
b32=$kit/bundles/base-vitg
b16all=$kit/bundles/base-vitg-fp16all
b16=/tmp/bundles/base-vitg-fp16
if [ -f "$extra/base-vitg-fp16.manifest.json" ] && [ -d "$b32" ] && [ -d "$b16all" ]; then
  mkdir -p /tmp/bundles/v16
  ln -sf "$(readlink -f "$b16all")"/vision_model.onnx* /tmp/bundles/v16/
  cp "$extra/base-vitg-fp16.manifest.json" /tmp/bundles/v16/manifest.json
  bundle "$b16" "$b32" /tmp/bundles/v16
fi
# models/default (19 MB) may be left out of a call to make room for extras: the steps that use it
# (tf32's agreement, fp16) then skip
if [ -d models/default ]; then
  [ -d "$extra/default-fp16v" ] && bundle /tmp/bundles/default-fp16v models/default "$extra/default-fp16v"
  [ -d "$extra/default-fp16" ] && bundle /tmp/bundles/default-fp16 models/default "$extra/default-fp16"
  [ -d "$extra/default-static" ] && bundle /tmp/bundles/default-static models/default "$extra/default-static"
fi

# bench_json FILE...: one line per bench report
bench_line() {
  python3 - "$@" <<'EOF'
import json, sys
for p in sys.argv[1:]:
    try:
        d = json.load(open(p))
    except (OSError, ValueError):
        print(p.rsplit("/", 1)[-1], "no report"); continue
    s = d["stages"]
    g = lambda k: s.get(k, {}).get("median_ms")
    sps = (d.get("screens_per_s") or {}).get("median")
    eps = (d.get("engine_screens_per_s") or {}).get("median")
    aps = (d.get("ahead_screens_per_s") or {}).get("median")
    print(f"{p.rsplit('/', 1)[-1][:-5]}: batch {d.get('batch', 'single')} total {d['total_median_ms']} ms"
          f" screens/s {sps} (engine alone {eps}, resized ahead {aps}) | decode_image {g('decode_image')} preprocess {g('preprocess')} vision {g('vision')}"
          f" encoder {g('encoder')} fusion {g('fusion')} first_step {g('first_step')} (cross {g('cross')}) decode_step {g('decode_step')}"
          f" later_steps {g('later_steps')} text_path {g('text_path')} | calls {d.get('decoder_calls')}"
          f" rss {d.get('peak_rss_mb')} MB" + (f" | cuda graphs {d['cuda_graphs']}" if d.get("cuda_graph") else "")
          + (f" | encoder calls/batch {d['encoder_calls_per_batch']}" if d.get("encoder_calls_per_batch") else "")
          + (f" | {d['concurrent_batches']} at once: {d.get('run_screens_per_s')} screens/s over the run" if d.get("concurrent_batches", 1) > 1 else "")
          + (f" | pipelined: {d.get('run_screens_per_s')} screens/s over the run" if d.get("pipelined") else ""))
    for l in d.get("limits") or []:
        print(f"    {l['stage']}: {l['measured_ms']} ms, bound {l['bound_ms']} ms ({l['basis']}), x{l['ratio']}")
    if d.get("machine"):
        print("    probe:", json.dumps(d["machine"]))
EOF
}

# same_outputs RUN_A RUN_B: how many of the steps both predicted got the same output
same_outputs() {
  python3 - "$@" <<'EOF'
import json, sys
try:
    a, b = ({(p["episode_id"], p["step_id"]): p for p in map(json.loads, open(d + "/predictions.jsonl"))} for d in sys.argv[1:])
except OSError as e:
    print(e); sys.exit()
k = a.keys() & b.keys()
print(f"{sum(a[x]['raw'] == b[x]['raw'] for x in k)}/{len(k)} identical outputs, "
      f"{sum(a[x]['action_type'] == b[x]['action_type'] for x in k)}/{len(k)} same action type")
EOF
}

# test_split: the synthetic test split, carried (gpu_extra.sh parity) or made here (a minute)
test_split() {
  if [ -d "$extra/simdata/test" ]; then echo "$extra/simdata/test"; return; fi
  [ -d /tmp/simdata/test ] || run autoui dataset --out /tmp/simdata --episodes 3600 --seed 0 --size 360x800 >/dev/null
  echo /tmp/simdata/test
}

# case_flags SPEC [LABEL]: a case's batch size N and flags, N[flags], into bs, flags (autoui bench's, --batch
# left to the caller), envs and prof; flags vV (--verify-positions), gG (--prompt-groups), cC
# (--concurrent-batches), dD (--max-draft), aA (--align-positions), mM (ORT's fp32 threshold for its
# memory-efficient attention kernel, ORT_MIN_SEQ_LEN_EFFICIENT_ATTENTION_FP32, 256 by default), G
# (--cuda-graph), rR (--capture-rows, with G), P (ORT's per-node profile too). A malformed SPEC is logged (as LABEL) and refused.
# ortpy: unpacks ORT's Python package where gpu_extra.sh ortpy sent it, with the kit's CUDA
# provider, into /tmp/ortpy (once; fails where it was not sent); the commands that use it say
# PYTHONPATH=$ortpy_path themselves, so no other step imports it
ortpy_path=/tmp/ortpy${PYTHONPATH:+:$PYTHONPATH}
ortpy() {
  [ -f "$extra/ortpy.tar.xz" ] || return 1
  [ -f /tmp/ortpy/.unpacked ] && return 0
  rm -rf /tmp/ortpy && mkdir -p /tmp/ortpy && tar -C /tmp/ortpy -xJf "$extra/ortpy.tar.xz" &&
    ln -sf "$kit"/ort/libonnxruntime_providers_*.so /tmp/ortpy/onnxruntime/capi/ && touch /tmp/ortpy/.unpacked
}

case_flags() {
  local rest o v label=${2:-$1}
  bs=${1%%[!0-9]*}; rest=${1#"$bs"}; flags=(); envs=(); prof=false
  [ -n "$bs" ] || { log "$label: no batch size"; return 1; }
  while [[ $rest =~ ^([A-Za-z])([0-9]*)(.*)$ ]]; do
    o=${BASH_REMATCH[1]} v=${BASH_REMATCH[2]} rest=${BASH_REMATCH[3]}
    case $o$v in G|P|L) ;; [GPL]*|[vgcdamr]) log "$label: flag $o$v?"; return 1 ;; esac   # G, P, L bare; the rest numbered
    case $o in v) flags+=(--verify-positions "$v") ;; g) flags+=(--prompt-groups "$v") ;; r) flags+=(--capture-rows "$v") ;;
      c) flags+=(--concurrent-batches "$v") ;; d) flags+=(--max-draft "$v") ;; a) flags+=(--align-positions "$v") ;;
      m) envs+=(ORT_MIN_SEQ_LEN_EFFICIENT_ATTENTION_FP32="$v") ;; G) flags+=(--cuda-graph) ;; P) prof=true ;;
      L) flags+=(--pipeline) ;;
      *) log "$label: flag $o?"; return 1 ;; esac
  done
  [ -z "$rest" ] || { log "$label: $rest?"; return 1; }
  [[ " ${flags[*]} " != *" --capture-rows "* || " ${flags[*]} " == *" --cuda-graph "* ]] ||
    { log "$label: r (--capture-rows) needs G (--cuda-graph)"; return 1; }
}

if want env; then
  log "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader)"
  log "bundles: $(ls "$kit/bundles" /tmp/bundles 2>/dev/null | tr '\n' ' ')"
fi

if want tests && fits 60 tests; then   # 31 s on the third loan
  # golden tokens on the device path, batches 1/3/8, drafts, truncation, argmax on and off, constrained;
  # the tiny bundle in fp16 against the CPU's run of it (TestCUDAFP16) where gpu_extra.sh fp16 sent it
  [ -d "$extra/tiny-fp16" ] && bundle /tmp/bundles/tiny-fp16 "$PWD/models/testdata/tiny" "$extra/tiny-fp16" &&
    export AUTOUI_FP16_BUNDLE=/tmp/bundles/tiny-fp16
  (cd engine && run timeout 240 engine.test -test.run 'CUDA' -test.v > "$res/tests.txt")
  log "tests (rc $?): $(grep -E '^(--- |ok|FAIL|PASS)' "$res/tests.txt" | tr '\n' ' ')"
  # the same on the attention variant of the tiny bundle with its norms fused and its Q/K/V projections
  # merged (scripts.attention, scripts.skip_norm, scripts.merge_qkv: the golden tokens through the
  # decoder's plain attention, the vision tower's fused one, SkipSimplifiedLayerNormalization and the
  # merged projections' Split on the device, captured too), its fp16 one (fp16 cache too) against the
  # CPU's run of it
  if [ -d "$extra/tiny-attn" ] && [ -d "$extra/tiny-fp16attn" ] && fits 60 "tests attn"; then
    bundle /tmp/bundles/tiny-attn "$PWD/models/testdata/tiny" "$extra/tiny-attn"
    bundle /tmp/bundles/tiny-fp16attn "$PWD/models/testdata/tiny" "$extra/tiny-fp16attn"
    (cd engine && AUTOUI_TEST_TINY=/tmp/bundles/tiny-attn AUTOUI_FP16_BUNDLE=/tmp/bundles/tiny-fp16attn \
      run timeout 240 engine.test -test.run 'CUDA' -test.v > "$res/tests-attn.txt")
    log "tests, attention variant (rc $?): $(grep -E '^(--- |ok|FAIL|PASS)' "$res/tests-attn.txt" | tr '\n' ' ')"
  fi
  save
fi

if want attn; then
  # The decoder's attention, A/B (docs/cuda.md, "Attention"): which kernel a batch-64 call and a captured
  # batch-1 call get. A case is BUNDLE:N[flags]: BUNDLE base-vitg-BUNDLE in the kit (fp32: base-vitg; fp16all: fused
  # MultiHeadAttention kept fp32, float32 cache; fp16mha: fused, fp16, float16 cache; fp16attn: the
  # decoder's MatMul/Softmax/MatMul and the vision tower's fused (flash) attention, fp16, float16 cache;
  # fp16attnsn: that with each residual Add and RMS norm as one SkipSimplifiedLayerNormalization), N the
  # batch, flags as case_flags reads them (aA: ORT's memory-efficient kernel needs a query length that is a
  # multiple of 8 in fp16, 16 in fp32; mM: and in fp32 that many keys; Gr64: batches of 64 captured; c2: two
  # batches at once, one's vision tower beside the other's decoding; L: pipelined, the next batch's screens
  # decoded and resized while the engine predicts, as eval run reads ahead)
  attn_cases="fp16all:64 fp16attn:64 fp16attnsn:64 fp16mha:64a8 fp16all:64a16m1 fp16all:1G fp16attn:1G fp16attnsn:1G fp16mha:1Ga8 fp16all:64Gr64 fp16attn:64Gr64 fp16attnsn:64Gr64 fp16attnsn:64c2 fp16attn:64P fp16mha:64"
  for c in ${ATTN_CASES:-$attn_cases}; do
    b=$kit/bundles/base-vitg-${c%%:*}
    [ "${c%%:*}" = fp32 ] && b=$kit/bundles/base-vitg   # the export itself
    [ -d "$b" ] || { log "attn $c: no bundle $(basename "$b")"; continue; }
    case_flags "${c#*:}" "attn $c" || continue
    if [ "$bs" = 1 ]; then runs=(--runs 5 --warmup 2); else runs=(--runs 3 --warmup 1); flags+=(--batch "$bs"); fi
    name=attn-${c/:/-}
    if $prof; then
      rm -rf "/tmp/prof-$name"; mkdir -p "/tmp/prof-$name"; runs=(--runs 1 --warmup 1 --ort-profile "/tmp/prof-$name/p")
    fi
    fits $((10 + bs / 8)) "attn $c" || break   # a bench at 64 took ~5 s on the third loan
    run env "${envs[@]}" timeout 150 autoui bench --provider "$prov" --model "$b" --no-verify --replay typical "${flags[@]}" \
      "${runs[@]}" --probe=false --json > "$res/$name.json"
    log "attn $c (rc $?): $(bench_line "$res/$name.json")"
    if $prof; then
      python3 -m scripts.ort_profile --json /tmp/prof-$name/*.json > "$res/$name-profile.json" 2>&3
      python3 -m scripts.ort_profile /tmp/prof-$name/*.json 2>&3 | tee -a "$out/summary.txt"
    fi
  done
  # the cases side by side in their order, one line each (medians, ms; a P case ran once, profiled)
  python3 - "$res" ${ATTN_CASES:-$attn_cases} <<'EOF' | tee -a "$out/summary.txt"
import json, sys
res, cases = sys.argv[1], sys.argv[2:]
print(f"{'case':<22} {'screens/s':>9} {'ahead':>7} {'vision':>7} {'first':>7} {'cross':>7} {'call':>6} {'calls':>5} {'total':>8}")
for c in cases:
    name = c.replace(":", "-", 1)
    try:
        d = json.load(open(f"{res}/attn-{name}.json"))
        st = lambda k: (d["stages"].get(k) or {}).get("median_ms") or 0
        sps = lambda k: (d.get(k) or {}).get("median") or 0
        print(f"{name + (' (profiled)' if c.endswith('P') else ''):<22} {sps('screens_per_s'):>9.1f} "
              f"{sps('ahead_screens_per_s'):>7.1f} {st('vision'):>7.1f} {st('first_step'):>7.1f} {st('cross'):>7.1f} "
              f"{st('decode_step'):>6.2f} {d.get('decoder_calls') or 0:>5} {d['total_median_ms']:>8.1f}")
    except (OSError, ValueError, KeyError, TypeError):
        print(f"{name:<22} no report")
EOF
  save
fi

if want kprof; then
  # the GPU's own kernel times (Nsight Systems, where the machine has it): under CUDA ORT's profile
  # (--ort-profile) times the host's launch of each node, not its kernel, so whether a batch of 64 is
  # the GPU's work or the host's, and which kernels take the vision tower's and the decoder calls'
  # time, need the device's trace (scripts.kernel_profile: per batch, families, top kernels)
  nsys=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
  if [ -z "$nsys" ] && ortpy; then
    # no nsys (the fourth loan's machine): one graph at a time, ORT from Python under torch.profiler,
    # whose CUPTI trace holds ORT's kernels (scripts.graph_kernels); a case is BUNDLE:ROLE[:BATCH]
    for c in ${KGRAPH_CASES:-fp16attnsn:vision fp16all:vision fp16attnsn:decoder_static fp16attnsn:decoder fp16attnsn:encoder}; do
      IFS=: read -r bn role bs <<< "$c"
      b=$kit/bundles/base-vitg-$bn; [ "$bn" = fp32 ] && b=$kit/bundles/base-vitg
      [ -d "$b" ] || { log "kprof $c: no bundle $(basename "$b")"; continue; }
      fits 60 "kprof $c" || break
      kg=$res/kgraph-${c//:/-}
      run env PYTHONPATH="$ortpy_path" timeout 60 python3 -m scripts.graph_kernels "$b" "$role" --provider "$prov" \
        --dim "batch_size=${bs:-64}" --json > "$kg.json"
      # its line, or where it failed its own one-line error (in the log, where run sends stderr)
      log "kprof $c (rc $?): $(python3 -c 'import json, sys
from scripts.graph_kernels import line
try:
    print(line(sys.argv[2], json.load(open(sys.argv[1]))))
except ValueError:
    errs = [l for l in open(sys.argv[3]) if l.startswith("graph_kernels:")]
    print(errs[-1].strip() if errs else "no report")' "$kg.json" "$bn $role at ${bs:-64}" "$out/log.txt" 2>&1 | tail -1)"
    done
  elif [ -z "$nsys" ]; then
    log "kprof: no nsys on this machine and no ORT Python package (gpu_extra.sh ortpy): skipped"
  else
    for c in ${KPROF_CASES:-fp16attnsn:64 fp16all:64}; do
      b=$kit/bundles/base-vitg-${c%%:*}; bs=${c#*:}; name=kprof-${c/:/-}
      [ -d "$b" ] || { log "kprof $c: no bundle $(basename "$b")"; continue; }
      fits 40 "kprof $c" || break
      rm -f "/tmp/$name"*
      run timeout 180 "$nsys" profile --trace=cuda --cuda-graph-trace=node --sample=none --cpuctxsw=none \
        --force-overwrite=true -o "/tmp/$name" autoui bench --provider "$prov" --model "$b" --no-verify --replay typical \
        --batch "$bs" --runs 1 --warmup 1 --probe=false --json > "$res/$name.json"
      rc=$?
      # the report's name since nsys 2023 (gpukernsum before)
      run "$nsys" stats --report cuda_gpu_kern_sum --format csv --output "/tmp/$name" "/tmp/$name.nsys-rep" >/dev/null ||
        run "$nsys" stats --report gpukernsum --format csv --output "/tmp/$name" "/tmp/$name.nsys-rep" >/dev/null
      csv=$(ls /tmp/"$name"_*.csv 2>/dev/null | head -1)
      [ -n "$csv" ] && cp "$csv" "$res/"
      log "kprof $c (rc $rc): $(python3 -m scripts.kernel_profile "$res/$name.json" "${csv:-/dev/null}" 2>&1)"
    done
  fi
  save
fi

if want graph && [ -d "$b32" ]; then
  # CUDA graphs (--cuda-graph: the static decoder, each call shape captured once, then replayed) against
  # the device-resident decode, back to back on one machine: one action at batch 1, then batches of 8
  # and 16, captured at their size (--capture-rows; the default captures up to 8 rows); the first
  # passes (warm-up) capture. Then its profile: what a replayed call leaves to the host.
  graph_ok=true   # a refused capture fails every --cuda-graph run alike: one is enough to see why
  for k in ${GRAPH_BATCHES:-1 8 16}; do
    for g in false true; do
      [ "$g" = true ] && ! $graph_ok && continue
      fits $((30 + k / 2)) "graph b$k cuda-graph=$g" || break 2
      flags=(--runs 5 --warmup 2); [ "$k" != 1 ] && flags=(--batch "$k" --runs 3 --warmup 1)
      [ "$g" = true ] && flags+=(--capture-rows "$k")
      run timeout 150 autoui bench --provider "$prov" --model "$b32" --no-verify --replay typical "${flags[@]}" \
        --probe=false --cuda-graph="$g" --json > "$res/graph-$g-b$k.json"
      rc=$?
      log "cuda-graph=$g (rc $rc) $(bench_line "$res/graph-$g-b$k.json")"
      if [ "$g" = true ] && [ $rc != 0 ]; then
        graph_ok=false; log "  --cuda-graph failed: $(tail -n 3 "$out/log.txt" | tr '\n' ' ')"
      fi
    done
  done
  # fp16 everywhere (attention kept fp32), its static decoder converted with it (the fastest bundle at
  # batch 64 on the second loan): one action, then batch 64 (captured at 64 rows: with the cache written
  # in place, does capture now pay there?)
  if [ -d "$b16all" ] && $graph_ok; then
    for k in ${FP16_GRAPH_BATCHES:-1 64}; do
      for g in false true; do
        for md in ${FP16_GRAPH_DRAFTS:-12}; do   # --max-draft: tokens a row drafts per call
          fits $((15 + k / 4)) "graph fp16all b$k cuda-graph=$g max-draft=$md" || break 3
          flags=(--runs 5 --warmup 2); [ "$k" != 1 ] && flags=(--batch "$k" --runs 3 --warmup 1)
          [ "$g" = true ] && flags+=(--capture-rows "$k")
          run timeout 150 autoui bench --provider "$prov" --model "$b16all" --no-verify --replay typical "${flags[@]}" \
            --probe=false --cuda-graph="$g" --max-draft "$md" --json > "$res/graph-fp16all-$g-b$k-d$md.json"
          log "fp16all cuda-graph=$g max-draft=$md $(bench_line "$res/graph-fp16all-$g-b$k-d$md.json")"
        done
      done
    done
  fi
  if $graph_ok && [ "${GRAPH_PROFILE:-1}" = 1 ] && fits 40 "graph profile"; then
    rm -rf /tmp/prof-graph; mkdir -p /tmp/prof-graph
    run timeout 120 autoui bench --provider "$prov" --model "$b32" --no-verify --replay typical --runs 1 --warmup 2 \
      --probe=false --cuda-graph --ort-profile /tmp/prof-graph/p --json > "$res/profile-graph.json"
    log "profile cuda-graph:"; python3 -m scripts.ort_profile /tmp/prof-graph/*.json 2>&3 | tee -a "$out/summary.txt"
  fi
  # a batch-64 decoder call is the GPU's own work (graphs do not shorten it): where it goes, per node,
  # on the fastest bundle, uncaptured (a replayed call shows no nodes)
  if [ -d "$b16all" ] && [ "${GRAPH_PROFILE:-1}" = 1 ] && fits 50 "profile fp16all b64"; then
    rm -rf /tmp/prof-b64; mkdir -p /tmp/prof-b64
    run timeout 150 autoui bench --provider "$prov" --model "$b16all" --no-verify --replay typical --batch 64 --runs 1 \
      --warmup 1 --probe=false --ort-profile /tmp/prof-b64/p --json > "$res/profile-fp16all-b64.json"
    python3 -m scripts.ort_profile --json /tmp/prof-b64/*.json > "$res/profile-fp16all-b64-summary.json" 2>&3
    log "profile fp16all b64:"; python3 -m scripts.ort_profile /tmp/prof-b64/*.json 2>&3 | tee -a "$out/summary.txt"
  fi
  save
fi

if want action; then
  # one action, batch 1 (Predict, the agent's path), a typical tap replayed
  for b in "$b32" "$b16" "$b16all"; do
    [ -d "$b" ] || continue
    n=$(basename "$b")
    fits 40 "action $n" || break
    probe=false; [ "$b" = "$b32" ] && probe=true   # the device's bounds once
    run timeout 150 autoui bench --provider "$prov" --model "$b" --no-verify --replay typical --runs 5 --warmup 2 \
      --probe=$probe --json > "$res/action-$n.json"
    log "$(bench_line "$res/action-$n.json")"
  done
  save
fi

if want batch; then
  # screens/s per batch size (batch 1 is the action step's; a case is N[flags] as case_flags reads them,
  # e.g. 32v13: verify 13 positions a call, 64g1: one prompt group, 32c2: two batches at once, 64d24):
  # the cuda default batch is the smallest
  # within 10% of the best. At 32, also the CPU's verify width (one call's worth of drafts per batch,
  # --verify-positions 13) against cuda's default (every row drafts in full); at 64, every prompt
  # padded to the batch's longest (--prompt-groups 1) against prompts encoded in groups of similar
  # length (the default); two batches of 32 in the engine at once (--concurrent-batches 2: screens/s
  # over the run) against one of 64.
  for b in "$b32" "$b16" "$b16all"; do
    [ -d "$b" ] || continue
    n=$(basename "$b")
    cases=${BATCH_CASES:-$batches 32v13 64g1 32c2}   # fp32
    [ "$b" = "$b16" ] && cases=$batches
    [ "$b" = "$b16all" ] && cases=${FP16_BATCH_CASES:-32}
    for k in $cases; do
      case_flags "$k" "batch $n $k" || continue
      flags+=(--batch "$bs")
      fits $((15 + bs / 2)) "batch $n $k" || break 2
      run env "${envs[@]}" timeout 150 autoui bench --provider "$prov" --model "$b" --no-verify --replay typical "${flags[@]}" \
        --runs 3 --warmup 1 --probe=false --json > "$res/batch-$n-b$k.json"
      log "$(bench_line "$res/batch-$n-b$k.json")"
    done
    save
  done
fi

if want step && fits 60 step; then
  # one decoder call, host cache vs device-resident vs static (captured), same card, same process (k=1:
  # greedy; k=4: a verify)
  (cd engine && AUTOUI_BENCH_PROVIDER=$prov AUTOUI_BENCH_MODEL=$b32 run timeout 150 engine.test -test.run '^$' \
    -test.bench 'DecoderStep/(host|device|static)' -test.benchtime 200x -test.count 2 -test.benchmem > "$res/step.txt")
  log "step: $(grep -E '^Benchmark' "$res/step.txt" | awk '{printf "%s %.2f ms; ", $1, $3/1e6}')"
  save
fi

if want profile && fits 60 profile; then
  # ORT's per-node profile of one action per case (warm-up pass, then one measured): how many nodes a
  # decoder call runs and how long the host takes per node; where nodes fall back to the CPU
  for b in "$b32" "$b16all"; do
    [ -d "$b" ] || continue
    n=$(basename "$b")
    fits 30 "profile $n" || break
    mkdir -p "/tmp/prof-$n"
    run timeout 120 autoui bench --provider "$prov" --model "$b" --no-verify --replay typical --runs 1 --warmup 1 \
      --probe=false --ort-profile "/tmp/prof-$n/p" --json > "$res/profile-$n.json"
    python3 -m scripts.ort_profile --json /tmp/prof-$n/*.json > "$res/profile-$n-summary.json" 2>&3
    log "profile $n:"; python3 -m scripts.ort_profile /tmp/prof-$n/*.json 2>&3 | tee -a "$out/summary.txt"
  done
  save
fi

if want tf32 && fits 90 tf32; then
  # TF32 (ORT's cuda default) against full float32: speed at batch 1 and 64 on the same machine, and
  # agreement with the CPU's predictions of models/default on the test split
  for flag in true false; do
    fits 30 "tf32=$flag" || break
    run timeout 100 autoui bench --provider "$prov" --model "$b32" --no-verify --replay typical --runs 5 --warmup 2 \
      --probe=false --tf32="$flag" --json > "$res/tf32-$flag-b1.json"
    log "tf32=$flag $(bench_line "$res/tf32-$flag-b1.json")"
    run timeout 100 autoui bench --provider "$prov" --model "$b32" --no-verify --replay typical --batch 64 --runs 3 \
      --warmup 1 --probe=false --tf32="$flag" --json > "$res/tf32-$flag-b64.json"
    log "tf32=$flag $(bench_line "$res/tf32-$flag-b64.json")"
  done
  if [ -d models/default ]; then   # left out of this call: no agreement or eval batch check
    split=$(test_split)
    for flag in true false; do
      fits 20 "eval tf32=$flag" || break
      run timeout 100 autoui eval run --provider "$prov" --model models/default --data "$split" --tf32="$flag" \
        --out "$res/eval-tf32-$flag" >/dev/null
      [ -f "$extra/cpu-default.jsonl" ] && mkdir -p /tmp/cpu-ref && cp "$extra/cpu-default.jsonl" /tmp/cpu-ref/predictions.jsonl &&
        log "tf32=$flag vs the CPU: $(same_outputs /tmp/cpu-ref "$res/eval-tf32-$flag")"
    done
    # eval's own default batch: 8 (above, tf32=true) against 64
    m=$(logmark)
    fits 20 "eval batch 64" && run timeout 100 autoui eval run --provider "$prov" --model models/default --data "$split" \
      --batch 64 --out "$res/eval-b64" > /dev/null && log "eval batch 64: $(eval_line "$m")"
  fi
  save
fi

if want e2e && fits 60 e2e; then
  # batched eval end to end (issue 21's >= 300 screens/s): eval run of a base-vitg bundle over full-size
  # (1080x2400) synthetic AITW records, every step replaying the typical action (--replay: random weights
  # decode as a trained model would), so that reading, resizing ahead on the host's cores and the engine
  # run as one run does; steps/s from eval's own last progress line (model load excluded, the first
  # batches' captures included) and from its pace after the first 64 predictions (their warm-up excluded)
  d=/tmp/e2e-data-${E2E_EPISODES:-400}
  [ -f $d/dataset.json ] || run autoui dataset --out $d --episodes "${E2E_EPISODES:-400}" --seed 1 --size 1080x2400 >/dev/null
  log "e2e: $(python3 -c 'import json, sys; print(sum(json.load(open(sys.argv[1]))["steps"].values()))' $d/dataset.json 2>&1) full-size steps"
  for cfg in ${E2E_CFGS:-fp16attnsn-graph64 fp16attnsn-graph64-read1 fp16attnsn-cont fp16attnsn-cont-ov}; do
    case $cfg in
      fp16attnsn-graph64) bd=$kit/bundles/base-vitg-fp16attnsn fl=(--cuda-graph --capture-rows 64) ;;
      # one record file at a time (cuda's default reads 4 at once): what the reading alone allows
      fp16attnsn-graph64-read1) bd=$kit/bundles/base-vitg-fp16attnsn fl=(--cuda-graph --capture-rows 64 --read-files 1) ;;
      # eight record files at once: whether the 16-core host's reading holds the engine back
      fp16attnsn-graph64-read8) bd=$kit/bundles/base-vitg-fp16attnsn fl=(--cuda-graph --capture-rows 64 --read-files 8) ;;
      # 128 screens a call, uncaptured (past --capture-rows 64) and captured: whether a larger call pays per screen;
      # 1664 positions a call keep a row's 13 (cuda's default 832 is shared by the rows)
      fp16attnsn-b128) bd=$kit/bundles/base-vitg-fp16attnsn fl=(--cuda-graph --capture-rows 64 --batch 128 --verify-positions 1664) ;;
      fp16attnsn-graph128) bd=$kit/bundles/base-vitg-fp16attnsn fl=(--cuda-graph --capture-rows 128 --batch 128 --verify-positions 1664) ;;
      # rows drafting up to 20 tokens a call (the default 12): fewer calls where a call's cost barely grows with its width
      fp16attnsn-graph64-d20) bd=$kit/bundles/base-vitg-fp16attnsn fl=(--cuda-graph --capture-rows 64 --max-draft 20) ;;
      # a batch's prompts encoded in one call padded to the longest, or in at most two groups (the default: the most)
      fp16attnsn-graph64-g1) bd=$kit/bundles/base-vitg-fp16attnsn fl=(--cuda-graph --capture-rows 64 --prompt-groups 1) ;;
      fp16attnsn-graph64-g2) bd=$kit/bundles/base-vitg-fp16attnsn fl=(--cuda-graph --capture-rows 64 --prompt-groups 2) ;;
      # two (three) calls in flight: one batch's screens and prompts beside another's captured decoder calls
      fp16attnsn-graph64-c2) bd=$kit/bundles/base-vitg-fp16attnsn fl=(--cuda-graph --capture-rows 64 --concurrent-batches 2) ;;
      fp16attnsn-graph64-c3) bd=$kit/bundles/base-vitg-fp16attnsn fl=(--cuda-graph --capture-rows 64 --concurrent-batches 3) ;;
      # and the decoder's kernels on a stream of the highest priority, ahead of the tower's beside them
      fp16attnsn-graph64-c2p) bd=$kit/bundles/base-vitg-fp16attnsn fl=(--cuda-graph --capture-rows 64 --concurrent-batches 2 --decode-priority) ;;
      fp16attnsn-cont-ovp) bd=$kit/bundles/base-vitg-fp16attnsn fl=(--cuda-graph --continuous --overlap-joins --decode-priority) ;;
      # each self-attention's Q, K and V projected in one MatMul (scripts.merge_qkv): 36 kernels fewer a decoder call
      fp16attnsnqkv-graph64) bd=$kit/bundles/base-vitg-fp16attnsnqkv fl=(--cuda-graph --capture-rows 64) ;;
      fp16attnsnqkv-graph64-c2) bd=$kit/bundles/base-vitg-fp16attnsnqkv fl=(--cuda-graph --capture-rows 64 --concurrent-batches 2) ;;
      fp16attnsn) bd=$kit/bundles/base-vitg-fp16attnsn fl=() ;;
      fp16attnsn-cont) bd=$kit/bundles/base-vitg-fp16attnsn fl=(--cuda-graph --continuous) ;;
      # joins prefilled beside the captured calls (--overlap-joins) instead of pausing them
      fp16attnsn-cont-ov) bd=$kit/bundles/base-vitg-fp16attnsn fl=(--cuda-graph --continuous --overlap-joins) ;;
      fp32-graph64) bd=$b32 fl=(--cuda-graph --capture-rows 64) ;;
      *) log "e2e: no configuration $cfg"; continue ;; esac
    [ -d "$bd" ] || { log "e2e $cfg: no bundle $bd"; continue; }
    fits 60 "e2e $cfg" || break
    m=$(logmark)
    # SIGQUIT: a run that hangs leaves its goroutines' stacks in the log (-read8 outlived its SIGTERM on the sixth loan)
    run timeout -s QUIT -k 15 "$(capped 200)" autoui eval run --provider "$prov" --model "$bd" --no-verify --data $d --batch 64 "${fl[@]}" \
      --replay typical --no-feature-cache --out "$res/e2e-$cfg" >/dev/null
    rc=$?
    log "e2e $cfg (rc $rc): $(eval_line "$m")"
    save
  done
fi

if want evalc && [ -d /tmp/bundles/default-static ]; then
  # eval run of models/default with its static decoder (gpu_extra.sh parity's default-static; trained on the
  # synthetic data: answers of many lengths, unlike the bench's replay) on the synthetic test split at batch 64: batches (the default), batches captured
  # (--cuda-graph --capture-rows 64), and one continuous decode on 64 rows (--continuous, steps joining
  # 16 at a time, the cuda default, or one at a time) and on 128; steps/s from eval's own last progress
  # line, predictions against the CPU's
  split=$(test_split)
  [ -f "$extra/cpu-default.jsonl" ] && mkdir -p /tmp/cpu-ref && cp "$extra/cpu-default.jsonl" /tmp/cpu-ref/predictions.jsonl
  for cfg in ${EVALC_CFGS:-batches graph64 cont cont-j1 cont-b128}; do
    case $cfg in batches) fl=() ;; graph64) fl=(--cuda-graph --capture-rows 64) ;; cont) fl=(--cuda-graph --continuous) ;;
      cont-j1) fl=(--cuda-graph --continuous --join-min 1) ;; cont-b128) fl=(--cuda-graph --continuous --batch 128) ;;
      graph64-c2) fl=(--cuda-graph --capture-rows 64 --concurrent-batches 2) ;;
      *) log "evalc: no configuration $cfg"; continue ;; esac
    fits 40 "eval $cfg" || break
    m=$(logmark)
    run timeout 150 autoui eval run --provider "$prov" --model /tmp/bundles/default-static --data "$split" --batch 64 "${fl[@]}" \
      --no-feature-cache --out "$res/evalc-$cfg" >/dev/null
    rc=$?
    log "eval $cfg (rc $rc): $(eval_line "$m")"
    [ -f /tmp/cpu-ref/predictions.jsonl ] && log "  against the CPU: $(same_outputs /tmp/cpu-ref "$res/evalc-$cfg")"
  done
  save
fi

if want serve && fits 40 serve; then
  # serve under load: 64 clients, batches of up to 64. fp32 decoding the typical action (--replay: what a
  # trained model's requests cost) with CUDA graphs and without, then two batches of up to 32 in the
  # engine at once (--concurrent-batches 2: one's kernel launching beside the other's kernels), fp16
  # vision, then fp32 as the random weights decode (127 tokens, no draft accepted: the issue's first table)
  screen=models/testdata/screens/home_1080x2400.png
  [ -f "$screen" ] || screen=$extra/home_1080x2400.png   # a call that left models/testdata out (gpu_extra.sh parity)
  for name in ${SERVE_CFGS:-graph plain c2 fp16 random}; do
    case $name in
      graph) cfg="$b32:typical:graph:" ;; plain) cfg="$b32:typical::" ;; c2) cfg="$b32:typical::2" ;;
      fp16) cfg="$b16:typical::" ;; random) cfg="$b32:::" ;;
      fp16all) cfg="$b16all:typical::" ;; fp16all-c2) cfg="$b16all:typical::2" ;;
      fp16all-graph) cfg="$b16all:typical:graph:" ;;
      # batches captured at up to 64 rows (each padded to a power of two) against the device path's
      fp16all-graph64) cfg="$b16all:typical:graph::--capture-rows 64" ;;
      fp16attn) cfg="$kit/bundles/base-vitg-fp16attn:typical::" ;;
      fp16mha-a8) cfg="$kit/bundles/base-vitg-fp16mha:typical:::--align-positions 8" ;;
      # continuous batching (--continuous: requests join the captured decode between calls), joins
      # of at least 16 (the cuda default) and of any size
      fp16all-cont) cfg="$b16all:typical:graph::--continuous" ;;
      fp16all-cont-j1) cfg="$b16all:typical:graph::--continuous --join-min 1" ;;
      fp16attn-cont) cfg="$kit/bundles/base-vitg-fp16attn:typical:graph::--continuous" ;;
      fp16attnsn) cfg="$kit/bundles/base-vitg-fp16attnsn:typical::" ;;
      fp16attnsn-cont) cfg="$kit/bundles/base-vitg-fp16attnsn:typical:graph::--continuous" ;;
      fp16attnsn-graph64) cfg="$kit/bundles/base-vitg-fp16attnsn:typical:graph::--capture-rows 64" ;;
      # answers of several lengths in turn (--replay mixed), batches against the continuous decode
      fp16attnsn-mixed) cfg="$kit/bundles/base-vitg-fp16attnsn:mixed::" ;;
      fp16attnsn-cont-mixed) cfg="$kit/bundles/base-vitg-fp16attnsn:mixed:graph::--continuous" ;;
      fp16attnsn-cont-mixed-ov) cfg="$kit/bundles/base-vitg-fp16attnsn:mixed:graph::--continuous --overlap-joins" ;;
      *) log "serve: no configuration $name"; continue ;;
    esac
    IFS=: read -r b replay graph conc more <<< "$cfg"
    [ -d "$b" ] || continue
    n=$(basename "$b")${replay:+-replay}${replay/typical/}${graph:+-graph}${conc:+-c$conc}${more:+-$name}   # -replaymixed
    fits 40 "serve $n" || break
    autoui serve --provider "$prov" --model "$b" --no-verify --addr 127.0.0.1:8093 --max-batch $((64 / ${conc:-1})) \
      --concurrent-batches "${conc:-1}" --queue 256 ${replay:+--replay "$replay"} ${graph:+--cuda-graph} $more 2>"$res/serve-$n.log" &
    pid=$!
    python3 -c 'import time, urllib.request
for _ in range(240):
    try:
        urllib.request.urlopen("http://127.0.0.1:8093/readyz", timeout=1); break
    except OSError:
        time.sleep(0.5)'
    run timeout 100 autoui bench serve --server http://127.0.0.1:8093 --concurrency 1,64 --duration 10s \
      --warmup 3s --screen "$screen" --json > "$res/serve-$n.json"
    # what the server holds after 64 clients: device memory (ORT's CUDA provider keeps cuBLAS/cuDNN
    # handles per OS thread that ran a session, and Go moves calls between threads), its RSS and threads
    mem=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader 2>/dev/null | awk -F', ' -v p="$pid" '$1 == p {print $2}')
    log "serve $n holds: device ${mem:-?}, RSS $(awk '/VmRSS/ {print $2 / 1024 " MB"}' /proc/$pid/status 2>/dev/null), $(ls /proc/$pid/task 2>/dev/null | wc -l) threads"
    kill "$pid"; wait "$pid" 2>/dev/null
    grep -q 'continuous decode:' "$res/serve-$n.log" && log "serve $n: $(grep -h 'continuous decode:' "$res/serve-$n.log" | tail -1)"
    log "serve $n: $(python3 -c '
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    print("no report"); sys.exit()
print(json.dumps(d.get("levels"))[:1500])' "$res/serve-$n.json")"
  done
  save
fi

if want host && [ -f "$extra/aitw_runner.test.xz" ] && fits 40 host; then
  # what eval run can feed an engine from this host's cores: full-size AITW steps read, hashed and
  # resized by a predictor that does only that (CPU only; docs/eval.md, reading ahead)
  log "host: eval run's host ceiling (BenchmarkRunHost, $(nproc) cores)"
  xz -dc "$extra/aitw_runner.test.xz" > /tmp/aitw_runner.test && chmod +x /tmp/aitw_runner.test
  run /tmp/aitw_runner.test -test.run '^$' -test.bench RunHost -test.benchtime 3x > "$res/host.txt"
  log "  $(grep -h 'steps/s' "$res/host.txt" | tr -s ' ')"
  save
fi

if want peers && fits "${PEER_EST:-150}" peers; then
  # PyTorch eager bf16 on the same card, same cases and token count (fp32 eager: DESIGN.md 6b, 2 s per
  # action), and ORT from Python with IO binding where gpu_extra.sh ortpy sent its package
  runners=${PEER_RUNNERS:-torch_bf16}
  [ -z "${PEER_RUNNERS:-}" ] && ortpy && runners=ort_iobind,$runners
  PYTHONUNBUFFERED=1 run env PYTHONPATH="$ortpy_path" timeout 240 python3 -m scripts.peers.gpu --model "$b32" --autoui "$(command -v autoui)" \
    --runners "$runners" --batches "${PEER_BATCHES:-1,8,32}" --runs 2 --warmup 1 --out "$res/peers" > "$res/peers.md"
  log "peers (rc $?): $(grep -E '^\|' "$res/peers.md" | tail -n +3 | tr '\n' ' ')"
  save
fi

if want fp16 && [ -d /tmp/bundles/default-fp16 ] && fits 120 fp16; then
  # fp16 agreement on the trained default model: the synthetic test split on the GPU in fp32, fp16
  # vision and fp16 everywhere, step by step
  split=$(test_split)
  for m in models/default /tmp/bundles/default-fp16v /tmp/bundles/default-fp16; do
    n=$(basename "$m")
    run timeout 100 autoui eval run --provider "$prov" --model "$m" --data "$split" --out "$res/eval-$n" >/dev/null
    log "eval $n: $(autoui eval score --gold "$split" --pred "$res/eval-$n" 2>&1 | grep -i overall)"
  done
  for n in default-fp16v default-fp16; do
    log "$n vs default ($prov): $(same_outputs "$res/eval-default" "$res/eval-$n")"
  done
  save
fi
log "done"
save
