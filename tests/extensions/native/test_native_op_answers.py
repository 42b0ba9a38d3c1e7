"""What a library operator answers is checked: output counts, names, dtype codes.

A tiny C library speaking lib_api v11 (every entry point a stub except the
operator hooks) answers what each case needs; the corpus libraries never
misbehave this way.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

import mxc
from mxc.errors import ExtensionError
from mxc.library.native import calls, op_entry
from mxc.library.native.abi import SIGNATURES
from tests.extensions.native.native_libs import _unload_native_libraries  # noqa: F401

_HOOKS = """
static int hook(void) { return 1; }
int _opVersion(void) { return 11; }
int initialize(int v) { return 1; }
int _opRegSize(void) { return 1; }
int _msgSize(void) { return 0; }
int _partRegSize(void) { return 0; }
int _passRegSize(void) { return 0; }
void _opRegGet(int i, const char** name, int* sg, const char*** c0, void*** f0, int* n0,
               const char*** c1, void*** f1, int* n1, const char*** c2, void*** f2, int* n2,
               void** parse, void** type, void** stype, void** shape, void** mutate) {
  *name = OP_NAME; *sg = 0; *n0 = *n1 = *n2 = 0;
  *parse = (void*)hook; *type = (void*)hook; *stype = 0; *shape = (void*)hook; *mutate = 0;
}
int _opCallParseAttrs(void* fp, const char** k, const char** v, int n, int* nin, int* nout) {
  *nin = 1; *nout = NUM_OUT; return 1;
}
int _opCallInferType(void* fp, const char** k, const char** v, int n, int* in, int nin,
                     int* out, int nout) {
  int i; for (i = 0; i < nout; i++) out[i] = TYPE_CODE; return 1;
}
"""
_DEFINED = {"_opVersion", "initialize", "_opRegSize", "_msgSize", "_partRegSize",
            "_passRegSize", "_opRegGet", "_opCallParseAttrs", "_opCallInferType"}


def fake_library(tmp_path, name: str, op_name: str = '"fake_op"', num_out: int = 1,
                 type_code: int = 0):
    if shutil.which("gcc") is None:
        pytest.skip("no C compiler (gcc)")
    stubs = "".join(f"int {fn}(void) {{ return 0; }}\n" for fn in SIGNATURES[11]
                    if fn not in _DEFINED)
    src = tmp_path / f"{name}.c"
    src.write_text(f"#define OP_NAME {op_name}\n#define NUM_OUT ({num_out})\n"
                   f"#define TYPE_CODE ({type_code})\n{_HOOKS}{stubs}")
    out = tmp_path / f"lib{name}.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-w", "-o", str(out), str(src)], check=True)
    return out


def test_millions_of_outputs_are_refused_not_a_hang(tmp_path):
    mxc.library.load(fake_library(tmp_path, "many", num_out=1 << 24), verbose=False)
    with pytest.raises(ExtensionError, match=r"'fake_op' parse_attrs answered 16777216 "
                                             r"outputs; expected 0 to 4096"):
        mxc.sym.fake_op(mxc.sym.var("x"))


def test_a_negative_output_count_is_refused(tmp_path):
    mxc.library.load(fake_library(tmp_path, "negative", num_out=-3), verbose=False)
    with pytest.raises(ExtensionError, match="answered -3 outputs"):
        calls.parse_attrs(op_entry("fake_op"), {})


def test_an_operator_name_that_is_not_utf8_is_an_extension_error(tmp_path):
    lib = fake_library(tmp_path, "latin1", op_name=r'"caf\xe9_op"')
    with pytest.raises(ExtensionError, match=r"the name of operator 0 is not UTF-8") as info:
        mxc.library.load(lib, verbose=False)
    assert "liblatin1.so" in str(info.value)


@pytest.mark.parametrize("code", [99, -7])
def test_an_unknown_dtype_code_names_the_op_and_the_code(tmp_path, code):
    mxc.library.load(fake_library(tmp_path, f"code{abs(code)}", type_code=code), verbose=False)
    with pytest.raises(ExtensionError, match=rf"'fake_op' infer_type answered dtype code "
                                             rf"{code} for output 0"):
        calls.infer_type(op_entry("fake_op"), {}, ["float32"], 1)


def test_known_and_unset_dtype_codes_still_map(tmp_path):
    mxc.library.load(fake_library(tmp_path, "code4", type_code=4), verbose=False)
    assert calls.infer_type(op_entry("fake_op"), {}, ["float32"], 1)[1] == ["int32"]
