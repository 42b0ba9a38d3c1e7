"""oneDNN-fused subgraph operators of MXNet 1.9.1 (``optimize_for("MKLDNN")``, ``quantize_net``).

``_sg_mkldnn_conv``, ``_sg_mkldnn_fully_connected``, ``_sg_mkldnn_selfatt_qk``
and ``_sg_mkldnn_selfatt_valatt`` carry the fused float pattern as their nested
graph (``Convolution -> BatchNorm -> Activation``, ``+ elemwise_add`` for
``with_sum``, ``FullyConnected -> Activation/LeakyReLU`` ...).  The float forms
compute exactly what their nested graph computes (MXNet folds the BatchNorm
into the weights at run time; that only moves float rounding), so they are
ordinary :class:`SubgraphOp` s.

The quantized forms (``quantized=true``) append ``(data_min, data_max)`` and,
with ``with_sum``, ``(sum_min, sum_max)`` inputs, return ``(codes, min, max)``,
and compute what oneDNN computes: float weights (BatchNorm folded in first) are
quantized at run time, the accumulation is int32 and, when the node carries
``min_calib_range``/``max_calib_range``, requantized inside to uint8/int8; the
facts the kernels need are the public methods of :class:`FusedConv` and
:class:`FusedFullyConnected`, kernels in :mod:`fused_mkldnn_kernels`.
"""

from __future__ import annotations

import numpy as np

from ...errors import DTypeError, UnsupportedOpError
from .common import merge_all
from .registry import Attr, optional, register_op, to_bool, to_float, to_int
from .subgraph import SubgraphOp, infer_nested

_FUSED_FLAGS = ("with_bn", "with_act", "with_sum", "with_postsum_act", "with_eltwise",
                "quantized", "dedup_sum", "enable_float_output", "weight_channelwise_scale")


