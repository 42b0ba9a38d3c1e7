"""A dimension range (dynamic batch) is refused before anything is compiled, naming the
input, the axis, the range and the reason, in all three spellings."""

from __future__ import annotations

from pathlib import Path

import pytest

import mxc
from mxc.cli import main
from mxc.errors import USAGE_EXIT_CODE, BackendError

MLP = Path(__file__).resolve().parents[2] / "examples" / "mlp"


def test_compile_refuses_a_batch_range_with_the_reason():
    sym, args, aux = mxc.load_checkpoint(str(MLP / "mlp"), 0)
    with pytest.raises(BackendError, match=r"input 'data': dimension 0 is the range 1\.\.64; "
                                           r"dynamic dimensions are not supported.*static shapes"):
        mxc.compile(sym, (args, aux), {"data": ((1, 64), 784)})


@pytest.mark.parametrize("flag", [["--shape", "data=1..64,784"],
                                  ["--input-shapes", "data:[1..64,784]"]])
def test_cli_refuses_a_batch_range_with_the_reason(tmp_path, capsys, flag):
    with pytest.raises(SystemExit) as exit_info:
        main(["compile", str(MLP / "mlp-symbol.json"), "--params", str(MLP / "mlp-0000.params"),
              *flag, "-o", str(tmp_path / "m.mxc")])
    assert exit_info.value.code == USAGE_EXIT_CODE
    err = capsys.readouterr().err
    assert "is the range 1..64" in err and "one artifact per batch size" in err
    assert not (tmp_path / "m.mxc").exists()
