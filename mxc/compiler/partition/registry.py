"""Backends by name: MXNet's ``SubgraphBackendRegistry``.

A *subgraph backend* is a name mapped to an ordered list of subgraph
properties (``MXNET_REGISTER_SUBGRAPH_BACKEND`` +
``MXNET_REGISTER_SUBGRAPH_PROPERTY``)::

    @register_subgraph_property("myBackend")
    class FuseConvRelu(SubgraphProperty):
        ...

    register_subgraph_property("myBackend", OtherProperty, property_name="second")

Each partitioning run instantiates the backend's properties afresh (a class
is called with the registered keyword arguments, an instance is shallow-
copied), so no state leaks between runs.  A partitioner registered with
:func:`~.custom.register_partitioner` is a backend whose properties are its
strategies.  Graph passes (MXNet's ``REGISTER_PASS``) have their own
registry, :func:`mxc.register_pass`.
"""

from __future__ import annotations

import copy
import functools
from typing import Any, Callable

from ...errors import PartitionError
from ...registry import Registry
from .property import SubgraphProperty

__all__ = ["SubgraphBackend", "register_subgraph_backend", "register_subgraph_property",
           "get_subgraph_backend", "list_subgraph_backends", "unregister_subgraph_backend",
           "has_subgraph_backend", "provide_subgraph_backend"]

PropertyFactory = Callable[[], SubgraphProperty]


class SubgraphBackend:
    """A named, ordered list of subgraph property factories."""

    def __init__(self, name: str):
        self.name = name
        self._factories: list[tuple[str, PropertyFactory]] = []
        self.partitioner = None  # set by register_partitioner

    def __repr__(self) -> str:
        return f"<SubgraphBackend {self.name!r}: {', '.join(self.property_names())}>"

    def add(self, prop: Any, **attrs: Any) -> "SubgraphBackend":
        """Append a property: a SubgraphProperty subclass, instance or factory."""
        kw = dict(attrs)
        if isinstance(prop, type) and issubclass(prop, SubgraphProperty):
            label = str(kw.get("property_name") or prop.__name__)
            factory = functools.partial(prop, **kw)
        elif isinstance(prop, SubgraphProperty):
            prop.attrs.update(kw)
            label = prop.name
            factory = functools.partial(_clone, prop)
        elif callable(prop):
            label = getattr(prop, "__name__", repr(prop))
            factory = functools.partial(_checked, self.name, label, prop, kw)
        else:
            raise TypeError(f"register_subgraph_property: expected a SubgraphProperty subclass, "
                            f"instance or factory, got {prop!r}")
        self._factories.append((label, factory))
        return self

    def property_names(self) -> list[str]:
        names = [label for label, _ in self._factories]
        if self.partitioner is not None:
            names = [f"{self.partitioner.name}:{s.name}" for s in self.partitioner.strategies] \
                + names
        return names

    def create_properties(self) -> list[SubgraphProperty]:
        """Fresh property instances, in registration order."""
        props: list[SubgraphProperty] = []
        if self.partitioner is not None:
            props.extend(self.partitioner.create_properties())
        props.extend(factory() for _, factory in self._factories)
        return props

    # -- snapshots (mxc.registry.Revertible): properties and strategies added later --
    def registry_state(self) -> tuple:
        part = self.partitioner
        return (len(self._factories), part, part.registry_state() if part is not None else 0)

    def restore_registry_state(self, state: tuple) -> None:
        n_factories, partitioner, partitioner_state = state
        del self._factories[n_factories:]
        self.partitioner = partitioner
        if partitioner is not None:
            partitioner.restore_registry_state(partitioner_state)

    def describe(self) -> list[str]:
        """Report lines (``mxc.library.load``): its strategies and properties."""
        lines = []
        if self.partitioner is not None:
            for j, s in enumerate(self.partitioner.strategies):
                lines.append(f"Strategy[{j}] {s.name} subgraphOp: '{s.subgraph_op}'")
        lines.extend(f"Property {label}" for label, _ in self._factories)
        return lines


