"""``mxc compile/run --precision`` and what ``mxc inspect`` says about it.

Oracle: the manifest (what was built: a bfloat16 kernel per convolution) and
the typed refusal for a CPU without bfloat16 dot products.
"""

from __future__ import annotations

import numpy as np
import pytest

from mxc.cli import main

pytest.importorskip("tvm")
pytest.importorskip("ml_dtypes")


@pytest.fixture()
def conv_model(tmp_path):
    from mxc import sym as S
    from mxc.frontend.params import save_params
    y = S.Convolution(S.var("data"), kernel=(3, 3), num_filter=32, pad=(1, 1), name="conv")
    y = S.Activation(y, act_type="relu")
    y.save(str(tmp_path / "c-symbol.json"))
    rng = np.random.RandomState(0)
    save_params(str(tmp_path / "c.params"),
                {"arg:conv_weight": rng.uniform(-1, 1, (32, 16, 3, 3)).astype("float32"),
                 "arg:conv_bias": np.zeros(32, np.float32)})
    return [str(tmp_path / "c-symbol.json"), "--params", str(tmp_path / "c.params"),
            "--shape", "data=1,16,12,12", "-q"]


def test_compile_bf16_recorded_and_inspected(conv_model, tmp_path, capsys):
    from mxc.runtime import read_manifest
    out = tmp_path / "bf16.mxc"
    assert main(["compile", *conv_model, "--cpu", "sapphirerapids", "--precision", "bf16",
                 "-o", str(out)]) == 0
    assert read_manifest(out)["precision"] == {"mode": "bf16", "kernels": 1}
    capsys.readouterr()
    assert main(["inspect", str(out)]) == 0
    assert ("precision: bf16 (1 convolution/dense kernel(s) in bfloat16, float32 "
            "accumulation)") in capsys.readouterr().out


def test_compile_bf16_for_amx_puts_the_wide_layers_on_tiles(conv_model, tmp_path, capsys):
    """32 input channels fill an AMX tile row: on Sapphire Rapids the layer takes the
    tiles (16 stays a vector kernel, above), and inspect says so."""
    from mxc.frontend.params import save_params
    from mxc.runtime import read_manifest
    out = tmp_path / "amx.mxc"
    wide = [*conv_model[:-2], "data=1,32,12,12", "-q"]
    rng = np.random.RandomState(1)
    save_params(conv_model[2], {"arg:conv_weight": rng.uniform(-1, 1, (32, 32, 3, 3))
                                .astype("float32"), "arg:conv_bias": np.zeros(32, np.float32)})
    assert main(["compile", *wide, "--cpu", "sapphirerapids", "--precision", "bf16",
                 "-o", str(out)]) == 0
    assert read_manifest(out)["precision"] == {"mode": "bf16", "kernels": 1, "tile_kernels": 1}
    capsys.readouterr()
    assert main(["inspect", str(out)]) == 0
    assert ("precision: bf16 (1 convolution/dense kernel(s) in bfloat16, 1 on AMX tiles, "
            "float32 accumulation)") in capsys.readouterr().out


def test_compile_bf16_refused_for_a_cpu_without_it(conv_model, tmp_path, capsys):
    code = main(["compile", *conv_model, "--cpu", "haswell", "--precision", "bf16",
                 "-o", str(tmp_path / "x.mxc")])
    err = capsys.readouterr().err
    assert code != 0 and "haswell has neither AVX512-BF16 nor AMX-BF16" in err
    assert "Traceback" not in err and not (tmp_path / "x.mxc").exists()


def test_default_precision_is_fp32(conv_model, tmp_path):
    from mxc.runtime import read_manifest
    out = tmp_path / "fp32.mxc"
    assert main(["compile", *conv_model, "--cpu", "haswell", "-o", str(out)]) == 0
    assert read_manifest(out)["precision"] == {"mode": "fp32", "kernels": 0}


def test_inspect_line_for_auto_says_what_it_chose_and_why():
    from mxc.cli.inspect_cmd import precision_line
    chose = {"mode": "bf16", "kernels": 3, "requested": "auto",
             "check": {"max_error": 0.0042, "tolerance": 0.02, "passed": True,
                       "inputs": "given"}}
    assert precision_line(chose) == (
        "precision: bf16 (3 convolution/dense kernel(s) in bfloat16, float32 accumulation) "
        "-- chosen by --precision auto: bf16 error 0.0042 of the output range, tolerance "
        "0.02 (given inputs)")
    fell_back = {"mode": "fp32", "kernels": 0, "requested": "auto",
                 "reason": "the target has no bfloat16 dot products"}
    assert precision_line(fell_back) == ("precision: fp32 -- chosen by --precision auto: the "
                                         "target has no bfloat16 dot products")


def test_run_precision_auto_checks_on_the_run_inputs_and_says_so(conv_model, capsys):
    from mxc.runtime.cpu_features import host_cpu
    if "avx512bf16" not in (host_cpu().features() or ()):
        pytest.skip("this CPU has no AVX512-BF16")
    sym, params, shape = conv_model[0], conv_model[2], conv_model[4]
    assert main(["run", sym, "--params", params, "--shape", shape, "--backend", "tvm",
                 "--precision", "auto", "--fill-mode", "random"]) == 0
    err = capsys.readouterr().err
    assert "-- chosen by --precision auto: bf16 error " in err and "(given inputs)" in err
