"""Build optimum's merged decoder (decoder_model_merged.onnx) from a format-2 bundle's two decoder graphs.

  python -m scripts.peers.merged_decoder BUNDLE_DIR OUT.onnx

Bundles since format 2 hold decoder_with_past_model.onnx and decoder_cross_model.onnx
(docs/bundle-format.md). Tools that only load Hugging Face optimum's merged layout
(transformers.js, optimum's ORTModelForSeq2SeqLM) get the equivalent single graph from this:
inputs input_ids, encoder_attention_mask, encoder_hidden_states, past_key_values.{i}.{decoder,
encoder}.{key,value}, use_cache_branch; outputs logits, present.{i}.{decoder,encoder}.{key,value};
one If on use_cache_branch:
- else (first call): the cross graph on encoder_hidden_states, then the with-past decoder on a
  zero-length self-attention past made inside the branch (the past inputs are not read);
  present.{i}.encoder.* are the cross K/V.
- then (cached calls): the with-past decoder on the fed pasts; present.{i}.encoder.* are empty
  constants [0, heads, 1, d_kv], as in optimum's merged files: the caller keeps the first call's.
Every weight is an initializer of the outer graph, read by the branches from the outer scope,
so the file stores it once (ONNX Runtime still prepacks it once per branch: this is the layout
bundle format 2 moved away from). An int8 bundle gives an int8 merged decoder.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..bundle_format import ARGMAX_OUTPUT, format_error


def _tensor_bytes(t: onnx.TensorProto) -> bytes:
    return bytes(t.raw_data) if t.raw_data else np.ascontiguousarray(numpy_helper.to_array(t)).tobytes()


def _same(a: onnx.TensorProto, b: onnx.TensorProto) -> bool:
    return a.data_type == b.data_type and list(a.dims) == list(b.dims) and _tensor_bytes(a) == _tensor_bytes(b)


def _branch_nodes(nodes, prefix: str, rename: dict, keep: set) -> list:
    """Copies of nodes with every produced value (and node name) prefixed, inputs renamed alike;
    names in keep (outer inputs, initializers) and in rename are mapped explicitly."""
    produced = {o for n in nodes for o in n.output if o}
    mapping = {o: f"{prefix}/{o}" for o in produced}
    mapping.update(rename)

    def fix(name):
        return mapping.get(name, name) if name not in keep or name in rename else name

    out = []
    for n in nodes:
        nn = onnx.NodeProto()
        nn.CopyFrom(n)
        for i, x in enumerate(nn.input):
            if x:
                nn.input[i] = fix(x)
        for i, x in enumerate(nn.output):
            if x:
                nn.output[i] = fix(x)
        if nn.name:
            nn.name = f"{prefix}/{nn.name}"
        for a in nn.attribute:
            if a.type == onnx.AttributeProto.GRAPH or a.graphs:
                raise ValueError(f"node {n.name} ({n.op_type}) has a subgraph; the decoder graphs have none")
        out.append(nn)
    return out


def build(dec: onnx.ModelProto, cross: onnx.ModelProto, n_layers: int, n_heads: int, d_kv: int) -> onnx.ModelProto:
    """The merged decoder of a with-past decoder and a cross graph (both without subgraphs). dec is
    turned into it in place (its weights are not copied: T5-large's are 2 GB)."""
    f = TensorProto.FLOAT
    self_past = [f"past_key_values.{i}.decoder.{kv}" for i in range(n_layers) for kv in ("key", "value")]
    cross_past = [f"past_key_values.{i}.encoder.{kv}" for i in range(n_layers) for kv in ("key", "value")]
    self_present = [f"present.{i}.decoder.{kv}" for i in range(n_layers) for kv in ("key", "value")]
    cross_present = [f"present.{i}.encoder.{kv}" for i in range(n_layers) for kv in ("key", "value")]
    # The logits_argmax output (graphs revision 3) is autoui's own: optimum's layout has none.
    keep = [o for o in dec.graph.output if o.name != ARGMAX_OUTPUT]
    if len(keep) < len(dec.graph.output):
        del dec.graph.output[:]
        dec.graph.output.extend(keep)
        nodes = [n for n in dec.graph.node if list(n.output) != [ARGMAX_OUTPUT]]
        del dec.graph.node[:]
        dec.graph.node.extend(nodes)
    dec_ins = {i.name: i for i in dec.graph.input}
    want = ["input_ids", "encoder_attention_mask"] + self_past + cross_past
    if sorted(dec_ins) != sorted(want) or [o.name for o in dec.graph.output] != ["logits"] + self_present:
        raise ValueError("not a format-2 with-past decoder (inputs/outputs differ)")
    if [i.name for i in cross.graph.input] != ["encoder_hidden_states"] or \
            [o.name for o in cross.graph.output] != cross_present:
        raise ValueError("not a format-2 cross graph (inputs/outputs differ)")

    # Weights, once, in the outer graph; a cross-graph name that means another tensor is renamed.
    inits = {t.name: t for t in dec.graph.initializer}
    extra_inits = []
    cross_rename = {}
    for t in cross.graph.initializer:
        if t.name in inits:
            if _same(t, inits[t.name]):
                continue
            new = "cross/" + t.name
            while new in inits:
                new += "_"
            cross_rename[t.name] = new
            tt = onnx.TensorProto()
            tt.CopyFrom(t)
            tt.name = new
            t = tt
        inits[t.name] = t
        extra_inits.append(t)

    outer_inputs = [dec_ins["input_ids"], dec_ins["encoder_attention_mask"], cross.graph.input[0]]
    outputs = [dec.graph.output[0]]
    # optimum's names and sequence dims, per layer: (into, prefix, part, sequence dim)
    kv_values = ((outer_inputs, "past_key_values", "decoder", "past_decoder_sequence_length"),
                 (outer_inputs, "past_key_values", "encoder", "encoder_sequence_length_out"),
                 (outputs, "present", "decoder", "present_decoder_sequence_length"),
                 (outputs, "present", "encoder", "present_encoder_sequence_length"))
    for i in range(n_layers):
        for into, prefix, part, seq in kv_values:
            for kv in ("key", "value"):
                into.append(helper.make_tensor_value_info(f"{prefix}.{i}.{part}.{kv}", f,
                                                          ["batch_size", n_heads, seq, d_kv]))
    outer_inputs.append(helper.make_tensor_value_info("use_cache_branch", TensorProto.BOOL, [1]))
    outer = {v.name for v in outer_inputs} | set(inits)
    order = [o.name for o in outputs]

    def branch_graph(name, nodes, results):
        return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(results[o], f, None) for o in order])

    # then: the cached call.
    then_nodes = _branch_nodes(dec.graph.node, "with_past", {}, outer)
    results = {o: f"with_past/{o}" for o in ["logits"] + self_present}
    empty = helper.make_tensor("with_past/empty_cross_kv", f, [0, n_heads, 1, d_kv], [])
    for o in cross_present:
        results[o] = f"with_past/{o}"
        then_nodes.append(helper.make_node("Constant", [], [results[o]], name=f"with_past/{o}_empty", value=empty))
    then_g = branch_graph("with_past", then_nodes, results)

    # else: the first call: cross K/V, a zero-length self past of the input's batch, the decoder.
    p = "no_past"
    else_nodes = _branch_nodes(cross.graph.node, f"{p}/cross", cross_rename, outer)
    zero = f"{p}/zero_past"
    else_nodes += [
        helper.make_node("Shape", ["input_ids"], [f"{p}/ids_shape"], name=f"{p}/ids_shape"),
        helper.make_node("Constant", [], [f"{p}/batch_index"], name=f"{p}/batch_index",
                         value=numpy_helper.from_array(np.array([0], np.int64))),
        helper.make_node("Gather", [f"{p}/ids_shape", f"{p}/batch_index"], [f"{p}/batch"], name=f"{p}/batch", axis=0),
        helper.make_node("Constant", [], [f"{p}/past_dims"], name=f"{p}/past_dims",
                         value=numpy_helper.from_array(np.array([n_heads, 0, d_kv], np.int64))),
        helper.make_node("Concat", [f"{p}/batch", f"{p}/past_dims"], [f"{p}/past_shape"], name=f"{p}/past_shape",
                         axis=0),
        helper.make_node("ConstantOfShape", [f"{p}/past_shape"], [zero], name=zero,
                         value=numpy_helper.from_array(np.zeros(1, np.float32))),
    ]
    rename = {name: zero for name in self_past}
    rename.update({name: f"{p}/cross/{o}" for name, o in zip(cross_past, cross_present)})
    else_nodes += _branch_nodes(dec.graph.node, p, rename, outer)
    results = {o: f"{p}/{o}" for o in ["logits"] + self_present}
    results.update({o: f"{p}/cross/{o}" for o in cross_present})
    else_g = branch_graph(p, else_nodes, results)

    if_node = helper.make_node("If", ["use_cache_branch"], order, name="optimum::if",
                               then_branch=then_g, else_branch=else_g)
    opsets = {o.domain: o.version for o in list(dec.opset_import) + list(cross.opset_import)}
    g = dec.graph
    inputs = [onnx.ValueInfoProto() for _ in outer_inputs]
    for vi, src in zip(inputs, outer_inputs):
        vi.CopyFrom(src)
    outs = [onnx.ValueInfoProto() for _ in outputs]
    for vi, src in zip(outs, outputs):
        vi.CopyFrom(src)
    for field in (g.node, g.input, g.output, g.value_info):
        del field[:]
    g.node.append(if_node)
    g.input.extend(inputs)
    g.output.extend(outs)
    g.initializer.extend(extra_inits)
    g.name = "decoder_model_merged"
    del dec.opset_import[:]
    dec.opset_import.extend(helper.make_opsetid(d, v) for d, v in sorted(opsets.items()))
    return dec


