"""bfloat16 convolution and dense kernels on AVX512-BF16 (``vdpbf16ps``), float32 accumulation.

``--precision bf16`` (the build context's ``precision``) rounds the weights of float32
convolutions and dense layers to bfloat16 at compile time and the activations
to bfloat16 as each such kernel reads them; the products are summed in
float32 by ``vdpbf16ps``, which multiplies 16 pairs of bfloat16 and adds each
pair's two products into one float32 lane: 32 multiply-adds per instruction
on half the bytes of a float32 FMA's 16.  The layout mirrors the int8 VNNI
kernels (:mod:`.int8`, oneDNN's VNNI-packed weights):

* weights packed at compile time ``[K/16, KH, KW, C/2, 16, 2]`` (the 32
  bfloat16 one instruction reads are contiguous); input channels padded to
  an even count, output channels to a multiple of 16, with zero weights;
* a ``pad_temp`` stage converts the float32 activations to bfloat16 (round
  to nearest even, in integer arithmetic) and materialises the spatial and
  channel padding;
* the elementwise epilogue (bias, BatchNorm affine, residual add,
  activation) stays fused after the accumulator and computes in float32.

bfloat16 values are held as their 16-bit patterns (``uint16``): TVM's own
bfloat16 legalization promotes every bfloat16 value to float32 before code
generation, and its LLVM code generator maps bfloat16 to ``i16``, so the
instruction (whose LLVM intrinsic takes ``<32 x bfloat>``) is reached
through a three-line LLVM function linked into each kernel
(``pragma_import_llvm``) that reinterprets the bits and is inlined.

3x3 stride-1 convolutions that Winograd applies to take :mod:`.bf16_winograd`
(Winograd with this kernel as its batched product).  Depthwise/grouped
convolutions, layers too small to gain
(:func:`worth_it`) and everything else keep float32.  On a target with AMX-BF16
(Sapphire Rapids and later) the layers AMX tiles fit take :mod:`.bf16_amx` (the
same kernel, ``tdpbf16ps`` tile steps) before Winograd or these vector kernels.
"""

from __future__ import annotations

import logging

import numpy as np
import tvm
from tvm import relax, te, tirx
from tvm.ir.expr import Constant

from ..base import arm_bf16_step
from ..base.amx import phase_split, phase_tap, tap_major, tile_channels
from ..base.bf16_step import (CONV_BLOCK, FAMILY, GROUP, HELPER_IR, LANES, bits_to_float,
                              dot_intrinsic, register_dot_intrinsics, round_bits, to_bf16_bits)
from ..base.dot_kernel import rule_dot
from ..base.kernel_family import PAD, Choice, part, stamp
from ..base.module_utils import static_shape, tensor_dtype, var_uses

log = logging.getLogger(__name__)

#: smallest reduction (``C * KH * KW``) and output channel count a layer needs to be
#: computed in bfloat16: below them the kernel's fixed costs (the rounding copy of the
#: input, 16-lane output blocks, one broadcast per instruction) outweigh the halved
#: products.  Measured with the embedded-broadcast kernel (one thread, Zen 4, batch 1 / 8,
#: ``bench/layers.py``-built layers): 16-channel outputs and 32-channel inputs gain
#: (squeezenet1.1's 128 -> 16 squeeze 0.79 / 0.64x float32's time, its 32 -> 128 expand
#: 0.55 / 0.57x, mobilenetv2_1.0's 32 -> 16 at 112x112 0.82 / 0.81x); 8 outputs or a
#: reduction of 8-12 lose (16 -> 8 1.31 / 1.51x, 8 -> 48 1.26x at batch 8, 12 -> 64
#: 1.19x).  Reductions of 16-27 gained too (16 -> 96 at 112x112 0.57 / 0.75x, a
#: 3-channel 3x3 first layer 0.56 / 0.61x) but took mobilenetv2_1.0's output error to
#: 2.6% of its range, past the bf16 class (:data:`...precision.BF16_TOLERANCE`, 2%); at 32
#: it is 1.5% (1.0% with the former 64 / 32)
MIN_REDUCTION = 32
MIN_CHANNELS = 16
#: below this reduction the output channels must fill whole 16-lane vectors: a partial
#: last vector is cropped by a predicated epilogue that does not vectorize, which a thin
#: layer's few products cannot hide (16 -> 72 channels ran 3.7x float32's time, 24 -> 72
#: 2.6x; 144 -> 24 0.79x, its products outweigh it)
MIN_REDUCTION_PARTIAL = 64
#: the CPU features that compute bfloat16 dot products (LLVM names)
BF16_FEATURES = ("avx512bf16", "amx-bf16")
#: AMX's bfloat16 tile step: the AMX kernel's weights are packed for its tile rows
_TILE_KIND = "tdpbf16ps"


