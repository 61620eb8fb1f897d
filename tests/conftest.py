"""Shared fixtures: generated build directories, built once and copied per test."""
from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

# The tests start `pypto-build`, `doit` and `python` as subprocesses: take those of the interpreter running
# the tests (a venv's bin/ is not on PATH unless it was activated).
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")

from pypto_build.testing import fake_ptoas, synth
from pypto_build.testing.loopback import nginx_path
from pypto_build.api import build
from pypto_build.builddir.state_dir import STATE_DB, state_folder
from pypto_build.core.racy import FINE_NS


HOST_STATE_DB = f"{state_folder('host')}/{STATE_DB}"      # the host platform's doit state (unmarked tests build host)
FAKE_PTOAS = Path(fake_ptoas.__file__).resolve()     # the labelled ptoas stand-in (an executable script)

NGINX = nginx_path()
# CI (.ci/run) sets PYPTO_BUILD_REQUIRE_NGINX=1: there these tests fail without nginx instead of skipping.
REQUIRED = os.environ.get("PYPTO_BUILD_REQUIRE_NGINX") == "1"
needs_nginx = pytest.mark.skipif(NGINX is None and not REQUIRED, reason="nginx not installed (apt-get install "
                                                                        "nginx-light)")


@functools.lru_cache(maxsize=None)
def _simpler_missing() -> str | None:
    """Why the `simpler`-marked tests cannot run here, or None (simpler is on no registry: CI lacks it)."""
    import importlib.util

    if importlib.util.find_spec("simpler") is None or importlib.util.find_spec("simpler_setup") is None:
        return ("needs PyPTO's runtime simpler importable (not on any registry; build it locally with "
                "tools/build-simpler.sh and run pytest with that venv's python: docs/platforms.md, "
                "\"Building simpler locally\")")
    return None


if not _simpler_missing():
    # The fixtures record a2a3sim, as PyPTO writes them: with simpler importable they would build through it.
    # The shared (session) fixtures and every unmarked test are about the host platform, as where simpler is
    # missing (CI); `simpler`-marked tests run without this (_clean_env).
    os.environ["PYPTO_BUILD_PLATFORM"] = "host"


def pytest_collection_modifyitems(config, items):
    why = _simpler_missing()
    if why:
        for item in items:
            if "simpler" in item.keywords:
                item.add_marker(pytest.mark.skip(reason=why))


def copy_dir(src: Path, dst: Path) -> Path:
    """`cp -a`: keeps mtimes and the state folder, new inodes (like a CI cache restore)."""
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)
    return dst


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch, request, tmp_path_factory):
    for var in ("CXX", "CXXFLAGS", "PTO_ISA_ROOT", "PYPTO_BUILD_PLATFORM", "PYPTO_COMPILER_TIMEOUT",
                "PYPTO_BUILD_CACHE", "PYPTO_BUILD_CACHE_SIZE", "PYPTO_BUILD_REMOTE_CACHE", "PYPTO_BUILD_REMOTE_TIMEOUT",
                "PYPTO_RUN_TIMEOUT", "PTOAS_ROOT", "PYPTO_REBUILD_FROM_PTO", "PYPTO_PTOAS_TIMEOUT", "PYPTO_BUILD_LAUNCHER",
                "DISTCC_HOSTS", "PYPTO_BUILD_PCH", "PYPTO_BUILD_PCH_SIZE", "PYPTO_BUILD_KEEP_REPLAY"):
        monkeypatch.delenv(var, raising=False)
    # the user's cache folder (where precompiled preludes are kept without an artefact cache): the test's own
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("user-cache")))
    if not _simpler_missing() and "simpler" not in request.keywords:
        monkeypatch.setenv("PYPTO_BUILD_PLATFORM", "host")        # see the module's top


@pytest.fixture(scope="session")
def built_l2(tmp_path_factory) -> Path:
    """An L2 dir with 3 kernels (aic+aiv, two include ../common.h) and an orchestration, built once."""
    root = synth.write_l2(tmp_path_factory.mktemp("pristine") / "l2", kernels=3)
    build(root)
    return root


@pytest.fixture
def l2(built_l2, tmp_path) -> Path:
    """A private, already built copy of the L2 fixture."""
    return copy_dir(built_l2, tmp_path / "l2")


@pytest.fixture(scope="session")
def built_golden(tmp_path_factory) -> Path:
    """The L2 fixture with golden.py (replay, validate, CompiledProgram), built once."""
    root = synth.write_l2(tmp_path_factory.mktemp("pristine-golden") / "g", kernels=3, golden=True)
    build(root)
    return root


@pytest.fixture(scope="session")
def built_l3(tmp_path_factory) -> Path:
    root = synth.write_l3(tmp_path_factory.mktemp("pristine3") / "l3")
    build(root, jobs=2)
    return root


@pytest.fixture
def l3(built_l3, tmp_path) -> Path:
    return copy_dir(built_l3, tmp_path / "l3")


def age_tree(root: Path, seconds: float = 3600) -> None:
    """Set every file's and directory's mtime into the past (a `touch -d`), then wait out the racy window.

    Trust rests on ctime (`pypto_build.core.racy`), which utime sets to now: the wait (a few
    ticks of the kernel's clock, not seconds) lets the next run record these files as settled.
    """
    when = os.stat(root).st_mtime - seconds
    for dirpath, _dirs, files in os.walk(root, topdown=False):
        for name in files:
            os.utime(os.path.join(dirpath, name), (when, when))
        os.utime(dirpath, (when, when))
    settle_ctimes()


