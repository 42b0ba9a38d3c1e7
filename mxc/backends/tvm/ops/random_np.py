"""DeepNumpy samplers (``mxc/compiler/ops/random_np.py``): host only, drawing from
mxc's seeded streams (see ``random.py`` here)."""

from __future__ import annotations

from ....compiler.ops.random_np import NP_DISTRIBUTIONS
from ..converter import register_host_only

register_host_only(
    *(f"_npi_{dist}" for dist in NP_DISTRIBUTIONS),
    "_npi_bernoulli", "_npi_choice", "_npi_multinomial",
    reason="random sampler: draws from mxc's seeded host streams (mxc.compiler.rng)")
