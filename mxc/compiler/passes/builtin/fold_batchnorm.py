"""``fold-batchnorm``: fold inference BatchNorm into the layer before it.

In inference ``BatchNorm(y) = (y - mean) * s + beta`` per channel, with
``s = gamma / sqrt(var + eps)`` (``gamma`` taken as 1 under ``fix_gamma``).
When ``y = W * x + b`` comes from a ``Convolution``, ``FullyConnected`` or
``Deconvolution`` that nothing else reads, the pair is the same layer with

    W' = W * s   (per output channel)      b' = (b - mean) * s + beta

so the BatchNorm node disappears, the layer gets a bias if it had none
(``no_bias`` becomes False), and the BatchNorm's four parameters leave the
model.  Folded only when: the BatchNorm normalizes the layer's channel axis
(``axis``; for a convolution, the ``C`` of its layout), its statistics
outputs are unused, weight, bias and BatchNorm inputs are variables with
known arrays.  Grouped convolutions (``num_group``) fold per output channel;
a grouped Deconvolution's weight is ``(C, F/G, ...)`` and is scaled per
group.  A weight or bias shared with another node gets a new variable.

A BatchNorm that cannot fold (pre-activation networks normalise a sum or a
concatenation, not a layer's output) becomes the per-channel affine map it is
in inference, ``broadcast_add(broadcast_mul(x, s), beta - mean * s)`` with
``s`` and the shift as new ``(1, C, 1, 1)``-shaped parameters (in the data's
dtype), so no BatchNorm survives inference optimisation.  It stays only when
its statistics outputs are read or its parameters or rank are unknown.
"""

from __future__ import annotations

import numpy as np

from ...ir import Node
from ..pattern import is_op, is_var, wildcard
from ..registry import register_pass
from ..rewrite import RewritePattern, rewrite
from ._common import entry_uses

LAYERS = ("Convolution", "FullyConnected", "Deconvolution", "Convolution_v1")
#: inference BatchNorms: the legacy and cross-device ones share BatchNorm's arithmetic
BATCH_NORMS = ("BatchNorm", "BatchNorm_v1", "_contrib_SyncBatchNorm")


def foldable_pattern():
    """``BatchNorm(<single-use Conv/FC/Deconv>(x, var, ...), var, var, var, var)``."""
    layer = is_op(*LAYERS)(wildcard(), is_var(), ...).one_use().named("layer")
    return is_op(*BATCH_NORMS)(layer, is_var(), is_var(), is_var(), is_var()).named("bn")


@register_pass("fold-batchnorm", extra_options=False)
def fold_batchnorm(graph, ctx):
    """Fold inference BatchNorm into the preceding Convolution/FullyConnected/Deconvolution."""
    info = None

    def ndim_of(node: Node):
        nonlocal info
        if info is None:
            info = ctx.infer()
        shape = info.shape(node.out)
        return None if shape is None else len(shape)

    def fold(m):
        bn, layer = m.node("bn"), m.node("layer")
        reason = _why_not(bn, layer, m.graph, ndim_of)
        if reason is None:
            reason = _fold(bn, layer, ctx)
        if reason is not None:
            ctx.stat(f"not folded: {reason}")
            return None
        ctx.stat(f"folded into {layer.opdef.name}")
        return layer.out

    rewrite(ctx, RewritePattern(foldable_pattern(), fold, name="fold-batchnorm"))
    info = None

    def scale_shift(m):
        nonlocal info
        if info is None:
            info = ctx.infer()
        bn = m.node("bn")
        if info.shape(bn.inputs[0]) is None:  # data made by this rewrite: infer again
            info = ctx.infer()
        reason = _why_not_affine(bn, m.graph, info, ctx)
        if reason is not None:
            ctx.stat(f"kept: {reason}")
            return None
        ctx.stat("became a per-channel scale and shift")
        return _affine(bn, info, ctx)

    rewrite(ctx, RewritePattern(is_op("BatchNorm")(wildcard(), is_var(), is_var(), is_var(),
                                                   is_var()).named("bn"),
                                scale_shift, name="batchnorm-to-scale-shift"))


def _why_not_affine(bn: Node, graph, info, ctx) -> str | None:
    if bn.params.output_mean_var or entry_uses(graph, bn[1]) or entry_uses(graph, bn[2]):
        return "statistics outputs used"
    if info.shape(bn.inputs[0]) is None:
        return "data rank unknown (give the input shapes)"
    if any(ctx.param(e.node) is None for e in bn.inputs[1:]):
        return "parameter values unknown"
    return None


