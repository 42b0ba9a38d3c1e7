"""``mxc draw``: pictures of models, partitions and artifacts, checked as a person sees them.

The drawings are rendered by Chromium (Debian's ``chromium`` package; the
tests that need it skip, saying so, when it is absent): the screenshot must
not be blank (many distinct colours, a good share of non-white pixels, the
region fill colour present) and the DOM after the page's script ran must hold
every region (its box and its name) and react to ``#search=`` / ``#collapse``.
A search match must be *visibly* outlined: the screenshot holds the outline
colour exactly around the matched node's box, and nowhere without a match.
The SVG geometry is checked too: region boxes inside the picture, every node
inside its own box and outside the others, and no edge through a region box it
neither enters nor leaves, nor through any region's title.  Node tooltips carry
the op's attributes and its weights' shapes (checked against the symbol JSON and
the ``.params`` file).  Graphviz (``dot`` and its Python binding) lays the
graphs out.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from mxc.cli import main

graphviz = pytest.importorskip("graphviz", reason="mxc draw needs the graphviz Python binding")
if shutil.which("dot") is None:
    pytest.skip("mxc draw needs Graphviz's dot program (apt-get install graphviz)",
                allow_module_level=True)

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)
needs_browser = pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium "
                                   "(apt-get install chromium) to render the page")


@pytest.fixture
def resnet():
    from conftest import require_corpus
    return require_corpus("models/resnet18_v1")


def _browser(url: str, *args: str) -> subprocess.CompletedProcess:
    """Headless Chromium on *url*, in a new empty profile, nothing fetched from the network."""
    with tempfile.TemporaryDirectory(prefix="mxc-chromium-") as profile:
        return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                               "--disable-quic", "--no-first-run", "--disable-sync",
                               "--disable-background-networking", "--disable-component-update",
                               f"--user-data-dir={profile}", "--hide-scrollbars",
                               "--force-device-scale-factor=1", "--window-size=1400,1000",
                               *args, url], capture_output=True, text=True, timeout=120)


def _screenshot(page: Path, png: Path, fragment: str = "") -> np.ndarray:
    from PIL import Image
    r = _browser(page.as_uri() + fragment, f"--screenshot={png}")
    assert png.is_file(), r.stderr[-2000:]
    return np.asarray(Image.open(png).convert("RGB"))


def _dom(page: Path, fragment: str = "") -> str:
    r = _browser(page.as_uri() + fragment, "--virtual-time-budget=5000", "--dump-dom")
    assert r.returncode == 0 and "<svg" in r.stdout, r.stderr[-2000:]
    return r.stdout


def _not_blank(img: np.ndarray, fill: str) -> None:
    flat = img.reshape(-1, 3)
    assert len(np.unique(flat, axis=0)) > 50                      # text, lines, fills
    assert (flat.min(axis=1) < 200).mean() > 0.01                 # something dark drawn
    rgb = tuple(int(fill[i:i + 2], 16) for i in (1, 3, 5))
    assert (np.abs(flat.astype(int) - rgb).sum(axis=1) < 8).mean() > 0.02   # region fills


def _partition(resnet, tmp_path, backend, *options) -> Path:
    out = tmp_path / f"r18-{backend}.json"
    assert main(["partition", str(resnet / "symbol.json"), "--params",
                 str(resnet / "model.params"), "--shape", "data=1,3,224,224", "--backend",
                 backend, *options, "-o", str(out)]) == 0
    return out


@pytest.mark.corpus
@needs_browser
def test_resnet18_tvm_partition_in_the_browser(resnet, tmp_path, capsys):
    pytest.importorskip("tvm")
    part = _partition(resnet, tmp_path, "tvm")
    page = tmp_path / "tvm.html"
    assert main(["draw", str(part), "--shape", "data=1,3,224,224", "-o", str(page)]) == 0
    assert "68 node(s), 1 region(s) (tvm)" in capsys.readouterr().out
    text = page.read_text()
    assert not re.search(r"""(src|href)=["']?https?:""", text)     # self-contained
    from mxc.draw.render import PALETTE
    img = _screenshot(page, tmp_path / "tvm.png")
    _not_blank(img, PALETTE[0])
    dom = _dom(page, "#search=conv0")
    assert 'id="cluster_r0"' in dom and "tvm_subgraph0" in dom
    assert "1x64x112x112" in dom                                      # shapes on edges
    inner = json.loads(part.read_text())["nodes"]
    (region,) = [n for n in inner if n["op"] == "_tvm_subgraph"]
    want = sum("conv0" in n["name"] for n in region["subgraphs"][0]["nodes"]
               if n["op"] != "null")
    hits = re.findall(r'class="node hit"', dom)
    assert want > 1 and len(hits) == want and f"{want} match(es)" in dom
    count, _ = _hit_box(_screenshot(page, tmp_path / "tvm-conv0.png", "#search=conv0"))
    assert count > 500                                   # the matches are outlined on screen
    assert _geometry_faults(text) == []
    # an op inside the region: its attributes and its weight's shape (from model.params)
    from mxc.frontend.params import load_params, split_arg_aux
    arg, _ = split_arg_aux(load_params(resnet / "model.params"))
    start = text.index("<svg")
    conv = _tooltips(text[start:text.index("</svg>", start) + 6])["resnetv10_conv0_fwd"]
    (node,) = [n for n in region["subgraphs"][0]["nodes"] if n["name"] == "resnetv10_conv0_fwd"]
    assert all(f"  {k} = {v}" in conv for k, v in node["attrs"].items())
    shape = "x".join(map(str, arg["resnetv10_conv0_weight"].shape))
    assert f"  resnetv10_conv0_weight: {shape}" in conv


