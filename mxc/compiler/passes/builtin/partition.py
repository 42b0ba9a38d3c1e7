"""``partition``: partition the graph for a subgraph backend, inside a pipeline."""

from __future__ import annotations

from ..registry import Option, Pass, register_pass


@register_pass("partition")
class Partition(Pass):
    """Partition into subgraph nodes for a backend, as Symbol.optimize_for does.

    Options other than ``backend`` and ``clear`` go to the backend as
    strings (a list such as ``op_names=exp;log`` as ``"exp,log"``).  Shapes
    and dtypes of the parameters (and of the pipeline's input shapes) are
    inferred first and handed to the backend when any are known.
    """

    backend = Option(str, help="subgraph backend or partitioner name")
    clear = Option(bool, True, "inline existing subgraph nodes first (as optimize_for's clear)")
    extra_options = True

    def run(self, graph, ctx):
        from ...partition import optimize_graph
        options = {k: v for k, v in ctx.items() if k not in ("backend", "clear")}
        inputs = {n.name for n in graph.topo_order() if n.op is None}
        shapes = {k: v for k, v in ctx.input_shapes.items() if k in inputs}
        dtypes = {}
        for name in inputs:
            value = ctx.param(name)
            if value is not None:
                shapes.setdefault(name, tuple(value.shape))
                dtypes[name] = value.dtype.name
        known = bool(shapes or dtypes)
        return optimize_graph(graph, self.backend, options=options,
                              shapes=shapes if known else None,
                              dtypes=dtypes if known else None, clear=self.clear)
