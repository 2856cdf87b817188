"""What a graph needs before ONNX Runtime's CUDA provider may capture it as a CUDA graph and replay
it beside other runs of its session, modelled on ORT 1.29, the version autoui runs:

- no copy between host and device inside the run (memcpy_edges): a capture refuses such a session;
- no kernel that stages its arguments in host memory (host_staged). Concat, an unequal Split,
  ScatterND, NonMaxSuppression and the RNNs copy arrays of pointers or sizes up from a pinned host
  buffer (ORT's CudaAsyncBuffer) and hand that buffer back as soon as the copy is queued. A
  captured copy records the host address, so each replay copies whatever that buffer holds by
  then: once another run of the session (another batch size, captured or not) has reused it, the
  replayed Concat reads another run's pointers. Replays alone never show it; an H200 did, in a
  continuous decode whose joins ran the vision tower at 1 and 2 rows (2026-11-27, docs/cuda.md).
  ORT fixed it after 1.29 (microsoft/onnxruntime#32121);
- stage_free rewrites each Concat on the device as Pads and Adds: input i padded with zeros to the
  output's length along the axis at its own offset, the padded inputs summed. The same values
  (x + 0 = x; a -0.0 becomes +0.0), computed from kernel arguments alone; the pads are shape
  arithmetic on the host.
  The exported vision tower's one such Concat is [CLS; patches]: two Pads and an Add of 257 rows.

An approximation for bundles, not ORT: the placement model (placement) follows
onnxruntime/core/framework/fallback_cpu_capability.cc for these graphs' ops.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# Inputs that ONNX Runtime's CUDA kernels read from host memory (kernel definitions), and the ops
# whose output is in host memory.
CPU_INPUTS = {"Reshape": {1}, "Expand": {1}, "Slice": {1, 2, 3, 4}, "Unsqueeze": {1}, "Squeeze": {1},
              "ConstantOfShape": {0}, "Range": {0, 1, 2}, "Tile": {1}, "Split": {1}, "TopK": {1},
              "Pad": {1, 2, 3}}
CPU_OUTPUTS = {"Shape", "Size"}
SMALL_INITIALIZER = 100  # ORT's kSmallInitializerThreshold (elements)
# Kernels that stage arguments in host memory whatever their shapes (Concat and Split: see
# host_staged).
ALWAYS_STAGED = {"ScatterND", "NonMaxSuppression", "RNN", "LSTM", "GRU"}
MAX_BY_VALUE = 32  # ORT passes up to 32 pointers by value (TArray) where it can
# Prefix of every tensor and node stage_free adds.
ADDED_PREFIX = "capture/"


def with_external_as_inputs(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy whose initializers in external data are graph inputs of their dtype and dims."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    ext = [t for t in m.graph.initializer if t.data_location == TensorProto.EXTERNAL]
    for t in ext:
        m.graph.initializer.remove(t)
        m.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    return m


def _inferred(model: onnx.ModelProto) -> dict:
    """Shape inference's type of each tensor it types: name -> TypeProto.Tensor (of a copy with
    external initializers as inputs: model's weights need not be loaded)."""
    try:
        g = onnx.shape_inference.infer_shapes(with_external_as_inputs(model)).graph
    except Exception:  # noqa: BLE001 - untyped: nothing folds, every check errs towards the device, staged
        return {}
    return {v.name: v.type.tensor_type for v in list(g.value_info) + list(g.input) + list(g.output)}


class Placement(NamedTuple):
    """Where ONNX Runtime's CUDA provider runs each node of a graph (placement): node indices
    folded into constants or run on the CPU, the tensors in host memory, and shape inference's
    types, which the checks read too."""
    folded: set
    cpu: set
    host: set
    types: dict

    def on_device(self, model: onnx.ModelProto):
        """(index, node) of each node that runs on the device."""
        for k, n in enumerate(model.graph.node):
            if k not in self.folded and k not in self.cpu and n.op_type not in CPU_OUTPUTS:
                yield k, n


