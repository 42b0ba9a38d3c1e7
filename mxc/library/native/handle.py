"""One opened compiled extension library, and how its failures are reported."""

from __future__ import annotations

import ctypes
import hashlib
from pathlib import Path
from typing import Any

from ...errors import ExtensionError
from .abi import Abi, read_messages

__all__ = ["NativeLibrary", "sha256_of", "library_text"]


def sha256_of(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def library_text(raw: bytes | None, lib_name: str, what: str) -> str:
    """A C string the library handed over (a name, a device, an attribute), as text.

    MXNet keeps these as ``std::string``; Python needs them decoded, and a
    NULL or a string that is not UTF-8 is the library's fault: an
    :class:`ExtensionError` naming the library and the string's role, not a
    ``UnicodeDecodeError`` from deep inside the loader.
    """
    if raw is None:
        raise ExtensionError(f"extension library {lib_name!r}: {what} is a NULL string")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExtensionError(f"extension library {lib_name!r}: {what} is not UTF-8 text "
                             f"({raw[:60]!r}: {exc.reason} at byte {exc.start})") from None


class NativeLibrary:
    """A ``dlopen``-ed library with its typed entry points (:class:`~.abi.Abi`).

    Attributes
    ----------
    path, name:
        The resolved file and its file name (``libgemm_lib.so``), which errors use.
    sha256:
        Digest of the file when it was loaded (artifacts record it).
    abi:
        The entry points for the library's ``_opVersion``.
    """

    def __init__(self, path: Path, cdll: ctypes.CDLL, abi: Abi, sha256: str):
        self.path = path
        self.name = path.name
        self.cdll = cdll
        self.abi = abi
        self.sha256 = sha256

    @property
    def version(self) -> int:
        return self.abi.version

    def free(self, ptr: Any) -> None:
        """Release memory the library malloc'ed (``_opCallFree``)."""
        if ptr:
            self.abi._opCallFree(ptr)

    def fail(self, what: str, mx_text: str, node: Any = None) -> ExtensionError:
        """The error for a hook that returned ``MX_FAIL``.

        *what* says what mxc called (``operator 'my_gemm' infer_shape``),
        *mx_text* what MXNet says (``Error calling InferShape for custom
        operator 'my_gemm'``).  The library's ``MX_ERROR_MSG`` messages follow
        as MXNet's "Extension Traceback" (all of them: the library never
        clears its list).
        """
        messages = read_messages(self.abi)
        text = mx_text
        if messages:
            text += "\nExtension Traceback:\n" + "".join(
                f"\t[{i}] {m}\n" for i, m in enumerate(messages))
        node_name = node if isinstance(node, str) or node is None else getattr(node, "name", None)
        where = f" on node {node_name!r}" if node_name else ""
        err = ExtensionError(f"extension library {self.name!r}: {what} failed{where}: {text}")
        err.extension = self.name
        err.library = str(self.path)
        err.function = what
        err.node = node_name
        err.messages = messages
        err.mxnet_message = text
        err.original = None
        return err

    def __repr__(self) -> str:
        return f"<NativeLibrary {self.name} lib_api v{self.version}>"
