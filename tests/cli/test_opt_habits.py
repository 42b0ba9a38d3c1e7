"""mlir-opt's habits in ``mxc opt`` (issue 22, item 9), each reproduced.

Original failures: ``mxc opt -`` looked for a file named ``-``; ``mxc opt x.json
--emit ir > x.mxir`` refused ("missing --passes", exit 1) and left the empty file the
shell had created; the ``print-ir`` pass printed into standard output, so ``-o -``
output was IR and JSON mixed.  The oracle is the round trip: the model written back
parses to the same graph (same textual IR) as the model read.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mxc.compiler.ir.text import parse_graph, print_graph
from mxc.frontend.symbol_json import load_json_file

REPO = Path(__file__).resolve().parents[2]
SYMBOL = REPO / "examples" / "mlp" / "mlp-symbol.json"


def opt(*args, stdin: bytes | None = None):
    return subprocess.run([sys.executable, "-m", "mxc.cli", "opt", *args], input=stdin,
                          capture_output=True, cwd=REPO)


def mlp_ir() -> str:
    return print_graph(load_json_file(SYMBOL))


def test_without_passes_the_model_round_trips_behind_a_shell_redirect(tmp_path):
    out = tmp_path / "x.mxir"
    r = subprocess.run(f"{sys.executable} -m mxc.cli opt {SYMBOL} --emit ir > {out}",
                       shell=True, capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert print_graph(parse_graph(out.read_text())) == mlp_ir()
    assert "no passes: 14 -> 14 nodes" in r.stderr       # the summary: not in the file
    # and back: IR in, JSON out, the same graph
    r = opt(str(out), "--emit", "json", "-o", str(tmp_path / "back.json"))
    assert r.returncode == 0, r.stderr
    assert print_graph(load_json_file(tmp_path / "back.json")) == mlp_ir()


def test_dash_reads_standard_input():
    for data in (SYMBOL.read_bytes(), (mlp_ir() + "\n").encode()):
        r = opt("-", "--emit", "ir", stdin=data)
        assert r.returncode == 0, r.stderr
        assert print_graph(parse_graph(r.stdout.decode())) == mlp_ir()
    r = opt("-", "--passes", "dce", stdin=b"\x93NUMPY\x01\x00")
    assert r.returncode == 2 and b"<stdin>: this is an .npy file" in r.stderr


def test_ir_dumps_never_enter_the_output():
    r = opt(str(SYMBOL), "--passes", "print-ir{label=here},dce", "--print-ir-after-all",
            "-o", "-")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)                       # standard output: the JSON alone
    assert len(doc["nodes"]) == 14
    err = r.stderr.decode()
    assert err.startswith("// here\ngraph @main ")   # the print-ir pass
    assert "// ----- IR after pass 2/2: dce -----" in err
