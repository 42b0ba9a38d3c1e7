"""Dense layers and matrix products: FullyConnected, Dropout, dot, batch_dot,
_linalg_gemm2 (MXNet 1.9.1 inference semantics).

Products accumulate in the compute dtype (float32 BLAS for float32 data,
float16 goes through float32), as MXNet's CPU kernels do.
"""

from __future__ import annotations

import numpy as np

from .common import (attr_error, cast_to, compute_dtype, fmt_shape, merge_all, merge_into,
                     normalize_axis, numel)
from .registry import Attr, OpDef, enum, optional, register_op, shape_error, to_bool, to_float, \
    to_int, to_shape

_STYPE = enum("default", "row_sparse", "csr")


# ---------------------------------------------------------------------------
# FullyConnected
# ---------------------------------------------------------------------------

@register_op("FullyConnected", aliases=("_sparse_FullyConnected", "_npx_fully_connected"))
class FullyConnected(OpDef):
    """y = x W^T + b; weight (num_hidden, in_units).

    ``flatten`` (default) collapses all but the first axis of the data
    (in_units = prod(shape[1:]), output (N, num_hidden)); otherwise the last
    axis is contracted and the leading axes are kept.
    """

    attrs = {
        "num_hidden": Attr(to_int),
        "no_bias": Attr(to_bool, False),
        "flatten": Attr(to_bool, True),
    }

    def validate(self, p):
        if p.num_hidden < 1:
            raise attr_error(p, "num_hidden", f"must be >= 1, got {p.num_hidden}")

    def input_names(self, p):
        return ["data", "weight"] if p.no_bias else ["data", "weight", "bias"]

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        d = ins[0]
        if d is None:
            return ins, outs
        if len(d) < 1:
            raise shape_error(p, "data must have at least one dimension")
        nh = p.num_hidden
        in_units = numel(d[1:]) if p.flatten else d[-1]
        if p.flatten and len(d) == 1:
            in_units = 1
        merge_into(p, ins, 1, (nh, in_units), "weight")
        if not p.no_bias:
            b = ins[2]
            if b is None or b not in ((nh,), (nh, 1)):
                merge_into(p, ins, 2, (nh,), "bias")
        out = (d[0], nh) if p.flatten else (*d[:-1], nh)
        merge_into(p, outs, 0, out, "output")
        o = outs[0]
        merge_into(p, ins, 0, (o[0],) + (None,) * (len(d) - 1), "data")
        return ins, outs

    def forward(self, p, inputs, ctx):
        x, w = inputs[0], inputs[1]
        dt = compute_dtype(x.dtype)
        x2 = x.reshape(x.shape[0], -1) if p.flatten else x
        y = np.matmul(x2.astype(dt, copy=False), w.astype(dt, copy=False).T)
        if not p.no_bias:
            y = y + inputs[2].astype(dt, copy=False).reshape(-1)
        return [cast_to(y, ctx.out_dtypes[0] or x.dtype)]


# ---------------------------------------------------------------------------
# Dropout
# ---------------------------------------------------------------------------

@register_op("Dropout", aliases=("_npx_dropout",))
class Dropout(OpDef):
    """Identity in inference (mode='training'); mode='always' drops at random.

    The hidden second output ``mask`` has the data shape with 1 on ``axes``.
    """

    attrs = {
        "p": Attr(to_float, 0.5),
        "mode": Attr(enum("training", "always"), "training"),
        "axes": Attr(to_shape, ()),
        "cudnn_off": Attr(optional(to_bool), False),
    }
    arguments = ("data",)

    def validate(self, p):
        if not 0.0 <= p.p <= 1.0:
            raise attr_error(p, "p", f"must be in [0, 1], got {p.p}")

    def num_outputs(self, p):
        return 2

    def num_visible_outputs(self, p):
        return 1

    def output_names(self, p):
        return ["output", "mask"]

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        d = merge_all(p, [ins[0], outs[0]], "data and output")
        ins[0] = outs[0] = d
        if d is not None:
            m = list(d)
            for a in p.axes:
                m[normalize_axis(p, a, len(d), "axes entry")] = 1
            merge_into(p, outs, 1, tuple(m), "mask output")
        return ins, outs

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        mshape = ctx.out_shapes[1] if len(ctx.out_shapes) > 1 and ctx.out_shapes[1] else x.shape
        if p.mode == "training" or p.p == 0:
            return [x.copy(), np.ones(mshape, dtype=x.dtype)]
        # mode='always': a fresh Bernoulli(1-p) keep mask, scaled by 1/(1-p)
        keep = 1.0 - p.p
        rng = np.random.default_rng()
        mask = (rng.random(mshape) < keep).astype(np.float64) / keep if keep > 0 \
            else np.zeros(mshape)
        dt = compute_dtype(x.dtype)
        y = x.astype(dt) * mask.astype(dt)
        return [cast_to(y, x.dtype), mask.astype(x.dtype)]


