"""Loss heads whose forward is a plain transform: SoftmaxOutput and the
*RegressionOutput ops.  Their ``label`` input only matters for the gradient, so
inference ignores it; its shape is still inferred as MXNet does.

SoftmaxOutput's normalisation axis in MXNet 1.9.1 (the pip build, oneDNN on):

* ``multi_output``: softmax over axis 1;
* float32 data of rank 1, 2 or 4 without ``multi_output``: the oneDNN kernel,
  softmax over the LAST axis (``preserve_shape`` or not);
* otherwise the native kernel: ``preserve_shape`` -> last axis, default ->
  flatten to (N, prod(rest)) and normalise each row.
"""

from __future__ import annotations

import numpy as np

from .common import cast_to, compute_dtype, fmt_shape, merge_all, merge_into, numel
from .nn_activation import softmax
from .registry import Attr, OpDef, enum, register_op, shape_error, to_bool, to_float


@register_op("SoftmaxOutput", aliases=("Softmax",))
class SoftmaxOutput(OpDef):
    attrs = {
        "grad_scale": Attr(to_float, 1.0),
        "ignore_label": Attr(to_float, -1.0),
        "multi_output": Attr(to_bool, False),
        "use_ignore": Attr(to_bool, False),
        "preserve_shape": Attr(to_bool, False),
        "normalization": Attr(enum("null", "batch", "valid"), "null"),
        "out_grad": Attr(to_bool, False),
        "smooth_alpha": Attr(to_float, 0.0),
    }
    arguments = ("data", "label")

    def unused_inputs(self, p):
        return [1]  # the label only drives the gradient

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        d = merge_all(p, [ins[0], outs[0]], "data and output")
        ins[0] = outs[0] = d
        if d is None:
            return ins, outs
        lab = ins[1]
        if lab is not None and lab == d:
            return ins, outs  # a probability label of the data's shape
        if p.multi_output:
            if len(d) < 2:
                raise shape_error(p, f"multi_output needs data of rank >= 2, got {fmt_shape(d)}")
            rest = numel(d[2:])
            shape1 = (d[0], rest)
            shape2 = (d[0], *d[2:])
            shape3 = (d[0], 1, *d[2:])
            if lab is None:
                ins[1] = shape1
            elif not any(_compatible(lab, s) for s in (shape1, shape2, shape3)):
                raise shape_error(p, f"label shape {fmt_shape(lab)} does not fit data "
                                     f"{fmt_shape(d)}: expecting {fmt_shape(shape1)} or "
                                     f"{fmt_shape(shape2)}")
        else:
            merge_into(p, ins, 1, d[:-1], "label")
        return ins, outs

    def axis_mode(self, p, x: np.ndarray) -> str:
        if p.multi_output:
            return "channel"
        if x.dtype == np.float32 and x.ndim in (1, 2, 4):
            return "last"
        return "last" if p.preserve_shape else "flat"

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        dt = compute_dtype(x.dtype)
        xf = x.astype(dt)
        mode = self.axis_mode(p, x)
        if mode == "channel":
            y = softmax(xf, 1)
        elif mode == "last":
            y = softmax(xf, x.ndim - 1)
        else:
            y = softmax(xf.reshape(x.shape[0], -1), 1).reshape(x.shape)
        return [cast_to(y, ctx.out_dtypes[0] or x.dtype)]


def _compatible(a, b) -> bool:
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


class _RegressionOutput(OpDef):
    """Identity-like forward; label shape = data shape ((N,) for data (N, 1))."""

    attrs = {"grad_scale": Attr(to_float, 1.0)}
    arguments = ("data", "label")

    def unused_inputs(self, p):
        return [1]  # the label only drives the gradient

    def transform(self, x):
        return x

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        d = merge_all(p, [ins[0], outs[0]], "data and output")
        ins[0] = outs[0] = d
        if d is None:
            return ins, outs
        lab = ins[1]
        if lab is None:
            ins[1] = (d[0],) if len(d) == 2 and d[1] == 1 else d
        else:
            n_lab, n_dat = numel(lab), numel(d)
            if (lab[0] is not None and d[0] is not None and lab[0] != d[0]) or \
                    (n_lab is not None and n_dat is not None and n_lab != n_dat):
                raise shape_error(p, f"label shape {fmt_shape(lab)} is inconsistent with data "
                                     f"shape {fmt_shape(d)}")
        return ins, outs

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        dt = compute_dtype(x.dtype)
        return [cast_to(self.transform(x.astype(dt)), ctx.out_dtypes[0] or x.dtype)]


@register_op("LinearRegressionOutput")
class LinearRegressionOutput(_RegressionOutput):
    pass


@register_op("MAERegressionOutput")
class MAERegressionOutput(_RegressionOutput):
    pass


@register_op("LogisticRegressionOutput")
class LogisticRegressionOutput(_RegressionOutput):
    def transform(self, x):
        with np.errstate(over="ignore"):
            return 1.0 / (1.0 + np.exp(-x))

