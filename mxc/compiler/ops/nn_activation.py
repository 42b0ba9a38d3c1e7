"""Activation layers and the softmax family (MXNet 1.9.1 inference semantics).

* Activation: relu, sigmoid, tanh, softrelu (log(1+exp(x)), x itself above
  20 as mshadow does), softsign, plus log_sigmoid and mish;
* LeakyReLU: leaky, prelu (learned ``gamma`` broadcast over the channel axis),
  elu, selu, gelu (exact erf form), rrelu (slope (lower+upper)/2 in inference,
  with a hidden second output ``mask`` that MXNet leaves uninitialised);
* softmax / log_softmax / softmin over ``axis`` with ``temperature`` and an
  optional output ``dtype``; softmax alone has ``use_length`` (a ``length``
  input; positions at or past the length are 0);
* SoftmaxActivation: instance = softmax over the last axis, channel = over axis 1.
"""

from __future__ import annotations

import numpy as np

from ._nn_helpers import erf
from .common import (attr_error, cast_to, compute_dtype, ElemwiseShapeMixin, fmt_shape, merge_all,
                     merge_into, normalize_axis)
from .registry import Attr, OpDef, enum, optional, register_op, shape_error, to_bool, to_float, \
    to_int

# ---------------------------------------------------------------------------
# Activation
# ---------------------------------------------------------------------------


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softrelu(x):
    with np.errstate(over="ignore"):
        return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))


_ACTIVATIONS = {
    "relu": lambda x: np.maximum(x, 0),
    "sigmoid": _sigmoid,
    "tanh": np.tanh,
    "softrelu": _softrelu,
    "softsign": lambda x: x / (1 + np.abs(x)),
    "log_sigmoid": lambda x: np.log(_sigmoid(x)),
    "mish": lambda x: x * np.tanh(_softrelu(x)),
}


@register_op("Activation", aliases=("_npx_activation",))
class Activation(ElemwiseShapeMixin, OpDef):
    attrs = {"act_type": Attr(enum(*_ACTIVATIONS))}
    arguments = ("data",)

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        dt = compute_dtype(x.dtype)
        with np.errstate(over="ignore"):
            y = _ACTIVATIONS[p.act_type](x.astype(dt, copy=False))
        return [cast_to(y, ctx.out_dtypes[0] or x.dtype)]


# ---------------------------------------------------------------------------
# LeakyReLU
# ---------------------------------------------------------------------------

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_LAMBDA = 1.0507009873554804934193349852946


def expand_gamma_shape(gshape, dshape):
    """MXNet's expand_shape: place gamma's dims at axes <= 1 of data, right-aligned."""
    result = [1] * len(dshape)
    s = len(gshape) - 1
    for i in range(len(dshape) - 1, -1, -1):
        if s >= 0 and i <= 1 and (dshape[i] == gshape[s] or gshape[s] == 1):
            result[i] = gshape[s]
            s -= 1
    if s != -1:
        raise ValueError(f"gamma of shape {gshape} cannot be broadcast to data {dshape}")
    return tuple(result)


@register_op("LeakyReLU", aliases=("_npx_leaky_relu",))
class LeakyReLU(OpDef):
    attrs = {
        "act_type": Attr(enum("rrelu", "leaky", "prelu", "elu", "selu", "gelu"), "leaky"),
        "slope": Attr(to_float, 0.25),
        "lower_bound": Attr(to_float, 0.125),
        "upper_bound": Attr(to_float, 0.334),
    }

    def input_names(self, p):
        return ["data", "gamma"] if p.act_type == "prelu" else ["data"]

    def input_var_attrs(self, p, input_name):
        # MXNet's FSetInputVarAttrOnCompose: an auto-created prelu gamma starts at 0.25
        if input_name == "gamma":
            return {"__init__": '["Constant", {"value": 0.25}]'}
        return {}

    def num_outputs(self, p):
        return 2 if p.act_type == "rrelu" else 1

    def num_visible_outputs(self, p):
        return 1

    def output_names(self, p):
        return ["output", "mask"] if p.act_type == "rrelu" else ["output"]

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        d = merge_all(p, [ins[0]] + outs, "data and outputs")
        ins[0] = d
        outs = [d] * len(outs)
        if p.act_type == "prelu" and d is not None and ins[1] is None:
            if len(d) < 2:
                raise shape_error(p, f"prelu needs data with a channel axis, got {fmt_shape(d)}")
            ins[1] = (d[1],)
        return ins, outs

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        dt = compute_dtype(x.dtype)
        xf = x.astype(dt, copy=False)
        t = p.act_type
        with np.errstate(over="ignore"):
            if t == "leaky":
                y = np.where(xf > 0, xf, xf * dt.type(p.slope))
            elif t == "prelu":
                g = inputs[1].astype(dt, copy=False)
                g = g.reshape(expand_gamma_shape(g.shape, x.shape))
                y = np.where(xf > 0, xf, g * xf)
            elif t == "elu":
                y = np.where(xf > 0, xf, dt.type(p.slope) * np.expm1(xf))
            elif t == "selu":
                neg = dt.type(_SELU_ALPHA) * np.expm1(xf)
                y = dt.type(_SELU_LAMBDA) * np.where(xf > 0, xf, neg)
            elif t == "gelu":
                y = 0.5 * xf * (1.0 + erf(xf / np.sqrt(2.0)))
            else:  # rrelu: the mean slope in inference
                y = np.where(xf > 0, xf, xf * dt.type((p.lower_bound + p.upper_bound) / 2))
        out = [cast_to(y, ctx.out_dtypes[0] or x.dtype)]
        if t == "rrelu":
            out.append(np.zeros(x.shape, dtype=ctx.out_dtypes[1] or x.dtype))
        return out