def build_from_bundle(bundle: str) -> onnx.ModelProto:
    with open(os.path.join(bundle, "manifest.json")) as fh:
        m = json.load(fh)
    if err := format_error(bundle, m):
        raise ValueError(err)
    files, cfg = m["files"], m["model"]
    dec = onnx.load(os.path.join(bundle, files["decoder"]["path"]))
    cross = onnx.load(os.path.join(bundle, files["decoder_cross"]["path"]))
    return build(dec, cross, cfg["num_decoder_layers"], cfg["num_heads"], cfg["d_kv"])


def write(bundle: str, out: str) -> list[str]:
    """Write the merged decoder of bundle to out (its weights in one .data file beside it only past
    protobuf's ~1.9 GB); returns the external-data file names."""
    from ..bundle_files import EXTERNAL_DATA_BYTES, initializer_bytes
    model = build_from_bundle(bundle)
    data = os.path.basename(out) + ".data"
    for p in (out, os.path.join(os.path.dirname(out), data)):
        if os.path.exists(p):
            os.remove(p)
    if initializer_bytes(model) > EXTERNAL_DATA_BYTES:
        onnx.save_model(model, out, save_as_external_data=True, all_tensors_to_one_file=True, location=data,
                        size_threshold=1024, convert_attribute=False)
        return [data]
    with open(out, "wb") as fh:  # onnx.save_model would hold ~4 copies of the weights at once
        fh.write(model.SerializeToString())
    return []


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0].startswith("-"):
        print("usage: python -m scripts.peers.merged_decoder BUNDLE_DIR OUT.onnx", file=sys.stderr)
        return 2
    try:
        ext = write(argv[0], argv[1])
    except (ValueError, OSError, KeyError) as e:
        print(f"merged_decoder: {e}", file=sys.stderr)
        return 1
    print(argv[1] + "".join(f" (+ {x})" for x in ext), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
