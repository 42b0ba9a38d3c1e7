"""The bfloat16 dot-product step on AArch64: ``C[4] += A[2] . B[4, 2]`` on ``bfdot``.

``bfdot vd.4s, vn.8h, vm.8h`` (FEAT_BF16: Neoverse V1/V2) multiplies pairs of
bfloat16 values and adds each pair's two products into one float32 lane, four
lanes a 128-bit register: the shape of x86's ``vdpbf16ps`` step (:mod:`.bf16_step`)
on a quarter of its lanes.  So the bf16 kernels (:mod:`..families.bf16`) run on it
unchanged but for the weights' packing (4 output channels a vector, not 16) and
the tensor intrinsic registered here.

As on x86 the values are held as their 16-bit patterns, and the intrinsic (whose
LLVM form takes ``<8 x bfloat>``) is reached through a small LLVM function
(:data:`HELPER_IR`) linked into each kernel.  Numerics: without FEAT_EBF16,
``bfdot`` rounds its pair sum to odd and flushes denormals, where ``vdpbf16ps``
rounds to nearest even -- both within the bf16 class's tolerance
(:data:`...precision.BF16_TOLERANCE`), never bit-identical to x86's.
"""

from __future__ import annotations

import functools

from tvm import s_tir

from .bf16_dot_tir import dot_description

#: the target-level family of an AArch64 CPU with bf16 (:func:`.microarch.bf16_dot`)
FAMILY = "neon-bf16"
#: float32 lanes of one ``bfdot`` (a 128-bit register)
LANES = 4
#: bfloat16 values per float32 lane of one step
GROUP = 2
HELPER = "mxc_bfdot_128"
HELPER_IR = f"""
define linkonce_odr <4 x float> @{HELPER}(<4 x float> %c, <4 x i32> %a, <4 x i32> %b) \
alwaysinline {{
  %ab = bitcast <4 x i32> %a to <8 x bfloat>
  %bb = bitcast <4 x i32> %b to <8 x bfloat>
  %r = call <4 x float> @llvm.aarch64.neon.bfdot.v4f32.v8bf16(<4 x float> %c, <8 x bfloat> %ab, \
<8 x bfloat> %bb)
  ret <4 x float> %r
}}
declare <4 x float> @llvm.aarch64.neon.bfdot.v4f32.v8bf16(<4 x float>, <8 x bfloat>, <8 x bfloat>)
"""


@functools.lru_cache(maxsize=None)
def dot_intrinsic(_vectors: int = 1) -> str:
    """Register (once) and name ``C[4] += A[2] . B[4, 2]`` (bfloat16 bits -> float32);
    one form for any register tile (AArch64 has no embedded broadcast to choose)."""
    from tvm.script import tirx as T

    desc = dot_description(LANES, GROUP)

    @T.prim_func(s_tir=True)
    def impl(a: T.Buffer((GROUP,), "uint16", offset_factor=1),
             b: T.Buffer((LANES, GROUP), "uint16", offset_factor=1),
             c: T.Buffer((LANES,), "float32", offset_factor=1, scope="local")) -> None:
        with T.sblock("root"):
            T.reads(c[0:LANES], a[0:GROUP], b[0:LANES, 0:GROUP])
            T.writes(c[0:LANES])
            pair = T.reinterpret(a.vload([0], "uint16x2"), dtype="int32")
            c[T.ramp(T.int32(0), 1, LANES)] = T.call_extern(
                "float32x4", HELPER, c.vload([0], dtype="float32x4"),
                T.broadcast(pair, LANES),
                T.reinterpret(b.vload([0, 0], dtype="uint16x8"), dtype="int32x4"))

    name = f"mxc_dot_{LANES}x{GROUP}_bf16_neon"
    s_tir.TensorIntrin.register(name, desc, impl, override=True)
    return name