# ---------------------------------------------------------------------------
# softmax family
# ---------------------------------------------------------------------------

def softmax(x: np.ndarray, axis: int, temperature: float = 1.0, log: bool = False) -> np.ndarray:
    z = x if temperature == 1.0 else x / x.dtype.type(temperature)
    z = z - z.max(axis=axis, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=axis, keepdims=True)
    return z - np.log(s) if log else e / s


class _SoftmaxBase(OpDef):
    attrs = {
        "axis": Attr(to_int, -1),
        "temperature": Attr(optional(to_float), None),
        "dtype": Attr(optional(enum("float16", "float32", "float64")), None),
        "use_length": Attr(optional(to_bool), False),
    }
    negate = False
    log = False
    has_length = True  # only softmax registers the second input

    def validate(self, p):
        if p.use_length and not self.has_length:
            raise attr_error(p, "use_length", f"{self.name} takes no length input in MXNet "
                                              f"1.9.1 (only softmax supports use_length)")

    def input_names(self, p):
        return ["data", "length"] if p.use_length else ["data"]

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        d = merge_all(p, [ins[0], outs[0]], "data and output")
        ins[0] = outs[0] = d
        if p.use_length and d is not None:
            axis = normalize_axis(p, p.axis, len(d), "axis")
            lshape = tuple(v for i, v in enumerate(d) if i != axis) or (1,)
            merge_into(p, ins, 1, lshape, "length")
        return ins, outs

    def infer_type(self, p, in_types, out_types):
        ins, outs = list(in_types), list(out_types)
        if p.dtype is not None:
            outs[0] = p.dtype
            if ins[0] is None:
                ins[0] = p.dtype
        elif ins[0] is not None:
            outs[0] = ins[0]
        elif outs[0] is not None:
            ins[0] = outs[0]
        return ins, outs

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        dt = compute_dtype(x.dtype)
        if x.dtype.kind != "f":
            dt = np.dtype(np.float32)
        axis = p.axis % x.ndim
        xf = x.astype(dt)
        if self.negate:
            xf = -xf
        t = 1.0 if p.temperature is None else p.temperature
        if p.use_length:
            length = inputs[1].astype(np.int64)
            pos = np.arange(x.shape[axis]).reshape([-1 if i == axis else 1
                                                    for i in range(x.ndim)])
            valid = pos < np.expand_dims(length.reshape(
                [s for i, s in enumerate(x.shape) if i != axis]), axis)
            xm = np.where(valid, xf, -np.inf)
            with np.errstate(invalid="ignore", divide="ignore"):
                y = softmax(xm, axis, t, self.log)
            y = np.where(valid, y, 0)
        else:
            y = softmax(xf, axis, t, self.log)
        return [cast_to(y, ctx.out_dtypes[0] or p.dtype or x.dtype)]


@register_op("softmax", aliases=("_npx_softmax",))
class Softmax(_SoftmaxBase):
    pass


@register_op("log_softmax", aliases=("_npx_log_softmax",))
class LogSoftmax(_SoftmaxBase):
    log = True
    has_length = False


@register_op("softmin")
class Softmin(_SoftmaxBase):
    negate = True
    has_length = False


@register_op("SoftmaxActivation")
class SoftmaxActivation(ElemwiseShapeMixin, OpDef):
    attrs = {"mode": Attr(enum("instance", "channel"), "instance")}
    arguments = ("data",)

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        dt = compute_dtype(x.dtype)
        if p.mode == "channel" and x.ndim < 2:
            raise attr_error(p, "mode", f"channel mode needs data with a channel axis, got "
                                        f"shape {x.shape}")
        y = softmax(x.astype(dt), 1 if p.mode == "channel" else x.ndim - 1)
        return [cast_to(y, ctx.out_dtypes[0] or x.dtype)]
