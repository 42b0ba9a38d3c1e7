"""Do the parameter arrays given belong to this model?

A model compiled without its weights, or with another model's ``.params``,
would otherwise "succeed": every weight silently becomes a run-time input and
the mistake shows at deployment.  :func:`check_params` is the one check the
compiler and the reference runner share: every model input that is not data
(a name the user gave a shape or a value for, or a ``*label`` input, as MXNet's
Module names them) must have an array, unless the caller asked for weights
as inputs; arrays that match no input are worth a warning (a typo, a stale
key, the wrong file).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable

from ..errors import FrontendError

log = logging.getLogger(__name__)

#: how many missing names a message lists before "and N more"
SHOWN = 8


class MissingParamsError(FrontendError):
    """Parameter arrays the model needs are not in the parameters given."""

    def __init__(self, message: str, missing: list[str], expected: int):
        super().__init__(message)
        self.missing = missing
        self.expected = expected


def is_data_name(name: str) -> bool:
    """MXNet's convention for inputs that are fed, not trained: ``data``, ``*label``."""
    return name == "data" or name.endswith("label")


def _listing(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN])
    return shown + (f" (and {len(names) - SHOWN} more)" if len(names) > SHOWN else "")


def check_params(inputs: Iterable[str], params: Collection[str], data: Collection[str], *,
                 source: str | None = None, weights_as_inputs: bool = False,
                 hint: str = "Give the model's .params file.") -> list[str]:
    """Raise :class:`MissingParamsError` when weights are missing; return (and log as a
    warning) the names in *params* that match no input.

    inputs:
        the model's inputs (arguments and auxiliary states), in order.
    params:
        the names of the parameter arrays given.
    data:
        the inputs the user feeds (given a shape, dtype or value).
    source:
        where *params* came from, for the message (a file name); None: none given.
    weights_as_inputs:
        the user asked for missing weights to become run-time inputs: no error.
    """
    inputs = list(inputs)
    expected = [n for n in inputs if n not in data and not is_data_name(n)]
    missing = [n for n in expected if n not in params]
    unused = sorted(set(params) - set(inputs))
    if unused:
        log.warning("%d parameter(s)%s match no input of the model: %s", len(unused),
                    f" in {source}" if source else "", _listing(unused))
    if missing and not weights_as_inputs:
        found = len(expected) - len(missing)
        if source is None and not params:
            head = f"no parameters given; the model needs {len(expected)}"
        else:
            where = f" in {source}" if source else ""
            head = f"{found} of {len(expected)} parameters found{where}"
            if found == 0:
                head += " — is it this model's file?"
        head += "" if head.endswith("?") else "."   # not "file?." after a question
        raise MissingParamsError(f"{head} Missing: {_listing(missing)}. {hint}", missing,
                                 len(expected))
    return unused
