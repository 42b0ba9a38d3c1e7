"""Replays one golden file of ``corpus/extensions/goldens`` through ``mxc.mxnet``.

Run as a script, in a fresh process per golden (loaded libraries and their
registrations are process-wide, as in the MXNet worker that made the
golden)::

    python tests/extensions/mxnet_replay.py GOLDEN.json LIBDIR BUILD_ROOT OUT.json

It follows the golden's replay contract: the prelude once (``LIBDIR``,
``LIBNAME``, ``TMP``, ``BUILD_ROOT`` set), then every flow's code in order in
this process, each in a fresh namespace (prelude globals + ``E``, ``I``, ``S``)
inside ``with mx.name.NameManager():``, under an fd-level capture of stdout
and stderr; after each flow the namespace is cleared, ``gc.collect()`` and
``mx.nd.waitall()`` run inside the capture.  The working directory is LIBDIR,
as in the golden worker.

The only edits to the golden's code are the import lines (``import mxnet as
mx`` -> ``import mxc.mxnet as mx``, ``from mxnet.x`` -> ``from mxc.mxnet.x``)
and the prelude's two C-API helpers, which call MXNet's C library through
ctypes: ``list_ops`` lists mxc's operator registry instead, ``op_info``
returns None (MXNet's ``MXSymbolGetAtomicSymbolInfo`` has no mxc
counterpart; the comparison excludes ``op_info`` and ``new_ops``).

The result (``OUT.json``) holds, per flow, ``E`` (with the normalised
``stdout``/``stderr``) and the traceback of an exception that escaped the flow.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import re
import sys
import tempfile
import traceback

_LIBC = ctypes.CDLL(None)

_PRELUDE_CAPI = "from mxnet.base import _LIB, check_call, py_str, mx_uint, c_str, OpHandle\n"


def port(code: str) -> str:
    """The golden's Python with MXNet's imports pointed at mxc.mxnet (nothing else)."""
    code = re.sub(r"(?m)^(\s*)import mxnet as mx\b", r"\1import mxc.mxnet as mx", code)
    return re.sub(r"(?m)^(\s*)from mxnet(\.| )", r"\1from mxc.mxnet\2", code)


def port_prelude(prelude: str) -> str:
    if _PRELUDE_CAPI not in prelude:
        raise ValueError("the golden's prelude changed: its C-API import line is not where the "
                         "replay expects it")
    return port(prelude.replace(_PRELUDE_CAPI, ""))


def list_ops() -> set[str]:
    """Every registered operator name (mxc's counterpart of ``MXListAllOpNames``)."""
    from mxc.compiler.ops.registry import registered_ops
    return set(registered_ops())


def op_info(name: str) -> None:
    return None


class FdCapture:
    """fd 1 and fd 2 into temporary files (C/C++ output included)."""

    def __enter__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        _LIBC.fflush(None)
        self._files = [tempfile.TemporaryFile(), tempfile.TemporaryFile()]
        self._saved = [os.dup(1), os.dup(2)]
        os.dup2(self._files[0].fileno(), 1)
        os.dup2(self._files[1].fileno(), 2)
        return self

    def __exit__(self, *exc):
        sys.stdout.flush()
        sys.stderr.flush()
        _LIBC.fflush(None)
        os.dup2(self._saved[0], 1)
        os.dup2(self._saved[1], 2)
        for fd in self._saved:
            os.close(fd)
        outs = []
        for f in self._files:
            f.seek(0)
            outs.append(f.read().decode("utf-8", "replace"))
            f.close()
        self.out, self.err = outs
        return False


def _jsonable(value):
    """E as JSON (numpy scalars and tuples the flows may leave in it)."""
    return json.loads(json.dumps(value, default=lambda o: o.item() if hasattr(o, "item")
                                 else repr(o)))


def replay(golden: dict, libdir: str, build_root: str, out: str | None = None) -> dict:
    tmp = tempfile.mkdtemp(prefix="mxc_replay_")
    libname = golden["library"] or "libgemm_lib.so"
    g = {"__name__": "__mxc_replay__", "LIBDIR": libdir, "LIBNAME": libname, "TMP": tmp,
         "BUILD_ROOT": build_root}
    os.chdir(libdir)
    with FdCapture() as cap:
        exec(compile(port_prelude(golden["prelude"]), "<prelude>", "exec"), g)
    g["list_ops"], g["op_info"] = list_ops, op_info
    mx = g["mx"]
    result = {"prelude_output": {"stdout": cap.out, "stderr": cap.err}, "flows": []}
    shared: dict = {}
    for flow in golden["flows"]:
        ns = dict(g)
        E: dict = {}
        ns.update(E=E, I={}, S=shared)
        error = None
        with FdCapture() as cap:
            try:
                with mx.name.NameManager():
                    exec(compile(port(flow["python"]), f"<flow {flow['name']}>", "exec"), ns)
            except Exception:  # noqa: BLE001 - reported as the flow's failure
                error = traceback.format_exc()
            ns.clear()
            del ns
            gc.collect()
            mx.nd.waitall()
        E["stdout"] = g["norm"](cap.out)
        E["stderr"] = g["norm"](cap.err)
        result["flows"].append({"name": flow["name"], "E": _jsonable(E),
                                "error": g["norm"](error) if error else None})
        if out is not None:  # after every flow: a crash keeps the flows done so far
            with open(out, "w") as f:
                json.dump(result, f)
    return result


def main(argv: list[str]) -> int:
    golden_path, libdir, build_root, out = argv
    with open(golden_path) as f:
        golden = json.load(f)
    replay(golden, os.path.abspath(libdir), os.path.abspath(build_root), out)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    sys.exit(main(sys.argv[1:]))
