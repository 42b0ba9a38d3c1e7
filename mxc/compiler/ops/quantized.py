"""The quantized twins of float operators, as MXNet 1.9.1's oneDNN CPU build runs them.

Every op here takes its data inputs first, then one ``(min, max)`` float
range pair per quantized input, and returns ``(codes, min, max)`` (ranges are
``(1,)`` float32 arrays).  The attribute schema, shape rules and window
geometry of ``_contrib_quantized_pooling``/``_flatten``/``_concat``/
``_embedding``/``_batch_norm``/``_act`` are those of their float twins, so
each delegates to the float :class:`OpDef` instead of restating them.

Rounding is oneDNN's (round half to even, saturate) wherever oneDNN
converts; ``_contrib_quantized_elemwise_mul`` is a plain C++ loop and
truncates toward zero.  The legacy ``_contrib_quantize`` and
``_contrib_quantize_asym`` and the calibration helper
``_contrib_calibrate_entropy`` live here too.
"""

from __future__ import annotations

import numpy as np

from ...errors import DTypeError
# the float twins must be registered before the classes below copy their schemas
from . import indexing, join_split, nn_activation, nn_norm, nn_pool, shape_manip  # noqa: F401
from .common import merge_all
from .quantization import (K_INT8_RANGE, K_UINT8_RANGE, _F, _max_abs, _product_range,
                           _range_out, _saturate_round, _scalar, code_levels)
from .registry import (Attr, OpDef, Params, enum, get_op, optional, register_op, to_bool,
                       to_float, to_int)

#: MXNet's kInt32Range as float32 arithmetic sees it (2**31 - 1 rounds to 2**31)
K_INT32_RANGE = _F(2147483647)


def _range_shapes(p, ins, first: int, what="range"):
    for i in range(first, len(ins)):
        ins[i] = merge_all(p, [(1,), ins[i]], what)


def _out_ranges(p, outs):
    return [merge_all(p, [(1,), outs[i]], "output range") for i in (1, 2)]


def _check_dtype(p, dtype, allowed, what="data"):
    if dtype is not None and dtype not in allowed:
        raise DTypeError(f"operator {p.node.op if p.node is not None else '?'} (node "
                         f"{p.node_ref}): {what} must be {' or '.join(allowed)}, got {dtype}")


# ---------------------------------------------------------------------------
# quantize (legacy), quantize_asym
# ---------------------------------------------------------------------------
def quantize_int8(x: np.ndarray, lo, hi) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_contrib_quantize(out_type="int8")``: ``sat(rint(x * 127 / R))``, ``R = max(|lo|, |hi|)``,
    and the ranges ``(-R, R)``.  MXNet's quantizer makes the ``*_weight_quantize`` /
    ``*_bias_quantize`` params with it (``_quantize_params``), so mxc's does too."""
    real = _max_abs(lo, hi)
    q = _saturate_round(np.asarray(x, dtype=_F) * _F(_F(127) / real), np.int8)
    return q, _range_out(-real), _range_out(real)


@register_op("_contrib_quantize")
class Quantize(OpDef):
    """Legacy quantize with an explicit ``(min_range, max_range)`` input pair.

    uint8: ``sat(rint(x * 255 / max_range))``, negatives saturate to 0 and the
    output range is the given one (min_range is no zero point).  int8:
    ``sat(rint(x * 127 / R))``, ``R = max(|min|, |max|)``, range ``(-R, R)``.
    """

    attrs = {"out_type": Attr(enum("int8", "uint8"), "uint8")}
    arguments = ("data", "min_range", "max_range")

    def num_outputs(self, p):
        return 3

    def infer_shape(self, p, in_shapes, out_shapes):
        ins = list(in_shapes)
        _range_shapes(p, ins, 1)
        s = merge_all(p, [ins[0], out_shapes[0]], "data and output")
        ins[0] = s
        return ins, [s, *_out_ranges(p, out_shapes)]

    def infer_type(self, p, in_types, out_types):
        _check_dtype(p, in_types[0], ("float32",))
        return ["float32"] * 3, [p.out_type, "float32", "float32"]

    def forward(self, p, inputs, ctx):
        x, lo, hi = (np.asarray(v, dtype=_F) for v in inputs)
        if p.out_type == "uint8":
            q = _saturate_round(x * _F(_F(255) / _scalar(hi)), np.uint8)
            return [q, _range_out(_scalar(lo)), _range_out(_scalar(hi))]
        return list(quantize_int8(x, _scalar(lo), _scalar(hi)))


