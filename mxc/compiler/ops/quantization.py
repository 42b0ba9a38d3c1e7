"""INT8 quantization operators as MXNet 1.9.1's oneDNN (MKLDNN) CPU build runs them.

Ranges are symmetric around zero: an int8 code ``q`` stands for
``q * max(|min|, |max|) / 127.5`` and a uint8 code for ``q * max(|min|,|max|) / 255.5``
(MXNet's ``kInt8Range``/``kUint8Range``).  Quantized conv/FC accumulate in
int32 and report the float range one int32 step covers.  Every min/max range
is a ``(1,)`` float32 array.
"""

from __future__ import annotations

import numpy as np

from ...errors import AttributeInvalidError, DTypeError
from .common import fmt_shape, merge_all
from .registry import (Attr, OpDef, enum, optional, register_op, shape_error, to_bool, to_float,
                       to_int, to_shape)

_F = np.float32
K_INT8_RANGE = _F(127.5)
K_UINT8_RANGE = _F(255.5)
# MinAbs(int32 min, int32 max) as MXNet computes it: float(2**31 - 1) == 2**31
_INT32_RANGE = _F(2147483647)


def code_levels(dtype) -> np.float32:
    """Codes per unit of ``max(|min|, |max|)`` of an int8/uint8 tensor of *dtype*:
    MXNet's ``kInt8Range`` 127.5 or ``kUint8Range`` 255.5 (every quantized op's scale)."""
    return K_UINT8_RANGE if np.dtype(dtype) == np.uint8 else K_INT8_RANGE


def _max_abs(a, b):
    return max(abs(_F(a)), abs(_F(b)))


def _scalar(x) -> np.float32:
    return _F(np.asarray(x).reshape(-1)[0])


def _range_out(v):
    return np.array([v], dtype=_F)


def _saturate_round(x, dtype):
    """oneDNN's float -> int8/uint8 conversion: round half to even, saturate."""
    info = np.iinfo(dtype)
    return np.clip(np.rint(x), info.min, info.max).astype(dtype)


class _RangeOutputsMixin:
    """Three outputs: the data plus ``(1,)`` min and max ranges.

    Also the two attribute facts quantize_v2 and requantize share, which
    their TVM lowerings read from here rather than re-deriving them.
    """

    def calibrated(self, p) -> bool:
        """True when both calibration bounds are given (else ranges come from the data)."""
        return p.min_calib_range is not None and p.max_calib_range is not None

    def out_type(self, p) -> str:
        """MXNet's GetQuantizeOutputType: ``auto`` is uint8 for a calibrated min >= 0."""
        if p.out_type == "auto":
            if self.calibrated(p) and p.min_calib_range >= 0.0:
                return "uint8"
            return "int8"
        return p.out_type

    def num_outputs(self, p):
        return 3

    def infer_shape(self, p, in_shapes, out_shapes):
        ins = list(in_shapes)
        for i in range(1, len(ins)):
            ins[i] = merge_all(p, [(1,), ins[i]], self.input_names(p)[i])
        s = merge_all(p, [ins[0], out_shapes[0]], "data and output")
        ins[0] = s
        return ins, [s, merge_all(p, [(1,), out_shapes[1]], "min output"),
                     merge_all(p, [(1,), out_shapes[2]], "max output")]


def _calib_attrs(default_out):
    return {
        "out_type": Attr(enum("auto", "int8", "uint8"), default_out),
        "min_calib_range": Attr(optional(to_float), None),
        "max_calib_range": Attr(optional(to_float), None),
    }


