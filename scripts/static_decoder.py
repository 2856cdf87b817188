"""The static-cache variant of a bundle's with-past decoder (`decoder_static_model.onnx`, bundle
role `decoder_static`), derived from `decoder_with_past_model.onnx` by graph surgery alone.

Why: ONNX Runtime's CUDA-graph capture replays fixed kernels on fixed buffers, so a captured
decoder call needs fixed shapes and addresses. T5's with-past decoder concatenates a growing
past, and its self-attention bias is computed from the past's and the input's shapes on the
CPU, then copied to the GPU (a Memcpy, which rules capture out). Here the self-attention cache
has a fixed length (`cache_length`) and this call's K/V are written into it at a `position`
input (ScatterElements), and the bias is computed on the GPU from `position`: relative distance
d = q_pos - k_pos, clamped to [-1, max_distance], indexes a small table computed at surgery time
(entry 0: the causal mask, entry 1 + n: T5's unidirectional bias for distance n, buckets from
Hugging Face's own T5Attention._relative_position_bucket). The only shape-derived values are
the Slice bounds (CPU inputs by kernel definition) that cut arange(W) and arange(cache_length)
out of one constant arange of MAX_CACHE_LENGTH.

Contract (docs/bundle-format.md): inputs `input_ids` i64 [B, W], `position` i64 [B] (each row's
number of cached positions = where its first new token goes), `encoder_attention_mask`, per layer
`past_key_values.{i}.decoder.{key,value}` f32 [B, H, cache_length, d_kv] (the static cache; what
lies at and after `position` must be finite and is ignored) and `past_key_values.{i}.encoder.*`
as the dynamic graph's; outputs `logits`, `logits_argmax` as the dynamic graph's and
`present.{i}.decoder.{key,value}` [B, H, cache_length, d_kv]: the past with positions
[position[b], position[b] + W) of row b replaced by this call's K/V. The caller guarantees
position[b] + W <= cache_length <= MAX_CACHE_LENGTH.

The decoder's weights are not touched: the graph is loaded without its external data, so the
static graph's initializers point at the decoder's own `.onnx.data` file (inline weights stay
inline, a copy in the static file). check_static holds the static graph to the dynamic one with
ONNX Runtime before a bundle lists it.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from . import graph_check as gc
from .bundle_format import ARGMAX_OUTPUT, FILES
from .cuda_capture import CPU_OUTPUTS, with_external_as_inputs

# arange(MAX_CACHE_LENGTH) is the one constant both key positions and the new positions are cut
# from, so cache_length and W must not exceed it. 8192 int64 = 64 KiB in the graph; it must stay
# above ORT's small-initializer bound (100 elements) or the Slices on it would move to the CPU.
MAX_CACHE_LENGTH = 8192
POSITION_INPUT = "position"
CACHE_DIM = "cache_length"
NEG = float(np.finfo(np.float32).min)
# Prefix of every tensor and node this module adds (scripts.half keeps those nodes fp32).
ADDED_PREFIX = _P = "static/"



class StaticError(ValueError):
    pass


def bias_table(weight: np.ndarray, num_buckets: int, max_distance: int) -> np.ndarray:
    """[max_distance + 2, H] float32: row 0 the causal mask (float32 min: a key after the query),
    row 1 + n T5's unidirectional relative-attention bias for distance n = q - k (n = 0 ..
    max_distance; every farther distance has max_distance's bucket, the last one)."""
    import torch
    from transformers.models.t5.modeling_t5 import T5Attention
    n = torch.arange(max_distance + 1, dtype=torch.long)
    # HF's relative_position is memory - query = -n.
    buckets = T5Attention._relative_position_bucket(-n, bidirectional=False, num_buckets=num_buckets,
                                                    max_distance=max_distance).numpy()
    far = T5Attention._relative_position_bucket(torch.tensor([-(max_distance + 1), -(4 * max_distance + 7)]),
                                                bidirectional=False, num_buckets=num_buckets,
                                                max_distance=max_distance).tolist()
    if far != [buckets[-1]] * 2:
        raise StaticError(f"T5 buckets do not saturate at max_distance {max_distance}: {far} vs {buckets[-1]}")
    table = np.empty((max_distance + 2, weight.shape[1]), np.float32)
    table[0] = NEG
    table[1:] = weight[buckets]
    return table