@register_op("_contrib_quantize_asym")
class QuantizeAsym(OpDef):
    """float -> uint8 with a float zero point: outputs ``(codes, scale, shift)``.

    ``scale = 255 / (max - min)``, ``shift = 255 - max * scale`` and
    ``code = trunc(clip(x, min, max) * scale + shift + 0.5)``; the range is
    the calibrated one or the data's.
    """

    attrs = {"min_calib_range": Attr(optional(to_float), None),
             "max_calib_range": Attr(optional(to_float), None)}

    def num_outputs(self, p):
        return 3

    def output_names(self, p):
        return ["output", "scale", "shift"]

    def infer_shape(self, p, in_shapes, out_shapes):
        s = merge_all(p, [in_shapes[0], out_shapes[0]], "data and output")
        return [s], [s, *_out_ranges(p, out_shapes)]

    def infer_type(self, p, in_types, out_types):
        _check_dtype(p, in_types[0], ("float32",))
        return ["float32"], ["uint8", "float32", "float32"]

    def forward(self, p, inputs, ctx):
        x = np.asarray(inputs[0], dtype=_F)
        if p.min_calib_range is not None and p.max_calib_range is not None:
            lo, hi = _F(p.min_calib_range), _F(p.max_calib_range)
        else:
            lo, hi = _F(x.min()), _F(x.max())
        scale = _F(_F(255) / _F(hi - lo))
        shift = _F(_F(255) - _F(hi * scale))
        y = np.clip(x, lo, hi) * scale + shift + _F(0.5)
        q = np.clip(np.trunc(y), 0, 255).astype(np.uint8)
        return [q, _range_out(scale), _range_out(shift)]


# ---------------------------------------------------------------------------
# ops that reuse their float twin's schema and geometry
# ---------------------------------------------------------------------------
class _QuantizedTwin(OpDef):
    """``n_data`` quantized inputs (then their range pairs) -> codes + range.

    ``twin`` names the float op whose attributes, shape inference and (for
    max pooling, flatten, embedding, concat) code-level forward apply.
    """

    twin: str = ""
    n_data: int = 1
    extra_args: tuple[str, ...] = ()    # float inputs after the data (BatchNorm's gamma ...)
    extra_aux: tuple[str, ...] = ()

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if cls.twin and "attrs" not in cls.__dict__:
            cls.attrs = dict(get_op(cls.twin).attrs)

    def twin_params(self, p) -> Params:
        return Params(dict(p), p.node)

    def n_ranges(self, p) -> int:
        return self.n_data

    def input_names(self, p):
        data = self.data_names(p)
        ranges = [f"{k}_{d}" for d in (data if len(data) > 1 else ["data"]) for k in ("min", "max")]
        return data + list(self.extra_args) + ranges + list(self.extra_aux)

    def data_names(self, p):
        return ["data"]

    def num_outputs(self, p):
        return 3

    def output_names(self, p):
        return ["output", "min_output", "max_output"]

    def _layout(self, p):
        """Indices of (data, float extras, ranges, aux) in the input list."""
        nd, ne = len(self.data_names(p)), len(self.extra_args)
        nr = 2 * self.n_ranges(p)
        return (list(range(nd)), list(range(nd, nd + ne)), list(range(nd + ne, nd + ne + nr)),
                list(range(nd + ne + nr, nd + ne + nr + len(self.extra_aux))))

    def infer_shape(self, p, in_shapes, out_shapes):
        data, extra, ranges, aux = self._layout(p)
        ins = list(in_shapes)
        twin = get_op(self.twin)
        t_ins = [ins[i] for i in data + extra + aux]
        t_outs = [out_shapes[0]] + [None] * (twin.num_outputs(self.twin_params(p)) - 1)
        t_ins, t_outs = twin.infer_shape(self.twin_params(p), t_ins, t_outs)
        for k, i in enumerate(data + extra + aux):
            ins[i] = t_ins[k]
        for i in ranges:
            ins[i] = merge_all(p, [(1,), ins[i]], "range input")
        return ins, [t_outs[0], *_out_ranges(p, out_shapes)]

    def infer_type(self, p, in_types, out_types):
        data, extra, ranges, aux = self._layout(p)
        ins = list(in_types)
        for i in data:
            _check_dtype(p, ins[i], ("int8", "uint8"))
        for i in extra + ranges + aux:
            ins[i] = "float32"
        return ins, [self.out_dtype(p, [ins[i] for i in data]), "float32", "float32"]

    def out_dtype(self, p, data_types):
        return data_types[0]


