"""INT8 dot-product steps on AArch64: ``sdot`` (dotprod) and ``usdot`` (i8mm).

The int8 kernels of :mod:`..families.int8` step with ``C[L] += A[4] . B[L, 4]``: one
register of ``L`` int32 accumulators, each the sum of 4 byte products, the data's 4
bytes broadcast to every lane.  AArch64's dot-product instructions have that shape
on a 128-bit register (``L = 4``, 16 bytes a step):

* ``sdot vd.4s, vn.16b, vm.16b`` (FEAT_DotProd: Neoverse N1/V1/V2, Cortex-A76,
  Cortex-A78AE): signed x signed bytes.  There is no mixed-sign form without i8mm,
  so uint8 data (what a quantized layer after a ReLU holds) is shifted by -128 into
  int8 in the kernel's padding copy (``u ^ 0x80``) and ``-128 * sum(w)`` subtracted
  from the accumulator -- the same exact correction as x86's +128 shift of int8 data
  into ``vpdpbusd``'s unsigned operand, in the other direction.
* ``usdot vd.4s, vn.16b, vm.16b`` (FEAT_I8MM: Neoverse V1/V2): unsigned x signed
  bytes, ``vpdpbusd``'s semantics; uint8 data runs on it with no shift at all.  An
  i8mm CPU has dotprod too, so int8 data there keeps ``sdot`` (no shift either):
  the family is chosen per layer from the data's dtype (:func:`layer_family`).

The four products of each lane are summed exactly into int32 (no intermediate
saturation, unlike AVX2's ``vpmaddubsw``), so the result is the exact integer
product for any weights and codes.

Only the target-level choice (:data:`DOTPROD`, :data:`I8MM`) and the per-layer one
live here; the registry of steps and the tensor intrinsics that call :func:`step`
are :mod:`.int8_steps`'.  ``smmla`` (i8mm's 2x8 by 8x2 matrix step) needs two data
rows per step, which this one-pixel micro-kernel does not provide; it is not used.
"""

from __future__ import annotations

#: the target-level family of an AArch64 CPU with dotprod (:func:`.microarch.int8_dot`)
DOTPROD = "neon-dotprod"
#: the target-level family of an AArch64 CPU with i8mm (and so dotprod)
I8MM = "neon-i8mm"

#: LLVM's intrinsic for each family's step (overloaded on v4i32 / v16i8)
_INTRINSICS = {DOTPROD: "llvm.aarch64.neon.sdot", I8MM: "llvm.aarch64.neon.usdot"}


def is_arm(family: str) -> bool:
    """Whether *family* is one of this module's."""
    return family in _INTRINSICS


def layer_family(int8_dot: str, data_dtype: str) -> str:
    """The step of one layer: on an i8mm CPU ``usdot`` for uint8 data and ``sdot`` for
    int8 data (neither then shifts its data); elsewhere the target's *int8_dot*."""
    if int8_dot == I8MM and data_dtype == "int8":
        return DOTPROD
    return int8_dot


def step(family: str, acc, a_word, b_vec, lanes: int):
    """``acc + A[4] . B[lanes, 4]`` on one register: *a_word* the step's 4 data bytes as
    an int32 (broadcast to every lane), *b_vec* the ``lanes x 4`` weight bytes."""
    from tvm.script import tirx as T

    if family not in _INTRINSICS:
        raise ValueError(f"no AArch64 int8 step {family!r}")
    operand = "int8" if family == DOTPROD else "uint8"
    a_bytes = T.reinterpret(T.broadcast(a_word, lanes), dtype=f"{operand}x{4 * lanes}")
    # operand order: sdot(acc, n, m) = usdot(acc, unsigned n, signed m)
    return T.call_llvm_pure_intrin(T.llvm_lookup_intrinsic_id(_INTRINSICS[family]),
                                   acc, a_bytes, b_vec, dtype=f"int32x{lanes}")
