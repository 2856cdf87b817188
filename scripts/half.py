"""Make the fp16 (half precision) variant of an autoui bundle, for the CUDA provider.

  python -m scripts.half --in BUNDLE --out BUNDLE_FP16 [--roles vision | all | vision,encoder,...]
                         [--headroom 8] [--steps 32] [--compare]
  python -m scripts.half --diff RUN_A RUN_B     (two `autoui eval run` outputs: identical actions)

Bundle format 2, fp32 only. The converter is ONNX Runtime's own
`onnxruntime.transformers.float16.convert_float_to_float16` (the onnxconverter-common
converter as ORT maintains it, shipped in the pinned onnxruntime wheel), with
keep_io_types: every graph input and output stays float32 (a Cast at each end), so the Go
engine runs the bundle unchanged; the manifest says "precision": "fp16".

Which graphs (--roles, default vision): BLIP-2 runs its ViT in fp16, and ORT's CUDA vision
tower in fp16 measured 1.1-1.6x faster than fp32 on an H200 at batch 1-32 (DESIGN.md 6b).
The T5 graphs convert too (`--roles all`), with the parts that leave fp16's range kept in
fp32: T5's feed-forward output and residual stream are known to pass 65504 in trained
checkpoints. That set is found by measurement, not guessed: every graph runs in fp32 (ONNX
Runtime, CPU) on calibration inputs — the screens of models/testdata/screens, three prompts
of 0, 4 and 8 previous actions, --steps greedy decoder calls each — with every intermediate
value exposed, and a node stays fp32 when a value it reads or writes reaches 65504 / headroom.
A node that reads a large value must stay fp32 too: the Cast into fp16 before it would give
inf. The fp16 bundle then runs the same inputs and must give finite features and logits.
The naive fp16 with-past decoder measured 10-14x slower per call than fp32 on the H200
(DESIGN.md 6b), hence vision only by default until the GPU session times `--roles all`. ORT's
profile put 94% of that decoder's time in its fp16 com.microsoft.MultiHeadAttention nodes
(docs/cuda.md, "Where the time goes"), so ops named by --fp32-ops (default that one) stay fp32
whatever their values: the rest of the graph is fp16 around them.

Agreement with fp32 (--compare, or agreement()): the int8 script's golden-token measure
(scripts.quantize.agreement) plus the cosine of the image features on the real screens.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, shape_inference

from .bundle_files import (ROLE_GRAPHS, check_number, check_roles, checked_variant, log, read_fp32_bundle,
                           run_tool, save_variant_manifest, staged_output, write_variant)
from .quantize import GOLDEN, QuantizeError
from .quantize import agreement as golden_agreement

FP16_MAX = 65504.0
DEFAULT_ROLES = ("vision",)
# Op types kept fp32 in every converted graph (measured: ORT's CUDA MultiHeadAttention with
# T5's attention_bias and past K/V is ~9x slower in fp16 than in fp32 on an H200).
DEFAULT_FP32_OPS = ("MultiHeadAttention",)
# The fp16 static decoder against the fp16 decoder: both round to fp16, but not the same values
# (the static graph's position bias is an fp32 table, the decoder's an fp16 Gather), so half a
# per mille of the largest logit apart, a little over fp16's own step (2^-11).
FP16_STATIC_TOLERANCE = {"atol": 1e-3, "rtol": 5e-3}
ALL_ROLES = ("vision", "encoder", "fusion", "decoder")
# The graphs whose K/V inputs and outputs --fp16-cache makes float16.
CACHE_GRAPHS = ("decoder", "decoder_cross", "decoder_static")
SCREENS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models", "testdata", "screens")
CONVERTER = "onnxruntime.transformers.float16.convert_float_to_float16"

# Calibration prompts: the bench's three histories (0, 4, 8 previous actions), Auto-UI's format.
_TAP = ('"action_type": "DUAL_POINT", "touch_point": "[0.1852, 0.4979]", '
        '"lift_point": "[0.1852, 0.4979]", "typed_text": ""')
_TYPE = ('"action_type": "TYPE", "touch_point": "[-1.0, -1.0]", '
         '"lift_point": "[-1.0, -1.0]", "typed_text": "weather in paris tomorrow"')
PROMPTS = [
    "Previous Actions: Goal: Open the settings app and turn on dark mode",
    "Previous Actions: " + " ".join([_TAP, _TYPE] * 2) + " Goal: Search for the weather in Paris",
    "Previous Actions: " + " ".join([_TAP, _TYPE, _TAP, _TAP] * 2) + " Goal: Add a pair of running shoes to the cart",
]


class HalfError(RuntimeError):
    pass


def load_with_shapes(path: str) -> onnx.ModelProto:
    """The graph with ONNX shape inference's value types, then its weights. Inference runs
    before the weights are read in, so a graph over protobuf's 2 GiB (ViT-g fp32) works."""
    model = shape_inference.infer_shapes(onnx.load(path, load_external_data=False))
    onnx.load_external_data_for_model(model, os.path.dirname(path))
    return model


