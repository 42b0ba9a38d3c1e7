"""Graph partitioning with MXNet 1.9.1's Subgraph API semantics.

* :func:`partition_graph` / :func:`optimize_graph` -- run a backend
  (``"default"``, a registered property list, a custom partitioner) and get a
  new graph whose regions are subgraph nodes (``_CachedOp`` ...).
* :class:`SubgraphSelector`, :class:`SubgraphProperty`,
  :func:`register_subgraph_property`, :func:`get_subgraph_backend` -- MXNet's
  C++ extension points, in Python.
* :class:`Partitioner`, :func:`register_partitioner` -- MXNet's
  ``REGISTER_PARTITIONER`` custom partitioners (``supportedOps``,
  ``createSelector``, ``reviewSubgraph``) in Pythonic form.

The algorithm is documented in :mod:`.algorithm`, the subgraph operators in
:mod:`mxc.compiler.ops.subgraph`.
"""

from .algorithm import build_subgraph
from .api import (EXT_DTYPE_ATTR, EXT_SHAPE_ATTR, clear_partitions, optimize_graph,
                  option_string, partition_graph)
from .custom import (ANY_SUBGRAPH, UNSUPPORTED, CustomSubgraphProperty, Partitioner, Strategy,
                     dtype_at, get_partitioner, parse_ext_dtypes, parse_ext_shapes,
                     register_partitioner, shape_at)
from .default_property import DefaultSubgraphProperty
from .property import PartitionContext, SubgraphProperty
from .registry import (SubgraphBackend, get_subgraph_backend, has_subgraph_backend,
                       list_subgraph_backends, provide_subgraph_backend,
                       register_subgraph_backend, register_subgraph_property,
                       unregister_subgraph_backend)
from .selector import OpNameSelector, SubgraphSelector, canonical_op_name, parse_op_names

__all__ = [
    "partition_graph", "optimize_graph", "build_subgraph", "clear_partitions", "option_string",
    "SubgraphSelector", "OpNameSelector", "canonical_op_name", "parse_op_names",
    "SubgraphProperty", "PartitionContext", "DefaultSubgraphProperty",
    "SubgraphBackend", "register_subgraph_backend", "register_subgraph_property",
    "get_subgraph_backend", "has_subgraph_backend", "list_subgraph_backends",
    "provide_subgraph_backend",
    "unregister_subgraph_backend",
    "Partitioner", "Strategy", "CustomSubgraphProperty", "register_partitioner",
    "get_partitioner", "UNSUPPORTED", "ANY_SUBGRAPH", "EXT_SHAPE_ATTR", "EXT_DTYPE_ATTR",
    "shape_at", "dtype_at", "parse_ext_shapes", "parse_ext_dtypes",
]
