"""Build an arm64 Debian root in which mxc's own runtime runs under qemu-user.

    python tools/arm_root.py                    # into $MXC_ARM_ROOT or ~/.cache/mxc/arm64-root
    python tools/arm_root.py --root /tmp/root   # elsewhere
    python tools/arm_root.py --check            # is a usable root there? (exit 0/1, builds nothing)

Why: mxc cross-compiles for aarch64 boards and servers (``--cpu neoverse-n1``),
and nothing on an x86 machine could otherwise show that those artifacts
compute what MXNet does.  ``qemu-aarch64-static -L ROOT ROOT/usr/bin/python3``
runs an aarch64 Python on x86 without chroot or binfmt_misc; this script makes
ROOT the way issue 37's feasibility run did:

1. ``debootstrap --foreign --variant=minbase --include=python3`` downloads
   Debian's arm64 packages (nothing aarch64 is executed: ``--foreign`` stops
   before the second stage), then every downloaded ``.deb`` is unpacked with
   ``dpkg-deb -x`` (no emulated dpkg, no maintainer scripts: the runtime needs
   files, not a configured system).
2. ``pip install --target ROOT/opt/mxc-site --platform manylinux_2_28_aarch64
   --only-binary=:all:`` (run by THIS machine's pip) installs PyPI's aarch64
   wheels of what ``mxc.runtime`` and ``mxc run`` import, pinned as in
   ``pyproject.toml``: numpy, apache-tvm, apache-tvm-ffi, ml_dtypes (bfloat16)
   and lark (host-fallback nodes reach the op registry).  ``cryptography``
   (signed artifacts only) and ``tqdm`` (compiling only) are left out.
3. TVM's ``libtvm_compiler.so`` is deleted: the runtime loads
   ``libtvm_runtime`` alone (mxc/runtime/_tvm.py), and the compiler library is
   most of the wheel's size.

mxc itself is NOT installed in the root: whoever runs it puts the source tree
on ``PYTHONPATH`` (see :func:`emulated_python`), so the root never goes stale
as mxc changes.  The root is built in ``ROOT.partial`` and renamed when done,
and a marker file (``ROOT/.mxc-arm-root.json``) records what was installed:
re-running with the same request is a no-op, a changed request rebuilds.
Measured on a 2-core Debian 12 machine shared with other work: 82-107 s, 310 MB.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOG = logging.getLogger("mxc.arm_root")

ENV_ROOT = "MXC_ARM_ROOT"
DEFAULT_ROOT = Path.home() / ".cache" / "mxc" / "arm64-root"
MARKER = ".mxc-arm-root.json"
SITE = "opt/mxc-site"
SUITE = "bookworm"            # Python 3.11, as PyPI's cp311 aarch64 wheels expect
MIRROR = "http://deb.debian.org/debian"
PLATFORM = "manylinux_2_28_aarch64"   # bookworm's glibc is 2.36
#: the runtime's imports, by distribution name (versions come from pyproject.toml)
RUNTIME_PACKAGES = ("numpy", "apache-tvm", "apache-tvm-ffi", "ml_dtypes", "lark")
#: what the runtime never loads (compiler, other devices): deleted after pip
DROP = ("tvm/lib/libtvm_compiler.so", "tvm/lib/libtvm_runtime_cuda.so")
#: documentation and translations nobody reads under emulation
TRIM = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale")
#: bump when the way the root is built changes, so old roots are rebuilt
LAYOUT = 2


class ArmRootError(RuntimeError):
    """The root could not be built (or used); the message says what to do."""


class MissingToolError(ArmRootError):
    """A program the build or the emulation needs is not installed."""


class NetworkError(ArmRootError):
    """Debian's mirror or PyPI could not be reached."""


def default_root() -> Path:
    """``$MXC_ARM_ROOT``, else ``~/.cache/mxc/arm64-root``."""
    return Path(os.environ.get(ENV_ROOT) or DEFAULT_ROOT).expanduser()


