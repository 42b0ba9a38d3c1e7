"""Issue 28, item 5: re-checksummed manifests and graphs that still gave bare exceptions,
and graphs that disagree with the compiled functions they call."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tvm")

import mxc.runtime as rt
from mxc.errors import ArtifactError
from mxc.runtime.signatures import result_counts
from reliability_helpers import forge, members, mlp_input, run_cli
from test_artifact_validation import good, unbound  # noqa: F401 - fixtures


@pytest.mark.parametrize("value,field", [
    (True, "libraries: expected a list"),
    ({}, "libraries: expected a list"),
    (["x"], r"libraries\[0\]: expected an object"),
    ([{"name": "libx.so", "sha256": "00"}], r"libraries\[0\].sha256: expected 64"),
    ([{"name": "libx.so", "sha256": "0" * 64, "operators": [3]}],
     r"libraries\[0\].operators\[0\]: expected a string"),
])
def test_manifest_libraries_are_validated(good, tmp_path, value, field, no_library_write):
    bad = forge(tmp_path / "libs.mxc", members(good),
                manifest=lambda m: m.update(libraries=value))
    with pytest.raises(ArtifactError, match=f"manifest.json: {field}"):
        rt.load(bad)
    r = run_cli("inspect", str(bad))
    assert r.returncode == 8 and b"Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("value", [0, "1", None, {"a": 1}])
def test_step_outputs_of_the_wrong_type_are_an_artifact_error(good, tmp_path, value,
                                                              no_library_write):
    bad = forge(tmp_path / "outs.mxc", members(good),
                graph=lambda g: g["steps"][0].update(outputs=value))
    with pytest.raises(ArtifactError, match=r"graph.json: steps\[0\].outputs: expected a list"):
        rt.load(bad)


def test_a_region_listing_more_results_than_its_function_returns_is_refused_at_load(
        good, tmp_path):
    """It loaded, then run raised tvm_ffi's IndexError."""
    bad = forge(tmp_path / "more.mxc", members(good),
                graph=lambda g: g["steps"][0].update(outputs=[1, -1]))
    with pytest.raises(ArtifactError, match=r"steps\[0\] \('tvm_subgraph0'\) lists 2 "
                                            r"result\(s\) of 'region0', which returns 1"):
        rt.load(bad)


@pytest.mark.parametrize("which", ["good", "unbound"])
def test_a_region_given_another_number_of_arguments_is_refused_at_load(
        good, unbound, tmp_path, which):
    src = good if which == "good" else unbound

    def edit(g):
        ins = g["steps"][0]["inputs"]
        g["steps"][0]["inputs"] = ins + [ins[0]] if which == "good" else ins[:-1]

    bad = forge(tmp_path / "args.mxc", members(src), graph=edit)
    with pytest.raises(ArtifactError, match=r"steps\[0\] \('tvm_subgraph0'\) passes \d+ "
                                            r"argument\(s\) to 'region0', which takes \d+"):
        rt.load(bad)


def test_untouched_artifacts_still_load_and_run(good, unbound):
    x = mlp_input()
    a, b = rt.load(good).run({"data": x})[0], rt.load(unbound).run({"data": x})[0]
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_result_counts_reads_the_tuple_each_function_returns():
    listing = ("@f:\n  call  vm.builtin.make_tuple in: %3, %4, %5 dst: %6\n  ret   %6\n\n"
               "@g:\n  call  vm.builtin.make_tuple in:              dst: %0\n  ret   %0\n\n"
               "@h:\n  ret   %1\n\n@vm.builtin.make_tuple packed_func;\n")
    assert result_counts(listing) == {"f": 3, "g": 0}


def test_a_declared_input_shape_the_function_does_not_take_is_refused_at_load(good, tmp_path):
    bad = forge(tmp_path / "shape.mxc", members(good),
                graph=lambda g: g["inputs"][0].update(shape=[8, 784]))
    with pytest.raises(ArtifactError, match=r"passes slot 0 of shape \(8, 784\) as argument 0 "
                                            r"of 'region0', which takes shape \(4, 784\)"):
        rt.load(bad)


def test_a_stored_parameter_of_another_shape_is_refused_at_load(unbound, tmp_path):
    import io
    data = members(unbound)
    with np.load(io.BytesIO(data["params.npz"])) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["fc3_bias"] = np.zeros(11, "float32")
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    data["params.npz"] = buf.getvalue()
    bad = forge(tmp_path / "param.mxc", data)
    with pytest.raises(ArtifactError, match=r"shape \(11,\) as argument \d+ of 'region0', which "
                                            r"takes shape \(10,\)"):
        rt.load(bad)


def test_param_shapes_reads_the_constant_dimensions():
    from mxc.runtime.signatures import param_shapes
    listing = ("@f:\n  call  vm.builtin.match_shape in: %0, %void, i2, i0, i4, i0, i784, c[1] "
               "dst: %void\n  call  vm.builtin.match_shape in: %1, %void, i2, i1, i0, i0, i8, "
               "c[2] dst: %void\n  ret   %1\n")
    assert param_shapes(listing) == {"f": {0: (4, 784), 1: (None, 8)}}