def _clone(prop: SubgraphProperty) -> SubgraphProperty:
    new = copy.copy(prop)
    new.attrs = dict(prop.attrs)
    return new


def _checked(backend: str, label: str, fn: Callable, kw: dict) -> SubgraphProperty:
    made = fn(**kw)
    if not isinstance(made, SubgraphProperty):
        raise PartitionError(f"subgraph backend {backend!r}: property factory {label} returned "
                             f"{type(made).__name__}, not a SubgraphProperty")
    return made


def _unknown_backend(name: str) -> PartitionError:
    import difflib
    names = sorted(set(BACKENDS.names()) | set(_PROVIDERS))
    close = difflib.get_close_matches(name, names, n=1)
    return PartitionError(f"unknown subgraph backend {name!r}"
                          + (f" (did you mean {close[0]!r}?)" if close else "")
                          + f"; registered backends: {', '.join(names) or 'none'}")


#: every subgraph backend by name; ``default``/``default_v2`` are imported on the first miss
BACKENDS: Registry[SubgraphBackend] = Registry(
    "subgraph backends", noun="subgraph backend", error=PartitionError,
    builtins=("mxc.compiler.partition.default_property",), unknown=_unknown_backend,
    describe=lambda name, backend: backend.describe())
_BACKENDS = BACKENDS  # the former private dict's name


def register_subgraph_backend(name: str, *, origin: Any = None) -> SubgraphBackend:
    """The backend *name*, created empty if needed (idempotent).

    *origin*: what creates it (the first property's class), so the registry
    names the module that registered the backend and tells built-ins apart.
    """
    if not isinstance(name, str) or not name:
        raise PartitionError(f"a subgraph backend name must be a non-empty string, got {name!r}")
    backend = BACKENDS.entry(name)
    if backend is None:
        return BACKENDS.register(name, SubgraphBackend(name), origin=origin)
    return backend.value


def register_subgraph_property(name: str, prop: Any = None, **attrs: Any):
    """Append a property to backend *name* (created if needed).

    Use as a class decorator (``@register_subgraph_property("myBackend")``)
    or call with the property: a :class:`SubgraphProperty` subclass
    (instantiated with *attrs* for every run), an instance, or a factory.
    """
    if prop is None:
        def deco(cls):
            register_subgraph_backend(name, origin=cls).add(cls, **attrs)
            return cls
        return deco
    register_subgraph_backend(name, origin=prop).add(prop, **attrs)
    return prop


def has_subgraph_backend(name: str) -> bool:
    return name in BACKENDS or name in _PROVIDERS


def get_subgraph_backend(name: str) -> SubgraphBackend:
    """The backend *name*; :class:`~mxc.errors.PartitionError` lists the known ones."""
    backend = BACKENDS.get(name)
    if backend is None and name in _PROVIDERS:
        _PROVIDERS[name]()   # registers it (e.g. "tvm")
    return BACKENDS.lookup(name)


#: backends a higher layer provides, registered the first time they are asked for:
#: name -> a function that registers the backend (see :func:`provide_subgraph_backend`)
_PROVIDERS: dict[str, Callable[[], None]] = {}


def provide_subgraph_backend(name: str, register: Callable[[], None]) -> None:
    """Announce backend *name*, registered by calling *register* the first time it is asked for.

    A layer above the compiler (the TVM backend) cannot be imported from here;
    the layer that knows it (:mod:`mxc.symbol`, for ``optimize_for("tvm")``)
    hands in the function that registers it, so the dependency is an explicit
    call instead of a module name looked up at run time.
    """
    _PROVIDERS[name] = register


def list_subgraph_backends() -> list[str]:
    return sorted(set(BACKENDS.names()) | set(_PROVIDERS))


def unregister_subgraph_backend(name: str) -> None:
    BACKENDS.unregister(name)