# ---------------------------------------------------------------------------
# dot, batch_dot, _linalg_gemm2
# ---------------------------------------------------------------------------

def _dot_parts(shape, transpose: bool, lhs: bool):
    """(contracted extent, kept dims) of one dot operand, MXNet's DotShape rule."""
    if lhs:
        if transpose:
            return shape[0], tuple(shape[1:])
        return shape[-1], tuple(shape[:-1])
    if transpose:
        return shape[-1], tuple(shape[:-1])
    return shape[0], tuple(shape[1:])


@register_op("dot", aliases=("_sparse_dot",))
class Dot(OpDef):
    """Tensor dot: contracts lhs's last (first if transpose_a) axis with rhs's first
    (last if transpose_b) axis; 1-D . 1-D gives shape (1,)."""

    attrs = {
        "transpose_a": Attr(to_bool, False),
        "transpose_b": Attr(to_bool, False),
        "forward_stype": Attr(optional(_STYPE), None),
    }
    arguments = ("lhs", "rhs")

    def infer_shape(self, p, in_shapes, out_shapes):
        a, b = in_shapes
        outs = list(out_shapes)
        if a is None or b is None:
            return list(in_shapes), outs
        if len(a) == 0 or len(b) == 0:
            raise shape_error(p, f"dot needs arrays of rank >= 1, got {fmt_shape(a)} and "
                                 f"{fmt_shape(b)}")
        if len(a) == 1 and len(b) == 1:
            if p.transpose_a or p.transpose_b:
                raise shape_error(p, "cannot transpose vectors")
            out = (1,)
            ka, kb = a[0], b[0]
        else:
            ka, keep_a = _dot_parts(a, p.transpose_a, True)
            kb, keep_b = _dot_parts(b, p.transpose_b, False)
            out = (keep_a if len(a) > 1 else ()) + (keep_b if len(b) > 1 else ())
        if ka is not None and kb is not None and ka != kb:
            raise shape_error(p, f"dot shape error: {fmt_shape(a)} X {fmt_shape(b)}"
                                 f"{' (transpose_a)' if p.transpose_a else ''}"
                                 f"{' (transpose_b)' if p.transpose_b else ''}")
        merge_into(p, outs, 0, out, "output")
        return list(in_shapes), outs

    def forward(self, p, inputs, ctx):
        a, b = inputs
        dt = compute_dtype(a.dtype)
        a = a.astype(dt, copy=False)
        b = b.astype(dt, copy=False)
        if a.ndim == 1 and b.ndim == 1:
            y = np.dot(a, b).reshape(1)
        else:
            a2 = a.reshape(a.shape[0], -1).T if p.transpose_a else a.reshape(-1, a.shape[-1])
            b2 = b.reshape(-1, b.shape[-1]).T if p.transpose_b else b.reshape(b.shape[0], -1)
            y = a2 @ b2
            _, keep_a = _dot_parts(a.shape, p.transpose_a, True)
            _, keep_b = _dot_parts(b.shape, p.transpose_b, False)
            y = y.reshape((keep_a if a.ndim > 1 else ()) + (keep_b if b.ndim > 1 else ()))
        return [cast_to(y, ctx.out_dtypes[0] or inputs[0].dtype)]


    def has_backward(self) -> bool:
        return True

    def backward(self, p, out_grads, inputs, outputs):
        a, b = inputs
        dy = out_grads[0]
        if a.ndim == 1 and b.ndim == 1:
            g = dy.reshape(())
            return [(g * b).astype(a.dtype), (g * a).astype(b.dtype)]
        a2 = a.reshape(a.shape[0], -1).T if p.transpose_a else a.reshape(-1, a.shape[-1])
        b2 = b.reshape(-1, b.shape[-1]).T if p.transpose_b else b.reshape(b.shape[0], -1)
        dy2 = dy.reshape(a2.shape[0], b2.shape[1])
        da2, db2 = dy2 @ b2.T, a2.T @ dy2
        da = (da2.T if p.transpose_a else da2).reshape(a.shape)
        db = (db2.T if p.transpose_b else db2).reshape(b.shape)
        return [da.astype(a.dtype, copy=False), db.astype(b.dtype, copy=False)]


