"""The test tree's own layout rules.

``from conftest import ...`` in the test modules means the suite's one
``tests/conftest.py``: a second ``conftest.py`` in a sub-directory without an
``__init__.py`` is imported under the same module name and shadows it, which
broke the collection of other test files twice while the suite grew.
"""

from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_only_one_conftest():
    extra = sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("conftest.py")
                   if p.parent != TESTS and not (p.parent / "__init__.py").exists())
    assert not extra, f"move these fixtures into tests/conftest.py or a helper module: {extra}"