def _initializer_array(t: onnx.TensorProto, base_dir: str | None) -> np.ndarray:
    if t.data_location == TensorProto.EXTERNAL:
        if base_dir is None:
            raise StaticError(f"{t.name} is in external data; make_static needs base_dir to read it")
        return numpy_helper.to_array(t, base_dir)
    return numpy_helper.to_array(t)


def _topo_check(g: onnx.GraphProto) -> None:
    known = {i.name for i in g.input} | {t.name for t in g.initializer} | {""}
    for n in g.node:
        missing = [x for x in n.input if x not in known]
        if missing:
            raise StaticError(f"node {n.name or n.op_type} reads {missing} before they are produced")
        known.update(n.output)


def _self_bias(g: onnx.GraphProto, weight_name: str) -> str:
    """The self-attention bias of the dynamic graph: the one tensor that derives from the
    relative-attention weight and from no graph input's values (only shapes), and is read by a
    node that does depend on input values (the attention, or the Add onto its scores)."""
    inputs = {i.name for i in g.input}
    data_dep, rel_dep = set(inputs), {weight_name}
    for n in g.node:
        if n.op_type not in CPU_OUTPUTS and any(x in data_dep for x in n.input):
            data_dep.update(n.output)
        if n.op_type not in CPU_OUTPUTS and any(x in rel_dep for x in n.input):
            rel_dep.update(n.output)
    frontier = []
    for n in g.node:
        if any(x in data_dep for x in n.input):
            frontier += [x for x in n.input if x in rel_dep and x not in data_dep and x not in frontier]
    if len(frontier) != 1:
        raise StaticError(f"want one self-attention bias derived from {weight_name}, found {frontier}")
    return frontier[0]


