"""The artefact cache wired into compiles: fresh clones and other directories reuse binaries by content."""
from __future__ import annotations

import os
import subprocess

import pytest

from conftest import binaries, edit
from pypto_build.testing import synth
from pypto_build.api import build
from pypto_build.platforms.host.places import HOST_STAMP

ALL = 4   # 3 kernels + 1 orchestration


def test_fresh_clone_compiles_nothing_and_gets_identical_binaries(tmp_path):
    cache = tmp_path / "cache"
    a = synth.write_l2(tmp_path / "a", kernels=3)
    subprocess.run(["cp", "-r", str(a), str(tmp_path / "clone")], check=True)   # before any build: no state
    assert len(build(a, cache_dir=cache).compiled) == ALL
    clone = tmp_path / "clone"
    result = build(clone, cache_dir=cache)
    assert result.compiled == [] and len(result.from_cache) == ALL
    assert binaries(clone) == binaries(a)
    assert (clone / HOST_STAMP).exists()
    assert build(clone, cache_dir=cache).from_cache == []                      # then simply up to date


def test_another_directory_with_the_same_kernel_shares_the_entry(tmp_path):
    cache = tmp_path / "cache"
    build(synth.write_l2(tmp_path / "one", kernels=2), cache_dir=cache)
    other = synth.write_l2(tmp_path / "two", kernels=3)      # kernels 0, 1 and the common header are the same
    result = build(other, cache_dir=cache)
    assert result.from_cache == ["compile:aic/main_incore_0_aic", "compile:aiv/main_incore_1_aiv"]
    assert sorted(result.compiled) == ["compile:aic/main_incore_2_aic", "orch:main"]


@pytest.mark.slow
def test_a_changed_header_misses_and_a_corrupt_entry_is_rebuilt(tmp_path, capfd):
    cache = tmp_path / "cache"
    a = synth.write_l2(tmp_path / "a", kernels=3)
    build(a, cache_dir=cache)
    b = tmp_path / "b"
    subprocess.run(["cp", "-r", str(a), str(b)], check=True)
    subprocess.run(["rm", "-rf", str(b / ".pypto_build")], check=True)
    edit(b / "kernels/common.h")
    result = build(b, cache_dir=cache)
    assert sorted(result.compiled) == ["compile:aic/main_incore_0_aic", "compile:aic/main_incore_2_aic"]
    for entry in cache.rglob("*"):                          # flip a byte in every stored entry
        if entry.is_file() and not entry.name.startswith("."):
            data = bytearray(entry.read_bytes())
            data[-1] ^= 0xFF
            entry.write_bytes(bytes(data))
    c = synth.write_l2(tmp_path / "c", kernels=3)
    result = build(c, cache_dir=cache)
    assert result.from_cache == [] and len(result.compiled) == ALL
    assert binaries(c) == binaries(a)
    assert "corrupt" in capfd.readouterr().err.lower()


def test_unknown_identity_never_uses_the_cache(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    repo = tmp_path / "pto-isa"
    (repo / "include/pto").mkdir(parents=True)
    (repo / "include/pto/pto-inst.hpp").write_text("#pragma once\nnamespace pto {}\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)             # no commit: identity unknown
    monkeypatch.setenv("PTO_ISA_ROOT", str(repo))
    a = synth.write_l2(tmp_path / "a", kernels=2)
    build(a, cache_dir=cache)
    assert not cache.exists() or not any(p.is_file() and not p.name.startswith(".") for p in cache.rglob("*"))


@pytest.mark.slow
def test_cache_cli_stats_and_clean(tmp_path):
    cache = tmp_path / "cache"
    root = synth.write_l2(tmp_path / "a", kernels=2)
    out = subprocess.run(["pypto-build", "build", "--cache-dir", str(cache), str(root)], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    stats = subprocess.run(["pypto-build", "cache", "stats", "--cache-dir", str(cache)], capture_output=True,
                           text=True)
    # 3 units, each stored as a binary plus its header-set manifest; only binaries are counted as such
    assert ": 3 binaries (" in stats.stdout and "+ 3 index records" in stats.stdout, stats.stdout
    assert "0 hits, 3 misses, 6 stores" in stats.stdout, stats.stdout
    clean = subprocess.run(["pypto-build", "cache", "clean"], capture_output=True, text=True,
                           env={**os.environ, "PYPTO_BUILD_CACHE": str(cache)})
    assert clean.returncode == 0 and "removed" in clean.stdout
    none = subprocess.run(["pypto-build", "cache", "stats"], capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "PYPTO_BUILD_CACHE"})
    assert none.returncode == 0 and "no artefact cache configured" in none.stdout, none.stderr
    assert "precompiled preludes " in none.stdout and "cache " not in none.stdout.replace("artefact cache", "")


@pytest.mark.slow
def test_concurrent_builds_of_different_directories_share_one_cache(tmp_path):
    cache = tmp_path / "cache"
    dirs = [synth.write_l2(tmp_path / f"d{i}", kernels=4) for i in range(3)]
    procs = [subprocess.Popen(["pypto-build", "build", "-q", "--cache-dir", str(cache), str(d)],
                              stderr=subprocess.PIPE, text=True) for d in dirs]
    assert all(p.wait(timeout=300) == 0 for p in procs)
    reference = binaries(dirs[0])
    assert all(binaries(d) == reference for d in dirs[1:])
