"""INT8 convolution and dense kernels on x86 dot-product instructions (VNNI).

``vpdpbusd`` multiplies 4 unsigned bytes by 4 signed bytes and adds the four
products into one int32 lane, 16 lanes per zmm register (AVX512-VNNI) or 8 per
ymm (AVX-VNNI): 64 multiply-adds per instruction, where the plain int32 path
(widen, ``vpmulld``, add) does 16.  The quantized convolutions of an MXNet
int8 model (:mod:`...ops.fused_mkldnn`, :mod:`...ops.quantization`) lower to a
``relax.nn.conv2d``/``relax.matmul`` of uint8/int8 codes with a constant int8
weight and int32 accumulation; on a target with VNNI they are legalized here
into a kernel shaped for the instruction:

* weights packed at compile time ``[K/L, KH, KW, C/4, L, 4]`` (``L`` = int32
  lanes): the ``L x 4`` bytes one instruction reads are contiguous; input
  channels are padded to a multiple of 4 and output channels to one of ``L``
  with zero weights;
* activations channels-last; a ``pad_temp`` stage materialises the spatial
  padding and the channel padding (it is skipped when neither is needed);
* a thin layer (input channels not a multiple of 4, a 3-channel image) has
  each kernel row's ``KW x C`` taps -- contiguous bytes of a channels-last
  row -- grouped by 4 across pixels (:func:`fold_width`);
* **int8 data**: the instruction's data operand is unsigned, so the codes are
  shifted by +128 (``x ^ 0x80``) in ``pad_temp`` -- the padding becomes 128,
  the shifted zero -- and ``128 * sum(w)`` over each output channel's weights
  (computed at compile time) is subtracted from the accumulator, which makes
  the result exactly the signed product;
* the accumulator is exact int32, as before: MXNet's rounding and saturation
  (the fused epilogue's requantize/dequantize) are unchanged.

:func:`rule_int8` is the default schedule of such a kernel: the output
pixels (``oh * ow`` fused) are register-blocked ``rw`` at a time, the output
channels ``nc`` (whole registers) at a time, as the float micro-kernel of
:func:`..base.register_tile.tile_shape`, and the innermost ``L x 4`` step is tensorized into
one ``vpdpbusd``.  AVX2 targets without VNNI run the same kernel with an AVX2 step
(:mod:`..base.int8_avx2`: ``vpmaddubsw`` where the layer's weights cannot saturate it,
an exact ``vpmaddwd`` on int16 pairs otherwise -- weights and data widened before
the kernel's loop, :data:`DOT_STEPS` -- :func:`layer_family`, chosen once per
layer and carried on the kernel block as :data:`STEP_ATTR`); targets without
AVX2 keep the generic int32 path (the float-style schedules on int32
arithmetic); targets with AMX-INT8 take the tile kernel (:mod:`.int8_amx`) where
it fits -- a choice the AMX family makes and the kernel-choice table
(:mod:`..kernel_choice`) hands in, so that this module imports no other family.
AArch64 CPUs with dotprod run the same kernel on a 4-lane ``sdot`` step (``usdot``
for uint8 data with i8mm; uint8 data on ``sdot`` is shifted by -128, the mirror of
the x86 shift; :mod:`..base.arm_dot_steps`); those without it keep the int32 path.

The dot-product steps and their tensor intrinsics (:mod:`..base.int8_steps`) and the
register-blocked micro-kernel (:mod:`..base.dot_kernel`, also the bfloat16 kernels')
live in ``base/``; this module builds the kernel (packing, TE, legalization) and
recognises it again (:func:`rule_int8`).
"""

from __future__ import annotations

import logging

import numpy as np
from tvm import relax, s_tir, te, tirx
from tvm.ir.expr import Constant

from ..base.amx import phase_split, phase_tap, tap_major, tile_channels
from ..base.dot_kernel import rule_dot
from ..base.arm_dot_steps import layer_family as arm_family
from ..base.int8_avx2 import layer_family as avx2_family
from ..base.int8_steps import (DOT_STEPS, GROUP, STEP_ATTR, DotStep, data_shift, dot_intrinsic,
                               dot_lanes)
