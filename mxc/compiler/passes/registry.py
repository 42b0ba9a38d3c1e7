"""Passes by name: :func:`register_pass`, typed :class:`Option` s, :class:`Pass`.

A pass is a function ``fn(graph, ctx) -> None | Graph`` or a :class:`Pass`
subclass with a ``run(self, graph, ctx)`` method.  ``graph`` is the
:class:`~mxc.compiler.ir.Graph` to transform (edit it in place and return
``None``, or return a new graph); ``ctx`` is the
:class:`~mxc.compiler.passes.context.PassContext`: the pass's options (it is
a read-only mapping of them) and the rewriter API (add nodes, allocate
parameters, ...)::

    @register_pass("drop-copies")
    def drop_copies(graph, ctx):
        '''Remove _copy nodes.'''
        ...

    @register_pass("fold-tiny")
    class FoldTiny(Pass):
        '''Fold constants smaller than a limit.'''
        limit = Option(int, 16, "largest constant folded, in elements")

        def run(self, graph, ctx):
            ... self.limit ...

Options are declared once (type, default, one-line help), MLIR-style, and
checked when a pipeline is parsed or ``optimize_for`` is called.  A function
pass that declares no options accepts any option, as a string (MXNet's
``REGISTER_PASS`` passes get a ``{str: str}`` map).
"""

from __future__ import annotations

import difflib
import inspect
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ...errors import PassError
from ...registry import Registry

__all__ = ["Option", "Pass", "PassInfo", "register_pass", "unregister_pass", "get_pass",
           "has_pass", "list_passes", "describe_passes", "REQUIRED", "OptionError"]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: Default of an option that must be given.
REQUIRED: Any = _Required()


class OptionError(PassError):
    """An option value is missing, unknown or invalid (``.key`` names it)."""

    def __init__(self, message: str, key: str | None = None, kind: str = "invalid"):
        super().__init__(message)
        self.key = key
        self.kind = kind  # "unknown", "invalid" or "missing"


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
_SCALARS = (bool, int, float, str)


class Option:
    """A declared pass option: its type, default and a one-line description.

    type:
        ``bool``, ``int``, ``float``, ``str`` or ``list[T]`` of those.  Values
        arrive as Python values (``optimize_for`` keywords) or as strings (a
        pipeline or MXNet-style option); strings are converted: ``true/false/
        1/0`` for booleans, ``a;b`` (or ``a,b``) for lists.
    default:
        The value when the option is not given; :data:`REQUIRED` if it must be.
    help:
        One line, shown by ``mxc opt --list-passes``.
    choices:
        Allowed values (after conversion), if restricted.
    """

    def __init__(self, type: Any = str, default: Any = REQUIRED, help: str = "",
                 choices: tuple | None = None):
        origin = typing.get_origin(type)
        if origin in (list, tuple):
            (elem,) = typing.get_args(type)[:1] or (str,)
            self.is_list, self.elem = True, elem
        elif type in (list, tuple):
            self.is_list, self.elem = True, str
        else:
            self.is_list, self.elem = False, type
        if self.elem not in _SCALARS:
            raise TypeError(f"Option type must be bool, int, float, str or list of them, "
                            f"got {type!r}")
        self.type = type
        self.default = default
        self.help = help
        self.choices = tuple(choices) if choices is not None else None
        self.name = ""  # set by __set_name__ or register_pass

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        # reading an option that run() was not given: its default
        if instance is None:
            return self
        return None if self.default is REQUIRED else self.default

    def __repr__(self) -> str:
        return f"Option({self.type_name}, default={self.default!r})"

    @property
    def type_name(self) -> str:
        return f"list[{self.elem.__name__}]" if self.is_list else self.elem.__name__

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def convert(self, value: Any) -> Any:
        """The typed value of *value*; raises ``ValueError`` with a short reason."""
        if self.is_list:
            if isinstance(value, str):
                sep = ";" if ";" in value else ","
                items = [v.strip() for v in value.split(sep)] if value.strip() else []
            elif isinstance(value, (list, tuple, set, frozenset)):
                items = list(value)
            else:
                items = [value]
            result: Any = [self._scalar(v) for v in items]
            checked = result
        else:
            if isinstance(value, (list, tuple)):
                if len(value) != 1:
                    raise ValueError(f"expected one {self.elem.__name__}, got a list of "
                                     f"{len(value)} values")
                value = value[0]
            result = self._scalar(value)
            checked = [result]
        if self.choices is not None:
            for v in checked:
                if v not in self.choices:
                    raise ValueError(f"expected one of {', '.join(map(str, self.choices))}")
        return result

    def _scalar(self, value: Any) -> Any:
        t = self.elem
        if t is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
            raise ValueError("expected a boolean (true/false/1/0)")
        if t is int:
            if isinstance(value, bool):
                raise ValueError("expected an integer")
            if isinstance(value, int):
                return value
            try:
                return int(str(value).strip())
            except ValueError:
                raise ValueError("expected an integer") from None
        if t is float:
            if isinstance(value, bool):
                raise ValueError("expected a number")
            try:
                return float(value if isinstance(value, (int, float)) else str(value).strip())
            except ValueError:
                raise ValueError("expected a number") from None
        return value if isinstance(value, str) else str(value)


