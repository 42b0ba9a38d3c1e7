"""The built-in passes, one module each (imported on first registry lookup).

=================  ==============================================================
``dce``            remove nodes no output depends on (and their parameters)
``remove-dropout`` drop inference-mode Dropout nodes
``simplify``       remove identity-like ops (copies, no-op reshapes/casts, x*1 ...)
``fold-constants`` compute parameter-only subexpressions once, as new parameters
``fold-batchnorm`` fold inference BatchNorm into the preceding Conv/FC/Deconv
``inline-fused``   replace float ``_sg_mkldnn_*`` nodes by their nested pattern
``cse``            merge common subexpressions (same op, attributes and inputs)
``partition``      partition for a subgraph backend (``Symbol.optimize_for``)
``print-ir``       print the graph in the textual IR (to stderr)
=================  ==============================================================
"""

from . import cse, dce, fold_batchnorm, fold_constants, inline_fused, partition, print_ir, \
    remove_dropout, simplify  # noqa: F401