@register_op("batch_dot", aliases=("_npx_batch_dot",))
class BatchDot(OpDef):
    """Batched matrix product over the leading axes of two N-D (N >= 3) arrays."""

    attrs = Dot.attrs
    arguments = ("lhs", "rhs")

    def infer_shape(self, p, in_shapes, out_shapes):
        a, b = in_shapes
        outs = list(out_shapes)
        if a is None or b is None:
            return list(in_shapes), outs
        if len(a) < 3 or len(a) != len(b):
            raise shape_error(p, f"batch_dot needs two arrays of the same rank >= 3, got "
                                 f"{fmt_shape(a)} and {fmt_shape(b)}")
        batch = merge_all(p, [a[:-2], b[:-2]], "batch dimensions of lhs and rhs")
        m, ka = (a[-1], a[-2]) if p.transpose_a else (a[-2], a[-1])
        kb, n = (b[-1], b[-2]) if p.transpose_b else (b[-2], b[-1])
        if ka is not None and kb is not None and ka != kb:
            raise shape_error(p, f"batch_dot shape error: {fmt_shape(a)} X {fmt_shape(b)}")
        merge_into(p, outs, 0, (*batch, m, n), "output")
        return list(in_shapes), outs

    def forward(self, p, inputs, ctx):
        a, b = inputs
        dt = compute_dtype(a.dtype)
        a = a.astype(dt, copy=False)
        b = b.astype(dt, copy=False)
        if p.transpose_a:
            a = np.swapaxes(a, -1, -2)
        if p.transpose_b:
            b = np.swapaxes(b, -1, -2)
        return [cast_to(np.matmul(a, b), ctx.out_dtypes[0] or inputs[0].dtype)]


@register_op("_linalg_gemm2", aliases=("linalg_gemm2",))
class LinalgGemm2(OpDef):
    """alpha * op(A) op(B) on matrices whose rows are ``axis`` and columns the last axis."""

    attrs = {
        "transpose_a": Attr(to_bool, False),
        "transpose_b": Attr(to_bool, False),
        "alpha": Attr(to_float, 1.0),
        "axis": Attr(to_int, -2),
    }
    arguments = ("A", "B")

    def infer_shape(self, p, in_shapes, out_shapes):
        a, b = in_shapes
        outs = list(out_shapes)
        if a is None or b is None or len(a) < 2 or len(a) != len(b):
            if a is not None and b is not None:
                raise shape_error(p, f"A and B must have the same rank >= 2, got "
                                     f"{fmt_shape(a)} and {fmt_shape(b)}")
            return list(in_shapes), outs
        nd = len(a)
        axis = p.axis + nd if p.axis < 0 else p.axis
        if not 0 <= axis < nd - 1:
            raise shape_error(p, f"invalid row axis {p.axis} for {nd}-D inputs")
        out = [None] * nd
        for i in range(nd - 1):
            if i != axis:
                out[i] = merge_all(p, [(a[i],), (b[i],)], f"dimension {i} of A and B")[0]
        ka = a[axis] if p.transpose_a else a[-1]
        kb = b[-1] if p.transpose_b else b[axis]
        if ka is not None and kb is not None and ka != kb:
            raise shape_error(p, f"inner matrix dimensions do not match: {fmt_shape(a)} X "
                                 f"{fmt_shape(b)}")
        out[axis] = a[-1] if p.transpose_a else a[axis]
        out[-1] = b[axis] if p.transpose_b else b[-1]
        merge_into(p, outs, 0, tuple(out), "output")
        return list(in_shapes), outs

    def forward(self, p, inputs, ctx):
        a, b = inputs
        dt = compute_dtype(a.dtype)
        nd = a.ndim
        axis = p.axis % nd
        a = np.swapaxes(a.astype(dt, copy=False), axis, -2)
        b = np.swapaxes(b.astype(dt, copy=False), axis, -2)
        if p.transpose_a:
            a = np.swapaxes(a, -1, -2)
        if p.transpose_b:
            b = np.swapaxes(b, -1, -2)
        y = np.swapaxes(np.matmul(a, b) * dt.type(p.alpha), axis, -2)
        return [cast_to(y, ctx.out_dtypes[0] or inputs[0].dtype)]

    def has_backward(self) -> bool:
        return True

    def backward(self, p, out_grads, inputs, outputs):
        """C = alpha op(A) op(B): dop(A) = alpha dC op(B)^T, dop(B) = alpha op(A)^T dC."""
        a, b = inputs
        axis = p.axis % a.ndim
        am, bm = np.swapaxes(a, axis, -2), np.swapaxes(b, axis, -2)
        dc = np.swapaxes(out_grads[0], axis, -2) * a.dtype.type(p.alpha)
        opa = np.swapaxes(am, -1, -2) if p.transpose_a else am
        opb = np.swapaxes(bm, -1, -2) if p.transpose_b else bm
        dopa = np.matmul(dc, np.swapaxes(opb, -1, -2))
        dopb = np.matmul(np.swapaxes(opa, -1, -2), dc)
        da = np.swapaxes(dopa, -1, -2) if p.transpose_a else dopa
        db = np.swapaxes(dopb, -1, -2) if p.transpose_b else dopb
        return [np.swapaxes(da, axis, -2).astype(a.dtype, copy=False),
                np.swapaxes(db, axis, -2).astype(b.dtype, copy=False)]