def requirements(pyproject: Path = REPO / "pyproject.toml") -> list[str]:
    """The runtime packages with the version bounds ``pyproject.toml`` gives them, so the
    emulated runtime is the one ``pip install mxc`` gives an aarch64 board."""
    try:
        import tomllib
        deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    except ImportError:   # Python 3.10: the [project] dependencies list, read by pattern
        block = re.search(r"^dependencies = \[(.*?)^\]", pyproject.read_text(), re.M | re.S)
        deps = re.findall(r'^\s*"([^"]+)"', block.group(1), re.M)
    by_name = {re.split(r"[<>=!~ ;\[]", d, maxsplit=1)[0].lower().replace("_", "-"): d.strip()
               for d in deps}
    return [by_name.get(p.replace("_", "-"), p) for p in RUNTIME_PACKAGES]


def request(suite: str = SUITE, mirror: str = MIRROR) -> dict:
    """What a root is built from: compared with its marker to decide whether to rebuild."""
    return {"layout": LAYOUT, "suite": suite, "mirror": mirror, "platform": PLATFORM,
            "packages": requirements()}


def read_marker(root: Path) -> dict | None:
    try:
        return json.loads((root / MARKER).read_text())
    except (OSError, ValueError):
        return None


def root_python(root: Path) -> Path:
    """The root's ``python3.X`` (the real file; ``-L ROOT`` does not follow absolute links
    for the program itself)."""
    found = sorted(root.glob("usr/bin/python3.[0-9]*"))
    found = [p for p in found if re.fullmatch(r"python3\.\d+", p.name)]
    if not found:
        raise ArmRootError(f"{root} has no usr/bin/python3.X: not an arm64 root "
                           f"(build one with python tools/arm_root.py --root {root})")
    return found[-1]


def qemu() -> str:
    path = shutil.which("qemu-aarch64-static")
    if path is None:
        raise MissingToolError("qemu-aarch64-static not found "
                               "(apt-get install qemu-user-static)")
    return path


def missing(root: Path | None = None) -> list[str]:
    """What stops ARM code from running here under emulation, in words (empty: nothing)."""
    root = root or default_root()
    why = []
    if shutil.which("qemu-aarch64-static") is None:
        why.append("qemu-aarch64-static (apt-get install qemu-user-static)")
    marker = read_marker(root)
    if marker is None:
        why.append(f"an arm64 root at {root} (python tools/arm_root.py --root {root}; "
                   f"${ENV_ROOT} chooses where)")
    elif marker.get("layout") != LAYOUT:
        why.append(f"an up-to-date arm64 root at {root} (layout {marker.get('layout')}, "
                   f"want {LAYOUT}: rerun python tools/arm_root.py)")
    return why


