"""Make the int8 variant of an autoui bundle: dynamic quantization with per-channel int8 weights.

  python -m scripts.quantize --in BUNDLE --out BUNDLE_INT8 [--roles vision,encoder,decoder] [--full-range]
                             [--fp32-embeddings] [--compare]
  python -m scripts.export ... --out BUNDLE --int8 BUNDLE_INT8     (the same, right after an export)

Bundle format 2 only (`python -m scripts.upgrade_bundle DIR` upgrades a format-1 bundle). The
role `decoder` covers both decoder graphs: the with-past decoder and the cross graph
(decoder_cross). Every MatMul whose second input is a 2-D float weight (an initializer of its
graph) becomes one ONNX Runtime
`com.microsoft.DynamicQuantizeMatMul`: the activation is quantized per tensor to uint8 at run
time, the weight is stored as int8 with one symmetric scale per output column (zero point 0).
Fusion, the vision patch Conv, norms, relative-position
tables and attention score products (activation x activation) stay fp32. Graph inputs and outputs are unchanged, so the Go
engine runs the bundle as is; the manifest says "precision": "int8".

Token-embedding tables (Gather on a float [rows >= 256, d] initializer) become
`com.microsoft.GatherBlockQuantized`: int8 (stored as uint8 with ORT's default zero point
128) with one scale per 128 columns of a row. They cost nothing at run time but are a third
of an int8 T5-base bundle if left fp32 (--fp32-embeddings keeps them).

Why not onnxruntime.quantization.quantize_dynamic: in this environment it does not import
(onnxruntime 1.29's quantization package needs ml_dtypes, which is not installed), and it
emits DynamicQuantizeLinear + MatMulInteger + Cast + Mul chains that ORT only fuses into
DynamicQuantizeMatMul at graph optimization level >= extended. Emitting the fused op directly
gives the same kernel at every optimization level.

Why 7-bit weights by default (values in [-63, 63], "reduce range"): on x86 CPUs without
AVX-512 VNNI / AVX-VNNI (e.g. the AVX2-only EPYC this project is benchmarked on), MLAS's
u8 x s8 kernel sums pairs of products with VPMADDUBSW into saturating int16; 2 * 255 * 127
overflows, which we measured as 4-12% relative output error on random weights. With
|w| <= 63 a pair is at most 2 * 255 * 63 = 32130 < 32767. --full-range (|w| <= 127) is only
safe on VNNI/AMX machines. See docs/bundle-format.md ("int8 bundles") for measurements.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .bundle_files import (ROLE_GRAPHS, check_roles, log, read_fp32_bundle, run_tool, save_variant_manifest,
                           staged_output, write_variant)

QUANTIZED_ROLES = ("vision", "encoder", "decoder")
MS_DOMAIN = "com.microsoft"


class QuantizeError(RuntimeError):
    pass


def quantize_weight(w: np.ndarray, qmax: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-output-column int8 quantization of a [K, N] weight: w ~= q * scale[None, :]."""
    if w.ndim != 2:
        raise ValueError(f"weight has shape {w.shape}, want 2-D")
    amax = np.max(np.abs(w), axis=0).astype(np.float32)
    scale = np.where(amax > 0, amax / np.float32(qmax), np.float32(1.0)).astype(np.float32)
    q = np.clip(np.rint(w / scale[None, :]), -qmax, qmax).astype(np.int8)
    return q, scale


class _Weights:
    """A graph's initializers and what has been quantized of them (a weight read by several
    nodes is quantized once)."""

    def __init__(self, graph: onnx.GraphProto):
        self.graph = graph
        self.inits = {t.name: t for t in graph.initializer}
        self.quantized: dict[str, tuple[str, str]] = {}  # weight key -> (int8 name, scale name)


def _has_subgraph(node: onnx.NodeProto) -> bool:
    return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)


def _unique(name: str, taken: set) -> str:
    while name in taken:
        name += "_"
    taken.add(name)
    return name


EMBEDDING_BLOCK = 128
MIN_EMBEDDING_ROWS = 256


def _embedding_block(d: int) -> int:
    for b in (EMBEDDING_BLOCK, 64, 32, 16):
        if d % b == 0:
            return b
    return 0


