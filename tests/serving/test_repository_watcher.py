"""RepositoryWatcher's unload hook: called for a model whose file was removed, not for
one replaced (a Ray deployment is upgraded in place under the same application)."""

from __future__ import annotations

from mxc.serving.repository import RepositoryWatcher
from serve_helpers import FakeRegistry



class Made:
    def __init__(self, name, path):
        self.name, self.path = name, path


def test_unload_is_called_for_removed_models_only(tmp_path):
    for version in ("1", "2"):
        (tmp_path / "mlp" / version).mkdir(parents=True)
        (tmp_path / "mlp" / version / "model.mxc").write_bytes(b"v" + version.encode())
    registry, unloaded = FakeRegistry(), []
    watcher = RepositoryWatcher(tmp_path, registry, Made, unload=unloaded.append)
    assert sorted(watcher.sync()["loaded"]) == ["mlp@1", "mlp@2"]
    first = registry.get_model("mlp@1")

    (tmp_path / "mlp" / "1" / "model.mxc").write_bytes(b"replaced, longer")
    assert watcher.sync()["loaded"] == ["mlp@1"]
    assert unloaded == [] and registry.get_model("mlp@1") is not first

    (tmp_path / "mlp" / "2" / "model.mxc").unlink()
    changes = watcher.sync()
    assert changes["unloaded"] == ["mlp@2"]
    assert [m.name for m in unloaded] == ["mlp@2"]
    assert registry.get_model("mlp").name == "mlp@1"  # the name follows the highest version left
