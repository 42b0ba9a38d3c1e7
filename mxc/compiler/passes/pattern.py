"""Declarative patterns over mxc's graph IR (in the spirit of TVM's DPL).

A pattern describes a value (an :class:`~mxc.compiler.ir.Entry`) and what
produced it::

    x, w = wildcard(), is_var()
    conv = is_op("Convolution")(x, w, ...)            # "..." : more inputs allowed
    bn = is_op("BatchNorm")(conv.one_use(), is_var(), is_var(), is_var(), is_var())
    act = is_op("Activation").has_attr(act_type="relu") | is_op("relu")

Builders: :func:`wildcard` (any value), :func:`is_var`/:func:`is_param` (a
variable -- in MXNet every parameter is a variable node), :func:`is_op`
(an operator, or any of several; call it with input patterns to constrain
the inputs, exactly as many as given unless the last is ``...``).  Combine
with ``|`` (either), ``&`` (both), ``~`` (not).  Refine with
``.has_attr(no_bias=True)`` (typed operator parameters, or a callable on
them), ``.where(fn)`` (``fn(node) -> bool``), ``.one_use()`` /
``.multi_use()`` (how many inputs and graph outputs read the value) and
``pattern[i]`` (output *i* of a multi-output node; default output 0).

One pattern object matches one value: using the same object twice (``x`` in
``is_op("elemwise_mul")(x, x)``) requires the same value, and ``s[0]`` /
``s[1]`` are outputs of the same node.  Refinements that look at the node
(``has_attr``, ``where``, inputs) make a new pattern; those that look at the
value (``[i]``, ``one_use``, ``named``) still denote the same node.

The compact textual form, for simple cases, is :func:`parse_pattern`
(:mod:`.pattern_text`)::

    parse_pattern("BatchNorm(Convolution(%x, %w), %g, %b, %m, %v)")

``p.match(entry)`` matches at one value, ``p.find(graph)`` lists every match
and :func:`~.rewrite.rewrite` replaces them.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Iterable, Iterator

from ...errors import MxcError
from ..ir import Entry, Graph, Node

# parse_pattern (the textual form) lives in .pattern_text, which builds on this module;
# it is re-exported by mxc.compiler.passes, so this module never imports its parser
__all__ = ["Pattern", "Match", "wildcard", "is_var", "is_param", "is_op"]


class Pattern:
    """Base class of patterns; see the module docstring."""

    def __init__(self) -> None:
        self._key = object()  # binding identity: same key, same node/value
        self._entry_checks: tuple[tuple[str, Callable], ...] = ()
        self.label: str | None = None

    # -- combinators ----------------------------------------------------------------------
    def __or__(self, other: "Pattern") -> "Pattern":
        return _Alt(self, _as_pattern(other))

    def __and__(self, other: "Pattern") -> "Pattern":
        return _And(self, _as_pattern(other))

    def __invert__(self) -> "Pattern":
        return _Not(self)

    # -- value-level refinements (same node) ---------------------------------------------
    def one_use(self) -> "Pattern":
        """The value is read exactly once (by one input slot or as one graph output)."""
        return self._with_entry_check("one_use", lambda e, g: _uses(e, g) == 1)

    single_use = one_use

    def multi_use(self) -> "Pattern":
        """The value is read more than once."""
        return self._with_entry_check("multi_use", lambda e, g: _uses(e, g) > 1)

    def named(self, label: str) -> "Pattern":
        """The same pattern, retrievable from a match as ``match[label]``."""
        p = copy.copy(self)
        p.label = label
        return p

    # -- node-level refinements (a new pattern) ------------------------------------------
    def has_attr(self, predicate: Callable[[Any], bool] | None = None, **attrs: Any) -> "Pattern":
        """Constrain the producing node's typed parameters.

        ``has_attr(no_bias=True, kernel=(1, 1))`` compares each parameter as
        the op parses it (a string value is parsed the same way first);
        ``has_attr(lambda p: p.num_group == 1)`` calls the predicate with the
        node's :class:`~mxc.compiler.ops.registry.Params`.  A value may also
        be a callable on that one parameter: ``has_attr(eps=lambda e: e < 1e-2)``.
        """
        checks = []
        if predicate is not None:
            checks.append(lambda n: n.op is not None and bool(predicate(n.params)))
        for key, want in attrs.items():
            checks.append(lambda n, k=key, v=want: _attr_matches(n, k, v))
        return self._with_node_checks(checks)

    def where(self, fn: Callable[[Node], bool]) -> "Pattern":
        """Constrain the producing node with ``fn(node) -> bool``."""
        return self._with_node_checks([lambda n: bool(fn(n))])

    # -- matching -------------------------------------------------------------------------
    def match(self, entry: Entry | Node, graph: Graph | None = None) -> "Match | None":
        """A :class:`Match` rooted at *entry* (a node means its output 0), or None.

        *graph* is needed for use-count constraints to see graph outputs.
        """
        e = entry.out if isinstance(entry, Node) else entry
        state = _State(graph)
        if not _match(self, e, state):
            return None
        return Match(self, e, state, graph)

    def match_node(self, node: Node, graph: Graph | None = None) -> "Match | None":
        """The first match rooted at any output of *node*."""
        for i in self._root_indices(node):
            m = self.match(Entry(node, i), graph)
            if m is not None:
                return m
        return None

    def find(self, graph: Graph) -> list["Match"]:
        """Every match in *graph*, one per root node, in topological order.

        Matches may overlap; :func:`~.rewrite.rewrite` applies them one at a time.
        """
        found = []
        for node in graph.topo_order():
            m = self.match_node(node, graph)
            if m is not None:
                found.append(m)
        return found

    def size(self) -> int:
        """Number of distinct operator nodes the pattern matches (a rewrite's benefit)."""
        keys = {p._key for p in self.walk() if isinstance(p, OpPattern)}
        return len(keys)

    def walk(self) -> Iterator["Pattern"]:
        """This pattern and every sub-pattern, depth first."""
        yield self

    # -- internals ------------------------------------------------------------------------
    def _root_indices(self, node: Node) -> range:
        return range(node.num_outputs()) if node.op is not None else range(1)

    def _with_entry_check(self, name: str, fn: Callable) -> "Pattern":
        p = copy.copy(self)
        p._entry_checks = self._entry_checks + ((name, fn),)
        return p

    def _with_node_checks(self, checks: list[Callable]) -> "Pattern":
        return _And(self, _NodeCheck(checks))

    def _matches_here(self, entry: Entry, state: "_State") -> bool:  # pragma: no cover
        raise NotImplementedError

    def _suffix(self) -> str:
        text = "".join(f".{name}()" for name, _ in self._entry_checks)
        return text + (f".named({self.label!r})" if self.label else "")


class _Wildcard(Pattern):
    def __repr__(self) -> str:
        return f"wildcard(){self._suffix()}"

    def _matches_here(self, entry, state):
        return state.bind_value(self._key, entry)


class _Var(Pattern):
    def __init__(self, name: str | None = None):
        super().__init__()
        self.name = name

    def __repr__(self) -> str:
        arg = "" if self.name is None else repr(self.name)
        return f"is_var({arg}){self._suffix()}"

    def _matches_here(self, entry, state):
        node = entry.node
        if node.op is not None or (self.name is not None and node.name != self.name):
            return False
        return state.bind_value(self._key, entry)


class OpPattern(Pattern):
    """An operator application (built by :func:`is_op`)."""

    def __init__(self, ops: frozenset[str] | None, args: tuple | None = None,
                 more_args: bool = False, index: int | None = 0):
        super().__init__()
        self.ops = ops
        self.args = args
        self.more_args = more_args
        self.index = index
        self._node_checks: tuple[Callable, ...] = ()

    def __repr__(self) -> str:
        ops = "|".join(sorted(self.ops)) if self.ops else "*"
        text = f"is_op({ops!r})"
        if self.args is not None:
            items = [repr(a) for a in self.args] + (["..."] if self.more_args else [])
            text += f"({', '.join(items)})"
        if self.index not in (0, None):
            text += f"[{self.index}]"
        return text + self._suffix()

    def __call__(self, *args: Any) -> "OpPattern":
        """Constrain the inputs: exactly these, or at least these if the last is ``...``."""
        more = bool(args) and args[-1] is Ellipsis
        items = args[:-1] if more else args
        p = OpPattern(self.ops, tuple(_as_pattern(a) for a in items), more, self.index)
        p._node_checks = self._node_checks
        p._entry_checks = self._entry_checks
        p.label = self.label
        return p

    def __getitem__(self, index: int) -> "OpPattern":
        """Output *index* of the same node."""
        if not isinstance(index, int) or index < 0:
            raise MxcError(f"pattern output index must be a non-negative int, got {index!r}")
        p = copy.copy(self)
        p.index = index
        return p

    def _with_node_checks(self, checks):
        p = copy.copy(self)
        p._key = object()
        p._node_checks = self._node_checks + tuple(checks)
        return p

    def _root_indices(self, node):
        return range(node.num_outputs()) if self.index is None else range(self.index,
                                                                           self.index + 1)

    def walk(self):
        yield self
        for a in self.args or ():
            yield from a.walk()

    def _matches_here(self, entry, state):
        node = entry.node
        if node.op is None or (self.index is not None and entry.index != self.index):
            return False
        bound = state.nodes.get(self._key)
        if bound is not None:
            return bound is node
        if self.ops is not None and _canonical(node.op) not in self.ops:
            return False
        if not all(check(node) for check in self._node_checks):
            return False
        state.nodes[self._key] = node
        if self.args is None:
            return True
        n = len(node.inputs)
        if n < len(self.args) if self.more_args else n != len(self.args):
            return False
        return all(_match(a, e, state) for a, e in zip(self.args, node.inputs))


class _NodeCheck(Pattern):
    """Node predicates on a value's producer (used under ``&``)."""

    def __init__(self, checks: list[Callable]):
        super().__init__()
        self.checks = tuple(checks)

    def __repr__(self) -> str:
        return "where(...)"

    def _matches_here(self, entry, state):
        return all(check(entry.node) for check in self.checks)


class _Alt(Pattern):
    def __init__(self, left: Pattern, right: Pattern):
        super().__init__()
        self.left, self.right = left, right

    def __repr__(self) -> str:
        return f"({self.left!r} | {self.right!r}){self._suffix()}"

    def walk(self):
        yield self
        yield from self.left.walk()
        yield from self.right.walk()

    def _root_indices(self, node):
        a, b = self.left._root_indices(node), self.right._root_indices(node)
        return range(min(a.start, b.start), max(a.stop, b.stop))

    def _matches_here(self, entry, state):
        saved = state.snapshot()
        if _match(self.left, entry, state):
            return True
        state.restore(saved)
        return _match(self.right, entry, state)


class _And(Pattern):
    def __init__(self, left: Pattern, right: Pattern):
        super().__init__()
        self.left, self.right = left, right

    def __repr__(self) -> str:
        return f"({self.left!r} & {self.right!r}){self._suffix()}"

    def walk(self):
        yield self
        yield from self.left.walk()
        yield from self.right.walk()

    def _root_indices(self, node):
        return self.left._root_indices(node)

    def _matches_here(self, entry, state):
        return _match(self.left, entry, state) and _match(self.right, entry, state)


class _Not(Pattern):
    def __init__(self, inner: Pattern):
        super().__init__()
        self.inner = inner

    def __repr__(self) -> str:
        return f"~{self.inner!r}{self._suffix()}"

    def _matches_here(self, entry, state):
        saved = state.snapshot()
        ok = _match(self.inner, entry, state)
        state.restore(saved)
        return not ok


# ---------------------------------------------------------------------------------------
# builders
# ---------------------------------------------------------------------------------------
def wildcard() -> Pattern:
    """Any value."""
    return _Wildcard()


def is_var(name: str | None = None) -> Pattern:
    """A variable (graph input or parameter), optionally with this name."""
    return _Var(name)


def is_param(name: str | None = None) -> Pattern:
    """A parameter: in MXNet a parameter is a variable node, so the same as :func:`is_var`."""
    return _Var(name)


def is_op(*ops: str | Iterable[str]) -> OpPattern:
    """An operator node of one of *ops* (aliases included); any inputs until called.

    ``is_op()`` with no names matches any operator.
    """
    names: list[str] = []
    for o in ops:
        names.extend([o] if isinstance(o, str) else list(o))
    return OpPattern(frozenset(_canonical(n) for n in names) if names else None)


def _as_pattern(p: Any) -> Pattern:
    if isinstance(p, Pattern):
        return p
    raise MxcError(f"expected a pattern (wildcard(), is_var(), is_op(...)), got {p!r}")


# ---------------------------------------------------------------------------------------
# matching
# ---------------------------------------------------------------------------------------
class _State:
    """Bindings during one match attempt."""

    def __init__(self, graph: Graph | None):
        self.graph = graph
        self.values: dict[object, Entry] = {}   # wildcard/var key -> value
        self.nodes: dict[object, Node] = {}     # op pattern key -> node
        self.seen: dict[int, Entry] = {}        # id(pattern object) -> value it matched

    def bind_value(self, key: object, entry: Entry) -> bool:
        bound = self.values.get(key)
        if bound is None:
            self.values[key] = entry
            return True
        return bound.key == entry.key

    def snapshot(self):
        return dict(self.values), dict(self.nodes), dict(self.seen)

    def restore(self, saved) -> None:
        self.values, self.nodes, self.seen = (dict(s) for s in saved)


def _match(p: Pattern, entry: Entry, state: _State) -> bool:
    if not p._matches_here(entry, state):
        return False
    for _, check in p._entry_checks:
        if not check(entry, state.graph):
            return False
    state.seen[id(p)] = entry
    return True


def _uses(entry: Entry, graph: Graph | None) -> int:
    n = sum(1 for user in entry.node.users for e in user.inputs if e.key == entry.key)
    if graph is not None:
        n += sum(1 for e in graph.outputs if e.key == entry.key)
    return n


def _canonical(op: str) -> str:
    from ..ops.registry import OPS
    opdef = OPS.get(op)
    return op if opdef is None else opdef.name


def _attr_matches(node: Node, key: str, want: Any) -> bool:
    if node.op is None:
        return False
    try:
        params = node.params
        spec = node.opdef.attrs.get(key)
    except MxcError:
        return False
    if spec is None:
        return (node.attrs.get(key) == want) if isinstance(want, str) else \
            (node.attrs.get(key) == str(want))
    have = params[key]
    if callable(want):
        return bool(want(have))
    if isinstance(want, str):
        try:
            want = spec.convert(want)
        except (ValueError, TypeError, MxcError):
            return False
    if isinstance(want, list):
        want = tuple(want)
    return have == want


class Match:
    """One match: ``match[p]`` / ``match["label"]`` is the value a sub-pattern matched.

    Attributes
    ----------
    root:
        The entry the whole pattern matched.
    pattern, graph:
        What was matched, and where.
    ctx:
        The :class:`~.context.PassContext` of a rewrite (``None`` otherwise):
        use it to add nodes or allocate parameters in a replacement.
    """

    def __init__(self, pattern: Pattern, root: Entry, state: _State, graph: Graph | None):
        self.pattern = pattern
        self.root = root
        self.graph = graph
        self.ctx = None
        self._state = state
        self._labels = {p.label: p for p in pattern.walk() if p.label is not None}

    def __repr__(self) -> str:
        return f"<Match at {self.root!r}: {', '.join(n.name for n in self.nodes)}>"

    def __getitem__(self, key: "Pattern | str") -> Entry:
        e = self.get(key)
        if e is None:
            if isinstance(key, str):
                raise KeyError(f"no sub-pattern named {key!r}; labels: "
                               f"{', '.join(self._labels) or 'none'}")
            raise KeyError(f"{key!r} is not part of the matched pattern (or was not reached)")
        return e

    def __contains__(self, key: "Pattern | str") -> bool:
        return self.get(key) is not None

    def get(self, key: "Pattern | str", default: Any = None) -> Entry | None:
        p = self._labels.get(key) if isinstance(key, str) else key
        if p is None:
            return default
        e = self._state.seen.get(id(p))
        if e is None and isinstance(p, OpPattern):
            node = self._state.nodes.get(p._key)
            e = None if node is None else Entry(node, p.index or 0)
        return default if e is None else e

    def node(self, key: "Pattern | str") -> Node:
        """The node that produced ``match[key]``."""
        return self[key].node

    @property
    def labels(self) -> dict[str, Entry]:
        """``{label: value}`` for every named sub-pattern that matched."""
        return {k: e for k in self._labels if (e := self.get(k)) is not None}

    @property
    def nodes(self) -> list[Node]:
        """The operator nodes matched, root first."""
        ordered = [self.root.node] if self.root.node.op is not None else []
        for n in self._state.nodes.values():
            if n not in ordered:
                ordered.append(n)
        return ordered

    @property
    def values(self) -> list[Entry]:
        """Values matched by wildcards and variable patterns."""
        return list(self._state.values.values())