def name_nodes(graph: onnx.GraphProto) -> None:
    """Give every node a unique name: the converter's block list is by node name."""
    taken = set()
    for i, n in enumerate(graph.node):
        if not n.name or n.name in taken:
            n.name = f"{n.op_type}_autoui_{i}"
        taken.add(n.name)


def blocked_nodes(graph: onnx.GraphProto, ranges: dict, limit: float) -> list[str]:
    """Names of the nodes that read or write a value whose measured max |x| is over limit."""
    return [n.name for n in graph.node
            if any(ranges.get(v, 0.0) > limit for v in list(n.input) + list(n.output) if v)]


def fp16_peak(graph: onnx.GraphProto, ranges: dict, block) -> float:
    """The largest measured |value| read or written by a node not in block (one left fp16)."""
    block = set(block)
    return max((ranges.get(v, 0.0) for n in graph.node if n.name not in block
                for v in list(n.input) + list(n.output) if v), default=0.0)


def half_model(model: onnx.ModelProto, block=(), fp16_io=()) -> onnx.ModelProto:
    """The converter on a model that carries its value types (load_with_shapes): fp16 weights
    and activations, float32 graph IO but for the names in fp16_io, the nodes named in block
    left fp32."""
    from onnxruntime.transformers.float16 import convert_float_to_float16
    from onnxruntime.transformers.onnx_model import OnnxModel
    keep = True
    if fp16_io:
        g = model.graph
        keep = [v.name for v in list(g.input) + list(g.output)
                if v.type.tensor_type.elem_type == TensorProto.FLOAT and v.name not in fp16_io]
    half = convert_float_to_float16(model, keep_io_types=keep, disable_shape_infer=True,
                                    node_block_list=list(block))
    drop_duplicate_casts(half.graph)
    drop_cast_round_trips(half.graph)
    OnnxModel(half).topological_sort()  # the converter appends its IO casts last; the checker wants order
    return half


def is_cache(name: str) -> bool:
    """A decoder graph's self- or cross-attention K/V input or output (the optimum with-past names
    the engine binds: past_key_values.L.{decoder,encoder}.{key,value}, present.L...)."""
    return name.startswith(("past_key_values.", "present."))


def cache_writes(graph: onnx.GraphProto, prefix: str) -> set[str]:
    """Names of the nodes named prefix... (the static decoder's surgery) from which a cache
    output is computed: its new positions' K/V reshaped and written into the cache. Data
    movement only, so with an fp16 cache they convert to fp16 with it."""
    producer = {o: n for n in graph.node for o in n.output}
    todo = [o.name for o in graph.output if is_cache(o.name)]
    found = set()
    while todo:
        n = producer.get(todo.pop())
        if n is None or n.name in found or not n.name.startswith(prefix):
            continue
        found.add(n.name)
        todo.extend(i for i in n.input if i)
    return found


def declare_float_outputs(graph: onnx.GraphProto, op_types) -> None:
    """Give the float outputs of nodes of op_types the value_info onnx's shape inference leaves out
    for contrib ops (com.microsoft.MultiHeadAttention's: all float), so that the converter sees
    their type and casts them back to fp16 after the node when it stays fp32."""
    known = {v.name for v in list(graph.value_info) + list(graph.output)}
    for n in graph.node:
        if n.op_type in op_types and n.domain == "com.microsoft":
            for o in n.output:
                if o and o not in known:
                    graph.value_info.append(onnx.helper.make_tensor_value_info(o, TensorProto.FLOAT, None))
                    known.add(o)