class _FusedOp(SubgraphOp):
    """Shared schema and arity of the quantizable fused ops."""

    is_region = False  # a fused pattern, not a partitioned region
    #: whether a quantized node of this op runs a nested ``clip`` (ReLU6) as oneDNN's
    #: bounded relu post-op
    fuses_clip = False
    attrs = {**{k: Attr(to_bool, False) for k in _FUSED_FLAGS},
             "min_calib_range": Attr(optional(to_float), None),
             "max_calib_range": Attr(optional(to_float), None)}

    # -- facts from the attributes and the nested graph ---------------------------------
    def quantized(self, p) -> bool:
        return bool(p.quantized)

    def calibrated(self, p) -> bool:
        return p.min_calib_range is not None and p.max_calib_range is not None

    def float_output(self, p) -> bool:
        return bool(p.enable_float_output)

    def nested_node(self, p, op: str):
        """The nested node running *op* (None when the pattern has none)."""
        for n in self.nested(p).topo_order():
            if n.op == op:
                return n
        return None

    def range_names(self, p) -> list[str]:
        return ["data_min", "data_max"]

    def input_position(self, p, entry) -> int:
        """Index among the node's inputs of the nested variable *entry* reads."""
        return self.nested(p).input_nodes().index(entry.node)

    def post_ops(self, p, anchor) -> list[str]:
        """What the pattern does after *anchor* (the accumulating node), in order.

        Each item is ``"relu"``, ``"clip"`` (oneDNN's bounded relu, only where
        :attr:`fuses_clip`) or ``"sum"`` (the residual add); BatchNorm is
        folded, so skipped.
        """
        g = self.nested(p)
        chain, node = [], g.outputs[0].node
        while node is not anchor and node.op is not None:
            chain.append(node)
            producers = [e.node for e in node.inputs if e.node.op is not None]
            if not producers:
                break
            node = _towards(producers, anchor)
        kinds = []
        for n in reversed(chain):
            if n.op == "BatchNorm":
                continue
            if n.op in ("elemwise_add", "_plus", "_Plus", "broadcast_add"):
                kinds.append("sum")
            elif n.op == "relu" or (n.op in ("Activation", "LeakyReLU")
                                    and n.attrs.get("act_type", "relu") == "relu"):
                kinds.append("relu")
            elif n.op == "clip" and self.fuses_clip:
                kinds.append("clip")
            else:
                from ...errors import UnsupportedOpError
                act = n.attrs.get("act_type", n.op)
                raise UnsupportedOpError({f"{self.name} with fused {act!r} (quantized)": 1},
                                         where=f"node {p.node_ref}")
        return kinds

    def n_base(self, p) -> int:
        return len(self.nested(p).input_nodes()) + self.extra_inputs(p)

    # -- arity ------------------------------------------------------------------------
    def input_names(self, p):
        names = super().input_names(p)
        return names + (self.range_names(p) if self.quantized(p) else [])

    def num_inputs(self, p):
        return super().num_inputs(p) + (len(self.range_names(p)) if self.quantized(p) else 0)

    def num_outputs(self, p):
        return 3 if self.quantized(p) and not self.float_output(p) else 1

    def output_names(self, p):
        if self.num_outputs(p) == 3:
            return ["output", "min_output", "max_output"]
        return ["output"]

    # -- inference --------------------------------------------------------------------
    def quantized_out_dtype(self, p) -> str:
        """int32 uncalibrated; calibrated: uint8 when the pattern ends in relu, else int8.

        (MXNet's ``IsOutputUInt8`` looks at the fused activation only, not at
        the sign of the calibrated range.)
        """
        if self.float_output(p):
            return "float32"
        if not self.calibrated(p):
            return "int32"
        return "uint8" if self.ends_in_relu(p) else "int8"

    def ends_in_relu(self, p) -> bool:
        """The pattern ends in relu, or in a clip that oneDNN fuses as a bounded relu
        (MXNet's ``IsOutputUInt8`` counts both as non-negative)."""
        last = self.nested(p).outputs[0].node
        if last.op == "relu" or (last.op == "clip" and self.fuses_clip):
            return True
        return last.op in ("Activation", "LeakyReLU") and \
            last.attrs.get("act_type", "relu") == "relu"

    def infer_shape(self, p, in_shapes, out_shapes):
        if not self.quantized(p):
            return super().infer_shape(p, in_shapes, out_shapes)
        nb = self.n_base(p)
        ins, outs = super().infer_shape(p, list(in_shapes[:nb]), list(out_shapes[:1]))
        ranges = [merge_all(p, [(1,), s], "range input") for s in in_shapes[nb:]]
        extra = [merge_all(p, [(1,), s], "range output") for s in out_shapes[1:]]
        return list(ins) + ranges, list(outs) + extra

    def infer_type(self, p, in_types, out_types):
        if not self.quantized(p):
            return super().infer_type(p, in_types, out_types)
        nb = self.n_base(p)
        base = list(in_types[:nb])
        quant = self.quantized_inputs(p)
        for i in quant:
            if base[i] is not None and base[i] not in ("int8", "uint8"):
                raise DTypeError(f"operator {self.name} (node {p.node_ref}): quantized input "
                                 f"{i} must be int8 or uint8, got {base[i]}")
        seeded = [None if i in quant else t for i, t in enumerate(base)]
        seeded = [("float32" if i in quant else t) for i, t in enumerate(seeded)]
        g = self.nested(p)
        new_ins, _ = infer_nested(g, "dtype", seeded[:len(g.input_nodes())], [None])
        ins = [base[i] if i in quant else t for i, t in enumerate(new_ins)] + base[len(new_ins):]
        ins += ["float32"] * (len(in_types) - nb)
        outs = [self.quantized_out_dtype(p)] + ["float32"] * (len(out_types) - 1)
        return ins, outs

    def quantized_inputs(self, p) -> list[int]:
        """Indices of the nested inputs that hold int8/uint8 codes."""
        return [0]


def _towards(candidates, target):
    """The candidate whose ancestry reaches *target* (the main path of a residual sum)."""
    for c in candidates:
        stack, seen = [c], set()
        while stack:
            n = stack.pop()
            if n is target:
                return c
            if id(n) not in seen:
                seen.add(id(n))
                stack.extend(e.node for e in n.inputs)
    return candidates[0]


