"""The decoder as two graphs (bundle format 2), from traced graphs or from a format-1 merged decoder.

- decoder_with_past_model.onnx: optimum's with-past IO (input_ids, encoder_attention_mask,
  past_key_values.{i}.{decoder,encoder}.{key,value} -> logits, present.{i}.decoder.{key,value}).
  The first call feeds zero-length decoder pasts.
- decoder_cross_model.onnx: encoder_hidden_states -> present.{i}.encoder.{key,value}, the
  cross-attention K/V every call reads, computed once per request.

Why not the merged If: ONNX Runtime prepacks the weights of each If branch separately, so the
merged decoder held its weights twice once prepacked (+400 MB at T5-base), and every cached
call paid the If (docs/decoding.md).
"""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper


class SplitError(RuntimeError):
    pass


def _slice(g: onnx.GraphProto, outputs: list[str]) -> list[onnx.NodeProto]:
    """The nodes the outputs depend on, in graph order."""
    nodes = list(g.node)
    prod = {o: k for k, n in enumerate(nodes) for o in n.output if o}  # value -> index of its node
    keep, stack = set(), list(outputs)
    while stack:
        k = prod.get(stack.pop())
        if k is None or k in keep:
            continue
        keep.add(k)
        stack.extend(nodes[k].input)
        for a in nodes[k].attribute:  # names a subgraph reads from the enclosing scope
            if a.type == onnx.AttributeProto.GRAPH:
                stack.extend(i for sn in a.g.node for i in sn.input)
    return [n for k, n in enumerate(nodes) if k in keep]


def _vi(name: str, elem: int, dims: list) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, dims)


def _standalone(nodes: list, rename: dict, inputs: list, outputs: list, inits: list, like: onnx.ModelProto,
                name: str) -> onnx.ModelProto:
    """A model of nodes whose outputs are renamed (every consumer too) and whose initializers are the
    ones the nodes read."""
    out_nodes = []
    read = set()
    for n in nodes:
        nn = onnx.NodeProto()
        nn.CopyFrom(n)
        for i, x in enumerate(nn.input):
            nn.input[i] = rename.get(x, x)
        for i, x in enumerate(nn.output):
            nn.output[i] = rename.get(x, x)
        read.update(nn.input)
        for a in nn.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                read.update(i for sn in a.g.node for i in sn.input)
        out_nodes.append(nn)
    used = [t for t in inits if t.name in read]
    graph = helper.make_graph(out_nodes, name, inputs, outputs, initializer=used)
    return helper.make_model(graph, opset_imports=list(like.opset_import), ir_version=like.ir_version)


def split_decoder(no_past: onnx.ModelProto, with_past: onnx.ModelProto, n_layers: int, n_heads: int, d_kv: int,
                  vocab: int, d_model: int) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """(with-past decoder, cross graph) from the two traced decoders: the no-past graph gives the
    cross-attention K/V projections of encoder_hidden_states, the with-past graph everything else."""
    f = TensorProto.FLOAT
    # With past: logits and the self-attention presents only.
    keep = ["logits"] + [f"present.{i}.decoder.{kv}" for i in range(n_layers) for kv in ("key", "value")]
    names = {o.name for o in with_past.graph.output}
    if not set(keep) <= names:
        raise SplitError(f"with-past decoder lacks outputs {sorted(set(keep) - names)}")
    nodes = _slice(with_past.graph, keep)
    inputs = [_vi("input_ids", TensorProto.INT64, ["batch_size", "decoder_sequence_length"]),
              _vi("encoder_attention_mask", TensorProto.INT64, ["batch_size", "encoder_sequence_length"])]
    outputs = [_vi("logits", f, ["batch_size", "decoder_sequence_length", vocab])]
    for i in range(n_layers):
        for kv in ("key", "value"):
            inputs.append(_vi(f"past_key_values.{i}.decoder.{kv}", f,
                              ["batch_size", n_heads, "past_decoder_sequence_length", d_kv]))
        for kv in ("key", "value"):
            inputs.append(_vi(f"past_key_values.{i}.encoder.{kv}", f,
                              ["batch_size", n_heads, "encoder_sequence_length", d_kv]))
        for kv in ("key", "value"):
            outputs.append(_vi(f"present.{i}.decoder.{kv}", f,
                               ["batch_size", n_heads, "present_decoder_sequence_length", d_kv]))
    read = {x for n in nodes for x in n.input}
    unknown = {i.name for i in with_past.graph.input} & read - {v.name for v in inputs}
    if unknown:
        raise SplitError(f"with-past decoder reads inputs outside the format: {sorted(unknown)}")
    dec = _standalone(nodes, {}, inputs, outputs, list(with_past.graph.initializer), with_past,
                      "decoder_with_past")

    # Cross: what the no-past graph's present.{i}.encoder.* depend on.
    want = [f"present.{i}.encoder.{kv}" for i in range(n_layers) for kv in ("key", "value")]
    names = {o.name for o in no_past.graph.output}
    if not set(want) <= names:
        raise SplitError(f"no-past decoder lacks outputs {sorted(set(want) - names)}")
    nodes = _slice(no_past.graph, want)
    read = {x for n in nodes for x in n.input}
    graph_inputs = {i.name for i in no_past.graph.input}
    if read & graph_inputs - {"encoder_hidden_states"}:
        raise SplitError(f"cross-attention K/V depend on {sorted(read & graph_inputs - {'encoder_hidden_states'})}, "
                         "not only on encoder_hidden_states")
    cross = _standalone(nodes, {}, [_vi("encoder_hidden_states", f, ["batch_size", "encoder_sequence_length", d_model])],
                        [_vi(w, f, ["batch_size", n_heads, "encoder_sequence_length", d_kv]) for w in want],
                        list(no_past.graph.initializer), no_past, "decoder_cross")
    return dec, cross


def merged_branches(merged: onnx.ModelProto) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """(no-past, with-past) standalone models from a merged decoder (format 1, optimum layout): each
    If branch with the outer initializers it reads and its outputs under the outer names."""
    ifs = [n for n in merged.graph.node if n.op_type == "If"]
    if len(merged.graph.node) != 1 or len(ifs) != 1:
        raise SplitError("not a merged decoder: want one If node on use_cache_branch")
    branch = {a.name: a.g for a in ifs[0].attribute}
    outer_outputs = list(ifs[0].output)
    inits = list(merged.graph.initializer)
    out = []
    for key in ("else_branch", "then_branch"):
        g = branch[key]
        rename = {bo.name: outer for bo, outer in zip(g.output, outer_outputs)}
        # A branch output that is an outer input passes it through: keep the Identity, rename its output.
        inputs = list(merged.graph.input)
        outputs = [_vi(outer, o.type.tensor_type.elem_type, None) for o, outer in zip(g.output, outer_outputs)]
        out.append(_standalone(list(g.node), rename, inputs, outputs, inits + list(g.initializer), merged, key))
    return out[0], out[1]
