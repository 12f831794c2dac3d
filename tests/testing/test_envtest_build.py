"""``python -m mcm.testing.envtest build`` (and ``hack/envtest.sh``, its wrapper): the contract
hack/test.sh relies on, checked with a stand-in ``go`` so no real build runs.

- the last line on stdout is the bin directory; exit 0 built or cached, 2 no go, 1 build failed;
- a second run with the same module files and Go version builds nothing;
- the stamp is the one the shell script wrote, so caches it built stay valid;
- a failed build leaves no binaries, no stamp and no work directory.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcm.testing.envtest import BinariesMissing, build, find_binaries

REPO = Path(__file__).resolve().parents[2]

FAKE_GO = r"""#!/bin/sh
# A stand-in for go: logs each call; `build -o DIR/` writes the three binaries unless FAIL is set.
echo "$*" >> "$GO_LOG"
case "$1" in
  env) echo go1.99.9 ;;
  mod) ;;
  build)
    echo k8s.io/apimachinery/pkg/util/sets
    echo k8s.io/kubernetes/cmd/kube-apiserver
    if [ -n "${FAIL:-}" ]; then echo "compile: it broke"; exit 1; fi
    while [ "$1" != "-o" ]; do shift; done
    for b in etcd kube-apiserver kube-controller-manager; do
      printf '#!/bin/sh\n' > "$2$b"; chmod +x "$2$b"
    done ;;
esac
"""


@pytest.fixture
def fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``go`` on PATH that logs its calls to the returned file; the cache in ``tmp_path``."""
    bin_dir = tmp_path / "gobin"
    bin_dir.mkdir()
    (bin_dir / "go").write_text(FAKE_GO)
    (bin_dir / "go").chmod(0o755)
    log = tmp_path / "go.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("GO_LOG", str(log))
    monkeypatch.setenv("MCM_ENVTEST_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("MCM_ENVTEST_ASSETS", raising=False)
    return log


def _run(*command: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(command), capture_output=True, text=True, check=False, env={**os.environ, **env}, timeout=60
    )


def _package_command(*args: str) -> subprocess.CompletedProcess[str]:
    return _run(sys.executable, "-m", "mcm.testing.envtest", "build", *args)


def test_builds_once_then_finds_the_build(fake_go: Path, tmp_path: Path) -> None:
    first = _package_command()
    assert first.returncode == 0, first.stderr
    version = build.pinned_version()
    assert version is not None
    bin_dir = tmp_path / "cache" / version / "bin"
    assert first.stdout.splitlines()[-1] == str(bin_dir)
    assert "2 packages compiled" in first.stderr
    assert find_binaries().directory == bin_dir
    assert (bin_dir / ".stamp").read_text().strip() == build.stamp(build.module_dir(), "go1.99.9")
    assert [p.name for p in bin_dir.parent.iterdir()] == ["bin"], "the work directory is gone"

    fake_go.write_text("")
    second = _package_command()
    assert second.returncode == 0
    assert second.stdout.splitlines()[-1] == str(bin_dir)
    assert "already built" in second.stderr
    assert fake_go.read_text().split("\n")[:-1] == ["env GOVERSION"], "nothing was built"


def test_a_new_go_version_rebuilds(fake_go: Path, tmp_path: Path) -> None:
    assert _package_command().returncode == 0
    stamp = next((tmp_path / "cache").glob("*/bin/.stamp"))
    stamp.write_text(build.stamp(build.module_dir(), "go1.0.0") + "\n")
    fake_go.write_text("")
    assert _package_command().returncode == 0
    assert any(line.startswith("build -v -trimpath") for line in fake_go.read_text().splitlines())


def test_a_failed_build_leaves_nothing_and_exits_1(fake_go: Path, tmp_path: Path) -> None:
    result = _run(sys.executable, "-m", "mcm.testing.envtest", "build", FAIL="1")
    assert result.returncode == 1
    assert "compile: it broke" in result.stderr and "build failed" in result.stderr
    assert result.stdout == ""
    version_dir = next((tmp_path / "cache").iterdir())
    assert list(version_dir.iterdir()) == [], "no binaries, no stamp, no work directory"
    with pytest.raises(BinariesMissing, match=r"run python -m mcm\.testing\.envtest build"):
        find_binaries()


def test_without_go_it_exits_2_naming_the_package_command(tmp_path: Path) -> None:
    result = _run(sys.executable, "-m", "mcm.testing.envtest", "build", PATH=str(tmp_path))
    assert result.returncode == 2
    assert "no 'go' on PATH" in result.stderr and "python -m mcm.testing.envtest build" in result.stderr


def test_print_dir_builds_nothing(fake_go: Path, tmp_path: Path) -> None:
    result = _package_command("--print-dir")
    assert result.returncode == 0
    assert result.stdout == f"{tmp_path / 'cache' / str(build.pinned_version()) / 'bin'}\n"
    assert not fake_go.exists()


def test_hack_envtest_sh_wraps_the_package_command_without_a_venv(fake_go: Path, tmp_path: Path) -> None:
    """The wrapper runs the same module, by path, with the python3 it is given."""
    result = _run("bash", str(REPO / "hack" / "envtest.sh"), PYTHON=sys.executable, PYTHONNOUSERSITE="1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == str(tmp_path / "cache" / str(build.pinned_version()) / "bin")


def test_the_build_module_needs_only_the_standard_library() -> None:
    """hack/envtest.sh runs build.py by path: it may import only the standard library and
    mcm.packaged (checked with site-packages off: -S)."""
    result = _run(
        sys.executable,
        "-S",
        "-P",
        str(REPO / "mcm" / "testing" / "envtest" / "build.py"),
        "build",
        "--print-dir",
        PYTHONPATH=str(REPO),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("/bin")


def test_the_stamp_is_the_shell_scripts() -> None:
    """The shell script this replaced stamped ``sha256(go.mod go.sum etcd/main.go)[:16]-<go version>``;
    the same files give the same stamp, so binaries it built are found, not rebuilt."""
    module = build.module_dir()
    concatenated = b"".join((module / n).read_bytes() for n in ("go.mod", "go.sum", "etcd/main.go"))
    assert build.stamp(module, "go1.26.8") == hashlib.sha256(concatenated).hexdigest()[:16] + "-go1.26.8"