@register_op("_contrib_quantized_flatten")
class QuantizedFlatten(_QuantizedTwin):
    """Flatten the codes; the range passes through."""

    twin = "Flatten"

    def forward(self, p, inputs, ctx):
        x, lo, hi = inputs
        return [x.reshape(x.shape[0], -1), _range_out(_scalar(lo)), _range_out(_scalar(hi))]


@register_op("_contrib_quantized_act")
class QuantizedAct(_QuantizedTwin):
    """relu on codes, range unchanged; the output is typed int8 whatever the input.

    MXNet declares the output int8, so uint8 codes are relu'd (an identity)
    and then reinterpreted bit for bit as int8 (200 reads as -56), as oneDNN
    writes them into the int8 buffer.
    """

    twin = "Activation"

    def validate(self, p):
        if p.act_type != "relu":
            from ._nn_helpers import attr_error
            raise attr_error(p, "act_type", "quantized activation supports relu only")

    def out_dtype(self, p, data_types):
        return "int8"

    def forward(self, p, inputs, ctx):
        x, lo, hi = inputs
        y = x.view(np.int8) if x.dtype == np.uint8 else np.maximum(x, 0).astype(np.int8)
        return [y, _range_out(_scalar(lo)), _range_out(_scalar(hi))]


@register_op("_contrib_quantized_pooling")
class QuantizedPooling(_QuantizedTwin):
    """Pooling of codes: max picks codes, avg rounds the mean half to even."""

    twin = "Pooling"

    def forward(self, p, inputs, ctx):
        from .nn_pool import pool_nd
        x, lo, hi = inputs
        twin = get_op("Pooling")
        tp = self.twin_params(p)
        kernel, stride, pad = twin.geometry(tp, x.shape[2:])
        osp = [twin.out_extent(tp, n, k, s, q) for n, k, s, q in zip(x.shape[2:], kernel,
                                                                     stride, pad)]
        include_pad = True if p.count_include_pad is None else p.count_include_pad
        if p.pool_type == "max":
            y = pool_nd(x, kernel, stride, pad, osp, "max", include_pad)
        else:
            y = pool_nd(x.astype(_F), kernel, stride, pad, osp, p.pool_type, include_pad)
            y = _saturate_round(y, x.dtype)
        return [y.astype(x.dtype), _range_out(_scalar(lo)), _range_out(_scalar(hi))]


@register_op("_contrib_quantized_embedding")
class QuantizedEmbedding(_QuantizedTwin):
    """Rows of the int8 weight table; the weight's range passes through."""

    twin = "Embedding"

    def input_names(self, p):
        return ["data", "weight", "min_weight", "max_weight"]

    def _layout(self, p):
        return [0], [1], [2, 3], []

    def infer_type(self, p, in_types, out_types):
        _check_dtype(p, in_types[1], ("int8",), "weight")
        return [in_types[0] or "float32", "int8", "float32", "float32"], \
            ["int8", "float32", "float32"]

    def forward(self, p, inputs, ctx):
        data, weight, lo, hi = inputs
        j = np.clip(np.asarray(data).astype(np.int64), 0, weight.shape[0] - 1)
        return [weight[j], _range_out(_scalar(lo)), _range_out(_scalar(hi))]


@register_op("_contrib_quantized_concat")
class QuantizedConcat(_QuantizedTwin):
    """Concat with every input rescaled to the widest range (rint, saturated).

    The output range is ``(min of mins, max of maxes)``; an input whose
    ``max(|min|, |max|)`` equals the output's is copied unchanged.
    """

    twin = "Concat"

    def n_ranges(self, p):
        return p.num_args

    def data_names(self, p):
        return [f"arg{i}" for i in range(p.num_args)]

    def input_names(self, p):
        data = self.data_names(p)
        return data + [f"{k}_{d}" for d in data for k in ("min", "max")]

    def out_dtype(self, p, data_types):
        return "int8" if "int8" in data_types else (data_types[0] if data_types else None)

    def forward(self, p, inputs, ctx):
        n = p.num_args
        data = inputs[:n]
        lows = [_scalar(v) for v in inputs[n::2]]
        highs = [_scalar(v) for v in inputs[n + 1::2]]
        lo, hi = min(lows), max(highs)
        out_dt = np.dtype(ctx.out_dtypes[0] or self.out_dtype(p, [d.dtype.name for d in data]))
        out_scale = _F(code_levels(out_dt) / _max_abs(lo, hi))
        parts = []
        for x, a, b in zip(data, lows, highs):
            scale = _F(out_scale / _F(code_levels(x.dtype) / _max_abs(a, b)))
            if scale == 1 and x.dtype == out_dt:
                parts.append(x)
            else:
                parts.append(_saturate_round(x.astype(_F) * scale, out_dt))
        y = np.concatenate(parts, axis=p.dim)
        return [y, _range_out(lo), _range_out(hi)]


