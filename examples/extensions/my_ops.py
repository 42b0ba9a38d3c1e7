"""An mxc extension library: the Python counterpart of MXNet's ``gemm_lib.cc``.

Load it with::

    import mxc
    mxc.library.load("examples/extensions/my_ops.py")

and the operators it registers are available like built-ins
(``mxc.sym.my_gemm(a, b)``).  It shows the three kinds of custom operator of
MXNet's ``lib_custom_op`` example:

* ``my_gemm`` -- a stateless operator with forward *and* backward
  (``C = A @ B``; ``dA = dC @ B.T``, ``dB = A.T @ dC``);
* ``state_gemm`` -- the same computation as a *stateful* operator: one state
  object per graph node counts how many times the node ran (its start value
  comes from the ``test_kw`` attribute, as in MXNet's example);
* ``my_accumulate`` -- an operator that *mutates an input*: ``total`` is an
  auxiliary state that grows by ``data`` on every run.
"""

from __future__ import annotations

import numpy as np

import mxc

#: The oldest mxc this library works with (mxc.library.version() encoding: 0.1.0 -> 100).
MIN_MXC_VERSION = 100


def _check_float32(name: str, in_types: list[str]) -> None:
    for i, t in enumerate(in_types):
        if t != "float32":
            raise TypeError(f"{name}: expected input {i} to have float32 type, got {t}")


def _gemm_shapes(in_shapes):
    if len(in_shapes) != 2 or any(len(s) != 2 for s in in_shapes):
        raise ValueError("expected two 2-D matrices")
    (n, k), (k2, m) = in_shapes
    if k != k2:
        raise ValueError(f"expected the first input's axis 1 ({k}) to equal the second "
                         f"input's axis 0 ({k2})")
    return list(in_shapes), [(n, m)]


@mxc.register_custom_op("my_gemm")
class MyGemm(mxc.CustomOp):
    """Matrix product ``C = A @ B`` of two float32 matrices."""

    def parse_attrs(self, attrs):
        return 2, 1

    def infer_type(self, attrs, in_types):
        _check_float32("my_gemm", in_types)
        return in_types, [in_types[0]]

    def infer_shape(self, attrs, in_shapes):
        return _gemm_shapes(in_shapes)

    def forward(self, attrs, inputs, outputs):
        a, b = inputs
        np.matmul(a, b, out=outputs[0])      # C++ style: fill the preallocated output

    def backward(self, attrs, out_grads, inputs, outputs):
        (dc,) = out_grads
        a, b = inputs
        return [dc @ b.T, a.T @ dc]


class GemmState:
    """The state of one ``state_gemm`` node: a run counter."""

    def __init__(self, count: int):
        self.count = count

    def forward(self, inputs, outputs):
        self.count += 1
        a, b = inputs
        return [a @ b]

    def backward(self, out_grads, inputs, outputs):
        return MyGemm().backward({}, out_grads, inputs, outputs)


@mxc.register_custom_op("state_gemm")
class StatefulGemm(mxc.CustomOp):
    """``my_gemm`` as a stateful operator; ``test_kw`` sets the counter's start value."""

    def parse_attrs(self, attrs):
        int(attrs.get("test_kw", "0"))        # reject a non-integer test_kw early
        return 2, 1

    def infer_shape(self, attrs, in_shapes):
        return _gemm_shapes(in_shapes)

    def create_op_state(self, attrs):
        return GemmState(int(attrs.get("test_kw", "0")))


@mxc.register_custom_op("my_accumulate")
class Accumulate(mxc.CustomOp):
    """``total += data``; returns the new total.  ``total`` (input 1) is an aux state."""

    def parse_attrs(self, attrs):
        return 2, 1

    def input_names(self, attrs, num_inputs):
        return ["data", "total"]

    def mutate_inputs(self, attrs):
        return [1]

    def infer_shape(self, attrs, in_shapes):
        data, total = in_shapes
        if data != total:
            raise ValueError(f"data {data} and total {total} must have the same shape")
        return in_shapes, [data]

    def forward(self, attrs, inputs, outputs):
        data, total = inputs
        total += data                         # writes the auxiliary state in place
        return [total.copy()]


def initialize(version: int) -> bool:
    """Accept mxc versions from ``MIN_MXC_VERSION`` on (False refuses the library)."""
    return version >= MIN_MXC_VERSION
