"""Write the variant of an fp32 autoui bundle whose decoder attention is plain ONNX operators
instead of ONNX Runtime's fused com.microsoft.MultiHeadAttention, for timing on a GPU.

  python -m scripts.plain_attention --in BUNDLE --out BUNDLE_PLAIN
  python -m scripts.half --in BUNDLE_PLAIN --out BUNDLE_PLAIN_FP16 --roles all --fp32-ops ''

Why: at batch 64 on an H200 the decoder's 24 MultiHeadAttention nodes took 42-44% of a call
(~250 us each, fp32) and the same op in fp16 was ~9x slower (docs/cuda.md). Its CUDA kernel
takes the unfused path there: T5's attention carries a bias (relative positions, padding), and
the memory-efficient kernel wants a bias only when the query length is a multiple of 8 (fp16)
or 16 (fp32), while flash attention takes no bias at all. Written as MatMul, Add, Softmax and
MatMul, each step is a kernel of its own (cuBLAS batched products, which fp16 suits), ORT's
profile times each one, and `scripts.half` can make the whole attention fp16 (the calibration
keeps what leaves fp16's range fp32, as everywhere). On the CPU the fused op is the faster
(docs/decoding.md), so this is a variant, not the export's default.

Every MultiHeadAttention node of the decoder graphs (with-past and static) becomes:
q, and k/v when given per position ([B, S, D]), split into heads ([B, H, S, d]); past K/V
concatenated in front (present K/V, the node's own outputs); scores = q k^T x scale + bias;
softmax over the keys; times v; heads merged back to [B, S, D]. Graph IO is unchanged, so the
engine runs the variant as it is; the manifest records the rewrite under "attention". The
rewritten graphs must give the original's outputs (within DECODER_TOLERANCE) on random inputs,
and the static decoder the with-past decoder's (scripts.static_decoder.check_static).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

from .bundle_files import log, read_fp32_bundle, save_variant_manifest, write_variant

GRAPHS = ("decoder", "decoder_static")
# The rewritten with-past decoder against the fused one, both fp32 (ORT, CPU): the same
# products summed in another order.
DECODER_TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}


class PlainAttentionError(RuntimeError):
    pass


def _rank(model: onnx.ModelProto, name: str) -> int | None:
    for vi in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output):
        if vi.name == name and vi.type.tensor_type.HasField("shape"):
            return len(vi.type.tensor_type.shape.dim)
    return None


def _attr(node: onnx.NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def plain_attention(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    """The model with each com.microsoft.MultiHeadAttention node written as plain operators
    (the module doc), and how many there were. Raises PlainAttentionError for a node using
    what the rewrite does not cover: a packed or biased projection, a key padding mask, a
    unidirectional (causal) flag, the scale left to its default, or the output_qk output."""
    g = model.graph
    # Input ranks tell per-position K/V ([B, S, D]) from heads-first ones ([B, H, S, d]); past
    # the first fused node inference knows no shapes, but there K/V are the graph's inputs.
    inferred = shape_inference.infer_shapes(model, strict_mode=False)
    consts: dict[str, str] = {}

    def const(values) -> str:
        name = "plain_attention/shape_" + "_".join(str(v).replace("-", "m") for v in values)
        if name not in consts:
            consts[name] = name
            g.initializer.append(numpy_helper.from_array(np.array(values, np.int64), name))
        return name

    nodes, count = [], 0
    for n in g.node:
        if n.op_type != "MultiHeadAttention" or n.domain != "com.microsoft":
            nodes.append(n)
            continue
        count += 1
        ins = list(n.input) + [""] * (8 - len(n.input))
        q, k, v, bias, kpm, attn_bias, past_k, past_v = ins[:8]
        outs = list(n.output) + [""] * (3 - len(n.output))
        heads = _attr(n, "num_heads")
        scale = _attr(n, "scale", 0.0)
        why = [w for w, bad in (("a projection bias", bias), ("a key padding mask", kpm),
                                ("past_sequence_length or cache_indirection", any(ins[8:])),
                                ("unidirectional", _attr(n, "unidirectional", 0)),
                                ("no scale attribute (the 1/sqrt(head size) default)", not scale),
                                ("the output_qk output", len(outs) > 3 and outs[3]),
                                ("past K/V without present K/V outputs", past_k and not (outs[1] and outs[2])))
               if bad]
        if why:
            raise PlainAttentionError(f"node {n.name or n.output[0]}: {', '.join(why)}: not covered by the rewrite")
        p = (n.name or n.output[0]) + "/plain/"
        new = []

        def op(kind, inputs, output=None, **attrs):
            out = output or p + f"{kind}_{len(new)}"
            new.append(helper.make_node(kind, inputs, [out], name=p + f"{kind}_{len(new)}", **attrs))
            return out

        def heads_first(x):
            return op("Transpose", [op("Reshape", [x, const([0, 0, heads, -1])])], perm=[0, 2, 1, 3])

        keys, values = k, v
        for which in (k, v):
            # with past K/V, MultiHeadAttention takes K/V per position only
            r = 3 if past_k else _rank(inferred, which)
            if r not in (3, 4):
                raise PlainAttentionError(f"node {n.name}: rank of {which!r} unknown or {r}: want 3 or 4")
            if r == 3 and which == k:
                keys = heads_first(k)
            elif r == 3:
                values = heads_first(v)
        if past_k:
            keys = op("Concat", [past_k, keys], outs[1], axis=2)
            values = op("Concat", [past_v, values], outs[2], axis=2)
        elif outs[1] or outs[2]:
            raise PlainAttentionError(f"node {n.name}: present K/V without past K/V: not covered by the rewrite")
        scores = op("MatMul", [heads_first(q), op("Transpose", [keys], perm=[0, 1, 3, 2])])
        if scale != 1.0:
            sname = p + "scale"
            g.initializer.append(numpy_helper.from_array(np.array(scale, np.float32), sname))
            scores = op("Mul", [scores, sname])
        if attn_bias:
            scores = op("Add", [scores, attn_bias])
        ctx = op("MatMul", [op("Softmax", [scores], axis=-1), values])
        op("Reshape", [op("Transpose", [ctx], perm=[0, 2, 1, 3]), const([0, 0, -1])], outs[0])
        nodes.extend(new)
    del g.node[:]
    g.node.extend(nodes)
    if count:
        default = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
        if default < 13:
            raise PlainAttentionError(f"opset {default}: Softmax over one axis needs 13 or later")
    return model, count


def _with_past_feeds(sess, cfg: dict, rng) -> dict:
    """Random inputs of the with-past decoder: batch 2, 3 new positions after 5, 7 encoder
    positions with the second row's last two padded."""
    H, dkv = cfg["num_heads"], cfg["d_kv"]
    feeds = {}
    for i in sess.get_inputs():
        if i.name == "input_ids":
            feeds[i.name] = rng.integers(0, cfg["vocab_size"], (2, 3), dtype=np.int64)
        elif i.name == "encoder_attention_mask":
            m = np.ones((2, 7), np.int64)
            m[1, 5:] = 0
            feeds[i.name] = m
        elif ".decoder." in i.name:
            feeds[i.name] = rng.standard_normal((2, H, 5, dkv)).astype(np.float32)
        elif ".encoder." in i.name:
            feeds[i.name] = rng.standard_normal((2, H, 7, dkv)).astype(np.float32)
        else:
            raise PlainAttentionError(f"decoder input {i.name!r}: no random feed for it")
    return feeds