@register_op("_contrib_quantized_batch_norm")
class QuantizedBatchNorm(_QuantizedTwin):
    """BatchNorm on int8 codes into the calibrated int8 output range.

    Per channel, oneDNN computes ``w * x + b`` (over ``sqrt(1 + eps)``, the
    statistics being folded to mean 0 / var 1) with
    ``w = gamma * invstd * R_in / R_out`` and
    ``b = (beta - mean * gamma * invstd) * 127.5 / R_out``; uint8 input is first
    reordered to int8 by ``127.5 / 255.5``.  MXNet refuses to run without a
    calibrated range.  ``fix_gamma`` is parsed but has no effect: the oneDNN
    kernel folds the gamma it is given (float BatchNorm would use 1).
    """

    twin = "BatchNorm"
    extra_args = ("gamma", "beta")
    extra_aux = ("moving_mean", "moving_var")

    def input_names(self, p):
        return ["data", "gamma", "beta", "moving_mean", "moving_var", "min_data", "max_data"]

    def mutable_inputs(self, p):
        return [3, 4]

    def _layout(self, p):
        return [0], [1, 2], [5, 6], [3, 4]

    def validate(self, p):
        if p.min_calib_range is None or p.max_calib_range is None:
            from ._nn_helpers import attr_error
            raise attr_error(p, "min_calib_range", "quantized BatchNorm needs min_calib_range "
                                                   "and max_calib_range (MXNet cannot run it "
                                                   "uncalibrated)")

    def out_dtype(self, p, data_types):
        return "int8"

    def forward(self, p, inputs, ctx):
        x, gamma, beta, mean, var, lo, hi = inputs
        axis = p.axis % x.ndim
        r_in = _max_abs(_scalar(lo), _scalar(hi))
        r_out = _max_abs(p.min_calib_range, p.max_calib_range)
        g = gamma.astype(_F)
        # float var + double eps: MXNet takes this square root in double
        invstd = (1.0 / np.sqrt(var.astype(np.float64) + p.eps)).astype(_F)
        w = (g * invstd * r_in / r_out).astype(_F)
        b = ((beta.astype(_F) - mean.astype(_F) * g * invstd) * K_INT8_RANGE / r_out).astype(_F)
        xs = x.astype(_F)
        if x.dtype == np.uint8:
            xs = np.rint(xs * _F(K_INT8_RANGE / K_UINT8_RANGE)).astype(_F)
        shape = [1] * x.ndim
        shape[axis] = -1
        y = xs / np.sqrt(_F(1) + _F(p.eps)) * w.reshape(shape) + b.reshape(shape)
        return [_saturate_round(y, np.int8), _range_out(_F(p.min_calib_range)),
                _range_out(_F(p.max_calib_range))]


# ---------------------------------------------------------------------------
# elementwise add / mul of two quantized tensors
# ---------------------------------------------------------------------------
class _QuantizedBinary(OpDef):
    arguments = ("lhs", "rhs", "lhs_min", "lhs_max", "rhs_min", "rhs_max")

    def num_outputs(self, p):
        return 3

    def output_names(self, p):
        return ["output", "min_output", "max_output"]

    def calibrated(self, p) -> bool:
        return p.min_calib_range is not None and p.max_calib_range is not None

    def infer_shape(self, p, in_shapes, out_shapes):
        ins = list(in_shapes)
        s = merge_all(p, [ins[0], ins[1], out_shapes[0]], "lhs, rhs and output")
        ins[0] = ins[1] = s
        _range_shapes(p, ins, 2)
        outs = [s] + (_out_ranges(p, out_shapes) if len(out_shapes) > 1 else [])
        return ins, outs


