"""MXNet's graph partitioning (``BuildSubgraph``) for one subgraph property.

The behaviour is that of MXNet 1.9.1's ``build_subgraph.cc``; the data
structures are not, so that a 100k-node graph partitions in seconds.

**Finding regions** (on the unmodified graph).  Nodes are numbered in MXNet's
topological order (post-order DFS from the outputs, :meth:`Graph.topo_order`).
Every node not yet in a region that the property's selector
:meth:`~.SubgraphSelector.select`\\ s starts a region: it grows breadth-first,
taking each input producer the selector accepts
(:meth:`~.SubgraphSelector.select_input`) and each consumer
(:meth:`~.SubgraphSelector.select_output`); nodes already in a region,
variables and excluded nodes are never taken.

The grown set is then checked for a cycle with the rest of the graph (a path
that leaves the set and re-enters it would make the subgraph node its own
ancestor).  As MXNet, the check looks at the *boundary* nodes not in any
region: a boundary node both fed by and feeding the set is a cycle; so is a
boundary node fed by the set (and not feeding it) from which another
boundary node feeding the set is reachable without crossing the set.  Among
all such cycles MXNet excludes one region node, the one with the largest
topological number adjacent to a cycle's boundary nodes, and grows the
region again from the same start node (the selector is :meth:`reset` first).
If the excluded node would be the start node itself, the region is the
start node alone.  Reachability is computed forward from the boundary in
topological order, bounded by the largest boundary node that feeds the set,
instead of MXNet's unbounded per-pair depth-first searches.

The selector's :meth:`~.SubgraphSelector.filter` may then drop nodes (it may
not add any); dropped nodes can start or join later regions.

**Replacing regions**, in the order found (the position is the subgraph id):
the region's *input entries* -- input slots of region nodes whose producer
is outside the region -- are sorted in MXNet's entry order (a DFS over input
slots from the outputs) and each becomes a new variable named after the
entry's output name plus a per-name counter (``data0``, ``data1`` for
``data + data``; ``cos0_output0``; ``_CachedOp0_sin0_output0`` when the
producer is an earlier subgraph node).  The *output entries* -- every input
slot outside the region and every graph output reading a region node -- are
sorted the same way; they are the nested graph's heads, one per use (a value
used twice outside is two heads), and use *i* then reads output *i* of the
new node.  The new node's inputs are the original entries of the cut slots.
With the ``dedup_subgraph=True`` option, repeated input entries share one
variable and equal neighbouring heads one output (MXNet's dedup mode).

**Cost.**  Growing, checking and replacing a region costs about its size
plus its boundary, so graphs whose regions stay local partition in linear
time.  The exclude-and-regrow loop is where MXNet is superlinear: a selected
component spanning the whole graph with a re-entrant path per block (ResNet
blocks with ``elemwise_add`` and ``Activation`` selected) is peeled one
excluded node at a time, and again for every later start node.  For
selectors that are ``node_determined`` (the default backend's) mxc peels
incrementally (:class:`_Peeler`: the region loses the excluded node and
what it alone connected, and only the boundary around them is rechecked),
which makes such graphs O(n^2) instead of MXNet's O(n^3); other selectors
regrow from scratch after each exclusion, as MXNet does.

The code is in three modules: this driver (indexing, finding and growing
regions, filtering), :mod:`.cycles` (the cycle checks, exclusion and the
incremental peeler) and :mod:`.replacement` (turning an accepted region into
a subgraph node).

**Where mxc differs from MXNet 1.9.1** (none of it changes a partition
MXNet computes correctly):

* ancestor searches are exact; MXNet's depth-first searches have no visited
  set and give up after ``num_nodes`` steps, so on graphs with many
  reconverging paths it can miss a cycle and build a cyclic graph;
* when the node to exclude is the start node itself, MXNet retries
  ``num_nodes**2`` times before settling for the start node alone; mxc
  settles at once (same result);
* variables never join a region, whatever a custom selector says (a region
  holding a variable would have an input with no outer entry);
* node names MXNet would duplicate (a second ``_CachedOp0`` from a second
  property, a nested variable named like a region node) get a ``_<k>``
  suffix, since mxc graphs keep node names unique;
* MXNet's check ignores nodes already in earlier regions, so it can accept
  a region that feeds itself once it and an earlier region are both
  replaced by subgraph nodes (MXNet then builds a cyclic graph).  mxc checks
  an accepted region once more with earlier regions contracted
  (:meth:`_Builder._contracted_cycle`) and, only if that finds a cycle,
  excludes the largest re-entered node and goes on as MXNet would; if even
  the start node alone would close such a cycle, it joins no region;
* a selector's filter that leaves a region feeding itself through a dropped
  node is a :class:`~mxc.errors.PartitionError` (MXNet builds a cyclic
  graph);
* a region without inputs (a lone ``_zeros``) becomes a ``_CachedOp`` with
  no inputs, which MXNet refuses ("CachedOp requires at least 1 input").
"""