def check_decoder(fused_path: str, plain_path: str, cfg: dict, seed: int = 5) -> float:
    """The plain with-past decoder's outputs against the fused one's on random inputs (ORT,
    CPU); returns the worst |diff| over the float outputs, raises PlainAttentionError past
    DECODER_TOLERANCE or when an argmax differs but for a near tie."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    a = ort.InferenceSession(fused_path, so, providers=["CPUExecutionProvider"])
    b = ort.InferenceSession(plain_path, so, providers=["CPUExecutionProvider"])
    feeds = _with_past_feeds(a, cfg, np.random.default_rng(seed))
    names = [o.name for o in a.get_outputs()]
    worst = 0.0
    for name, x, y in zip(names, a.run(names, feeds), b.run(names, feeds)):
        if x.dtype.kind == "f":
            if not np.allclose(x, y, **DECODER_TOLERANCE):
                raise PlainAttentionError(f"{name}: plain attention differs from the fused by up to "
                                          f"{float(np.max(np.abs(x - y))):.3g}")
            worst = max(worst, float(np.max(np.abs(x - y))))
        elif not np.array_equal(x, y):
            raise PlainAttentionError(f"{name}: plain attention gives other ids than the fused")
    return worst


def plain_bundle(in_dir: str, out_dir: str) -> dict:
    """Write the plain-attention variant of the fp32 bundle in_dir to out_dir; returns its manifest."""
    manifest = read_fp32_bundle(in_dir, out_dir, PlainAttentionError)
    files = manifest["files"]
    if "attention" in manifest:
        raise PlainAttentionError(f"{in_dir}: attention already rewritten ({manifest['attention']['tool']})")
    graphs = [r for r in GRAPHS if r in files]
    rewritten = {}

    def convert(role, src):
        model, count = plain_attention(onnx.load(src))
        if not count:
            raise PlainAttentionError(f"{role}: no MultiHeadAttention node to rewrite")
        rewritten[role] = count
        log(f"  {role}: {count} MultiHeadAttention nodes as plain operators")
        return model

    manifest["files"] = write_variant(in_dir, out_dir, manifest, graphs, convert, "plain-attention",
                                      PlainAttentionError)
    manifest["attention"] = {"tool": "scripts.plain_attention", "from": "com.microsoft.MultiHeadAttention",
                             "to": "MatMul, Add, Softmax, MatMul", "nodes": rewritten}
    save_variant_manifest(out_dir, manifest, files)
    new = manifest["files"]
    worst = check_decoder(os.path.join(in_dir, files["decoder"]["path"]),
                          os.path.join(out_dir, new["decoder"]["path"]), manifest["model"])
    log(f"bundle {out_dir}: plain decoder within {worst:.3g} of the fused one")
    if "decoder_static" in new:
        from . import graph_check as gc
        from .static_decoder import check_static
        try:
            worst = check_static(os.path.join(out_dir, new["decoder"]["path"]),
                                 os.path.join(out_dir, new["decoder_static"]["path"]), manifest["model"])
        except gc.ExportCheckError as e:
            raise PlainAttentionError(f"plain static decoder against the plain decoder: {e}") from None
        log(f"bundle {out_dir}: plain static decoder within {worst:.3g} of the plain decoder")
    return manifest


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Write the variant of an fp32 autoui bundle whose decoder attention "
                                "is plain ONNX operators instead of com.microsoft.MultiHeadAttention.")
    p.add_argument("--in", dest="in_dir", required=True, help="fp32 bundle directory")
    p.add_argument("--out", required=True, help="bundle directory to write")
    args = p.parse_args(argv)
    try:
        plain_bundle(args.in_dir, args.out)
    except PlainAttentionError as e:
        print(f"plain_attention: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