def placement(model: onnx.ModelProto) -> Placement:
    """Where ONNX Runtime's CUDA provider runs each node of model's graph, every node given a CUDA
    kernel: folded into constants (a Shape of a fully known shape, and whatever then has only
    constant inputs), on the CPU (a node that reads a host tensor, where each of its inputs is a
    host tensor it does not read as a host input, a small initializer (<= 100 elements) or a
    graph input), else on the device; and which tensors are in host memory."""
    g = model.graph
    graph_inputs = {i.name for i in g.input}
    types = _inferred(model)
    # intermediate tensors only: the graph's inputs and outputs, and its external weights (inputs to
    # inference), are not folded by their shapes
    io = graph_inputs | {o.name for o in g.output} | {t.name for t in g.initializer if t.data_location == TensorProto.EXTERNAL}
    static_shape = {name for name, t in types.items() if name not in io and t.HasField("shape")
                    and all(d.HasField("dim_value") for d in t.shape.dim)}
    const = {t.name for t in g.initializer}
    small = {t.name for t in g.initializer if int(np.prod(t.dims)) <= SMALL_INITIALIZER}
    folded = set()
    for k, n in enumerate(g.node):
        if (n.op_type == "Constant" or (n.op_type == "Shape" and n.input[0] in static_shape)
                or (n.input and all(x in const for x in n.input if x) and n.op_type not in CPU_OUTPUTS)):
            folded.add(k)
            const.update(n.output)
            small.update(n.output)  # shape-sized here: the big constants are initializers
    host, cpu = set(), set()
    for k, n in enumerate(g.node):  # topological order, as ORT visits its candidates
        if k in folded:
            continue
        if n.op_type in CPU_OUTPUTS:
            host.update(n.output)
            continue
        if not any(x in host for x in n.input):
            continue
        cpu_in = CPU_INPUTS.get(n.op_type, set())
        if all(x in small or x in graph_inputs or (x in host and j not in cpu_in) for j, x in enumerate(n.input) if x):
            cpu.add(k)
            host.update(n.output)
    return Placement(folded, cpu, host, types)


def memcpy_edges(model: onnx.ModelProto, placed: Placement | None = None) -> list:
    """Where ONNX Runtime's CUDA provider would copy between host and device: each (node, input)
    where a tensor in host memory is read on the device as data. A CUDA-graph capture refuses a
    session with such a copy. placed: model's placement, where the caller has it."""
    placed = placed or placement(model)
    edges = []
    for _, n in placed.on_device(model):
        cpu_in = CPU_INPUTS.get(n.op_type, set())
        edges += [(n.name or n.op_type, x) for j, x in enumerate(n.input) if x in placed.host and j not in cpu_in]
    return edges


def _split_sizes(model: onnx.ModelProto, n: onnx.NodeProto):
    """A Split's sizes where the graph fixes them (attribute or initializer), else None."""
    for a in n.attribute:
        if a.name == "split":
            return list(a.ints)
    if len(n.input) > 1 and n.input[1]:
        for t in model.graph.initializer:
            if t.name == n.input[1] and t.data_location != TensorProto.EXTERNAL:
                return numpy_helper.to_array(t).tolist()
        return None
    return []  # no sizes: equal parts


def _dims(t) -> list | None:
    """A tensor type's dims (int, or the symbol's name, or None), None without a shape."""
    if t is None or not t.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim]


def _pointer_batched(a: list | None, b: list | None) -> bool:
    """Whether ORT's CUDA MatMul of operands of dims a and b takes its pointer-array batched
    GEMM (staged) rather than a single or strided one: both of rank > 2, with batch dims that
    differ (another rank, or two known sizes apart: a broadcast). Unknown shapes and symbolic
    dims count as equal: the exported graphs' batched products are attention's, whose batch dims
    are the same at run time, and inference names them apart."""
    if a is None or b is None or len(a) <= 2 or len(b) <= 2:
        return False
    ba, bb = a[:-2], b[:-2]
    return len(ba) != len(bb) or any(isinstance(x, int) and isinstance(y, int) and x != y
                                     for x, y in zip(ba, bb))


