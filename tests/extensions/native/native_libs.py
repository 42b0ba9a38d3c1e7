"""Build the corpus's extension libraries once per session (g++), or skip saying why.

A helper module (not a ``conftest.py``: a second conftest would shadow the suite's own
``conftest`` module); test modules import the helpers and fixtures they use.

``build_extensions("v11")`` runs ``corpus/extensions/build.sh v11 DIR`` into a
per-session directory (or ``$MXC_EXT_BUILD/v11`` when set, reused when it
already holds the libraries) and returns DIR.  The sources are read from the
corpus, never copied into the repository.

A build of one version is ~25 s of g++ on one core.  The versions the collected
tests need start building on one core as soon as collection ends
(:func:`build_in_background`, called by ``tests/conftest.py``), while the tests
before them run; the first native module builds whatever is still unclaimed
side by side, one per core (``_prebuild_extensions``).  The libraries are the
same, only the wait is shorter.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from concurrent.futures import Future
from functools import lru_cache
from pathlib import Path

import pytest

from conftest import corpus_path

LIBS = ("libinit_lib.so", "libgemm_lib.so", "libtransposecsr_lib.so",
        "libtransposerowsp_lib.so", "libpass_lib.so", "libsubgraph_lib.so")
_ROOT = Path(os.environ.get("MXC_EXT_BUILD") or tempfile.mkdtemp(prefix="mxc-ext-"))
VERSIONS = ("v7", "v8", "v10", "v11")

_builds: dict[str, Future] = {}      # version -> its build (running, or done)
_lock = threading.Lock()
_running: set[subprocess.Popen] = set()   # build.sh processes, to stop at the session's end
_stopping = threading.Event()        # set as the session ends: no build starts any more
_cleanup_added: list[bool] = []      # the session's clean-up is registered (once)
_prebuilding: list[bool] = []        # the first native module started its builds (once)


def _build(version: str) -> tuple[Path | None, str]:
    corpus = corpus_path()
    script = corpus / "extensions" / "build.sh" if corpus else None
    if script is None or not script.exists():
        return None, "MXNet extension corpus not found (corpus/extensions/build.sh)"
    if shutil.which("g++") is None:
        return None, "no C++ compiler (g++) to build the extension libraries"
    out = _ROOT / version
    if not all((out / name).exists() for name in LIBS):
        out.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen(["bash", str(script), version, str(out)], text=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)   # g++ with it: one group to stop
        with _lock:
            _running.add(proc)
        try:
            _, err = proc.communicate(timeout=900)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        finally:
            with _lock:
                _running.discard(proc)
        if proc.returncode != 0:
            return None, f"build.sh {version} failed: {err[-500:]}"
    return out, ""


def _fill(future: Future, version: str) -> None:
    try:
        future.set_result(_build(version))
    except BaseException as e:  # noqa: BLE001 - the test that waits for it raises it
        future.set_exception(e)


def _claim(version: str) -> Future | None:
    """*version*'s build future if this caller is the first to ask for it (it must then
    build it), else None (built, or being built, elsewhere)."""
    with _lock:
        if version in _builds or _stopping.is_set():
            return None
        future: Future = Future()
        _builds[version] = future
        return future


def _build_unclaimed(versions) -> None:
    """Build, one after another in this thread, each of *versions* no one claimed yet.
    Several threads running this over one list build it side by side."""
    for version in versions:
        future = _claim(version)
        if future is not None:
            _fill(future, version)


def _build_side_by_side(versions, threads: int) -> list[threading.Thread]:
    """Start *threads* daemon threads building *versions* (:func:`_build_unclaimed`)."""
    started = [threading.Thread(target=_build_unclaimed, args=(list(versions),),
                                name=f"mxc-ext-build-{i}", daemon=True)
               for i in range(threads)]
    for thread in started:
        thread.start()
    return started


def build_extensions(version: str) -> Path:
    """The directory of the built libraries of lib_api *version*, or skip."""
    _build_unclaimed([version])
    if version not in _builds:       # the session is ending: nothing was started
        pytest.skip(f"the session ended before lib_api {version} was built")
    out, why = _builds[version].result()
    if out is None:
        pytest.skip(why)
    return out


def build_extensions_together(versions) -> list[Path]:
    """The directories of several versions' libraries, built side by side (one per core)."""
    for thread in _build_side_by_side(versions, _cores()):
        thread.join()
    return [build_extensions(v) for v in versions]


def _cores() -> int:
    return max(1, os.cpu_count() or 1)


_NAMED = re.compile(r"build_extensions\(\s*[\"'](v\d+)[\"']|\b(v\d+)_libs\b")


