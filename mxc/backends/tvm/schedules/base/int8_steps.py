"""The int8 dot-product steps: ``C[L] += A[G] . B[L, G]`` (u8/s8/s16 x s8/s16 -> s32).

One registry (:data:`DOT_STEPS`) of the instruction families an int8 kernel steps
with -- ``vpdpbusd`` on zmm (AVX512-VNNI) or ymm (AVX-VNNI), AVX2's two
sequences (:mod:`.int8_avx2`), AArch64's ``sdot``/``usdot`` (:mod:`.arm_dot_steps`)
-- and the tensor intrinsics that tensorize a kernel's innermost step into them
(:func:`dot_intrinsic`).  Legalization (:mod:`..families.int8`) picks a step per
layer and writes it on the kernel block (:data:`STEP_ATTR`, beside the kernel family
of :mod:`.kernel_family`); the schedule rule reads it back, and tuning workers
register every intrinsic before replaying a trace that names one
(:func:`register_dot_intrinsics`).  It lives in ``base/`` because all of them --
the int8 family, the AMX family's fallback checks and the tuner -- need the same
names, and it imports no rule.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from tvm import s_tir

from . import arm_dot_steps
from .int8_avx2 import is_avx2, step

#: bytes per int32 lane of one dot-product step
GROUP = 4


class DotStep(NamedTuple):
    """The shape of one family's dot-product step ``C[lanes] += A[group] . B[lanes, group]``."""
    lanes: int      #: int32 lanes of the accumulator register
    group: int      #: products summed into each lane
    data: str       #: the data operand's dtype (what ``pad_temp`` holds)
    weight: str     #: the packed weights' dtype


#: the dot-product step of each family: ``vpdpbusd`` on zmm (AVX512-VNNI) or ymm
#: (AVX-VNNI), AVX2's ``vpmaddubsw`` sequence on bytes, and AVX2's exact ``vpmaddwd`` on
#: int16 pairs (weights widened when packed, data in ``pad_temp``; :mod:`.int8_avx2`) --
#: the one registry of families (:func:`register_dot_intrinsics` registers each)
DOT_STEPS = {"avx512vnni": DotStep(16, GROUP, "uint8", "int8"),
             "avxvnni": DotStep(8, GROUP, "uint8", "int8"),
             "avx2": DotStep(8, GROUP, "uint8", "int8"),
             "avx2-exact": DotStep(8, 2, "int16", "int16"),
             # AArch64, one 128-bit register: sdot (signed data), usdot (unsigned data)
             arm_dot_steps.DOTPROD: DotStep(4, GROUP, "int8", "int8"),
             arm_dot_steps.I8MM: DotStep(4, GROUP, "uint8", "int8")}
#: the kernel block's annotation naming its dot-product step (chosen per layer at
#: legalization; the kernel family itself is :data:`.kernel_family.FAMILY_ATTR`)
STEP_ATTR = "mxc.int8_dot"


def dot_lanes(int8_dot: str) -> int:
    """int32 lanes of one dot-product step of the *int8_dot* family (0: none)."""
    return DOT_STEPS[int8_dot].lanes if int8_dot in DOT_STEPS else 0


def shifts_data(family: str, data_dtype: str) -> bool:
    """Whether *data_dtype* codes are shifted into *family*'s data operand of the other
    byte signedness (:func:`data_shift`) -- and so the kernel subtracts ``shift * sum(w)``."""
    return data_shift(family, data_dtype) != 0


def data_shift(family: str, data_dtype: str) -> int:
    """What is added to each *data_dtype* code to make it *family*'s byte operand: +128
    for int8 data on an unsigned operand (``vpdpbusd``, ``usdot``), -128 for uint8 data
    on a signed one (``sdot``), 0 where they agree.  Either is ``x ^ 0x80`` on the bits,
    and exact once ``shift * sum(w)`` is subtracted from the accumulator."""
    operand = DOT_STEPS[family].data
    if data_dtype == "int8" and operand == "uint8":
        return 128
    if data_dtype == "uint8" and operand == "int8":
        return -128
    return 0


