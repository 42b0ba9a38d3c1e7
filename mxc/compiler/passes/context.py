"""``PassContext``: what a pass gets besides the graph.

The context is three things at once:

* the pass's **options**: it is a read-only mapping (``ctx["eps"]``,
  ``ctx.get("myOpt")``, ``for k, v in ctx.items()``), typed for declared
  options and strings for undeclared ones;
* the **rewriter**: a few verbs that edit the graph and keep the parameter
  bookkeeping exact (:meth:`add_node`, :meth:`add_input`, :meth:`connect`,
  :meth:`disconnect`, :meth:`replace_all_uses`, :meth:`erase`,
  :meth:`remove_dead_code`, :meth:`alloc_arg`/:meth:`alloc_aux`);
* **analyses and diagnostics**: parameter values (:meth:`param`), shape and
  dtype inference (:meth:`infer`), statistics (:meth:`stat`) and
  :meth:`fail`.

Editing the :class:`~mxc.compiler.ir.Graph` directly is fine too: use
counts are kept by the IR itself.  Passes need not keep ``graph.nodes``
sorted: the pass manager restores a topological order (stably) after each
pass, before verifying.

Parameters follow MXNet's graph-pass rules: a parameter lives as long as its
variable node is reachable from the outputs.  Allocating on a name or a
variable adds (or replaces) the array; removing the variable's last use
removes the parameter when the pipeline ends.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Iterable, Iterator, Mapping, NoReturn, Sequence

import numpy as np

from ...errors import PassError
from ..ir import Entry, Graph, Node
from ..ir.graph import as_entry
from ..ir.types import GraphTypes
from ..ops.registry import FLAG_FROM_DTYPE, get_op, has_op

__all__ = ["PassContext", "ParamStore", "TypeInfo", "restore_order"]

log = logging.getLogger("mxc.passes")


class ParamStore:
    """Parameter arrays of a pipeline run: the given args/aux plus allocations.

    Copies the given dicts; never mutates the caller's.
    """

    def __init__(self, args: Mapping[str, Any] | None = None,
                 aux: Mapping[str, Any] | None = None):
        self.args: dict[str, np.ndarray] = {k: np.asarray(v) for k, v in (args or {}).items()}
        self.aux: dict[str, np.ndarray] = {k: np.asarray(v) for k, v in (aux or {}).items()}
        #: name -> "arg"/"aux" of every array a pass allocated (new or replaced)
        self.allocated: dict[str, str] = {}
        #: allocated names returned to the caller even when no node uses them (MXNet
        #: returns every array a library pass allocates)
        self.pinned: set[str] = set()

    def get(self, name: str) -> np.ndarray | None:
        value = self.args.get(name)
        return self.aux.get(name) if value is None else value

    def set(self, name: str, value: np.ndarray, kind: str) -> None:
        mine, other = (self.args, self.aux) if kind == "arg" else (self.aux, self.args)
        other.pop(name, None)
        mine[name] = value
        self.allocated[name] = kind

    def prune(self, graph: Graph, original_inputs: Iterable[str]) -> list[str]:
        """Drop arrays whose variable left the graph; returns the removed names.

        Removed: every name that was an input of the original graph or was
        allocated by a pass, and is no longer a variable reachable from the
        outputs.  Arrays the caller gave for names that never were inputs
        are kept, as MXNet keeps them.
        """
        live = {n.name for n in graph.topo_order() if n.op is None}
        candidates = (set(original_inputs) | set(self.allocated)) - self.pinned
        removed = []
        for d in (self.args, self.aux):
            for name in [k for k in d if k in candidates and k not in live]:
                del d[name]
                removed.append(name)
        for name in [k for k in self.allocated if k not in live and k not in self.pinned]:
            del self.allocated[name]
        return removed


#: shapes and dtypes of every entry, from :meth:`PassContext.infer` (the graph's own)
TypeInfo = GraphTypes


class PassContext(Mapping):
    """Options, rewriter and analyses for one pass run (see the module docstring).

    Parameters
    ----------
    graph:
        The graph being transformed.
    options:
        The pass's option values.
    params:
        The pipeline's :class:`ParamStore` (a fresh, empty one by default).
    pass_name, previous:
        The running pass and the names of the passes run before it.
    input_shapes:
        Shapes of data inputs (``name -> shape``) known to the caller; these
        names are never treated as parameters.
    """

    def __init__(self, graph: Graph, options: Mapping[str, Any] | None = None, *,
                 params: ParamStore | None = None, pass_name: str = "<rewrite>",
                 previous: Sequence[str] = (), input_shapes: Mapping[str, tuple] | None = None):
        self.graph = graph
        self.options: dict[str, Any] = dict(options or {})
        self.params = params if params is not None else ParamStore()
        self.pass_name = pass_name
        self.previous = tuple(previous)
        self.input_shapes = {k: tuple(v) for k, v in (input_shapes or {}).items()}
        self.statistics: dict[str, int] = {}
        self._erased: set[Node] = set()  # the nodes themselves: ids get reused
        self._created: list[Node] | None = None
        self._control_targets: set[Node] | None = None  # computed by the first prune()

    def __repr__(self) -> str:
        return f"<PassContext {self.pass_name!r} options={self.options!r}>"

    # -- options (Mapping) ------------------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        if key in self.options:
            return self.options[key]
        return self.options[key.replace("-", "_")]

    def __iter__(self) -> Iterator[str]:
        return iter(self.options)

    def __len__(self) -> int:
        return len(self.options)

    # -- building -----------------------------------------------------------------------
    def add_node(self, op: str, inputs: Iterable[Entry | Node] = (),
                 attrs: Mapping[str, Any] | None = None, *, name: str | None = None,
                 before: Node | None = None, after: Node | None = None) -> Node:
        """Create an operator node and insert it; returns the node.

        *inputs* are entries (a node stands for its output 0).  Attribute
        values may be Python values (``kernel=(3, 3)``); they are stored as
        the strings MXNet writes and validated against the op's schema now,
        so a typo fails here, naming the node.  The node goes *before*/*after*
        the given node, else at the current insertion point (in a rewrite:
        just before the matched root), else at the end.  *name* defaults to a
        fresh name made from the op's (``activation``, ``activation0``, ...).
        """
        node_name = self._new_name(name, op.lower().lstrip("_") or "node")
        raw = dict(attrs or {})
        if has_op(op):
            strings = get_op(op).format_attrs({k: v for k, v in raw.items()
                                               if not _is_hidden(k)})
            strings.update({k: str(v) for k, v in raw.items() if _is_hidden(k)})
        else:
            strings = {k: v if isinstance(v, str) else str(v) for k, v in raw.items()}
        entries = [_entry(e) for e in inputs]
        node = Node(op, node_name, strings)
        if has_op(op):
            node.params  # noqa: B018 - validate before wiring: a failure leaves no trace
        node.inputs = entries
        self._insert(node, before, after)
        return node

    def add_input(self, name: str, *, shape: Sequence[int] | None = None,
                  dtype: Any = None) -> Node:
        """Create a variable (a graph input once something uses it); returns it.

        *shape*/*dtype* are recorded as MXNet's ``__shape__``/``__dtype__``
        attributes when given.
        """
        attrs: dict[str, str] = {}
        if shape is not None:
            attrs["__shape__"] = str(tuple(int(d) for d in shape))
        if dtype is not None:
            attrs["__dtype__"] = str(FLAG_FROM_DTYPE[np.dtype(dtype).name])
        node = Node(None, self._new_name(name, None), attrs)
        self.graph.nodes.insert(0, node)  # a variable is valid anywhere before its users
        if self._created is not None:
            self._created.append(node)
        return node

    def connect(self, source: Entry | Node, node: Node, slot: int | None = None) -> None:
        """Make *source* an input of *node*: appended, or replacing input *slot*."""
        source = _entry(source)
        if slot is None:
            node.inputs = [*node.inputs, source]
        else:
            node.set_input(slot, source)

    def disconnect(self, node: Node, slot: int) -> Entry:
        """Remove input *slot* of *node* (later inputs shift down); returns the entry."""
        inputs = list(node.inputs)
        if not -len(inputs) <= slot < len(inputs):
            raise PassError(f"node {node.ref} has no input {slot} ({len(inputs)} inputs)")
        removed = inputs.pop(slot)
        node.inputs = inputs
        return removed

    def replace_all_uses(self, old: Entry | Node, new: Entry | Node, *,
                         exclude: Iterable[Node] = ()) -> int:
        """Point every use of *old* (inputs and graph outputs) at *new*; returns the count.

        Uses by *new*'s own node and by the *exclude* nodes are kept, so a
        replacement built on top of *old* (``relu(x)`` -> ``clip(relu(x))``)
        does not end up reading itself.  (:meth:`Graph.replace_all_uses_with` does the work.)
        """
        new = _entry(new)
        return self.graph.replace_all_uses_with(old, new, exclude=(new.node, *exclude))

    def erase(self, node: Node) -> None:
        """Remove *node*, which nothing may use any more.

        Erasing a parameter's variable removes the parameter.
        """
        self.graph.erase_node(node)
        self._erased.add(node)

    def remove_dead_code(self) -> list[Node]:
        """Remove every node no output depends on; returns them."""
        dead = self.graph.eliminate_dead_code()
        self._erased.update(dead)
        return dead

    def prune(self, *nodes: Node) -> list[Node]:
        """Erase the given nodes if unused, then their inputs if that made them unused.

        The local dead-code cleanup after a rewrite; returns the erased nodes.
        A node another node names as a control dependency is kept.
        """
        outputs = {id(e.node) for e in self.graph.outputs}
        if self._control_targets is None:
            self._control_targets = {d for n in self.graph.nodes for d in n.control_deps}
        erased: list[Node] = []
        work = list(nodes)
        while work:
            n = work.pop()
            if n in self._erased or n.users or id(n) in outputs or \
                    n in self._control_targets or n not in self.graph.nodes:
                continue
            producers = list(n.input_nodes()) + list(n.control_deps)
            self.erase(n)
            erased.append(n)
            work.extend(producers)
        return erased

    def is_erased(self, node: Node) -> bool:
        return node in self._erased

    @contextlib.contextmanager
    def inserting_before(self, node: Node | None):
        """``with ctx.inserting_before(n):`` new operator nodes go just before *n*."""
        with self.graph.inserting_before(node):
            yield

    @contextlib.contextmanager
    def inserting_after(self, node: Node | None):
        """``with ctx.inserting_after(n):`` new operator nodes follow *n*, in creation order."""
        with self.graph.inserting_after(node):
            yield

    @contextlib.contextmanager
    def tracking_new_nodes(self):
        """``with ctx.tracking_new_nodes() as new:`` collects the nodes created inside."""
        old, self._created = self._created, []
        try:
            yield self._created
        finally:
            created, self._created = self._created, old
            if old is not None:
                old.extend(created)

    # -- parameters ---------------------------------------------------------------------
    def alloc_arg(self, target: str | Node, shape: Sequence[int] | None = None,
                  dtype: Any = None, value: Any = None) -> Node:
        """Allocate an argument parameter; returns its variable node.

        *target* is a variable node, or a name: an existing variable of that
        name gets the new array (MXNet: it replaces the previous one),
        otherwise a new variable is created (connect it to a node to use it).
        The array is *value* (cast to *dtype* if given) or zeros of *shape*
        and *dtype* (float32 by default).  The caller's ``args`` receive it
        when the pipeline ends.
        """
        return self._alloc(target, shape, dtype, value, "arg")

    def alloc_aux(self, target: str | Node, shape: Sequence[int] | None = None,
                  dtype: Any = None, value: Any = None) -> Node:
        """Like :meth:`alloc_arg`, for an auxiliary state (goes to ``aux``)."""
        return self._alloc(target, shape, dtype, value, "aux")

    def _alloc(self, target, shape, dtype, value, kind: str) -> Node:
        if value is None:
            if shape is None:
                raise PassError(f"alloc_{kind}({_label(target)}): give a shape or a value")
            array = np.zeros(tuple(int(d) for d in shape), dtype=dtype or np.float32)
        else:
            array = np.array(value, dtype=dtype, copy=True) if dtype is not None \
                else np.array(value, copy=True)
            if shape is not None and tuple(array.shape) != tuple(shape):
                raise PassError(f"alloc_{kind}({_label(target)}): value has shape "
                                f"{tuple(array.shape)}, not the requested {tuple(shape)}")
        if isinstance(target, Node):
            node = target
        else:
            node = self.graph.find(target)
            if node is None:
                node = self.add_input(target)
        if node.op is not None:
            raise PassError(f"alloc_{kind}: node {node.ref} is an operator ({node.op}); "
                            f"parameters belong to variables")
        if "__shape__" in node.attrs:
            node.attrs["__shape__"] = str(tuple(array.shape))
        if "__dtype__" in node.attrs and array.dtype.name in FLAG_FROM_DTYPE:
            node.attrs["__dtype__"] = str(FLAG_FROM_DTYPE[array.dtype.name])
        self.params.set(node.name, array, kind)
        self.stat(f"{kind} parameters allocated")
        return node

    def param(self, target: str | Node) -> np.ndarray | None:
        """The array of a parameter (given or allocated), or None if unknown."""
        name = target.name if isinstance(target, Node) else target
        return self.params.get(name)

    def is_param(self, node: Node) -> bool:
        """True for a variable with a known array that is not a declared data input."""
        return (node.op is None and node.name not in self.input_shapes
                and self.params.get(node.name) is not None)

    # -- analyses and diagnostics -------------------------------------------------------
    def infer(self) -> TypeInfo:
        """Infer shapes and dtypes of the current graph.

        Known: the parameter arrays, the caller's input shapes and the
        variables' ``__shape__``/``__dtype__`` attributes.  Unknown shapes are
        ``None``; ask again after editing the graph (the graph keeps the answer
        until it changes, :meth:`Graph.types`).
        """
        inputs = {n.name for n in self.graph.topo_order() if n.op is None}
        shapes = {k: tuple(v) for k, v in self.input_shapes.items() if k in inputs}
        dtypes = {}
        for name in inputs:
            value = self.params.get(name)
            if value is not None:
                shapes.setdefault(name, tuple(value.shape))
                dtypes[name] = value.dtype.name
        return self.graph.types(shapes, dtypes)

    def stat(self, key: str, n: int = 1) -> None:
        """Count something (``ctx.stat("folded")``); reported per pass."""
        self.statistics[key] = self.statistics.get(key, 0) + n

    def fail(self, message: str, node: Node | None = None) -> NoReturn:
        """Stop the pipeline with a :class:`~mxc.errors.PassError` (naming *node*)."""
        err = PassError(message if node is None else f"node {node.ref}: {message}")
        err.node = node.name if node is not None else None
        raise err

    # -- helpers ------------------------------------------------------------------------
    def _new_name(self, name: str | None, hint: str | None) -> str:
        if name is None:
            return self.graph.fresh_name(hint or "node")
        if self.graph.find(name) is not None:
            raise PassError(f"a node named {name!r} already exists; pick another name or "
                            f"leave name=None for a fresh one")
        return name

    def _insert(self, node: Node, before: Node | None, after: Node | None) -> None:
        self.graph.add_node(node, before=before, after=after)
        if self._created is not None:
            self._created.append(node)


def restore_order(graph: Graph) -> None:
    """Re-sort ``graph.nodes`` topologically, keeping the order of independent nodes.

    Only a node list that holds every node it refers to is re-sorted, so
    dangling entries are left for :meth:`Graph.verify` to report; a cycle
    raises :class:`~mxc.errors.GraphError`.
    """
    from ..ir import post_order
    members = {id(n) for n in graph.nodes}
    if all(id(e.node) in members for n in graph.nodes for e in n.inputs) and \
            all(id(d) in members for n in graph.nodes for d in n.control_deps):
        graph.nodes = post_order(graph.nodes)


_entry = as_entry


def _is_hidden(key: str) -> bool:
    return len(key) > 4 and key.startswith("__") and key.endswith("__")


def _label(target) -> str:
    return repr(target.name if isinstance(target, Node) else target)
