"""Normalisation layers: BatchNorm, InstanceNorm, LayerNorm, GroupNorm,
L2Normalization and LRN (inference semantics of MXNet 1.9.1).

All of them have hidden extra outputs (statistics) that MXNet allocates but
shows in ``list_outputs`` only where ``output_mean_var`` asks for them.
"""

from __future__ import annotations

import numpy as np

from ._nn_helpers import LegacySchema
from .common import (attr_error, cast_to, compute_dtype, fmt_shape, merge_all, merge_into,
                     normalize_axis)
from .registry import Attr, OpDef, enum, optional, register_op, shape_error, to_bool, to_float, \
    to_int, to_str


def _same_shape_io(p, ins, outs, what="data and output"):
    """Data (input 0) and output 0 share one shape; merged both ways."""
    s = merge_all(p, [ins[0], outs[0]], what)
    ins[0] = s
    outs[0] = s
    return s


class _NormWithStats(OpDef):
    """data, gamma, beta -> output (+ two statistics, visible with output_mean_var)."""

    arguments = ("data", "gamma", "beta")
    stat_names = ("mean", "std")

    def num_outputs(self, p):
        return 3

    def num_visible_outputs(self, p):
        return 3 if p.get("output_mean_var", False) else 1

    def output_names(self, p):
        return ["output", *self.stat_names]


# ---------------------------------------------------------------------------
# BatchNorm
# ---------------------------------------------------------------------------

@register_op("BatchNorm", aliases=("_npx_batch_norm",))
class BatchNorm(_NormWithStats):
    """Inference: (x - moving_mean) / sqrt(moving_var + eps) * gamma + beta per channel.

    ``fix_gamma`` (default True) treats gamma as 1.  The hidden outputs are
    moving_mean and the inverse standard deviation 1/sqrt(moving_var + eps).
    Parameters and statistics are float32 when the data is float16 or bfloat16.
    """

    attrs = {
        "eps": Attr(to_float, 1e-3),
        "momentum": Attr(to_float, 0.9),
        "fix_gamma": Attr(to_bool, True),
        "use_global_stats": Attr(to_bool, False),
        "output_mean_var": Attr(to_bool, False),
        "axis": Attr(to_int, 1),
        "cudnn_off": Attr(to_bool, False),
        "min_calib_range": Attr(optional(to_float), None),
        "max_calib_range": Attr(optional(to_float), None),
    }
    aux = ("moving_mean", "moving_var")
    stat_names = ("mean", "var")

    def validate(self, p):
        if p.eps < 0:
            raise attr_error(p, "eps", f"must be non-negative, got {p.eps}")

    def input_var_attrs(self, p, input_name):
        # MXNet's FSetInputVarAttrOnCompose: moving statistics start at 0 and 1
        if input_name == "moving_mean":
            return {"__init__": '["zero", {}]'}
        if input_name == "moving_var":
            return {"__init__": '["one", {}]'}
        return {}

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        d = _same_shape_io(p, ins, outs)
        if d is None:
            return ins, outs
        axis = normalize_axis(p, p.axis, len(d), "axis")
        c = (d[axis],)
        for i, name in enumerate(("gamma", "beta", "moving_mean", "moving_var"), start=1):
            merge_into(p, ins, i, c, name)
        merge_into(p, outs, 1, c, "mean output")
        merge_into(p, outs, 2, c, "var output")
        return ins, outs

    def infer_type(self, p, in_types, out_types):
        dtype = in_types[0] if in_types[0] is not None else out_types[0]
        if dtype is None:
            return in_types, out_types
        # MXNet keeps the parameters and statistics of half-precision data in float32
        param = "float32" if dtype in ("float16", "bfloat16") else dtype
        return [dtype] + [param] * (len(in_types) - 1), [dtype, param, param]

    def forward(self, p, inputs, ctx):
        x, gamma, beta, mean, var = inputs
        dt = compute_dtype(x.dtype)
        axis = p.axis % x.ndim
        bshape = [1] * x.ndim
        bshape[axis] = x.shape[axis]
        mean = mean.astype(dt)
        inv_std = 1.0 / np.sqrt(var.astype(dt) + dt.type(p.eps))
        scale = inv_std if p.fix_gamma else gamma.astype(dt) * inv_std
        y = (x.astype(dt) - mean.reshape(bshape)) * scale.reshape(bshape) \
            + beta.astype(dt).reshape(bshape)
        pdt = ctx.out_dtypes[1] or mean.dtype
        return [cast_to(y, ctx.out_dtypes[0] or x.dtype), cast_to(mean, pdt),
                cast_to(inv_std, ctx.out_dtypes[2] or pdt)]


