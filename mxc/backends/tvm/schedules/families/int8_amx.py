"""INT8 convolutions and dense layers on AMX tiles (``tdpbusd``), on AMX-INT8 CPUs.

``tdpbusd`` adds a ``rows x 64`` uint8 tile times a ``64 x 16`` int8 one into
``rows x 16`` int32 accumulators: 16x one ``vpdpbusd``.  The kernel is
:func:`.int8.conv2d_nhwc_int8` unchanged (built by the int8 family's
:func:`.int8.legalize_conv2d` on this module's :func:`tile_block`) -- the +128 shift of
int8 data and its compensation, the exact int32 accumulator, the fused requantize -- with input
channels padded to a tile row (:data:`CHANNELS`) and the block named
:data:`CONV_BLOCK`; the weights' VNNI packing ``[K/16, KH, KW, C/4, 16, 4]`` is
already the B tile's layout (16 rows of 16 lanes x 4 bytes), and ``rows``
consecutive output pixels of the padded channels-last input are the A tile at a
stride of one pixel.  :func:`..base.amx.rule_tiles` schedules it, as the bfloat16 tiles
(:mod:`.bf16_amx`).  Layers the tiles do not fit (:func:`..base.amx.conv_fits`) keep the
VNNI kernels.  Not timed (no AMX machine at hand): checked through :mod:`..base.amx`'s
emulation and in the assembly.
"""

from __future__ import annotations

from tvm import tirx

from ..base import amx
from ..base.kernel_family import Choice

#: the kernel family (:mod:`..base.kernel_family`) legalization stamps on the tile kernel,
#: which :func:`rule_amx` schedules
FAMILY = "int8_amx"
#: name of the accumulating block (a label)
CONV_BLOCK = "conv2d_nhwc_int8_amx"
KIND = "tdpbusd"
#: input channels of one tile row; the packing pads to them
CHANNELS = amx.tile_channels(KIND)
#: fewest pixels of a tile (as :data:`.bf16_amx.MIN_ROWS`)
MIN_ROWS = 4


def fits(xs, ws, ys, strides) -> bool:
    """Whether the tile kernel takes an NHWC conv2d of these shapes and *strides*."""
    return amx.conv_fits(xs, ws, ys, strides, KIND, MIN_ROWS)


def tile_block(xs, ws, ys, strides) -> Choice | None:
    """This family's kernel (:data:`FAMILY`, :data:`CONV_BLOCK`), its tile step registered,
    where the tile kernel takes the layer (:func:`fits`); None where the VNNI kernel keeps
    it.  The int8 family's legalization calls it when the kernel-choice table
    (:mod:`..kernel_choice`) hands it over on an AMX-INT8 target: the AMX family decides,
    the int8 family builds the kernel, neither imports the other."""
    if not fits(xs, ws, ys, strides):
        return None
    amx.register(KIND, ys[2], ws[2], ys[3])
    return Choice(FAMILY, CONV_BLOCK)


def rule_amx(func: tirx.PrimFunc, info):
    """The tile schedule of the kernel stamped :data:`FAMILY`; None for other kernels.
    (The CPU is not asked again: legalization stamps the family only where it has the
    tiles.)"""
    return amx.rule_tiles(func, FAMILY, KIND)
