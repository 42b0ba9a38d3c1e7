"""Run a compiled module on numpy arrays (a thin helper over ``relax.VirtualMachine``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from ...runtime.threads import configure_pool

configure_pool()  # size TVM's thread pool before tvm can create it
import tvm  # noqa: E402
from tvm import relax

from ...errors import ExecutionError


def _device(device: Any) -> tvm.runtime.Device:
    if isinstance(device, tvm.runtime.Device):
        return device
    text = str(device or "cpu")
    kind, _, index = text.partition(":")
    kind = {"llvm": "cpu", "gpu": "cuda"}.get(kind, kind)
    try:
        return tvm.device(kind, int(index) if index else 0)
    except Exception as exc:
        raise ExecutionError(f"unknown device {device!r}: {exc}") from None


def load_vm(executable: Any, device: Any = "cpu") -> relax.VirtualMachine:
    """A ``relax.VirtualMachine`` for *executable* on *device* (``"cpu"``, ``"cuda:0"`` ...)."""
    if isinstance(executable, relax.VirtualMachine):
        return executable
    return relax.VirtualMachine(executable, _device(device))


def _to_numpy(value) -> list[np.ndarray]:
    if isinstance(value, tvm.runtime.Tensor):
        return [value.numpy()]
    if hasattr(value, "numpy"):
        return [np.asarray(value.numpy())]
    out: list[np.ndarray] = []
    for item in value:  # a tuple (tvm_ffi Array) of outputs, possibly nested
        out.extend(_to_numpy(item))
    return out


def run_module(executable: Any, inputs: Sequence[np.ndarray], device: Any = "cpu",
               func_name: str = "main") -> list[np.ndarray]:
    """Call *func_name* of a compiled module with *inputs*; returns every output.

    *executable* is what :func:`mxc.backends.tvm.build_module` returned (or a
    ``relax.VirtualMachine`` from :func:`load_vm`, to reuse one across calls).
    Inputs are passed in the function's parameter order
    (:func:`mxc.backends.tvm.function_input_names`).
    """
    vm = load_vm(executable, device)
    dev = _device(device)
    args = [tvm.runtime.tensor(np.ascontiguousarray(x), dev) for x in inputs]
    try:
        result = vm[func_name](*args)
    except Exception as exc:
        raise ExecutionError(f"running {func_name!r} on {dev} failed: "
                             f"{type(exc).__name__}: {exc}") from exc
    return _to_numpy(result)
