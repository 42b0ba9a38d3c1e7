"""The exception hierarchy of mxc.

Every error a user can trigger with bad input is an :class:`MxcError`, so the
CLI can print one readable line and callers can catch one base class.  Errors
carry *where* (file:line:column, node name, attribute) and *what was expected*
in their message; the subclasses only add a family that the CLI maps to an
exit code.

A *family* is a class that sets ``exit_code`` itself; its subclasses share its
code.  Every family has its own code (a test checks it), so a script can tell
from ``$?`` alone what went wrong; :data:`EXIT_CODES` lists them all, with the
codes that are not families (0, the usage error, the interrupt), and is what
``mxc --help`` prints.
"""

from __future__ import annotations


class MxcError(Exception):
    """Base class of every error mxc raises on purpose.

    Raised directly (or through a subclass without a code of its own) it is
    "any other error": exit code 1, which the CLI also returns for a bug.
    """

    exit_code = 1


#: exit code of a command line argparse refuses (EX_USAGE), distinct from every family
USAGE_EXIT_CODE = 64

#: exit code when the reader of standard output went away (``mxc inspect ... | head -1``):
#: 128 + SIGPIPE, what the shell reports for coreutils killed by the signal in that case
BROKEN_PIPE_EXIT_CODE = 141


class FrontendError(MxcError):
    """A model file (symbol JSON, .params) could not be read."""

    exit_code = 2


class ParseError(FrontendError):
    """Malformed text; the message starts with ``file:line:column``."""

    def __init__(self, message: str, *, source: str = "<string>", line: int | None = None,
                 column: int | None = None):
        self.source = source
        self.line = line
        self.column = column
        where = source
        if line is not None:
            where += f":{line}"
            if column is not None:
                where += f":{column}"
        super().__init__(f"{where}: {message}")
        self.bare_message = message


class ParamsFormatError(FrontendError):
    """A .params (NDArray list) file is truncated, corrupt or unsupported."""


class GraphError(MxcError):
    """The graph structure is invalid (dangling entries, cycles, arity)."""

    exit_code = 10


class VerificationError(GraphError):
    """``Graph.verify()`` found a broken invariant; names the node."""


class OpError(MxcError):
    """Base of operator-related errors."""

    exit_code = 3


class UnsupportedOpError(OpError):
    """One or more operators are unknown; lists every one with its count."""

    def __init__(self, counts: dict[str, int], where: str = "graph",
                 nodes: dict[str, list[str]] | None = None,
                 suggestions: dict[str, str] | None = None):
        self.counts = dict(counts)
        self.nodes = dict(nodes or {})
        self.suggestions = dict(suggestions or {})

        def item(op: str, n: int) -> str:
            names = self.nodes.get(op, [])
            extra = ""
            if names:
                extra += ": node" + ("s " if len(names) > 1 else " ") + ", ".join(
                    repr(x) for x in names[:3]) + (", ..." if len(names) > 3 else "")
            if op in self.suggestions:
                extra += f"; did you mean {self.suggestions[op]!r}?"
            return f"{op} (x{n}{extra})"
        listing = ", ".join(item(op, n) for op, n in sorted(counts.items()))
        hint = ("" if len(self.suggestions) == len(counts) else
                "; an extension's operators need its library loaded first (--load LIB, "
                "mxc.library.load)")
        super().__init__(f"{where} uses {len(counts)} unsupported operator(s): {listing}{hint}")


class AttributeInvalidError(OpError):
    """An operator attribute has a value that does not parse or validate."""


class AttributeRequiredError(OpError):
    """A required operator attribute is missing."""


class ShapeError(OpError):
    """Shape inference found inconsistent or impossible shapes."""


class DTypeError(OpError):
    """Dtype inference found inconsistent dtypes."""


class ExecutionError(MxcError):
    """Running a graph failed (missing input, kernel failure)."""

    exit_code = 4


class PartitionError(MxcError):
    """Partitioning failed (unknown backend, broken selector contract)."""

    exit_code = 5


class PassError(MxcError):
    """A graph pass failed or left an invalid graph, or a pipeline names no known pass."""

    exit_code = 11


class ExtensionError(MxcError):
    """An extension library failed to load or raised inside a callback."""

    exit_code = 6


class BackendError(MxcError):
    """Code generation or compilation failed."""

    exit_code = 7


class DependencyError(MxcError):
    """An optional package a feature needs is not installed; says what to install."""

    exit_code = 9


class ArtifactError(MxcError):
    """A deployable artifact is corrupt, truncated or of the wrong version/target."""

    exit_code = 8


class OutputError(MxcError):
    """An output path cannot be written (missing directory, a directory, no permission)."""

    exit_code = 12


class SigningError(MxcError):
    """A signing key cannot be read or used (wrong file, wrong kind of key).

    A signature that does not verify is an :class:`ArtifactError` (the artifact
    is refused); this is about the key the user gave.
    """

    exit_code = 13


#: every exit code of ``mxc``, with what it means (the README's table says more)
EXIT_CODES: dict[int, str] = {
    0: "ok",
    MxcError.exit_code: "other error",
    FrontendError.exit_code: "model files",
    OpError.exit_code: "operator",
    ExecutionError.exit_code: "running",
    PartitionError.exit_code: "partition",
    ExtensionError.exit_code: "extension",
    BackendError.exit_code: "compile/tune",
    ArtifactError.exit_code: "artifact",
    DependencyError.exit_code: "missing package",
    GraphError.exit_code: "graph structure",
    PassError.exit_code: "pass/pipeline",
    OutputError.exit_code: "output path",
    SigningError.exit_code: "signing key",
    USAGE_EXIT_CODE: "command-line usage",
    130: "interrupted",
    BROKEN_PIPE_EXIT_CODE: "output pipe closed",
}


def exit_code_families() -> dict[int, list[type[MxcError]]]:
    """The families (classes that set ``exit_code`` themselves) by code, among the
    :class:`MxcError` subclasses imported so far."""
    families: dict[int, list[type[MxcError]]] = {}
    pending: list[type[MxcError]] = [MxcError]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if "exit_code" in vars(cls):
            families.setdefault(cls.exit_code, []).append(cls)
    return families


def describe_exit_codes() -> str:
    """One line listing every exit code, for ``mxc --help``."""
    return "exit codes: " + ", ".join(f"{code} {what}" for code, what in EXIT_CODES.items()) \
        + " (the README's table)"
