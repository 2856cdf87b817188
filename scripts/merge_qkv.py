"""Write the merged-projection variant of an fp32 autoui bundle whose decoder attention is plain
(scripts.attention --decoder plain), for timing on a GPU: in each decoder self-attention the Q, K
and V projections, each a MatMul split into heads (Reshape, Transpose), become one MatMul of the
three weights side by side, one Reshape and Transpose into [3, B, H, S, d], and one Split.

  python -m scripts.merge_qkv --in BUNDLE --out VARIANT
  python -m scripts.half --in VARIANT --out VARIANT_FP16 --roles all ...

Why (docs/cuda.md, "Attention and the cache in fp16"): a captured base decoder call at 64 rows
is ~400 kernels of ~20 us, so a kernel fewer is time saved. Per layer the three projections and
their three head transposes (6 kernels, each a small GEMM or a pass over [B, S, D]) become 3: a
GEMM three times as wide (which fills more of a large GPU), one transpose and one split; the
Reshapes and Squeezes are views. 36 kernels fewer in a base decoder call. The feed-forward's two
input projections (wi_0, wi_1) are left: merged they would need a Split before the gate, as many
kernels as now. The encoder (whose heads split through shapes computed at run time, and which
runs beside the vision tower) is left too. On the CPU the weights' reading sets the pace of a
decoder call, which the merge does not change.

Run it on an fp32 bundle with the plain decoder attention (after scripts.skip_norm if that too),
before scripts.half. The rewritten decoder must give the original's outputs on random inputs
(scripts.attention's DECODER_TOLERANCE, argmax ids identical) and the static decoder the
with-past decoder's (scripts.static_decoder.check_static). Graph IO is unchanged; the manifest
records the rewrite under "merge_qkv".
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .attention import check_decoders, const_ints, drop_dead
from .bundle_files import log, rewrite_variant, run_tool

GRAPHS = ("decoder", "decoder_static")
HEADS_FIRST = [0, 2, 1, 3]  # [B, S, H, d] -> [B, H, S, d]


class MergeError(RuntimeError):
    pass


def _heads_split(g, mm, consumers, producer, inits, graph_outputs):
    """For a projection MatMul whose output only goes through Reshape [0, 0, H, d or -1] and
    Transpose [0, 2, 1, 3]: (H, d, the Reshape, the Transpose); else None."""
    w = inits[mm.input[1]]
    width = w.dims[1]
    after = consumers.get(mm.output[0], [])
    if len(after) != 1 or after[0].op_type != "Reshape" or after[0].input[0] != mm.output[0] \
            or mm.output[0] in graph_outputs:
        return None
    rs = after[0]
    if any(a.name == "allowzero" and a.i for a in rs.attribute):
        return None
    shape = const_ints(g, rs.input[1], producer)
    if not shape or len(shape) != 4 or shape[:2] != [0, 0] or shape[2] <= 0 or width % shape[2]:
        return None
    heads, d = shape[2], width // shape[2]
    if shape[3] not in (-1, d):
        return None
    after = consumers.get(rs.output[0], [])
    if len(after) != 1 or after[0].op_type != "Transpose" or rs.output[0] in graph_outputs:
        return None
    tr = after[0]
    perm = [list(a.ints) for a in tr.attribute if a.name == "perm"]
    if perm != [HEADS_FIRST]:
        return None
    return heads, d, rs, tr


def merge_qkv(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    """model with each group of projections that read one input and are split into heads alike
    (a self-attention's Q, K, V) merged into one MatMul, Transpose and Split; and how many groups."""
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    consumers = defaultdict(list)
    for n in g.node:
        for i in n.input:
            consumers[i].append(n)
    graph_outputs = {o.name for o in g.output}
    groups = defaultdict(list)
    for n in g.node:
        if n.op_type != "MatMul" or n.domain not in ("", "ai.onnx") or n.input[1] not in inits:
            continue
        w = inits[n.input[1]]
        if len(w.dims) != 2 or w.data_type != onnx.TensorProto.FLOAT:
            continue
        split = _heads_split(g, n, consumers, producer, inits, graph_outputs)
        if split is not None:
            groups[n.input[0]].append((n, w, *split))
    drop, new_before, count = set(), {}, 0
    for x, members in groups.items():
        if len(members) < 2 or len({(m[1].dims[0], m[2], m[3]) for m in members}) != 1:
            continue
        first = members[0][0]
        heads, d, k = members[0][2], members[0][3], len(members)
        p = f"{first.name or first.output[0]}/merged_qkv"
        merged = np.concatenate([numpy_helper.to_array(m[1]) for m in members], axis=1)
        g.initializer.extend([
            numpy_helper.from_array(merged, f"{p}/weight"),
            numpy_helper.from_array(np.array([0, 0, k, heads, d], np.int64), f"{p}/shape"),
            numpy_helper.from_array(np.zeros(5, np.int64), f"{p}/same"),
            numpy_helper.from_array(np.ones(k, np.int64), f"{p}/split"),
            numpy_helper.from_array(np.array([0], np.int64), f"{p}/axis0"),
        ])
        parts = [f"{p}/part{i}" for i in range(k)]
        nodes = [
            helper.make_node("MatMul", [x, f"{p}/weight"], [f"{p}/y"], name=f"{p}/MatMul"),
            helper.make_node("Reshape", [f"{p}/y", f"{p}/shape"], [f"{p}/bsphd"], name=f"{p}/Reshape"),
            # [B, S, k, H, d] -> [k, B, H, S, d]: every part's heads first in one pass
            helper.make_node("Transpose", [f"{p}/bsphd"], [f"{p}/pbhsd"], name=f"{p}/Transpose", perm=[2, 0, 3, 1, 4]),
            # a Reshape to the same shape (a view): without it ORT's transpose optimizer moves the
            # Transpose past the Split, one per part, as many transposes as before the merge
            helper.make_node("Reshape", [f"{p}/pbhsd", f"{p}/same"], [f"{p}/parts"], name=f"{p}/Keep"),
            helper.make_node("Split", [f"{p}/parts", f"{p}/split"], parts, name=f"{p}/Split", axis=0),
        ]
        for i, (part, (mm, _, _, _, rs, tr)) in enumerate(zip(parts, members)):
            nodes.append(helper.make_node("Squeeze", [part, f"{p}/axis0"], [tr.output[0]], name=f"{p}/Squeeze{i}"))
            drop.update(id(n) for n in (mm, rs, tr))
        new_before[id(first)] = nodes
        count += 1
    if not count:
        return model, 0
    kept = []
    for n in g.node:
        kept.extend(new_before.get(id(n), []))
        if id(n) not in drop:
            kept.append(n)
    del g.node[:]
    g.node.extend(kept)
    drop_dead(g, MergeError)  # the separate weights, and shapes only their Reshapes read
    return model, count


def merge_bundle(in_dir: str, out_dir: str) -> dict:
    """Write the merged-projection variant of the fp32 bundle in_dir to out_dir; returns its manifest."""
    merged = {}

    def convert(role, src, manifest):
        model, count = merge_qkv(onnx.load(src))
        if not count:
            raise MergeError(f"{role}: no projections split into heads to merge (the decoder's attention must be "
                             f"plain: scripts.attention --decoder plain)")
        merged[role] = count
        log(f"  {role}: {count} Q/K/V projections merged")
        return model

    def checks(at, staged, manifest):
        check_decoders(at, manifest["model"], out_dir, "the merged projections", "the separate ones", "merged",
                       MergeError)

    return rewrite_variant(in_dir, out_dir, "merge_qkv", "projections already merged", GRAPHS, convert,
                           lambda: {"tool": "scripts.merge_qkv", "groups": merged}, checks, "merged-projection",
                           MergeError)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Write the variant of an fp32 autoui bundle (plain decoder attention) "
                                "whose decoder self-attentions project Q, K and V in one MatMul.")
    p.add_argument("--in", dest="in_dir", required=True, help="fp32 bundle directory with plain decoder attention")
    p.add_argument("--out", required=True, help="bundle directory to write")
    args = p.parse_args(argv)
    return run_tool("merge_qkv", lambda: merge_bundle(args.in_dir, args.out), (MergeError,))


if __name__ == "__main__":
    sys.exit(main())
