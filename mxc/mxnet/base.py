"""``mx.base``: MXNet's error type over mxc's typed errors.

Every error ``mxc.mxnet`` raises is an :class:`MXNetError`, as scripts written
for MXNet catch it.  When the cause is one of mxc's own errors (a
:class:`~mxc.errors.ShapeError`, an :class:`~mxc.errors.ExtensionError` from a
library hook, ...), the raised object is an instance of both: a class named
``MXNetError`` deriving from :class:`MXNetError` and from the mxc error's class,
so ``except mxc.errors.ExtensionError`` keeps working too.

Errors of extension-library hooks are worded as MXNet words them
(``Error calling InferShape for custom operator 'my_gemm'`` followed by the
library's own messages under ``Extension Traceback:``), because scripts and
their tests compare these texts.
"""

from __future__ import annotations

import logging
import os

from ..errors import ExtensionError, MxcError

__all__ = ["MXNetError", "mxnet_error", "NotSupportedError", "RELEASES", "emulate", "emulated",
           "version_number"]

log = logging.getLogger("mxc.mxnet")


#: MXNet release -> (its version number, the lib_api version its library loader accepts)
RELEASES = {"1.9.1": (10901, 11), "1.8.0": (10800, 10), "1.7.0": (10700, 7)}
_emulated: list[str | None] = [None]


def emulate(release: str | None) -> None:
    """Behave as MXNet *release* (``"1.9.1"``, ``"1.8.0"``, ``"1.7.0"``) where releases differ:
    which extension libraries load, the version ``initialize`` and ``tojson`` report.
    None restores the default (MXNet 1.9.1's number; every supported lib_api version loads).
    The environment variable ``MXC_MXNET_EMULATE`` sets the same."""
    if release is not None and release not in RELEASES:
        raise MXNetError(f"cannot emulate MXNet {release!r}; releases: {', '.join(RELEASES)}")
    _emulated[0] = release


def emulated() -> str | None:
    """The MXNet release being emulated (None: mxc.mxnet's default)."""
    release = _emulated[0] or os.environ.get("MXC_MXNET_EMULATE") or None
    if release is not None and release not in RELEASES:
        raise MXNetError(f"MXC_MXNET_EMULATE={release!r} is not a release mxc.mxnet can "
                         f"emulate ({', '.join(RELEASES)})")
    return release


def version_number() -> int:
    """MXNet's integer version (``MXGetVersion``) of the emulated release: 10901 by default."""
    release = emulated()
    return RELEASES[release][0] if release else RELEASES["1.9.1"][0]


class MXNetError(MxcError):
    """The error every ``mxc.mxnet`` API raises (MXNet's ``mx.base.MXNetError``)."""


class NotSupportedError(MXNetError):
    """An MXNet feature ``mxc.mxnet`` does not provide; the message names it."""


_MIXED: dict[type, type] = {}

# the MXNet name of each custom-operator hook, as MXNet's C API names it in its errors
_HOOK_NAMES = {"parse_attrs": "ParseAttrs", "infer_shape": "InferShape",
               "infer_type": "InferType", "infer_storage_type": "InferSType",
               "forward": "FCompute", "backward": "FCompute",
               "create_op_state": "CreateOpState", "mutate_inputs": "MutateInputs"}


def _mixed_class(cls: type) -> type:
    """A class named ``MXNetError`` that is both :class:`MXNetError` and *cls*."""
    if issubclass(cls, MXNetError) or not issubclass(cls, MxcError):
        return MXNetError
    mixed = _MIXED.get(cls)
    if mixed is None:
        mixed = type("MXNetError", (MXNetError, cls), {"__module__": __name__,
                                                       "__init__": Exception.__init__,
                                                       "__qualname__": "MXNetError"})
        _MIXED[cls] = mixed
    return mixed


def _hook_of(exc: ExtensionError) -> str | None:
    function = getattr(exc, "function", None) or ""
    for hook in _HOOK_NAMES:
        if function.endswith(" " + hook) or function == hook:
            return hook
    return None


def extension_message(exc: ExtensionError) -> str | None:
    """MXNet's text for a failed library hook, or None when *exc* is not one."""
    hook = _hook_of(exc)
    op = getattr(exc, "operator", None)
    function = getattr(exc, "function", "") or ""
    if op is None and function.startswith("operator "):
        op = function.split("'")[1] if "'" in function else None
    if hook is None or op is None:
        return None
    name = _HOOK_NAMES[hook]
    if hook in ("forward", "backward") and getattr(exc, "stateful", False):
        name = "FStatefulCompute"
    text = f"Check failed: retval: Error calling {name} for custom operator '{op}'"
    messages = getattr(exc, "library_messages", None)
    if messages:
        text += "\nExtension Traceback:\n" + "".join(
            f"\t[{i}] {m}\n" for i, m in enumerate(messages)) + "\n"
    return text


def _library_text(exc: BaseException) -> str | None:
    """MXNet's text for an error a compiled library's hook reported (``mxnet_message``)."""
    seen = 0
    while exc is not None and seen < 8:
        text = getattr(exc, "mxnet_message", None)
        if text:
            return f"Check failed: retval: {text}" if text.startswith("Error calling ") else text
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def mxnet_error(exc: BaseException, *, node: str | None = None,
                message: str | None = None) -> MXNetError:
    """The :class:`MXNetError` to raise for *exc* (kept as ``__cause__``).

    *node* adds MXNet's ``Error in operator NODE:`` prefix (symbolic inference
    errors carry it).
    """
    if isinstance(exc, MXNetError) and message is None and node is None:
        return exc
    text = message
    if text is None:
        text = _library_text(exc)
    if text is None and isinstance(exc, ExtensionError):
        text = extension_message(exc)
    if text is None:
        text = str(exc)
    if node is not None:
        text = f"Error in operator {node}: {text}"
    err = _mixed_class(type(exc))(text)
    for attr in ("extension", "function", "node", "library_messages"):
        if hasattr(exc, attr):
            try:
                setattr(err, attr, getattr(exc, attr))
            except AttributeError:  # pragma: no cover - read-only attribute
                pass
    err.__cause__ = exc
    return err


def not_supported(what: str) -> NotSupportedError:
    """The error for an MXNet feature mxc.mxnet does not implement."""
    return NotSupportedError(f"mxc.mxnet does not support {what}")
