"""Bad compiled libraries get typed errors and leave mxc's registries as they were."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import mxc
from mxc.compiler.ops.registry import registered_ops
from mxc.compiler.partition.registry import list_subgraph_backends
from mxc.compiler.passes.registry import list_passes
from mxc.errors import ExtensionError
from tests.extensions.native.native_libs import (  # noqa: F401 - fixtures
    build_extensions, flow, golden, _unload_native_libraries)


def registries():
    return (dict(registered_ops()), list(list_subgraph_backends()),
            [p.name for p in list_passes()])


def c_library(tmp_path, name: str, source: str):
    if shutil.which("gcc") is None:
        pytest.skip("no C compiler (gcc)")
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    out = tmp_path / f"lib{name}.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    return out


def test_path_checks_before_anything_runs(tmp_path):
    exp = flow(golden("v11", "init_lib"), "load_path_errors")["expected"]
    with pytest.raises(ExtensionError, match="does NOT exist"):
        mxc.library.load(tmp_path / "libnope.so")
    assert "does NOT exist" in exp["missing"]["message"]
    bogus = tmp_path / "bogus.so"
    bogus.write_text("not an ELF file")
    with pytest.raises(ExtensionError, match="Error loading library") as info:
        mxc.library.load(bogus)
    assert "file too short" in str(info.value)
    assert "Error loading library" in exp["not_elf"]["message"]


def test_a_shared_object_without_lib_api_entry_points(tmp_path):
    lib = c_library(tmp_path, "plain", "int answer(void) { return 42; }\n")
    before = registries()
    with pytest.raises(ExtensionError, match="does not export _opVersion"):
        mxc.library.load(lib)
    assert registries() == before


def test_missing_entry_points_are_named(tmp_path):
    lib = c_library(tmp_path, "half", "int _opVersion(void) { return 11; }\n"
                                      "int initialize(int v) { return 1; }\n")
    with pytest.raises(ExtensionError, match="does not export _opRegSize.*_msgGet"):
        mxc.library.load(lib)


def test_unsupported_version(tmp_path):
    lib = c_library(tmp_path, "v9", "int _opVersion(void) { return 9; }\n")
    with pytest.raises(ExtensionError, match="lib_api version 9 is not supported"):
        mxc.library.load(lib)


def test_mxnets_own_version_check_on_request():
    libs = build_extensions("v7")
    exp = flow(golden("v11", "version_mismatch"), "load_v7_libgemm_lib.so")["expected"]
    with pytest.raises(ExtensionError) as info:
        mxc.library.load(libs / "libgemm_lib.so", lib_api_versions=(11,))
    assert str(info.value) in exp["load"]["message"]


def test_initialize_refusing_keeps_nothing(capfd):
    libs = build_extensions("v11")
    before = registries()
    with pytest.raises(ExtensionError, match="Library failed to initialize") as info:
        mxc.library.load(libs / "libinit_lib.so", mxnet_version=10500)
    assert info.value.messages[-1].endswith("MXNet version 10500 not supported")
    assert registries() == before


def test_a_failure_while_registering_undoes_the_registrations(monkeypatch):
    libs = build_extensions("v10")
    before = registries()
    from mxc.library.native import loader

    def broken(found):
        raise ExtensionError("registry full")

    monkeypatch.setattr(loader, "register_passes", broken)
    with pytest.raises(ExtensionError, match="registry full"):
        mxc.library.load(libs / "libsubgraph_lib.so", verbose=False)
    assert registries() == before
    assert not any(r.name == "libsubgraph_lib.so" and "v10" in str(r.path)
                   for r in mxc.library.loaded())


def test_failing_forward_is_an_error_not_a_crash():
    libs = build_extensions("v11")
    mxc.library.load(libs / "libtransposecsr_lib.so", verbose=False)
    import numpy as np
    from mxc.library.native import CSRArray, calls, op_entry
    entry = op_entry("my_transposecsr")
    x = CSRArray.from_dense(np.eye(3, dtype=np.float32))
    with pytest.raises(ExtensionError, match="forward failed") as info:
        calls.compute(entry, entry.forward, {}, [x], [np.zeros((3, 3), np.float32)])
    assert "Expected all inputs and outputs to be the same type" in info.value.messages[-1]


def test_a_cpp_exception_inside_the_library_is_an_error_not_an_abort():
    """state_gemm's createOpState runs std::stoi on test_kw: "abc" throws std::invalid_argument."""
    from mxc.library.native import guard
    libs = build_extensions("v11")
    mxc.library.load(libs / "libgemm_lib.so", verbose=False)
    if not guard.available():
        pytest.skip("no C++ compiler for the exception guard")
    import numpy as np
    a, b = np.ones((2, 3), np.float32), np.ones((3, 1), np.float32)
    d = mxc.sym.state_gemm(mxc.sym.var("a"), mxc.sym.var("b"), test_kw="abc", name="sg")
    with pytest.raises(ExtensionError, match="create_op_state failed on node 'sg'.*stoi") as info:
        d.bind(args={"a": a, "b": b}).forward()
    assert isinstance(info.value.original, guard.NativeException)
    c = mxc.sym.my_gemm(mxc.sym.var("a"), mxc.sym.var("b"))        # the process goes on
    np.testing.assert_array_equal(c.eval(a=a, b=b)[0], a @ b)


def _in_fresh_process(code: str) -> subprocess.CompletedProcess:
    """Run *code* in a new interpreter: a library that kills the process must not kill pytest."""
    import os
    import sys
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env={**os.environ})


def test_a_throwing_opversion_is_an_error_not_an_abort(tmp_path):
    """_opVersion is the first call into a library; it too goes through the guard."""
    from mxc.library.native import guard
    if shutil.which("g++") is None or not guard.available():
        pytest.skip("no C++ compiler for the exception guard")
    src = tmp_path / "throws.cc"
    src.write_text('#include <stdexcept>\nextern "C" int _opVersion() '
                   '{ throw std::runtime_error("version unknown"); }\n')
    lib = tmp_path / "libthrows.so"
    subprocess.run(["g++", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    r = _in_fresh_process(
        "import mxc\nfrom mxc.errors import ExtensionError\n"
        f"try:\n    mxc.library.load({str(lib)!r})\n"
        "except ExtensionError as e:\n    print('TYPED', e)\n")
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert "TYPED" in r.stdout and "_opVersion threw" in r.stdout
    assert "version unknown" in r.stdout and "libthrows.so" in r.stdout


@pytest.mark.parametrize("fraction", [3, 10, 100])
def test_a_truncated_library_is_refused_before_dlopen(tmp_path, fraction):
    """The first part of a valid library (an interrupted copy) dies of SIGBUS in dlopen."""
    libs = build_extensions("v11")
    whole = (libs / "libgemm_lib.so").read_bytes()
    cut = tmp_path / "libgemm_lib.so"
    cut.write_bytes(whole[:len(whole) // fraction])
    r = _in_fresh_process(
        "import mxc\nfrom mxc.errors import ExtensionError\n"
        f"try:\n    mxc.library.load({str(cut)!r}, verbose=False)\n"
        "except ExtensionError as e:\n    print('TYPED', e)\n")
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert "TYPED" in r.stdout and str(cut) in r.stdout and "truncated" in r.stdout
    from mxc.library.native.elf import check_elf_extent
    check_elf_extent(libs / "libgemm_lib.so")      # the whole library passes