# ---------------------------------------------------------------------------
# the choice
# ---------------------------------------------------------------------------
def bf16_refusal(target, cpu) -> str | None:
    """Why *target* cannot compute ``--precision bf16`` (None: it can), from *cpu* -- its
    :class:`..base.microarch.CpuInfo` (None: not a CPU), where "can this CPU do
    bfloat16?" was decided (:func:`..base.microarch.cpu_features`) -- the one question a
    compile asks before its build context exists (``--precision bf16`` refused, ``auto``
    settling on fp32); within a build the context's CPU (``ctx.cpu.bf16_dot``) answers."""
    if target.kind.name != "llvm" or cpu is None:
        return f"--precision bf16 applies to CPU targets, not {target.kind.name}"
    from tvm.target import codegen
    triple = str(target.attrs.get("mtriple", "") or codegen.llvm_get_system_triple())
    if triple.startswith(("aarch64", "arm", "thumb")):   # ARM CPUs are judged in ARM terms
        if cpu.bf16_dot == arm_bf16_step.FAMILY:
            return None
        return (f"--precision bf16: ARM CPU {target.attrs.get('mcpu') or triple} has no "
                f"bfloat16 dot product (BFDOT: AArch64 with bf16, e.g. --cpu neoverse-v1); "
                f"use --precision fp32")
    if not cpu.bf16_dot:
        mcpu = str(target.attrs.get("mcpu", "") or "") or "this CPU"
        return (f"--precision bf16: target CPU {mcpu} has neither AVX512-BF16 nor AMX-BF16 "
                f"(needs one of {', '.join(BF16_FEATURES)}); use --precision fp32, or "
                f"--cpu sapphirerapids / znver4 to build for a CPU that has them")
    return None


def _count(ctx, tiles: bool = False) -> None:
    prec = ctx.records.precision
    if prec is not None:
        prec["kernels"] += 1
        if tiles:
            prec["tile_kernels"] = prec.get("tile_kernels", 0) + 1


