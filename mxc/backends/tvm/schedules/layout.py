"""Channels-last layout for CPU kernels: a Relax pass that moves 2-D convolutions,
pooling and everything between them from NCHW to NHWC.

Why: every hot CPU kernel vectorises best along the channel axis (a 3x3 conv
on a 7x7 or 14x14 map has no long contiguous spatial axis, a depthwise conv
or a pooling window has no reduction axis to vectorise at all), so the
activations between layers are kept channels-last and the weights are
stored ``HWIO`` (output channels innermost: one vector load per
``(kh, kw, ic)``).  Weights are constants after parameter binding, so their
transposes are done here, in numpy, at compile time.

TVM's own ``relax.transform.ConvertLayout`` is not used because its
``where`` layout rule does not move (``where(cond, x, 0)`` -- mxc's
NaN-propagating ``relu`` -- pins the layout back to NCHW and costs two
transposes per activation).  This pass is a straight rewrite of each
dataflow block:

* ``nn.conv2d`` (NCHW/OIHW, any groups) becomes NHWC/HWIO;
* ``max_pool2d`` / ``avg_pool2d`` / ``adaptive_avg_pool2d`` follow their input;
* elementwise and broadcasting ops (unary, binary, ``where``, ``clip``,
  ``astype`` ...) follow any channels-last 4-D operand, the other operands
  being permuted (constants in numpy, broadcast shapes padded to rank 4);
* ``nn.pad``, ``concat`` and ``mean``/``sum``/``max``/``min`` over axes remap
  their axes;
* anything else gets NCHW operands back (one ``permute_dims``, emitted once
  per value and only when needed), as do the function's outputs.

Given the CPU's cost-model row, activations whose channels split into narrow
vector pieces are also kept padded to whole vectors between the ops that can
take them (:mod:`.channel_padding`: zero weights, exact-zero padded lanes),
and sliced back to their real channels where an op needs the exact tensor.

Semantics are unchanged: every rewrite is an exact axis permutation, and
padding only adds ``+0.0`` terms.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import Constant

from .channel_padding import (channel_mask, keeps_zero, pad_last_axis, padded_channels,
                              padding_keepers)
from .base.microarch import CpuInfo
from .base.module_utils import rewrite_functions, static_shape, tensor_dtype

TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)
#: position of NCHW axis i in NHWC
_AXIS = {0: 0, 1: 3, 2: 1, 3: 2}

_UNARY = {
    "abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil", "cos", "cosh", "exp",
    "floor", "isfinite", "isinf", "isnan", "log", "negative", "round", "rsqrt", "sigmoid",
    "sign", "sin", "sinh", "sqrt", "square", "tan", "tanh", "trunc", "logical_not",
    "bitwise_not", "erf", "clip", "astype", "nn.relu", "nn.gelu", "nn.gelu_tanh", "nn.silu",
    "nn.leakyrelu", "nn.softplus", "zeros_like", "ones_like", "full_like",
}
_BINARY = {
    "add", "subtract", "multiply", "divide", "floor_divide", "power", "maximum", "minimum",
    "mod", "floor_mod", "equal", "not_equal", "greater", "greater_equal", "less",
    "less_equal", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
    "bitwise_xor", "atan2", "where",
}
_ELEMWISE = {"relax." + n for n in _UNARY | _BINARY}
_REDUCE = {"relax.mean", "relax.sum", "relax.max", "relax.min", "relax.prod"}
_POOL = {"relax.nn.max_pool2d", "relax.nn.avg_pool2d"}
_FLOATS = ("float16", "float32", "float64")
#: a convolution reads an NCHW input of at most this many channels in place (its
#: loads broadcast one value each either way) instead of through a transposed copy,
#: which was a kernel of its own: an image of 3 channels is a few contiguous planes
THIN_INPUT_CHANNELS = 4


def _is_tensor(expr) -> bool:
    return isinstance(getattr(expr, "ty", None), relax.TensorType)


class _Rewriter:
    def __init__(self, bb: relax.BlockBuilder, info: CpuInfo | None = None,
                 keepers: set | None = None):
        self.bb = bb
        self.info = info       # the cost-model row deciding channel padding (None: never)
        self.keepers = keepers or set()   # old vars whose every use takes padding
        self.nchw: dict = {}   # old var -> expr holding its value in the original layout
        self.nhwc: dict = {}   # old var -> expr holding its value channels-last (4-D only)
        self.real: dict = {}   # old var -> its channel count, where nhwc holds it padded
        self.exact: dict = {}  # old var -> its padded nhwc value sliced to the real channels
        self.changed = False

    # ----------------------------------------------------------------- values
    def orig(self, expr):
        """*expr* (an old expression) in the original layout, in the new function."""
        if isinstance(expr, relax.Var):
            if expr in self.nchw:
                return self.nchw[expr]
            if expr in self.nhwc:
                back = self.bb.emit(relax.op.permute_dims(self.last(expr), TO_NCHW))
                self.nchw[expr] = back
                return back
            return expr          # a function parameter
        if isinstance(expr, relax.Tuple):
            return relax.Tuple([self.orig(f) for f in expr.fields])
        if isinstance(expr, relax.TupleGetItem):
            return relax.TupleGetItem(self.orig(expr.tuple_value), expr.index)
        if isinstance(expr, relax.Call):
            return relax.Call(expr.op, [self.orig(a) for a in expr.args], expr.attrs,
                              expr.ty_args)
        return expr

    def last(self, expr):
        """*expr* (an old 4-D tensor expression, or a broadcast operand of one) channels-last."""
        if isinstance(expr, relax.Var) and expr in self.nhwc:
            if expr in self.real:
                return self._sliced(expr)
            return self.nhwc[expr]
        shape = static_shape(expr)
        if isinstance(expr, Constant) and shape is not None:
            arr = expr.value.numpy()
            if arr.ndim == 0:
                return expr
            arr = arr.reshape((1,) * (4 - arr.ndim) + arr.shape)
            return relax.const(np.ascontiguousarray(arr.transpose(TO_NHWC)), arr.dtype.name)
        value = self.orig(expr)
        if shape is not None and len(shape) == 0:
            return value
        if shape is not None and len(shape) < 4:
            value = self.bb.emit(relax.op.reshape(value, (1,) * (4 - len(shape)) + shape))
        new = self.bb.emit(relax.op.permute_dims(value, TO_NHWC))
        if isinstance(expr, relax.Var) and shape is not None and len(shape) == 4:
            self.nhwc[expr] = new
        return new

    def is_last(self, expr) -> bool:
        return isinstance(expr, relax.Var) and expr in self.nhwc

    def stored(self, expr):
        """(*expr* channels-last as kept, its real channel count when kept padded else
        None): for the ops that take padded activations."""
        if isinstance(expr, relax.Var) and expr in self.real:
            return self.nhwc[expr], self.real[expr]
        return self.last(expr), None

    def _sliced(self, var):
        if var not in self.exact:
            self.exact[var] = self.bb.emit(relax.op.strided_slice(
                self.nhwc[var], axes=[3], begin=[0], end=[self.real[var]]))
        return self.exact[var]

    def pad_to(self, channels: int, dtype: str | None, pixels: int | None) -> int:
        """The padded channel count for a float activation of *channels* made over
        *pixels* output pixels (unchanged without a cost-model row)."""
        if self.info is None or dtype not in _FLOATS:
            return channels
        return padded_channels(channels, self.info, pixels)

    def rewrite(self, call: relax.Call, var=None):
        """The channels-last replacement of *call* (bound to *var*; its result NHWC), or
        None to keep it."""
        name = call.op.name
        out = static_shape(call)
        if name == "relax.nn.conv2d":
            return self._conv2d(call, var in self.keepers)
        if out is None or len(out) != 4:
            if name in _REDUCE:
                return self._reduce(call, out)
            return None
        if name in _ELEMWISE:
            return self._elemwise(call, out)
        if name in _POOL and self.is_last(call.args[0]) and call.attrs.layout == "NCHW" \
                and call.attrs.out_layout == "NCHW":
            a = call.attrs
            fn = relax.op.nn.max_pool2d if name.endswith("max_pool2d") else relax.op.nn.avg_pool2d
            x, real = self.stored(call.args[0])    # a window over zero lanes stays zero
            return _padded(fn(x, a.pool_size, a.strides, a.padding, a.dilation, a.ceil_mode,
                              a.count_include_pad, layout="NHWC", out_layout="NHWC"), real)
        if name == "relax.nn.adaptive_avg_pool2d" and self.is_last(call.args[0]) \
                and call.attrs.layout == "NCHW" and call.attrs.out_layout == "NCHW":
            x, real = self.stored(call.args[0])
            return _padded(relax.op.nn.adaptive_avg_pool2d(x, call.attrs.output_size,
                                                           layout="NHWC", out_layout="NHWC"),
                           real)
        if name == "relax.nn.pad" and self.is_last(call.args[0]) \
                and len(call.attrs.pad_width) == 8:
            w = [int(v) for v in call.attrs.pad_width]
            pairs = [w[2 * i:2 * i + 2] for i in range(4)]
            width = [v for i in TO_NHWC for v in pairs[i]]
            x, real = self.stored(call.args[0])
            if real is not None and (any(pairs[1]) or float(call.attrs.pad_value) != 0.0
                                     or str(call.attrs.pad_mode) != "constant"):
                x, real = self.last(call.args[0]), None   # the border would not be zero
            return _padded(relax.op.nn.pad(x, width, call.attrs.pad_mode,
                                           float(call.attrs.pad_value)), real)
        if name == "relax.concat" and isinstance(call.args[0], relax.Tuple):
            fields = call.args[0].fields
            if any(self.is_last(f) for f in fields) and \
                    all(len(static_shape(f) or ()) == 4 for f in fields):
                axis = int(call.attrs.axis) % 4
                return relax.op.concat([self.last(f) for f in fields], _AXIS[axis])
            return None
        if name in _REDUCE:
            return self._reduce(call, out)
        return None

    def _conv2d(self, call, may_pad: bool):
        a = call.attrs
        x, w = call.args
        if (a.data_layout, a.kernel_layout, a.out_layout) != ("NCHW", "OIHW", "NCHW"):
            return None
        if len(static_shape(x) or ()) != 4 or len(static_shape(w) or ()) != 4:
            return None
        out_dtype = a.out_dtype if str(a.out_dtype) not in ("", "void") else None
        if not isinstance(w, Constant):
            w_new = self.bb.emit(relax.op.permute_dims(self.orig(w), (2, 3, 1, 0)))
            return relax.op.nn.conv2d(self.last(x), w_new, a.strides, a.padding, a.dilation,
                                      int(a.groups), data_layout="NHWC", kernel_layout="HWIO",
                                      out_layout="NHWC", out_dtype=out_dtype)
        hwio = w.value.numpy().transpose(2, 3, 1, 0)
        return self._conv2d_const(call, hwio, out_dtype, may_pad)

    def _conv2d_const(self, call, hwio: np.ndarray, out_dtype, may_pad: bool):
        """The channels-last convolution with constant weights *hwio*: its input taken
        padded, its output padded where :mod:`.channel_padding` says so and *may_pad*."""
        a = call.attrs
        groups = int(a.groups)
        data_layout = "NHWC"
        if groups == 1 and self._thin_input(call, hwio):
            # read in place: no NCHW -> NHWC copy of the network's image
            x, real_in, data_layout = self.orig(call.args[0]), None, "NCHW"
        else:
            x, real_in = self.stored(call.args[0])
        dtype = tensor_dtype(call)
        depthwise = groups > 1 and hwio.shape[2] == 1 and groups == hwio.shape[3]
        if real_in is not None and groups > 1 and not may_pad:
            x, real_in = self.last(call.args[0]), None
        if real_in is not None:
            width = static_shape(x)[3]
            if groups == 1:          # zero weights for the zero lanes
                hwio = pad_last_axis(hwio, width, axis=2)
            elif depthwise:          # zero lanes through zero filters stay zero
                hwio, groups = pad_last_axis(hwio, width, axis=3), width
            else:
                x, real_in = self.last(call.args[0]), None
        k = hwio.shape[3]
        out = static_shape(call)
        pixels = out[0] * out[2] * out[3] if out is not None else None
        padded = self.pad_to(k, dtype, pixels) if groups == 1 and may_pad else k
        if padded > k:
            hwio = pad_last_axis(hwio, padded, axis=3)

        def conv(weights):
            return relax.op.nn.conv2d(x, relax.const(np.ascontiguousarray(weights),
                                                     hwio.dtype.name),
                                      a.strides, a.padding, a.dilation, groups,
                                      data_layout=data_layout, kernel_layout="HWIO",
                                      out_layout="NHWC", out_dtype=out_dtype)

        if depthwise and real_in is not None:
            return _Padded(conv(hwio), real_in)
        if padded == k:
            return conv(hwio)
        # the new lanes: sums of x * 0, which an inf or NaN in x would make NaN
        y = self.bb.emit(conv(hwio))
        return _Padded(relax.op.where(relax.const(channel_mask(k, padded), "bool"), y,
                                      relax.const(0, dtype)), k)

    def _thin_input(self, call, hwio: np.ndarray) -> bool:
        """Whether convolution *call*'s data is an NCHW value no channels-last copy exists
        of yet, with at most :data:`THIN_INPUT_CHANNELS` channels (a network's image), in
        the float dtype of its weights and result: the float legalization of
        :mod:`.legalize` reads it in place (int8 kernels take NHWC)."""
        x = call.args[0]
        shape = static_shape(x)
        return isinstance(x, relax.Var) and x not in self.nhwc and shape is not None \
            and len(shape) == 4 and shape[1] <= THIN_INPUT_CHANNELS \
            and tensor_dtype(x) in _FLOATS and tensor_dtype(x) == hwio.dtype.name \
            == tensor_dtype(call)

    def _elemwise(self, call, out):
        tensors = [a for a in call.args if _is_tensor(a)]
        if not any(self.is_last(a) for a in tensors):
            return None
        for a in tensors:
            shape = static_shape(a)
            if shape is None or len(shape) > 4:
                return None
        kept = self._elemwise_padded(call)
        if kept is not None:
            return kept
        args = [self.last(a) if _is_tensor(a) else a for a in call.args]
        return relax.Call(call.op, args, call.attrs, call.ty_args)

    def _elemwise_padded(self, call):
        """*call* over its operands as kept padded, when one is and the op maps what
        every operand holds in the padded lanes to zero; else None."""
        reals = {(self.real[a], static_shape(self.nhwc[a])[3]) for a in call.args
                 if isinstance(a, relax.Var) and a in self.real}
        if len(reals) != 1:
            return None
        (real, width), = reals
        args, lanes = [], []
        for a in call.args:
            if not _is_tensor(a):
                return None
            dtype = tensor_dtype(a)
            shape = static_shape(a)
            if isinstance(a, relax.Var) and a in self.real:
                args.append(self.nhwc[a])
                lanes.append(np.zeros(1, dtype))
            elif isinstance(a, Constant) and shape is not None:
                arr = a.value.numpy()
                if arr.ndim == 0:        # a scalar stays one (an immediate in the kernel)
                    args.append(a)
                    lanes.append(arr.reshape(1))
                    continue
                arr4 = arr.reshape((1,) * (4 - arr.ndim) + arr.shape).transpose(TO_NHWC)
                if arr4.shape[3] == real:
                    arr4 = pad_last_axis(arr4, width, axis=3)
                    lanes.append(np.zeros(1, dtype))
                elif arr4.shape[3] == 1:
                    lanes.append(np.ravel(arr4))
                else:
                    return None
                args.append(relax.const(np.ascontiguousarray(arr4), dtype))
            else:
                return None
        if not keeps_zero(call.op.name, lanes):
            return None
        return _Padded(relax.Call(call.op, args, call.attrs, call.ty_args), real)

    def _reduce(self, call, out):
        x = call.args[0]
        if not self.is_last(x) or call.attrs.axis is None:
            return None
        axes = sorted(int(v) % 4 for v in call.attrs.axis)
        keep = bool(call.attrs.keepdims)
        new_axes = sorted(_AXIS[i] for i in axes)
        fn = {"relax.mean": relax.op.mean, "relax.sum": relax.op.sum, "relax.max": relax.op.max,
              "relax.min": relax.op.min, "relax.prod": relax.op.prod}[call.op.name]
        if keep:
            if 3 not in new_axes:     # per channel: zero lanes reduce to zero
                value, real = self.stored(x)
                return _padded(fn(value, new_axes, keepdims=True), real)
            return fn(self.last(x), new_axes, keepdims=True)
        # without keepdims the result is channels-last-independent only when the
        # surviving axes keep their relative order (e.g. mean over H, W -> (N, C))
        rest_old = [i for i in range(4) if i not in axes]
        rest_new = sorted(rest_old, key=lambda i: _AXIS[i])
        if rest_old != rest_new:
            return None
        return _Plain(fn(self.last(x), new_axes, keepdims=False))


def _padded(expr, real: int | None):
    """*expr*, marked as holding *real* channels in a padded tensor when not None."""
    return expr if real is None else _Padded(expr, real)


class _Padded:
    """A rewritten call whose channels-last result is padded: *real* channels, then
    exact zeros."""

    def __init__(self, expr, real: int):
        self.expr = expr
        self.real = real


class _Plain:
    """A rewritten call whose result is NOT channels-last (same value as the original)."""

    def __init__(self, expr):
        self.expr = expr


def _convert(func: relax.Function, info: CpuInfo | None) -> relax.Function | None:
    body = func.body
    if not isinstance(body, relax.SeqExpr):
        return None
    for block in body.blocks:
        for b in block.bindings:
            if not isinstance(b, relax.VarBinding):
                return None
    bb = relax.BlockBuilder()
    rw = _Rewriter(bb, info, padding_keepers(func) if info is not None else None)
    with bb.function("__mxc_nhwc", list(func.params), pure=func.is_pure):
        for block in body.blocks:
            if isinstance(block, relax.DataflowBlock):
                with bb.dataflow():
                    for b in block.bindings:
                        _bind(rw, b.var, b.value)
            else:
                for b in block.bindings:
                    _bind(rw, b.var, b.value)
        result = rw.orig(body.body)
        bb.emit_func_output(result)
    if not rw.changed:
        return None
    new = bb.get()["__mxc_nhwc"].without_attr("global_symbol")
    if func.attrs is not None:
        new = new.with_attrs(func.attrs)
    return new


def _bind(rw: _Rewriter, var, value) -> None:
    new = rw.rewrite(value, var) if isinstance(value, relax.Call) and \
        isinstance(value.op, tvm.ir.Op) else None
    if isinstance(new, _Plain):
        rw.changed = True
        if isinstance(var, relax.DataflowVar):
            rw.nchw[var] = rw.bb.emit(new.expr, name_hint=str(var.name))
        else:
            rw.nchw[var] = rw.bb.emit_output(new.expr, name_hint=str(var.name))
        return
    if new is not None:
        rw.changed = True
        if isinstance(new, _Padded):
            new, rw.real[var] = new.expr, new.real
        expr = rw.bb.emit(new, name_hint=str(var.name))
        rw.nhwc[var] = expr
        if not isinstance(var, relax.DataflowVar):
            rw.nchw[var] = rw.bb.emit_output(relax.op.permute_dims(rw.last(var), TO_NCHW))
        return
    value = rw.orig(value)
    if isinstance(var, relax.DataflowVar):
        rw.nchw[var] = rw.bb.emit(value, name_hint=str(var.name))
    else:
        rw.nchw[var] = rw.bb.emit_output(value, name_hint=str(var.name))


def channels_last_pass(info: CpuInfo | None = None) -> tvm.transform.Pass:
    """The pass rewriting every Relax function to keep 2-D conv activations NHWC,
    padded to whole vectors where *info* (the target's cost-model row) says so."""
    @tvm.transform.module_pass(opt_level=0, name="MxcChannelsLast")
    def _pass(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        def convert(_gv, func):
            if isinstance(func, relax.Function) and \
                    not (func.attrs and "Primitive" in func.attrs):
                return _convert(func, info)
            return None

        return rewrite_functions(mod, convert)

    return _pass


#: channels-last without channel padding
channels_last = channels_last_pass()
