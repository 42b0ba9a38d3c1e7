"""Cycle checks of MXNet's partitioning: which region node to exclude, and the peeler.

A grown region must not feed itself through nodes outside it (the subgraph
node would become its own ancestor).  :class:`_CycleChecks` holds the
:class:`~.algorithm._Builder` methods that find such a path and pick the node
MXNet excludes; :class:`_Peeler` is mxc's incremental exclude-and-shrink loop
for ``node_determined`` selectors (see the cost notes in :mod:`.algorithm`).
"""

from __future__ import annotations

import heapq
from collections import deque

__all__: list[str] = []


class _CycleChecks:
    """Cycle-related methods of :class:`~.algorithm._Builder` (a mixin; uses its indexes)."""

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

    def __init__(self, b: _CycleChecks, seed: int, ok: list[bool], tag: int):
        # *b* is the driver's ``_Builder`` (a :class:`_CycleChecks`); typed by the
        # mixin so that this module never imports the driver (no import cycle)
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

