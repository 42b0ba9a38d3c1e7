"""``mxc draw``: pictures of resnet18's partitions, checked in a real headless browser.

The drawings are rendered by Chromium (Debian's ``chromium`` package; the
tests that need it skip, saying so, when it is absent): the screenshot must
not be blank (many distinct colours, a good share of non-white pixels, the
region fill colour present) and the DOM after the page's script ran must hold
every region (its box and its name) and react to ``#search=`` / ``#collapse``.
Graphviz (``dot`` and its Python binding) lays the graphs out.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
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
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", "--window-size=1400,1000", *args, url],
                          capture_output=True, text=True, timeout=120)


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
    collapsed = _dom(page, "#collapse")
    assert re.search(r'<div id="full" style="display: none;?">', collapsed)
    _screenshot(page, tmp_path / "default-collapsed.png", "#collapse")


def test_custom_partitioner_drawing_as_svg(tmp_path):
    import mxc
    from mxc import sym as S
    from mxc.compiler.partition import ANY_SUBGRAPH

    def supported_ops(graph, ids, options):
        for i, node in enumerate(graph.nodes):
            if node.op in ("exp", "log"):
                ids[i] = ANY_SUBGRAPH
    mxc.register_partitioner("draw_test_exp_log").add_strategy(
        "s", "_draw_test_op", supported_ops=supported_ops)
    with S.NameManager():
        a = S.var("a")
        z = S.sin(S.log(S.exp(a))) * 2
    part = z.optimize_for("draw_test_exp_log")
    path = tmp_path / "custom-symbol.json"
    part.save(str(path))
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
