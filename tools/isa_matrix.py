"""Run the CPU-class-dependent tests once per x86-64 class, from any machine.

    python tools/isa_matrix.py                      # every class, the ``isa`` tests
    python tools/isa_matrix.py --classes avx2 amx   # some of them
    python tools/isa_matrix.py -- -x -k int8        # more pytest arguments after --

For each class of ``tests/isa_classes.py`` (AVX2, AVX2 + AVX-VNNI, AVX-512,
AVX512-VNNI, AVX512-BF16, AMX) it runs ``pytest -m isa`` with
``MXC_TEST_TARGET="llvm -mcpu=CPU"``.  Where this machine can execute that
CPU's code the run stands in for such a machine (its default target, feature
checks and skips are that CPU's) and the kernels run; where it cannot, the
tests that execute code skip naming the missing features and the class's
assembly is checked.  The table at the end says which it was for each class;
the exit status is non-zero when any class had a failure.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from isa_classes import ENV_TEST_TARGET, ISA_CLASSES, IsaClass  # noqa: E402


def how_tested(cls: IsaClass) -> str:
    """"runs here" or the features this machine lacks for *cls*'s code."""
    from mxc.backends.tvm.targets import missing_on_host, resolve_target
    missing = missing_on_host(resolve_target(cls.target))
    return "runs here" if not missing else "assembly only (lacks " + ", ".join(missing) + ")"


def run_class(cls: IsaClass, pytest_args: list[str]) -> dict:
    """pytest -m isa for *cls*: its counts, wall time and exit status."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        env = {**os.environ, ENV_TEST_TARGET: cls.target}
        cmd = [sys.executable, "-m", "pytest", "-q", "-m", "isa", "-p", "no:cacheprovider",
               f"--junitxml={report}", *pytest_args]
        print(f"== {cls.name} ({cls.target}): {' '.join(cmd[1:])}", flush=True)
        start = time.monotonic()
        rc = subprocess.call(cmd, cwd=REPO, env=env)
        counts = {"passed": 0, "failed": 0, "skipped": 0}
        if report.exists():
            suite = ET.parse(report).getroot()
            suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
            total = int(suite.get("tests", 0))
            counts["failed"] = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
            counts["skipped"] = int(suite.get("skipped", 0))
            counts["passed"] = total - counts["failed"] - counts["skipped"]
    return {**counts, "seconds": time.monotonic() - start, "rc": rc}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--classes", nargs="+", choices=list(ISA_CLASSES),
                        default=list(ISA_CLASSES), help="the classes to run (default: all)")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args(argv)
    rows = []
    for name in args.classes:
        cls = ISA_CLASSES[name]
        rows.append((cls, how_tested(cls), run_class(cls, args.pytest_args)))
    print(f"\n{'class':<12} {'cpu':<15} {'passed':>6} {'failed':>6} {'skipped':>7} "
          f"{'seconds':>7}  how")
    for cls, how, r in rows:
        print(f"{cls.name:<12} {cls.cpu:<15} {r['passed']:>6} {r['failed']:>6} "
              f"{r['skipped']:>7} {r['seconds']:>7.0f}  {how}")
    # pytest exits 5 when a class selects no test: that is a broken matrix too
    return 0 if all(r["rc"] == 0 for _, _, r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