@register_op("BatchNorm_v1")
class BatchNormV1(LegacySchema, BatchNorm):
    """The pre-1.0 BatchNorm: the same inference kernel as :class:`BatchNorm`.

    Its schema is a subset (no ``axis``, ``cudnn_off`` or calibration
    ranges): channels are always axis 1.  With ``output_mean_var`` MXNet 1.9.1
    does not write the two statistic outputs in inference; mxc writes the
    moving mean and the inverse standard deviation there, as BatchNorm does.
    """

    legacy_attrs = ("eps", "momentum", "fix_gamma", "use_global_stats", "output_mean_var")


@register_op("_contrib_SyncBatchNorm")
class SyncBatchNorm(BatchNormV1):
    """Cross-device BatchNorm; in inference a plain BatchNorm with the moving statistics.

    ``key`` and ``ndev`` only name the all-reduce of training-time batch
    statistics, so they do not change inference.
    """

    attrs = {**BatchNorm.attrs, "key": Attr(to_str), "ndev": Attr(to_int, 1)}
    legacy_attrs = BatchNormV1.legacy_attrs + ("key", "ndev")


@register_op("_contrib_BatchNormWithReLU")
class BatchNormWithReLU(BatchNorm):
    """oneDNN's fused ``relu(BatchNorm(x))`` (MXNet runs it on 4-D NCHW data only;
    mxc accepts any rank, the arithmetic being per channel)."""

    def forward(self, p, inputs, ctx):
        y, mean, inv_std = super().forward(p, inputs, ctx)
        return [np.maximum(y, y.dtype.type(0)), mean, inv_std]


# ---------------------------------------------------------------------------
# InstanceNorm / LayerNorm / GroupNorm
# ---------------------------------------------------------------------------

@register_op("InstanceNorm")
class InstanceNorm(_NormWithStats):
    """Per (sample, channel) normalisation over the spatial axes; gamma/beta per channel."""

    attrs = {"eps": Attr(to_float, 1e-3)}
    stat_names = ("mean", "var")

    @staticmethod
    def statistics_dtype(dtype) -> np.dtype:
        """The dtype the mean and variance are accumulated in: float64 for float inputs.

        MXNet sums each instance with mshadow's compensated (Kahan) reduction and
        takes the variance in a second pass over the centred values, so its
        statistics are exact to the last float32 bit even over tens of thousands
        of spatial elements.  A plain float32 sum (or the one-pass
        ``E[x^2] - E[x]^2``) loses several bits there; a float64 accumulator
        matches MXNet's accuracy on every backend.
        """
        dt = compute_dtype(dtype)
        return np.dtype(np.float64) if dt.kind == "f" else dt

    def num_visible_outputs(self, p):
        return 1

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        d = _same_shape_io(p, ins, outs)
        if d is None:
            return ins, outs
        if len(d) < 3:
            raise shape_error(p, f"InstanceNorm needs data of rank >= 3, got {fmt_shape(d)}")
        merge_into(p, ins, 1, (d[1],), "gamma")
        merge_into(p, ins, 2, (d[1],), "beta")
        merge_into(p, outs, 1, (d[0], d[1]), "mean output")
        merge_into(p, outs, 2, (d[0], d[1]), "var output")
        return ins, outs

    def forward(self, p, inputs, ctx):
        x, gamma, beta = inputs
        dt = compute_dtype(x.dtype)
        n, c = x.shape[:2]
        xs = x.astype(self.statistics_dtype(x.dtype)).reshape(n, c, -1)
        mean = xs.mean(axis=2)
        var = ((xs - mean[..., None]) ** 2).mean(axis=2)
        inv_std = (1 / np.sqrt(var + p.eps)).astype(dt)
        mean, var = mean.astype(dt), var.astype(dt)
        xr = x.astype(dt).reshape(n, c, -1)
        y = (xr - mean[..., None]) * inv_std[..., None]
        y = y * gamma.astype(dt)[None, :, None] + beta.astype(dt)[None, :, None]
        odt = ctx.out_dtypes
        return [cast_to(y.reshape(x.shape), odt[0] or x.dtype), cast_to(mean, odt[1] or x.dtype),
                cast_to(var, odt[2] or x.dtype)]