@register_op("_contrib_quantize_v2")
class QuantizeV2(_RangeOutputsMixin, OpDef):
    """float32 -> int8/uint8 with a calibrated or data-derived range.

    int8: ``q = sat(rint(x * 127.5 / R))`` with ``R = max(|min|, |max|)``, ranges
    ``(-R, R)``.  uint8: ``q = sat(rint(x * 255.5 / R))`` with ranges
    ``(min, max)`` (min is reported, not used as a zero point).  int8/uint8
    input passes through (ranges: :meth:`passthrough_range`).
    """

    attrs = _calib_attrs("int8")

    def infer_type(self, p, in_types, out_types):
        if in_types[0] is not None and in_types[0] not in ("float32", "int8", "uint8"):
            raise DTypeError(f"operator _contrib_quantize_v2 (node {p.node_ref}): input "
                             f"must be float32, int8 or uint8, got {in_types[0]}")
        return list(in_types), [self.out_type(p), "float32", "float32"]

    def passthrough_range(self, p, in_dtype) -> tuple[np.float32, np.float32]:
        """The ``(min, max)`` reported for int8/uint8 input, which passes through.

        The calibrated range, else ``(0, 255.5)`` for uint8 and ``(-127.5, 127.5)``
        for int8: MXNet's oneDNN ``SgMKLDNNQuantizeOperator`` (the CPU kernel of
        every MKLDNN build, quantization/mkldnn/mkldnn_quantize_v2-inl.h) writes
        ``kUint8Range``/``kInt8Range`` there, not the 255/127 of the plain kernel
        (quantize_v2-inl.h), which a oneDNN build never runs on CPU.
        """
        if self.calibrated(p):
            return _F(p.min_calib_range), _F(p.max_calib_range)
        if np.dtype(in_dtype) == np.uint8:
            return _F(0), K_UINT8_RANGE
        return -K_INT8_RANGE, K_INT8_RANGE

    def forward(self, p, inputs, ctx):
        x = inputs[0]
        calib = self.calibrated(p)
        if x.dtype in (np.int8, np.uint8):
            lo, hi = self.passthrough_range(p, x.dtype)
            return [x.astype(self.out_type(p)), _range_out(lo), _range_out(hi)]
        xf = x.astype(_F, copy=False)
        if calib:
            lo, hi = _F(p.min_calib_range), _F(p.max_calib_range)
        else:
            lo, hi = _F(xf.min()), _F(xf.max())
        real = _max_abs(lo, hi)
        if self.out_type(p) == "uint8":
            q = _saturate_round(xf * _F(K_UINT8_RANGE / real), np.uint8)
            return [q, _range_out(lo), _range_out(hi)]
        q = _saturate_round(xf * _F(K_INT8_RANGE / real), np.int8)
        return [q, _range_out(-real), _range_out(real)]


@register_op("_contrib_dequantize")
class Dequantize(OpDef):
    """int8/uint8 -> float32: ``q * max(|min_range|, |max_range|) / (127.5 or 255.5)``."""

    attrs = {"out_type": Attr(enum("float32"), "float32")}
    arguments = ("data", "min_range", "max_range")

    def infer_shape(self, p, in_shapes, out_shapes):
        ins = list(in_shapes)
        ins[1] = merge_all(p, [(1,), ins[1]], "min_range")
        ins[2] = merge_all(p, [(1,), ins[2]], "max_range")
        s = merge_all(p, [ins[0], out_shapes[0]], "data and output")
        ins[0] = s
        return ins, [s]

    def infer_type(self, p, in_types, out_types):
        if in_types[0] is not None and in_types[0] not in ("int8", "uint8"):
            raise DTypeError(f"operator _contrib_dequantize (node {p.node_ref}): input "
                             f"must be int8 or uint8, got {in_types[0]}")
        return [in_types[0], "float32", "float32"], ["float32"]

    def forward(self, p, inputs, ctx):
        q, lo, hi = inputs
        quant = code_levels(q.dtype)
        scale = _F(_max_abs(_scalar(lo), _scalar(hi)) / quant)
        return [(q.astype(_F) * scale).astype(_F)]


