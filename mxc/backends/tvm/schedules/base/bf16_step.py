"""The bfloat16 dot-product step, ``C[16] += A[2] . B[16, 2]`` on ``vdpbf16ps``, and bfloat16 bits.

bfloat16 values are held as their 16-bit patterns (``uint16``): TVM promotes every
bfloat16 value to float32 before code generation and maps bfloat16 to ``i16``, so
the instruction (whose LLVM intrinsic takes ``<32 x bfloat>``) is reached through a
three-line LLVM function (:data:`HELPER_IR`) linked into each kernel that
reinterprets the bits.  The direct bf16 kernels (:mod:`..families.bf16`), the
bf16 Winograd product (:mod:`..families.bf16_winograd`) and the AMX tiles
(:mod:`.amx`: the same products, written the same way for tensorize to match)
share the step's shape, its tensor intrinsic, the rounding and the block name the
bf16 rule recognises -- so they live here, below every family, importing none.
"""

from __future__ import annotations

import functools

import numpy as np
from tvm import s_tir, tirx

from .bf16_dot_tir import dot_description

#: name of the accumulating block (a label: the bf16 Winograd product is named so too)
CONV_BLOCK = "conv2d_nhwc_bf16"
#: the kernel family (:mod:`.kernel_family`) of a ``vdpbf16ps`` dot-product block, whose
#: rule (:func:`..families.bf16.rule_bf16`) schedules it: the bf16 kernels' and the bf16
#: Winograd product's, so it lives here, where both families read it
FAMILY = "bf16"
#: float32 lanes of one ``vdpbf16ps`` (zmm)
LANES = 16
#: bfloat16 values per float32 lane of one dot-product step
GROUP = 2
#: the inlined helper that turns bit patterns into the intrinsic's bfloat16 vectors
HELPER = "mxc_dpbf16ps_512"
HELPER_IR = f"""
define linkonce_odr <16 x float> @{HELPER}(<16 x float> %c, <16 x i32> %a, <16 x i32> %b) \
alwaysinline {{
  %ab = bitcast <16 x i32> %a to <32 x bfloat>
  %bb = bitcast <16 x i32> %b to <32 x bfloat>
  %r = call <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float> %c, <32 x bfloat> %ab, \
<32 x bfloat> %bb)
  ret <16 x float> %r
}}
declare <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float>, <32 x bfloat>, <32 x bfloat>)
"""


def bits_to_float(v):
    """bfloat16 bits (``uint16``) -> the float32 they stand for (exact)."""
    return tirx.reinterpret("float32", v.astype("uint32") << tirx.const(16, "uint32"))


def dot_intrinsic(vectors: int = 1) -> str:
    """Register (once) and name ``C[16] += A[2] . B[16, 2]`` (bfloat16 bits -> float32)
    for a register tile of *vectors* 16-lane channel vectors (:func:`.dot_kernel.rule_dot`).

    The broadcast pair ``A`` goes where the instruction takes its memory operand when
    the tile has one vector: LLVM then folds its load into the instruction as an
    embedded broadcast (``{1to16}``) instead of a ``vbroadcastss`` per instruction --
    squeezenet1.1's last layer (1000 channels over 13x13: a 16-channel tile) 1.29-1.36x
    faster, inceptionv3's 1x7 layers 1.35x (one thread, Zen 4).  With several vectors
    each broadcast is shared by as many instructions from a register, and folding it
    into every one cost 1-4% (resnet18's 3x3 and Winograd products), so there the
    weights take that place.  The product is symmetric in its two operands."""
    return _register_dot(vectors == 1)


def register_dot_intrinsics() -> None:
    """Register both forms of :func:`dot_intrinsic` and AArch64's ``bfdot`` step (a
    schedule's trace, replayed by a tuning worker, may name any)."""
    from .arm_bf16_step import dot_intrinsic as neon_dot

    for embedded in (False, True):
        _register_dot(embedded)
    neon_dot()


@functools.lru_cache(maxsize=None)
def _register_dot(embedded: bool) -> str:
    from tvm.script import tirx as T

    desc = dot_description(LANES, GROUP)

    def operands(broadcast, weights):    # the last is the instruction's memory operand
        return (weights, broadcast) if embedded else (broadcast, weights)

    @T.prim_func(s_tir=True)
    def impl(a: T.Buffer((GROUP,), "uint16", offset_factor=1),
             b: T.Buffer((LANES, GROUP), "uint16", offset_factor=1),
             c: T.Buffer((LANES,), "float32", offset_factor=1, scope="local")) -> None:
        with T.sblock("root"):
            T.reads(c[0:LANES], a[0:GROUP], b[0:LANES, 0:GROUP])
            T.writes(c[0:LANES])
            pair = T.reinterpret(a.vload([0], "uint16x2"), dtype="int32")
            first, second = T.meta_var(operands(
                T.broadcast(pair, LANES),
                T.reinterpret(b.vload([0, 0], dtype="uint16x32"), dtype="int32x16")))
            c[T.ramp(T.int32(0), 1, LANES)] = T.call_extern(
                "float32x16", HELPER, c.vload([0], dtype="float32x16"), first, second)

    name = f"mxc_dot_{LANES}x{GROUP}_bf16" + ("_bcast" if embedded else "")
    s_tir.TensorIntrin.register(name, desc, impl, override=True)
    return name


def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> the bit patterns of its bfloat16 rounding (to nearest, ties to even)."""
    import ml_dtypes
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)


def round_bits(v):
    """float32 -> bfloat16 bits, round to nearest even (NaN stays a NaN)."""
    u = tirx.reinterpret("uint32", v)
    one, half, sixteen = (tirx.const(n, "uint32") for n in (1, 0x7FFF, 16))
    rounded = ((u + half + ((u >> sixteen) & one)) >> sixteen).astype("uint16")
    quiet = ((u >> sixteen) | tirx.const(0x40, "uint32")).astype("uint16")
    return tirx.if_then_else(v != v, quiet, rounded)