def emulated_python(root: Path, *args: str, cpu: str = "max",
                    env: dict | None = None) -> tuple[list[str], dict]:
    """``(argv, env)`` running the root's Python on *args* under ``qemu-aarch64-static -cpu
    CPU``, with mxc's source tree and the root's wheels on ``PYTHONPATH``.  Nothing of this
    machine's Python leaks in (its site-packages, PYTHONHOME), and the root's libraries
    come first (``-L``) so numpy's and TVM's shared objects are the aarch64 ones."""
    env = {k: v for k, v in (env or os.environ).items()
           if not k.startswith(("PYTHON", "VIRTUAL_ENV", "LD_", "QEMU_", "TVM_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(root / SITE)])
    env["PYTHONNOUSERSITE"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"   # the source tree's __pycache__ is x86 Python's
    argv = [qemu(), "-cpu", cpu, "-L", str(root), str(root_python(root)), *args]
    return argv, env


def _run(argv: list[str], what: str, network: bool = False, **kw) -> None:
    LOG.debug("running %s", " ".join(argv))
    proc = subprocess.run(argv, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
        text = "\n".join(tail)
        net = re.search(r"Temporary failure in name resolution|Could not resolve|"
                        r"Failed getting release file|Connection (refused|timed out)|"
                        r"NewConnectionError|No matching distribution|Network is unreachable",
                        text)
        cls = NetworkError if network and net else ArmRootError
        hint = " (is the network reachable?)" if cls is NetworkError else ""
        raise cls(f"{what} failed (exit {proc.returncode}){hint}:\n{text}")


#: where a non-root PATH may not look for debootstrap
SBIN_DIRS = (Path("/usr/sbin"), Path("/sbin"))


def _need(tool: str, package: str) -> str:
    path = shutil.which(tool) or next(
        (str(d / tool) for d in SBIN_DIRS if (d / tool).exists()), None)
    if path is None:
        raise MissingToolError(f"{tool} not found (apt-get install {package})")
    return path


def build(root: Path | None = None, suite: str = SUITE, mirror: str = MIRROR,
          force: bool = False) -> Path:
    """Build the root at *root* (default :func:`default_root`) unless its marker already
    records the same request; returns the root.  Raises :class:`MissingToolError`
    (debootstrap, dpkg-deb, qemu) or :class:`NetworkError` (mirror, PyPI)."""
    root = (root or default_root()).expanduser().resolve()
    want = request(suite, mirror)
    if not force and read_marker(root) == want:
        LOG.info("arm64 root %s is up to date (%s)", root, ", ".join(want["packages"]))
        return root
    debootstrap = _need("debootstrap", "debootstrap")
    dpkg_deb = _need("dpkg-deb", "dpkg")
    qemu()   # the smoke test runs the root's Python: say so before 70 s of downloads
    if os.geteuid() != 0:
        raise ArmRootError("debootstrap needs root (run as root, or in a container)")
    partial = root.with_name(root.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()

    LOG.info("[1/4] debootstrap --foreign %s arm64 (minbase + python3) from %s", suite, mirror)
    _run([debootstrap, "--foreign", "--arch=arm64", "--variant=minbase", "--include=python3",
          suite, str(partial), mirror], "debootstrap", network=True)
    debs = sorted((partial / "var/cache/apt/archives").glob("*.deb"))
    LOG.info("[2/4] unpacking %d packages with dpkg-deb -x", len(debs))
    for deb in debs:
        _run([dpkg_deb, "-x", str(deb), str(partial)], f"dpkg-deb -x {deb.name}")
        deb.unlink()
    shutil.rmtree(partial / "debootstrap", ignore_errors=True)
    for rel in TRIM:
        shutil.rmtree(partial / rel, ignore_errors=True)
    python = root_python(partial)
    version = python.name.removeprefix("python").replace(".", "")

    site = partial / SITE
    LOG.info("[3/4] pip: %s for %s cp%s", " ".join(want["packages"]), PLATFORM, version)
    _run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
          "--no-compile", "--target", str(site), "--platform", PLATFORM,
          "--python-version", version, "--implementation", "cp", "--only-binary=:all:",
          *want["packages"]], "pip install (aarch64 wheels)", network=True)
    for rel in DROP:
        (site / rel).unlink(missing_ok=True)
    shutil.rmtree(site / "bin", ignore_errors=True)   # console scripts for x86 Python

    LOG.info("[4/4] smoke test: the root's python3 under qemu imports numpy and tvm_ffi")
    argv, env = emulated_python(partial, "-c", "import platform, numpy, tvm_ffi; "
                                "print(platform.machine(), numpy.__version__)")
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 or not proc.stdout.startswith("aarch64"):
        raise ArmRootError(f"the root's Python does not run under qemu:\n"
                           f"{(proc.stderr or proc.stdout)[-2000:]}")
    (partial / MARKER).write_text(json.dumps(want, indent=1) + "\n")
    shutil.rmtree(root, ignore_errors=True)
    partial.rename(root)
    LOG.info("arm64 root ready at %s: %.0f MB in %.0f s", root, du(root) / 1e6,
             time.perf_counter() - t0)
    return root


def du(path: Path) -> int:
    """Bytes of the regular files under *path* (links not followed)."""
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=None,
                        help=f"where (default ${ENV_ROOT}, else {DEFAULT_ROOT})")
    parser.add_argument("--suite", default=SUITE, help="Debian release (default %(default)s)")
    parser.add_argument("--mirror", default=MIRROR, help="Debian mirror (default %(default)s)")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    parser.add_argument("--check", action="store_true",
                        help="only say whether a usable root is there")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="arm_root: %(message)s")
    if args.check:
        why = missing(args.root)
        for line in why:
            LOG.error("missing: %s", line)
        return 1 if why else 0
    try:
        build(args.root, args.suite, args.mirror, args.force)
    except ArmRootError as exc:
        LOG.error("%s: %s", type(exc).__name__, exc)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
