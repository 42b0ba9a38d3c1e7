"""Activations and the softmax family (``mxc/compiler/ops/nn_activation.py``).

Everything computes in the compute dtype (float16 through float32); NaN
passes through ``relu`` as numpy's ``maximum`` lets it.
"""

from __future__ import annotations

import math

import numpy as np

from ....compiler.ops.nn_activation import expand_gamma_shape
from ..converter import Lowering, register_converter
from ._common import R, compute_dtype, const, extern_unary, is_float, pos_axis, te_elementwise

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_LAMBDA = 1.0507009873554804934193349852946


def _relu(x, dt):
    zero = const(0, dt)
    keep = R.greater(x, zero)
    if is_float(dt):
        keep = R.logical_or(keep, R.isnan(x))
    return R.where(keep, x, zero)


def _sigmoid(x, dt):
    return R.divide(const(1, dt), R.add(const(1, dt), R.exp(R.negative(x))))


def _softrelu(x, dt):
    """log(1 + exp(x)), and x itself above 20 (mshadow's softrelu)."""
    capped = R.minimum(x, const(20, dt))
    return R.where(R.greater(x, const(20, dt)), x, R.log(R.add(const(1, dt), R.exp(capped))))


_ACTIVATIONS = {
    "relu": _relu,
    "sigmoid": _sigmoid,
    "tanh": lambda x, dt: R.tanh(x),
    "softrelu": _softrelu,
    "softsign": lambda x, dt: R.divide(x, R.add(const(1, dt), R.abs(x))),
    "log_sigmoid": lambda x, dt: R.log(_sigmoid(x, dt)),
    "mish": lambda x, dt: R.multiply(x, R.tanh(_softrelu(x, dt))),
}


@register_converter("Activation")
def activation(ctx: Lowering):
    dt = compute_dtype(ctx.in_dtypes[0])
    x = ctx.astype(ctx.inputs[0], dt)
    return ctx.astype(ctx.emit(_ACTIVATIONS[ctx.p.act_type](x, dt)), ctx.out_dtype)


@register_converter("LeakyReLU")
def leaky_relu(ctx: Lowering):
    p = ctx.p
    dt = compute_dtype(ctx.in_dtypes[0])
    x = ctx.astype(ctx.inputs[0], dt)
    zero = const(0, dt)
    pos = R.greater(x, zero)
    t = p.act_type
    if t in ("leaky", "rrelu"):
        slope = p.slope if t == "leaky" else (p.lower_bound + p.upper_bound) / 2
        y = R.where(pos, x, R.multiply(x, const(slope, dt)))
    elif t == "prelu":
        g = ctx.astype(ctx.inputs[1], dt)
        g = ctx.reshape(g, expand_gamma_shape(ctx.in_shapes[1], ctx.in_shapes[0]))
        y = R.where(pos, x, R.multiply(g, x))
    elif t in ("elu", "selu"):
        em1 = te_elementwise(ctx, extern_unary("expm1f", "expm1"), x, name="mxc_expm1")
        if t == "elu":
            y = R.where(pos, x, R.multiply(const(p.slope, dt), em1))
        else:
            neg = R.multiply(const(_SELU_ALPHA, dt), em1)
            y = R.multiply(const(_SELU_LAMBDA, dt), R.where(pos, x, neg))
    else:  # gelu, exact erf form
        y = R.multiply(R.multiply(const(0.5, dt), x),
                       R.add(const(1, dt), R.erf(R.divide(x, const(math.sqrt(2.0), dt)))))
    out = ctx.astype(ctx.emit(y), ctx.out_dtype)
    if t == "rrelu" and len(ctx.out_shapes) > 1:   # the mask MXNet leaves uninitialised
        return [out, R.zeros(ctx.out_shapes[1], ctx.out_dtypes[1])]
    return out


def _softmax(ctx: Lowering, axis: int, *, log: bool = False, negate: bool = False,
             temperature=None, length=None):
    in_dt = ctx.in_dtypes[0]
    dt = compute_dtype(in_dt) if is_float(in_dt) else "float32"
    x = ctx.astype(ctx.inputs[0], dt)
    if negate:
        x = ctx.emit(R.negative(x))
    if temperature is not None and temperature != 1.0:
        x = ctx.emit(R.divide(x, const(temperature, dt)))
    valid = None
    if length is not None:
        shape = ctx.in_shapes[0]
        pos = [1] * len(shape)
        pos[axis] = shape[axis]
        steps = ctx.const(np.arange(shape[axis], dtype="int64").reshape(pos))
        lshape = list(shape)
        lshape[axis] = 1
        lens = ctx.reshape(ctx.astype(length, "int64"), lshape)
        valid = ctx.emit(R.less(steps, lens))
        x = ctx.emit(R.where(valid, x, const(float("-inf"), dt)))
    y = ctx.emit(R.nn.log_softmax(x, axis=axis) if log else R.nn.softmax(x, axis=axis))
    if valid is not None:
        y = ctx.emit(R.where(valid, y, const(0, dt)))
    return ctx.astype(y, ctx.out_dtype)


def _softmax_family(log=False, negate=False):
    def convert(ctx: Lowering):
        p = ctx.p
        axis = pos_axis(p.axis, len(ctx.in_shapes[0]))
        length = ctx.inputs[1] if getattr(p, "use_length", False) else None
        return _softmax(ctx, axis, log=log, negate=negate, temperature=p.temperature,
                        length=length)
    return convert


register_converter("softmax")(_softmax_family())
register_converter("log_softmax")(_softmax_family(log=True))
register_converter("softmin")(_softmax_family(negate=True))


@register_converter("SoftmaxActivation")
def softmax_activation(ctx: Lowering):
    ndim = len(ctx.in_shapes[0])
    return _softmax(ctx, 1 if ctx.p.mode == "channel" else ndim - 1)
