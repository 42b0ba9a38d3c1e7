"""Replacing an accepted region by one subgraph node (MXNet's entry naming and order).

:class:`_Replacement` holds the :class:`~.algorithm._Builder` methods that cut
the region's input and output entries, build the nested graph and rewire the
consumers; the small helpers at the end are shared with the driver.
"""

from __future__ import annotations

from typing import Iterable

from ...errors import PartitionError
from ..ir import Entry, Graph, Node
from ._graphutil import post_order_fast
from .selector import SubgraphSelector

__all__: list[str] = []


class _Region:
    """One grown region: its node numbers, the selector that grew it and its tag.

    It lives here rather than in :mod:`.algorithm` (the driver that creates
    regions) because :meth:`_Replacement._create` consumes one: the driver
    imports this module, never the other way round.
    """

    __slots__ = ("nids", "selector", "label")

    def __init__(self, nids: list[int], selector: SubgraphSelector, label: int):
        self.nids = nids
        self.selector = selector
        self.label = label


class _Replacement:
    """Region-replacement methods of :class:`~.algorithm._Builder` (a mixin)."""

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
        # dedup shares one variable per distinct *entry*; MXNet keys this by the entry's
        # name, which would merge the outputs of two nodes that share a name (a Gluon block
        # called twice), so the variables keep MXNet's names but are keyed by identity
        shared: dict[tuple[int, int], Node] = {}
        for _, node, k, e in cut:
            base_name = self._entry_name(e)
            c = count.get(base_name)
            count[base_name] = 0 if c is None else c + 1
            ident = e.key
            var = shared.get(ident) if dedup else None
            if var is None:
                var = Node(None, _unique(f"{base_name}{count[base_name]}", inner_names))
                inner_names.add(var.name)
                if ident not in shared:
                    shared[ident] = var
                    uniq_orig.append(e)
                    uniq_vars.append(var)
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