def drop_duplicate_casts(graph: onnx.GraphProto) -> int:
    """Keep one of the identical Casts the converter writes when several fp32 (blocked) nodes read
    one fp16 value (each gets `<value>_cast_to_fp32`, one name: not SSA), and one value_info per
    name. Returns how many nodes were dropped."""
    seen, keep, dropped = {}, [], 0
    for n in graph.node:
        if n.op_type == "Cast" and len(n.output) == 1 and n.output[0] in seen:
            first = seen[n.output[0]]
            if list(first.input) != list(n.input) or first.attribute != n.attribute:
                raise HalfError(f"two different nodes write {n.output[0]}")
            dropped += 1
            continue
        seen.update({o: n for o in n.output})
        keep.append(n)
    if dropped:
        del graph.node[:]
        graph.node.extend(keep)
    names, infos = set(), []
    for v in graph.value_info:
        if v.name not in names:
            names.add(v.name)
            infos.append(v)
    if len(infos) != len(graph.value_info):
        del graph.value_info[:]
        graph.value_info.extend(infos)
    return dropped


def drop_cast_round_trips(graph: onnx.GraphProto) -> int:
    """Rewire x -> Cast(fp16) -> Cast(fp32) to x, and drop the casts left unread. The converter
    puts such a pair on every edge between two fp32 (blocked) nodes, which would round the
    very values kept fp32 for their range (T5's -3.4e38 mask constant becomes -inf, and
    0 x -inf = NaN). Returns how many pairs it removed."""
    producer = {o: n for n in graph.node for o in n.output}
    outputs = {o.name for o in graph.output}

    def cast_to(n):
        return next((a.i for a in n.attribute if a.name == "to"), None) if n.op_type == "Cast" else None

    rename, pairs = {}, 0
    for n in graph.node:
        src = producer.get(n.input[0]) if n.input else None
        if cast_to(n) == TensorProto.FLOAT and src is not None and cast_to(src) == TensorProto.FLOAT16:
            pairs += 1
            if n.output[0] in outputs:
                # a graph output keeps its name: the round trip becomes a copy
                n.op_type, n.input[0] = "Identity", src.input[0]
                del n.attribute[:]
            else:
                rename[n.output[0]] = src.input[0]
    for n in graph.node:
        for i, v in enumerate(n.input):
            if v in rename:
                n.input[i] = rename[v]
    keep = list(graph.node)
    while True:  # unread casts, then the casts that only they read
        used = {v for n in keep for v in n.input} | outputs
        left = [n for n in keep if n.op_type != "Cast" or n.output[0] in used]
        if len(left) == len(keep):
            break
        keep = left
    del graph.node[:]
    graph.node.extend(keep)
    return pairs


# ---------------------------------------------------------------- calibration

class _Recorder:
    """A session over a graph with every intermediate value as an output: run() keeps the max
    |x| of each float value and returns the outputs asked for, like InferenceSession.run."""

    def __init__(self, session, ranges: dict):
        self.session, self.ranges = session, ranges
        self.names = [o.name for o in session.get_outputs()]

    def run(self, names, feed):
        outs = dict(zip(self.names, self.session.run(None, feed)))
        for k, v in list(outs.items()) + list(feed.items()):
            if isinstance(v, np.ndarray) and v.dtype in (np.float32, np.float16) and v.size:
                m = float(np.max(np.abs(v)))
                self.ranges[k] = max(self.ranges.get(k, 0.0), m)
        return [outs[n] for n in names]


def _instrumented(path: str, threads: int):
    """A session that outputs every node's output of the graph at path (run as stored: no
    graph optimizations, so the values are the graph's own). The instrumented graph (no
    weights) is handed to ORT as bytes, its external data read from the graph's directory:
    nothing is written, so the input bundle may be read-only."""
    import onnxruntime as ort
    model = onnx.load(path, load_external_data=False)
    have = {o.name for o in model.graph.output}
    for n in model.graph.node:
        for o in n.output:
            if o and o not in have:
                model.graph.output.append(onnx.ValueInfoProto(name=o))
                have.add(o)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads, so.log_severity_level = threads, 1, 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.add_session_config_entry("session.model_external_initializers_file_folder_path",
                                os.path.dirname(os.path.abspath(path)))
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def calibration_prompts(bundle_dir: str, manifest: dict) -> list[list[int]]:
    """PROMPTS as the engine feeds them: the bundle's tokenizer, </s> last, at most the
    manifest's max_source_tokens."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(bundle_dir, manifest["files"]["tokenizer"]["path"]))
    eos, limit = manifest["tokens"]["eos_id"], manifest["prompt"]["max_source_tokens"]
    out = []
    for text in PROMPTS:
        ids = tok.encode(" ".join(text.split())).ids
        if not ids or ids[-1] != eos:
            ids.append(eos)
        out.append(ids[:limit - 1] + [eos] if len(ids) > limit else ids)
    return out


def screens(bundle, screens_dir: str = SCREENS) -> list[np.ndarray]:
    """The pixel values of every screenshot in screens_dir (sorted), at the bundle's size."""
    from PIL import Image

    from . import vision as vis
    size = bundle.manifest["preprocess"]["height"]
    names = sorted(f for f in os.listdir(screens_dir) if f.lower().endswith((".png", ".jpg", ".jpeg")))
    return [vis.preprocess(Image.open(os.path.join(screens_dir, f)).convert("RGB"), size) for f in names]


