"""ExtensionTransaction: one load's snapshot, commit and rollback, shared by both loaders.

The oracle is the registries themselves: after a failure every registry's
content equals its snapshot from before the transaction (the diff API of
:class:`mxc.registry.Registry` reports no change), whatever had been
registered before the failure.
"""

from __future__ import annotations

import sys
import types

import pytest

import mxc
from mxc.compiler.extension_guard import RECORDS, current_library
from mxc.compiler.ops.registry import has_op
from mxc.compiler.partition import has_subgraph_backend, register_subgraph_property
from mxc.compiler.passes.registry import has_pass, register_pass
from mxc.library.registrations import ExtensionLibrary
from mxc.library.transaction import ExtensionTransaction
from mxc.registry import all_registries


def _contents():
    """Every registry's names and values (by identity), built-ins loaded."""
    out = {}
    for reg in all_registries():
        reg.load_builtins()
        out[id(reg)] = {name: id(value) for name, value in reg.items()}
    return out


def _record(tag: str) -> ExtensionLibrary:
    return ExtensionLibrary(name=tag, path=None, module_name=f"_mxc_tx_{tag}", _key=f"tx:{tag}")


def _register_three(tag: str) -> None:
    """An operator, a graph pass and a subgraph backend, as an extension would."""
    class Relu(mxc.CustomOp):
        def parse_attrs(self, attrs):
            return 1, 1

        def infer_shape(self, attrs, in_shapes):
            return in_shapes, in_shapes

        def forward(self, is_train, req, in_data, out_data, aux):
            self.assign(out_data[0], req[0], in_data[0])

    mxc.register_custom_op(f"{tag}_relu", Relu)
    register_pass(f"{tag}_pass", lambda graph, **kw: graph)
    register_subgraph_property(f"{tag}_part", mxc.SubgraphProperty)


def test_a_failure_half_way_restores_every_registry():
    before = _contents()
    keys = RECORDS.keys()
    record = _record("half")
    sys.modules[record.module_name] = types.ModuleType(record.module_name)
    with pytest.raises(RuntimeError, match="half way"):
        with ExtensionTransaction(record):
            assert current_library() is record
            _register_three("half")
            assert has_op("half_relu") and has_pass("half_pass")  # really registered
            raise RuntimeError("half way")
    assert _contents() == before
    assert not (has_op("half_relu") or has_pass("half_pass")
                or has_subgraph_backend("half_part"))
    assert RECORDS.keys() == keys and RECORDS.loading() == []
    assert record.module_name not in sys.modules
    assert current_library() is None


def test_a_library_loaded_inside_a_failing_one_is_forgotten_too():
    outer, inner = _record("outer"), _record("inner")
    with pytest.raises(RuntimeError):
        with ExtensionTransaction(outer):
            with ExtensionTransaction(inner):
                _register_three("inner")
            assert RECORDS.get(inner._key) is inner  # the inner load committed
            raise RuntimeError("outer fails")
    assert RECORDS.get(inner._key) is None and not has_op("inner_relu")


def test_success_commits_the_record_with_what_it_registered():
    record = _record("ok")
    with ExtensionTransaction(record) as tx:
        _register_three("ok")
    try:
        assert tx.committed and RECORDS.get(record._key) is record
        assert record.operators == ["ok_relu"] and record.graph_passes == ["ok_pass"]
        assert record.partitioners == ["ok_part"]
    finally:
        mxc.library.unload(record)
    assert not has_op("ok_relu") and RECORDS.get(record._key) is None
