"""Legacy samplers (``mxc/compiler/ops/random.py``): host only.

Every draw comes from :mod:`mxc.compiler.rng` so that a compiled model and the
reference backend produce the same samples for the same seed; a TVM kernel
would need its own generator and break that.
"""

from __future__ import annotations

from ..converter import register_host_only
from ....compiler.ops.random import DISTRIBUTIONS

register_host_only(
    *(f"_{kind}_{dist}" for dist in DISTRIBUTIONS for kind in ("random", "sample")),
    *(f"_random_{dist}_like" for dist in DISTRIBUTIONS),
    "_random_randint", "_sample_multinomial", "_sample_unique_zipfian", "_shuffle",
    reason="random sampler: draws from mxc's seeded host streams (mxc.compiler.rng), "
           "identical to the reference backend's")