# ---------------------------------------------------------------------------
# compile-time weight packing
# ---------------------------------------------------------------------------
def pack_weights(w_hwio: np.ndarray, channel_multiple: int = GROUP,
                 lanes: int = LANES) -> np.ndarray:
    """``[K/L, KH, KW, C/2, L, 2]`` bfloat16 bits (``L`` = *lanes*: 16 on x86, 4 for
    AArch64's ``bfdot``), channels zero-padded (input channels to *channel_multiple*: a
    pair, or a whole AMX tile row)."""
    kh, kw, c, k = w_hwio.shape
    cp, kp = -(-c // channel_multiple) * channel_multiple, -(-k // lanes) * lanes
    w = np.zeros((kh, kw, cp, kp), dtype=np.float32)
    w[:, :, :c, :k] = w_hwio
    bits = to_bf16_bits(w)
    packed = bits.reshape(kh, kw, cp // GROUP, GROUP, kp // lanes, lanes).transpose(
        4, 0, 1, 2, 5, 3)
    return np.ascontiguousarray(packed)


# ---------------------------------------------------------------------------
# the kernel (TE)
# ---------------------------------------------------------------------------
def round_to_bits(data: te.Tensor) -> te.Tensor:
    """float32 -> its bfloat16 bits, elementwise: what a bfloat16 kernel reads, as an op of
    its own so that FuseOps fuses it into the producer's epilogue (the producer then
    writes half the bytes)."""
    return te.compute(data.shape, lambda *i: round_bits(data(*i)), name="round_bf16")


def conv2d_nhwc_bf16(data: te.Tensor, weight: te.Tensor, strides, padding, dilation,
                     channels: int, data_layout: str = "NHWC",
                     choice: Choice = Choice(FAMILY, CONV_BLOCK)) -> te.Tensor:
    """NHWC float32 data (or its bfloat16 bits, ``uint16``: :func:`round_to_bits`) x
    packed bfloat16 weights -> float32 (*channels* outputs).

    *choice*: the kernel family whose rule schedules it, stamped on the accumulating
    block (:mod:`..base.kernel_family`), and that block's name -- this family's vector
    kernel, or the AMX family's tile kernel (its weights tap-major).

    NCHW data (a network's input, too thin to transpose first: 3 channels) is read
    in place by the rounding copy, which writes it channels-last.  Bits that need no
    padding are read in place (no copy)."""
    rounded = data.dtype == "uint16"
    if data_layout == "NCHW":
        n, c, h, w = (int(d) for d in data.shape)

        def load(i, y, x, ch):
            return data[i, ch, y, x]
    else:
        n, h, w, c = (int(d) for d in data.shape)

        def load(i, y, x, ch):
            return data[i, y, x, ch]
    tiles = choice.family != FAMILY     # AMX: weights tap-major (.amx.tap_major)
    if tiles:
        kh, kw, ko, c2, lanes, group = (int(d) for d in weight.shape)
    else:
        ko, kh, kw, c2, lanes, group = (int(d) for d in weight.shape)
    sh, sw = strides
    dh, dw = dilation
    pt, pl, pb, pr = padding
    oh = (h + pt + pb - ((kh - 1) * dh + 1)) // sh + 1
    ow = (w + pl + pr - ((kw - 1) * dw + 1)) // sw + 1
    zero = tirx.const(0, "uint16")

    def padded(i, y, x, ch):
        inside = tirx.all(y >= pt, y < h + pt, x >= pl, x < w + pl, ch < c)
        v = load(i, y - pt, x - pl, ch)
        return tirx.if_then_else(inside, v if rounded else round_bits(v), zero)

    shape = (n, h + pt + pb, w + pl + pr, c2 * group)
    if tiles and sw > 1:      # AMX tiles of a strided layer: the input split by column phase
        src = phase_split(shape, padded, sw)
    elif rounded and data_layout == "NHWC" and not any(padding) and c == c2 * group:
        src = data
    else:
        src = te.compute(shape, padded, name="pad_temp", attrs=part(PAD))
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    rc = te.reduce_axis((0, c2), name="rc")
    ri = te.reduce_axis((0, group), name="ri")

    def tap(i, y, x):
        if len(src.shape) == 5:
            return phase_tap(src, sw, i, y * sh + ry * dh, x, rx * dw, rc * group + ri)
        return src[i, y * sh + ry * dh, x * sw + rx * dw, rc * group + ri]

    def conv(i, y, x, k):
        a = tap(i, y, x)
        b = (weight[ry, rx, k // lanes, rc, k % lanes, ri] if tiles
             else weight[k // lanes, ry, rx, rc, k % lanes, ri])
        return te.sum(bits_to_float(a) * bits_to_float(b), axis=[ry, rx, rc, ri])

    acc = te.compute((n, oh, ow, ko * lanes), conv, name=choice.block,
                     attrs=stamp(choice.family))
    if ko * lanes == channels:
        return acc
    return te.compute((n, oh, ow, channels), lambda i, y, x, k: acc[i, y, x, k],
                      name="conv2d_bf16_crop")


def dense_bf16(data: te.Tensor, weight: te.Tensor, units: int,
               choice: Choice = Choice(FAMILY, CONV_BLOCK)) -> te.Tensor:
    """``[M, C] x [C, N]`` as a 1x1 convolution over ``M`` pixels."""
    m, c = (int(d) for d in data.shape)
    x = te.compute((1, 1, m, c), lambda a, b, i, j: data[i, j], name="dense_bf16_rows")
    y = conv2d_nhwc_bf16(x, weight, (1, 1), (0, 0, 0, 0), (1, 1), units, choice=choice)
    return te.compute((m, units), lambda i, j: y[0, 0, i, j], name="dense_bf16_out")


# ---------------------------------------------------------------------------
# legalization
# ---------------------------------------------------------------------------
def worth_it(reduction: int, channels: int, lanes: int = LANES) -> bool:
    """Whether a layer of *reduction* products per output and *channels* outputs gains
    from bfloat16 (:data:`MIN_REDUCTION`, :data:`MIN_CHANNELS`, and whole output vectors
    of *lanes* below :data:`MIN_REDUCTION_PARTIAL`); smaller stays float32."""
    if reduction < MIN_REDUCTION or channels < MIN_CHANNELS:
        return False
    return channels % lanes == 0 or reduction >= MIN_REDUCTION_PARTIAL


def _lanes(family: str) -> int:
    """float32 lanes of *family*'s step: ``vdpbf16ps`` on zmm, or AArch64's ``bfdot``."""
    return arm_bf16_step.LANES if family == arm_bf16_step.FAMILY else LANES


def _float32_operands(x, w, call) -> bool:
    return (isinstance(w, Constant) and tensor_dtype(x) == "float32"
            and tensor_dtype(w) == "float32" and tensor_dtype(call) == "float32"
            and static_shape(x) is not None and static_shape(call) is not None)


def legalize_conv2d(bb: relax.BlockBuilder, call: relax.Call, family: str, ctx,
                    tiles=None, winograd=None):
    """The bfloat16 kernel for a float32 NHWC/HWIO ``conv2d`` when the build's *ctx*
    (:class:`...build_context.BuildContext`) asks for ``bf16`` (None: not applicable).

    The other families that may take a bfloat16 layer are handed in by the kernel-choice table
    (:mod:`..kernel_choice`), tried in this order: *tiles* -- the AMX family's choice,
    ``tiles(xs, ws, ys, strides)`` -> its :class:`..base.kernel_family.Choice` or None
    (:func:`.bf16_amx.tile_block`), on an AMX-BF16 target -- then *winograd*, the bf16
    Winograd kernel, ``winograd(bb, x, weights, attrs, shapes, ctx)`` -> its output or
    None (:func:`.bf16_winograd.emit_if_applies`); else the direct kernel.  This module
    owns the bf16 decision (worth it or not), the families their own fit."""
    a = call.attrs
    x, w = call.args
    if ctx.precision != "bf16" or not family or not _float32_operands(x, w, call) \
            or int(a.groups) != 1 \
            or a.data_layout not in ("NHWC", "NCHW") \
            or (a.kernel_layout, a.out_layout) != ("HWIO", "NHWC"):
        return None
    kh, kw, c, k = (int(d) for d in static_shape(w))
    if not worth_it(kh * kw * c, k, _lanes(family)):
        return None
    register_dot_intrinsics()
    weights = w.value.numpy()
    shapes = [[int(d) for d in static_shape(v)] for v in (x, w, call)]
    geometry = ([int(v) for v in a.strides], [int(v) for v in a.padding],
                [int(v) for v in a.dilation], int(weights.shape[3]), str(a.data_layout))
    choice = tiles(*shapes, geometry[0]) if tiles is not None and a.data_layout == "NHWC" \
        else None
    if choice is not None:
        _count(ctx, tiles=True)
        packed = tap_major(pack_weights(weights, tile_channels(_TILE_KIND)))
        log.debug("conv2d -> bf16 AMX kernel, weights %s", packed.shape)
        return bb.call_te(lambda d, wt: conv2d_nhwc_bf16(d, wt, *geometry, choice),
                          _producer_rounded(bb, x, a, ctx), relax.const(packed, "uint16"),
                          primfunc_name_hint=choice.block)
    if a.data_layout == "NHWC" and winograd is not None:
        out = winograd(bb, x, weights, a, shapes, ctx)
        if out is not None:
            _count(ctx)
            return out
    packed = pack_weights(weights, lanes=_lanes(family))
    _count(ctx)
    log.debug("conv2d -> bf16 kernel, weights %s", packed.shape)
    return bb.call_te(lambda d, wt: conv2d_nhwc_bf16(d, wt, *geometry),
                      _producer_rounded(bb, x, a, ctx), relax.const(packed, "uint16"),
                      primfunc_name_hint=CONV_BLOCK)


def _producer_rounded(bb: relax.BlockBuilder, x, attrs, ctx):
    """*x*, or its bfloat16 bits where this convolution is its only reader: rounded by an
    op of its own, which FuseOps fuses into the producer's epilogue, so the producer
    writes bfloat16 and the kernel reads half the bytes, with no rounding copy of its
    own where the input needs no padding (mobilenetv2_1.0 at batch 8: 0.88-0.93x; where
    the input has other readers the producer must keep writing float32, and a rounding
    kernel of its own cost 1-3% at batch 1)."""
    if attrs.data_layout == "NHWC" and x in ctx.records.single_use:
        return bb.emit(bb.call_te(round_to_bits, x, primfunc_name_hint="round_bf16"))
    return x


def note_single_uses(ctx):
    """A pass (before ``LegalizeOps``) noting in *ctx*'s records the variables read exactly
    once, whose bfloat16 consumer may have their producer round them
    (:func:`legalize_conv2d`); nothing for a float32 build."""
    @tvm.transform.module_pass(opt_level=0, name="MxcNoteSingleUses")
    def _note(mod, _ctx):
        if ctx.precision == "bf16":
            for func in mod.functions.values():
                if isinstance(func, relax.Function):
                    ctx.records.single_use.update(
                        v for v, n in var_uses(func).items() if n == 1)
        return mod

    return _note


def legalize_matmul(bb: relax.BlockBuilder, call: relax.Call, family: str, ctx, tiles=None):
    """The bfloat16 kernel for ``[M, C] x const [C, N]`` float32 ``matmul`` (None: not
    applicable); the AMX kernel where *tiles* takes it (as :func:`legalize_conv2d`)."""
    x, w = call.args
    if ctx.precision != "bf16" or not family or not _float32_operands(x, w, call) \
            or len(static_shape(x)) != 2 or len(static_shape(w)) != 2:
        return None
    c, n = (int(d) for d in static_shape(w))
    if not worth_it(c, n, _lanes(family)):
        return None
    register_dot_intrinsics()
    m = int(static_shape(x)[0])
    weights = w.value.numpy().reshape(1, 1, c, n)
    choice = tiles([1, 1, m, c], [1, 1, c, n], [1, 1, m, n], (1, 1)) if tiles is not None \
        else None
    _count(ctx, tiles=choice is not None)
    if choice is not None:
        packed = tap_major(pack_weights(weights, tile_channels(_TILE_KIND)))
    else:
        packed, choice = pack_weights(weights, lanes=_lanes(family)), Choice(FAMILY, CONV_BLOCK)
    return bb.call_te(lambda d, wt: dense_bf16(d, wt, n, choice), x,
                      relax.const(packed, "uint16"), primfunc_name_hint="dense_bf16")


# ---------------------------------------------------------------------------
# the default schedule
# ---------------------------------------------------------------------------
def rule_bf16(func: tirx.PrimFunc, info):
    """Register-blocked, ``vdpbf16ps``-tensorized schedule of the kernel stamped
    :data:`FAMILY` (the int8 kernels' micro-kernel, :func:`..base.dot_kernel.rule_dot`);
    None for other kernels.  The CPU is not asked again: legalization stamps the family
    only where the build's CPU computes bfloat16 (and whose step: AArch64's ``bfdot``,
    :mod:`..base.arm_bf16_step`, on 4 lanes)."""
    if info.bf16_dot == arm_bf16_step.FAMILY:
        return rule_dot(func, info, FAMILY, arm_bf16_step.LANES, arm_bf16_step.dot_intrinsic,
                        {"pragma_import_llvm": arm_bf16_step.HELPER_IR})
    return rule_dot(func, info, FAMILY, LANES, dot_intrinsic,
                    {"pragma_import_llvm": HELPER_IR})