def settle_ctimes() -> None:
    """Wait until every change made so far is older than the racy window (nanosecond file systems)."""
    time.sleep(2 * FINE_NS / 1e9)


def edit(path: Path, text: str = "\n// edited\n") -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)


def same_size_edit(path: Path) -> None:
    """Rewrite `path` with other bytes of the same length and put its mtime back: size and mtime as before.

    Done in a later second than git's last look: a git built without nanosecond stat checks (USE_NSEC,
    not the default) compares ctime in whole seconds, so an edit within that second is its own blind
    spot. The watch compares ctime to the nanosecond and sees it either way (test_git_watch: `test_..._same_second`).
    """
    time.sleep(1 - time.time() % 1 + 0.01)
    before = path.stat()
    path.write_bytes(path.read_bytes().replace(b"1", b"2"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def binaries(root: Path) -> dict[str, bytes]:
    """Every `.so` under `root` by its relative path, with its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.so"))}


def imported(stderr: str) -> set[str]:
    """The modules a process with PYTHONPROFILEIMPORTTIME=1 (or -X importtime) imported, from its stderr."""
    return {line.rpartition("|")[2].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def which(name: str) -> str:
    found = shutil.which(name)
    assert found, name
    return found


def inject(kernel: Path, code: str, *, after_call: bool = False, includes: str = "") -> None:
    """Insert C++ `code` into a generated kernel's kernel_entry (before, or after, its forward call)."""
    text = kernel.read_text()
    marker = "    // Forward to ptoas-generated function\n"
    start = text.index(marker)
    at = text.index("\n", start + len(marker)) + 1 if after_call else start
    text = text[:at] + f"    {code}\n" + text[at:]
    if includes:
        text = text.replace("#include <cstdint>", f"#include <cstdint>\n{includes}", 1)
    kernel.write_text(text)


def recording_git(bin_dir: Path) -> Path:
    """Write a labelled test stand-in `git` into `bin_dir` (put it first on PATH): it appends its arguments to
    the returned log, then runs the real git."""
    real, log = which("git"), bin_dir / "git-calls.log"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "git").write_text("#!/bin/sh\n# test stand-in: logs its arguments, then runs the real git\n"
                                 f'echo "$*" >> {shlex.quote(str(log))}\nexec {shlex.quote(real)} "$@"\n')
    (bin_dir / "git").chmod(0o755)
    log.write_text("")
    return log


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo,
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def pto_isa(tmp_path) -> Path:
    """A stand-in PTO-ISA checkout: a git repo whose pto/pto-inst.hpp declares an empty namespace."""
    repo = tmp_path / "pto-isa"
    (repo / "include" / "pto").mkdir(parents=True)
    (repo / "include" / "pto" / "pto-inst.hpp").write_text("#pragma once\nnamespace pto {}\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "one")
    return repo


@pytest.fixture
def ptoas_env(tmp_path, monkeypatch) -> Path:
    """PTOAS_ROOT holding the stand-in as `ptoas`; returns the log of its invocations (FAKE_PTOAS_LOG)."""
    root = tmp_path / "ptoas-root"
    root.mkdir()
    shutil.copy(FAKE_PTOAS, root / "ptoas")
    log = tmp_path / "ptoas.log"
    monkeypatch.setenv("PTOAS_ROOT", str(root))
    monkeypatch.setenv("FAKE_PTOAS_LOG", str(log))
    return log


@pytest.fixture
def nginx_cache(tmp_path):
    """A real nginx serving GET and WebDAV PUT on 127.0.0.1 from a temp store, a Bazel-HTTP cache (the
    configuration docs/ci.md shows); yields (url, store). Mark tests using it `needs_nginx`."""
    from pypto_build.testing.loopback import nginx_cache as serve

    if NGINX is None:
        pytest.fail("nginx is required here (PYPTO_BUILD_REQUIRE_NGINX=1, as in CI) but not installed: "
                    "apt-get install nginx-light")
    with serve(tmp_path / "nginx") as running:
        yield running


# ---- a PTO-ISA-style tree (the precompiled preludes' tests) ----------------------------------------

PTO_INST = """\
#pragma once
#include <vector>
#include <string>
#include <map>
#include "pto/common/type.hpp"
namespace pto {
template <typename T> inline T twice(T x) { return x + x; }
}
"""
TYPE_HPP = """\
#ifndef PTO_COMMON_TYPE_HPP
#define PTO_COMMON_TYPE_HPP
namespace pto { inline int three() { return 3; } }
#endif
"""


@pytest.fixture
def pto_tree(tmp_path, monkeypatch) -> Path:
    """A PTO-ISA-style tree (a clean git checkout, as the identity wants) named by PTO_ISA_ROOT."""
    repo = tmp_path / "pto-isa"
    (repo / "include/pto/common").mkdir(parents=True)
    (repo / "include/pto/pto-inst.hpp").write_text(PTO_INST)
    (repo / "include/pto/common/type.hpp").write_text(TYPE_HPP)
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "pto-isa"], cwd=repo, check=True)
    monkeypatch.setenv("PTO_ISA_ROOT", str(repo))
    return repo