def _is_embedding_gather(w: _Weights, node: onnx.NodeProto) -> bool:
    if node.op_type != "Gather" or node.domain not in ("", "ai.onnx") or node.input[1] in w.inits:
        return False
    t = w.inits.get(node.input[0])
    if t is None:
        return False
    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
    return (t.data_type == TensorProto.FLOAT and len(t.dims) == 2 and axis == 0
            and t.dims[0] >= MIN_EMBEDDING_ROWS and _embedding_block(t.dims[1]) > 0)


def quantize_embedding(w: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 per block of `block` columns of each row, stored as uint8 with ORT's
    default zero point 128: w ~= (q - 128) * scale[row, col // block]."""
    rows, d = w.shape
    wb = w.reshape(rows, d // block, block)
    amax = np.max(np.abs(wb), axis=2)
    scale = np.where(amax > 0, amax / np.float32(127), np.float32(1.0)).astype(np.float32)
    q = np.clip(np.rint(wb / scale[..., None]), -127, 127).astype(np.int16) + 128
    return q.astype(np.uint8).reshape(rows, d), scale


def _quantize_gather(owner: _Weights, node: onnx.NodeProto, taken: set, stats: dict) -> onnx.NodeProto:
    w_name = node.input[0]
    t = owner.inits[w_name]
    block = _embedding_block(t.dims[1])
    key = "gather:" + w_name
    if key not in owner.quantized:
        q, scale = quantize_embedding(numpy_helper.to_array(t), block)
        q_name, s_name = _unique(w_name + "_uint8", taken), _unique(w_name + "_blockscale", taken)
        owner.graph.initializer.extend([numpy_helper.from_array(q, q_name), numpy_helper.from_array(scale, s_name)])
        owner.quantized[key] = (q_name, s_name)
        stats["embeddings"] += 1
        stats["params"] += int(q.size)
    q_name, s_name = owner.quantized[key]
    return helper.make_node("GatherBlockQuantized", [q_name, node.input[1], s_name], list(node.output),
                            name=_unique((node.name or "Gather") + "_quant", taken), domain=MS_DOMAIN,
                            gather_axis=0, quantize_axis=1, block_size=block, bits=8)


def _quantize_graph(w: _Weights, qmax: int, embeddings: bool, taken: set, stats: dict) -> None:
    new_nodes = []
    for node in w.graph.node:
        if _has_subgraph(node):
            # The bundle's graphs have none since format 2 (the merged decoder's If is gone).
            raise QuantizeError(f"node {node.name or node.op_type} has a subgraph; graphs with If/Loop "
                                "are not quantized (a format-1 merged decoder? python -m scripts.upgrade_bundle)")
        if embeddings and _is_embedding_gather(w, node):
            new_nodes.append(_quantize_gather(w, node, taken, stats))
            continue
        if node.op_type != "MatMul" or node.domain not in ("", "ai.onnx") or len(node.input) != 2:
            new_nodes.append(node)
            continue
        a_name, w_name = node.input
        w_init = w.inits.get(w_name)
        if w_init is None or a_name in w.inits or w_init.data_type != TensorProto.FLOAT or len(w_init.dims) != 2:
            new_nodes.append(node)  # activation x activation (attention scores), or not a 2-D float weight
            continue
        if w_name not in w.quantized:
            arr = numpy_helper.to_array(w_init)
            q, scale = quantize_weight(arr, qmax)
            q_name, s_name = _unique(w_name + "_int8", taken), _unique(w_name + "_scale", taken)
            w.graph.initializer.extend([numpy_helper.from_array(q, q_name), numpy_helper.from_array(scale, s_name)])
            w.quantized[w_name] = (q_name, s_name)
            stats["weights"] += 1
            stats["params"] += int(arr.size)
        q_name, s_name = w.quantized[w_name]
        new_nodes.append(helper.make_node("DynamicQuantizeMatMul", [a_name, q_name, s_name], list(node.output),
                                          name=_unique((node.name or "MatMul") + "_quant", taken), domain=MS_DOMAIN))
        stats["matmuls"] += 1
    del w.graph.node[:]
    w.graph.node.extend(new_nodes)
    used = {x for n in w.graph.node for x in n.input} | {v.name for v in w.graph.output}
    keep = [t for t in w.graph.initializer if t.name in used]
    del w.graph.initializer[:]
    w.graph.initializer.extend(keep)


def quantize_model(model: onnx.ModelProto, full_range: bool = False, embeddings: bool = True,
                   in_place: bool = False) -> tuple[onnx.ModelProto, dict]:
    """model (a copy unless in_place) with every weight MatMul as DynamicQuantizeMatMul and, with
    embeddings, every token-embedding Gather as GatherBlockQuantized. in_place saves a full copy
    of the weights (ViT-g: 4 GB)."""
    out = model
    if not in_place:
        out = onnx.ModelProto()
        out.CopyFrom(model)
    stats = {"matmuls": 0, "weights": 0, "embeddings": 0, "params": 0}
    g = out.graph
    taken = ({t.name for t in g.initializer} | {v.name for v in list(g.input) + list(g.output)}
             | {x for n in g.node for x in list(n.input) + list(n.output) + [n.name]})
    _quantize_graph(_Weights(g), 127 if full_range else 63, embeddings, taken, stats)
    if stats["matmuls"] and not any(o.domain == MS_DOMAIN for o in out.opset_import):
        out.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    return out, stats


def quantize_bundle(in_dir: str, out_dir: str, roles=QUANTIZED_ROLES, full_range: bool = False,
                    embeddings: bool = True) -> dict:
    """Write the int8 variant of the bundle in_dir to out_dir and return its manifest. out_dir is
    written whole or not at all (bundle_files.staged_output)."""
    roles = check_roles(roles, tuple(ROLE_GRAPHS), QuantizeError)
    manifest = read_fp32_bundle(in_dir, out_dir, QuantizeError)
    graphs = {g for role in roles for g in ROLE_GRAPHS[role]}
    files = manifest["files"]

    def convert(role, src):
        t0 = time.time()
        q, stats = quantize_model(onnx.load(src), full_range=full_range, embeddings=embeddings, in_place=True)
        log(f"  {role}: {stats['matmuls']} MatMuls ({stats['weights']} weights) and "
                   f"{stats['embeddings']} embeddings, {stats['params'] / 1e6:.1f}M params, "
                   f"quantized in {time.time() - t0:.1f}s")
        return q

    with staged_output(out_dir, [in_dir], QuantizeError) as tmp:
        manifest["files"] = write_variant(in_dir, tmp, manifest, graphs, convert, "quantized", QuantizeError)
        manifest["precision"] = "int8"
        manifest["quantization"] = {
            "tool": "scripts.quantize", "method": "dynamic", "op": "com.microsoft.DynamicQuantizeMatMul",
            "weights": "int8 symmetric per output channel" + ("" if full_range else ", 7-bit range [-63, 63]"),
            "activations": "uint8 per tensor, computed at run time",
            "embeddings": (f"com.microsoft.GatherBlockQuantized, int8 symmetric per {EMBEDDING_BLOCK} columns of a row"
                           if embeddings else "float32"),
            "graphs": [r for r in files if r in graphs]}
        save_variant_manifest(tmp, manifest, files, out_dir)
    return manifest


# ---------------------------------------------------------------- agreement with fp32

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "models", "testdata", "golden", "cases.json")


def _teacher_forced_logits(bundle, input_ids, image_features, target) -> np.ndarray:
    """Logits at every position of [start] + target[:-1], in one decoder call from a zero-length past
    (the cross graph's K/V as the encoder pasts)."""
    _, fused, mask = bundle.encode(input_ids, image_features)
    ids = [bundle.tokens["decoder_start_id"]] + list(target[:-1])
    logits, _ = bundle.decoder_step(ids, fused, mask, None)
    return logits


def agreement(fp32_dir: str, int8_dir: str, cases_path: str = GOLDEN, threads: int = 1,
              greedy: bool = True) -> dict:
    """int8 (or any variant) vs fp32 on the golden cases' screens and prompts (full pipeline from
    the screen PNG and the source text, tokenized by the fp32 bundle's own tokenizer).

    The reference token sequence of a case is the fp32 bundle's own greedy output on it (for the
    tiny bundle, the golden generated_ids: the fixtures check that ORT fp32 reproduces them), so
    that any bundle compares with itself at 1.0. first_step: logits of the first decode step;
    teacher_forced: every position of the reference fed as decoder input at once; greedy: whole
    variant greedy outputs vs the reference."""
    from PIL import Image

    from . import vision as vis
    from .ort_pipeline import Bundle
    with open(cases_path) as f:
        cases = json.load(f)["cases"]
    root = os.path.dirname(os.path.dirname(cases_path))
    ref, q = Bundle(fp32_dir, threads=threads), Bundle(int8_dir, threads=threads)
    for what, b in (("preprocess", lambda m: m["preprocess"]), ("tokens", lambda m: m["tokens"]),
                    ("vocab_size", lambda m: m["model"]["vocab_size"])):
        if b(ref.manifest) != b(q.manifest):
            raise QuantizeError(f"{fp32_dir} and {int8_dir}: different {what}; not variants of one bundle")
    first_diff, first_agree, tf_diff, tf_agree, tf_n = 0.0, 0, 0.0, 0, 0
    greedy_equal, token_agree, token_n = 0, 0, 0
    feat_diff = 0.0
    features = {}  # screen -> (fp32, int8) image features; cases share screens
    for c in cases:
        if c["screen"] not in features:
            px = vis.preprocess(Image.open(os.path.join(root, c["screen"])).convert("RGB"),
                                ref.manifest["preprocess"]["height"])
            features[c["screen"]] = ref.image_features(px), q.image_features(px)
        f_ref, f_q = features[c["screen"]]
        feat_diff = max(feat_diff, float(np.max(np.abs(f_ref - f_q))))
        input_ids = ref.prompt_ids(c["source_text"])
        want, _ = ref.greedy(input_ids, f_ref, max_new_tokens=c["max_new_tokens"])
        l_ref = _teacher_forced_logits(ref, input_ids, f_ref, want)
        l_q = _teacher_forced_logits(q, input_ids, f_q, want)
        first_diff = max(first_diff, float(np.max(np.abs(l_ref[0] - l_q[0]))))
        first_agree += int(np.argmax(l_ref[0]) == np.argmax(l_q[0]))
        tf_diff = max(tf_diff, float(np.max(np.abs(l_ref - l_q))))
        tf_agree += int(np.sum(np.argmax(l_ref, -1) == np.argmax(l_q, -1)))
        tf_n += len(want)
        if greedy:
            got, _ = q.greedy(input_ids, f_q, max_new_tokens=c["max_new_tokens"])
            greedy_equal += int(got == want)
            token_agree += sum(a == b for a, b in zip(got, want))
            token_n += max(len(got), len(want))
    n = len(cases)
    out = {"cases": n, "image_features_max_abs_diff": feat_diff,
           "first_step": {"max_abs_diff": first_diff, "top1_agreement": first_agree / n},
           "teacher_forced": {"positions": tf_n, "max_abs_diff": tf_diff, "top1_agreement": tf_agree / tf_n}}
    if greedy:
        out["greedy"] = {"identical_outputs": greedy_equal / n, "token_agreement": token_agree / token_n}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Write the int8 (dynamic, per-channel) variant of an autoui bundle.")
    p.add_argument("--in", dest="in_dir", required=True, help="fp32 bundle directory")
    p.add_argument("--out", required=True, help="int8 bundle directory to write")
    p.add_argument("--roles", default=",".join(QUANTIZED_ROLES),
                   help="graphs to quantize (default vision,encoder,decoder, where decoder means both decoder "
                        "graphs, the with-past one and the cross graph; fusion is tiny and stays fp32)")
    p.add_argument("--full-range", action="store_true",
                   help="8-bit weight range [-127, 127]; only for CPUs with AVX-512 VNNI / AVX-VNNI / AMX "
                        "(on plain AVX2 the int8 kernel saturates)")
    p.add_argument("--compare", action="store_true",
                   help="after writing, print int8 vs fp32 agreement on the golden cases' screens and prompts")
    p.add_argument("--fp32-embeddings", action="store_true",
                   help="keep token-embedding tables in float32 (default: int8 blocks via GatherBlockQuantized)")
    args = p.parse_args(argv)
    roles = tuple(r for r in args.roles.split(",") if r)

    def run():
        quantize_bundle(args.in_dir, args.out, roles=roles, full_range=args.full_range,
                        embeddings=not args.fp32_embeddings)
        if args.compare:
            print(json.dumps(agreement(args.in_dir, args.out), indent=2))

    return run_tool("quantize", run, (QuantizeError,))


if __name__ == "__main__":
    sys.exit(main())
