"""Runs that overlap: four at once on one directory; directories sharing one artefact cache."""
from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from conftest import HOST_STATE_DB, copy_dir, edit
from pypto_build.testing import synth
from pypto_build.api import build
from pypto_build.cache.store import ArtifactCache

pytestmark = pytest.mark.slow


def counting_compiler(tmp_path: Path) -> tuple[str, Path]:
    """A $CXX that logs the source of every compile (one O_APPEND line) and runs g++."""
    log = tmp_path / "compiles.log"
    script = tmp_path / "cxx"
    script.write_text('#!/bin/sh\nfor a in "$@"; do case "$a" in *.cpp) echo "$a" >> "$COMPILE_LOG";; esac; done\n'
                      'exec g++ "$@"\n')
    script.chmod(0o755)
    return str(script), log


def binaries(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*.so"))}


def start(argv: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_four_runs_at_once_on_one_directory_compile_each_unit_once(tmp_path, monkeypatch):
    pristine = synth.write_l2(tmp_path / "pristine", kernels=6, golden=True)
    reference = copy_dir(pristine, tmp_path / "reference")
    build(reference)
    root = copy_dir(pristine, tmp_path / "d")
    cxx, log = counting_compiler(tmp_path)
    env = {**os.environ, "CXX": cxx, "COMPILE_LOG": str(log)}
    argvs = [["pypto-build", "build", "-j", "2", str(root)], ["pypto-build", "build", str(root)],
             ["pypto-build", "replay", "--validate", str(root)], ["pypto-build", "validate", str(root)]]
    procs = [start(argv, env) for argv in argvs]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], outs
    assert all("Traceback" not in o + e for o, e in outs)
    assert sum("PASSED" in o for o, _ in outs) == 2                   # the replay and the validate
    assert any("waiting for another run" in e for _, e in outs), "the runs overlapped and waited, saying so"

    compiled = Counter(log.read_text().split())
    sources = {f"./{p.relative_to(root).as_posix()}" for p in root.rglob("*.cpp")}     # as argv passes them
    assert set(compiled) == sources and set(compiled.values()) == {1}, compiled   # each unit once, in all
    conn = sqlite3.connect(root / HOST_STATE_DB)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    assert binaries(root) == binaries(reference) and len(binaries(root)) == 7
    monkeypatch.setenv("CXX", cxx)
    assert build(root).compiled == []


def test_directories_sharing_one_cache_do_not_interfere(tmp_path):
    cache = tmp_path / "cache"
    kinds = {kind: synth.write_l2(tmp_path / f"p{kind}", kernels=5) for kind in "ab"}
    for source in kinds["b"].rglob("*.cpp"):                            # same names, other code
        edit(source, f'\nextern "C" int variant_b_{source.stem}() {{ return 2; }}\n')
    truth = {}
    for kind, pristine in kinds.items():
        ref = copy_dir(pristine, tmp_path / f"ref_{kind}")
        build(ref)
        truth[kind] = binaries(ref)
    assert truth["a"] != truth["b"]
    dirs = [(kind, copy_dir(kinds[kind], tmp_path / f"{kind}{i}")) for i in range(2) for kind in "ab"]
    env = {**os.environ, "PYPTO_BUILD_CACHE": str(cache)}
    procs = [start(["pypto-build", "build", "-j", "2", str(d)], env) for _, d in dirs]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, outs
    for kind, d in dirs:
        assert binaries(d) == truth[kind], f"{d} got another directory's binaries"
    stats = ArtifactCache(cache).stats()
    assert stats.corrupt == 0
    assert stats.stores >= 12 and stats.stores + stats.hits >= 24      # 2 kinds x 6 units; 4 dirs x 6 units
    for kind in "ab":                                                    # and the cache serves both correctly
        fresh = copy_dir(kinds[kind], tmp_path / f"fresh_{kind}")
        result = build(fresh, cache_dir=cache)
        assert result.compiled == [] and len(result.from_cache) == 6
        assert binaries(fresh) == truth[kind]
