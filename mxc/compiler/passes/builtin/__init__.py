"""The built-in passes, one module each (the registry imports each public module
here on its first lookup, :func:`mxc.registry.builtin_modules`).

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
