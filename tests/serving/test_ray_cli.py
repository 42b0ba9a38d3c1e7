"""``mxc serve --ray`` command-line checks that need neither Ray nor a cluster: flag
combinations refused as usage errors (exit 64) before anything is imported or
started, and a clear DependencyError (exit 9) where Ray is not installed."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from mxc.cli import main
from serve_helpers import REPO


@pytest.fixture
def artifact(tmp_path):
    path = tmp_path / "mlp.mxc"
    path.write_bytes(b"not read: the command line is refused first")
    return path


@pytest.mark.parametrize("flags, message", [
    (["--workers", "2"], "--ray and --workers"),
    (["--min-replicas", "3", "--max-replicas", "2"], "--max-replicas 2 is below --min-replicas 3"),
])
def test_inconsistent_ray_flags_are_usage_errors(artifact, capsys, flags, message):
    assert main(["serve", str(artifact), "--ray", "127.0.0.1:1", *flags]) == 64
    assert message in capsys.readouterr().err


@pytest.mark.skipif(importlib.util.find_spec("ray") is not None, reason="Ray is installed here")
@pytest.mark.skipif(importlib.util.find_spec("kserve") is None, reason="needs the [serve] extra")
def test_without_ray_the_error_names_the_extra(artifact):
    done = subprocess.run([sys.executable, "-m", "mxc", "serve", str(artifact), "--ray"],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 9  # DependencyError
    assert "mxc serve --ray needs Ray Serve: pip install 'mxc[ray]'" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.skipif(importlib.util.find_spec("ray") is None or importlib.util.find_spec("kserve") is None,
                    reason="needs the [serve] and [ray] extras")
def test_an_address_where_no_cluster_listens_fails_fast(tmp_path_factory):
    from serve_helpers import compiled_mlp, free_port
    done = subprocess.run([sys.executable, "-m", "mxc", "serve", str(compiled_mlp(tmp_path_factory)),
                           "--ray", f"127.0.0.1:{free_port()}"],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 1, done.stderr
    assert "no Ray cluster answers there" in done.stderr and "Traceback" not in done.stderr
