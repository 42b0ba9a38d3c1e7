"""The part of TVM the runtime needs: its C++ runtime library, through ``tvm_ffi``.

Importing the ``tvm`` Python package loads the whole compiler (LLVM, Relax,
TIR, TVMScript: about 800 modules and 2-3 seconds).  Running a compiled
artifact needs none of it: the Relax virtual machine, tensors and device
APIs live in ``libtvm_runtime`` and are reached through the global
functions it registers with ``tvm_ffi`` (the small package TVM itself is
built on).  This module loads that library (and the CUDA runtime sidecar
when a CUDA artifact asks for it) and wraps the handful of functions the
session uses.  If ``tvm`` is already imported, the same library handle is
simply reused.

Nothing here imports ``tvm``; the imports are ``numpy``, ``ctypes`` and
``tvm_ffi``.  The global function names used (``runtime.TVMTensor*``,
``runtime.GetDeviceAttr``, the VM's ``vm_load_executable`` /
``vm_initialization``) are TVM's runtime ABI for the pinned version 0.27.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ArtifactError
from . import threads
from .bfloat16 import is_bfloat16, numpy_dtype

#: DLPack device type codes (``DLDeviceType``)
KDL_CPU = 1
KDL_CUDA = 2
DEVICE_CODES = {"cpu": KDL_CPU, "cuda": KDL_CUDA}

#: Relax VM allocator kinds (``tvm.runtime.vm.VirtualMachine.POOLED_ALLOCATOR``)
POOLED_ALLOCATOR = 2

_LOCK = threading.Lock()
_LIBS: dict[str, Any] = {}


def _lib_dirs() -> list[Path]:
    """Where ``libtvm_runtime`` may live: $TVM_LIBRARY_PATH, then the tvm wheel's ``lib/``."""
    dirs = [Path(p) for p in os.environ.get("TVM_LIBRARY_PATH", "").split(os.pathsep) if p]
    spec = importlib.util.find_spec("tvm")  # locates the package without importing it
    if spec is not None and spec.origin:
        root = Path(spec.origin).parent
        dirs += [root / "lib", root]
    return [d for d in dirs if d.is_dir()]


def ffi():
    """``tvm_ffi`` with ``libtvm_runtime`` loaded (once per process)."""
    if "tvm_runtime" in _LIBS:
        return _LIBS["ffi"]
    threads.configure_pool()  # before TVM sizes its pool (see threads.py)
    with _LOCK:
        if "tvm_runtime" not in _LIBS:
            import tvm_ffi
            from tvm_ffi.libinfo import load_lib_ctypes
            base = sys.modules.get("tvm.base")
            loaded = getattr(base, "_LOADED_LIBS", {}) if base is not None else {}
            if "tvm_runtime" in loaded:
                lib = loaded["tvm_runtime"]
            else:
                try:
                    lib = load_lib_ctypes("tvm", "tvm_runtime", "RTLD_GLOBAL",
                                          extra_lib_paths=_lib_dirs())
                except (OSError, RuntimeError) as exc:
                    raise ArtifactError(f"cannot load TVM's runtime library libtvm_runtime "
                                        f"(install apache-tvm or set TVM_LIBRARY_PATH): "
                                        f"{exc}") from None
            _LIBS["ffi"] = tvm_ffi
            _LIBS["tvm_runtime"] = lib
    _load_sidecar("extra")  # contrib kernels compiled code may call (sort, topk, random)
    return _LIBS["ffi"]


def _load_sidecar(name: str) -> bool:
    """Load ``libtvm_runtime_<name>`` (device API registrations); False if unavailable."""
    key = f"tvm_runtime_{name}"
    if key in _LIBS:
        return _LIBS[key] is not None
    if "tvm_runtime" not in _LIBS:
        ffi()
    with _LOCK:
        if key not in _LIBS:
            base = sys.modules.get("tvm.base")
            loaded = getattr(base, "_LOADED_LIBS", {}) if base is not None else {}
            lib = loaded.get(key)
            if lib is None:
                try:
                    from tvm_ffi.libinfo import load_lib_ctypes
                    lib = load_lib_ctypes("tvm", key, "RTLD_LOCAL", extra_lib_paths=_lib_dirs())
                except (OSError, RuntimeError):
                    lib = None
            _LIBS[key] = lib
    return _LIBS[key] is not None


@functools.lru_cache(maxsize=None)
def _func(name: str):
    f = ffi().get_global_func(name, allow_missing=True)
    if f is None:
        raise ArtifactError(f"TVM's runtime library has no function {name!r}; is "
                            f"apache-tvm 0.27 installed?")
    return f


def device(kind: str, index: int = 0):
    """A ``tvm_ffi.Device`` (``"cpu"`` or ``"cuda"``)."""
    return ffi().device(kind, index)


def device_exists(kind: str, index: int = 0) -> bool:
    """Whether this process can use device *kind* (never raises)."""
    try:
        if kind == "cpu":
            ffi()
            return True
        if kind == "cuda" and not _load_sidecar("cuda"):
            return False
        return int(_func("runtime.GetDeviceAttr")(DEVICE_CODES[kind], index, 0)) != 0
    except Exception:  # noqa: BLE001 - a probe
        return False


def cuda_compute_version(index: int = 0) -> str | None:
    """``"9.0"`` for an H100, or None without a usable GPU."""
    if not device_exists("cuda", index):
        return None
    try:
        return str(_func("runtime.GetDeviceAttr")(KDL_CUDA, index, 4))
    except Exception:  # noqa: BLE001
        return None


@functools.lru_cache(maxsize=1)
def has_cuda() -> bool:
    """True when a CUDA GPU is usable through TVM's runtime; never raises, memoized."""
    return device_exists("cuda", 0)