def run_calibration(bundle, prompts, pixels, steps: int) -> dict:
    """Every graph of the bundle on the calibration inputs: screen i with prompt i mod 3, then
    steps greedy decoder calls. Returns what the run produced (checked for finiteness)."""
    feats = [bundle.image_features(px) for px in pixels]
    logits = [bundle.greedy(prompts[i % len(prompts)], f, max_new_tokens=steps)[1] for i, f in enumerate(feats)]
    return {"image_features": np.stack(feats), "logits": logits}


def calibrate(bundle_dir: str, roles, steps: int = 32, threads: int = 2, screens_dir: str = SCREENS) -> dict:
    """{graph role: {value name: max |x|}} of the graphs named in roles, run in fp32."""
    from .ort_pipeline import Bundle
    b = Bundle(bundle_dir, threads=threads)
    ranges = {r: {} for r in roles}
    for r in roles:
        b.sessions[r] = _Recorder(_instrumented(os.path.join(bundle_dir, b.manifest["files"][r]["path"]), threads),
                                  ranges[r])
    run_calibration(b, calibration_prompts(bundle_dir, b.manifest), screens(b, screens_dir), steps)
    return ranges


def check_finite(bundle_dir: str, steps: int = 32, threads: int = 2, screens_dir: str = SCREENS) -> dict:
    """Runs the bundle on the calibration inputs; raises HalfError on a non-finite feature or
    logit, else returns the largest |feature| and |logit|."""
    from .ort_pipeline import Bundle
    b = Bundle(bundle_dir, threads=threads)
    out = run_calibration(b, calibration_prompts(bundle_dir, b.manifest), screens(b, screens_dir), steps)
    for k, v in (("image features", [out["image_features"]]), ("logits", out["logits"])):
        if not all(np.all(np.isfinite(x)) for x in v):
            raise HalfError(f"{bundle_dir}: non-finite {k} on the calibration inputs")
    return {"image_features_max_abs": float(np.max(np.abs(out["image_features"]))),
            "logits_max_abs": max(float(np.max(np.abs(x))) for x in out["logits"])}


# ---------------------------------------------------------------- the bundle

