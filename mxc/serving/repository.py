"""Which artifacts are served, under which names, and reloading them as files change.

``mxc serve MODEL.mxc`` serves one artifact under its file name's stem
(``mlp.mxc`` is model ``mlp``).  ``mxc serve REPO_DIR`` serves a model
repository laid out as Triton's and KServe's::

    REPO_DIR/
      mlp/1/model.mxc
      mlp/2/model.mxc
      resnet/1/model.mxc

Each version is served as ``name@version`` (reached over REST as
``/v2/models/name/versions/version/...`` and over gRPC with ``model_version``),
and ``name`` alone is its highest version.  :class:`RepositoryWatcher` polls
the directory and loads a model added or replaced (new size or modification
time) and unloads one removed, without restarting the server.  A file that fails
to load (unsigned with a key given, damaged, half-copied) is logged and not
served -- where it replaced a version that loaded, that one keeps serving -- and
is tried again when it changes.  Replace files atomically (write, then rename).
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Callable

log = logging.getLogger(__name__)

ARTIFACT_FILE = "model.mxc"

#: links out of a repository already logged (the poll would log them every pass)
_WARNED_LINKS: set[Path] = set()

#: (name, version or None) -> artifact path
Listing = dict[tuple[str, str | None], Path]


def scan(source: str | os.PathLike, follow_symlinks: bool = False) -> Listing:
    """The artifacts of a file or a repository directory (no file is opened).

    A model folder, version folder or ``model.mxc`` that is a symbolic link leading
    out of the repository is skipped (and logged) unless *follow_symlinks*: whoever
    can write a link into the repository should not make the server read any file
    its user can.
    """
    src = Path(source)
    if src.is_file():
        return {(src.stem, None): src}
    root = src.resolve()
    found: Listing = {}
    for model_dir in sorted(p for p in src.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for version_dir in sorted(p for p in model_dir.iterdir() if p.is_dir()):
            art = version_dir / ARTIFACT_FILE
            if not art.is_file():
                continue
            if not follow_symlinks and not art.resolve().is_relative_to(root):
                if art in _WARNED_LINKS:
                    continue
                _WARNED_LINKS.add(art)
                log.warning("not serving %s: it links out of the repository to %s "
                            "(--follow-symlinks serves such links)", art, art.resolve())
                continue
            found[(model_dir.name, version_dir.name)] = art
    return found


def _version_order(version: str | None):
    return (0, int(version), "") if version and version.isdigit() else (1, 0, version or "")


def served_names(listing: Listing) -> dict[str, tuple[str, str | None]]:
    """Served name -> (name, version): every ``name@version``, and ``name`` for the
    highest version of each model (numeric versions compare as numbers)."""
    names: dict[str, tuple[str, str | None]] = {}
    latest: dict[str, str | None] = {}
    for name, version in listing:
        if version is not None:
            names[f"{name}@{version}"] = (name, version)
        if name not in latest or _version_order(version) > _version_order(latest[name]):
            latest[name] = version
    for name, version in latest.items():
        names[name] = (name, version)
    return names


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


class RepositoryWatcher:
    """Keeps KServe's model registry in step with *source*.

    *make_model(served_name, path)* builds and loads a model (it may raise);
    *unload(model)*, when given, releases a model whose file was removed (a model
    replaced by a new file is just dropped: a Ray deployment is upgraded in place);
    *registry* is KServe's ``ModelRepository``.  ``sync()`` does one pass and
    returns what changed; ``run(poll_seconds)`` repeats it until cancelled.
    """

    def __init__(self, source: str | os.PathLike, registry, make_model: Callable,
                 unload: Callable | None = None, follow_symlinks: bool = False):
        self.source, self.registry, self.make_model = Path(source), registry, make_model
        self.unload = unload
        self.follow_symlinks = follow_symlinks
        #: versions switched off through the model-control API (see :mod:`.control`)
        self.disabled: set[tuple[str, str | None]] = set()
        self._loaded: dict[tuple[str, str | None], tuple[tuple[int, int] | None, object]] = {}
        self._failed: dict[tuple[str, str | None], tuple[int, int] | None] = {}

    def sync(self) -> dict[str, list[str]]:
        """Load new and changed artifacts, unload removed ones; re-point the names."""
        listing = {k: v for k, v in self.listing().items() if k not in self.disabled}
        changes: dict[str, list[str]] = {"loaded": [], "unloaded": [], "failed": []}
        for key in [k for k in self._loaded if k not in listing]:
            _, model = self._loaded.pop(key)
            if self.unload is not None:
                try:
                    self.unload(model)
                except Exception as exc:  # noqa: BLE001 - keep serving the others
                    log.error("could not unload %s: %s", key, exc)
        for key, path in listing.items():
            stamp = _stamp(path)
            if key in self._loaded and self._loaded[key][0] == stamp:
                continue
            if self._failed.get(key, ()) == stamp:
                continue
            label = key[0] if key[1] is None else f"{key[0]}@{key[1]}"
            try:
                model = self.make_model(label, path)
            except Exception as exc:  # noqa: BLE001 - a bad file must not stop the server
                log.error("not serving %s: %s", path, exc)
                self._failed[key] = stamp
                changes["failed"].append(label)
                continue
            self._failed.pop(key, None)
            self._loaded[key] = (stamp, model)
            changes["loaded"].append(label)
        self._publish(changes)
        return changes

    def listing(self) -> Listing:
        """What the source holds now (disabled versions included)."""
        return scan(self.source, self.follow_symlinks) if self.source.exists() else {}

    def keys_of(self, served: str) -> list[tuple[str, str | None]]:
        """The versions a served name stands for: ``NAME@V`` that one, ``NAME`` all of them."""
        listing = self.listing()
        if "@" in served:
            name, version = served.split("@", 1)
            return [(name, version)] if (name, version) in listing else []
        return [k for k in listing if k[0] == served]

    def failed(self, key: tuple[str, str | None]) -> bool:
        return key in self._failed

    def forget_failure(self, key: tuple[str, str | None]) -> None:
        """Try *key* again at the next sync even if its file has not changed."""
        self._failed.pop(key, None)

    def _publish(self, changes: dict[str, list[str]]) -> None:
        names = served_names({k: None for k in self._loaded})
        current = set(self.registry.get_models())
        for served, key in names.items():
            model = self._loaded[key][1]
            if self.registry.get_model(served) is not model:
                self.registry.update(model, served)
        for gone in sorted(current - set(names)):
            self.registry.models.pop(gone, None)  # not unload(): another name may share it
            changes["unloaded"].append(gone)
        if any(changes.values()):
            log.info("model repository %s: %s", self.source,
                     {k: v for k, v in changes.items() if v})

    async def run(self, poll_seconds: float) -> None:
        """Poll until cancelled; loading happens in a thread so requests keep flowing."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(poll_seconds)
            try:
                await loop.run_in_executor(None, self.sync)
            except Exception:  # noqa: BLE001 - keep watching
                log.exception("model repository %s: scan failed", self.source)