from ..base.kernel_family import PAD, Choice, family_block, part, stamp
from ..base.microarch import CpuInfo
from ..base.module_utils import static_shape, tensor_dtype

log = logging.getLogger(__name__)

#: the kernel family (:mod:`..base.kernel_family`) stamped on the VNNI/AVX2 kernel, which
#: :func:`rule_int8` schedules
FAMILY = "int8"
#: name of the accumulating block (a label)
CONV_BLOCK = "conv2d_nhwc_int8"
#: this family's own kernel (the AMX family's is handed in: :func:`legalize_conv2d`)
_OWN = Choice(FAMILY, CONV_BLOCK)
#: the +128 shift turning int8 data into the instruction's unsigned operand
SHIFT = 128


# ---------------------------------------------------------------------------
# compile-time weight packing
# ---------------------------------------------------------------------------
def pack_weights(w_hwio: np.ndarray, lanes: int, channel_multiple: int = 0,
                 step: DotStep | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(``[K/L, KH, KW, C/G, L, G]`` weights, ``128 * sum(w)`` int32 per padded channel).

    ``G`` and the dtype are *step*'s (default: 4 int8, the ``vpdpbusd`` step; AVX2's
    exact step: pairs of int16, the weights widened here, once, not in the kernel).
    Channels are zero-padded to multiples of *channel_multiple* (input: ``G``, or an AMX
    tile row's 64) and *lanes* (output); the second array is the compensation of the
    +128 data shift.
    """
    group, dtype = (GROUP, "int8") if step is None else (step.group, step.weight)
    multiple = channel_multiple or group
    kh, kw, c, k = w_hwio.shape
    cp, kp = -(-c // multiple) * multiple, -(-k // lanes) * lanes
    w = np.zeros((kh, kw, cp, kp), dtype=dtype)
    w[:, :, :c, :k] = w_hwio
    packed = w.reshape(kh, kw, cp // group, group, kp // lanes, lanes).transpose(4, 0, 1, 2, 5, 3)
    comp = SHIFT * w.astype(np.int64).sum(axis=(0, 1, 2))
    return np.ascontiguousarray(packed), comp.astype(np.int32)


def fold_width(w_hwio: np.ndarray) -> np.ndarray | None:
    """``[KH, 1, KW*C, K]``: a thin layer's kernel rows as single taps of ``KW*C`` channels.

    Where C is not a multiple of 4 (a 3-channel image) padding each pixel's
    channels to 4 wastes up to a quarter of the products; a kernel row's
    ``KW x C`` bytes are contiguous in a channels-last row, so they are
    grouped by 4 across pixels instead (21 -> 24 bytes for 7x7x3, not 28).
    None when C is a multiple of 4 or the kernel is one pixel wide.
    """
    kh, kw, c, k = w_hwio.shape
    if c % GROUP == 0 or kw == 1:
        return None
    return w_hwio.reshape(kh, 1, kw * c, k)


# ---------------------------------------------------------------------------
# the kernel (TE)
# ---------------------------------------------------------------------------
def conv2d_nhwc_int8(data: te.Tensor, weight: te.Tensor, comp: te.Tensor | None, strides,
                     padding, dilation, channels: int, kernel_w: int | None,
                     choice: Choice, family: str) -> te.Tensor:
    """NHWC uint8/int8 x packed int8 convolution into int32 (*channels* outputs).

    *kernel_w*: the weight folds the kernel's width into its channel groups
    (``[K/L, KH, 1, ceil(KW*C/G), L, G]``, :func:`fold_width`): the ``KW x C``
    taps of one kernel row are contiguous bytes of a channels-last input row.
    *choice*: the kernel family stamped on the accumulating block
    (:mod:`..base.kernel_family`: this one, or the AMX tiles', whose weights are
    tap-major) and the block's name.
    *family*: the dot-product step chosen for these weights (:func:`layer_family`),
    put on the accumulating block (:data:`STEP_ATTR`) for the schedule to read; its
    step's data dtype is ``pad_temp``'s (AVX2's exact step: the codes widened to int16
    there, once, not at every step).  *comp* (given where the data's signedness is not
    the step's, :func:`..base.int8_steps.data_shift`): the data is shifted by +-128 and
    ``comp`` (``shift * sum(w)``) subtracted.
    """
    n, h, w, c = (int(d) for d in data.shape)
    tiles = choice.family != FAMILY     # AMX: weights tap-major (.amx.tap_major)
    if tiles:
        kh, kw, ko, c4, lanes, group = (int(d) for d in weight.shape)
    else:
        ko, kh, kw, c4, lanes, group = (int(d) for d in weight.shape)
    sh, sw = strides
    dh, dw = dilation
    pt, pl, pb, pr = padding
    width = kw if kernel_w is None else kernel_w
    oh = (h + pt + pb - ((kh - 1) * dh + 1)) // sh + 1
    ow = (w + pl + pr - ((width - 1) * dw + 1)) // sw + 1
    operand = DOT_STEPS[family].data
    # codes of the other byte signedness than the step's operand (data_shift): +-128
    shift = data_shift(family, str(data.dtype)) if comp is not None else 0
    fill = tirx.const(shift, operand)       # the shifted zero

    def padded(i, y, x, ch, *bounds):
        inside = tirx.all(y >= pt, y < h + pt, x >= pl, x < w + pl, *bounds)
        v = data[i, y - pt, x - pl, ch]
        v = (v.astype("int32") + shift).astype(operand) if shift else v.astype(operand)
        return tirx.if_then_else(inside, v, fill)

    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    rc = te.reduce_axis((0, c4), name="rc")
    ri = te.reduce_axis((0, group), name="ri")
    if kernel_w is not None:      # one padded row of bytes, the last window's spare taps inside
        row = (w + pl + pr) * c + c4 * group - kernel_w * c
        src = te.compute((n, h + pt + pb, row), lambda i, y, t: padded(i, y, t // c, t % c),
                         name="pad_temp", attrs=part(PAD))

        def tap(i, y, x):
            return src[i, y * sh + ry * dh, x * sw * c + rc * group + ri]
    elif tiles and sw > 1:        # AMX tiles of a strided layer: the input split by phase
        src = phase_split((n, h + pt + pb, w + pl + pr, c4 * group),
                          lambda i, y, x, ch: padded(i, y, x, ch, ch < c), sw)

        def tap(i, y, x):
            return phase_tap(src, sw, i, y * sh + ry * dh, x, rx * dw, rc * group + ri)
    else:
        if data.dtype != operand or any(padding) or c4 * group != c:
            src = te.compute((n, h + pt + pb, w + pl + pr, c4 * group),
                             lambda i, y, x, ch: padded(i, y, x, ch, ch < c), name="pad_temp",
                             attrs=part(PAD))
        else:
            src = data

        def tap(i, y, x):
            return src[i, y * sh + ry * dh, x * sw + rx * dw, rc * group + ri]

    def conv(i, y, x, k):
        b = (weight[ry, rx, k // lanes, rc, k % lanes, ri] if tiles
             else weight[k // lanes, ry, rx, rc, k % lanes, ri])
        return te.sum(tap(i, y, x).astype("int32") * b.astype("int32"), axis=[ry, rx, rc, ri])

    acc = te.compute((n, oh, ow, ko * lanes), conv, name=choice.block,
                     attrs=stamp(choice.family, **{STEP_ATTR: family}))
    if comp is None and ko * lanes == channels:
        return acc
    if comp is None:
        return te.compute((n, oh, ow, channels), lambda i, y, x, k: acc[i, y, x, k],
                          name="conv2d_int8_crop")
    return te.compute((n, oh, ow, channels), lambda i, y, x, k: acc[i, y, x, k] - comp[k],
                      name="conv2d_int8_unshift")


def dense_int8(data: te.Tensor, weight: te.Tensor, comp: te.Tensor | None,
               units: int, choice: Choice, family: str) -> te.Tensor:
    """``[M, C] x [C, N]`` of int8 codes as a 1x1 convolution over ``M`` pixels."""
    m, c = (int(d) for d in data.shape)
    x = te.compute((1, 1, m, c), lambda a, b, i, j: data[i, j], name="dense_int8_rows")
    y = conv2d_nhwc_int8(x, weight, comp, (1, 1), (0, 0, 0, 0), (1, 1), units, None, choice,
                         family)
    return te.compute((m, units), lambda i, j: y[0, 0, i, j], name="dense_int8_out")


# ---------------------------------------------------------------------------
# legalization
# ---------------------------------------------------------------------------
def _int8_operands(x, w, call) -> bool:
    return (isinstance(w, Constant) and tensor_dtype(x) in ("uint8", "int8")
            and tensor_dtype(w) == "int8" and tensor_dtype(call) == "int32"
            and static_shape(x) is not None and static_shape(call) is not None)


def legalize_conv2d(bb: relax.BlockBuilder, call: relax.Call, int8_dot: str, tiles=None):
    """The VNNI kernel for an int8 NHWC/HWIO ``conv2d`` (None: not applicable); the AMX
    tile kernel where *tiles* -- the AMX family's choice, ``tiles(xs, ws, ys, strides)``
    -> its :class:`..base.kernel_family.Choice` or None (:func:`.int8_amx.tile_block`),
    given by the kernel-choice table (:mod:`..kernel_choice`) on a target with AMX-INT8 --
    takes the layer."""
    lanes = dot_lanes(int8_dot)
    a = call.attrs
    x, w = call.args
    if not lanes or not _int8_operands(x, w, call) or int(a.groups) != 1 \
            or (a.data_layout, a.kernel_layout, a.out_layout) != ("NHWC", "HWIO", "NHWC"):
        return None
    weights = w.value.numpy()
    choice = _tile_block(tiles, [int(d) for d in static_shape(x)], list(weights.shape),
                         [int(d) for d in static_shape(call)], a.strides)
    folded = fold_width(weights) if int(a.dilation[1]) == 1 and choice == _OWN else None
    family, args, shape = _kernel_args(choice, x, weights if folded is None else folded,
                                       int8_dot)
    geometry = ([int(v) for v in a.strides], [int(v) for v in a.padding],
                [int(v) for v in a.dilation], int(static_shape(w)[3]),
                None if folded is None else int(weights.shape[1]), choice, family)
    log.debug("int8 conv2d -> %s kernel (%s), weights %s", choice.block, family, shape)
    return bb.call_te(lambda d, wt, *cp: conv2d_nhwc_int8(d, wt, *(cp or [None]), *geometry),
                      *args, primfunc_name_hint=choice.block)


def legalize_matmul(bb: relax.BlockBuilder, call: relax.Call, int8_dot: str, tiles=None):
    """The VNNI (or, as :func:`legalize_conv2d`, AMX) kernel for ``[M, C] x const [C, N]``
    int8 ``matmul`` (None: not applicable)."""
    lanes = dot_lanes(int8_dot)
    x, w = call.args
    if not lanes or not _int8_operands(x, w, call) or len(static_shape(x)) != 2 \
            or len(static_shape(w)) != 2:
        return None
    c, n = (int(d) for d in static_shape(w))
    m = int(static_shape(x)[0])
    choice = _tile_block(tiles, [1, 1, m, c], [1, 1, c, n], [1, 1, m, n], (1, 1))
    family, args, shape = _kernel_args(choice, x, w.value.numpy().reshape(1, 1, c, n), int8_dot)
    log.debug("int8 dense -> %s kernel (%s), weights %s", choice.block, family, shape)
    return bb.call_te(lambda d, wt, *cp: dense_int8(d, wt, *(cp or [None]), n, choice, family),
                      *args, primfunc_name_hint="dense_int8")


def _kernel_args(choice: Choice, x: relax.Expr, w_hwio: np.ndarray, int8_dot: str):
    """(family, the kernel's arguments: data, packed weights[, compensation], the packed
    weights' shape) of one layer.

    The family is chosen (:func:`layer_family`) from the weights packed for the target's
    step; one whose step differs (AVX2's exact one: int16 pairs) gets them packed again
    for its own.  Its intrinsic is registered before any schedule (or tuning record)
    names it."""
    packed, comp = _pack_for(choice, w_hwio, dot_lanes(int8_dot))
    family = layer_family(int8_dot, packed, tensor_dtype(x))
    step = DOT_STEPS[family]
    if (step.group, step.weight) != (packed.shape[-1], str(packed.dtype)):
        packed, comp = pack_weights(w_hwio, step.lanes, step=step)
    dot_intrinsic(family)
    args = [x, relax.const(packed, step.weight)]
    shift = data_shift(family, tensor_dtype(x))
    if shift:           # comp is +128 * sum(w); a -128 shift (uint8 data on sdot) negates it
        args.append(relax.const(comp if shift > 0 else -comp, "int32"))
    return family, args, packed.shape


def layer_family(int8_dot: str, packed: np.ndarray, data_dtype: str = "uint8") -> str:
    """The dot-product family of one layer's kernel, from the target's *int8_dot*, its
    *packed* weights and its *data_dtype*: decided here, once, and carried on the kernel
    (:data:`STEP_ATTR`).  AVX2 chooses per layer from the weights
    (:func:`..base.int8_avx2.layer_family`: ``vpmaddubsw`` saturates on some weights),
    AArch64 with i8mm from the data's signedness (:func:`..base.arm_dot_steps.layer_family`:
    ``usdot`` or ``sdot``, neither shifting its data)."""
    return arm_family(avx2_family(int8_dot, packed), data_dtype)


def _tile_block(tiles, xs, ws, ys, strides) -> Choice:
    """The layer's kernel: the AMX family's where *tiles* (its choice, which registers
    its tile step) takes the layer, else this family's."""
    return (tiles(xs, ws, ys, strides) if tiles is not None else None) or _OWN


def _pack_for(choice: Choice, w_hwio: np.ndarray, lanes: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`pack_weights` for the kernel *choice*: the AMX one's input channels
    padded to a tile row (of ``tdpbusd``, AMX's int8 step) and its weights tap-major
    (:func:`..base.amx.tap_major`)."""
    if choice == _OWN:
        return pack_weights(w_hwio, lanes)
    packed, comp = pack_weights(w_hwio, lanes, tile_channels("tdpbusd"))
    return tap_major(packed), comp


# ---------------------------------------------------------------------------
# the default schedule
# ---------------------------------------------------------------------------
def rule_int8(func: tirx.PrimFunc, info: CpuInfo):
    """Register-blocked, ``vpdpbusd``-tensorized schedule of the kernel stamped :data:`FAMILY`.

    ::

        parallel for (co, n, pixel tile):
            acc[rw][nc] = 0                                   # rw x nc/L registers
            for (ry, rx, rc):                                 # 4 input channels a step
                for p in unroll(rw), v in unroll(nc/L):
                    acc[p][v*L:(v+1)*L] = vpdpbusd(acc[p][..], bcast(x[p, 4 ch]), w[.., L, 4])
            out[tile] = epilogue(acc)                         # fused requantize etc.

    The step's family is the one legalization chose for the layer's weights
    (:data:`STEP_ATTR` on the block; AVX2: ``vpmaddubsw`` or the exact widened
    sequence, :mod:`..base.int8_avx2`).  None when *func* has no such block.
    """
    step = kernel_step(func)
    lanes = dot_lanes(step)
    if not lanes:
        return None
    return rule_dot(func, info, FAMILY, lanes, lambda _vectors: dot_intrinsic(step))


def kernel_step(func: tirx.PrimFunc) -> str:
    """The dot-product step :data:`STEP_ATTR` names on *func*'s block stamped
    :data:`FAMILY` ("" if none)."""
    sch = s_tir.Schedule(func)
    block = family_block(sch, FAMILY)
    if block is None:
        return ""
    return str(sch.get(block).annotations.get(STEP_ATTR, ""))
