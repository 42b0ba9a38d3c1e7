"""bfloat16 Winograd convolutions (``mxc/backends/tvm/schedules/families/bf16_winograd.py``).

Oracle: F(2, 3) Winograd written out here in float64 from Lavin & Gray's
matrices, with the transformed input ``B^T d B`` and transformed weights
``G g G^T`` each rounded to bfloat16 by ``ml_dtypes`` (round to nearest even):
the kernels compute those exact products and accumulate them in float32, so
they must agree far more closely than a direct bfloat16 convolution (which
rounds the untransformed operands, about 2e-3 of the range away) does.  The
result must also stay within the bf16 tolerance class of the exact float64
convolution.  A Sapphire Rapids build is compiled (not run) for its
``vdpbf16ps``; CPUs without bfloat16 dot products stay refused
(``tests/backends/test_bf16.py``).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tvm")
ml_dtypes = pytest.importorskip("ml_dtypes")

import tvm  # noqa: E402
from tvm import relax  # noqa: E402

from mxc.backends.tvm.precision import BF16_TOLERANCE, range_error  # noqa: E402
from mxc.backends.tvm.schedules.families import bf16_winograd  # noqa: E402
from test_bf16 import CPX, ZEN4, _asm, _build, _conv_module, _ref_conv, _runnable  # noqa: E402

#: compiled for the CPU class under test (MXC_TEST_TARGET; tools/isa_matrix.py)
pytestmark = pytest.mark.isa

# Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", F(2x2, 3x3)
BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64)
G = np.array([[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]], np.float64)
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64)


def _bf16(a):
    return np.asarray(a, np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


def _winograd_bf16_ref(x, w):
    """``relu(conv3x3(x, w, pad 1) + 0.5)`` by F(2, 3) with bfloat16-rounded V and U."""
    n, c, h, wd = x.shape
    th, tw = -(-h // 2), -(-wd // 2)
    xp = np.zeros((n, c, 2 * th + 2, 2 * tw + 2))
    xp[:, :, 1:h + 1, 1:wd + 1] = x
    d = np.stack([np.stack([xp[:, :, 2 * ty:2 * ty + 4, 2 * tx:2 * tx + 4]
                            for tx in range(tw)], 2) for ty in range(th)], 2)
    v = _bf16(np.einsum("ij,nctsjk,lk->nctsil", BT, d, BT))          # [n, c, th, tw, 4, 4]
    u = _bf16(np.einsum("ij,kcjl,ml->kcim", G, w.astype(np.float64), G))   # [k, c, 4, 4]
    m = np.einsum("nctsil,kcil->nktsil", v, u)
    y = np.einsum("ai,nktsil,bl->nktasb", AT, m, AT).reshape(n, -1, 2 * th, 2 * tw)
    return np.maximum(y[:, :, :h, :wd] + 0.5, 0)


CASES = {   # c, k, side, batch
    "c64-k64-28x28": (64, 64, 28, 1),
    "c48-k48-15x15-b2": (48, 48, 15, 2),     # odd side: the last tiles cropped
    "c64-k32-7x7": (64, 32, 7, 1),           # the smallest side "auto" transforms
}


@pytest.mark.parametrize("case", list(CASES))
def test_bf16_winograd_matches_rounded_transforms(case):
    c, k, side, batch = CASES[case]
    rng = np.random.RandomState(4)
    x = rng.randn(batch, c, side, side).astype("float32")
    w = rng.randn(k, c, 3, 3).astype("float32")
    stats = {}
    exe, record = _build(_conv_module(x.shape, w, (1, 1), (1, 1)), _runnable(ZEN4), stats)
    assert record["kernels"] == 1
    assert {"bf16", "winograd"} <= set(stats.values()), stats
    y = relax.VirtualMachine(exe, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    want = _winograd_bf16_ref(x, w)
    np.testing.assert_allclose(y, want, rtol=0, atol=1e-4 * np.abs(want).max())
    exact = _ref_conv(x.astype(np.float64), w.astype(np.float64), 1, 1)
    assert range_error(y, exact) <= BF16_TOLERANCE


def test_partial_channel_blocks_and_small_sides_stay_direct():
    """40 output channels (not whole 16-lane blocks) and a 6x6 output (under the
    Winograd "auto" size) take the direct bfloat16 kernel."""
    rng = np.random.RandomState(5)
    for c, k, side in ((48, 40, 28), (64, 64, 6)):
        assert not bf16_winograd.applies(
            [1, side, side, c], [3, 3, c, k], [1, side, side, k], [1, 1], [1, 1], 1,
            _ctx(ZEN4))
        x = rng.randn(1, c, side, side).astype("float32")
        w = rng.randn(k, c, 3, 3).astype("float32")
        stats = {}
        exe, record = _build(_conv_module(x.shape, w, (1, 1), (1, 1)), _runnable(ZEN4), stats)
        assert record["kernels"] == 1 and "winograd" not in stats.values(), stats
        y = relax.VirtualMachine(exe, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
        assert range_error(y, _ref_conv(x.astype(np.float64), w.astype(np.float64), 1, 1)) \
            <= BF16_TOLERANCE


def test_winograd_off_keeps_the_direct_kernel():
    assert not bf16_winograd.applies([1, 28, 28, 64], [3, 3, 64, 64], [1, 28, 28, 64],
                                     [1, 1], [1, 1], 1, _ctx(ZEN4, winograd="off"))
    assert bf16_winograd.applies([1, 28, 28, 64], [3, 3, 64, 64], [1, 28, 28, 64],
                                 [1, 1], [1, 1], 1, _ctx(ZEN4))


def test_thin_layers_over_large_outputs_stay_direct():
    """16 -> 64 channels over 55x55 (squeezenet1.1's first expand layer): F(2, 3) saves
    20 * 16 * 64 multiply-adds per tile for 2 * 16 * (2 * 16 + 4 * 64) bytes moved
    (2.2 per byte); at batch 8 the product (16 * 8 * 28 * 28 * 64 float32, 25.7 MB)
    leaves the cache: direct.  At batch 1 (3.2 MB) it stays: Winograd.  64 -> 64
    channels (6.7 per byte) take Winograd at batch 8 too."""
    assert bf16_winograd.saved_per_byte(16, 64) == pytest.approx(20 * 16 * 64 / (64 * 16 + 128 * 64))
    ctx = _ctx(ZEN4)

    def takes(n, c, k, side):
        return bf16_winograd.applies([n, side, side, c], [3, 3, c, k], [n, side, side, k],
                                     [1, 1], [1, 1], 1, ctx)
    assert not takes(8, 16, 64, 55) and takes(1, 16, 64, 55)
    assert takes(8, 64, 64, 56)


@pytest.mark.parametrize("target", [ZEN4, CPX])   # SPR: tiles (test_amx.py), not Winograd
def test_bf16_winograd_assembly_has_the_dot_instruction(target):
    w = np.random.RandomState(6).randn(32, 48, 3, 3).astype("float32")
    stats = {}
    exe, record = _build(_conv_module((1, 48, 16, 16), w, (1, 1), (1, 1)), target, stats)
    assert record["kernels"] == 1 and {"bf16", "winograd"} <= set(stats.values()), stats
    assert "vdpbf16ps" in _asm(exe)


def _ctx(target, winograd=None):
    from mxc.backends.tvm.build import resolve_target
    from mxc.backends.tvm.build_context import build_context
    return build_context(resolve_target(target), precision="bf16", winograd=winograd)