def half_bundle(in_dir: str, out_dir: str, roles=DEFAULT_ROLES, headroom: float = 8.0, steps: int = 32,
                threads: int = 2, screens_dir: str = SCREENS, fp32_ops=DEFAULT_FP32_OPS,
                fp16_cache: bool = False) -> dict:
    """Write the fp16 variant of the fp32 bundle in_dir to out_dir and return its manifest. Nodes of
    the op types in fp32_ops stay fp32 (besides those the calibration keeps). fp16_cache: the
    decoder graphs' K/V inputs and outputs are float16 too (the decoder converted)."""
    roles = check_roles(roles, ALL_ROLES, HalfError)
    if fp16_cache and "decoder" not in roles:
        raise HalfError("an fp16 cache needs the decoder converted (--roles decoder or all)")
    headroom = check_number("headroom", headroom, HalfError, minimum=1)
    steps = check_number("steps", steps, HalfError, minimum=1, integer=True)
    threads = check_number("threads", threads, HalfError, minimum=1, integer=True)
    manifest = read_fp32_bundle(in_dir, out_dir, HalfError)
    files = manifest["files"]
    graphs = [r for r in files if any(r in ROLE_GRAPHS[role] for role in roles)]
    limit = FP16_MAX / headroom
    t0 = time.time()
    ranges = calibrate(in_dir, graphs, steps, threads, screens_dir)
    log(f"  calibrated {', '.join(graphs)} in {time.time() - t0:.1f}s")
    if "decoder" in graphs and "decoder_static" in files:
        # The static decoder (--cuda-graph) converts with the decoder whose values it computes
        # under the same names, so the decoder's ranges decide; what the surgery added (the
        # position bias with its mask table, the cache writes) stays fp32, as the cache does
        # (with an fp16 cache the writes convert).
        graphs.append("decoder_static")
    fp32_nodes = {}

    def convert(role, src):
        from .static_decoder import ADDED_PREFIX
        t0 = time.time()
        model = load_with_shapes(src)
        name_nodes(model.graph)
        measured = ranges["decoder" if role == "decoder_static" else role]  # the static graph's are the decoder's
        block = blocked_nodes(model.graph, measured, limit)
        # the surgery's position bias stays fp32; its cache writes too, unless the cache is fp16 (and
        # a Shape, whatever it reads, needs no cast of a whole cache into fp32)
        writes = set()
        if fp16_cache and role == "decoder_static":
            shapes = {n.name for n in model.graph.node if n.op_type == "Shape"}
            writes = cache_writes(model.graph, ADDED_PREFIX) | shapes
        block += [n.name for n in model.graph.node if n.name not in block and (
            n.op_type in fp32_ops or (role == "decoder_static" and n.name.startswith(ADDED_PREFIX)
                                      and n.name not in writes))]
        declare_float_outputs(model.graph, fp32_ops)
        fp32_nodes[role] = block
        peak = fp16_peak(model.graph, measured, block)
        log(f"  {role}: fp16, {len(block)} nodes kept fp32 (largest |value| of the rest "
                   f"{peak:.4g}, limit {limit:.4g}), converted in {time.time() - t0:.1f}s")
        g = model.graph
        fp16_io = {v.name for v in list(g.input) + list(g.output) if is_cache(v.name)}
        return half_model(model, block, fp16_io if fp16_cache and role in CACHE_GRAPHS else ())

    if fp16_cache:
        for role in graphs:
            if role in CACHE_GRAPHS:
                for t in files[role]["inputs"] + files[role]["outputs"]:
                    if is_cache(t["name"]):
                        t["dtype"] = "float16"

    name = out_dir
    with staged_output(out_dir, [in_dir], HalfError) as out_dir:  # written here, moved to name when checked
        manifest["files"] = write_variant(in_dir, out_dir, manifest, graphs, convert, "fp16", HalfError)
        manifest["precision"] = "fp16"
        manifest["half"] = {
            "tool": "scripts.half", "converter": CONVERTER,
            "io": "float32 (keep_io_types)" + (", but the decoder graphs' K/V float16" if fp16_cache else ""),
            "graphs": graphs, "limit": limit, "fp32_ops": list(fp32_ops),
            "cache": "float16" if fp16_cache else "float32",
            "calibration": f"{len(PROMPTS)} prompts, the screens of models/testdata/screens, {steps} greedy steps",
            "fp32_nodes": fp32_nodes}
        save_variant_manifest(out_dir, manifest, files, name)

        def checks():
            check_finite(out_dir, steps, threads, screens_dir)
            log(f"bundle {name}: finite on the calibration inputs")
            if "decoder_static" in graphs:
                from . import graph_check as gc
                from .static_decoder import check_static
                new = manifest["files"]
                try:
                    worst = check_static(os.path.join(out_dir, new["decoder"]["path"]),
                                         os.path.join(out_dir, new["decoder_static"]["path"]), manifest["model"],
                                         tol=FP16_STATIC_TOLERANCE)
                except gc.ExportCheckError as e:
                    raise HalfError(f"fp16 static decoder against the fp16 decoder: {e}") from None
                log(f"bundle {name}: fp16 static decoder within {worst:.3g} of the fp16 decoder's logits")

        checked_variant(name, checks, HalfError)
    return manifest


# ---------------------------------------------------------------- agreement with fp32

def feature_pairs(ref_dir: str, other_dir: str, screens_dir: str = SCREENS, threads: int = 2):
    """The two bundles' image features on each screen of screens_dir, as float64 pairs."""
    from .ort_pipeline import Bundle
    a, b = Bundle(ref_dir, threads=threads), Bundle(other_dir, threads=threads)
    for px in screens(a, screens_dir):
        yield a.image_features(px).astype(np.float64), b.image_features(px).astype(np.float64)


def feature_cosines(fp32_dir: str, other_dir: str, screens_dir: str = SCREENS, threads: int = 2) -> list[float]:
    """Cosine of the two bundles' image features on each screen of screens_dir."""
    return [float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))
            for x, y in feature_pairs(fp32_dir, other_dir, screens_dir, threads)]


