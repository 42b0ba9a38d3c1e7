"""Lay a :class:`~mxc.draw.model.Drawing` out with Graphviz ``dot`` (top to bottom).

Graphviz is the layout library (the ``dot`` program of the Debian/Ubuntu
``graphviz`` package, driven through the ``graphviz`` Python binding): it
handles thousands of nodes and boxes each region as a cluster.  :func:`to_dot`
writes the DOT text, :func:`render_svg` runs ``dot -Tsvg`` on it, and
:func:`compact` gives the same drawing with every region folded into one
node (the HTML view's "collapse all").

A region's title ("name  [backend]") is a text node inside its box, on the
rank of the region's first node, not the cluster's own label: Graphviz keeps
a cluster label clear of nothing, and edges into the box ran straight through
it, while it routes every edge around nodes.  Each node's tooltip carries its
op, attributes, weight names and shapes (what Netron shows for a node).
"""

from __future__ import annotations

import html
import textwrap

from ..errors import DependencyError
from .model import DNode, Drawing

#: region fill colours by backend (in order of first appearance), light enough for text
PALETTE = ("#cfe3ff", "#d5f0d0", "#ffe2c2", "#ead5f5", "#fff2b3", "#d0f0f0", "#f7d4dc")
HOST_COLOR = "#ffd8d8"
INSTALL = ("mxc draw needs Graphviz: install the `dot` program (apt-get install graphviz, "
           "brew install graphviz) and its Python binding (pip install graphviz, or "
           "pip install \"mxc[draw]\")")


def backend_colors(drawing: Drawing) -> dict[str, str]:
    return {b: PALETTE[i % len(PALETTE)] for i, b in enumerate(drawing.backends())}


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _q_lines(lines: list[str]) -> str:
    """A DOT string of several lines (Graphviz turns ``\\n`` into a line break)."""
    return '"' + "\\n".join(_q(line)[1:-1] for line in lines) + '"'


#: longest tooltip line (an attribute holding a long tuple is cut, saying so)
TOOLTIP_WIDTH = 160


def tooltip_lines(n: DNode) -> list[str]:
    """What pointing at *n* shows: op and name, the op's attributes, its weights with
    their shapes, then the node's other notes (shapes in and out, host reason)."""
    head = n.name if n.op in ("input", "output") else f"{n.op}  {n.name}"
    lines = [head] + ([n.detail] if n.detail else [])
    if n.attrs:
        lines.append("attributes:")
        lines += [f"  {k} = {v}" for k, v in n.attrs.items()]
    if n.weights:
        lines.append("weights:")
        lines += [f"  {name}: {shape}" for name, shape in n.weights]
    lines += n.notes
    return [x if len(x) <= TOOLTIP_WIDTH else x[:TOOLTIP_WIDTH - 5] + " ..." for x in lines]


def _node_line(n: DNode, extra: str = "") -> str:
    """*n*'s DOT statement; *extra*: more attributes (``, group=r0``)."""
    tooltip = _q_lines(tooltip_lines(n))
    if n.op in ("input", "output"):
        label = f"{n.op}: {n.name}"
        return (f'  {n.id} [label={_q(label)}, shape=ellipse, style=filled, '
                f'fillcolor="#eeeeee", tooltip={tooltip}{extra}];')
    label = f"<<b>{html.escape(n.op)}</b><br/><font point-size='9'>{html.escape(n.name)}</font>"
    for line in textwrap.wrap(n.detail, 72, break_on_hyphens=False):   # every op, no cut
        label += f"<br/><font point-size='8'>{html.escape(line)}</font>"
    label += ">"
    style = ('style="filled,dashed", fillcolor="' + HOST_COLOR + '", color="#c03030", '
             'penwidth=2' if n.host else f'style=filled, fillcolor="{n.fill or "white"}"')
    return f"  {n.id} [label={label}, shape=box, {style}, tooltip={tooltip}{extra}];"


def title_id(region_id: str) -> str:
    """The DOT id of a region's title node (``t_r0``)."""
    return f"t_{region_id}"


def to_dot(drawing: Drawing) -> str:
    """DOT text: top to bottom, one cluster per region, shapes on the edges."""
    colors = backend_colors(drawing)
    lines = ["digraph mxc {", "  rankdir=TB; newrank=true; nodesep=0.25; ranksep=0.35;",
             '  node [fontname="Helvetica", fontsize=11, margin="0.08,0.04"];',
             '  edge [fontname="Helvetica", fontsize=8, color="#555555", arrowsize=0.6];',
             f"  label={_q(drawing.title)}; labelloc=t; fontname=Helvetica;"]
    by_region: dict[str, list[DNode]] = {}
    for n in drawing.nodes:
        if n.region is None:
            lines.append(_node_line(n))
        else:
            by_region.setdefault(n.region, []).append(n)
    for r in drawing.regions:
        members = by_region.get(r.id, [])
        title = f"{r.name}  [{r.backend}]"
        lines.append(f"  subgraph cluster_{r.id} {{")
        lines.append(f"    label=\"\"; style=\"filled,rounded\"; "
                     f"fillcolor={_q(colors[r.backend])}; color=\"#333333\"; "
                     f"id={_q('cluster_' + r.id)};")
        lines.append(f"    {title_id(r.id)} [label={_q(title)}, shape=plaintext, fontsize=12, "
                     f"tooltip={_q_lines([title, f'{len(members)} node(s)'])}];")
        if members:   # beside the first node, the chain below kept straight (group)
            lines.append(f"    {{rank=same; {members[0].id} -> {title_id(r.id)} "
                         f"[style=invis];}}")
        for n in members:
            lines.append("  " + _node_line(n, f", group={r.id}"))
        lines.append("  }")
    for src, dst, label in drawing.edges:
        lines.append(f"  {src} -> {dst}" + (f" [label={_q(label)}];" if label else ";"))
    lines.append("}")
    return "\n".join(lines)


def compact(drawing: Drawing) -> Drawing:
    """*drawing* with every region one node (op counts as its detail)."""
    out = Drawing(drawing.title + " (regions collapsed)")
    colors = backend_colors(drawing)
    rep: dict[str, str] = {}
    for r in drawing.regions:
        members = [n for n in drawing.nodes if n.region == r.id]
        counts: dict[str, int] = {}
        for n in members:
            counts[n.op] = counts.get(n.op, 0) + 1
        detail = members[0].detail if len(members) == 1 and members[0].detail else (
            f"{len(members)} nodes: " + ", ".join(f"{k} x{v}" for k, v in sorted(counts.items())))
        node = DNode(f"c{r.id}", r.name, f"{r.backend} region", None, False, detail,
                     colors[r.backend])
        out.nodes.append(node)
        for n in members:
            rep[n.id] = node.id
    out.nodes.extend(n for n in drawing.nodes if n.region is None)
    seen = set()
    for src, dst, label in drawing.edges:
        a, b = rep.get(src, src), rep.get(dst, dst)
        if a != b and (a, b) not in seen:
            seen.add((a, b))
            out.edges.append((a, b, label))
    return out


def render_svg(drawing: Drawing) -> str:
    """The SVG ``dot`` makes of *drawing* (:class:`~mxc.errors.DependencyError` without
    Graphviz)."""
    try:
        import graphviz
    except ImportError:
        raise DependencyError(INSTALL) from None
    try:
        return graphviz.Source(to_dot(drawing)).pipe(format="svg", engine="dot").decode("utf-8")
    except graphviz.ExecutableNotFound:
        raise DependencyError(INSTALL) from None
