"""Build the real control plane: etcd, kube-apiserver and kube-controller-manager, from the Go
module shipped in this package (``mcm/testing/envtest/gomodule``: its ``go.mod`` pins the
releases). Needs only ``go`` on PATH.

``python -m mcm.testing.envtest build`` (``hack/envtest.sh`` in a checkout is a wrapper over it)
puts the binaries into ``$MCM_ENVTEST_CACHE`` (default ``${XDG_CACHE_HOME:-~/.cache}/mcm-envtest``)
under ``<kubernetes version>/bin``. Progress and timings go to stderr; the last line on stdout is
that bin directory. Exit status: 0 built or already built; 2 no ``go`` on PATH; 1 the build failed.
``build --print-dir`` only prints the directory.

Guarantees: a second build with the same module files and Go version does nothing (the bin
directory's ``.stamp`` holds a hash of ``go.mod``, ``go.sum`` and ``etcd/main.go`` and the Go
version); the three binaries appear in the bin directory only after all three built; the work
directory is removed in every case.

This module imports nothing but the standard library and :mod:`mcm.packaged`, so
``hack/envtest.sh`` runs it by path (``python3 -P .../build.py``) without the package's
dependencies installed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from mcm import packaged

__all__ = [
    "BINARY_NAMES",
    "COMMAND",
    "GO_MODULE",
    "bin_dir",
    "build",
    "cache_root",
    "main",
    "module_dir",
    "pinned_version",
    "stamp",
]

BINARY_NAMES = ("etcd", "kube-apiserver", "kube-controller-manager")
COMMAND = "python -m mcm.testing.envtest build"
"""What to run to build the binaries (named in every error that asks for them)."""
GO_MODULE = "testing/envtest/gomodule"
"""The Go module's directory inside the package (:func:`mcm.packaged.path`)."""
_STAMPED_FILES = ("go.mod", "go.sum", "etcd/main.go")
_PACKAGES = (
    "./etcd",
    "k8s.io/kubernetes/cmd/kube-apiserver",
    "k8s.io/kubernetes/cmd/kube-controller-manager",
)
_GO_PACKAGE_LINE = re.compile(r"^[A-Za-z0-9_./~-]+$")


def say(message: str) -> None:
    print(f"envtest: {message}", file=sys.stderr, flush=True)


def module_dir() -> Path:
    """The packaged Go module that pins the releases."""
    return packaged.path(GO_MODULE)