def agreement(fp32_dir: str, other_dir: str, cases_path: str = GOLDEN, threads: int = 2) -> dict:
    """Golden-case agreement (scripts.quantize.agreement: against the fp32 greedy outputs) and the
    feature cosine on the real screens."""
    out = golden_agreement(fp32_dir, other_dir, cases_path, threads=threads) if cases_path else {}
    cos = feature_cosines(fp32_dir, other_dir, threads=threads)
    out["screens"] = {"n": len(cos), "feature_cosine_min": min(cos), "feature_cosine_mean": float(np.mean(cos))}
    return out


def _predictions(path: str) -> dict:
    if os.path.isdir(path):
        path = os.path.join(path, "predictions.jsonl")
    with open(path) as f:
        return {(p["episode_id"], p["step_id"]): p for p in map(json.loads, f) if p}


def runs_agreement(a: str, b: str) -> dict:
    """Two `autoui eval run` outputs (directories or predictions.jsonl) on the same steps: how
    many outputs are identical, and how many have the same action type."""
    pa, pb = _predictions(a), _predictions(b)
    common = sorted(pa.keys() & pb.keys())
    if not common:
        raise HalfError(f"{a} and {b} share no predicted step")
    return {"steps": len(common), "only_in_one": len(pa.keys() ^ pb.keys()),
            "identical_outputs": sum(pa[k]["raw"] == pb[k]["raw"] for k in common),
            "same_action_type": sum(pa[k]["action_type"] == pb[k]["action_type"] for k in common)}


def main(argv=None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--diff"]:
        if len(argv) != 3:
            print("usage: python -m scripts.half --diff RUN_A RUN_B   (two autoui eval run outputs)", file=sys.stderr)
            return 2
        try:
            print(json.dumps(runs_agreement(argv[1], argv[2]), indent=2))
        except (HalfError, OSError, ValueError, KeyError, TypeError) as e:
            msg = f"missing key {e}" if isinstance(e, KeyError) else str(e)
            print(f"half: --diff: {msg}", file=sys.stderr)
            return 1
        return 0
    p = argparse.ArgumentParser(description="Write the fp16 variant of an autoui bundle (float32 graph IO). "
                                "python -m scripts.half --diff RUN_A RUN_B compares two eval runs' outputs.")
    p.add_argument("--in", dest="in_dir", required=True, help="fp32 bundle directory")
    p.add_argument("--out", required=True, help="fp16 bundle directory to write")
    p.add_argument("--roles", default=",".join(DEFAULT_ROLES),
                   help="graphs to convert: vision (default), all, or a list of vision,encoder,fusion,decoder "
                        "(decoder = both decoder graphs)")
    p.add_argument("--headroom", type=float, default=8.0,
                   help="a node stays fp32 where a value it reads or writes reaches 65504 / headroom in the "
                        "fp32 calibration run")
    p.add_argument("--steps", type=int, default=32, help="greedy decoder calls per calibration prompt")
    p.add_argument("--fp32-ops", default=",".join(DEFAULT_FP32_OPS),
                   help="op types kept fp32 in every converted graph, comma-separated ('' for none; default: "
                        "MultiHeadAttention, whose fp16 CUDA kernel measured ~9x slower)")
    p.add_argument("--fp16-cache", action="store_true",
                   help="the decoder graphs' K/V inputs and outputs float16 too (the decoder converted: --roles "
                        "decoder or all): no cast of the cache at every decoder call, half its memory; pair with "
                        "fp16 attention (--fp32-ops '' or scripts.attention --decoder plain)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--compare", action="store_true",
                   help="after writing, print fp16 vs fp32 agreement (the golden cases' screens and prompts)")
    args = p.parse_args(argv)
    roles = ALL_ROLES if args.roles == "all" else tuple(r for r in args.roles.split(",") if r)

    def run():
        half_bundle(args.in_dir, args.out, roles=roles, headroom=args.headroom, steps=args.steps,
                    threads=args.threads, fp32_ops=tuple(o for o in args.fp32_ops.split(",") if o),
                    fp16_cache=args.fp16_cache)
        if args.compare:
            print(json.dumps(agreement(args.in_dir, args.out, threads=args.threads), indent=2))

    return run_tool("half", run, (HalfError, QuantizeError))


if __name__ == "__main__":
    sys.exit(main())