@pytest.mark.corpus
@needs_browser
def test_resnet18_many_regions_host_nodes_and_collapse(resnet, tmp_path, capsys):
    part = _partition(resnet, tmp_path, "default", "--option",
                      "op_names=Convolution,BatchNorm,Activation")
    names = [n["name"] for n in json.loads(part.read_text())["nodes"] if n["op"] == "_CachedOp"]
    assert len(names) > 5
    page = tmp_path / "default.html"
    assert main(["draw", str(part), "-o", str(page)]) == 0
    out = capsys.readouterr().out
    assert f"{len(names)} region(s) (default)" in out and "host node(s)" in out
    img = _screenshot(page, tmp_path / "default.png")
    from mxc.draw.render import PALETTE
    _not_blank(img, PALETTE[0])
    dom = _dom(page)
    for i, name in enumerate(names):                  # every region: its box and its name
        assert f'id="cluster_r{i}"' in dom and name in dom
    assert "host (" in dom                            # the legend marks host nodes
    assert _geometry_faults(page.read_text()) == []
    collapsed = _dom(page, "#collapse")
    assert re.search(r'<div id="full" style="display: none;?">', collapsed)
    _screenshot(page, tmp_path / "default-collapsed.png", "#collapse")


def test_custom_partitioner_drawing_as_svg(tmp_path):
    path = _custom_partition(tmp_path)
    svg = tmp_path / "custom.svg"
    assert main(["draw", str(path), "--shape", "a=2,3", "-o", str(svg)]) == 0
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") or "<svg" in text[:500]
    assert "_op0" in text and "[draw_test_op]" in text               # region box and backend
    assert "2x3" in text                                             # shapes on edges
    groups = text.split('class="node"')
    (sin_node,) = [g for g in groups if ">sin0<" in g]               # the node outside ...
    assert "#ffd8d8" in sin_node and "stroke-dasharray" in sin_node  # ... marked as host
    (exp_node,) = [g for g in groups if ">exp0<" in g]
    assert "#ffd8d8" not in exp_node


def test_a_thousand_nodes(tmp_path):
    from mxc import sym as S
    x = S.var("data")
    for i in range(1000):
        x = S.relu(x) if i % 2 else S.exp(x)
    path = tmp_path / "long-symbol.json"
    x.save(str(path))
    page = tmp_path / "long.html"
    assert main(["draw", str(path), "-o", str(page)]) == 0
    assert page.stat().st_size > 100_000 and 'data-nodes="1000"' in page.read_text()


