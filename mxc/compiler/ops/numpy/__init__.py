"""DeepNumpy operators (``_np_*``, ``_npi_*``, ``_npx_*``): what ``mx.np``/``mx.npx`` emit.

Graphs written after ``npx.set_np()`` carry ``is_np_shape`` at graph level
and follow NumPy's conventions as MXNet 1.9.1 implements them: 0-d arrays are
real scalars (shape ``()``), extents of 0 are empty arrays (not "unknown"),
full reductions return 0-d arrays and binary ops promote mixed dtypes
(``int32 + float32 -> float32``, ``int / int -> float32``, comparisons give
``bool``).  Where an op is the NumPy face of a legacy op (``_npi_exp`` is
``exp``, ``_npi_add_scalar`` is ``_plus_scalar``) its definition subclasses
the legacy one and names it in :attr:`twin`, so the kernels are shared and
the TVM backend can reuse the twin's lowering.

The op registry imports every public module here, as it does the family
modules of :mod:`mxc.compiler.ops` (:func:`mxc.registry.builtin_modules`).
"""