from __future__ import annotations

import inspect
from collections import deque

from ...errors import GraphError, MxcError, PartitionError
from ..ir import Graph, Node
from ._graphutil import gc_paused, post_order_fast
from .cycles import _CycleChecks, _Peeler, _PrefixMax
from .property import PartitionContext, SubgraphProperty
from .replacement import _names, _Region, _Replacement
from .selector import SubgraphSelector

__all__ = ["build_subgraph"]

def build_subgraph(graph: Graph, prop: SubgraphProperty, ctx: PartitionContext, *,
                   dfs_ordered: bool = False) -> Graph:
    """Partition *graph* in place with *prop*; returns *graph*.

    The caller owns *graph* (pass a copy to keep the original).  Nodes the
    outputs do not reach are dropped, as MXNet drops them.  *dfs_ordered*:
    the caller guarantees ``graph.nodes`` is exactly MXNet's DFS order from
    the outputs (as :func:`post_order_fast` gives it), saving one traversal.
    On return ``graph.nodes`` is in that order.
    """
    with gc_paused():
        _Builder(graph, prop, ctx, dfs_ordered).run()
    return graph


class _Builder(_CycleChecks, _Replacement):
    """One property's run.  Nodes are numbered 0..n-1 in topological order.

    Per node number: ``ins`` (producer numbers per input slot), ``outs``
    (distinct consumer numbers, increasing), ``uses`` ((consumer node,
    slot) pairs, kept current while regions are replaced), ``label``
    (region tag or -1).  Entry positions (MXNet's ``TopSortEntries``) are
    ``slot_pos[slot_base[n] + k]`` for input slot *k* of node *n*,
    ``out_pos[k]`` for graph output *k*, and ``extra_pos[(node, k)]``
    for the input slots of subgraph nodes created during the run.
    """

    def __init__(self, graph: Graph, prop: SubgraphProperty, ctx: PartitionContext,
                 dfs_ordered: bool = False):
        self.dfs_ordered = dfs_ordered
        self.graph = graph
        self.prop = prop
        self.ctx = ctx
        self.where = f"subgraph property {prop.name!r} of backend {ctx.backend!r}" \
            if ctx.backend and ctx.backend != prop.name else f"subgraph property {prop.name!r}"
        self._names_cache: dict[int, list[str]] = {}

    # ------------------------------------------------------------------------------
    def run(self) -> None:
        self._call(self.prop.pre_partition, self.graph, self.ctx, what="pre_partition")
        self._index()
        regions = self._find_regions()
        for rid, region in enumerate(regions):
            if self.prop.property_type == "adjust":
                args = ([self.order[v] for v in region.nids], rid)
                if self._with_selector("adjust_subgraph_node"):
                    args += (region.selector,)
                self._call(self.prop.adjust_subgraph_node, *args, what="adjust_subgraph_node")
            else:
                self._create(region, rid)
        try:
            self.graph.nodes = post_order_fast(e.node for e in self.graph.outputs)
        except GraphError as exc:
            raise PartitionError(f"{self.where}: partitioning produced a cyclic graph ({exc}); "
                                 f"a selector's filter or reject left a region that feeds "
                                 f"itself") from None
        self._call(self.prop.post_partition, self.graph, self.ctx, what="post_partition")

    def _with_selector(self, hook: str) -> bool:
        """Does the property's *hook* take the selector (a third argument)?"""
        cache = self.__dict__.setdefault("_arity", {})
        if hook not in cache:
            fn = getattr(self.prop, hook)
            try:
                params = inspect.signature(fn).parameters.values()
            except (TypeError, ValueError):
                cache[hook] = True
            else:
                positional = [p for p in params
                              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
                cache[hook] = len(positional) >= 3 or any(p.kind == p.VAR_POSITIONAL
                                                          for p in params)
        return cache[hook]

    def _call(self, fn, *args, what):
        """Call a property hook; *what* (a string or a callable making one) names it."""
        try:
            return fn(*args)
        except MxcError:
            raise
        except Exception as exc:  # a failing property hook
            label = what() if callable(what) else what
            raise PartitionError(f"{self.where}: {label} raised {type(exc).__name__}: "
                                 f"{exc}") from exc

    # ------------------------------------------------------------------------------
    # indexing
    # ------------------------------------------------------------------------------
    def _index(self) -> None:
        g = self.graph
        if self.dfs_ordered:
            order = list(g.nodes)
        else:
            try:
                order = post_order_fast(e.node for e in g.outputs)
            except GraphError as exc:
                raise PartitionError(f"cannot partition a cyclic graph: {exc}") from None
        n = len(order)
        nid = {id(x): i for i, x in enumerate(order)}
        ins: list[list[int]] = [None] * n  # type: ignore[list-item]
        outs: list[list[int]] = [[] for _ in range(n)]
        uses: list[list[tuple[Node, int]]] = [[] for _ in range(n)]
        slot_base = [0] * n
        total = 0
        for i, node in enumerate(order):
            if node.control_deps:
                raise PartitionError(f"cannot partition: node {node.ref} has control "
                                     f"dependencies, which MXNet's partitioner does not "
                                     f"support")
            inputs = node.inputs
            slot_base[i] = total
            total += len(inputs)
            row = []
            for k, e in enumerate(inputs):
                p = nid[id(e.node)]
                row.append(p)
                uses[p].append((node, k))
                o = outs[p]
                if not o or o[-1] != i:
                    o.append(i)
            ins[i] = row
        self.order, self.nid, self.ins, self.outs, self.uses = order, nid, ins, outs, uses
        self.slot_base = slot_base
        self.slot_pos = [0] * total
        self.out_pos = [0] * len(g.outputs)
        self.extra_pos: dict[tuple[int, int], int] = {}
        self._entry_order()
        heads_of: dict[int, list[int]] = {}
        for k, e in enumerate(g.outputs):
            heads_of.setdefault(nid[id(e.node)], []).append(k)
        self.heads_of = heads_of
        frozen = self.ctx.frozen
        self.can_join = [x.op is not None and id(x) not in frozen for x in order]
        self.names = {x.name for x in order}

    def _entry_order(self) -> None:
        """MXNet's ``TopSortEntries``: a position for every input slot and head.

        A DFS from the outputs over input slots: the slot through which a node
        is first reached is numbered after the node's own inputs, any other
        slot when it is met.
        """
        ins, slot_base, slot_pos, out_pos = self.ins, self.slot_base, self.slot_pos, \
            self.out_pos
        nid = self.nid
        visited = bytearray(len(ins))
        counter = 0
        for k, e in enumerate(self.graph.outputs):
            root = nid[id(e.node)]
            if visited[root]:
                out_pos[k] = counter
                counter += 1
                continue
            visited[root] = 1
            stack = [[root, 0, -k - 1]]
            while stack:
                top = stack[-1]
                v = top[0]
                i = top[1]
                row = ins[v]
                if i == len(row):
                    key = top[2]
                    if key < 0:
                        out_pos[-key - 1] = counter
                    else:
                        slot_pos[key] = counter
                    counter += 1
                    stack.pop()
                    continue
                top[1] = i + 1
                child = row[i]
                key = slot_base[v] + i
                if visited[child]:
                    slot_pos[key] = counter
                    counter += 1
                else:
                    visited[child] = 1
                    stack.append([child, 0, key])

    # ------------------------------------------------------------------------------
    # finding regions
    # ------------------------------------------------------------------------------
    def _find_regions(self) -> list[_Region]:
        order = self.order
        n = len(order)
        self.label = label = [-1] * n
        self.region_nodes: list[list[int]] = []
        self.span = _PrefixMax(n)  # region first node -> its last node
        can_join = self.can_join
        regions: list[_Region] = []
        verdicts: dict[int, tuple[SubgraphSelector, list[bool]]] = {}
        for i in range(n):
            if label[i] != -1 or not can_join[i]:
                continue
            sel = self._call(self.prop.create_selector, what="create_selector")
            ok = None
            if getattr(sel, "node_determined", False):
                cached = verdicts.get(id(sel))
                if cached is None or cached[0] is not sel:
                    ok = [bool(can_join[j] and self._ask(sel.select, order[j], what="select"))
                          for j in range(n)]
                    verdicts[id(sel)] = (sel, ok)
                else:
                    ok = cached[1]
                if not ok[i]:
                    continue
            elif not self._ask(sel.select, order[i], what="select"):
                continue
            tag = len(regions)
            pre = self._preselect(i, sel, tag, ok)
            if not pre:
                continue
            kept = self._filter(pre, sel)
            if len(kept) != len(pre):
                keep_set = set(kept)
                for v in pre:
                    if v not in keep_set:
                        label[v] = -1
            if not kept:
                continue
            kept.sort()
            filtered = len(kept) != len(pre)
            groups = self._components(kept) if self.prop.split_components else [kept]
            for group in groups:
                tag = len(regions)
                for v in group:
                    label[v] = tag
                if filtered or len(groups) > 1:
                    bad = self._cycle_through(group)
                    if bad is not None:
                        raise PartitionError(
                            f"{self.where}: the selector's filter kept nodes "
                            f"{_names(order, group)} that form a cycle through "
                            f"{order[bad].name!r}, which it dropped; a region must not "
                            f"feed itself through nodes outside it")
                    bad = self._contracted_cycle(group, tag)
                    if bad >= 0:
                        raise PartitionError(
                            f"{self.where}: the selector's filter kept nodes "
                            f"{_names(order, group)}, which together with an earlier "
                            f"subgraph would feed themselves (re-entering at "
                            f"{order[bad].name!r})")
                regions.append(_Region(group, sel, tag))
                self.region_nodes.append(group)
                self.span.raise_to(group[0], group[-1])
        return regions

    def _ask(self, fn, *nodes, what: str) -> bool:
        try:
            return bool(fn(*nodes))
        except MxcError:
            raise
        except Exception as exc:
            names = ", ".join(repr(x.name) for x in nodes)
            raise PartitionError(f"{self.where}: selector {what}({names}) raised "
                                 f"{type(exc).__name__}: {exc}") from exc

    def _preselect(self, seed: int, sel: SubgraphSelector, tag: int,
                   ok: list[bool] | None) -> list[int]:
        """Grow from *seed*, breaking cycles as MXNet does; returns sorted node numbers."""
        if ok is not None:
            return _Peeler(self, seed, ok, tag).run()
        label = self.label
        excluded: set[int] = set()
        while True:
            members, first, second = self._grow(seed, sel, tag, excluded)
            bad = self._excluded_node(first, second, tag)
            if bad < 0:
                bad = self._contracted_cycle(members, tag)
            if bad < 0:
                members.sort()
                return members
            for v in members:
                label[v] = -1
            if bad == seed or bad in excluded:
                # nothing left to exclude but the start node: MXNet retries until
                # it gives up and takes the start node alone
                return self._seed_alone(seed, tag)
            excluded.add(bad)
            self._call(sel.reset, what="reset")

    def _seed_alone(self, seed: int, tag: int) -> list[int]:
        """The start node as a region of its own (MXNet's last resort).

        Should even that close a cycle through earlier regions (MXNet would
        build a cyclic graph), the node is left out of every region.
        """
        self.label[seed] = tag
        if self._contracted_cycle([seed], tag) >= 0:
            self.label[seed] = -1
            return []
        return [seed]

    def _grow(self, seed: int, sel: SubgraphSelector, tag: int, excluded: set[int]):
        order, label, ins, outs, can_join = self.order, self.label, self.ins, self.outs, \
            self.can_join
        label[seed] = tag
        queue = deque([seed])
        members: list[int] = []
        first: dict[int, int] = {}   # boundary node -> largest member it feeds
        second: dict[int, int] = {}  # boundary node -> largest member feeding it
        while queue:
            cur = queue.popleft()
            members.append(cur)
            cur_node = order[cur]
            for p in ins[cur]:
                if label[p] != -1:
                    continue
                if can_join[p] and p not in excluded and \
                        self._ask(sel.select_input, cur_node, order[p], what="select_input"):
                    label[p] = tag
                    queue.append(p)
                elif first.get(p, -1) < cur:
                    first[p] = cur
            for q in outs[cur]:
                if label[q] != -1:
                    continue
                if can_join[q] and q not in excluded and \
                        self._ask(sel.select_output, cur_node, order[q], what="select_output"):
                    label[q] = tag
                    queue.append(q)
                elif second.get(q, -1) < cur:
                    second[q] = cur
        return members, first, second

    def _grow_determined(self, seed: int, ok: list[bool], tag: int, excluded: set[int]):
        """:meth:`_grow` for a node-determined selector (no selector calls)."""
        label, ins, outs = self.label, self.ins, self.outs
        label[seed] = tag
        members = [seed]
        first: dict[int, int] = {}
        second: dict[int, int] = {}
        qi = 0
        while qi < len(members):
            cur = members[qi]
            qi += 1
            for p in ins[cur]:
                if label[p] != -1:
                    continue
                if ok[p] and p not in excluded:
                    label[p] = tag
                    members.append(p)
                elif first.get(p, -1) < cur:
                    first[p] = cur
            for q in outs[cur]:
                if label[q] != -1:
                    continue
                if ok[q] and q not in excluded:
                    label[q] = tag
                    members.append(q)
                elif second.get(q, -1) < cur:
                    second[q] = cur
        return members, first, second


    def _filter(self, pre: list[int], sel: SubgraphSelector) -> list[int]:
        if type(sel).filter is SubgraphSelector.filter:
            return list(pre)
        order = self.order
        candidates = [order[v] for v in pre]
        try:
            kept = sel.filter(list(candidates))
        except MxcError:
            raise
        except Exception as exc:
            raise PartitionError(f"{self.where}: selector filter on candidates "
                                 f"{_names(order, pre)} raised {type(exc).__name__}: "
                                 f"{exc}") from exc
        if kept is None:
            raise PartitionError(f"{self.where}: selector filter returned None; it must "
                                 f"return the list of candidates to keep")
        allowed = {id(order[v]): v for v in pre}
        out: list[int] = []
        seen: set[int] = set()
        for x in kept:
            if not isinstance(x, Node):
                raise PartitionError(f"{self.where}: selector filter returned {x!r}, which is "
                                     f"not a node; it must return a subset of the candidates")
            v = allowed.get(id(x))
            if v is None:
                raise PartitionError(
                    f"{self.where}: selector filter returned node {x.name!r}, which is not "
                    f"among the pre-selected candidates {_names(order, pre)}; a filter may "
                    f"only drop nodes, never add any")
            if v not in seen:
                seen.add(v)
                out.append(v)
        return out

    def _components(self, nodes: list[int]) -> list[list[int]]:
        """Connected components of *nodes* (edges in either direction), each sorted."""
        rest = set(nodes)
        groups = []
        for start in nodes:
            if start not in rest:
                continue
            rest.discard(start)
            group = [start]
            queue = deque([start])
            while queue:
                c = queue.popleft()
                for x in self.ins[c] + self.outs[c]:
                    if x in rest:
                        rest.discard(x)
                        group.append(x)
                        queue.append(x)
            group.sort()
            groups.append(group)
        return groups


    def _overrides(self, hook: str) -> bool:
        return getattr(type(self.prop), hook) is not getattr(SubgraphProperty, hook)

