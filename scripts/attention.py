"""Write an attention variant of an fp32 autoui bundle, for timing on a GPU: the decoder's fused
com.microsoft.MultiHeadAttention written as plain ONNX operators, and/or the vision tower's
plain attention fused into that op.

  python -m scripts.attention --in BUNDLE --out VARIANT [--decoder plain] [--vision fused]
  python -m scripts.half --in VARIANT --out VARIANT_FP16 --roles all --fp32-ops '' --fp16-cache

Why (docs/cuda.md, "Attention and the cache in fp16"): at batch 64 on an H200 the decoder's 24
MultiHeadAttention nodes took 42-44% of a call (~250 us each, fp32) and the same op in fp16 was
~9x slower. Its CUDA kernel takes the unfused path there: T5's attention carries a bias
(relative positions, padding), flash attention takes no bias, and the memory-efficient kernel
wants one only when the query length is a multiple of 8 (fp16) or 16 (fp32). Written as
MatMul, Add, Softmax and MatMul (--decoder plain), each step is a kernel of its own (cuBLAS
batched products, which fp16 suits), ORT's profile times each one, and scripts.half can make
the whole attention fp16. The vision tower is the other way round: BLIP-2's ViT attention has
no bias and no mask, so as MultiHeadAttention (--vision fused) fp16 takes ORT's flash kernel
and the [B, heads, 257, 257] scores never reach memory; the export leaves it plain (on the CPU
the fused op measured no faster: the products dominate). On the CPU the decoder's fused op is
the faster (docs/decoding.md), so these are variants, not the export's default.

--decoder plain: every MultiHeadAttention node of the decoder graphs (with-past and static)
becomes q, and k/v when given per position ([B, S, D]), split into heads ([B, H, S, d]); past
K/V concatenated in front (present K/V, the node's own outputs); scores = q k^T x scale + bias;
softmax over the keys; times v; heads merged back to [B, S, D].

--vision fused: each of the vision tower's attentions as traced from BLIP-2 (the packed q/k/v
projection reshaped to [B, S, 3, H, d] and transposed, Gather 0/1/2, MatMul, Mul by the scale,
Softmax, MatMul, Transpose, Reshape) becomes Split of the projection into q, k, v ([B, S, D]
each) and one MultiHeadAttention of the same scale; the last layer's, whose query is the CLS
token's own projection ([B, 1, D]) and whose packed projection holds k and v only, becomes Split
into k, v and the same op.

Graph IO is unchanged, so the engine runs a variant as it is; the manifest records the rewrite
under "attention". A rewritten graph must give the original's outputs on random inputs
(decoder: DECODER_TOLERANCE; vision: VISION_TOLERANCE on the real screens' features), and the
static decoder the with-past decoder's (scripts.static_decoder.check_static).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

from .bundle_files import log, rewrite_variant, run_tool

DECODER_GRAPHS = ("decoder", "decoder_static")
# A rewritten graph against the original, both fp32 (ORT, CPU): the same products summed in
# another order.
DECODER_TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}
VISION_TOLERANCE = {"atol": 1e-4, "rtol": 1e-3}


class AttentionError(RuntimeError):
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
    (the module doc), and how many there were. Raises AttentionError for a node using
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
            raise AttentionError(f"node {n.name or n.output[0]}: {', '.join(why)}: not covered by the rewrite")
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
                raise AttentionError(f"node {n.name}: rank of {which!r} unknown or {r}: want 3 or 4")
            if r == 3 and which == k:
                keys = heads_first(k)
            elif r == 3:
                values = heads_first(v)
        if past_k:
            keys = op("Concat", [past_k, keys], outs[1], axis=2)
            values = op("Concat", [past_v, values], outs[2], axis=2)
        elif outs[1] or outs[2]:
            raise AttentionError(f"node {n.name}: present K/V without past K/V: not covered by the rewrite")
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
            raise AttentionError(f"opset {default}: Softmax over one axis needs 13 or later")
    return model, count


def with_past_feeds(sess, cfg: dict, rng, error=AttentionError) -> dict:
    """Random inputs of the with-past decoder: batch 2, 3 new positions after 5, 7 encoder
    positions with the second row's last two padded; error(why) for an input it has no feed for."""
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
            raise error(f"decoder input {i.name!r}: no random feed for it")
    return feeds


