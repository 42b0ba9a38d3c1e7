"""Densities of the samplers' distributions (``mxc/compiler/ops/random_pdf.py``): host.

They need ``lgamma``, which TVM's intrinsics lack, and appear only in
probabilistic post-processing, where a kernel would not pay.
"""

from __future__ import annotations

from ....compiler.ops.random_pdf import PDFS
from ..converter import register_host_only

register_host_only(*(f"_random_pdf_{dist}" for dist in PDFS), "_random_pdf_dirichlet",
                   reason="densities need lgamma (no TVM intrinsic); host")