def make_static(decoder: onnx.ModelProto, model_cfg: dict, base_dir: str | None = None) -> onnx.ModelProto:
    """The static-cache graph of a with-past decoder (module docstring). decoder is loaded
    without external data and is not modified; model_cfg is the manifest's "model" (layers,
    heads, d_kv, relative_attention_num_buckets / max_distance). base_dir: where the decoder's
    external data lies, needed only when the relative-attention weight is stored there. A
    decoder without logits_argmax gains it. Raises StaticError on a graph of another layout."""
    from .onnx_graphs import add_argmax
    m = onnx.ModelProto()
    m.CopyFrom(decoder)
    try:
        m = add_argmax(m)
    except ValueError as e:
        raise StaticError(str(e)) from None
    g = m.graph
    L, H, dkv = model_cfg["num_decoder_layers"], model_cfg["num_heads"], model_cfg["d_kv"]
    nb, md = model_cfg["relative_attention_num_buckets"], model_cfg["relative_attention_max_distance"]
    inputs = {i.name: i for i in g.input}
    if POSITION_INPUT in inputs or any(n.output and POSITION_INPUT in n.output for n in g.node):
        raise StaticError(f"the decoder already has a tensor named {POSITION_INPUT!r}")
    if "input_ids" not in inputs:
        raise StaticError("the decoder has no input_ids input")
    past = [(f"past_key_values.{i}.decoder.key", f"past_key_values.{i}.decoder.value") for i in range(L)]
    present = [(f"present.{i}.decoder.key", f"present.{i}.decoder.value") for i in range(L)]
    missing = [n for kv in past for n in kv if n not in inputs] + \
        [n for kv in present for n in kv if n not in {o.name for o in g.output}]
    if missing:
        raise StaticError(f"the decoder lacks {missing}")

    inits = {t.name: t for t in g.initializer}
    weights = [t for t in g.initializer if t.name.endswith("SelfAttention.relative_attention_bias.weight")]
    if not weights:  # an exporter that renamed it: the one [buckets, heads] table a Gather reads
        gathered = {n.input[0] for n in g.node if n.op_type == "Gather"}
        weights = [t for t in g.initializer if t.name in gathered and list(t.dims) == [nb, H]]
    if len(weights) != 1 or list(weights[0].dims) != [nb, H]:
        raise StaticError(f"want one [{nb}, {H}] SelfAttention.relative_attention_bias.weight initializer, "
                          f"found {[(t.name, list(t.dims)) for t in weights]}")
    weight = _initializer_array(weights[0], base_dir)
    old_bias = _self_bias(g, weights[0].name)

    # Each layer's self-attention: a MultiHeadAttention with the past (exporter) or the
    # concatenation of past and new K/V (plain ONNX ops, upgraded bundles).
    producer = {o: n for n in g.node for o in n.output}
    layers = []
    for i, ((pk, pv), (ok, ov)) in enumerate(zip(past, present)):
        nk, nv = producer.get(ok), producer.get(ov)
        if nk is not None and nk is nv and nk.op_type == "MultiHeadAttention" and nk.domain == "com.microsoft":
            ins = list(nk.input) + [""] * (8 - len(nk.input))
            if list(nk.output[1:3]) != [ok, ov] or ins[6:8] != [pk, pv] or ins[3] or ins[4] or ins[5] != old_bias:
                raise StaticError(f"layer {i}: self-attention node {nk.name} has inputs {list(nk.input)}, "
                                  f"outputs {list(nk.output)}")
            layers.append(("mha", nk))
        elif (nk is not None and nv is not None and nk.op_type == nv.op_type == "Concat"
              and helper.get_attribute_value(nk.attribute[0]) == 2 == helper.get_attribute_value(nv.attribute[0])
              and list(nk.input)[0] == pk and list(nv.input)[0] == pv and len(nk.input) == len(nv.input) == 2):
            layers.append(("concat", nk, nv))
        else:
            raise StaticError(f"layer {i}: {ok} is produced by neither a MultiHeadAttention nor a Concat on axis 2")

    def const(name, arr):
        t = numpy_helper.from_array(np.asarray(arr), _P + name)
        g.initializer.append(t)
        return t.name

    def node(op, ins, name, **attrs):
        return helper.make_node(op, ins, [_P + name], name=_P + name, **attrs)

    i64 = lambda v: np.asarray(v, np.int64)  # noqa: E731
    arange = const("arange", np.arange(MAX_CACHE_LENGTH, dtype=np.int64))
    zero, one, two, three = const("i0", i64([0])), const("i1", i64([1])), const("i2", i64([2])), const("i3", i64([3]))
    table = const("bias_table", bias_table(weight, nb, md))
    head = [
        # W and cache_length as 1-D shapes (host tensors, read only as Slice bounds)
        helper.make_node("Shape", ["input_ids"], [_P + "ids_shape"], name=_P + "ids_shape"),
        node("Slice", [_P + "ids_shape", one, two, zero], "w"),
        helper.make_node("Shape", [past[0][0]], [_P + "cache_shape"], name=_P + "cache_shape"),
        node("Slice", [_P + "cache_shape", two, three, zero], "c"),
        # positions, on the device: q_pos [B, W] = position + arange(W), k_pos [C] = arange(C)
        node("Slice", [arange, zero, _P + "w", zero], "arange_w"),
        node("Slice", [arange, zero, _P + "c", zero], "k_pos"),
        node("Unsqueeze", [POSITION_INPUT, one], "position_b1"),
        node("Add", [_P + "position_b1", _P + "arange_w"], "q_pos"),
        # bias [B, H, W, C] = table[min(max(q - k, -1), max_distance) + 1]
        node("Unsqueeze", [_P + "q_pos", two], "q_pos_bw1"),
        node("Sub", [_P + "q_pos_bw1", _P + "k_pos"], "distance"),
        node("Max", [_P + "distance", const("minus1", i64(-1))], "distance_lo"),
        node("Min", [_P + "distance_lo", const("max_distance", i64(md))], "distance_hi"),
        node("Add", [_P + "distance_hi", const("one", i64(1))], "bias_index"),
        node("Gather", [table, _P + "bias_index"], "bias_bwch", axis=0),
        node("Transpose", [_P + "bias_bwch"], "self_bias", perm=[0, 3, 1, 2]),
        # the cache rows this call writes: [B, H, W, d_kv] = q_pos broadcast
        node("Unsqueeze", [_P + "q_pos", const("axes_1_3", i64([1, 3]))], "q_pos_b1w1"),
        node("Expand", [_P + "q_pos_b1w1", const("index_shape", i64([1, H, 1, dkv]))], "cache_index"),
    ]
    bias, index = _P + "self_bias", _P + "cache_index"
    heads_shape, perm = const("heads_shape", i64([0, 0, H, dkv])), [0, 2, 1, 3]

    replaced: dict[str, list] = {}  # by the first output of the node replaced
    for i, layer in enumerate(layers):
        (pk, pv), (ok, ov) = past[i], present[i]
        if layer[0] == "mha":
            mha = layer[1]
            new = []
            kv_heads = []
            for kind, x in (("k", mha.input[1]), ("v", mha.input[2])):
                new.append(node("Reshape", [x, heads_shape], f"{i}.{kind}_bshd"))
                new.append(node("Transpose", [_P + f"{i}.{kind}_bshd"], f"{i}.{kind}_bhsd", perm=perm))
                kv_heads.append(_P + f"{i}.{kind}_bhsd")
            new.append(helper.make_node("ScatterElements", [pk, index, kv_heads[0]], [ok], name=_P + ok, axis=2))
            new.append(helper.make_node("ScatterElements", [pv, index, kv_heads[1]], [ov], name=_P + ov, axis=2))
            attn = helper.make_node("MultiHeadAttention", [mha.input[0], ok, ov, "", "", bias], [mha.output[0]],
                                    name=mha.name or _P + f"{i}.attention", domain="com.microsoft")
            attn.attribute.extend(mha.attribute)
            new.append(attn)
            replaced[mha.output[0]] = new
        else:
            for c, p, o in ((layer[1], pk, ok), (layer[2], pv, ov)):
                replaced[c.output[0]] = [helper.make_node("ScatterElements", [p, index, c.input[1]], [o],
                                                          name=_P + o, axis=2)]

    nodes = list(head)
    for n in g.node:
        if n.output and n.output[0] in replaced:
            nodes += replaced[n.output[0]]
            continue
        if old_bias in n.input:  # the plain graph's Add onto the scores
            n = onnx.NodeProto.FromString(n.SerializeToString())
            for j, x in enumerate(n.input):
                if x == old_bias:
                    n.input[j] = bias
        nodes.append(n)

    # Keep what the outputs need.
    needed = {o.name for o in g.output}
    kept = []
    for n in reversed(nodes):
        if any(o in needed for o in n.output):
            kept.append(n)
            needed.update(x for x in n.input if x)
    kept.reverse()
    del g.node[:]
    g.node.extend(kept)
    unused = [t for t in g.initializer if t.name not in needed]
    for t in unused:
        g.initializer.remove(t)
    del g.value_info[:]

    # IO: position after input_ids; the cache dims fixed-length, named cache_length.
    batch = inputs["input_ids"].type.tensor_type.shape.dim[0]
    pos = helper.make_tensor_value_info(POSITION_INPUT, TensorProto.INT64, [batch.dim_param or batch.dim_value])
    new_inputs = []
    for vi in g.input:
        v = onnx.ValueInfoProto()
        v.CopyFrom(vi)
        if any(v.name in kv for kv in past):
            v.type.tensor_type.shape.dim[2].Clear()
            v.type.tensor_type.shape.dim[2].dim_param = CACHE_DIM
        new_inputs.append(v)
        if vi.name == "input_ids":
            new_inputs.append(pos)
    unread = [v.name for v in new_inputs if v.name not in needed and v.name not in inits]
    if unread:
        raise StaticError(f"the static graph does not read its inputs {unread}")
    del g.input[:]
    g.input.extend(new_inputs)
    for o in g.output:
        if any(o.name in kv for kv in present):
            o.type.tensor_type.shape.dim[2].Clear()
            o.type.tensor_type.shape.dim[2].dim_param = CACHE_DIM
    g.name = "decoder_static"
    _topo_check(g)
    check_graph(m)
    return m


