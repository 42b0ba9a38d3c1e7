"""Channel padding for channels-last activations whose channel count splits into
narrow vector pieces.

A channels-last kernel vectorises along the channels.  36 channels (mobilenetv2
at width 0.25: 6 x 6 expansion) split into 4-lane pieces on AVX-512 and AVX2
alike, 6 channels into 2-lane ones, and a kernel made of narrow pieces pays its
loads, stores and epilogue per piece: measured on Zen 4, a 56x56 depthwise
convolution ran 2.6x faster over 48 channels than over 36, the 36 -> 6
projection 2.6x faster as 40 -> 8.  So the layout pass (:mod:`.layout`) keeps
such activations padded -- ``[N, H, W, C']`` with ``C' > C`` -- through the
convolutions, pooling and elementwise ops between them, as oneDNN's blocked
layouts do, and cuts the padding off only where an op needs the exact tensor.

**Invariant: the padded channels hold exact zeros.**  A convolution producing
a padded tensor has zero weights for those channels and is followed by a
select against a channel mask (``0 * inf`` would otherwise put NaN there); a
consumer convolution has zero weights for them; an elementwise op keeps the
padding only when :func:`keeps_zero` proves it maps the padded lanes' values
to zero.  So every real channel is computed from exactly the same terms as
without padding, plus ``+0.0`` terms: the result is unchanged.
"""

from __future__ import annotations

import numpy as np
from tvm import relax
from tvm.ir.expr import Constant

from .base.microarch import CpuInfo
from .base.register_tile import MAX_TILE_VECTORS, lane_rate, tile_shape, vector_piece

#: vector pieces narrower than this many floats (a 128-bit register) are what makes a
#: channel count slow on every x86 row of the table: with 4-lane pieces 36 channels cost
#: 9 vectors per pixel against 3 (AVX-512) or 5 (AVX2) once padded
FAST_PIECE_LANES = 8

#: channel counts up to this stay as they are: a 4-channel tensor is one narrow piece
#: already, and padding its consumers' reduction doubles their work (8 -> 4 -> 24 at
#: 112x112 measured 1.5x slower padded to 8 on Zen 4)
SMALL_CHANNELS = 4