@lru_cache(maxsize=None)
def _named_in(func) -> tuple[str, ...]:
    """The versions *func*'s source names (``build_extensions("v10")``, ``v7_libs``)."""
    try:
        source = inspect.getsource(func)
    except (OSError, TypeError):
        return ()
    return tuple(a or b for a, b in _NAMED.findall(source))


def _versions_of(item) -> list[str]:
    """The lib_api versions *item* builds, when its module uses these helpers: its
    parameters, and those its test function and fixtures name (every version, for a
    module that builds them together)."""
    module = getattr(item, "module", None)
    if getattr(module, "build_extensions_together", None) is build_extensions_together:
        return list(VERSIONS)
    if getattr(module, "_unload_native_libraries", None) is not _unload_native_libraries:
        return []
    found = [v for v in getattr(getattr(item, "callspec", None), "params", {}).values()
             if isinstance(v, str) and v in VERSIONS]
    funcs = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info else ()):
        funcs += [d.func for d in defs]
    for func in funcs:
        found += _named_in(func)
    return found


def _wanted(items) -> list[str]:
    """The lib_api versions *items* build, in the order they will ask for them."""
    wanted: list[str] = []
    for item in items:
        wanted += [v for v in _versions_of(item) if v not in wanted]
    return wanted


def _stop_at_the_end(config) -> None:
    """Once per session: when it ends, no build starts and the running ones are killed."""
    with _lock:
        if _cleanup_added:
            return
        _cleanup_added.append(True)

    def stop() -> None:
        _stopping.set()
        with _lock:
            for proc in _running:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    config.add_cleanup(stop)


def build_in_background(session) -> None:
    """From the end of collection (``tests/conftest.py``): build the versions the
    collected tests need, one after another on one core, while the tests before
    them run.  g++ takes ~25 s of one core per version; most tests keep one core
    busy, so on a two-core machine the libraries are ready before the first native
    test, which waited for them before."""
    wanted = _wanted(session.items)
    if wanted:
        _stop_at_the_end(session.config)
        _build_side_by_side(wanted, 1)


def _prebuild_extensions(request) -> None:
    """As the first native test module starts: when its session's tests need more than
    one lib_api version, build those nobody has claimed yet (:func:`build_in_background`
    may have built them all), one per core, in the order the tests will ask for them."""
    with _lock:
        if _prebuilding:
            return
        _prebuilding.append(True)
    _stop_at_the_end(request.config)
    wanted = _wanted(request.session.items)
    if len(wanted) > 1:
        _build_side_by_side(wanted, _cores())


def golden(version: str, name: str) -> dict:
    """A golden file of the corpus (``goldens/v11/gemm_lib.json``), or skip."""
    corpus = corpus_path()
    path = corpus / "extensions" / "goldens" / version / f"{name}.json" if corpus else None
    if path is None or not path.exists():
        pytest.skip(f"golden {version}/{name} not in the corpus")
    return json.loads(path.read_text())


def flow(doc: dict, name: str) -> dict:
    for f in doc["flows"]:
        if f["name"] == name:
            return f
    raise KeyError(name)


def value(encoded: dict):
    """A golden ``A(ndarray)`` value as a numpy array."""
    import numpy as np
    return np.array(encoded["value"], dtype=encoded["dtype"]).reshape(encoded["shape"])


def example_graphs():
    """test_subgraph.py's two graphs: ``log(exp(a + b))`` and ``log(exp(a))``, MXNet's names."""
    import mxc
    a, b = mxc.sym.var("a"), mxc.sym.var("b")
    sym = mxc.sym.log(mxc.sym.exp(mxc.sym.elemwise_add(a, b, name="_plus0"), name="exp0"),
                      name="log0")
    sym2 = mxc.sym.log(mxc.sym.exp(a, name="exp1"), name="log1")
    return sym, sym2


@pytest.fixture(scope="session")
def v11_libs() -> Path:
    return build_extensions("v11")


@pytest.fixture(scope="session")
def v7_libs() -> Path:
    return build_extensions("v7")


@pytest.fixture(autouse=True, scope="module")
def _unload_native_libraries(request):
    """Leave the registries as the module found them (compiled libraries register names --
    ``my_gemm`` -- that other tests' Python extensions use too).  (Every native module uses
    this fixture: it also starts the session's builds, ``_prebuild_extensions``.)"""
    _prebuild_extensions(request)
    import mxc
    before = {id(r) for r in mxc.library.loaded()}
    yield
    import gc
    gc.collect()
    for rec in reversed(mxc.library.loaded()):
        if id(rec) not in before and rec.native is not None:
            mxc.library.unload(rec)
