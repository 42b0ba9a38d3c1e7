"""Import every op-family module of this package once, registering its ops."""

import importlib
import pkgutil

from . import __path__ as _pkg_path

_SKIP = {"registry", "common", "_load_all"}

for _info in sorted(pkgutil.iter_modules(_pkg_path), key=lambda m: m.name):
    if _info.name not in _SKIP and not _info.name.startswith("_"):
        importlib.import_module(f"{__package__}.{_info.name}")

importlib.import_module(f"{__package__}._mxnet_aliases")  # needs every family registered
