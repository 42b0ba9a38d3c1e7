"""The usage error of the command line, apart from :mod:`mxc.cli` so that the verbs and
their helpers can raise it without importing the package that imports them."""

from __future__ import annotations


class UsageError(Exception):
    """A command line argparse accepts but the model refuses: a ``--shape`` for an input
    the model does not have, a shape an artifact cannot take, a missing ``--shape``.

    Not an :class:`~mxc.errors.MxcError` family: :func:`mxc.cli.main` reports it as
    argparse reports its own errors (the verb's usage line, then the message) with
    :data:`~mxc.errors.USAGE_EXIT_CODE`, since what is wrong is the command line.
    """