def host_staged(model: onnx.ModelProto, placed: Placement | None = None) -> list[str]:
    """The device nodes of model whose CUDA kernels stage arguments in host memory (the module's
    doc): every Concat (its inputs' lengths along the axis are runtime values here; ORT passes
    them by value only when all are equal, and then up to 32), a Split of unequal or unknown
    sizes or more than 32 outputs, a MatMul batched over unequal batch dims (_pointer_batched),
    and ALWAYS_STAGED. One "name (op)" each. placed: model's placement, where the caller has it."""
    placed = placed or placement(model)
    out = []
    for _, n in placed.on_device(model):
        staged = n.op_type in ALWAYS_STAGED or n.op_type == "Concat"
        if n.op_type == "Split":
            sizes = _split_sizes(model, n)
            staged = sizes is None or len(set(sizes)) > 1 or len(n.output) > MAX_BY_VALUE
        if n.op_type == "MatMul":
            staged = _pointer_batched(_dims(placed.types.get(n.input[0])), _dims(placed.types.get(n.input[1])))
        if staged:
            out.append(f"{n.name or '?'} ({n.op_type})")
    return out


# Element types ORT's CUDA Pad and Add both take (Pad's float types: its bool has no Add).
_PADDABLE = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE}


def _pads_concat(n: onnx.NodeProto, rank: int, tag: str) -> tuple[list, list]:
    """Nodes and initializers computing n's output as the sum of its inputs each padded with zeros
    to the output's length along n's axis, at its offset there."""
    axis = next((a.i for a in n.attribute if a.name == "axis"), 0)
    axis = axis + rank if axis < 0 else axis
    nodes, inits = [], []

    def const(name, values):
        inits.append(numpy_helper.from_array(np.array(values, np.int64), f"{tag}{name}"))
        return f"{tag}{name}"

    def node(op, ins, name, **attrs):
        nodes.append(helper.make_node(op, ins, [f"{tag}{name}"], name=f"{tag}{name}", **attrs))
        return f"{tag}{name}"

    start, end = const("axis_start", [axis]), const("axis_end", [axis + 1])
    lengths = [node("Slice", [node("Shape", [x], f"shape_{i}"), start, end], f"length_{i}")
               for i, x in enumerate(n.input)]
    before = [const("zero", [0])]
    for i, length in enumerate(lengths):
        before.append(node("Add", [before[-1], length], f"before_{i + 1}"))
    total = before[-1]
    inner = [const("zeros_before_axis", [0] * axis)] if axis else []
    outer = [const("zeros_after_axis", [0] * (rank - 1 - axis))] if rank - 1 - axis else []
    padded = []
    for i, (x, length) in enumerate(zip(n.input, lengths)):
        after = node("Sub", [node("Sub", [total, before[i]], f"rest_{i}"), length], f"after_{i}")
        pads = node("Concat", inner + [before[i]] + outer + inner + [after] + outer, f"pads_{i}", axis=0)
        padded.append(node("Pad", [x, pads], f"padded_{i}"))
    acc = padded[0]
    for i, p in enumerate(padded[1:], 1):
        last = i == len(padded) - 1
        nodes.append(helper.make_node("Add", [acc, p], [n.output[0] if last else f"{tag}sum_{i}"],
                                      name=f"{tag}sum_{i}"))
        acc = f"{tag}sum_{i}"
    if len(padded) == 1:
        nodes.append(helper.make_node("Identity", [acc], [n.output[0]], name=f"{tag}out"))
    return nodes, inits


class CaptureError(ValueError):
    pass