def cache_root() -> Path:
    """``$MCM_ENVTEST_CACHE``, else ``$XDG_CACHE_HOME/mcm-envtest``, else ``~/.cache/mcm-envtest``."""
    explicit = os.environ.get("MCM_ENVTEST_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mcm-envtest"


def pinned_version(go_mod: Path | None = None) -> str | None:
    """The ``k8s.io/kubernetes`` version the module's ``go.mod`` pins (None if it cannot be read)."""
    try:
        text = (go_mod or module_dir() / "go.mod").read_text(encoding="utf-8")
    except (OSError, packaged.PackagedFileMissing):
        return None
    match = re.search(r"^\s*k8s\.io/kubernetes (v\S+)", text, re.MULTILINE)
    return match.group(1) if match else None


def bin_dir(version: str) -> Path:
    """Where the binaries of Kubernetes ``version`` go."""
    return cache_root() / version / "bin"


def stamp(module: Path, go_version: str) -> str:
    """What ``.stamp`` holds once built: the module files' hash and the Go version (the same value
    the shell script this replaced wrote, so its builds stay valid)."""
    digest = hashlib.sha256(b"".join((module / name).read_bytes() for name in _STAMPED_FILES))
    return f"{digest.hexdigest()[:16]}-{go_version}"


def _is_built(directory: Path, wanted: str) -> bool:
    try:
        if (directory / ".stamp").read_text(encoding="utf-8").strip() != wanted:
            return False
    except OSError:
        return False
    return all(os.access(directory / name, os.X_OK) for name in BINARY_NAMES)


def _ldflags(version: str) -> str:
    minor = version.removeprefix("v1.").split(".")[0]
    values = {
        "gitVersion": version,
        "gitMajor": "1",
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return " ".join(["-s -w", *(f"-X k8s.io/component-base/version.{k}={v}" for k, v in values.items())])


def _count_progress(lines: Iterable[str], start: float) -> int:
    """Count the package names ``go build -v`` prints (about 2,600 on a cold cache), saying so
    every 100; pass any other line (an error) on to stderr."""
    count = 0
    for raw in lines:
        line = raw.rstrip("\n")
        if _GO_PACKAGE_LINE.match(line):
            count += 1
            if count % 100 == 0:
                say(f"  {count} packages compiled ({time.monotonic() - start:.0f}s)")
        elif line:
            print(line, file=sys.stderr, flush=True)
    return count


def _go(go: str, args: Sequence[str], cwd: Path, start: float) -> bool:
    """Run ``go args`` in ``cwd`` with its output through :func:`_count_progress`."""
    with subprocess.Popen(
        [go, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as process:
        assert process.stdout is not None
        count = _count_progress(process.stdout, start)
    if args[0] == "build":
        say(f"  {count} packages compiled")
    return process.returncode == 0


def _compile(go: str, module: Path, version: str, work: Path) -> bool:
    """Copy the module into ``work`` (the package may be read-only) and build the three there."""
    source = work / "src"
    for name in _STAMPED_FILES:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(module / name, source / name)
    start = time.monotonic()
    say(f"downloading modules for kubernetes {version} (once per module cache)")
    if not _go(go, ["mod", "download"], source, start):
        return False
    go_version = _go_version(go)
    cores = os.cpu_count()
    say(f"building {' '.join(BINARY_NAMES)} with {go_version} on {cores} cores (a cold build takes a while)")
    out = work / "out"
    out.mkdir()
    return _go(
        go,
        ["build", "-v", "-trimpath", "-ldflags", _ldflags(version), "-o", f"{out}/", *_PACKAGES],
        source,
        start,
    )


def _go_version(go: str) -> str:
    return subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=True).stdout.strip()


def build() -> int:
    """Build the binaries unless built; print the bin directory last. Returns the exit status."""
    module = module_dir()
    version = pinned_version(module / "go.mod")
    if version is None:
        say(f"{module / 'go.mod'} pins no k8s.io/kubernetes version")
        return 1
    target = bin_dir(version)
    go = shutil.which("go")
    if go is None:
        say("no 'go' on PATH: cannot build the real control plane (install Go, then run " + COMMAND + ")")
        return 2
    wanted = stamp(module, _go_version(go))
    if _is_built(target, wanted):
        say(f"kubernetes {version} binaries already built in {target}")
        print(target, flush=True)
        return 0
    started = time.monotonic()
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="build.", dir=target.parent))
    try:
        if not _compile(go, module, version, work):
            say("build failed")
            return 1
        target.mkdir(parents=True, exist_ok=True)
        (target / ".stamp").unlink(missing_ok=True)
        for name in BINARY_NAMES:
            os.replace(work / "out" / name, target / name)
        (target / ".stamp").write_text(wanted + "\n", encoding="utf-8")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    say(f"built kubernetes {version} binaries in {time.monotonic() - started:.0f}s: {target}")
    print(target, flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mcm.testing.envtest build [--print-dir]``."""
    parser = argparse.ArgumentParser(
        prog="python -m mcm.testing.envtest",
        description="Build the real control plane (etcd, kube-apiserver, kube-controller-manager) "
        "that mcm.testing.envtest runs, from the Go module shipped in mcm. Needs go on PATH.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    build_parser = commands.add_parser(
        "build", help="build the binaries (a no-op once built); the last line on stdout is their directory"
    )
    build_parser.add_argument(
        "--print-dir", action="store_true", help="only print the directory; build nothing"
    )
    args = parser.parse_args(argv)
    if args.print_dir:
        version = pinned_version()
        if version is None:
            say("the packaged go.mod pins no k8s.io/kubernetes version")
            return 1
        print(bin_dir(version))
        return 0
    return build()


if __name__ == "__main__":
    sys.exit(main())