def check_decoder(ref_path: str, got_path: str, cfg: dict, seed: int = 5, what: str = "plain attention",
                  ref: str = "the fused", error=AttentionError) -> float:
    """The rewritten with-past decoder's outputs (what: the rewrite) against the original's (ref)
    on random inputs (ORT, CPU); returns the worst |diff| over the float outputs, raises error past
    DECODER_TOLERANCE or when an integer output (the argmax ids) differs at all."""
    from . import graph_check as gc
    a, b = gc.session(ref_path), gc.session(got_path)
    feeds = with_past_feeds(a, cfg, np.random.default_rng(seed), error)
    names = [o.name for o in a.get_outputs()]
    worst = 0.0
    for name, x, y in zip(names, a.run(names, feeds), b.run(names, feeds)):
        if x.dtype.kind == "f":
            if not np.allclose(x, y, **DECODER_TOLERANCE):
                raise error(f"{name}: {what} differs from {ref} by up to {float(np.max(np.abs(x - y))):.3g}")
            worst = max(worst, float(np.max(np.abs(x - y))))
        elif not np.array_equal(x, y):
            raise error(f"{name}: {what} gives other ids than {ref}")
    return worst


def check_decoders(at: dict, cfg: dict, name: str, what: str, ref: str, word: str, error=AttentionError) -> None:
    """A decoder rewrite's checks (at: role -> (original path, rewritten path)): the rewritten
    with-past decoder against the original (check_decoder; what: the rewrite, ref: the original)
    and the rewritten static decoder against the rewritten with-past one (word: the rewrite's
    word for them), each logged for the bundle name."""
    from .static_decoder import check_variant_static
    if "decoder" in at:
        worst = check_decoder(*at["decoder"], cfg, what=what, ref=ref, error=error)
        log(f"bundle {name}: {word} decoder within {worst:.3g} of {ref}")
    if "decoder_static" in at:
        worst = check_variant_static(at["decoder"][1], at["decoder_static"][1], cfg, word, error)
        log(f"bundle {name}: {word} static decoder within {worst:.3g} of the {word} decoder")


def _const(g: onnx.GraphProto, name: str, producer: dict) -> np.ndarray | None:
    """The value of name when it is a constant (an initializer or a Constant node), flat."""
    for t in g.initializer:
        if t.name == name:
            return numpy_helper.to_array(t).reshape(-1)
    n = producer.get(name)
    if n is None or n.op_type != "Constant" or len(n.attribute) != 1:
        return None
    v = helper.get_attribute_value(n.attribute[0])  # value (a tensor), value_float, value_ints, ...
    return np.asarray(numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else v).reshape(-1)


def _const_scalar(g: onnx.GraphProto, name: str, producer: dict) -> float | None:
    v = _const(g, name, producer)
    return float(v[0]) if v is not None and v.size == 1 else None


def const_ints(g: onnx.GraphProto, name: str, producer: dict) -> list | None:
    """The value of name when it is a constant (_const), as a flat list."""
    v = _const(g, name, producer)
    return None if v is None else v.tolist()


