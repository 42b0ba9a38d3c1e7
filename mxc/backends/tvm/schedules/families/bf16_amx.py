"""bfloat16 convolutions and dense layers on AMX tiles (``tdpbf16ps``), on AMX-BF16 CPUs.

One ``tdpbf16ps`` adds a ``rows x 32`` bfloat16 tile times a ``32 x 16`` one into
``rows x 16`` float32 accumulators: 16x the products of one ``vdpbf16ps``.  A
stride-1 convolution in :mod:`.bf16`'s layout already has its operands in tile
shape, so nothing is copied for the tiles:

* **A** -- ``rows`` consecutive output pixels of a row, 32 input channels: in the
  rounded, padded input (``pad_temp``, channels-last) at tap ``(ry, rx)`` these
  are ``rows`` rows of 64 bytes, one pixel's channels apart (the tile's stride;
  at stride 2, in one column phase of the input);
* **B** -- the weights packed ``[K/16, KH, KW, C/2, 16, 2]``: 16 channel pairs of
  one 16-channel block are 16 contiguous rows of 64 bytes, the pair-interleaved
  layout the instruction reads;
* **C** -- the kernel's float32 accumulator (the ``local`` buffer the fused
  epilogue reads), ``rows x 16`` at a stride of the channels a thread keeps.

So the kernel is :func:`.bf16.conv2d_nhwc_bf16` with input channels padded to a
tile row (:data:`CHANNELS`) and the block named :data:`CONV_BLOCK`, scheduled by
:func:`..base.amx.rule_tiles`; a stride-2 layer's rounding copy splits its input by
column phase (:func:`..base.amx.phase_split`).  Layers the tiles do not fit
(:func:`..base.amx.conv_fits`: other strides, under 32 input channels, rows under
:data:`MIN_ROWS` pixels -- a batch-1 dense layer) keep the AVX512-BF16 kernels, and
Winograd is not used where the tiles are.  No machine this was written on has AMX: the results are checked
through :mod:`..base.amx`'s emulation and the instructions in the assembly; the speed
is for an AMX machine's benchmark to show.
"""

from __future__ import annotations

from tvm import tirx

from ..base import amx
from ..base.kernel_family import Choice

#: the kernel family (:mod:`..base.kernel_family`) legalization stamps on the tile kernel,
#: which :func:`rule_amx` schedules
FAMILY = "bf16_amx"
#: name of the accumulating block (a label)
CONV_BLOCK = "conv2d_nhwc_bf16_amx"
KIND = "tdpbf16ps"
#: input channels of one tile row; the packing pads to them
CHANNELS = amx.tile_channels(KIND)
#: fewest pixels of a tile: below, most of each tile instruction would be idle rows
MIN_ROWS = 4


def tile_block(xs, ws, ys, strides) -> Choice | None:
    """This family's kernel (:data:`FAMILY`, :data:`CONV_BLOCK`), its tile step registered,
    where the tile kernel takes a layer of these shapes (an AMX-BF16 target assumed: the
    kernel-choice table, :mod:`..kernel_choice`, hands this to the bf16 family's
    legalization only there); None where the vector kernels keep it.  The AMX family
    decides the fit, the bf16 family builds the kernel."""
    if not amx.conv_fits(xs, ws, ys, strides, KIND, MIN_ROWS):
        return None
    amx.register(KIND, ys[2], ws[2], ys[3])
    return Choice(FAMILY, CONV_BLOCK)


def rule_amx(func: tirx.PrimFunc, info):
    """The tile schedule of the kernel stamped :data:`FAMILY`; None for other kernels.
    (The CPU is not asked again: legalization stamps the family only where it has the
    tiles.)"""
    return amx.rule_tiles(func, FAMILY, KIND)