@register_op("_contrib_quantized_elemwise_add")
class QuantizedElemwiseAdd(_QuantizedBinary):
    """Sum of two quantized tensors (oneDNN ``sum`` with per-input scales).

    Calibrated: int8 (uint8 for a non-negative range) codes of the calibrated
    range.  Uncalibrated: int32 codes of the range ``+-(R_a + R_b)`` spread
    over 2**31.  A uint8/int8 mix first reorders the uint8 operand to int8.
    """

    attrs = {"min_calib_range": Attr(optional(to_float), None),
             "max_calib_range": Attr(optional(to_float), None)}

    def out_type(self, p) -> str:
        if not self.calibrated(p):
            return "int32"
        return "uint8" if p.min_calib_range >= 0 else "int8"

    def infer_type(self, p, in_types, out_types):
        for i in (0, 1):
            _check_dtype(p, in_types[i], ("int8", "uint8"))
        return list(in_types[:2]) + ["float32"] * 4, [self.out_type(p), "float32", "float32"]

    def forward(self, p, inputs, ctx):
        a, b = inputs[:2]
        a_lo, a_hi, b_lo, b_hi = (_scalar(v) for v in inputs[2:])
        ra, rb = _max_abs(a_lo, a_hi), _max_abs(b_lo, b_hi)
        out_dt = np.dtype(self.out_type(p))
        if self.calibrated(p):
            lo, hi = _F(p.min_calib_range), _F(p.max_calib_range)
            out_scale = _F(code_levels(out_dt) / _max_abs(lo, hi))
            sa = _F(out_scale / _F(code_levels(a.dtype) / ra))
            sb = _F(out_scale / _F(code_levels(b.dtype) / rb))
        else:
            hi = _F(ra + rb)
            lo = -hi
            sa = _F(_F(ra * K_INT32_RANGE) / _F(_F(ra + rb) * code_levels(a.dtype)))
            sb = _F(_F(rb * K_INT32_RANGE) / _F(_F(ra + rb) * code_levels(b.dtype)))
        y = a.astype(_F) * sa + b.astype(_F) * sb     # oneDNN sums in float32
        return [_saturate_round(y, out_dt), _range_out(lo), _range_out(hi)]


@register_op("_contrib_quantized_elemwise_mul")
class QuantizedElemwiseMul(_QuantizedBinary):
    """Product of two int8 tensors: ``static_cast(a * b * scale)`` (truncation).

    Uncalibrated: int32 products with the S8S8 multiplication range;
    calibrated: int8 codes of the calibrated range; ``enable_float_output``:
    the float product only (one output).
    """

    attrs = {"min_calib_range": Attr(optional(to_float), None),
             "max_calib_range": Attr(optional(to_float), None),
             "enable_float_output": Attr(to_bool, False)}

    def num_outputs(self, p):
        return 1 if p.enable_float_output else 3

    def output_names(self, p):
        return ["output"] if p.enable_float_output else ["output", "min_output", "max_output"]

    def infer_type(self, p, in_types, out_types):
        for i in (0, 1):
            _check_dtype(p, in_types[i], ("int8",))
        ins = ["int8", "int8"] + ["float32"] * 4
        if p.enable_float_output:
            return ins, ["float32"]
        return ins, ["int8" if self.calibrated(p) else "int32", "float32", "float32"]

    def forward(self, p, inputs, ctx):
        a, b = inputs[:2]
        a_lo, a_hi, b_lo, b_hi = (_scalar(v) for v in inputs[2:])
        sa = _F(K_INT8_RANGE / _max_abs(a_lo, a_hi))
        sb = _F(K_INT8_RANGE / _max_abs(b_lo, b_hi))
        prod = (a.astype(np.int32) * b.astype(np.int32)).astype(_F)
        if p.enable_float_output:
            return [(prod * _F(_F(_F(1) / sa) / sb)).astype(_F)]
        if self.calibrated(p):
            lo, hi = _F(p.min_calib_range), _F(p.max_calib_range)
            scale = _F(_F(_F(K_INT8_RANGE / _max_abs(lo, hi)) / sa) / sb)
            return [np.trunc(prod * scale).astype(np.int8), _range_out(lo), _range_out(hi)]
        lo, hi = _product_range(a_lo, a_hi, b_lo, b_hi, 127, 127)
        return [prod.astype(np.int32), _range_out(lo), _range_out(hi)]