def load_module(path: str | os.PathLike):
    """Load an exported library (``export_library`` output) as a runtime module."""
    return ffi().load_module(str(path))


def create_vm(module, kind: str = "cpu", index: int = 0):
    """A fresh Relax VM over *module* (what ``relax.VirtualMachine`` does, without tvm)."""
    vm = module["vm_load_executable"]()
    args = [DEVICE_CODES[kind], index, POOLED_ALLOCATOR]
    if kind != "cpu":  # the VM runs shape computations on the host
        args += [KDL_CPU, 0, POOLED_ALLOCATOR]
    vm["vm_initialization"](*args)
    return vm


# ---------------------------------------------------------------------------
# tensors
# ---------------------------------------------------------------------------
ALIGNMENT = 64  # TVM kernels assume (llvm.assume) 64-byte aligned buffers


def empty(shape, dtype: str, dev):
    """An uninitialised, 64-byte aligned tensor on *dev*."""
    f = ffi()
    return _func("runtime.TVMTensorAllocWithScope")(f.Shape([int(d) for d in shape]),
                                                    f.dtype(dtype), dev, None)


def is_aligned(arr: np.ndarray) -> bool:
    return arr.ctypes.data % ALIGNMENT == 0 and arr.flags.c_contiguous


def dlpack_exchangeable(dtype) -> bool:
    """Whether numpy passes *dtype* through DLPack (not ml_dtypes' bfloat16: copied by bytes)."""
    return not is_bfloat16(dtype)


def from_numpy(arr: np.ndarray, dev=None):
    """A tensor holding *arr*: zero-copy when aligned on the CPU, else a copy."""
    if dev is None or dev.dlpack_device_type() == KDL_CPU:
        if is_aligned(arr) and dlpack_exchangeable(arr.dtype):
            return ffi().from_dlpack(arr)
        dev = dev or device("cpu")
    t = empty(arr.shape, arr.dtype.name, dev)
    copy_from_numpy(t, arr)
    return t


def copy_from_numpy(tensor, arr: np.ndarray) -> None:
    """Copy the contiguous host array *arr* into *tensor* (any device)."""
    arr = np.ascontiguousarray(arr)
    _func("runtime.TVMTensorCopyFromBytes")(tensor, ctypes.c_void_p(arr.ctypes.data), arr.nbytes)


def to_numpy(tensor, copy: bool = True) -> np.ndarray:
    """*tensor* as a numpy array (a copy, or a zero-copy view of a CPU tensor)."""
    if tensor.device.dlpack_device_type() == KDL_CPU and dlpack_exchangeable(tensor.dtype):
        view = np.from_dlpack(tensor)
        return view.copy() if copy else view
    return copy_to_host(tensor)


def copy_to_host(tensor) -> np.ndarray:
    """A new numpy array holding *tensor* (any device; synchronous)."""
    out = np.empty(tuple(tensor.shape), dtype=numpy_dtype(str(tensor.dtype)))
    _func("runtime.TVMTensorCopyToBytes")(tensor, ctypes.c_void_p(out.ctypes.data), out.nbytes)
    return out


def time_call(module, name: str, dev, args, *, repeat: int, min_ms: float) -> list[float]:
    """Seconds per call of *module*'s function *name* on *args*, one figure per *repeat*:
    TVM's C++ time evaluator, each figure the mean of as many calls as take at least
    *min_ms* (after one untimed call), the device synchronised."""
    import struct
    timer = _func("runtime.RPCTimeEvaluator")(
        _defining(module, name), name, dev.dlpack_device_type(), dev.index, 1, repeat,
        max(1, int(min_ms)), 100, 0, 1, 0, "")
    return list(struct.unpack("@" + "d" * repeat, timer(*args)))


def _defining(module, name: str):
    """The module among *module* and its imports (breadth first) that defines *name*:
    the time evaluator looks a function up in the module it is given only."""
    todo = [module]
    while todo:
        mod = todo.pop(0)
        if mod.implements_function(name):
            return mod
        todo += list(mod.imports)
    raise ArtifactError(f"no module of the artifact defines the kernel {name!r}")


def sync(dev) -> None:
    """Wait for the device's queued work (GPU timing)."""
    if dev.dlpack_device_type() != KDL_CPU:
        _func("runtime.Device_StreamSync")(dev, 0)


#: TVM's affinity modes (``runtime.config_threadpool``'s first argument): "big cores",
#: and "the workers share the CPUs listed" (whose list also sizes a new pool)
_MODE_BIG, _MODE_SHARE_LISTED = 1, -3
_current = threading.local()


def use_threads(threads: int) -> None:
    """Make compiled code called from *this* thread use *threads* of its pool's threads.

    TVM keeps one pool per calling thread.  The first call on a thread creates
    that pool with exactly *threads* workers: ``config_threadpool`` with a CPU
    list sets the thread-local ``MaxConcurrency`` to the list's length before
    the pool is built, and with ``TVM_BIND_THREADS=0`` (see :mod:`.threads`)
    the list binds nothing.  Otherwise the pool would hold ``TVM_NUM_THREADS``
    workers however few a session uses.  Later calls only change how many of the
    pool's workers run (reconfiguring re-binds workers, so an unchanged count is
    a no-op).
    """
    previous = getattr(_current, "threads", None)
    if previous == threads:
        return
    configure = _func("runtime.config_threadpool")
    if previous is None and os.environ.get("TVM_BIND_THREADS") == "0":
        configure(_MODE_SHARE_LISTED, int(threads), [str(i) for i in range(int(threads))])
    else:
        configure(_MODE_BIG, int(threads))
    _current.threads = threads