@register_op("LayerNorm", aliases=("_npx_layer_norm",))
class LayerNorm(_NormWithStats):
    """Normalise over ``axis``; gamma/beta of length data.shape[axis]; outputs mean and std."""

    attrs = {
        "axis": Attr(to_int, -1),
        "eps": Attr(to_float, 1e-5),
        "output_mean_var": Attr(to_bool, False),
    }

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        d = _same_shape_io(p, ins, outs)
        if d is None:
            return ins, outs
        axis = normalize_axis(p, p.axis, len(d), "axis")
        merge_into(p, ins, 1, (d[axis],), "gamma")
        merge_into(p, ins, 2, (d[axis],), "beta")
        moments = tuple(1 if i == axis else v for i, v in enumerate(d))
        merge_into(p, outs, 1, moments, "mean output")
        merge_into(p, outs, 2, moments, "std output")
        return ins, outs

    def forward(self, p, inputs, ctx):
        x, gamma, beta = inputs
        dt = compute_dtype(x.dtype)
        axis = p.axis % x.ndim
        xf = x.astype(dt)
        mean = xf.mean(axis=axis, keepdims=True)
        var = ((xf - mean) ** 2).mean(axis=axis, keepdims=True)
        std = np.sqrt(var + dt.type(p.eps))
        bshape = [1] * x.ndim
        bshape[axis] = x.shape[axis]
        y = (xf - mean) / std * gamma.astype(dt).reshape(bshape) + beta.astype(dt).reshape(bshape)
        odt = ctx.out_dtypes
        return [cast_to(y, odt[0] or x.dtype), cast_to(mean, odt[1] or x.dtype),
                cast_to(std, odt[2] or x.dtype)]


@register_op("GroupNorm")
class GroupNorm(_NormWithStats):
    """Normalise each of ``num_groups`` channel groups; MXNet 1.9.1's gamma/beta are per GROUP."""

    attrs = {
        "num_groups": Attr(to_int, 1),
        "eps": Attr(to_float, 1e-5),
        "output_mean_var": Attr(to_bool, False),
    }

    def validate(self, p):
        if p.num_groups < 1:
            raise attr_error(p, "num_groups", f"must be >= 1, got {p.num_groups}")

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        d = _same_shape_io(p, ins, outs)
        if d is None:
            return ins, outs
        if len(d) < 3:
            raise shape_error(p, f"GroupNorm needs data of rank >= 3, got {fmt_shape(d)}")
        g = p.num_groups
        if d[1] is not None and d[1] % g:
            raise shape_error(p, f"channels {d[1]} must be divisible by num_groups={g}")
        merge_into(p, ins, 1, (g,), "gamma")
        merge_into(p, ins, 2, (g,), "beta")
        merge_into(p, outs, 1, (d[0], g), "mean output")
        merge_into(p, outs, 2, (d[0], g), "std output")
        return ins, outs

    def forward(self, p, inputs, ctx):
        x, gamma, beta = inputs
        dt = compute_dtype(x.dtype)
        n, g = x.shape[0], p.num_groups
        xr = x.astype(dt).reshape(n, g, -1)
        mean = xr.mean(axis=2, keepdims=True)
        var = ((xr - mean) ** 2).mean(axis=2, keepdims=True)
        std = np.sqrt(var + dt.type(p.eps))
        y = (xr - mean) / std * gamma.astype(dt)[None, :, None] + beta.astype(dt)[None, :, None]
        odt = ctx.out_dtypes
        return [cast_to(y.reshape(x.shape), odt[0] or x.dtype),
                cast_to(mean[..., 0], odt[1] or x.dtype), cast_to(std[..., 0], odt[2] or x.dtype)]


