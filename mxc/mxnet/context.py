"""``mx.cpu()`` / ``mx.gpu()``: MXNet's device contexts.

mxc.mxnet computes on the CPU with numpy (and in compiled libraries'
kernels); a GPU context can be named (scripts build one to pass around) but
placing an array on it raises :class:`~mxc.mxnet.base.NotSupportedError`.
"""

from __future__ import annotations

import threading

from .base import not_supported

__all__ = ["Context", "cpu", "gpu", "cpu_pinned", "current_context", "num_gpus"]


class Context:
    """A device: ``Context('cpu', 0)``; usable as ``with mx.cpu():``."""

    _local = threading.local()
    devtype2str = {1: "cpu", 2: "gpu", 3: "cpu_pinned", 5: "cpu_shared"}
    devstr2type = {v: k for k, v in devtype2str.items()}

    def __init__(self, device_type: "str | Context", device_id: int = 0):
        if isinstance(device_type, Context):
            device_type, device_id = device_type.device_type, device_type.device_id
        if device_type not in self.devstr2type:
            raise ValueError(f"unknown device type {device_type!r}; expected one of "
                             f"{', '.join(self.devstr2type)}")
        self.device_type = device_type
        self.device_id = int(device_id)
        self._old: Context | None = None

    @property
    def device_typeid(self) -> int:
        return self.devstr2type[self.device_type]

    def __eq__(self, other) -> bool:
        return (isinstance(other, Context) and other.device_type == self.device_type
                and other.device_id == self.device_id)

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_id))

    def __repr__(self) -> str:
        return f"{self.device_type}({self.device_id})"

    __str__ = __repr__

    def __enter__(self) -> "Context":
        self._old = current_context()
        Context._local.value = self
        return self

    def __exit__(self, *exc) -> None:
        Context._local.value = self._old

    def empty_cache(self) -> None:
        """Nothing to release: arrays are numpy buffers owned by Python."""


def cpu(device_id: int = 0) -> Context:
    return Context("cpu", device_id)


def cpu_pinned(device_id: int = 0) -> Context:
    return Context("cpu_pinned", device_id)


def gpu(device_id: int = 0) -> Context:
    return Context("gpu", device_id)


def num_gpus() -> int:
    """mxc.mxnet runs no kernels on GPUs: 0."""
    return 0


def current_context() -> Context:
    ctx = getattr(Context._local, "value", None)
    return ctx if ctx is not None else Context("cpu", 0)


def check_cpu(ctx: "Context | None", what: str) -> Context:
    """*ctx* (default: the current one), refused unless it is a CPU context."""
    ctx = current_context() if ctx is None else Context(ctx)
    if ctx.device_type == "gpu":
        raise not_supported(f"{what} on {ctx} (mxc.mxnet computes on the CPU; compile the "
                            f"model with mxc.compile(target='cuda') to run it on a GPU)")
    return ctx