#: LLVM's ``vpdpbusd`` intrinsic per register width (LLVM picks the VEX encoding on AVX-VNNI)
_VPDPBUSD = {16: "llvm.x86.avx512.vpdpbusd.512", 8: "llvm.x86.avx512.vpdpbusd.256"}


@functools.lru_cache(maxsize=None)
def dot_intrinsic(int8_dot: str) -> str:
    """Register (once) and name the tensor intrinsic ``C[L] += A[4] . B[L, 4]`` (u8 x s8 -> s32).

    TVM ships a 16-lane form whose accumulator is a global buffer; the
    schedule accumulates in registers (a ``local`` buffer), so mxc registers
    its own: ``vpdpbusd`` for 16 lanes (zmm) and 8 (ymm), the AVX2 steps of
    :mod:`.int8_avx2` for 8 and AArch64's ``sdot``/``usdot`` (:mod:`.arm_dot_steps`)
    for 4 -- one description, the family's instructions.
    """
    from tvm.script import tirx as T

    from ..base.int8_avx2 import is_avx2, step

    if int8_dot not in DOT_STEPS:
        raise ValueError(f"no int8 dot-product instruction family {int8_dot!r}")
    lanes, group, a_dtype, b_dtype = DOT_STEPS[int8_dot]
    # (LLVM >= 17 types the byte operands <4L x i8>; older LLVMs took <L x i32>)
    c_type, b_type = f"int32x{lanes}", f"{b_dtype}x{group * lanes}"

    def accumulate(acc, a_word, b_vec):
        """``acc + A . B``: *a_word* the step's data (4 bytes, 2 int16) as an int32,
        *b_vec* the weights."""
        if is_avx2(int8_dot):
            return acc + step(int8_dot, a_word, b_vec, lanes)
        if arm_dot_steps.is_arm(int8_dot):
            return arm_dot_steps.step(int8_dot, acc, a_word, b_vec, lanes)
        a_bytes = T.reinterpret(T.broadcast(a_word, lanes), dtype=f"uint8x{GROUP * lanes}")
        return T.call_llvm_pure_intrin(T.llvm_lookup_intrinsic_id(_VPDPBUSD[lanes]),
                                       acc, a_bytes, b_vec, dtype=c_type)

    @T.prim_func(s_tir=True)
    def desc(a: T.Buffer((group,), a_dtype, offset_factor=1),
             b: T.Buffer((lanes, group), b_dtype, offset_factor=1),
             c: T.Buffer((lanes,), "int32", offset_factor=1, scope="local")) -> None:
        with T.sblock("root"):
            T.reads(c[0:lanes], a[0:group], b[0:lanes, 0:group])
            T.writes(c[0:lanes])
            for i in T.serial(0, lanes):
                for k in T.serial(0, group):
                    with T.sblock("update"):
                        vi, vk = T.axis.remap("SR", [i, k])
                        c[vi] = c[vi] + T.cast(a[vk], "int32") * T.cast(b[vi, vk], "int32")

    @T.prim_func(s_tir=True)
    def impl(a: T.Buffer((group,), a_dtype, offset_factor=1),
             b: T.Buffer((lanes, group), b_dtype, offset_factor=1),
             c: T.Buffer((lanes,), "int32", offset_factor=1, scope="local")) -> None:
        with T.sblock("root"):
            T.reads(c[0:lanes], a[0:group], b[0:lanes, 0:group])
            T.writes(c[0:lanes])
            a_i32 = T.reinterpret(a.vload([0], f"{a_dtype}x{group}"), dtype="int32")
            c[T.ramp(T.int32(0), 1, lanes)] = accumulate(
                c.vload([0], dtype=c_type), a_i32, b.vload([0, 0], dtype=b_type))

    name = dot_intrinsic_name(int8_dot)
    s_tir.TensorIntrin.register(name, desc, impl, override=True)
    return name


def dot_intrinsic_name(int8_dot: str) -> str:
    """The name :func:`dot_intrinsic` registers for *int8_dot* (nothing registered here)."""
    shape = DOT_STEPS[int8_dot]
    return f"mxc_dot_{shape.lanes}x{shape.group}_{int8_dot}"


def register_dot_intrinsics() -> None:
    """Register every family's intrinsic (tuning workers replay traces that name them)."""
    for family in DOT_STEPS:
        dot_intrinsic(family)
