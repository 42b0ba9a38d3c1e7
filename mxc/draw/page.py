"""The self-contained HTML view of a drawing (opens offline: no script or font is fetched).

The page holds two SVGs laid out by Graphviz -- the full graph and the
compact one (every region one node) -- plus a small script of its own:

* a side panel: the backends with their colours, the host-node marking, and
  one checkbox per region that folds it (its nodes and inner edges hidden,
  the box kept with a "N nodes folded" note);
* "collapse all" switches to the compact layout, "expand all" back;
* a search box: nodes whose name or op contains the text are outlined, the
  count shown, and the first one scrolled into view (Enter: the next one);
* zoom buttons and Ctrl+wheel zoom;
* ``#collapse``, ``#fold=r0,r1`` and ``#search=TEXT`` in the URL open the page in
  that state.

``data-*`` attributes on the page (``data-regions``, ``data-nodes``) let tests
and tools check what was drawn without parsing the SVG.
"""

from __future__ import annotations

import html
import json

from .model import Drawing
from .render import HOST_COLOR, backend_colors, compact, render_svg

_STYLE = """
body{margin:0;font-family:Helvetica,Arial,sans-serif;display:flex;height:100vh}
#side{width:280px;padding:10px;border-right:1px solid #ccc;overflow:auto;font-size:13px;
 flex:none;background:#fafafa}
#main{flex:1;overflow:auto;position:relative;background:white}
#main svg{display:block}
/* Graphviz nests a node's shape as g.node > g > a > polygon (the tooltip's link):
   descendant selectors, or a hit is counted but never outlined */
g.node.hit polygon,g.node.hit path,g.node.hit ellipse{stroke:#ff00aa!important;
 stroke-width:4px!important;stroke-dasharray:none!important}
.folded{display:none}
.swatch{display:inline-block;width:14px;height:14px;border:1px solid #333;
 vertical-align:middle;margin-right:6px}
#regions label{display:block;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
button{margin:2px}
h1{font-size:15px;margin:0 0 8px 0;word-break:break-all}
"""

_SCRIPT = r"""
(function(){
  const meta = JSON.parse(document.getElementById('meta').textContent);
  const views = {full: document.getElementById('full'), compact: document.getElementById('compact')};
  let scale = 1, hits = [], hitIndex = 0;
  function svgOf(v){ return views[v].querySelector('svg'); }
  function current(){ return views.full.style.display === 'none' ? 'compact' : 'full'; }
  function nodeGroups(v){ return Array.from(svgOf(v).querySelectorAll('g.node')); }
  function title(g){ const t = g.querySelector('title'); return t ? t.textContent : ''; }
  function applyScale(){
    for (const v of Object.keys(views)) {
      const s = svgOf(v); if (!s) continue;
      if (!s.dataset.w) { s.dataset.w = s.getAttribute('width'); s.dataset.h = s.getAttribute('height'); }
      s.setAttribute('width', parseFloat(s.dataset.w) * scale + 'pt');
      s.setAttribute('height', parseFloat(s.dataset.h) * scale + 'pt');
    }
  }
  window.mxcZoom = function(f){ scale = f === 0 ? 1 : Math.max(0.05, scale * f); applyScale(); };
  views.main = document.getElementById('main');
  views.main.addEventListener('wheel', function(e){
    if (e.ctrlKey) { e.preventDefault(); mxcZoom(e.deltaY < 0 ? 1.1 : 1/1.1); } }, {passive:false});
  window.mxcShow = function(v){
    views.full.style.display = v === 'full' ? '' : 'none';
    views.compact.style.display = v === 'compact' ? '' : 'none';
    search();
  };
  function fold(rid, on){
    const members = new Set(meta.regions[rid].nodes);
    for (const g of nodeGroups('full')) if (members.has(title(g))) g.classList.toggle('folded', on);
    for (const g of svgOf('full').querySelectorAll('g.edge')) {
      const ends = title(g).split('->');
      if (ends.length === 2 && members.has(ends[0]) && members.has(ends[1])) g.classList.toggle('folded', on);
    }
    const box = svgOf('full').querySelector('#cluster_' + rid);
    if (!box) return;
    let note = box.querySelector('text.foldnote');
    if (on && !note) {
      const b = box.getBBox();
      note = document.createElementNS('http://www.w3.org/2000/svg', 'text');
      note.setAttribute('class', 'foldnote'); note.setAttribute('text-anchor', 'middle');
      note.setAttribute('x', b.x + b.width / 2); note.setAttribute('y', b.y + b.height / 2);
      note.setAttribute('font-size', '14');
      note.textContent = members.size + ' nodes folded';
      box.appendChild(note);
    } else if (!on && note) note.remove();
  }
  window.mxcFold = function(rid, on){ fold(rid, on); };
  window.mxcAll = function(collapse){
    for (const box of document.querySelectorAll('#regions input')) {
      box.checked = false; fold(box.dataset.region, false);
    }
    mxcShow(collapse ? 'compact' : 'full');
  };
  function search(){
    const q = document.getElementById('q').value.trim().toLowerCase();
    hits = []; hitIndex = 0;
    const v = current();
    for (const g of nodeGroups(v)) {
      const info = meta.nodes[title(g)] || ['', ''];
      const match = q !== '' && (info[0].toLowerCase().includes(q) || info[1].toLowerCase().includes(q));
      g.classList.toggle('hit', match);
      if (match) hits.push(g);
    }
    document.getElementById('count').textContent = q === '' ? '' : hits.length + ' match(es)';
    if (hits.length) hits[0].scrollIntoView({block: 'center', inline: 'center'});
  }
  document.getElementById('q').addEventListener('input', search);
  document.getElementById('q').addEventListener('keydown', function(e){
    if (e.key === 'Enter' && hits.length) {
      hitIndex = (hitIndex + 1) % hits.length;
      hits[hitIndex].scrollIntoView({block: 'center', inline: 'center'});
    }
  });
  mxcShow('full');
  // #collapse, #fold=r0,r2 and #search=TEXT open the page in that state (links, tests)
  for (const part of decodeURIComponent(location.hash.slice(1)).split('&')) {
    const [key, value] = part.split('=');
    if (key === 'collapse') mxcAll(true);
    if (key === 'fold') for (const rid of (value || '').split(',')) {
      const box = document.querySelector('#regions input[data-region="' + rid + '"]');
      if (box) { box.checked = true; fold(rid, true); }
    }
    if (key === 'search') { document.getElementById('q').value = value || ''; search(); }
  }
})();
"""