def test_draw_without_graphviz_is_one_line(tmp_path, monkeypatch, capsys):
    import sys
    monkeypatch.setitem(sys.modules, "graphviz", None)
    from mxc.cli import main as cli_main
    rc = cli_main(["draw", str(Path(__file__).parents[2] / "examples" / "mlp" /
                               "mlp-symbol.json"), "-o", str(tmp_path / "g.svg")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 9 and len(err) == 1 and "apt-get install graphviz" in err[0]


# ---------------------------------------------------------------------------------------
# what the picture shows: SVG geometry, tooltips, the search outline as rendered
# ---------------------------------------------------------------------------------------
SVG = "{http://www.w3.org/2000/svg}"
XLINK_TITLE = "{http://www.w3.org/1999/xlink}title"
HIT_RGB = (0xff, 0x00, 0xaa)          # the page's search outline colour
PX_PER_PT = 96 / 72                   # dot's SVG is in points, drawn at 1:1


def _svg_and_regions(page_text: str) -> tuple[ET.Element, dict, dict, set[str]]:
    """The full view's <svg> of an HTML page, node id -> region id, region id -> (name,
    backend), and the ids of the drawing's nodes."""
    start = page_text.index("<svg")
    svg = ET.fromstring(page_text[start:page_text.index("</svg>", start) + 6])
    meta = json.loads(re.search(r'<script type="application/json" id="meta">(.*?)</script>',
                                page_text, re.S).group(1).replace("<\\/", "</"))
    region_of = {n: rid for rid, r in meta["regions"].items() for n in r["nodes"]}
    titles = {rid: (r["name"], r["backend"]) for rid, r in meta["regions"].items()}
    return svg, region_of, titles, set(meta["nodes"])


def _points(text: str) -> list[tuple[float, float]]:
    return [(float(a), float(b)) for a, b in re.findall(r"(-?[\d.]+),(-?[\d.]+)", text)]


def _curve(points, steps: int = 24) -> list[tuple[float, float]]:
    """Points along a Graphviz edge path: ``M p0 C p1 p2 p3 [p4 p5 p6 ...]`` (cubic Beziers)."""
    out = [points[0]]
    for i in range(1, len(points) - 2, 3):
        p0, p1, p2, p3 = points[i - 1:i + 3]
        for k in range(1, steps + 1):
            t = k / steps
            out.append(tuple((1 - t) ** 3 * a + 3 * (1 - t) ** 2 * t * b + 3 * (1 - t) * t * t * c
                             + t ** 3 * d for a, b, c, d in zip(p0, p1, p2, p3)))
    return out


def _bbox(points) -> tuple[float, float, float, float]:
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    return min(xs), min(ys), max(xs), max(ys)


def _inside(p, box, margin: float = 1.0) -> bool:
    return box[0] + margin < p[0] < box[2] - margin and box[1] + margin < p[1] < box[3] - margin


def _em(c: str) -> float:
    """About Helvetica's advance width of *c* (its AFM widths, rounded up), in em."""
    if c in "ijlft.,:;!|[]()' \xa0":
        return 0.34
    if c in "mwMW":
        return 0.95
    return 0.73 if c.isupper() else 0.57


def _text_box(t: ET.Element) -> tuple[float, float, float, float]:
    """A box a little larger than an SVG <text> drawn in Helvetica."""
    size, x, y = float(t.get("font-size")), float(t.get("x")), float(t.get("y"))
    width = 1.05 * size * sum(_em(c) for c in t.text or "")
    left = {"middle": x - width / 2, "end": x - width}.get(t.get("text-anchor"), x)
    return left, y - 0.8 * size, left + width, y + 0.25 * size


def _shape_box(g: ET.Element):
    shape = g.find(f".//{SVG}polygon")
    if shape is not None:
        return _bbox(_points(shape.get("points")))
    e = g.find(f".//{SVG}ellipse")
    cx, cy, rx, ry = (float(e.get(k)) for k in ("cx", "cy", "rx", "ry"))
    return cx - rx, cy - ry, cx + rx, cy + ry


def _geometry_faults(page_text: str) -> list[str]:
    """What a person would see wrong with the region boxes of the page's full view: a box
    outside the picture, a node outside its own box or inside another, a region title
    outside its box, an edge through a box it neither enters nor leaves, an edge through
    a region's title."""
    svg, region_of, titles, drawn = _svg_and_regions(page_text)
    vx, vy, vw, vh = map(float, svg.get("viewBox").split())
    graph = svg.find(f"{SVG}g")
    tx, ty = map(float, re.search(r"translate\(([-\d.]+) ([-\d.]+)\)",
                                  graph.get("transform")).groups())
    boxes = {}
    for c in graph.findall(f"{SVG}g[@class='cluster']"):
        shape = c.find(f"{SVG}path")
        shape = shape if shape is not None else c.find(f"{SVG}polygon")
        boxes[c.get("id").removeprefix("cluster_")] = _bbox(_points(shape.get("d")
                                                                    or shape.get("points")))
    assert set(boxes) == set(titles), "every region is boxed"
    faults = []
    for rid, (x0, y0, x1, y1) in boxes.items():
        if x0 + tx < vx or y0 + ty < vy or x1 + tx > vx + vw or y1 + ty > vy + vh:
            faults.append(f"box {rid} {x0 + tx, y0 + ty, x1 + tx, y1 + ty} leaves the "
                          f"viewBox {vx, vy, vw, vh}")
    title_boxes = {}
    for t in graph.iter(f"{SVG}text"):
        for rid, (name, backend) in titles.items():
            if (t.text or "").startswith(name) and (t.text or "").endswith(f"[{backend}]"):
                title_boxes[rid] = _text_box(t)
    assert set(title_boxes) == set(titles), "every region's title is drawn"
    for rid, tb in title_boxes.items():
        if not all(_inside(p, boxes[rid], 0) for p in (tb[:2], tb[2:])):
            faults.append(f"the title of {rid} {tb} is not inside its box {boxes[rid]}")
    for g in graph.findall(f"{SVG}g[@class='node']"):
        nid = g.find(f"{SVG}title").text
        if nid not in drawn:
            continue                                  # a region's title: checked above
        region = region_of.get(nid)
        x0, y0, x1, y1 = _shape_box(g)
        centre = ((x0 + x1) / 2, (y0 + y1) / 2)
        for rid, box in boxes.items():
            if _inside(centre, box, 0) != (rid == region):
                faults.append(f"node {nid} of region {region} is "
                              f"{'inside box' if rid != region else 'outside its box'} {rid}")
    for e in graph.findall(f"{SVG}g[@class='edge']"):
        src, dst = e.find(f"{SVG}title").text.split("->")
        ends = {region_of.get(src), region_of.get(dst)}
        path = _curve(_points(e.find(f"{SVG}path").get("d")))
        for rid, box in boxes.items():
            if rid not in ends and any(_inside(p, box) for p in path):
                faults.append(f"edge {src}->{dst} crosses box {rid}")
        for rid, tb in title_boxes.items():
            if any(_inside(p, tb, 0) for p in path):
                faults.append(f"edge {src}->{dst} runs through the title of {rid}")
    return faults


def _tooltips(svg_text: str) -> dict[str, list[str]]:
    """Node name -> its tooltip's lines (op nodes: the first line is "op  name")."""
    svg = ET.fromstring(svg_text[svg_text.index("<svg"):])
    out = {}
    for a in svg.iter(f"{SVG}a"):
        lines = a.get(XLINK_TITLE).split("\n")
        out[lines[0].split()[-1]] = [line.replace("\xa0", " ") for line in lines]
    return out


def _custom_partition(tmp_path) -> Path:
    """exp, log in one region of a custom partitioner; sin, *2 on the host."""
    import mxc
    from mxc import sym as S
    from mxc.compiler.partition import ANY_SUBGRAPH

    def supported_ops(graph, ids, options):
        for i, node in enumerate(graph.nodes):
            if node.op in ("exp", "log"):
                ids[i] = ANY_SUBGRAPH
    partitioner = mxc.register_partitioner("draw_test_exp_log")    # the same one each time
    if not partitioner.strategies:
        partitioner.add_strategy("s", "_draw_test_op", supported_ops=supported_ops)
    with S.NameManager():
        a = S.var("a")
        z = S.sin(S.log(S.exp(a))) * 2
    path = tmp_path / "custom-symbol.json"
    z.optimize_for("draw_test_exp_log").save(str(path))
    return path


def test_tooltips_carry_attributes_and_weight_shapes(tmp_path, capsys):
    """As in Netron: pointing at an op shows its attributes (the symbol JSON's) and its
    weights with their shapes (the .params file's); the weights are not drawn as nodes."""
    from mxc.frontend.params import load_params, split_arg_aux
    mlp = Path(__file__).parents[2] / "examples" / "mlp"
    svg = tmp_path / "mlp.svg"
    assert main(["draw", str(mlp / "mlp-symbol.json"), "--params", str(mlp / "mlp-0000.params"),
                 "--shape", "data=4,784", "-o", str(svg)]) == 0
    assert "6 node(s)" in capsys.readouterr().out
    tips = _tooltips(svg.read_text())
    arg, aux = split_arg_aux(load_params(mlp / "mlp-0000.params"))
    shapes = {k: "x".join(map(str, v.shape)) for k, v in {**arg, **aux}.items()}
    nodes = json.loads((mlp / "mlp-symbol.json").read_text())["nodes"]
    checked = 0
    for n in nodes:
        if n["op"] == "null":
            assert n["name"] not in shapes or n["name"] not in tips    # weights: no node
            continue
        lines = tips[n["name"]]
        assert lines[0] == f"{n['op']}  {n['name']}"
        for k, v in (n.get("attrs") or n.get("attr") or n.get("param") or {}).items():
            assert f"  {k} = {v}" in lines
        weights = [nodes[i]["name"] for i, *_ in n["inputs"] if nodes[i]["name"] in shapes]
        for w in weights:
            assert f"  {w}: {shapes[w]}" in lines
            checked += 1
    assert checked == 6                                 # 3 FullyConnected: weight and bias
    assert "  fc1_weight: 128x784" in tips["fc1"] and "out: 4x128" in tips["fc1"]


def test_region_titles_and_boxes_are_clear_of_edges(tmp_path):
    """A partition drawing: boxes inside the picture, nodes in their own box only, no edge
    through a box it does not enter or leave, nor through a region's title (edges into a
    region ran through its cluster label)."""
    part = _custom_partition(tmp_path)
    page = tmp_path / "custom.html"
    assert main(["draw", str(part), "--shape", "a=2,3", "-o", str(page)]) == 0
    assert _geometry_faults(page.read_text()) == []


def _mixed_artifact(tmp_path, bind_params: bool):
    """A compiled model with two host nodes (``_np_roll``, an op TVM leaves on the host)
    between three regions and a skip connection from the first region to the last;
    returns (path, weights)."""
    pytest.importorskip("tvm")
    import mxc
    from mxc import sym as S

    data = S.var("data")
    h = S.relu(S.FullyConnected(data, num_hidden=8, name="fc1"))
    g = S.relu(S.FullyConnected(S._np_roll(h, shift=1, axis=1, name="roll"), num_hidden=8,
                                name="fc2"))
    net = S.softmax(S.FullyConnected(S._np_roll(g, shift=2, axis=1, name="roll2") + h,
                                     num_hidden=3, name="fc3"))
    rng = np.random.RandomState(0)
    weights = {"fc1_weight": rng.randn(8, 5), "fc1_bias": rng.randn(8),
               "fc2_weight": rng.randn(8, 8), "fc2_bias": rng.randn(8),
               "fc3_weight": rng.randn(3, 8), "fc3_bias": rng.randn(3)}
    weights = {k: v.astype("float32") for k, v in weights.items()}
    path = tmp_path / f"mixed-{bind_params}.mxc"
    mxc.compile(net, weights, {"data": (2, 5)}, bind_params=bind_params).save(str(path))
    return path, weights


@pytest.mark.parametrize("bind_params", [True, False])
def test_artifact_regions_clear_of_edges_and_tooltips(tmp_path, capsys, bind_params):
    """An artifact's region boxes are inside the picture and crossed by no edge, not even
    through their titles; host nodes show their attributes, shapes and reason, regions the
    weights they are fed (or that they are compiled in)."""
    path, weights = _mixed_artifact(tmp_path, bind_params)
    page = tmp_path / "mixed.html"
    assert main(["draw", str(path), "-o", str(page)]) == 0
    assert "3 region(s) (tvm), 2 host node(s)" in capsys.readouterr().out
    text = page.read_text()
    assert _geometry_faults(text) == []
    start = text.index("<svg")
    tips = _tooltips(text[start:text.index("</svg>", start) + 6])
    assert tips["roll2"][:4] == ["_np_roll  roll2", "attributes:", "  axis = 1", "  shift = 2"]
    assert "in: 2x8" in tips["roll2"] and "out: 2x8" in tips["roll2"]
    from mxc.backends.tvm import host_only_ops
    assert f"host node: _np_roll: {host_only_ops()['_np_roll']}" in tips["roll2"]
    regions = [lines for lines in tips.values() if lines[0].startswith("region")]
    assert len(regions) == 3
    if bind_params:
        assert all("weights: compiled into the library" in lines for lines in regions)
    else:
        shown = [line.strip() for lines in regions for line in lines if "_weight:" in line
                 or "_bias:" in line]
        assert sorted(shown) == sorted(f"{k}: {'x'.join(map(str, v.shape))}"
                                       for k, v in weights.items())


def test_artifact_region_lists_every_op():
    """A region's op counts are wrapped onto lines in its box, never cut off."""
    from mxc.draw.model import from_artifact
    from mxc.draw.render import render_svg
    ops = {f"SomeRatherLongOperatorName{i}": i + 1 for i in range(9)}
    graph = {"inputs": [{"name": "data", "slot": 0, "shape": [1, 4]}],
             "steps": [{"kind": "region", "name": "tvm_subgraph0", "function": "region0",
                        "inputs": [0], "outputs": [1], "num_nodes": 45, "ops": ops}],
             "outputs": [{"name": "out", "slot": 1, "shape": [1, 4]}]}
    svg = render_svg(from_artifact(graph, {"bind_params": True}, "wide"))
    texts = ET.fromstring(svg[svg.index("<svg"):]).iter(f"{SVG}text")
    drawn = " ".join(t.text or "" for t in texts)
    for name, count in ops.items():
        assert f"{name} x{count}" in drawn


def _hit_box(img: np.ndarray):
    """The pixels of the search outline's colour: their count and bounding box (x0, y0, x1, y1)."""
    mask = np.abs(img.astype(int) - HIT_RGB).sum(axis=2) < 40
    ys, xs = np.nonzero(mask)
    return int(mask.sum()), (xs.min(), ys.min(), xs.max(), ys.max()) if len(xs) else None


@needs_browser
def test_search_match_is_visibly_outlined(tmp_path):
    """Rendered by Chromium, a match is outlined in the hit colour exactly around its box,
    and nothing is without a match (the old CSS counted matches but outlined none)."""
    part = _custom_partition(tmp_path)
    page = tmp_path / "custom.html"
    assert main(["draw", str(part), "--shape", "a=2,3", "-o", str(page)]) == 0
    svg, *_ = _svg_and_regions(page.read_text())
    box_of = {}                           # node name -> its shape's box (SVG units)
    for g in svg.iter(f"{SVG}g"):
        if g.get("class") == "node" and g.find(f".//{SVG}polygon") is not None:
            name = g.find(f".//{SVG}a").get(XLINK_TITLE).split("\n")[0].split()[-1]
            box_of[name] = _shape_box(g)
    count, _ = _hit_box(_screenshot(page, tmp_path / "none.png"))
    assert count == 0
    found = {}
    for name in ("exp0", "sin0"):
        count, box = _hit_box(_screenshot(page, tmp_path / f"{name}.png", f"#search={name}"))
        assert count > 100, f"{name}: no outline on the screen"
        x0, y0, x1, y1 = box_of[name]
        # the outline (4 units wide, centred on the border) around the node's box, at 1:1
        assert abs((box[2] - box[0]) - (x1 - x0 + 4) * PX_PER_PT) <= 3, (name, box)
        assert abs((box[3] - box[1]) - (y1 - y0 + 4) * PX_PER_PT) <= 3, (name, box)
        found[name] = box
    # ... and around the matched node, not another: the two outlines lie as the nodes do
    dx = (box_of["sin0"][0] - box_of["exp0"][0]) * PX_PER_PT
    dy = (box_of["sin0"][1] - box_of["exp0"][1]) * PX_PER_PT
    assert abs(found["sin0"][0] - found["exp0"][0] - dx) <= 2
    assert abs(found["sin0"][1] - found["exp0"][1] - dy) <= 2
