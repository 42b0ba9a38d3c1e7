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

import heapq
import inspect
from collections import deque
from typing import Iterable

from ...errors import GraphError, MxcError, PartitionError
from ..ir import Entry, Graph, Node
from ._graphutil import gc_paused, post_order_fast
from .property import PartitionContext, SubgraphProperty
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


class _Region:
    __slots__ = ("nids", "selector", "label")

    def __init__(self, nids: list[int], selector: SubgraphSelector, label: int):
        self.nids = nids
        self.selector = selector
        self.label = label


class _Builder:
    """One property's run.  Nodes are numbered 0..n-1 in topological order.

    Per node number: ``ins`` (producer numbers per input slot), ``outs``
    (distinct consumer numbers, increasing), ``uses`` ((consumer node,
    slot) pairs, kept current while regions are replaced), ``label``
    (region tag or -1).  Entry positions (MXNet's ``TopSortEntries``) are
    ``slot_pos[slot_base[n] + k]`` for input slot *k* of node *n*,
    ``out_pos[k]`` for graph output *k*, and ``extra_pos[(id(node), k)]``
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
                raise PartitionError(f"cannot partition: node {node.name!r} has control "
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

    def _excluded_node(self, first: dict[int, int], second: dict[int, int], tag: int) -> int:
        """The region node MXNet excludes to break a cycle, or -1 if there is none.

        *first*/*second*: boundary node -> largest member it feeds / that
        feeds it.  A boundary node in both is a cycle through it; a boundary
        node only fed by the region ("source") that reaches, avoiding the
        region, a boundary node feeding it ("target") closes a cycle too.
        Each cycle proposes the largest member adjacent to its two boundary
        nodes; the largest proposal is excluded.
        """
        worst = -1
        top_target = -1
        for k, fed in first.items():
            feeder = second.get(k)
            if feeder is not None:
                if fed > worst:
                    worst = fed
                if feeder > worst:
                    worst = feeder
            if k > top_target:
                top_target = k
        if top_target < 0:
            return worst
        label = self.label
        heap = [k for k in second if k < top_target and k not in first and label[k] != tag]
        if not heap:
            return worst
        outs = self.outs
        best = {k: second[k] for k in heap}
        heapq.heapify(heap)
        while heap:
            u = heapq.heappop(heap)
            val = best[u]
            for q in outs[u]:
                if q > top_target:
                    break
                fed = first.get(q)
                if fed is not None:
                    cand = fed if fed > val else val
                    if cand > worst:
                        worst = cand
                if label[q] == tag:
                    continue
                old = best.get(q)
                if old is None:
                    best[q] = val
                    heapq.heappush(heap, q)
                elif val > old:
                    best[q] = val
        return worst

    def _contracted_cycle(self, members: list[int], tag: int) -> int:
        """A region node to exclude so that the region, contracted together with
        the regions found before it, makes no cycle; -1 when there is none.

        MXNet's check (:meth:`_excluded_node`) ignores nodes already in other
        regions, so it can accept a region that, once it and an earlier region
        are both replaced by subgraph nodes, feeds itself -- MXNet then builds
        a cyclic graph.  Only in that case does this check find something: a
        path leaving the region and re-entering it, where entering an earlier
        region counts as reaching all of that region's nodes.  The largest
        region node fed by such a path is excluded (as MXNet excludes the
        largest node its own check finds).
        """
        label, outs, ins = self.label, self.outs, self.ins
        top = max(members)
        # real edges only go up; past *limit* no path can come back down
        # into the region, except through an earlier region that starts
        # below *top* -- and those end at or below *limit*
        limit = max(top, self.span.upto(top - 1))
        regions = self.region_nodes
        reached: set[int] = set()
        heap: list[int] = []
        seen_regions: set[int] = set()

        def visit(q: int) -> None:
            r = label[q]
            if r >= 0 and r != tag and r < len(regions):
                # an earlier region: once contracted, all its nodes are reached
                if r in seen_regions:
                    return
                seen_regions.add(r)
                nodes = regions[r]
                if nodes[0] > top:
                    return  # entirely above the region: cannot lead back
                for w in nodes:
                    if w <= limit and w not in reached:
                        reached.add(w)
                        heapq.heappush(heap, w)
                return
            if q <= limit and q not in reached:
                reached.add(q)
                heapq.heappush(heap, q)

        for m in members:
            for q in outs[m]:
                if label[q] != tag:
                    visit(q)
        while heap:
            u = heapq.heappop(heap)
            for q in outs[u]:
                if label[q] != tag:
                    visit(q)
        if not reached:
            return -1
        worst = -1
        for m in members:
            if m > worst and any(p in reached for p in ins[m]):
                worst = m
        return worst

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

    def _cycle_through(self, group: list[int]) -> int | None:
        """A node outside *group* on a path leaving and re-entering it, or None."""
        outs = self.outs
        members = set(group)
        top = group[-1]
        heap: list[int] = []
        via: dict[int, int] = {}
        for v in group:
            for q in outs[v]:
                if q not in members and q < top and q not in via:
                    via[q] = q
                    heap.append(q)
        heapq.heapify(heap)
        while heap:
            u = heapq.heappop(heap)
            for q in outs[u]:
                if q > top:
                    break
                if q in members:
                    return via[u]
                if q not in via:
                    via[q] = via[u]
                    heapq.heappush(heap, q)
        return None

    # ------------------------------------------------------------------------------
    # replacing a region
    # ------------------------------------------------------------------------------
    def _entry_name(self, e: Entry) -> str:
        """What ``list_outputs()`` calls entry *e* (MXNet's input variable base name)."""
        src = e.node
        if src.op is None:
            return src.name
        names = self._names_cache.get(id(src))
        if names is None:
            names = self._names_cache[id(src)] = list(src.opdef.output_names(src.params))
        suffix = names[e.index] if e.index < len(names) else f"output{e.index}"
        return f"{src.name}_{suffix}"

    def _create(self, region: _Region, rid: int) -> None:
        order, label = self.order, self.label
        nid_get = self.nid.get
        slot_pos, slot_base = self.slot_pos, self.slot_base
        tag = region.label
        members = region.nids
        dedup = self.ctx.dedup_subgraph
        graph = self.graph

        # input entries: region slots whose producer is outside the region
        cut: list[tuple[int, Node, int, Entry]] = []
        for v in members:
            node = order[v]
            base = slot_base[v]
            for k, e in enumerate(node.inputs):
                j = nid_get(id(e.node))
                if j is None or label[j] != tag:
                    cut.append((slot_pos[base + k], node, k, e))
        cut.sort(key=_first)

        inner_names = {order[v].name for v in members}
        orig: list[Entry] = []
        uniq_orig: list[Entry] = []
        variables: list[Node] = []
        uniq_vars: list[Node] = []
        count: dict[str, int] = {}
        shared: dict[str, Node] = {}
        for _, node, k, e in cut:
            base_name = self._entry_name(e)
            c = count.get(base_name)
            if c is None:
                count[base_name] = 0
                var = Node(None, _unique(f"{base_name}0", inner_names))
                inner_names.add(var.name)
                shared[base_name] = var
                uniq_orig.append(e)
                uniq_vars.append(var)
            else:
                count[base_name] = c + 1
                if dedup:
                    var = shared[base_name]
                else:
                    var = Node(None, _unique(f"{base_name}{c + 1}", inner_names))
                    inner_names.add(var.name)
            orig.append(e)
            variables.append(var)
            node.set_input(k, Entry(var, 0, 0))

        # output entries: slots outside the region (and heads) reading region nodes
        uses: list[tuple[int, Node | None, int]] = []
        outputs = graph.outputs
        extra_pos = self.extra_pos
        heads_of = self.heads_of
        for v in members:
            for consumer, k in self.uses[v]:
                j = nid_get(id(consumer))
                if j is None:
                    uses.append((extra_pos[(id(consumer), k)], consumer, k))
                elif label[j] != tag:
                    uses.append((slot_pos[slot_base[j] + k], consumer, k))
            if v in heads_of:
                for k in heads_of[v]:
                    if outputs[k].node is order[v]:
                        uses.append((self.out_pos[k], None, k))
        uses.sort(key=_first)
        heads_all = [outputs[k] if c is None else c.inputs[k] for _, c, k in uses]
        if dedup:
            heads: list[Entry] = []
            for e in heads_all:
                if not heads or not _same_entry(heads[-1], e):
                    heads.append(e)
            new_vars, new_inputs = uniq_vars, uniq_orig
        else:
            heads = heads_all
            new_vars, new_inputs = variables, orig
        if self._overrides("init_subgraph_inputs"):
            self._call(self.prop.init_subgraph_inputs, new_vars, new_inputs,
                       what="init_subgraph_inputs")
        subgraph = Graph(post_order_fast(e.node for e in heads), list(heads))
        args = (subgraph, rid, region.selector) if self._with_selector("create_subgraph_node") \
            else (subgraph, rid)
        new = self._call(self.prop.create_subgraph_node, *args,
                         what=lambda: f"create_subgraph_node (subgraph {rid}: "
                                      f"{_names(order, members)})")
        if new is None:
            for (_, node, k, _e), e in zip(cut, orig):
                node.set_input(k, e)
            return
        if not isinstance(new, Node):
            raise PartitionError(f"{self.where}: create_subgraph_node returned {new!r}, not a "
                                 f"Node (or None to reject the subgraph)")
        if not new.subgraphs:
            new.subgraphs = [subgraph]
        if new.name in self.names:
            new.name = _unique(new.name, self.names)
        self.names.add(new.name)

        # consumers read the new node
        index = 0
        prev = None
        for i, (_, consumer, k) in enumerate(uses):
            if dedup:
                e = heads_all[i]
                if prev is not None and not _same_entry(prev, e):
                    index += 1
                prev = e
            else:
                index = i
            entry = Entry(new, index, 0)
            if consumer is None:
                outputs[k] = entry
            else:
                consumer.set_input(k, entry)
        new.inputs = list(new_inputs)
        key = id(new)
        for i in range(len(new_inputs)):
            extra_pos[(key, i)] = cut[i][0]
        # producers now feed the new node instead of the region
        uses_of = self.uses
        done: set[int] = set()
        for i, e in enumerate(new_inputs):
            j = nid_get(id(e.node))
            if j is None:
                continue
            if j not in done:
                done.add(j)
                kept = []
                for u in uses_of[j]:
                    jj = nid_get(id(u[0]))
                    if jj is None or label[jj] != tag:
                        kept.append(u)
                uses_of[j] = kept
            uses_of[j].append((new, i))

    def _overrides(self, hook: str) -> bool:
        return getattr(type(self.prop), hook) is not getattr(SubgraphProperty, hook)


class _PrefixMax:
    """Fenwick tree: raise a value at a position, query the max over a prefix."""

    __slots__ = ("tree",)

    def __init__(self, n: int):
        self.tree = [-1] * (n + 1)

    def raise_to(self, i: int, value: int) -> None:
        tree = self.tree
        i += 1
        while i < len(tree):
            if tree[i] < value:
                tree[i] = value
            i += i & -i

    def upto(self, i: int) -> int:
        """Max over positions 0..i (-1 if none)."""
        tree = self.tree
        best = -1
        i += 1
        while i > 0:
            if tree[i] > best:
                best = tree[i]
            i -= i & -i
        return best


class _Grp:
    """A connectivity search (see :meth:`_Peeler._cut_off`)."""

    __slots__ = ("nodes", "frontier", "into")

    def __init__(self, start: int):
        self.nodes = [start]
        self.frontier = deque([start])
        self.into: _Grp | None = None

    def root(self) -> "_Grp":
        g = self
        while g.into is not None:
            g = g.into
        return g


class _Peeler:
    """MXNet's exclude-and-regrow loop for one start node, done incrementally.

    For a node-determined selector the region grown after excluding node
    *x* is the start node's connected component of the previous region
    without *x*, so instead of growing from scratch the region loses *x* and
    whatever *x* alone connected (found by searching from *x*'s neighbours
    in lockstep, which costs the size of the smaller sides).  The boundary
    bookkeeping is updated for the nodes around the removed ones only, and
    the cycle check reuses the previous one below the lowest changed node.

    The excluded node is that of :meth:`_Builder._excluded_node`, restated:
    every cycle MXNet detects proposes the largest region node fed by its
    re-entry boundary node *j*, so the excluded node is the largest
    ``first[j]`` over boundary nodes *j* that feed the region and are either
    fed by it or reachable, avoiding the region, from a boundary node fed by
    it but not feeding it (a "source").
    """

    def __init__(self, b: "_Builder", seed: int, ok: list[bool], tag: int):
        self.b = b
        self.seed = seed
        self.ok = ok
        self.tag = tag

    def run(self) -> list[int]:
        b, tag, seed = self.b, self.tag, self.seed
        label = b.label
        members, first, second = b._grow_determined(seed, self.ok, tag, set())
        self.first, self.second = first, second
        if not first or not second:
            # MXNet's check finds nothing; only the contracted check may
            x = b._contracted_cycle(members, tag)
            if x < 0:
                members.sort()
                return members
        # reach: non-region nodes reachable from a source avoiding the region
        reach: dict[int, bool] = {}
        self.reach = reach
        self.targets = [-j for j in first]  # max-heap of boundary nodes feeding the region
        heapq.heapify(self.targets)
        top = self._top_target()
        sources = [k for k in second if k not in first and k < top]
        heapq.heapify(sources)
        for k in sources:
            reach[k] = True
        outs = b.outs
        while sources:
            u = heapq.heappop(sources)
            for q in outs[u]:
                if q > top:
                    break
                if label[q] != tag and q not in reach:
                    reach[q] = True
                    heapq.heappush(sources, q)
        self.done_to = top
        self.heap = [(-first[j], j) for j in first if self._reenters(j)]
        heapq.heapify(self.heap)
        while True:
            x = self._worst()
            if x < 0:
                x = b._contracted_cycle(self._members(), tag)
            if x < 0:
                break
            if x == seed:
                for v in self._members():
                    label[v] = -1
                return b._seed_alone(seed, tag)
            self._remove(x)
        out = self._members()
        out.sort()
        return out

    def _members(self) -> list[int]:
        label, tag = self.b.label, self.tag
        seen = {self.seed}
        out = [self.seed]
        queue = deque(out)
        ins, outs = self.b.ins, self.b.outs
        while queue:
            c = queue.popleft()
            for w in ins[c] + outs[c]:
                if label[w] == tag and w not in seen:
                    seen.add(w)
                    out.append(w)
                    queue.append(w)
        return out

    def _top_target(self) -> int:
        t = self.targets
        first = self.first
        while t and -t[0] not in first:
            heapq.heappop(t)
        return -t[0] if t else -1

    def _reenters(self, j: int) -> bool:
        if j not in self.first:
            return False
        if j in self.second:
            return True
        label, tag, reach = self.b.label, self.tag, self.reach
        return any(p in reach and label[p] != tag for p in self.b.ins[j])

    def _worst(self) -> int:
        heap, first = self.heap, self.first
        while heap:
            v, j = heap[0]
            if first.get(j) == -v and self._reenters(j):
                return -v
            heapq.heappop(heap)
        return -1

    def _remove(self, x: int) -> None:
        b, tag = self.b, self.tag
        label, ins, outs = b.label, b.ins, b.outs
        gone = [x] + self._cut_off(x)
        for r in gone:
            label[r] = -1
        changed: set[int] = set(gone)
        for r in gone:
            for w in ins[r]:
                if label[w] == -1:
                    changed.add(w)
            for w in outs[r]:
                if label[w] == -1:
                    changed.add(w)
        first, second = self.first, self.second
        for w in changed:
            fm = -1
            for q in outs[w]:
                if label[q] == tag and q > fm:
                    fm = q
            sm = -1
            for p in ins[w]:
                if label[p] == tag and p > sm:
                    sm = p
            if fm >= 0:
                if first.get(w) is None:
                    heapq.heappush(self.targets, -w)
                first[w] = fm
            else:
                first.pop(w, None)
            if sm >= 0:
                second[w] = sm
            else:
                second.pop(w, None)
        # recompute reach above the lowest change, reusing it below
        lo = min(changed)
        top = self._top_target()
        if top > self.done_to:
            lo = min(lo, self.done_to + 1)
        reach = self.reach
        recheck = {w for w in changed if w in first}
        for u in range(lo, top + 1):
            if label[u] == tag:
                reach.pop(u, None)
                continue
            r = u in second and u not in first
            if not r:
                for p in ins[u]:
                    if p in reach and label[p] != tag:
                        r = True
                        break
            if r:
                reach[u] = True
            else:
                reach.pop(u, None)
            if u in first:
                recheck.add(u)
        self.done_to = max(self.done_to, top)
        heap = self.heap
        for j in recheck:
            if self._reenters(j):
                heapq.heappush(heap, (-first[j], j))

    def _cut_off(self, x: int) -> list[int]:
        """Region nodes that only *x* connected to the start node."""
        b, tag, seed = self.b, self.tag, self.seed
        label, ins, outs = b.label, b.ins, b.outs
        label[x] = -2  # out of the region while searching
        starts = []
        for w in ins[x] + outs[x]:
            if label[w] == tag and w not in starts:
                starts.append(w)
        if len(starts) < 2:
            return []
        owner: dict[int, _Grp] = {}
        groups: list[_Grp] = []
        for w in starts:
            g = _Grp(w)
            owner[w] = g
            groups.append(g)
        live = set(groups)
        while len(live) > 1:
            for g in list(live):
                if g not in live:
                    continue
                if not g.frontier:
                    live.discard(g)
                    continue
                u = g.frontier.popleft()
                for w in ins[u] + outs[u]:
                    if label[w] != tag:
                        continue
                    h = owner.get(w)
                    if h is None:
                        owner[w] = g
                        g.nodes.append(w)
                        g.frontier.append(w)
                        continue
                    h = h.root()
                    if h is g:
                        continue
                    big, small = (g, h) if len(g.nodes) >= len(h.nodes) else (h, g)
                    small.into = big
                    big.nodes.extend(small.nodes)
                    big.frontier.extend(small.frontier)
                    small.nodes = []
                    small.frontier = deque()
                    live.discard(small)
                    live.add(big)
                    g = big
                if not g.frontier:
                    live.discard(g)
                if len(live) <= 1:
                    break
        roots = []
        for g in groups:
            r = g.root()
            if r not in roots:
                roots.append(r)
        home = owner[seed].root() if seed in owner else None
        if home is None or home.frontier:
            # the start node is on the side still being searched: every
            # finished side is cut off
            return [v for r in roots if r is not home and not r.frontier for v in r.nodes]
        # the start node's side is complete: everything else is cut off
        cut = []
        for r in roots:
            if r is home:
                continue
            while r.frontier:
                u = r.frontier.popleft()
                for w in ins[u] + outs[u]:
                    if label[w] == tag and w not in owner:
                        owner[w] = r
                        r.nodes.append(w)
                        r.frontier.append(w)
            cut.extend(r.nodes)
        return cut


def _first(t):
    return t[0]


def _same_entry(a: Entry, b: Entry) -> bool:
    return a.node is b.node and a.index == b.index and a.version == b.version


def _unique(name: str, taken: set[str]) -> str:
    """*name*, or *name* with a numeric suffix if a node already uses it."""
    if name not in taken:
        return name
    i = 1
    while f"{name}_{i}" in taken:
        i += 1
    return f"{name}_{i}"


def _names(order: list[Node], nids: Iterable[int], limit: int = 8) -> str:
    nids = list(nids)
    shown = ", ".join(repr(order[v].name) for v in nids[:limit])
    if len(nids) > limit:
        shown += f", ... ({len(nids)} nodes)"
    return f"[{shown}]"