@register_op("_contrib_requantize")
class Requantize(_RangeOutputsMixin, OpDef):
    """int32 (with its float range) -> int8/uint8.

    The target range R is ``max(|min_calib|, |max_calib|)`` or, uncalibrated,
    ``max|data| * max(|min_range|, |max_range|) / 2**31``; codes are
    ``sat(rint(x * in_range / 2**31 * 127 / R))`` (255 for uint8) with output
    ranges ``(-R, R)`` (``(0, R)`` for uint8).
    """

    attrs = _calib_attrs("int8")
    arguments = ("data", "min_range", "max_range")

    def infer_type(self, p, in_types, out_types):
        if in_types[0] is not None and in_types[0] != "int32":
            raise DTypeError(f"operator _contrib_requantize (node {p.node_ref}): input "
                             f"must be int32, got {in_types[0]}")
        return (["int32", "float32", "float32"],
                [self.out_type(p), "float32", "float32"])

    def forward(self, p, inputs, ctx):
        x, lo, hi = inputs
        in_range = _max_abs(_scalar(lo), _scalar(hi))
        if self.calibrated(p):
            real = _max_abs(p.min_calib_range, p.max_calib_range)
        else:
            data_range = int(np.abs(x.astype(np.int64)).max()) if x.size else 0
            real = _F(_F(data_range) * in_range / _INT32_RANGE)
        first = _F(in_range / _INT32_RANGE)
        if self.out_type(p) == "uint8":
            scale = _F(first * _F(_F(255) / real))
            q = _saturate_round(x.astype(_F) * scale, np.uint8)
            return [q, _range_out(_F(0)), _range_out(real)]
        scale = _F(first * _F(_F(127) / real))
        q = _saturate_round(x.astype(_F) * scale, np.int8)
        return [q, _range_out(-real), _range_out(real)]