def stage_free(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    """model with each Concat placement runs on the device rewritten as Pads and Adds (the
    module's doc), and how many were. Initializers stay where they are (external data is not
    loaded or rewritten). Raises CaptureError for a Concat whose rank shape inference cannot
    tell, and where a staged node remains (host_staged)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    placed = placement(out)
    types = placed.types
    targets = [k for k, n in placed.on_device(out) if n.op_type == "Concat"]
    opset = next((o.version for o in out.opset_import if o.domain in ("", "ai.onnx")), 0)
    if targets and opset < 11:
        raise CaptureError(f"opset {opset}: Pad takes its pads as an input from opset 11")
    for k in reversed(targets):
        n = g.node[k]
        known = [types[x] for x in list(n.input) + list(n.output) if x in types]
        rank = next((len(t.shape.dim) for t in known if t.HasField("shape")), None)
        elem = next((t.elem_type for t in known if t.elem_type), None)
        if rank is None or elem not in _PADDABLE:
            raise CaptureError(f"Concat {n.name!r}: shape inference gives rank {rank}, element type "
                               f"{TensorProto.DataType.Name(elem) if elem else None}: "
                               "only float, float16 and double of a known rank are rewritten")
        # the node's index makes the tag unique: node names need not be
        nodes, inits = _pads_concat(n, rank, f"{ADDED_PREFIX}{k}/{n.name or 'Concat'}/")
        del g.node[k]
        for j, new in enumerate(nodes):
            g.node.insert(k + j, new)
        g.initializer.extend(inits)
    left = host_staged(out, placement(out) if targets else placed)
    if left:
        raise CaptureError(f"still staged in host memory after the rewrite: {', '.join(left)}")
    return out, len(targets)


# The roles the engine captures by the manifest's word (docs/bundle-format.md, capture_safe): the
# vision tower. The static decoder is capture-safe by construction (scripts/static_decoder.py;
# its tests hold it to host_staged and memcpy_edges).
MARKED_ROLES = ("vision",)


# The ops the exporter and the variant tools put on the device whose ORT 1.29 CUDA kernels read
# only device memory and kernel arguments (Concat and Split: as host_staged says). A graph with
# any other op on the device is not marked: an op with no CUDA kernel (int8's
# DynamicQuantizeMatMul) runs on the CPU, which a capture refuses, and an unknown one is unknown.
DEVICE_OPS = {
    "Add", "BiasGelu", "Cast", "Concat", "Constant", "ConstantOfShape", "Conv", "Div", "Equal", "Erf",
    "Expand", "FastGelu", "Flatten", "Gather", "Gelu", "Gemm", "Identity", "LayerNormalization",
    "MatMul", "Max", "Min", "Mul", "MultiHeadAttention", "Neg", "Pad", "Pow", "ReduceMean", "Relu",
    "Reshape", "Sigmoid", "SimplifiedLayerNormalization", "SkipLayerNormalization",
    "SkipSimplifiedLayerNormalization", "Slice", "Softmax", "Split", "Sqrt", "Squeeze", "Sub", "Tanh",
    "Transpose", "Unsqueeze", "Where",
}


def unmarked_ops(model: onnx.ModelProto, placed: Placement | None = None) -> list[str]:
    """The op types model runs on the device that DEVICE_OPS does not hold."""
    placed = placed or placement(model)
    return sorted({n.op_type for _, n in placed.on_device(model)} - DEVICE_OPS)


def mark(role: str, entry: dict, model: onnx.ModelProto) -> None:
    """Set a manifest file entry's capture_safe where role is one the engine captures by it and
    model (its graph) runs only DEVICE_OPS on the device, none staged in host memory, and copies
    nothing between host and device; else leave it out."""
    entry.pop("capture_safe", None)
    if role not in MARKED_ROLES:
        return
    placed = placement(model)
    if not unmarked_ops(model, placed) and not host_staged(model, placed) and not memcpy_edges(model, placed):
        entry["capture_safe"] = True


def rewrite_file(path: str, check=None) -> tuple[int, object]:
    """Rewrite the graph file at path in place by stage_free, its proto alone (external data
    untouched, inline weights kept inline): how many Concats were rewritten (0: the file is left
    as it was), and what check returned. check(path, new_path), when given, sees the rewritten
    graph beside the old one first (external data resolves the same); what it raises leaves the
    file as it was."""
    model = onnx.load(path, load_external_data=False)
    new, n = stage_free(model)
    checked = None
    if n:
        tmp = path + ".capture.tmp"
        try:
            onnx.save_model(new, tmp)
            if check is not None:
                checked = check(path, tmp)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    return n, checked
