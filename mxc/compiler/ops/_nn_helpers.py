"""Small helpers shared by the neural-network op families (nn_*.py, rnn.py).

Not an op family itself (the leading underscore keeps the op registry from
importing it as one): data-layout permutations, sliding windows for
convolution/pooling, and erf for GELU.  The helpers every family shares
(:func:`~.common.attr_error`, :func:`~.common.merge_into`,
:func:`~.common.numel` ...) are in :mod:`.common`.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import AttributeInvalidError

# ---------------------------------------------------------------------------
# layouts
# ---------------------------------------------------------------------------

#: channels-first layout MXNet uses by default for 1-D/2-D/3-D spatial ops
DEFAULT_LAYOUT = {1: "NCW", 2: "NCHW", 3: "NCDHW"}


def layout_perm(layout: str) -> tuple[int, ...]:
    """Axis order that takes an array in *layout* to channels-first (N, C, spatial...)."""
    n, c = layout.index("N"), layout.index("C")
    spatial = [i for i, ch in enumerate(layout) if ch not in "NC"]
    return (n, c, *spatial)


def inverse_perm(perm) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def shape_to_cf(shape, layout: str):
    """A (partial) shape in *layout* -> channels-first order (None stays None)."""
    if shape is None:
        return None
    return tuple(shape[i] for i in layout_perm(layout))


def shape_from_cf(shape, layout: str):
    """A channels-first (partial) shape -> *layout* order."""
    if shape is None:
        return None
    inv = inverse_perm(layout_perm(layout))
    return tuple(shape[i] for i in inv)


def array_to_cf(x: np.ndarray, layout: str) -> np.ndarray:
    perm = layout_perm(layout)
    return x if perm == tuple(range(x.ndim)) else np.transpose(x, perm)


def array_from_cf(x: np.ndarray, layout: str) -> np.ndarray:
    perm = layout_perm(layout)
    return x if perm == tuple(range(x.ndim)) else np.transpose(x, inverse_perm(perm))


# ---------------------------------------------------------------------------
# attribute defaults
# ---------------------------------------------------------------------------

def expand_tuple(value: tuple, n: int, default: int) -> tuple[int, ...]:
    """MXNet's empty-tuple defaults for stride/dilate/pad: () means *default* everywhere."""
    return tuple(value) if len(value) else (default,) * n


# ---------------------------------------------------------------------------
# sliding windows
# ---------------------------------------------------------------------------

def windows(xp: np.ndarray, kernel, stride, dilate) -> np.ndarray:
    """Strided view ``(N, C, *out, *kernel)`` of a channels-first, already padded array.

    ``out[i] = (len_i - dilated_kernel_i) // stride_i + 1``; element
    ``[..., o, k]`` is ``xp[..., o*stride + k*dilate]``.  No data is copied.
    """
    nsp = len(kernel)
    dk = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilate))
    axes = tuple(range(2, 2 + nsp))
    w = np.lib.stride_tricks.sliding_window_view(xp, dk, axis=axes)
    sl = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride) \
        + tuple(slice(None, None, d) for d in dilate)
    return w[sl]


# ---------------------------------------------------------------------------
# math
# ---------------------------------------------------------------------------

_erf_vec = np.vectorize(math.erf, otypes=[np.float64])


def erf(x: np.ndarray) -> np.ndarray:
    """Elementwise erf (float64 result); numpy has none and scipy is not a dependency."""
    return _erf_vec(np.asarray(x, dtype=np.float64))


# ---------------------------------------------------------------------------
# legacy (*_v1) schemas
# ---------------------------------------------------------------------------
class LegacySchema:
    """Mixin for a pre-1.0 op that shares a modern op's kernel but not its whole schema.

    ``legacy_attrs`` names the attributes the legacy op accepts (MXNet rejects
    the others); the parsed :class:`Params` still carry every attribute of the
    modern schema at its default, so the shared kernels and lowerings read
    them unchanged.
    """

    legacy_attrs: tuple[str, ...] = ()

    def parse_attrs(self, raw, node=None):
        unknown = sorted(set(raw) - set(self.legacy_attrs))
        if unknown:
            raise AttributeInvalidError(
                f"operator {self.name} (node {getattr(node, 'name', '?')!r}): unknown "
                f"attribute {unknown[0]!r}; known attributes: "
                f"{', '.join(sorted(self.legacy_attrs))}")
        return super().parse_attrs(raw, node)
