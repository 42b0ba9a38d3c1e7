"""``mxc opt`` with mlir-opt's habits: textual IR in and out, FileCheck-style.

Original failure: ``mxc opt`` read and wrote only symbol JSON, knew no
``--pass-pipeline`` and no ``--print-ir-before`` / ``--print-ir-after-change``.
"""

from __future__ import annotations

from pathlib import Path

from mxc.cli import main

REPO = Path(__file__).resolve().parents[2]

IR = """// remove-dropout then dce: the dropout and the dead log go
graph @main {
  %x = var
  %d = Dropout(%x) {p = "0.5"}
  %e = exp(%d)
  %unused = log(%x)
  return %e
}
"""


def check_lines(text: str, patterns: list[str]) -> None:
    """FileCheck's CHECK: each pattern on a later line than the previous one."""
    lines = text.splitlines()
    at = 0
    for pat in patterns:
        while at < len(lines) and pat not in lines[at]:
            at += 1
        assert at < len(lines), f"{pat!r} not found in order in:\n{text}"
        at += 1


def test_ir_in_ir_out_with_pass_pipeline(tmp_path, capsys):
    src, out = tmp_path / "in.mxir", tmp_path / "out.mxir"
    src.write_text(IR)
    assert main(["opt", str(src), "--pass-pipeline", "remove-dropout,dce", "-o", str(out)]) == 0
    text = out.read_text()
    check_lines(text, ["graph @main {", "%x = var", "%e = exp(%x)", "return %e", "}"])
    assert "Dropout" not in text and "log" not in text
    from mxc.compiler.ir.text import parse_graph
    assert [n.op for n in parse_graph(text).op_nodes()] == ["exp"]


def test_print_ir_before_and_after_change(tmp_path, capsys):
    src = tmp_path / "in.mxir"
    src.write_text(IR)
    assert main(["opt", str(src), "--passes", "remove-dropout,simplify,dce", "--emit", "json",
                 "-o", str(tmp_path / "out.json"), "--print-ir-before", "dce",
                 "--print-ir-after-change"]) == 0
    err = capsys.readouterr().err
    check_lines(err, ["IR after pass 1/3 (changed): remove-dropout", "%unused = log(%x)",
                      "IR before pass 3/3: dce", "%unused = log(%x)",
                      "IR after pass 3/3 (changed): dce", "return %e"])
    assert "pass 2/3 (changed)" not in err         # simplify changed nothing: not printed
    assert (tmp_path / "out.json").read_text().lstrip().startswith("{")


def test_json_in_ir_out(tmp_path):
    out = tmp_path / "mlp.mxir"
    assert main(["opt", str(REPO / "examples" / "mlp" / "mlp-symbol.json"), "--passes", "dce",
                 "--emit", "ir", "-o", str(out)]) == 0
    check_lines(out.read_text(), ["graph @main", "FullyConnected", "SoftmaxOutput"])
