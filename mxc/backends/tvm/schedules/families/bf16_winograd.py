"""bfloat16 Winograd convolutions: the batched product of :mod:`.winograd` on ``vdpbf16ps``.

Under ``--precision bf16`` a 3x3 stride-1 convolution that the float32
Winograd kernels take would, computed directly in bfloat16, lose to them:
Winograd's F(2, 3) / F(4, 3) do 2.25x / 4x fewer multiply-adds, more than the
bfloat16 instruction's 2x (resnet18_v1, one thread on Zen 4, batch 8: float32
159 ms, bfloat16 with direct 3x3 layers 147 ms).  Here both gains combine
(112 ms).  The three kernels are the float32 ones with the product in
bfloat16:

* the input transform ``V = B^T d B`` computes in float32 and rounds its
  result to bfloat16 bits (no separate rounding pass over the activations);
* the transformed weights ``U = G g G^T`` are computed in float64 at compile
  time, rounded once and packed as the direct kernels' weights,
  ``[(m+2)^2, K/16, C/2, 16, 2]`` (so the artifact holds them: F(4, 3)
  stores 2x the float32 weights' bytes, F(2, 3) 0.9x);
* the product ``M[e, p, k] = sum_c V[e, p, c] U[e, c, k]`` is the direct
  kernels' dot-product block laid out as a 1x1 convolution ``[e, 1, p, k]`` and
  stamped with their family (:data:`..base.bf16_step.FAMILY`), so
  :func:`.bf16.rule_bf16` register-blocks and tensorizes it; it accumulates in float32;
* the output transform ``Y = A^T M A`` and the fused epilogue stay float32.

Precision: rounding ``V`` and ``U`` each errs by 2^-9 relative, as the
direct kernels' operands do; the output transform's sums of up to 36 terms
with coefficients up to 8 (F(4, 3)) grow that, which is why the tile is
F(2, 3) unless F(4, 3) measured within the bfloat16 tolerance class
(:data:`F4`).
"""

from __future__ import annotations

import logging

import numpy as np
from tvm import relax, te

from ..base import winograd_transforms as winograd
from ..base.bf16_step import (CONV_BLOCK, FAMILY, GROUP, LANES, bits_to_float, round_bits,
                              to_bf16_bits)
from ..base.kernel_family import stamp

log = logging.getLogger(__name__)

#: F(2, 3) saves 20 of a tile's 36 multiply-adds per channel pair but moves its
#: transformed input (16 bfloat16 values per input channel, written and read) and the
#: product (16 float32 per output channel, written and read) through memory: where the
#: product's bytes do not fit in cache (:data:`CACHED_BYTES`), Winograd needs at least
#: this many multiply-adds saved per byte moved (:func:`saved_per_byte`).  squeezenet1.1
#: batch 8, one thread on Zen 4, per expand layer pair (16 channels in, 64 out, 55x55:
#: 2.2 saved per byte; 32 in, 128 out, 27x27: 4.4): 9.5 / 5.0 ms in bfloat16 Winograd,
#: 5.9 / 4.3 ms direct; resnet18 at batch 8 (64 in, 64 out, 56x56: 6.7) 6.7 ms in
#: Winograd, 8.4 direct
MIN_SAVED_PER_BYTE = 5.0
#: the product's bytes up to which Winograd stays in cache and wins at any ratio:
#: squeezenet1.1 at batch 1 (3.2 and 1.6 MB) 0.49 / 0.33 ms in Winograd, 0.57 / 0.51
#: direct
CACHED_BYTES = 4 << 20


def saved_per_byte(c: int, k: int) -> float:
    """Multiply-adds F(2, 3) saves per byte its transforms move, *c* -> *k* channels."""
    return 20.0 * c * k / (2 * 16 * 2 * c + 2 * 16 * 4 * k)

#: whether F(4, 3) is used where the float32 kernels would use it (else F(2, 3) always).
#: Off: rounding its transformed operands to bfloat16 put one 64-channel layer's error
#: at 2.3e-2 of the output range, over the tolerance class (F(2, 3): 4.2e-3, the direct
#: kernel 2.2e-3); F(2, 3) in bfloat16 still beats float32 F(4, 3) (resnet18_v1 above)
F4 = False