def to_html(drawing: Drawing) -> str:
    """The page (see the module docstring); Graphviz lays out both views."""
    full_svg = _strip_prolog(render_svg(drawing))
    compact_svg = _strip_prolog(render_svg(compact(drawing))) if drawing.regions else full_svg
    colors = backend_colors(drawing)
    meta = {"nodes": {n.id: [n.name, n.op] for n in drawing.nodes},
            "regions": {r.id: {"name": r.name, "backend": r.backend, "nodes": r.nodes}
                        for r in drawing.regions}}
    for r in drawing.regions:     # the compact view's node of each region
        meta["nodes"][f"c{r.id}"] = [r.name, f"{r.backend} region"]
    legend = "".join(f'<div><span class="swatch" style="background:{c}"></span>{html.escape(b)}'
                     f'</div>' for b, c in colors.items())
    hosts = sum(1 for n in drawing.nodes if n.host)
    if hosts:
        legend += (f'<div><span class="swatch" style="background:{HOST_COLOR};border:2px dashed '
                   f'#c03030"></span>host ({hosts} node(s) outside every region)</div>')
    regions = "".join(
        f'<label title="{html.escape(r.name)}"><input type="checkbox" data-region="{r.id}" '
        f'onchange="mxcFold(this.dataset.region, this.checked)"> '
        f'<span class="swatch" style="background:{colors[r.backend]}"></span>'
        f'{html.escape(r.name)} ({len(r.nodes)})</label>' for r in drawing.regions)
    region_names = json.dumps([r.name for r in drawing.regions])
    n_ops = sum(1 for n in drawing.nodes if n.op not in ("input", "output"))
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{html.escape(drawing.title)}</title>
<style>{_STYLE}</style></head>
<body data-regions='{html.escape(region_names, quote=True)}' data-nodes="{n_ops}">
<div id="side"><h1>{html.escape(drawing.title)}</h1>
<div>{n_ops} node(s), {len(drawing.regions)} region(s)</div>
<p><input id="q" type="search" placeholder="search node names / ops" style="width:95%">
<span id="count"></span></p>
<div><button onclick="mxcAll(true)">collapse all</button>
<button onclick="mxcAll(false)">expand all</button></div>
<div><button onclick="mxcZoom(1.25)">zoom +</button><button onclick="mxcZoom(0.8)">zoom -</button>
<button onclick="mxcZoom(0)">1:1</button></div>
<h2 style="font-size:13px">backends</h2>{legend or '<div>no regions</div>'}
<h2 style="font-size:13px">regions (tick to fold)</h2><div id="regions">{regions or 'none'}</div>
</div>
<div id="main"><div id="full">{full_svg}</div><div id="compact" style="display:none">{compact_svg}</div></div>
<script type="application/json" id="meta">{_json_for_script(meta)}</script>
<script>{_SCRIPT}</script>
</body></html>
"""


def _strip_prolog(svg: str) -> str:
    """The ``<svg>`` element alone (no XML declaration or DOCTYPE inside HTML)."""
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg


def _json_for_script(value) -> str:
    return json.dumps(value).replace("</", "<\\/")
