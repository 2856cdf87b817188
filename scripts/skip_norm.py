"""Write the skip-norm variant of an fp32 autoui bundle, for timing on a GPU: in the T5 graphs
(encoder, decoder, static decoder) each residual Add and the RMS norm that reads its sum become
one com.microsoft.SkipSimplifiedLayerNormalization node.

  python -m scripts.skip_norm --in BUNDLE --out VARIANT
  python -m scripts.half --in VARIANT --out VARIANT_FP16 --roles all ...

Why (docs/cuda.md, "Attention and the cache in fp16"): ORT's session optimizer fuses T5's RMS
norm (Pow, ReduceMean, Add, Sqrt, Div, Mul) into SimplifiedLayerNormalization but leaves the
residual Add before it, so a base decoder call runs 36 Adds and 36 norms as 72 kernels, each
reading the residual stream once more. On a GPU where a call is the host launching its ~300
kernels (batch 1) or a pass over memory per kernel (batch 64) that is ~36 kernels and passes
too many. The fusion is ORT's own: onnxruntime.transformers' optimizer (the pinned wheel) with
every fusion off but its layer-norm and skip-layer-norm ones (it also drops the norms' float32
to float32 Casts), so the rest of each graph is as exported. On the CPU it changes nothing measurable (the weights' reading sets the pace), so it is
a variant, not the export's default.

It runs on an fp32 bundle, also on an attention variant (scripts.attention), before
scripts.half. The rewritten graphs must give the original's outputs on random inputs (decoder:
scripts.attention's DECODER_TOLERANCE, argmax ids identical; encoder: the export's tolerance),
and the static decoder the with-past decoder's (scripts.static_decoder.check_static). Graph IO
is unchanged; the manifest records the rewrite under "skip_norm".
"""

from __future__ import annotations

import argparse
import logging
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .bundle_files import log, rewrite_variant, run_tool

GRAPHS = ("encoder", "decoder", "decoder_static")
FUSED = "SkipSimplifiedLayerNormalization"


class SkipNormError(RuntimeError):
    pass


def fuse_skip_norm(path: str) -> tuple[onnx.ModelProto, int]:
    """The graph at path (its external data beside it) with T5's RMS norms fused, each one after
    a residual Add into SkipSimplifiedLayerNormalization with that Add, and how many of those."""
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model
    opts = FusionOptions("t5")
    for k in vars(opts):
        if k.startswith("enable_"):
            setattr(opts, k, False)
    # shape inference tells the fusion that an Add's two inputs have one shape (no broadcast)
    opts.enable_layer_norm = opts.enable_skip_layer_norm = opts.enable_shape_inference = True
    quiet = logging.getLogger("onnxruntime.transformers")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # "Model producer not matched": ours is autoui's export
    try:
        m = optimize_model(path, model_type="t5", num_heads=0, hidden_size=0, opt_level=0,
                           optimization_options=opts).model
    finally:
        quiet.setLevel(level)
    if not any(o.domain == "com.microsoft" for o in m.opset_import):
        m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 0)
    _expand_lone_norms(m.graph, opset)
    return m, sum(n.op_type == FUSED for n in m.graph.node)


