"""INT8 dot-product steps for AVX2 CPUs without VNNI (Haswell..Skylake client, Zen 1-3).

The kernels of :mod:`.int8` are shaped for ``vpdpbusd`` (``C[L] += A[4] . B[L, 4]``,
uint8 x int8 into int32); a CPU without VNNI has no such instruction, and the
plain int32 path (widen every byte, ``vpmulld``, add) does 8 multiply-adds per
instruction.  Two AVX2 sequences compute the same step on a ymm register
(``L = 8``), with the same packed weights and the same data layout, so only the
tensor intrinsic differs:

* ``"avx2"``: ``vpmaddubsw`` multiplies 32 unsigned by 32 signed bytes and adds
  adjacent products into 16 int16 -- **saturating** -- then ``vpmaddwd`` by ones
  adds adjacent int16 into 8 int32 and ``vpaddd`` accumulates (oneDNN's AVX2
  sequence).  A pair ``a0*w0 + a1*w1`` saturates once ``255 * (|w0| + |w1|) >
  32767``; where every pair of weights sharing an int16 lane has ``|w0| + |w1| <=
  128`` (:data:`PAIR_LIMIT`) no uint8 data can reach that, and the step is exact.
* ``"avx2-exact"``: the weights' even and odd bytes sign-extended to int16 in
  the register (two shifts), the data's even and odd bytes zero-extended, and
  two ``vpmaddwd`` (int16 x int16, pairs summed into int32: no saturation is
  possible for these ranges) -- exact for any weights, one more multiply per step.

The weights are constants, so the choice is made per layer at compile time from
the packed weights (:func:`layer_family`) and carried on the kernel as data
(:data:`.int8.FAMILY_ATTR`); the schedule only reads it.

oneDNN (MXNet's int8 backend) takes neither care: on a CPU without VNNI its
x8s8s32x kernels halve the weights of int8 data (``wei_adj_scale = 0.5``, a
rounding) and let uint8 data saturate ``vpmaddubsw`` -- so MXNet's int8 results
on such a CPU may differ from the exact product, which mxc computes everywhere.
"""

from __future__ import annotations

import numpy as np

#: largest ``|w0| + |w1|`` of a weight pair sharing a ``vpmaddubsw`` lane for which no
#: uint8 data saturates int16: ``255 * 128 = 32640 <= 32767`` (129 would give 32895)
PAIR_LIMIT = 128
#: the target-level family of AVX2 without VNNI (:func:`.microarch.int8_dot`)
AVX2 = "avx2"
#: the per-layer family of weights that could saturate ``vpmaddubsw``
AVX2_EXACT = "avx2-exact"

#: LLVM's AVX2 intrinsics of the two sequences
_PMADDUBSW = "llvm.x86.avx2.pmadd.ub.sw"
_PMADDWD = "llvm.x86.avx2.pmadd.wd"


def saturation_free(packed: np.ndarray) -> bool:
    """Whether ``vpmaddubsw`` is exact on weights packed ``[..., L, 4]`` for any uint8 data.

    The instruction pairs bytes 0-1 and 2-3 of each lane's 4 (its int16 lanes); the
    check is on the packed array itself, so it covers what the kernel really
    pairs (channel padding, a thin layer's folded taps)."""
    w = np.abs(packed.astype(np.int16))
    return bool(np.all(w[..., 0::2] + w[..., 1::2] <= PAIR_LIMIT))


def layer_family(int8_dot: str, packed: np.ndarray) -> str:
    """The dot-product family of one layer: the target's *int8_dot*, except that AVX2
    weights that could saturate ``vpmaddubsw`` take the exact widened sequence."""
    if int8_dot == AVX2 and not saturation_free(packed):
        return AVX2_EXACT
    return int8_dot


def step(family: str, a_word, b_bytes, lanes: int):
    """The int32x*lanes* sum ``A[4] . B[L, 4]`` of one step of AVX2 *family*.

    *a_word*: the 4 data bytes as one int32 (byte k = ``A[k]``); *b_bytes*: the
    ``L x 4`` weight bytes as an int8 vector."""
    from tvm.script import tirx as T

    i16, i32 = f"int16x{2 * lanes}", f"int32x{lanes}"
    if family == AVX2:
        a_bytes = T.reinterpret(T.broadcast(a_word, lanes), dtype=f"uint8x{4 * lanes}")
        pairs = T.call_llvm_pure_intrin(T.llvm_lookup_intrinsic_id(_PMADDUBSW),
                                        a_bytes, b_bytes, dtype=i16)
        return T.call_llvm_pure_intrin(T.llvm_lookup_intrinsic_id(_PMADDWD), pairs,
                                       T.broadcast(T.int16(1), 2 * lanes), dtype=i32)
    if family != AVX2_EXACT:
        raise ValueError(f"no AVX2 int8 step {family!r}")
    # data: bytes (0, 2) and (1, 3) as int16 pairs, zero-extended (uint8 codes)
    low = T.int32(0x00FF00FF)
    a_even = T.reinterpret(T.broadcast(T.bitwise_and(a_word, low), lanes), dtype=i16)
    a_odd = T.reinterpret(T.broadcast(T.bitwise_and(T.shift_right(a_word, 8), low), lanes),
                          dtype=i16)
    # weights: each int16 lane holds bytes (2j, 2j+1); arithmetic shifts sign-extend them
    words = T.reinterpret(b_bytes, dtype=i16)
    eight = T.broadcast(T.int16(8), 2 * lanes)
    w_odd = T.shift_right(words, eight)
    w_even = T.shift_right(T.shift_left(words, eight), eight)
    madd = T.llvm_lookup_intrinsic_id(_PMADDWD)
    return (T.call_llvm_pure_intrin(madd, w_even, a_even, dtype=i32)
            + T.call_llvm_pure_intrin(madd, w_odd, a_odd, dtype=i32))


def is_avx2(family: str) -> bool:
    """Whether *family* is one of this module's (else a ``vpdpbusd`` one)."""
    return family in (AVX2, AVX2_EXACT)

