"""Export-friendly forms of the Auto-UI graphs, computed with the model's own modules.

The T5 stacks are re-expressed here (instead of tracing HF's T5Stack) so that the ONNX
graphs have exactly the dynamic behaviour the bundle promises: relative positions offset
by the past length, a causal mask for several new tokens at once, cross-attention K/V
computed once and passed through. export.py checks every graph against the HF model.
"""

from __future__ import annotations

import sys

import onnx
import torch
from onnx import helper
from torch import nn

from .autoui_model import AutoUIModel
from .bundle_format import ARGMAX_OUTPUT

NEG = torch.finfo(torch.float32).min


def _heads(x: torch.Tensor, n_heads: int, d_kv: int) -> torch.Tensor:
    return x.reshape(x.shape[0], -1, n_heads, d_kv).transpose(1, 2)


def _attend(attn, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    # T5 does not scale scores by 1/sqrt(d_kv).
    scores = torch.matmul(q, k.transpose(3, 2)) + bias
    weights = torch.softmax(scores.float(), dim=-1).type_as(scores)
    out = torch.matmul(weights, v).transpose(1, 2)
    out = out.reshape(out.shape[0], -1, attn.inner_dim)
    return attn.o(out)


def _position_bias(attn, q_pos: torch.Tensor, k_pos: torch.Tensor, bidirectional: bool) -> torch.Tensor:
    rel = k_pos[None, :] - q_pos[:, None]
    bucket = attn._relative_position_bucket(rel, bidirectional=bidirectional,
                                            num_buckets=attn.relative_attention_num_buckets,
                                            max_distance=attn.relative_attention_max_distance)
    return attn.relative_attention_bias(bucket).permute([2, 0, 1]).unsqueeze(0)  # (1, H, q, k)


def _padding_bias(mask: torch.Tensor) -> torch.Tensor:
    return (1.0 - mask[:, None, None, :].to(torch.float32)) * NEG


# Attention of the with-past decoder as ONNX Runtime's com.microsoft.MultiHeadAttention: one
# kernel per attention instead of ~12 reshape/transpose/concat/matmul/softmax nodes, which at
# T5-base is ~10% of a decoder call on CPU (docs/decoding.md). Traced as placeholder ops of
# an "autoui" domain (forward is the reference math, so the PyTorch checks see the same
# numbers) and renamed by contrib_attention, which also leaves the optional inputs empty.

class _SelfAttention(torch.autograd.Function):
    """q, k, v [B, S, D] (projected), bias [1, H, S, P+S], past k/v [B, H, P, d_kv] ->
    output [B, S, D], present k/v [B, H, P+S, d_kv]."""

    @staticmethod
    def forward(ctx, q, k, v, bias, past_k, past_v, n_heads):
        B, S, D = q.shape
        d_kv = D // n_heads
        k = torch.cat([past_k, _heads(k, n_heads, d_kv)], dim=2)
        v = torch.cat([past_v, _heads(v, n_heads, d_kv)], dim=2)
        return _weights_times_v(_heads(q, n_heads, d_kv), k, v, bias, D), k, v

    @staticmethod
    def symbolic(g, q, k, v, bias, past_k, past_v, n_heads):
        return g.op("autoui::SelfAttention", q, k, v, bias, past_k, past_v, num_heads_i=n_heads, outputs=3)


class _CrossAttention(torch.autograd.Function):
    """q [B, S, D], k/v [B, H, E, d_kv] (the cached projections), bias [B, 1, S, E]."""

    @staticmethod
    def forward(ctx, q, k, v, bias, n_heads):
        D = q.shape[2]
        return _weights_times_v(_heads(q, n_heads, D // n_heads), k, v, bias, D)

    @staticmethod
    def symbolic(g, q, k, v, bias, n_heads):
        return g.op("autoui::CrossAttention", q, k, v, bias, num_heads_i=n_heads)


def _weights_times_v(q, k, v, bias, d_model):
    scores = torch.matmul(q, k.transpose(3, 2)) + bias  # T5: no 1/sqrt(d_kv)
    out = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2)
    return out.reshape(out.shape[0], -1, d_model)


def contrib_attention(model: onnx.ModelProto) -> onnx.ModelProto:
    """The traced placeholder attention nodes as com.microsoft.MultiHeadAttention (inputs:
    query, key, value, bias, key_padding_mask, attention_bias, past_key, past_value)."""
    for n in model.graph.node:
        if n.domain != "autoui":
            continue
        ins = list(n.input)
        del n.input[:]
        if n.op_type == "SelfAttention":
            n.input.extend([ins[0], ins[1], ins[2], "", "", ins[3], ins[4], ins[5]])
        elif n.op_type == "CrossAttention":
            n.input.extend([ins[0], ins[1], ins[2], "", "", ins[3]])
        else:
            raise ValueError(f"unknown placeholder op autoui::{n.op_type}")
        n.op_type, n.domain = "MultiHeadAttention", "com.microsoft"
        n.attribute.append(helper.make_attribute("scale", 1.0))
    opsets = [o for o in model.opset_import if o.domain not in ("autoui", "com.microsoft")]
    del model.opset_import[:]
    model.opset_import.extend(opsets + [helper.make_opsetid("com.microsoft", 1)])
    return model


def add_argmax(model: onnx.ModelProto) -> onnx.ModelProto:
    """The with-past decoder's logits argmax as one more output, `logits_argmax` i64
    [batch_size, decoder_sequence_length]: greedy and speculative decoding need token ids, not
    vocab_size floats per position, so only the ids have to leave the device. ArgMax keeps the
    first index of a tie (select_last_index 0), as torch.argmax and the engine's host argmax do.
    A graph that has the output already is returned unchanged."""
    g = model.graph
    if any(o.name == ARGMAX_OUTPUT for o in g.output):
        return model
    logits = next((o for o in g.output if o.name == "logits"), None)
    if logits is None:
        raise ValueError("decoder graph has no logits output")
    dims = [d.dim_param or d.dim_value for d in logits.type.tensor_type.shape.dim][:-1]
    g.node.append(helper.make_node("ArgMax", ["logits"], [ARGMAX_OUTPUT], name="logits_argmax",
                                   axis=-1, keepdims=0, select_last_index=0))
    g.output.append(helper.make_tensor_value_info(ARGMAX_OUTPUT, onnx.TensorProto.INT64, dims))
    return model


def fuse_vision_norms(model: onnx.ModelProto, num_heads: int, hidden_size: int) -> onnx.ModelProto:
    """The traced vision tower with ONNX Runtime's transformer optimizer fusions for ViT: each
    residual Add + LayerNormalization as com.microsoft.SkipLayerNormalization (which also
    returns the sum the next residual needs, and takes the preceding projection's bias) and
    bias + erf GELU as BiasGelu. ORT's own graph optimizer leaves these unfused because the
    residual sum has two consumers; its LayerNormalization kernel then costs ~1 ms per call at
    ViT-g size (257 x 1408), SkipLayerNormalization ~0.3 ms (docs/sizes.md). Attention is left
    as traced: MultiHeadAttention measured no faster here (the products dominate)."""
    import logging

    from onnxruntime.transformers import fusion_options, optimizer

    opts = fusion_options.FusionOptions("vit")
    opts.enable_attention = False
    opts.enable_shape_inference = False  # needs a >2 GB protobuf at ViT-g size; nothing here uses it
    # Its modules log under their bare names (fusion_skiplayernorm, ...), warnings included
    # about the shape inference turned off above.
    logging.disable(logging.WARNING)
    try:
        fused = optimizer.optimize_model(model, model_type="vit", num_heads=num_heads, hidden_size=hidden_size,
                                         optimization_options=opts, opt_level=0).model
    finally:
        logging.disable(logging.NOTSET)
    if not any(n.op_type == "SkipLayerNormalization" for n in fused.graph.node):
        # Not a BLIP-2 layout ORT knows: the traced graph is as correct, only slower.
        print("export: vision graph left unfused (ORT's optimizer matched no residual + LayerNorm)",
              file=sys.stderr)
        return model
    if not any(o.domain == "com.microsoft" for o in fused.opset_import):
        fused.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return fused


class EncoderGraph(nn.Module):
    """input_ids, attention_mask -> last_hidden_state (after the final norm, before fusion)."""

    def __init__(self, model: AutoUIModel):
        super().__init__()
        self.stack = model.encoder
        self.h, self.dkv = model.config.num_heads, model.config.d_kv

    def forward(self, input_ids, attention_mask):
        h = self.stack.embed_tokens(input_ids)
        pos = torch.arange(input_ids.shape[1], dtype=torch.long)
        first = self.stack.block[0].layer[0].SelfAttention
        bias = _position_bias(first, pos, pos, bidirectional=True) + _padding_bias(attention_mask)
        for block in self.stack.block:
            sa = block.layer[0]
            x = sa.layer_norm(h)
            a = sa.SelfAttention
            h = h + _attend(a, _heads(a.q(x), self.h, self.dkv), _heads(a.k(x), self.h, self.dkv),
                            _heads(a.v(x), self.h, self.dkv), bias)
            h = block.layer[-1](h)
        return self.stack.final_layer_norm(h)


class FusionGraph(nn.Module):
    """encoder_hidden_states, attention_mask, image_features -> fused_hidden_states.

    With one image token the 1-head attention's softmax is identically 1, so its output is
    out_proj(W_v e + b_v) for every text token; the graph computes that directly.
    attention_mask is part of the interface but, as in Auto-UI, does not enter the math."""

    def __init__(self, model: AutoUIModel):
        super().__init__()
        self.image_dense, self.gate_dense = model.image_dense, model.gate_dense
        mha = model.mha_layer
        d = model.config.d_model
        self.out_proj = mha.out_proj
        # Copies of the value slice of the packed in-projection (q and k do not matter).
        self.w_v = nn.Parameter(mha.in_proj_weight[2 * d:].detach().clone(), requires_grad=False)
        self.b_v = nn.Parameter(mha.in_proj_bias[2 * d:].detach().clone(), requires_grad=False)

    def forward(self, encoder_hidden_states, attention_mask, image_features):
        e = self.image_dense(image_features)
        a = self.out_proj(torch.nn.functional.linear(e, self.w_v, self.b_v)).unsqueeze(1)
        a = a.expand(-1, encoder_hidden_states.shape[1], -1)
        g = torch.sigmoid(self.gate_dense(torch.cat([encoder_hidden_states, a], dim=-1)))
        return (1 - g) * encoder_hidden_states + g * a


class DecoderGraph(nn.Module):
    """One decoder call. with_past=False: (input_ids, encoder_attention_mask,
    encoder_hidden_states); with_past=True: (input_ids, encoder_attention_mask, *past) with
    past = per layer decoder.key, decoder.value, encoder.key, encoder.value.
    Returns logits and per layer present decoder.key/value, encoder.key/value (the cross
    ones are the past passed through; decoder_split drops them)."""

    def __init__(self, model: AutoUIModel, with_past: bool, fused_attention: bool = False):
        super().__init__()
        self.stack = model.decoder
        self.lm_head = model.lm_head
        self.with_past = with_past
        # with_past only: attention as placeholder ops for contrib_attention
        self.fused_attention = fused_attention
        self.h, self.dkv = model.config.num_heads, model.config.d_kv
        self.scale = model.config.d_model ** -0.5 if model.config.tie_word_embeddings else None

    def forward(self, input_ids, encoder_attention_mask, *rest):
        n_layers = len(self.stack.block)
        if self.with_past:
            past = rest
            assert len(past) == 4 * n_layers
            encoder_hidden_states = None
            past_len = past[0].shape[2]
        else:
            (encoder_hidden_states,) = rest
            past = None
            past_len = 0
        n = input_ids.shape[1]
        q_pos = torch.arange(n, dtype=torch.long) + past_len
        k_pos = torch.arange(n + past_len, dtype=torch.long) if self.with_past else torch.arange(n, dtype=torch.long)
        first = self.stack.block[0].layer[0].SelfAttention
        causal = torch.where(k_pos[None, :] <= q_pos[:, None], torch.tensor(0.0), torch.tensor(NEG))
        self_bias = _position_bias(first, q_pos, k_pos, bidirectional=False) + causal[None, None]
        cross_bias = _padding_bias(encoder_attention_mask)

        h = self.stack.embed_tokens(input_ids)
        presents = []
        if self.with_past and self.fused_attention:
            cross_bias = cross_bias.expand(-1, -1, n, -1)
            for i, block in enumerate(self.stack.block):
                sa, ca = block.layer[0], block.layer[1]
                x = sa.layer_norm(h)
                a = sa.SelfAttention
                o, k, v = _SelfAttention.apply(a.q(x), a.k(x), a.v(x), self_bias, past[4 * i], past[4 * i + 1], self.h)
                h = h + a.o(o)
                x = ca.layer_norm(h)
                c = ca.EncDecAttention
                ck, cv = past[4 * i + 2], past[4 * i + 3]
                h = h + c.o(_CrossAttention.apply(c.q(x), ck, cv, cross_bias, self.h))
                h = block.layer[-1](h)
                presents += [k, v, ck, cv]
            return self._logits(h, presents)
        for i, block in enumerate(self.stack.block):
            sa, ca = block.layer[0], block.layer[1]
            x = sa.layer_norm(h)
            a = sa.SelfAttention
            k, v = _heads(a.k(x), self.h, self.dkv), _heads(a.v(x), self.h, self.dkv)
            if past is not None:
                k = torch.cat([past[4 * i], k], dim=2)
                v = torch.cat([past[4 * i + 1], v], dim=2)
            h = h + _attend(a, _heads(a.q(x), self.h, self.dkv), k, v, self_bias)
            x = ca.layer_norm(h)
            c = ca.EncDecAttention
            if past is not None:
                ck, cv = past[4 * i + 2], past[4 * i + 3]
            else:
                ck = _heads(c.k(encoder_hidden_states), self.h, self.dkv)
                cv = _heads(c.v(encoder_hidden_states), self.h, self.dkv)
            h = h + _attend(c, _heads(c.q(x), self.h, self.dkv), ck, cv, cross_bias)
            h = block.layer[-1](h)
            presents += [k, v, ck, cv]
        return self._logits(h, presents)

    def _logits(self, h, presents):
        h = self.stack.final_layer_norm(h)
        if self.scale is not None:
            h = h * self.scale
        return (self.lm_head(h), *presents)