def _expand_lone_norms(g: onnx.GraphProto, opset: int) -> None:
    """Each SimplifiedLayerNormalization the fusion made without a residual Add to take in (the
    first, on the embeddings) back as the export's operators: ORT registers that op in the ONNX
    domain, where the ONNX checker does not know it, and ORT's session fuses it again anyway."""
    nodes = []
    for n in g.node:
        if n.op_type != "SimplifiedLayerNormalization" or n.domain not in ("", "ai.onnx"):
            nodes.append(n)
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if attrs.get("axis", -1) != -1 or len(n.input) != 2 or len(n.output) != 1:
            raise SkipNormError(f"{n.name}: a SimplifiedLayerNormalization the expansion does not cover")
        x, w, y, p = n.input[0], n.input[1], n.output[0], f"{n.name or n.output[0]}/expanded"
        for name, value in ((f"{p}/two", 2.0), (f"{p}/eps", float(attrs.get("epsilon", 1e-5))), (f"{p}/one", 1.0)):
            g.initializer.append(numpy_helper.from_array(np.array(value, np.float32), name))
        if opset >= 18:  # ReduceMean's axes: an input from opset 18, an attribute before
            g.initializer.append(numpy_helper.from_array(np.array([-1], np.int64), f"{p}/axes"))
            mean = helper.make_node("ReduceMean", [f"{p}/sq", f"{p}/axes"], [f"{p}/var"], name=f"{p}/ReduceMean", keepdims=1)
        else:
            mean = helper.make_node("ReduceMean", [f"{p}/sq"], [f"{p}/var"], name=f"{p}/ReduceMean", axes=[-1], keepdims=1)
        nodes += [
            helper.make_node("Pow", [x, f"{p}/two"], [f"{p}/sq"], name=f"{p}/Pow"),
            mean,
            helper.make_node("Add", [f"{p}/var", f"{p}/eps"], [f"{p}/var_eps"], name=f"{p}/Add"),
            helper.make_node("Sqrt", [f"{p}/var_eps"], [f"{p}/std"], name=f"{p}/Sqrt"),
            helper.make_node("Div", [f"{p}/one", f"{p}/std"], [f"{p}/inv"], name=f"{p}/Div"),
            helper.make_node("Mul", [x, f"{p}/inv"], [f"{p}/normed"], name=f"{p}/Mul"),
            helper.make_node("Mul", [w, f"{p}/normed"], [y], name=f"{p}/Mul_1"),
        ]
    del g.node[:]
    g.node.extend(nodes)


def check_encoder(ref_path: str, got_path: str, vocab: int, seed: int = 7) -> float:
    """The rewritten encoder's output against the original's on random prompts (ORT, CPU; batch 2,
    the second row's last three positions padded); returns the worst |diff|, raises SkipNormError
    past the export's encoder tolerance."""
    from . import graph_check as gc
    rng = np.random.default_rng(seed)
    mask = np.ones((2, 11), np.int64)
    mask[1, 8:] = 0
    feeds = {"input_ids": rng.integers(0, vocab, (2, 11), dtype=np.int64), "attention_mask": mask}
    a, b = gc.session(ref_path), gc.session(got_path)
    x, y = a.run(None, feeds)[0], b.run(None, feeds)[0]
    tol = gc.TOLERANCES["encoder"]
    if not np.allclose(x, y, **tol):
        raise SkipNormError(f"encoder: the fused norms differ from the plain ones by up to {float(np.max(np.abs(x - y))):.3g}")
    return float(np.max(np.abs(x - y)))


def skip_norm_bundle(in_dir: str, out_dir: str) -> dict:
    """Write the skip-norm variant of the fp32 bundle in_dir to out_dir; returns its manifest."""
    from .attention import check_decoders
    fused = {}

    def convert(role, src, manifest):
        model, count = fuse_skip_norm(src)
        if not count:
            raise SkipNormError(f"{role}: no residual Add before an RMS norm to fuse")
        fused[role] = count
        log(f"  {role}: {count} norms fused with their residual Add")
        return model

    def checks(at, staged, manifest):
        if "encoder" in at:
            worst = check_encoder(*at["encoder"], manifest["model"]["vocab_size"])
            log(f"bundle {out_dir}: encoder within {worst:.3g} of the plain norms'")
        check_decoders(at, manifest["model"], out_dir, "the fused norms", "the plain ones", "fused", SkipNormError)

    return rewrite_variant(in_dir, out_dir, "skip_norm", "norms already fused", GRAPHS, convert,
                           lambda: {"tool": "scripts.skip_norm", "fused": FUSED, "nodes": fused}, checks, "skip-norm",
                           SkipNormError)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Write the variant of an fp32 autoui bundle whose T5 graphs run each "
                                "residual Add and the RMS norm after it as one SkipSimplifiedLayerNormalization.")
    p.add_argument("--in", dest="in_dir", required=True, help="fp32 bundle directory (an attention variant too)")
    p.add_argument("--out", required=True, help="bundle directory to write")
    args = p.parse_args(argv)
    return run_tool("skip_norm", lambda: skip_norm_bundle(args.in_dir, args.out), (SkipNormError,))


if __name__ == "__main__":
    sys.exit(main())
