"""Asking Linux for AMX tile state before an artifact's AMX kernels run.

Linux (5.16 and later) enables the AMX tile data state (``XTILEDATA``, 8 KiB of
registers a thread) only for processes that ask: until a process calls
``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``, its first tile instruction
dies of SIGILL, however the CPU and the kernel report AMX.  oneDNN asks when it
first uses AMX; TVM does not, so the mxc runtime asks before it runs an artifact
compiled with ``amx-tile`` (:func:`~mxc.runtime.artifact.check_target_runnable`).
The permission is the whole process's and its children's, so one request
suffices, and a refusal becomes an :class:`~mxc.errors.ArtifactError` saying why
rather than a crash.

Only the standard library: this sits in the runtime.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import sys

#: x86-64 system call number of ``arch_prctl``
SYS_ARCH_PRCTL = 158
#: ``arch_prctl`` codes (``asm/prctl.h``): which dynamic XSAVE features the kernel
#: supports, which this process may use, and a request to use one
ARCH_GET_XCOMP_SUPP, ARCH_GET_XCOMP_PERM, ARCH_REQ_XCOMP_PERM = 0x1021, 0x1022, 0x1023
#: the XSAVE feature number of the AMX tile data
XFEATURE_XTILEDATA = 18


def _applies() -> bool:
    return sys.platform == "linux" and platform.machine().lower() in ("x86_64", "amd64")


def _arch_prctl(code: int, arg) -> tuple[int, int]:
    libc = ctypes.CDLL(None, use_errno=True)
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(SYS_ARCH_PRCTL), ctypes.c_int(code), arg)
    return result, ctypes.get_errno()


def _mask(code: int) -> int | None:
    """The feature bit mask *code* (``ARCH_GET_XCOMP_SUPP``/``_PERM``) reports; None
    where the kernel has no such query (before 5.16) or this is not Linux on x86-64."""
    if not _applies():
        return None
    mask = ctypes.c_uint64(0)
    result, _ = _arch_prctl(code, ctypes.byref(mask))
    return int(mask.value) if result == 0 else None


def kernel_supports_tiles() -> bool | None:
    """Whether the kernel supports AMX tile data for processes (None: unknown)."""
    mask = _mask(ARCH_GET_XCOMP_SUPP)
    return None if mask is None else bool(mask >> XFEATURE_XTILEDATA & 1)


def tiles_permitted() -> bool:
    """Whether this process may use AMX tile data now."""
    mask = _mask(ARCH_GET_XCOMP_PERM)
    return bool(mask is not None and mask >> XFEATURE_XTILEDATA & 1)


@functools.lru_cache(maxsize=1)
def request_tiles() -> str | None:
    """Ask the kernel for this process's AMX tile data state: None when granted (or
    nothing to ask: not Linux on x86-64), else why not, in words."""
    if not _applies():
        return None
    result, err = _arch_prctl(ARCH_REQ_XCOMP_PERM, ctypes.c_ulong(XFEATURE_XTILEDATA))
    if result == 0:
        return None
    if err == errno.EINVAL and kernel_supports_tiles() is None:
        return (f"this Linux kernel ({platform.release()}) predates AMX support "
                f"(arch_prctl ARCH_REQ_XCOMP_PERM needs Linux 5.16 or later)")
    if err == errno.EOPNOTSUPP:
        return "the kernel reports no AMX tile state on this CPU (XTILEDATA not supported)"
    return f"the kernel refused AMX tile state: {os.strerror(err)} (errno {err})"