def fuse_vision_attention(model: onnx.ModelProto, heads: int, hidden: int) -> tuple[onnx.ModelProto, int]:
    """The vision tower with each BLIP-2 attention (the module doc's pattern) as Split and one
    com.microsoft.MultiHeadAttention, and how many there were; what only they read is removed.
    Raises AttentionError when a Softmax is not in that pattern."""
    g = model.graph
    producer = {o: n for n in g.node for o in n.output}
    consumers: dict[str, list] = {}
    for n in g.node:
        for x in n.input:
            consumers.setdefault(x, []).append(n)

    def prod(name, op):
        n = producer.get(name)
        return n if n is not None and n.op_type == op else None

    def only_consumer(name, op):
        c = consumers.get(name, [])
        return c[0] if len(c) == 1 and c[0].op_type == op else None

    def attr(n, name):
        return next((helper.get_attribute_value(a) for a in n.attribute if a.name == name), None)

    split_sizes = "fused_attention/split_sizes"  # + _3 (q, k, v) or _2 (k, v)
    replace = {}  # the final Reshape's output -> the nodes in its place (names may repeat or be empty)
    count = 0
    for sm in [n for n in g.node if n.op_type == "Softmax"]:
        where = sm.name or sm.output[0]
        if attr(sm, "axis") not in (-1, 3):
            raise AttentionError(f"vision Softmax {where}: axis {attr(sm, 'axis')}, not the keys'")
        mul = prod(sm.input[0], "Mul")
        mm = mul and prod(mul.input[0], "MatMul")
        scale = mul and _const_scalar(g, mul.input[1], producer)
        gq = mm and prod(mm.input[0], "Gather")
        kt = mm and prod(mm.input[1], "Transpose")
        gk = kt and prod(kt.input[0], "Gather")
        mm2 = only_consumer(sm.output[0], "MatMul")
        gv = mm2 and prod(mm2.input[1], "Gather")
        tr = mm2 and only_consumer(mm2.output[0], "Transpose")
        out = tr and only_consumer(tr.output[0], "Reshape")
        # The last layer runs for the CLS query alone (scripts/vision.py): q is its own
        # projection, [B, 1, D] split into heads, and only k and v come from the packed one.
        tq = gq is None and mm and prod(mm.input[0], "Transpose")
        rq = tq and attr(tq, "perm") == [0, 2, 1, 3] and prod(tq.input[0], "Reshape")
        parts = [gk, gv] if rq else [gq, gk, gv]
        if not all([mul, mm, scale, kt, tr, out]) or not all(parts) or \
                attr(kt, "perm") != [0, 1, 3, 2] or attr(tr, "perm") != [0, 2, 1, 3] or \
                len({x.input[0] for x in parts}) != 1:
            raise AttentionError(f"vision Softmax {where}: not the BLIP-2 attention pattern the rewrite knows")
        t5 = prod(parts[0].input[0], "Transpose")
        r5 = t5 and prod(t5.input[0], "Reshape")
        idx = [const_ints(g, x.input[1], producer) for x in parts]
        if not r5 or attr(t5, "perm") != [2, 0, 3, 1, 4] or idx != [[i] for i in range(len(parts))] or \
                any(attr(x, "axis") not in (0, None) for x in parts):
            raise AttentionError(f"vision Softmax {where}: q, k, v not gathered from one "
                                 f"[{len(parts)}, B, H, S, d] transpose")
        packed = r5.input[0]  # [B, S, n * D], laid out [n][H][d] on its last axis
        p = where + "/fused/"
        q, k, v = rq.input[0] if rq else p + "q", p + "k", p + "v"
        sizes = f"{split_sizes}_{len(parts)}"
        if sizes not in {t.name for t in g.initializer}:
            g.initializer.append(numpy_helper.from_array(np.array([hidden] * len(parts), np.int64), sizes))
        replace[out.output[0]] = [
            helper.make_node("Split", [packed, sizes], ([] if rq else [q]) + [k, v], name=p + "Split", axis=-1),
            helper.make_node("MultiHeadAttention", [q, k, v], [out.output[0]], name=p + "MultiHeadAttention",
                             domain="com.microsoft", num_heads=heads, scale=float(scale))]
        count += 1
    if not count:
        return model, 0
    if next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0) < 13:
        raise AttentionError("vision graph below opset 13: Split takes its sizes as an input from 13")
    nodes = []
    for n in g.node:
        nodes.extend(replace.get(n.output[0], [n]) if n.op_type == "Reshape" else [n])
    del g.node[:]
    g.node.extend(nodes)
    drop_dead(g)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model, count


