"""TVM converters, one module per op family (file names mirror ``mxc/compiler/ops/``).

:func:`mxc.backends.tvm.converter.registered_converters` imports every
module here (those not starting with ``_``) on first use.
"""