def check_graph(model: onnx.ModelProto) -> None:
    """onnx.checker with full_check (strict shape inference) on a graph loaded without its
    external data: those initializers are checked as graph inputs of their dtype and dims."""
    onnx.checker.check_model(with_external_as_inputs(model), full_check=True)


def external_files(model: onnx.ModelProto) -> list:
    """The external-data files the graph's initializers point at, in order of first use."""
    out = []
    for t in model.graph.initializer:
        if t.data_location == TensorProto.EXTERNAL:
            loc = {e.key: e.value for e in t.external_data}["location"]
            if loc not in out:
                out.append(loc)
    return out


def write_static(bundle: str, model_cfg: dict, decoder_name: str = FILES["decoder"],
                 out_name: str = FILES["decoder_static"]) -> list:
    """Write bundle/out_name, the static graph of bundle/decoder_name (its external data shared,
    not copied). Returns the external-data files it reads (the decoder's)."""
    dec = onnx.load(os.path.join(bundle, decoder_name), load_external_data=False)
    m = make_static(dec, model_cfg, base_dir=bundle)
    path = os.path.join(bundle, out_name)
    onnx.save_model(m, path)
    ext = external_files(m)
    missing = [e for e in ext if not os.path.exists(os.path.join(bundle, e))]
    if missing:
        os.remove(path)
        raise StaticError(f"{path}: external data {missing} not in the bundle")
    return ext


