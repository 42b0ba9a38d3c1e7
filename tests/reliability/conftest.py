"""Fixtures shared by the reliability tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def no_library_write(monkeypatch):
    """Fail the test if any library reaches the disk (or dlopen) before a refusal."""
    from mxc.runtime import artifact as art
    from mxc.runtime import session as session_mod

    def refuse(*a, **k):
        raise AssertionError("the library was written to disk before the artifact was refused")
    monkeypatch.setattr(art, "extract_library", refuse)
    monkeypatch.setattr(session_mod, "_LIBRARIES", {})