class Pass:
    """Base class of class-based passes.

    Declare options as class attributes (:class:`Option`); the pass manager
    creates one instance per run, sets every option as an attribute and calls
    :meth:`run`.  The class docstring's first line is the pass summary.
    """

    #: Accept options that are not declared (passed on as strings in ``ctx``).
    extra_options: bool = False

    def run(self, graph, ctx):  # pragma: no cover - abstract
        """Transform *graph*; return ``None`` (edited in place) or a new graph."""
        raise NotImplementedError(f"{type(self).__name__}.run is not implemented")


def _normalize_key(key: str) -> str:
    return key.replace("-", "_")


@dataclass
class PassInfo:
    """What the registry knows about one pass."""

    name: str
    summary: str
    options: dict[str, Option]
    target: Callable | type
    extra_options: bool = False
    doc: str = ""
    _is_class: bool = field(default=False, repr=False)

    def bind(self, given: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
        """``(typed declared options, extra string options)`` for *given*.

        Keys may use ``-`` or ``_``.  Raises :class:`OptionError` (``.key`` is
        the offending key) for an unknown key, a bad value or a missing
        required option.
        """
        typed: dict[str, Any] = {}
        extra: dict[str, str] = {}
        for key, value in given.items():
            opt = self.options.get(_normalize_key(key))
            if opt is None:
                if self.extra_options:
                    extra[key] = value if isinstance(value, str) else _joined(value)
                    continue
                known = ", ".join(self.options) or "none"
                hint = _did_you_mean(_normalize_key(key), self.options)
                raise OptionError(f"pass {self.name!r} has no option {key!r}{hint}; its options: "
                                  f"{known}", key, "unknown")
            try:
                typed[opt.name] = opt.convert(value)
            except ValueError as exc:
                raise OptionError(f"pass {self.name!r}: option {key}={_show(value)} is invalid: "
                                  f"{exc} ({opt.type_name})", key) from None
        for name, opt in self.options.items():
            if name not in typed:
                if opt.required:
                    raise OptionError(f"pass {self.name!r}: option {name!r} is required "
                                      f"({opt.type_name}: {opt.help})", name, "missing")
                typed[name] = opt.default
        return typed, extra

    def run(self, graph, ctx, typed: Mapping[str, Any]):
        """Call the pass on *graph*; returns what it returns."""
        if self._is_class:
            instance = self.target()
            for k, v in typed.items():
                setattr(instance, k, v)
            return instance.run(graph, ctx)
        return self.target(graph, ctx)


def _joined(value: Any) -> str:
    from ..partition.api import option_string
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return ",".join(value)
    return option_string(value)


def _show(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ";".join(map(str, value))
    return repr(value) if not isinstance(value, str) else value


def _did_you_mean(word: str, names) -> str:
    close = difflib.get_close_matches(word, list(names), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


#: every pass by name; the built-in passes (:mod:`.builtin`) are imported on the first miss
PASSES: Registry[PassInfo] = Registry("passes", noun="pass", error=PassError,
                                      builtins=("mxc.compiler.passes.builtin",))
_PASSES = PASSES  # the former private dict's name


def register_pass(name: str, target: Callable | type | None = None, *, summary: str | None = None,
                  options: Mapping[str, Option] | None = None,
                  extra_options: bool | None = None, override: bool = False):
    """Register a pass under *name*; usable as a decorator.

    target:
        ``fn(graph, ctx) -> None | Graph`` or a :class:`Pass` subclass.
    summary:
        One line; defaults to the first line of the docstring.
    options:
        For a function pass, ``{name: Option}``.  Class passes declare
        options as class attributes instead.
    extra_options:
        Accept undeclared options (as strings).  Default: True for a
        function pass without declared options (MXNet's ``REGISTER_PASS``
        contract), False otherwise.
    override:
        Replace an existing registration instead of raising.

    Returns the target unchanged.
    """
    if not isinstance(name, str) or not name or any(c in name for c in ",{} \t\n=;\""):
        raise PassError(f"invalid pass name {name!r}: use letters, digits, '-', '_' and '.'")

    def deco(obj):
        if inspect.isclass(obj):
            if not callable(getattr(obj, "run", None)):
                raise PassError(f"pass class {obj.__qualname__} has no run(self, graph, ctx)")
            declared = {k: v for klass in reversed(obj.__mro__)
                        for k, v in vars(klass).items() if isinstance(v, Option)}
            for k, v in declared.items():
                v.name = k
            if options:
                raise PassError(f"pass {name!r}: declare the options of a class pass as class "
                                f"attributes, not with options=")
            extra = bool(getattr(obj, "extra_options", False)) if extra_options is None \
                else extra_options
            is_class = True
        elif callable(obj):
            declared = dict(options or {})
            for k, v in declared.items():
                if not isinstance(v, Option):
                    raise PassError(f"pass {name!r}: option {k!r} must be an Option, got {v!r}")
                v.name = k
            extra = (not declared) if extra_options is None else extra_options
            is_class = False
        else:
            raise PassError(f"register_pass({name!r}) expects a function or a Pass class, "
                            f"got {obj!r}")
        doc = inspect.getdoc(obj) or ""
        first = summary if summary is not None else (doc.strip().splitlines() or [""])[0]
        PASSES.register(name, PassInfo(name, first.strip(), declared, obj, extra, doc, is_class),
                        override=override, origin=obj)
        if is_class:
            obj.name = name
        return obj

    return deco if target is None else deco(target)


def unregister_pass(name: str) -> None:
    """Forget pass *name* (no error if it is not registered)."""
    PASSES.unregister(name)


def has_pass(name: str) -> bool:
    return name in PASSES


def get_pass(name: str) -> PassInfo:
    """The registration of *name*; raises :class:`PassError` listing the known passes."""
    return PASSES.lookup(name)


def list_passes() -> list[PassInfo]:
    """Every registered pass, sorted by name."""
    passes = PASSES.as_dict()
    return [passes[k] for k in sorted(passes)]


def describe_passes() -> str:
    """A reference of every pass and its options (``mxc opt --list-passes``)."""
    lines = []
    for info in list_passes():
        lines.append(f"{info.name}: {info.summary}" if info.summary else info.name)
        for opt in info.options.values():
            default = "required" if opt.required else f"default {_format_default(opt.default)}"
            lines.append(f"    {opt.name}: {opt.type_name}, {default}"
                         + (f" -- {opt.help}" if opt.help else ""))
        if info.extra_options:
            lines.append("    (any further options, as strings)")
    return "\n".join(lines)


def _format_default(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ";".join(map(str, value)) or "(empty)"
    if value is None:
        return "none"
    if value == "":
        return '""'
    return str(value)