@register_op("_sg_mkldnn_conv")
class FusedConv(_FusedOp):
    """Convolution with folded BatchNorm, activation and residual sum (``with_*`` flags).

    A nested ``clip`` (ReLU6 of MobileNetV2) is oneDNN's bounded relu:
    ``min(max(y, 0), a_max)``, ``a_min`` ignored (MXNet's selector fuses only
    ``a_min == 0``).  Quantized, see :meth:`conv_post_ops` and :meth:`clip_bound`.
    """

    fuses_clip = True

    def conv_post_ops(self, p) -> list[str]:
        """:meth:`post_ops` of the convolution as the quantized kernel runs them.

        Without a residual sum MXNet drops the bounded relu (``with_act`` is
        turned off): the requantized codes saturate to uint8 at the calibrated
        maximum instead, and an uncalibrated int32 result is not clipped at all.
        Before a sum it is kept, its bound scaled to output codes
        (:meth:`clip_bound`); after the sum MXNet accepts only relu.
        """
        conv = self.nested_node(p, "Convolution")
        kinds = self.post_ops(p, self.nested_node(p, "BatchNorm") or conv)
        after_sum = kinds[kinds.index("sum") + 1:] if "sum" in kinds else []
        if "clip" in after_sum:
            raise UnsupportedOpError({f"{self.name} with a clip after the residual sum "
                                      f"(quantized; MXNet accepts only relu there)": 1},
                                     where=f"node {p.node_name!r}")
        return kinds if p.with_sum else [k for k in kinds if k != "clip"]

    def clip_bound(self, p) -> float:
        """The nested clip's ``a_max`` (float32), the bounded relu's upper bound in real units."""
        return float(np.float32(self.nested_node(p, "clip").params.a_max))

    def range_names(self, p):
        names = ["data_min", "data_max"]
        return names + (["sum_min", "sum_max"] if p.with_sum else [])

    def sum_index(self, p) -> int | None:
        """Index of the residual operand among the nested inputs (``with_sum``)."""
        if not p.with_sum:
            return None
        add = self.nested_node(p, "elemwise_add") or self.nested_node(p, "_plus") \
            or self.nested_node(p, "_Plus") or self.nested_node(p, "broadcast_add")
        g = self.nested(p)
        inputs = g.input_nodes()
        for e in add.inputs:
            if e.node.op is None:
                return inputs.index(e.node)
        return len(inputs) - 1

    def quantized_inputs(self, p):
        idx = self.sum_index(p)
        return [0] if idx is None else [0, idx]

    def stored_dtype(self, p, sum_dtype: str | None) -> str:
        """The code type a quantized node's result is saturated to (MXNet 1.9.1).

        With ``with_sum`` MXNet runs the convolution in place on the residual
        operand's buffer, so oneDNN writes a calibrated node's codes in the
        residual's type, whatever the declared output type; MXNet then reads
        those bytes as the declared type.  After a relu over an int8 residual
        the uint8-scaled codes therefore saturate at 127, not 255 (the
        int8 downsample branches of a quantized ResNet).  Otherwise this is
        :meth:`quantized_out_dtype`.
        """
        out_dt = self.quantized_out_dtype(p)
        if (p.with_sum and self.calibrated(p) and not self.float_output(p)
                and str(sum_dtype) in ("int8", "uint8")):
            return str(sum_dtype)
        return out_dt

    def forward(self, p, inputs, ctx):
        if not self.quantized(p):
            return super().forward(p, inputs, ctx)
        from .fused_mkldnn_kernels import quantized_conv_forward
        return quantized_conv_forward(self, p, inputs, ctx)