def padded_channels(c: int, info: CpuInfo, pixels: int | None = None) -> int:
    """The channel count a channels-last activation of *c* channels is kept at, when
    the convolution producing it computes *pixels* output pixels.

    * Vector pieces narrower than :data:`FAST_PIECE_LANES` (or the register, where
      narrower), unless *c* is small: rounded up to whole registers when it spans
      more than one, to :data:`FAST_PIECE_LANES` when not (36 -> 48 on AVX-512,
      40 on AVX2; 6 -> 8 on both).
    * Otherwise (whole registers, or pieces of at least that width), a count whose
      tiles are slow: rounded up to a multiple of 1..4 registers when the
      register-tile model (:func:`.base.register_tile.lane_rate`) expects the padded count,
      padding included, to run :data:`PAD_GAIN` faster and it adds at most
      :data:`MAX_PAD_FRACTION` (the consumers' reductions grow too).  Two cases:
      channel tiles too narrow to keep the loads below the FMAs (1000 classes after
      global pooling on AVX2: one pixel, 125 registers -> 1008; over several pixels
      :func:`.base.register_tile.tile_shape` takes 5-register tiles instead), and
      half-register pieces on a CPU that issues them no faster than whole ones
      (1000 classes on a Xeon with two 512-bit FMA units: 8-lane pieces, half its
      peak -> 1008 or 1024; Zen 4 issues them at twice its zmm rate, so only the
      narrow pieces' load-bound steps are at stake there -> 1024 over 13x13).
    """
    fast = min(FAST_PIECE_LANES, info.lanes)
    if c <= SMALL_CHANNELS:
        return c
    piece = vector_piece(c, info.lanes)
    if piece < fast:
        unit = info.lanes if c > info.lanes else fast
        return -(-c // unit) * unit
    if pixels is None:
        return c
    best, best_time = c, c / _rate(c, pixels, info)
    for vectors in range(1, MAX_TILE_VECTORS + 1):
        unit = vectors * info.lanes
        cand = -(-c // unit) * unit
        if cand == c or cand - c > MAX_PAD_FRACTION * c:
            continue
        t = cand / _rate(cand, pixels, info)
        if t * PAD_GAIN < best_time:
            best, best_time = cand, t
    return best


def _rate(c: int, pixels: int, info: CpuInfo) -> float:
    """Channels computed per cycle and pixel step for *c* channels (the model's tile)."""
    nc, rw = tile_shape(c, pixels, info)
    return lane_rate(nc, rw, pixels, info)


#: the model's expected gain a count of pieces at least 8 floats wide must show to be padded
PAD_GAIN = 1.05

#: ... and the most it may grow by (1000 -> 1008 is 0.8%; 48 -> 64 would add a third to
#: every consumer's reduction, which the tile model of the producer does not see)
MAX_PAD_FRACTION = 1 / 16


def channel_mask(real: int, padded: int) -> np.ndarray:
    """``[1, 1, 1, padded]`` bools, true on the *real* channels."""
    return (np.arange(padded) < real).reshape(1, 1, 1, padded)


def pad_last_axis(arr: np.ndarray, padded: int, axis: int = -1) -> np.ndarray:
    """*arr* with its *axis* zero-padded to *padded* entries."""
    width = [(0, 0)] * arr.ndim
    width[axis] = (0, padded - arr.shape[axis])
    return np.ascontiguousarray(np.pad(arr, width))


#: numpy twins of the elementwise Relax ops a padded activation may flow through
_NUMPY = {
    "relax.add": np.add, "relax.subtract": np.subtract, "relax.multiply": np.multiply,
    "relax.divide": np.divide, "relax.maximum": np.maximum, "relax.minimum": np.minimum,
    "relax.greater": np.greater, "relax.greater_equal": np.greater_equal,
    "relax.less": np.less, "relax.less_equal": np.less_equal, "relax.equal": np.equal,
    "relax.not_equal": np.not_equal, "relax.logical_and": np.logical_and,
    "relax.logical_or": np.logical_or, "relax.logical_not": np.logical_not,
    "relax.isnan": np.isnan, "relax.isinf": np.isinf, "relax.negative": np.negative,
    "relax.abs": np.abs, "relax.where": np.where, "relax.nn.relu": lambda x: np.maximum(x, 0),
    "relax.square": np.square,
}


def keeps_zero(op_name: str, lane_values: list[np.ndarray]) -> bool:
    """Whether the elementwise op *op_name* (tensor operands only: mxc lowers clip and
    relu6 to ``where`` chains) maps the padded lanes' operand values (*lane_values*:
    one array per operand, every value that operand may hold there) to zero only --
    so its result stays a padded tensor with zero padding."""
    if op_name not in _NUMPY:
        return False
    try:
        with np.errstate(all="ignore"):
            out = _NUMPY[op_name](*np.broadcast_arrays(*lane_values))
    except (TypeError, ValueError):
        return False
    out = np.asarray(out)
    return bool(out.size) and not np.any(out)


#: ops that take a padded channels-last activation as their first operand as it is
_TAKES_PADDING = {"relax.nn.max_pool2d", "relax.nn.avg_pool2d", "relax.nn.adaptive_avg_pool2d"}
_KEEPDIMS_REDUCTIONS = {"relax.mean", "relax.sum", "relax.max", "relax.min", "relax.prod"}


def padding_keepers(func) -> set:
    """The variables of the Relax function *func* (NCHW, before the layout pass) whose
    values may be kept padded: every use takes the padding -- a convolution with
    constant weights (its data: the padding ends in its reduction), pooling or a
    per-channel reduction keeping its dims (its result kept padded or cut after it),
    or an op passing it on whose own result may be kept padded (a depthwise
    convolution, an elementwise op of :func:`keeps_zero`).

    A padded convolution whose result is cut right away (a function output, a
    concatenation) would get the slice fused into its kernel, which the register-tile
    rule cannot schedule (a single 36-channel layer ran 20x slower that way)."""
    uses: dict = {}
    order = []

    def note(user, expr):
        if isinstance(expr, relax.Var):
            uses.setdefault(expr, []).append(user)
        elif isinstance(expr, relax.Tuple):
            for field in expr.fields:
                note(None, field)             # a tuple's fields: not a padded use
        elif isinstance(expr, relax.TupleGetItem):
            note(None, expr.tuple_value)

    for block in func.body.blocks:
        for b in block.bindings:
            order.append(b)
            value = b.value
            args = value.args if isinstance(value, relax.Call) else [value]
            for arg in args:
                note(b if isinstance(value, relax.Call) else None, arg)
    note(None, func.body.body)

    keep: set = set()
    for b in reversed(order):
        if not isinstance(b.var, relax.DataflowVar) or b.var not in uses:
            continue
        if all(u is not None and _takes_padding(u, b.var, keep)
               for u in uses[b.var]):
            keep.add(b.var)
    return keep


def _takes_padding(binding, var, keep: set) -> bool:
    call = binding.value
    if not hasattr(call.op, "name"):
        return False
    name = call.op.name
    passes_on = binding.var in keep       # the op's result may be kept padded too
    if name == "relax.nn.conv2d":
        weight = call.args[1]
        if not call.args[0].same_as(var) or not isinstance(weight, Constant):
            return False
        groups, shape = int(call.attrs.groups), weight.value.shape
        if groups == 1:
            return True                       # the padding ends in its reduction
        return passes_on and int(shape[1]) == 1 and int(shape[0]) == groups   # depthwise
    # pooling and per-channel reductions keeping their dims (global pooling): kept
    # padded, or cut right after them -- the slice fuses into the pooling kernel, where
    # it costs nothing (squeezenet's 1008-wide global pooling: 12 us), unlike a slice
    # fused into a convolution
    if name in _TAKES_PADDING:
        return True
    if name in _KEEPDIMS_REDUCTIONS:
        axes = call.attrs.axis
        return bool(call.attrs.keepdims) and axes is not None \
            and 1 not in [int(a) % 4 for a in axes]
    if name not in _NUMPY or not passes_on:
        return False
    lanes = []
    for arg in call.args:
        if isinstance(arg, Constant):
            arr = arg.value.numpy()
            # an NCHW-broadcast constant: per channel (padded with zeros) or not
            per_channel = arr.ndim >= 3 and arr.shape[-3] > 1
            lanes.append(np.zeros(1, arr.dtype) if per_channel else np.ravel(arr))
        elif isinstance(arg, relax.Var):
            lanes.append(np.zeros(1, str(arg.ty.dtype)))
        else:
            return False
    return keeps_zero(name, lanes)
