"""DeepNumpy creation ops (``mxc/compiler/ops/numpy/init.py``): compile-time constants.

Their values depend on attributes (and, for ``full_like``, an input's shape)
only, so the lowering embeds the reference kernel's result.
"""

from __future__ import annotations

from ...converter import register_converter
from .._common import reference_constant
from ._twins import register_twins

register_converter("_npi_full", "_npi_full_like", "_npi_identity", "_npi_arange", "_npi_eye",
                   "_npi_linspace", "_npi_logspace", "_npi_indices", "_npi_hanning",
                   "_npi_hamming", "_npi_blackman", module=__name__)(reference_constant)


register_twins(__name__)
