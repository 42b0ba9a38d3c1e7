"""MXNet's extra operator names (``_npx_*``, ``_npi_*``, ``_sparse_*``, ``cumsum``) read as aliases.

Oracles: MXNet 1.9.1's alias table (two names share one operator handle) as
recorded in ``_mxnet_aliases``, hand-computed outputs, and the invariant that
an alias runs exactly as its canonical operator.
"""

from __future__ import annotations

import numpy as np
import pytest

from mxc import sym as S
from mxc.backends.reference import run_graph
from mxc.compiler.ops import get_op
from mxc.compiler.ops._mxnet_aliases import MXNET_ALIASES
from mxc.compiler.ops.registry import add_aliases

PAIRS = [(canon, alias) for canon, aliases in MXNET_ALIASES.items() for alias in aliases]


@pytest.mark.parametrize("canon, alias", PAIRS, ids=[a for _, a in PAIRS])
def test_alias_names_the_canonical_definition(canon, alias):
    op = get_op(alias)
    assert op is get_op(canon) and op.name == canon and alias in op.aliases


def test_one_hot_by_its_npx_name():
    x = S.var("x")
    got = run_graph(S._npx_one_hot(x, depth=3).graph, {"x": np.array([2, 0], np.float32)})[0]
    np.testing.assert_array_equal(got, np.array([[0, 0, 1], [1, 0, 0]], np.float32))


def test_cumsum_runs_as_np_cumsum():
    x = S.var("x")
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = run_graph(S.cumsum(x, axis=1).graph, {"x": data})[0]
    b = run_graph(S._np_cumsum(x, axis=1).graph, {"x": data})[0]
    np.testing.assert_array_equal(a, np.array([[0, 1, 3], [3, 7, 12]], np.float32))
    np.testing.assert_array_equal(a, b)


def test_an_alias_cannot_take_another_operators_name():
    with pytest.raises(ValueError, match="already registered"):
        add_aliases("exp", "log")