def _affine(bn: Node, info, ctx):
    """``x * s + shift`` per channel of the BatchNorm's axis, as two broadcast ops."""
    p = bn.params
    ndim = len(info.shape(bn.inputs[0]))
    # an input without a declared dtype is float32 (MXNet's default), as are the statistics
    dtype = info.dtype(bn.inputs[0]) or ctx.param(bn.inputs[1].node).dtype.name
    gamma, beta, mean, var = (ctx.param(e.node).astype(np.float64).reshape(-1)
                              for e in bn.inputs[1:])
    scale = 1.0 / np.sqrt(var + p.eps)
    if not p.fix_gamma:
        scale = scale * gamma
    shift = beta - mean * scale
    shape = [1] * ndim
    shape[p.axis % ndim] = -1
    s_var = ctx.alloc_arg(ctx.graph.fresh_name(f"{bn.name}_scale"),
                          value=scale.reshape(shape).astype(dtype))
    b_var = ctx.alloc_arg(ctx.graph.fresh_name(f"{bn.name}_shift"),
                          value=shift.reshape(shape).astype(dtype))
    # fresh names: a BatchNorm block applied twice exports two nodes of one name
    mul = ctx.add_node("broadcast_mul", [bn.inputs[0], s_var],
                       name=ctx.graph.fresh_name(f"{bn.name}_scale_mul"))
    return ctx.add_node("broadcast_add", [mul, b_var],
                        name=ctx.graph.fresh_name(f"{bn.name}_shift_add")).out


def _channel_axis(layer: Node, ndim_of) -> tuple[int | None, int | None]:
    """(channel axis, ndim) of the layer's output; None where unknown/unsupported."""
    p = layer.params
    op = layer.opdef.name
    if op == "FullyConnected":
        if p.flatten:
            return 1, 2
        ndim = ndim_of(layer)
        return (None if ndim is None else ndim - 1), ndim
    ndim = len(p.kernel) + 2
    layout = p.layout
    if op == "Deconvolution" and layout is not None and not layout.startswith("NC"):
        return None, ndim
    return (1 if layout is None else layout.index("C")), ndim


def _why_not(bn: Node, layer: Node, graph, ndim_of) -> str | None:
    p = bn.params
    if p.output_mean_var or entry_uses(graph, bn[1]) or entry_uses(graph, bn[2]):
        return "statistics outputs used"
    channel, ndim = _channel_axis(layer, ndim_of)
    if channel is None:
        return "unknown channel axis"
    axis = p.axis
    if axis < 0:
        if ndim is None:
            ndim = ndim_of(layer)
        if ndim is None:
            return "unknown rank"
        axis += ndim
    if axis != channel:
        return "axis is not the channel axis"
    if not layer.params.no_bias and layer.inputs[2].node.op is not None:
        return "bias is not a variable"
    return None


def _fold(bn: Node, layer: Node, ctx) -> str | None:
    """Rewrite *layer* with folded weight and bias; None on success, else why not."""
    p, lp = bn.params, layer.params
    weight_var = layer.inputs[1].node
    bias_var = None if lp.no_bias else layer.inputs[2].node
    names = [weight_var] + ([bias_var] if bias_var is not None else []) + \
        [e.node for e in bn.inputs[1:]]
    arrays = [ctx.param(n) for n in names]
    if any(a is None for a in arrays):
        return "parameter values unknown"
    w, *rest = arrays
    b = rest.pop(0) if bias_var is not None else None
    gamma, beta, mean, var = (a.astype(np.float64).reshape(-1) for a in rest)
    scale = 1.0 / np.sqrt(var + p.eps)
    if not p.fix_gamma:
        scale = scale * gamma
    new_w = _scale_weight(layer, w.astype(np.float64), scale)
    if new_w is None:
        return "weight shape does not match the channels"
    bias = np.zeros_like(mean) if b is None else b.astype(np.float64).reshape(-1)
    new_b = (bias - mean) * scale + beta
    _set_param(ctx, layer, 1, weight_var, new_w.astype(w.dtype), "weight")
    if bias_var is None:
        layer.attrs["no_bias"] = "False"
        bias_name = ctx.graph.fresh_name(f"{layer.name}_bias")
        ctx.connect(ctx.alloc_arg(bias_name, value=new_b.astype(w.dtype)), layer)
    else:
        _set_param(ctx, layer, 2, bias_var, new_b.astype(b.dtype).reshape(b.shape), "bias")
    return None


def _scale_weight(layer: Node, w: np.ndarray, scale: np.ndarray) -> np.ndarray | None:
    op = layer.opdef.name
    channels = scale.shape[0]
    if op == "Deconvolution":  # (C, F/G, *k): output channel f = g * F/G + j
        groups = layer.params.num_group
        if w.ndim < 2 or w.shape[1] * groups != channels or w.shape[0] % groups:
            return None
        g = w.reshape(groups, w.shape[0] // groups, w.shape[1], *w.shape[2:])
        s = scale.reshape(groups, 1, w.shape[1], *([1] * (w.ndim - 2)))
        return (g * s).reshape(w.shape)
    if w.shape[0] != channels:  # Convolution (F, ...) and FullyConnected (F, in)
        return None
    return w * scale.reshape(-1, *([1] * (w.ndim - 1)))


def _set_param(ctx, layer: Node, slot: int, var: Node, value: np.ndarray, what: str) -> None:
    """Give *layer* input *slot* the array *value*: in place, or in a new variable if shared."""
    if var.num_uses() == 1 and not any(e.node is var for e in ctx.graph.outputs):
        ctx.alloc_arg(var, value=value)
    else:
        fresh = ctx.alloc_arg(ctx.graph.fresh_name(f"{layer.name}_{what}_folded"), value=value)
        ctx.connect(fresh, layer, slot)
