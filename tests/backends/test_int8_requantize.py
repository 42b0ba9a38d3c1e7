"""The uncalibrated ``_contrib_requantize`` lowering (``mxc/backends/tvm/ops/quantization.py``).

Without a calibrated range MXNet requantizes by the tensor's own ``max |x|``.
mxc reduces it from the int32 accumulator as it lies (channels-last), per
channel first: flattening it first pinned the layout pass back to NCHW and
made an int64 transposed copy of every such activation, which cost
int8_mobilenet0.5_nocalib more than its convolutions; likewise quantize's
min/max of the input reduce along a vector axis first.  Oracle: MXNet's
outputs of the corpus model (``io.npz``), and the invariants that no kernel
writes an int64 tensor the size of an activation and none reduces a whole
activation to one number (TVM's schedule for that is a scalar loop).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("tvm")

import mxc  # noqa: E402
from conftest import load_corpus_model  # noqa: E402
from oracle import assert_close  # noqa: E402

#: compiled for the CPU class under test (MXC_TEST_TARGET; tools/isa_matrix.py)
pytestmark = pytest.mark.isa


def _buffers(script: str, dtype: str = r"\w+") -> list[int]:
    """Element counts of the *dtype* buffers in a kernel's signature (its TVMScript
    text), in parameter order (the last is the kernel's output)."""
    head = script[script.index("def "):script.index("T.func_attr")]
    pattern = r'T\.Buffer\(\(([^"]*?)\),? "' + dtype + '"\\)'
    return [int(np.prod([int(d) for d in re.findall(r"T\.int64\((\d+)\)", dims)] or [1]))
            for dims in re.findall(pattern, head)]


@pytest.mark.corpus
def test_uncalibrated_requantize_reduces_the_activation_in_place():
    from mxc.backends.tvm.dump_code import capture_tir
    name = "int8_mobilenet0.5_nocalib"
    root, meta, sym, params = load_corpus_model("wave2/models", name)
    io = np.load(root / "io.npz")
    feeds = {k[4:]: io[k] for k in io.files if k.startswith("in__")}
    with capture_tir() as capture:
        model = mxc.compile(sym, params, shapes={k: v.shape for k, v in feeds.items()})
    kernels = capture.kernels
    assert kernels, "no kernels captured"
    # the widest channel count of the model is 512: a per-channel (or whole-tensor)
    # maximum may be int64, an int64 copy of a 24x24x64 activation (36,864) may not
    wide = {n: c for n, text in kernels.items() for c in _buffers(text, "int64") if c > 1024}
    assert not wide, wide
    # the ranges (quantize's min/max of the input, requantize's max |x|) reduce to a
    # vector first: a kernel reducing a whole activation to one number is a scalar loop
    scalar = {n: sizes for n, text in kernels.items() for sizes in [_buffers(text)]
              if len(sizes) > 1 and sizes[-1] == 1 and max(sizes[:-1]) > 1024}
    assert not scalar, scalar
    for i, got in enumerate(model.session().run(feeds)):
        assert_close(np.asarray(got), io[f"out__{i}"], meta["rtol"], meta["atol"],
                     f"{name} output {i}")