# ---------------------------------------------------------------- the check against the dynamic graph

# (cache_length, each row's first position); every scenario runs new-token counts CALLS in turn.
SCENARIOS = ((24, (0, 3)), (320, (140, 300)))
CALLS = (1, 4, 1, 4)


def check_variant_static(dec_path: str, static_path: str, model_cfg: dict, what: str, error=RuntimeError) -> float:
    """check_static on a rewritten bundle's decoder pair (what: the rewrite's word for them), its
    failure raised as error(why)."""
    try:
        return check_static(dec_path, static_path, model_cfg)
    except gc.ExportCheckError as e:
        raise error(f"{what} static decoder against the {what} decoder: {e}") from None


def check_static(dec_path: str, static_path: str, model_cfg: dict, seed: int = 11, report: dict | None = None,
                 scenarios=SCENARIOS, calls=CALLS, tol: dict | None = None) -> float:
    """Runs the static graph (ONNX Runtime, CPU) against the dynamic decoder on random inputs and
    returns the worst |logits diff|; raises gc.ExportCheckError. Batch 2, the two rows at different
    positions; per scenario a sequence of calls (CALLS new tokens), the static graph fed its own
    presents and the dynamic one (row by row) its own. Each row's cache holds its dynamic past
    and random values beyond it. Held: logits within the decoder tolerance, logits_argmax the
    exact argmax of the static logits and equal to the dynamic argmax (but for a near tie), the
    written cache rows [position, position + W) within tolerance of the dynamic presents' last W,
    every other cache row bit-identical to the past. tol: the decoder's export tolerance unless
    given (fp16 graphs: scripts.half's)."""
    L, H, dkv = model_cfg["num_decoder_layers"], model_cfg["num_heads"], model_cfg["d_kv"]
    vocab = model_cfg["vocab_size"]
    tol = tol or gc.TOLERANCES["decoder"]
    report = {} if report is None else report
    rng = np.random.default_rng(seed)
    dyn, sta = gc.session(dec_path), gc.session(static_path)
    dyn_names = [o.name for o in dyn.get_outputs()]
    sta_names = [o.name for o in sta.get_outputs()]
    kv = [(f"{i}.decoder.key", f"{i}.decoder.value") for i in range(L)]
    names = [n for pair in kv for n in pair]
    enc_len = 9
    worst = 0.0
    # the cache's type: float32, or float16 (scripts.half --fp16-cache); the random caches are made in it
    ct = np.float16 if next(i.type for i in sta.get_inputs() if i.name.startswith("past_key_values.")) == \
        "tensor(float16)" else np.float32
    for cache_len, starts in scenarios:
        B = len(starts)
        cross = [(rng.standard_normal((B, H, enc_len, dkv)) * 0.5).astype(ct) for _ in range(2 * L)]
        mask = np.ones((B, enc_len), np.int64)
        mask[1:, enc_len - 2:] = 0
        # each row's dynamic past, and the static cache: that past, then finite junk
        dpast = [{n: (rng.standard_normal((1, H, p, dkv)) * 0.5).astype(ct) for n in names} for p in starts]
        cache = {n: (rng.standard_normal((B, H, cache_len, dkv)) * 3).astype(ct) for n in names}
        for b, p in enumerate(starts):
            for n in names:
                cache[n][b, :, :p] = dpast[b][n][0]
        pos = np.array(starts, np.int64)
        for W in calls:
            if int(pos.max()) + W > cache_len:
                raise ValueError(f"scenario {starts}: position {pos.max()} + {W} > cache length {cache_len}")
            ids = rng.integers(3, vocab, (B, W)).astype(np.int64)
            feed = {"input_ids": ids, POSITION_INPUT: pos, "encoder_attention_mask": mask}
            for i in range(L):
                for j, k in enumerate(("key", "value")):
                    feed[f"past_key_values.{i}.decoder.{k}"] = cache[f"{i}.decoder.{k}"]
                    feed[f"past_key_values.{i}.encoder.{k}"] = cross[2 * i + j]
            got = dict(zip(sta_names, sta.run(None, feed)))
            what = f"cache {cache_len}, positions {pos.tolist()}, new {W}"
            gc.check_argmax(f"static {what}", got)
            for b in range(B):
                f1 = {"input_ids": ids[b:b + 1], "encoder_attention_mask": mask[b:b + 1]}
                for i in range(L):
                    for j, k in enumerate(("key", "value")):
                        f1[f"past_key_values.{i}.decoder.{k}"] = dpast[b][f"{i}.decoder.{k}"]
                        f1[f"past_key_values.{i}.encoder.{k}"] = cross[2 * i + j][b:b + 1]
                want = dict(zip(dyn_names, dyn.run(None, f1)))
                row = f"{what}, row {b}"
                gc.compare(f"static_logits ({row})", got["logits"][b:b + 1], want["logits"], tol, report,
                           ref="the dynamic decoder")
                bound = tol["atol"] + tol["rtol"] * float(np.max(np.abs(want["logits"])))
                wl, ga = want["logits"][0], got[ARGMAX_OUTPUT][b]
                da = np.argmax(wl, axis=-1)
                for j in np.nonzero(ga != da)[0]:
                    if abs(float(wl[j, ga[j]]) - float(wl[j, da[j]])) > 2 * bound:
                        raise gc.ExportCheckError(f"static {row}: {ARGMAX_OUTPUT}[{j}] {ga[j]}, the dynamic "
                                                  f"decoder's argmax {da[j]} (not a tie)")
                p = int(pos[b])
                for n in names:
                    new = got[f"present.{n}"][b]
                    gc.compare(f"static_present ({row}, {n})", new[None, :, p:p + W],
                               want[f"present.{n}"][:, :, p:p + W], tol, report, ref="the dynamic decoder")
                    keep = np.ones(cache_len, bool)
                    keep[p:p + W] = False
                    if not np.array_equal(new[:, keep], cache[n][b][:, keep]):
                        raise gc.ExportCheckError(f"static {row}: present.{n} changed cache rows outside "
                                                  f"[{p}, {p + W})")
                    dpast[b][n] = want[f"present.{n}"]
            for n in names:
                cache[n] = got[f"present.{n}"]
            pos = pos + W
    worst = report.get("static_logits", 0.0)
    return worst
