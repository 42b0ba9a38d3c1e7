"""``Symbol.optimize_for``: run a registered graph pass or a partitioning backend by name.

Dispatch on *backend*:

1. a registered pass (:func:`mxc.register_pass`, the built-ins): the pass
   runs through the pass manager with ``**options`` as its options;
2. a pipeline (the name holds ``,`` or ``{``): the passes run in order;
3. a subgraph backend or custom partitioner: the partitioner's
   :func:`~mxc.compiler.partition.optimize_graph`;
4. anything else: a :class:`~mxc.errors.PartitionError` listing both the
   registered backends and the registered passes.

As in MXNet, ``args``/``aux`` (dicts of name -> array, or lists in
``list_arguments``/``list_auxiliary_states`` order) give shapes and dtypes,
and a pass that allocates parameters adds them to these dicts *in place*,
while parameters whose variable a pass removed are deleted from them.  A
pass that allocates parameters when no dicts were given is an error.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence, TypeVar

import numpy as np

from ..errors import MxcError, PartitionError, PassError
from .ir.attrs import format_attr_value


class _SymbolLike(Protocol):
    """What :func:`optimize_symbol` needs of :class:`mxc.symbol.Symbol`, which sits above
    the compiler (so it is described here rather than imported)."""

    graph: Any

    def list_arguments(self) -> list[str]: ...

    def list_auxiliary_states(self) -> list[str]: ...


Symbol = TypeVar("Symbol", bound=_SymbolLike)


def optimize_symbol(sym: Symbol, backend: str, *, args: dict | Sequence | None = None,
                    aux: dict | Sequence | None = None, clear: bool = True,
                    **options: Any) -> Symbol:
    from .partition import has_subgraph_backend, list_subgraph_backends
    from .passes.registry import has_pass, list_passes
    if has_pass(backend) or "," in backend or "{" in backend:
        return _run_passes(sym, backend, args, aux, clear, options)
    if not has_subgraph_backend(backend):
        raise PartitionError(f"optimize_for: {backend!r} is neither a subgraph backend nor a "
                             f"graph pass; backends: {', '.join(list_subgraph_backends())}; "
                             f"passes: {', '.join(p.name for p in list_passes())}")
    return _partition(sym, backend, args, aux, clear, options)


def _partition(sym, backend, args, aux, clear, options) -> "Symbol":
    from .partition import optimize_graph

    str_options = {k: _option_string(v) for k, v in options.items()}
    shapes = dtypes = None
    given = {"args": _as_dict(args, sym.list_arguments(), "args"),
             "aux": _as_dict(aux, sym.list_auxiliary_states(), "aux")}
    arrays = {**given["args"], **given["aux"]}
    if args is not None or aux is not None:
        shapes = {k: tuple(np.shape(v)) for k, v in arrays.items()}
        dtypes = {k: np.asarray(v).dtype.name for k, v in arrays.items()}
    graph = optimize_graph(sym.graph.copy(), backend, options=str_options, shapes=shapes,
                           dtypes=dtypes, clear=clear, params=given)
    return type(sym).from_graph(graph)


def _run_passes(sym, backend, args, aux, clear, options) -> "Symbol":
    from .passes import PassManager, PassSpec

    if "," in backend or "{" in backend:
        if options:
            raise PassError(f"optimize_for({backend!r}): a pipeline carries its options in "
                            f"braces; got keyword options {', '.join(options)} as well")
        pipeline: Any = backend
    else:
        pipeline = [PassSpec(backend, dict(options))]
    manager = PassManager(pipeline)
    graph = sym.graph
    if clear:
        from .partition import clear_partitions
        graph = clear_partitions(graph.copy())
    arg_dict = _as_dict(args, sym.list_arguments(), "args")
    aux_dict = _as_dict(aux, sym.list_auxiliary_states(), "aux")
    result = manager.run_graph(graph, arg_dict, aux_dict)
    _update_caller(backend, args, aux, result)
    return type(sym).from_graph(result.graph)


def _update_caller(backend: str, args, aux, result) -> None:
    """Copy added/replaced/removed parameters into the caller's dicts (MXNet's contract)."""
    for kind, given in (("arg", args), ("aux", aux)):
        new = sorted(k for k, v in result.allocated.items() if v == kind)
        if new and given is None:
            raise PassError(f"optimize_for({backend!r}) allocated {kind} parameter(s) "
                            f"{', '.join(new)} but no {kind} dict was given to receive them; "
                            f"call optimize_for({backend!r}, args={{...}}, aux={{...}})")
    changed = bool(result.allocated or result.removed)
    for given in (args, aux):
        if changed and given is not None and not isinstance(given, Mapping):
            raise PassError(f"optimize_for({backend!r}) changed the parameters; pass args and "
                            f"aux as dicts (name -> array) so they can be updated")
    for given, kind, values in ((args, "arg", result.args), (aux, "aux", result.aux)):
        if given is None:
            continue
        for name in result.removed:
            given.pop(name, None)
        for name, k in result.allocated.items():
            if k == kind:
                given[name] = values[name]
            else:
                given.pop(name, None)


def _as_dict(values, names: list[str], what: str) -> dict[str, np.ndarray]:
    if values is None:
        return {}
    if isinstance(values, Mapping):
        return dict(values)
    values = list(values)
    if len(values) != len(names):
        raise MxcError(f"optimize_for: {what} has {len(values)} arrays for {len(names)} "
                        f"names ({', '.join(names)})")
    return dict(zip(names, values))


def _option_string(value: Any) -> str:
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return ",".join(value)
    return format_attr_value(value)