# ---------------------------------------------------------------------------
# L2Normalization, LRN
# ---------------------------------------------------------------------------

@register_op("L2Normalization")
class L2Normalization(OpDef):
    """x / sqrt(sum x^2 + eps) per instance (all but axis 0), channel (axis 1) or spatial."""

    attrs = {
        "eps": Attr(to_float, 1e-10),
        "mode": Attr(enum("instance", "spatial", "channel"), "instance"),
    }
    arguments = ("data",)

    def num_outputs(self, p):
        return 2

    def num_visible_outputs(self, p):
        return 1

    def output_names(self, p):
        return ["output", "norm"]

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        d = _same_shape_io(p, ins, outs)
        if d is None:
            return ins, outs
        if p.mode == "instance":
            norm = (d[0],)
        else:
            if len(d) < 3:
                raise shape_error(p, f"mode={p.mode} needs at least 3 dimensions, got "
                                     f"{fmt_shape(d)}")
            norm = (d[0], 1, *d[2:]) if p.mode == "channel" else (d[0], d[1])
        merge_into(p, outs, 1, norm, "norm output")
        return ins, outs

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        dt = compute_dtype(x.dtype)
        xf = x.astype(dt)
        if p.mode == "instance":
            axes = tuple(range(1, x.ndim))
        elif p.mode == "channel":
            axes = (1,)
        else:
            axes = tuple(range(2, x.ndim))
        norm = np.sqrt((xf * xf).sum(axis=axes, keepdims=True) + dt.type(p.eps))
        y = xf / norm
        if p.mode == "instance":
            norm = norm.reshape(x.shape[0])
        elif p.mode == "spatial":
            norm = norm.reshape(x.shape[:2])
        return [cast_to(y, ctx.out_dtypes[0] or x.dtype), cast_to(norm, ctx.out_dtypes[1] or
                                                                  x.dtype)]


@register_op("LRN")
class LRN(OpDef):
    """Local response normalisation across channels:
    x / (knorm + alpha/nsize * sum_{window} x^2) ** beta, window [c-(n-1)/2, c+n/2]."""

    attrs = {
        "alpha": Attr(to_float, 1e-4),
        "beta": Attr(to_float, 0.75),
        "knorm": Attr(to_float, 2.0),
        "nsize": Attr(to_int),
    }
    arguments = ("data",)

    def validate(self, p):
        if p.nsize < 1:
            raise attr_error(p, "nsize", f"must be >= 1, got {p.nsize}")

    def num_outputs(self, p):
        return 2

    def num_visible_outputs(self, p):
        return 1

    def output_names(self, p):
        return ["output", "tmp_norm"]

    def infer_shape(self, p, in_shapes, out_shapes):
        ins, outs = list(in_shapes), list(out_shapes)
        d = merge_all(p, [ins[0], outs[0], outs[1]], "data, output and tmp_norm")
        if d is not None and len(d) < 2:
            raise shape_error(p, f"LRN needs a channel axis (data rank >= 2), got {fmt_shape(d)}")
        return [d], [d, d]

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        dt = compute_dtype(x.dtype)
        xf = x.astype(dt)
        sq = xf * xf
        c = x.shape[1]
        lo = (p.nsize - 1) // 2
        hi = p.nsize - 1 - lo
        # prefix sums over channels give each window sum in one step
        csum = np.cumsum(sq, axis=1, dtype=np.float64)
        csum = np.concatenate([np.zeros_like(csum[:, :1]), csum], axis=1)
        idx = np.arange(c)
        start = np.clip(idx - lo, 0, c)
        stop = np.clip(idx + hi + 1, 0, c)
        win = (np.take(csum, stop, axis=1) - np.take(csum, start, axis=1)).astype(dt)
        norm = dt.type(p.knorm) + dt.type(p.alpha / p.nsize) * win
        y = xf * norm ** dt.type(-p.beta)
        return [cast_to(y, ctx.out_dtypes[0] or x.dtype), cast_to(norm, ctx.out_dtypes[1] or
                                                                  x.dtype)]
