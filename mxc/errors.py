"""The exception hierarchy of mxc.

Every error a user can trigger with bad input is an :class:`MxcError`, so the
CLI can print one readable line and callers can catch one base class.  Errors
carry *where* (file:line:column, node name, attribute) and *what was expected*
in their message; the subclasses only add a family that the CLI maps to an
exit code.
"""

from __future__ import annotations


class MxcError(Exception):
    """Base class of every error mxc raises on purpose."""

    exit_code = 1


#: exit code of a command line argparse refuses (EX_USAGE), distinct from every family
USAGE_EXIT_CODE = 64


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

    exit_code = 3


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
    """A graph pass failed or left an invalid graph."""

    exit_code = 5


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

    exit_code = 1
