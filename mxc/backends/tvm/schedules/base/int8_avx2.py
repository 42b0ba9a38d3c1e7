"""INT8 dot-product steps for AVX2 CPUs without VNNI (Haswell..Skylake client, Zen 1-3).

The kernels of :mod:`..families.int8` are shaped for ``vpdpbusd`` (``C[L] += A[4] . B[L, 4]``,
uint8 x int8 into int32); a CPU without VNNI has no such instruction, and the
plain int32 path (widen every byte, ``vpmulld``, add) does 8 multiply-adds per
instruction.  Two AVX2 sequences compute a step of the same kernel and schedule
on a ymm register (``L = 8``); they differ in the tensor intrinsic and, for the
exact one, the operands' width (:data:`.int8_steps.DOT_STEPS`, the kernel reads it):

* ``"avx2"``: ``vpmaddubsw`` multiplies 32 unsigned by 32 signed bytes and adds
  adjacent products into 16 int16 -- **saturating** -- then ``vpmaddwd`` by ones
  adds adjacent int16 into 8 int32 and ``vpaddd`` accumulates (oneDNN's AVX2
  sequence).  A pair ``a0*w0 + a1*w1`` saturates once ``255 * (|w0| + |w1|) >
  32767``; where every pair of weights sharing an int16 lane has ``|w0| + |w1| <=
  128`` (:data:`PAIR_LIMIT`) no uint8 data can reach that, and the step is exact.
* ``"avx2-exact"``: the step of 2 input channels: the weights widened to int16
  when packed (``[K/L, KH, KW, C/2, L, 2]``, once: they are constants) and the
  data widened to int16 once, in the padding copy (``pad_temp``: uint8 codes
  zero-extended, int8 ones sign-extended -- no +128 shift); one ``vpbroadcastd``
  of the data pair, one ``vpmaddwd`` (int16 x int16, pairs summed into int32: no
  saturation is possible for these ranges) and one ``vpaddd`` -- exact for any
  weights, two multiplies per 4 channels as the ``"avx2"`` step, one more add.

The weights are constants, so the choice is made per layer at compile time from
the packed weights (:func:`layer_family`) and carried on the kernel as data
(:data:`.int8_steps.STEP_ATTR`); the schedule only reads it.

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


def step(family: str, a_word, b_vec, lanes: int):
    """The int32x*lanes* sum ``A[G] . B[L, G]`` of one step of AVX2 *family*.

    *a_word*: the step's data as one int32 (``"avx2"``: 4 uint8 codes, byte k = ``A[k]``;
    ``"avx2-exact"``: an int16 pair); *b_vec*: the ``L x G`` weights (int8 bytes;
    int16 pairs, widened when packed)."""
    from tvm.script import tirx as T

    i16, i32 = f"int16x{2 * lanes}", f"int32x{lanes}"
    madd = T.llvm_lookup_intrinsic_id(_PMADDWD)
    if family == AVX2:
        a_bytes = T.reinterpret(T.broadcast(a_word, lanes), dtype=f"uint8x{4 * lanes}")
        pairs = T.call_llvm_pure_intrin(T.llvm_lookup_intrinsic_id(_PMADDUBSW),
                                        a_bytes, b_vec, dtype=i16)
        return T.call_llvm_pure_intrin(madd, pairs, T.broadcast(T.int16(1), 2 * lanes),
                                       dtype=i32)
    if family != AVX2_EXACT:
        raise ValueError(f"no AVX2 int8 step {family!r}")
    # int16 x int16, pairs summed into int32: |sum| <= 2 * 255 * 128, no saturation
    a_pairs = T.reinterpret(T.broadcast(a_word, lanes), dtype=i16)
    return T.call_llvm_pure_intrin(madd, b_vec, a_pairs, dtype=i32)


def is_avx2(family: str) -> bool:
    """Whether *family* is one of this module's (else a ``vpdpbusd`` one)."""
    return family in (AVX2, AVX2_EXACT)
