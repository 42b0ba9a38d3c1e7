"""The exception-guard shim is not trusted from the cache: verified, rebuilt, or refused.

Each case runs in a fresh interpreter with its own ``MXC_CACHE_DIR`` (the
shim is loaded once per process).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.extensions.native.native_libs import (  # noqa: F401 - fixtures
    build_extensions, _unload_native_libraries)

_LOAD = ("import mxc\nfrom mxc.errors import ExtensionError\nfrom mxc.library.native import guard\n"
         "try:\n    mxc.library.load({lib!r}, verbose=False)\n"
         "    print('LOADED guard=%s' % guard.available())\n"
         "except ExtensionError as e:\n    print('TYPED', e)\n")


@pytest.fixture
def gemm():
    if shutil.which("g++") is None:
        pytest.skip("no C++ compiler for the exception guard")
    return build_extensions("v11") / "libgemm_lib.so"


def _load(lib: Path, cache: Path, **env) -> subprocess.CompletedProcess:
    env = {**os.environ, "MXC_CACHE_DIR": str(cache), **env}
    env.pop("MXC_NO_GUARD", None)
    return subprocess.run([sys.executable, "-c", _LOAD.format(lib=str(lib))],
                          capture_output=True, text=True, timeout=600, env=env)


def _shim(cache: Path) -> Path:
    (found,) = cache.glob("libmxc_libapi_guard_*.so")
    return found


def test_a_corrupt_cached_shim_is_rebuilt(gemm, tmp_path):
    cache = tmp_path / "cache"
    assert "LOADED guard=True" in _load(gemm, cache).stdout
    shim = _shim(cache)
    good = shim.read_bytes()
    shim.write_bytes(good[: len(good) // 2])          # corrupt, as a full disk leaves it
    r = _load(gemm, cache)
    assert "LOADED guard=True" in r.stdout, r.stdout + r.stderr[-2000:]
    assert _shim(cache).read_bytes() == good           # built again, same compiler and source


def test_a_planted_shim_never_runs(gemm, tmp_path):
    """Whoever can write the cache directory must not get code run by mxc."""
    cache = tmp_path / "cache"
    assert "LOADED guard=True" in _load(gemm, cache).stdout
    marker = tmp_path / "planted-code-ran"
    src = tmp_path / "evil.c"
    src.write_text('#include <stdio.h>\n__attribute__((constructor)) static void run(void) '
                   f'{{ FILE* f = fopen("{marker}", "w"); if (f) fclose(f); }}\n')
    evil = tmp_path / "evil.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(evil), str(src)], check=True)
    shutil.copyfile(evil, _shim(cache))
    r = _load(gemm, cache)
    assert "LOADED guard=True" in r.stdout, r.stdout + r.stderr[-2000:]
    assert not marker.exists()


def test_a_group_writable_shim_is_not_trusted(gemm, tmp_path):
    cache = tmp_path / "cache"
    assert "LOADED guard=True" in _load(gemm, cache).stdout
    shim = _shim(cache)
    os.chmod(shim, 0o777)
    r = _load(gemm, cache)
    assert "LOADED guard=True" in r.stdout
    assert "not a file of this user" in r.stderr
    assert os.stat(_shim(cache)).st_mode & 0o022 == 0


def test_a_shim_that_cannot_be_loaded_is_a_typed_error(gemm, tmp_path):
    """A compiler that produces no library: an ExtensionError naming the shim, not OSError."""
    fake = tmp_path / "fakecxx"
    fake.write_text('#!/bin/sh\nif [ "$1" = --version ]; then echo "fake 1"; exit 0; fi\n'
                    'while [ $# -gt 1 ]; do [ "$1" = -o ] && out="$2"; shift; done\n'
                    'echo "not a library" > "$out"\n')
    fake.chmod(0o755)
    r = _load(gemm, tmp_path / "cache", CXX=str(fake))
    assert "TYPED" in r.stdout and "exception guard" in r.stdout, r.stdout + r.stderr[-2000:]
    assert "libmxc_libapi_guard_" in r.stdout
