"""How much precision a model's Winograd convolutions may cost: F(4, 3) within a budget.

Measured (``bench/winograd_precision.py``: one 3x3 convolution of C channels,
relu'd normal activations, He-scaled weights, float32 kernels against a float64
oracle), the relative rms rounding error of a layer grows like ``sqrt(C)`` for
every variant, with these factors per ``sqrt(C)``:

* the direct convolution: 3.8e-8 (a 9C-term dot product per output);
* F(2, 3): at most 3.3e-8 -- no worse than direct: its product sums only C
  terms per tile position, and its transforms (points 0, +-1) add few roundings;
* F(4, 3): up to 1.45e-7, 3-4x direct: the points +-1/2, +-2 of its transforms
  amplify the rounding of the inputs and of the transformed weights.

A layer's relative error passes on to the layers after it (normalised networks
keep the scale), so a network's error grows with the sum of its layers' (a
linear sum: the conservative, correlated case).  F(2, 3) never makes a model
less precise than direct convolutions would; F(4, 3) can, on deep networks with
many 3x3 layers (resnest50: outputs up to 823 off by 0.134 against 0.056 with
``--winograd off``).  The rule: convolutions are visited in program order and a
convolution the speed rule gives F(4, 3) keeps it only while the summed
estimate of every Winograd convolution so far, itself included, stays within
:data:`ERROR_BUDGET`; the others take F(2, 3).  Direct fallback is never needed
for precision.  Activation magnitudes do not enter: the error is relative, and
floating point is scale-invariant.
"""

from __future__ import annotations

import math

#: relative rms error of one 3x3 convolution per sqrt(input channels), by Winograd tile m
#: (0: the direct convolution), the largest measured over 16..256 channels
ERROR_PER_SQRT_CHANNEL = {0: 3.8e-8, 2: 3.3e-8, 4: 1.45e-7}

#: the summed relative rms error estimate a model's Winograd convolutions may reach with
#: F(4, 3): 1e-5, so that the largest output error (observed <= ~10x the rms) stays an
#: order of magnitude inside the 1e-3 relative tolerance of float32 accumulating ops
#: (and within 1e-4 of the output range, where the resnest50 check failed at 1.6e-4)
ERROR_BUDGET = 1e-5


def layer_error(tile: int, channels: int) -> float:
    """Estimated relative rms error of a 3x3 convolution over *channels* with F(*tile*, 3)
    (``tile`` 0: direct)."""
    return ERROR_PER_SQRT_CHANNEL[tile] * math.sqrt(channels)


def precise_tile(speed_tile: int, channels: int, spent: float) -> int:
    """*speed_tile* (the speed rule's m), or 2 where F(4, 3) would take the model's
    summed estimate (*spent* so far) past :data:`ERROR_BUDGET`."""
    if speed_tile == 4 and spent + layer_error(4, channels) > ERROR_BUDGET:
        return 2
    return speed_tile