def applies(xs, ws, ys, strides, dilation, groups: int, ctx) -> bool:
    """Whether NHWC conv2d of input/weight/output shapes *xs*/*ws*/*ys* takes the bfloat16
    Winograd kernels under the build's *ctx*: the float32 Winograd conditions
    (:func:`..base.winograd_transforms.eligible`, which the ``--winograd`` mode sizes),
    output channels in whole 16-lane blocks, and a product that stays in cache
    (:data:`CACHED_BYTES`) or saves enough work for the bytes it moves
    (:data:`MIN_SAVED_PER_BYTE`).

    Even the fewest tiles "auto" transforms gain: resnet18's 512-channel 7x7 layer at
    batch 1 (16 F(2, 3) tiles, whose product streams the transformed weights) ran
    0.80 ms against 1.00 ms direct in bfloat16 (one thread, Zen 4), as the weights
    it streams are half float32 Winograd's bytes (1.54 ms)."""
    if ctx.winograd == "off" or ctx.cpu is None or not winograd.eligible(
            xs, ws, strides, dilation, groups, ctx.cpu.lanes, ctx.winograd_min_size):
        return False
    n, oh, ow, k = ys
    if k % LANES:
        return False
    product_bytes = 16 * winograd.tile_count(n, oh, ow, 2) * k * 4
    return product_bytes <= CACHED_BYTES or saved_per_byte(ws[2], k) >= MIN_SAVED_PER_BYTE


def tile(n: int, oh: int, ow: int) -> int:
    """m of F(m, 3): the float32 kernels' speed choice
    (:func:`..base.winograd_transforms.tile_size`)."""
    m = winograd.tile_size(n, oh, ow)
    return m if F4 else 2


def pack_weights(w_hwio: np.ndarray, m: int) -> np.ndarray:
    """``U`` of 3x3 HWIO weights as bfloat16 bits ``[(m+2)^2, K/16, C/2, 16, 2]``."""
    u = winograd.transform_weights(w_hwio.astype(np.float64), m, LANES)  # [E, K/16, C, 16]
    e, ko, c, lanes = u.shape
    u = u.reshape(e, ko, c // GROUP, GROUP, lanes).transpose(0, 1, 2, 4, 3)
    return np.ascontiguousarray(to_bf16_bits(u.astype(np.float32)))


def batch_matmul(v: te.Tensor, u: te.Tensor) -> te.Tensor:
    """``M[e, 0, p, k]`` (float32) of ``V[e, p, c]`` and packed ``U`` (bfloat16 bits)."""
    e_, tiles, c = (int(d) for d in v.shape)
    _, ko, c2, lanes, group = (int(d) for d in u.shape)
    assert c == c2 * group, (c, c2, group)
    # the direct kernels' axes [n, y, x, k, ry, rx, rc, ri], the unit ones unused
    ry = te.reduce_axis((0, 1), name="ry")
    rx = te.reduce_axis((0, 1), name="rx")
    rc = te.reduce_axis((0, c2), name="rc")
    ri = te.reduce_axis((0, group), name="ri")

    def product(e, _y, p, k):
        a = v[e, p, rc * group + ri]
        b = u[e, k // lanes, rc, k % lanes, ri]
        return te.sum(bits_to_float(a) * bits_to_float(b), axis=[ry, rx, rc, ri])

    return te.compute((e_, 1, tiles, ko * lanes), product, name=CONV_BLOCK,
                      attrs=stamp(FAMILY))


def emit(bb: relax.BlockBuilder, x, w_hwio: np.ndarray, padding, out_shape):
    """Emit the three kernels of a bfloat16 Winograd convolution into *bb*; the output."""
    n, oh, ow, _ = (int(d) for d in out_shape)
    m = tile(n, oh, ow)
    packed = pack_weights(w_hwio, m)
    u = relax.const(packed, "uint16")
    log.debug("conv2d -> bf16 Winograd F(%d, 3), weights %s", m, packed.shape)
    return winograd.emit_transforms(bb, x, u, m, padding, (n, oh, ow), batch_matmul,
                                    finish=round_bits, suffix="_bf16")


def emit_if_applies(bb: relax.BlockBuilder, x, w_hwio: np.ndarray, attrs, shapes, ctx):
    """:func:`emit` where the kernels take the layer (:func:`applies`; *attrs* the
    conv2d's, *shapes* its input/weight/output shapes), else None: what the kernel-choice
    table (:mod:`..kernel_choice`) hands the bf16 family's legalization as its Winograd choice."""
    if not applies(*shapes, [int(v) for v in attrs.strides], [int(v) for v in attrs.dilation],
                   int(attrs.groups), ctx):
        return None
    return emit(bb, x, w_hwio, attrs.padding, shapes[2])