def drop_dead(g: onnx.GraphProto, error=AttentionError) -> None:
    """Remove the nodes and initializers nothing reads any more (the graph's outputs are read), and
    the value types of what is gone. A graph with subgraphs (If, Loop, Scan), whose reads this does
    not follow, is refused."""
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for n in g.node for a in n.attribute):
        raise error("graph with subgraphs: not covered by the rewrite")
    while True:
        read = {o.name for o in g.output} | {x for n in g.node for x in n.input}
        live = [n for n in g.node if any(o in read for o in n.output if o)]
        if len(live) == len(g.node):
            break
        del g.node[:]
        g.node.extend(live)
    read = {x for n in g.node for x in n.input} | {o.name for o in g.output} | {i.name for i in g.input}
    keep = [t for t in g.initializer if t.name in read]
    del g.initializer[:]
    g.initializer.extend(keep)
    made = {o for n in g.node for o in n.output}
    info = [v for v in g.value_info if v.name in made]
    del g.value_info[:]
    g.value_info.extend(info)


def check_vision(variant_dir: str, ref_dir: str) -> float:
    """The variant's vision features against the original bundle's on the real screens (ORT,
    CPU); returns the worst |diff|, raises AttentionError past VISION_TOLERANCE."""
    from .half import feature_pairs
    worst = 0.0
    for a, b in feature_pairs(ref_dir, variant_dir):
        if not np.allclose(b, a, **VISION_TOLERANCE):
            raise AttentionError("vision features: the fused attention differs by up to "
                                 f"{float(np.max(np.abs(a - b))):.3g}")
        worst = max(worst, float(np.max(np.abs(a - b))))
    return worst


def attention_bundle(in_dir: str, out_dir: str, decoder: str | None = None, vision: str | None = None) -> dict:
    """Write the attention variant of the fp32 bundle in_dir to out_dir (decoder "plain", vision
    "fused"; at least one); returns its manifest."""
    if decoder not in (None, "plain") or vision not in (None, "fused") or not (decoder or vision):
        raise AttentionError(f"decoder {decoder!r}, vision {vision!r}: want decoder plain and/or vision fused")
    roles = (DECODER_GRAPHS if decoder else ()) + (("vision",) if vision else ())
    rewritten = {}

    def convert(role, src, manifest):
        if role == "vision":
            v = manifest["vision"]
            model, count = fuse_vision_attention(onnx.load(src), v["num_heads"], v["hidden_size"])
            what, did = "attentions", "fused into MultiHeadAttention"
        else:
            model, count = plain_attention(onnx.load(src))
            what, did = "MultiHeadAttention nodes", "as plain operators"
        if not count:
            raise AttentionError(f"{role}: no attention to rewrite")
        rewritten[role] = count
        log(f"  {role}: {count} {what} {did}")
        return model

    def checks(at, staged, manifest):
        if vision:
            worst = check_vision(staged, in_dir)
            log(f"bundle {out_dir}: fused vision features within {worst:.3g} of the plain ones")
        if decoder:
            check_decoders(at, manifest["model"], out_dir, "plain attention", "the fused one", "plain")

    return rewrite_variant(in_dir, out_dir, "attention", "attention already rewritten", roles, convert,
                           lambda: {"tool": "scripts.attention", "decoder": decoder or "fused",
                                    "vision": vision or "plain", "nodes": rewritten},
                           checks, "attention", AttentionError)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Write an attention variant of an fp32 autoui bundle: the decoder's "
                                "fused attention as plain operators, and/or the vision tower's fused.")
    p.add_argument("--in", dest="in_dir", required=True, help="fp32 bundle directory")
    p.add_argument("--out", required=True, help="bundle directory to write")
    p.add_argument("--decoder", choices=["plain"], help="the decoder graphs' MultiHeadAttention as MatMul, Add, "
                   "Softmax, MatMul")
    p.add_argument("--vision", choices=["fused"], help="the vision tower's attention as MultiHeadAttention")
    args = p.parse_args(argv)
    if not (args.decoder or args.vision):
        p.error("nothing to rewrite: give --decoder plain and/or --vision fused")
    return run_tool("attention", lambda: attention_bundle(args.in_dir, args.out, args.decoder, args.vision),
                    (AttentionError,))


if __name__ == "__main__":
    sys.exit(main())