# ---------------------------------------------------------------------------
# calibration
# ---------------------------------------------------------------------------
@register_op("_contrib_calibrate_entropy", aliases=("_npx_contrib_calibrate_entropy",))
class CalibrateEntropy(OpDef):
    """KL-divergence threshold search over a symmetric histogram (entropy calibration).

    For each candidate half-width ``i`` (from ``num_quantized_bins // 2`` to
    the centre bin) the clipped distribution p (outliers folded into its end
    bins) is compared with q, p merged into ``num_quantized_bins`` bins and
    expanded back over p's non-zero bins; both are smoothed (zeros get 1e-4).
    Outputs the threshold (the right edge of the best window) and its
    divergence.
    """

    attrs = {"num_quantized_bins": Attr(to_int, 255)}
    arguments = ("hist", "hist_edges")

    def num_outputs(self, p):
        return 2

    def output_names(self, p):
        return ["threshold", "divergence"]

    def infer_shape(self, p, in_shapes, out_shapes):
        return list(in_shapes), [merge_all(p, [(1,), s], "output") for s in out_shapes]

    def infer_type(self, p, in_types, out_types):
        _check_dtype(p, in_types[0], ("float32",), "hist")
        return ["float32", "float32"], ["float32", "float32"]

    def forward(self, p, inputs, ctx):
        th, div = calibrate_entropy(inputs[0], inputs[1], p.num_quantized_bins)
        return [_range_out(th), _range_out(div)]


def calibrate_entropy(hist, edges, nq: int) -> tuple[np.float32, np.float32]:
    """:class:`CalibrateEntropy`'s ``(threshold, divergence)``; also entropy calibration's
    (:mod:`mxc.compiler.quantize.calibrate`, as MXNet's ``_get_optimal_threshold``)."""
    hist = np.asarray(hist, dtype=_F).reshape(-1)
    edges = np.asarray(edges, dtype=_F).reshape(-1)
    zero = hist.size // 2
    best_i, best_div = 0, np.finfo(_F).max
    thresholds = []
    for k, i in enumerate(range(nq // 2, zero + 1)):
        thresholds.append(edges[zero + i + 1])
        div = _window_divergence(hist, zero - i, zero + i + 1, nq)
        if div < best_div:
            best_i, best_div = k, div
    return _F(thresholds[best_i]), _F(best_div)


def _smooth(d: np.ndarray, eps=_F(1e-4)):
    zeros = d == 0
    nz = int((~zeros).sum())
    if nz == 0:
        return None
    eps1 = _F(eps * _F(int(zeros.sum())) / _F(nz))
    if eps1 >= 1:
        return None
    return (d + np.where(zeros, eps, -eps1).astype(_F)).astype(_F)


def _window_divergence(hist, start, stop, nq) -> np.float32:
    # MXNet's loop: bin 0 takes hist[:start+1], bins 1.. take hist[start+1:stop] and
    # the last bin adds every outlier past stop; the integer copy has a 0 first
    sliced = np.concatenate([[0], np.trunc(hist[start + 1:stop]).astype(np.int64)])
    p = np.zeros(stop - start, dtype=_F)
    p[1:] = hist[start + 1:stop]
    p[0] = _seq_sum(hist[:start + 1])
    p[-1] = _F(p[-1] + _seq_sum(hist[stop:]))
    merged = sliced.size // nq
    # bin j of q covers sliced[j*merged:(j+1)*merged], the last one also the remainder
    group = np.minimum(np.arange(sliced.size) // merged, nq - 1)
    bins = np.bincount(group, weights=sliced, minlength=nq).astype(np.int64)
    norm = np.bincount(group, weights=sliced != 0, minlength=nq).astype(np.int64)
    value = (bins.astype(_F) / np.maximum(norm, 1).astype(_F)).astype(_F)
    q = np.where((p != 0) & (norm[group] > 0), value[group], _F(0)).astype(_F)
    ps, qs = _smooth(p), _smooth(q)
    if qs is None or ps is None:
        return _F(np.inf)
    ps = (ps / _seq_sum(ps)).astype(_F)
    qs = (qs / _seq_sum(qs)).astype(_F)
    return _seq_sum((ps * np.log(ps / qs)).astype(_F))


def _seq_sum(x: np.ndarray) -> np.float32:
    """Left-to-right float32 sum (``std::accumulate``), not numpy's pairwise one."""
    return _F(np.cumsum(np.asarray(x, dtype=_F), dtype=_F)[-1]) if np.size(x) else _F(0)