@register_op("_sg_mkldnn_fully_connected")
class FusedFullyConnected(_FusedOp):
    """FullyConnected with a fused eltwise activation; quantized: int8 weights as inputs.

    A quantized node's weight and bias arrive already quantized (``*_quantize``
    int8 params) with their own ``(min, max)`` inputs after the data range, so
    its extra inputs are ``data_min, data_max, weight_min, weight_max[, bias_min,
    bias_max]``.
    """

    def has_bias(self, p) -> bool:
        fc = self.nested_node(p, "FullyConnected")
        return not fc.params.no_bias

    def eltwise(self, p) -> tuple[str, float] | None:
        """``(oneDNN algorithm, alpha)`` of the fused activation, or None without one.

        MXNet's ``SgMKLDNNFCParamParser`` (subgraph/mkldnn/mkldnn_fc.cc) turns the
        nested node into ONE eltwise post-op: Activation relu/sigmoid/tanh/softrelu
        (``GetMKLDNNActAlgo``), LeakyReLU leaky (``relu`` with ``alpha = slope``),
        elu (``alpha = slope``) and gelu (``gelu_erf``: the exact erf form, not the
        tanh one), clip (``bounded_relu``, ``alpha = a_max``), square/sqrt/exp/abs.
        The post-op runs on the float result before any requantize scale.
        """
        g = self.nested(p)
        node = g.outputs[0].node
        if node.op == "FullyConnected":
            return None
        attrs = node.attrs
        if node.op == "Activation":
            act = attrs.get("act_type", "relu")
            algs = {"relu": "relu", "sigmoid": "logistic", "tanh": "tanh",
                    "softrelu": "soft_relu"}
            if act in algs:
                return algs[act], 0.0
        elif node.op == "LeakyReLU":
            act, slope = node.params.act_type, float(np.float32(node.params.slope))
            algs = {"leaky": "relu", "elu": "elu", "gelu": "gelu_erf"}
            if act in algs:
                return algs[act], slope
        elif node.op == "clip":
            return "bounded_relu", float(np.float32(node.params.a_max))
        elif node.op in ("square", "sqrt", "exp", "abs"):
            return node.op, 0.0
        act = attrs.get("act_type", node.op)
        raise UnsupportedOpError({f"{self.name} with fused {act!r}": 1},
                                 where=f"node {p.node_ref}")

    def quantized_out_dtype(self, p) -> str:
        """float32 (``enable_float_output``), int32 uncalibrated, else MXNet's
        ``IsOutputUint8`` (subgraph/mkldnn/mkldnn_fc-inl.h): uint8 when an eltwise
        post-op of a non-negative-looking algorithm is fused (relu -- also a leaky
        one --, logistic, soft_relu, bounded_relu, square, sqrt, exp, abs), int8
        otherwise (none, tanh, elu, gelu_erf)."""
        if self.float_output(p):
            return "float32"
        if not self.calibrated(p):
            return "int32"
        elt = self.eltwise(p)
        uint8 = {"relu", "logistic", "soft_relu", "bounded_relu", "square", "sqrt", "exp", "abs"}
        return "uint8" if p.with_eltwise and elt is not None and elt[0] in uint8 else "int8"

    def range_names(self, p):
        names = ["data_min", "data_max", "weight_min", "weight_max"]
        return names + (["bias_min", "bias_max"] if self.has_bias(p) else [])

    def quantized_inputs(self, p):
        return [0, 1, 2] if self.has_bias(p) else [0, 1]

    def infer_type(self, p, in_types, out_types):
        if not self.quantized(p):
            return super().infer_type(p, in_types, out_types)
        ins, outs = super().infer_type(p, in_types, out_types)
        ins[1] = "int8"
        if self.has_bias(p):
            ins[2] = "int8"
        return ins, outs

    def forward(self, p, inputs, ctx):
        if not self.quantized(p):
            return super().forward(p, inputs, ctx)
        from .fused_mkldnn_kernels import quantized_fc_forward
        return quantized_fc_forward(self, p, inputs, ctx)


class _SelfAttention(_FusedOp):
    """Interleaved self-attention matmul of ``heads`` heads (float or quantized).

    Quantized, the interleaved ``(L, B, 3E)`` int8 codes are multiplied as
    they are (int32 accumulation) and one output scale is applied: the
    calibrated int8 requantize, the float dequantize (``enable_float_output``)
    or none (int32).
    """

    attrs = {**_FusedOp.attrs, "heads": Attr(to_int, 1)}

    def forward(self, p, inputs, ctx):
        if not self.quantized(p):
            return super().forward(p, inputs, ctx)
        from .fused_mkldnn_kernels import quantized_selfatt_forward
        return quantized_selfatt_forward(self, p, inputs, ctx)


@register_op("_sg_mkldnn_selfatt_qk")
class FusedSelfAttQK(_SelfAttention):
    """``interleaved_matmul_selfatt_qk`` fused: Q.K^T / sqrt(head_dim) per head.

    Quantized (int8 ``queries_keys_values`` + ``min_qkv``/``max_qkv``): the
    ``1/sqrt(head_dim)`` factor is part of the output scale, also for the
    int32 form, whose codes are ``round(Q.K^T / sqrt(head_dim))``.
    """

    def range_names(self, p):
        return ["min_qkv", "max_qkv"]


@register_op("_sg_mkldnn_selfatt_valatt")
class FusedSelfAttValAtt(_SelfAttention):
    """``interleaved_matmul_selfatt_valatt`` fused: attention-weighted values per head.

    Quantized: int8 ``queries_keys_values`` and uint8 ``attention`` codes
    with ``min_qkv, max_qkv, min_attention, max_attention``.
    """

    def range_names(self, p):
        return ["min_qkv", "max_qkv", "min_attention", "max_attention"]

    def quantized_inputs(self, p):
        return [0, 1]