def int_dot(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``x @ w.T`` of int8/uint8 codes, exact in int64: the one place the quantized FC
    kernels (``_contrib_quantized_fully_connected``, quantized
    ``_sg_mkldnn_fully_connected``) form their integer product.

    Exact is what oneDNN computes on a CPU with VNNI (``vpdpbusd`` sums into
    int32); on one without it, oneDNN's u8s8 GEMM adds byte-pair products in
    saturating int16 (``vpmaddubsw``), which mxc does not copy
    (:mod:`mxc.backends.tvm.schedules.base.int8_avx2`).  One function, so that
    a test can put that CPU's product in its place and show which MXNet
    outputs were recorded on such a CPU.
    """
    return x.astype(np.int64) @ w.astype(np.int64).T


def _product_range(min_a, max_a, min_b, max_b, a_levels, b_levels):
    """Float range of int32 products of two quantized operands (symmetric)."""
    la = _F(_max_abs(min_a, max_a) / _F(a_levels))
    lb = _F(_max_abs(min_b, max_b) / _F(b_levels))
    hi = _F(_F(la * lb) * _INT32_RANGE)
    return -hi, hi


def _range_names(no_bias):
    parts = ["data", "weight"] if no_bias else ["data", "weight", "bias"]
    return [f"{m}_{x}" for x in parts for m in ("min", "max")]


class _QuantizedLinearBase(OpDef):
    """Shared arity, names and dtypes of the quantized conv / FC ops."""

    def input_names(self, p):
        base = ["data", "weight"] if p.no_bias else ["data", "weight", "bias"]
        return base + _range_names(p.no_bias)

    def num_outputs(self, p):
        return 3

    def output_names(self, p):
        return ["output", "min_output", "max_output"]

    def infer_type(self, p, in_types, out_types):
        nw = 2 if p.no_bias else 3
        if in_types[0] is not None and in_types[0] not in self.data_types:
            raise DTypeError(f"operator {self.name} (node {p.node_ref}): data must be "
                             f"{' or '.join(self.data_types)}, got {in_types[0]}")
        ins = [in_types[0]] + ["int8"] * (nw - 1) + ["float32"] * (2 * nw)
        return ins, ["int32", "float32", "float32"]

    def _fill_ranges(self, p, ins):
        nw = 2 if p.no_bias else 3
        for i in range(nw, 3 * nw):
            ins[i] = merge_all(p, [(1,), ins[i]], self.input_names(p)[i])


@register_op("_contrib_quantized_conv")
class QuantizedConv(_QuantizedLinearBase):
    """2-D convolution of uint8 data with int8 weights, int32 accumulation.

    The int8 bias is added as raw codes (oneDNN's int8 convolution does not
    rescale it); the output range is ``+-(R_data/127)*(R_weight/127)*2**31``.
    Parameters are Convolution's; only ``num_group=1``, dilation 1 and NCHW
    exist for this op.
    """

    attrs = {
        "kernel": Attr(to_shape),
        "stride": Attr(to_shape, ()),
        "dilate": Attr(to_shape, ()),
        "pad": Attr(to_shape, ()),
        "num_filter": Attr(to_int),
        "num_group": Attr(to_int, 1),
        "workspace": Attr(to_int, 1024),
        "no_bias": Attr(to_bool, False),
        "cudnn_tune": Attr(optional(enum("off", "limited_workspace", "fastest")), None),
        "cudnn_off": Attr(to_bool, False),
        "layout": Attr(optional(enum("NCW", "NCHW", "NCDHW", "NHWC", "NDHWC")), None),
    }
    data_types = ("uint8", "int8")

    def validate(self, p):
        def bad(key, msg):
            return AttributeInvalidError(f"operator _contrib_quantized_conv (node "
                                         f"{p.node_ref}): attribute {key}={p[key]!r} {msg}")
        if len(p.kernel) != 2:
            raise bad("kernel", "must be 2-D: quantized_conv only supports 2-D convolution")
        for key in ("stride", "dilate", "pad"):
            if len(p[key]) not in (0, 2):
                raise bad(key, "must be empty or have 2 entries")
        if p.dilate and any(d != 1 for d in p.dilate):
            raise bad("dilate", "must be 1: quantized_conv does not support dilation")
        if p.num_group != 1:
            raise bad("num_group", "must be 1 for quantized_conv")
        if p.layout not in (None, "NCHW"):
            raise bad("layout", "must be NCHW for quantized_conv")
        if p.num_filter < 1:
            raise bad("num_filter", "must be >= 1")

    def infer_shape(self, p, in_shapes, out_shapes):
        ins = list(in_shapes)
        self._fill_ranges(p, ins)
        if not p.no_bias:
            ins[2] = merge_all(p, [(p.num_filter,), ins[2]], "bias")
        d = ins[0]
        outs = [out_shapes[0], merge_all(p, [(1,), out_shapes[1]], "min_output"),
                merge_all(p, [(1,), out_shapes[2]], "max_output")]
        if d is None:
            return ins, outs
        if len(d) != 4:
            raise shape_error(p, f"data must be 4-D NCHW, got {fmt_shape(d)}")
        kh, kw = p.kernel
        ins[1] = merge_all(p, [(p.num_filter, d[1], kh, kw), ins[1]], "weight")
        stride = p.stride or (1, 1)
        pad = p.pad or (0, 0)
        ext = [None if d[2 + i] is None else (d[2 + i] + 2 * pad[i] - (kh, kw)[i]) // stride[i] + 1
               for i in range(2)]
        outs[0] = merge_all(p, [(d[0], p.num_filter, ext[0], ext[1]), outs[0]], "output")
        return ins, outs

    def forward(self, p, inputs, ctx):
        nw = 2 if p.no_bias else 3
        data, weight = inputs[0], inputs[1]
        ranges = [_scalar(v) for v in inputs[nw:]]
        x = data.astype(np.int64)
        wt = weight.astype(np.int64)
        n, c, h, w = x.shape
        f, _, kh, kw = wt.shape
        sh, sw = p.stride or (1, 1)
        ph, pw = p.pad or (0, 0)
        xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
        oh = (h + 2 * ph - kh) // sh + 1
        ow = (w + 2 * pw - kw) // sw + 1
        acc = np.zeros((n, f, oh, ow), dtype=np.int64)
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, :, i:i + (oh - 1) * sh + 1:sh, j:j + (ow - 1) * sw + 1:sw]
                acc += np.einsum("nchw,fc->nfhw", patch, wt[:, :, i, j])
        if not p.no_bias:
            acc += inputs[2].astype(np.int64)[None, :, None, None]
        lo, hi = _product_range(ranges[0], ranges[1], ranges[2], ranges[3], 127, 127)
        return [acc.astype(np.int32), _range_out(lo), _range_out(hi)]


@register_op("_contrib_quantized_fully_connected")
class QuantizedFullyConnected(_QuantizedLinearBase):
    """FullyConnected on int8/uint8 data with int8 weights, int32 accumulation.

    The int8 bias is rescaled into the accumulator's scale:
    ``trunc(b * (Sd * Sw * R_bias / 127.5))`` with ``Sd = 127.5 (int8) or
    255.5 (uint8) / R_data`` and ``Sw = 127.5 / R_weight``.  The output range is
    ``+-(R_data/127)*(R_weight/127)*2**31`` for int8 data and
    ``+-(R_data/127)*(R_weight/255)*2**31`` for uint8 data (MXNet's S8S8 / S8U8
    range helpers).
    """

    attrs = {
        "num_hidden": Attr(to_int),
        "no_bias": Attr(to_bool, False),
        "flatten": Attr(to_bool, True),
    }
    data_types = ("int8", "uint8")

    def validate(self, p):
        if p.num_hidden < 1:
            raise AttributeInvalidError(
                f"operator _contrib_quantized_fully_connected (node {p.node_ref}): "
                f"attribute num_hidden={p.num_hidden} must be >= 1")

    def infer_shape(self, p, in_shapes, out_shapes):
        ins = list(in_shapes)
        self._fill_ranges(p, ins)
        if not p.no_bias:
            ins[2] = merge_all(p, [(p.num_hidden,), ins[2]], "bias")
        outs = [out_shapes[0], merge_all(p, [(1,), out_shapes[1]], "min_output"),
                merge_all(p, [(1,), out_shapes[2]], "max_output")]
        d = ins[0]
        if d is None:
            return ins, outs
        if p.flatten:
            k = None if any(v is None for v in d[1:]) else int(np.prod(d[1:], dtype=np.int64))
            out = (d[0], p.num_hidden)
        else:
            k = d[-1]
            out = tuple(d[:-1]) + (p.num_hidden,)
        ins[1] = merge_all(p, [(p.num_hidden, k), ins[1]], "weight")
        outs[0] = merge_all(p, [out, outs[0]], "output")
        if outs[0][0] is not None and d[0] is None:
            ins[0] = (outs[0][0],) + tuple(d[1:])
        return ins, outs

    def forward(self, p, inputs, ctx):
        nw = 2 if p.no_bias else 3
        data, weight = inputs[0], inputs[1]
        ranges = [_scalar(v) for v in inputs[nw:]]
        x = data.reshape(data.shape[0], -1) if p.flatten else data.reshape(-1, data.shape[-1])
        acc = int_dot(x, weight)
        data_levels = K_INT8_RANGE if data.dtype == np.int8 else K_UINT8_RANGE
        if not p.no_bias:
            data_scale = _F(data_levels / _F(_max_abs(ranges[0], ranges[1])))
            weight_scale = _F(K_INT8_RANGE / _F(_max_abs(ranges[2], ranges[3])))
            rescale = _F(_F(_F(data_scale * weight_scale) * _max_abs(ranges[4], ranges[5]))
                         / K_INT8_RANGE)
            bias = np.trunc(inputs[2].astype(_F) * rescale).astype(np.int64)
            acc = acc + bias[None, :]
        b_levels = 127 if data.dtype == np.int8 else 255
        lo, hi = _product_range(ranges[0], ranges[1], ranges[2], ranges[3], 127, b_levels)
        if p.flatten:
            out = acc.reshape(data.shape[0], p.num_hidden)
        else:
            out = acc.reshape(data.shape[:-1] + (p.num_hidden,))
        return [out.astype(np.int32), _range_out(lo), _range_out(hi)]
