"""Precompiled preludes (issue 24 item 1): the same bytes as the plain compile, exact preludes only, never an
identity, a store that is shared, whole and bounded — on host kernels against a small PTO-ISA-style tree."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import binaries, edit
from pypto_build.api import build
from pypto_build.cache import PreludeStore
from pypto_build.compile import prelude
from pypto_build.compile.prelude_actions import take
from pypto_build.core.hashing import file_digest
from pypto_build.core.shared_flag import SharedFlag
from pypto_build.testing import synth
from pypto_build.testing.loopback import distccd, distccd_path
from pypto_build.toolchain.launcher import Launcher

needs_distcc = pytest.mark.skipif(distccd_path() is None and os.environ.get("PYPTO_BUILD_REQUIRE_DISTCC") != "1",
                                  reason="distcc not installed (apt-get install distcc)")
# Whole builds against the PTO-ISA-style tree, seconds each: CI runs them, the fast subset does not.
builds = pytest.mark.slow
KERNELS = 4                 # two aic (with "../common.h" after the prelude) and two aiv


def how(root: Path) -> dict[str, str]:
    """Each unit's `explain --all` line after its task name."""
    out = subprocess.run([sys.executable, "-m", "pypto_build", "explain", "--all", str(root)], capture_output=True,
                         text=True, check=True).stdout
    return dict(line.split(": ", 1) for line in out.splitlines() if line.startswith(("compile:", "prelude:")))


def plain_twin(src: Path, dst: Path) -> dict[str, bytes]:
    """The binaries of a copy of `src`'s sources (no state) built without preludes."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".pypto_build", "*.so", "binary_context.json"))
    result = build(dst, preludes=False)
    assert len(result.compiled) == KERNELS + 1
    return binaries(dst)


@builds
def test_kernels_compile_with_their_prelude_and_the_bytes_are_the_plain_ones(pto_tree, tmp_path):
    a = synth.write_l2(tmp_path / "a", kernels=KERNELS)
    result = build(a, jobs=2)
    assert len(result.compiled) == KERNELS + 1
    lines = how(a)
    aic = [v for k, v in lines.items() if k.startswith("compile:aic/")]
    aiv = [v for k, v in lines.items() if k.startswith("compile:aiv/")]
    assert len(aic) == len(aiv) == 2
    # one prelude per command line (core type), each shared by its two kernels
    assert len({v for v in aic}) == 1 and "(last compiled with prelude:aic." in aic[0], aic
    assert len({v for v in aiv}) == 1 and "(last compiled with prelude:aiv." in aiv[0], aiv
    store = Path(os.environ["XDG_CACHE_HOME"]) / "pypto_build" / "preludes"
    assert len(list(store.glob("*.json"))) == 2          # one current entry per prelude
    assert binaries(a) == plain_twin(a, tmp_path / "plain")


@builds
def test_a_hand_edited_prelude_compiles_plainly_and_the_rest_keep_theirs(pto_tree, tmp_path):
    a = synth.write_l2(tmp_path / "a", kernels=6)        # three aiv kernels: one edit leaves a majority of two
    build(a)
    edited = a / "kernels/aiv/main_incore_1_aiv.cpp"
    edited.write_text(edited.read_text().replace("#include <pto/pto-inst.hpp>",
                                                 "#define PRELUDE_EDITED 1\n#include <pto/pto-inst.hpp>"))
    result = build(a)
    assert result.compiled == ["compile:aiv/main_incore_1_aiv"]
    lines = how(a)
    assert "plainly: its leading directives do not begin with prelude:aiv." in lines["compile:aiv/main_incore_1_aiv"]
    assert "with prelude:aiv." in lines["compile:aiv/main_incore_3_aiv"]
    twin = tmp_path / "plain"
    shutil.copytree(a, twin, ignore=shutil.ignore_patterns(".pypto_build", "*.so", "binary_context.json"))
    build(twin, preludes=False)
    assert binaries(a) == binaries(twin)


@builds
def test_a_tensor_h_beside_the_kernel_is_never_taken_from_the_prelude(pto_tree, tmp_path):
    a = synth.write_l2(tmp_path / "a", kernels=KERNELS)
    # found first by `#include "tensor.h"` (the kernel's own folder), where the prelude's header would not look
    host_tensor = Path(synth.__file__).parents[1] / "platforms/host/headers/include/tensor.h"
    (a / "kernels/aiv/tensor.h").write_text(host_tensor.read_text() + "\n#define BESIDE_TENSOR_H 7\n")
    for k in (a / "kernels/aiv").glob("*.cpp"):
        k.write_text(k.read_text().replace("n; ++i) {", "n; ++i) { out[i] = BESIDE_TENSOR_H;"))
    build(a)
    lines = how(a)
    for name in ("compile:aiv/main_incore_1_aiv", "compile:aiv/main_incore_3_aiv"):
        assert "with prelude:aiv." in lines[name], lines
    # the aiv prelude stops before "tensor.h": <cstdint>, the macros and <pto/pto-inst.hpp> only
    store = Path(os.environ["XDG_CACHE_HOME"]) / "pypto_build" / "preludes"
    texts = [h.read_text() for h in store.glob("*/prelude.h")]
    assert sum(1 for t in texts if "tensor.h" not in t) == 1 and len(texts) == 2, texts
    assert binaries(a) == plain_twin(a, tmp_path / "plain")


@builds
def test_the_artefact_cache_is_shared_both_ways(pto_tree, tmp_path):
    cache = tmp_path / "cache"
    a = synth.write_l2(tmp_path / "a", kernels=KERNELS)
    assert len(build(a, cache_dir=cache).compiled) == KERNELS + 1          # with preludes, stored
    assert "with prelude:" in how(a)["compile:aiv/main_incore_1_aiv"]
    b = tmp_path / "b"
    shutil.copytree(a, b, ignore=shutil.ignore_patterns(".pypto_build", "*.so", "binary_context.json"))
    without = build(b, cache_dir=cache, preludes=False)
    assert without.compiled == [] and len(without.from_cache) == KERNELS + 1
    assert binaries(b) == binaries(a)
    # and the other way: stored without, restored with
    c, d = synth.write_l2(tmp_path / "c", kernels=3), tmp_path / "d"
    shutil.copytree(c, d)
    cache2 = tmp_path / "cache2"
    assert len(build(c, cache_dir=cache2, preludes=False).compiled) == 4
    with_ = build(d, cache_dir=cache2)
    assert with_.compiled == [] and len(with_.from_cache) == 4
    assert binaries(c) == binaries(d)


@builds
def test_switching_preludes_off_or_on_rebuilds_nothing(pto_tree, tmp_path, monkeypatch):
    a = synth.write_l2(tmp_path / "a", kernels=KERNELS)
    build(a)
    monkeypatch.setenv("PYPTO_BUILD_PCH", "0")
    assert build(a).compiled == []
    edit(a / "kernels/aiv/main_incore_1_aiv.cpp")
    assert build(a).compiled == ["compile:aiv/main_incore_1_aiv"]
    assert how(a)["compile:aiv/main_incore_1_aiv"] == "up to date"      # off: no prelude planned, none said
    out = subprocess.run([sys.executable, "-m", "pypto_build", "build", "--no-pch", str(a)], capture_output=True,
                         text=True)
    assert out.returncode == 0 and "prelude:" not in out.stdout + out.stderr
    monkeypatch.delenv("PYPTO_BUILD_PCH")           # and on again: the kernel built without one is kept
    assert build(a).compiled == []


def _build_cli(a: Path) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "pypto_build", "build", str(a)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out


@builds
def test_a_gch_changed_in_place_is_never_used_and_is_built_again(pto_tree, tmp_path):
    a = synth.write_l2(tmp_path / "a", kernels=KERNELS)
    build(a)
    reference = binaries(a)
    store = Path(os.environ["XDG_CACHE_HOME"]) / "pypto_build" / "preludes"
    for gch in store.glob("*/prelude.h.gch"):       # the same size, other bytes (GCC would still take some)
        with open(gch, "r+b") as handle:
            handle.seek(4096)
            handle.write(b"\0" * 64)
    for k in (a / "kernels").glob("*/*.cpp"):
        edit(k)
    out = _build_cli(a)
    assert "rejected" not in out.stderr, out.stderr
    ran = [t for t in build(a).names("ran")]
    assert all("(last compiled with prelude:" in v for k, v in how(a).items() if k.startswith("compile:"))
    assert binaries(a) == reference and not ran


@builds
def test_a_header_gcc_rejects_compiles_plainly_and_is_said_once(pto_tree, tmp_path):
    a = synth.write_l2(tmp_path / "a", kernels=KERNELS)
    build(a)
    reference = binaries(a)
    store = Path(os.environ["XDG_CACHE_HOME"]) / "pypto_build" / "preludes"
    for gch in store.glob("*/prelude.h.gch"):       # whole by its record, but no longer a PCH GCC takes
        gch.write_bytes(b"notapch!" * 100)
        meta = json.loads((gch.parent / "entry.json").read_text())
        meta.update(size=800, digest=file_digest(str(gch)))
        (gch.parent / "entry.json").write_text(json.dumps(meta))
    for k in (a / "kernels").glob("*/*.cpp"):
        edit(k)
    out = _build_cli(a)
    said = [line for line in out.stderr.splitlines() if "rejected the precompiled header" in line]
    assert len(said) == 1, out.stderr
    kernels = {k: v for k, v in how(a).items() if k.startswith("compile:")}
    hows = sorted(v.split("plainly: ")[1].split(" (")[0] for v in kernels.values())
    # the first to meet it compiled twice; the rest of the run did not try it again
    assert hows == ["GCC rejected the precompiled header"] + ["a precompiled header failed earlier in this run"] * 3
    assert binaries(a) == reference                 # the edits were comments: the same bytes
    # a rejected entry leaves the store: the next build that meets the other one drops it too, and then both
    # preludes are made again and taken
    said = []
    for _ in range(2):
        for k in (a / "kernels").glob("*/*.cpp"):
            edit(k)
        said.append(_build_cli(a).stderr.count("rejected the precompiled header"))
    assert said in ([1, 0], [0, 0]), said
    assert all("(last compiled with prelude:" in v for k, v in how(a).items() if k.startswith("compile:"))
    assert binaries(a) == reference


@builds
@needs_distcc
def test_under_distcc_kernels_compile_plainly_to_the_same_bytes_and_no_prelude_is_built(pto_tree, tmp_path):
    a = synth.write_l2(tmp_path / "a", kernels=KERNELS)
    build(a)                                          # here, with preludes
    b = tmp_path / "b"
    shutil.copytree(a, b, ignore=shutil.ignore_patterns(".pypto_build", "*.so", "binary_context.json"))
    with distccd(tmp_path / "distccd") as server:
        env = {**os.environ, "CXX": "distcc g++", **server.env(), "XDG_CACHE_HOME": str(tmp_path / "fresh-cache")}
        done = subprocess.run([sys.executable, "-m", "pypto_build", "build", "-j", "4", str(b)], capture_output=True,
                              text=True, env=env)
        assert done.returncode == 0, done.stderr
        assert sorted(Path(s).name for s in server.compiled()) == sorted(p.name for p in (b / "kernels").rglob("*.cpp"))
    assert "prelude:" not in done.stdout and not (tmp_path / "fresh-cache").exists()     # none built
    lines = how(b)
    assert all("plainly: distcc runs the compile" in v for k, v in lines.items() if k.startswith("compile:")), lines
    assert binaries(b) == binaries(a)


def test_a_kernel_under_a_launcher_compiles_plainly(tmp_path):
    unit = type("Unit", (), {"source": str(tmp_path / "k.cpp")})()
    (tmp_path / "k.cpp").write_text("#include <cstdint>\n#include <vector>\nint x;\n")
    planned = prelude.PreludeUnit("prelude:aiv.00", "00", "", ("#include <cstdint>", "#include <vector>"), (), "",
                                  "")
    use = take(unit, planned, str(tmp_path / "store"), Launcher(("/usr/bin/distcc",), SharedFlag()))
    assert use is not None and not use.flags and use.how.startswith("plainly: distcc runs the compile")


# ---- the prelude, as text ----------------------------------------------------------------------------------

GENERATED = """\
/*
 * Copyright
 */
// Kernel Function: k
#include <cstdint>

#ifndef __gm__
#define __gm__
#endif

#include <pto/pto-inst.hpp>
#include "tensor.h"
#include "intrinsic.h"

using namespace pto;
#include "late.h"
"""


def test_the_leading_directives_skip_comments_and_stop_at_code():
    assert prelude.directives(GENERATED) == ["#include <cstdint>", "#ifndef __gm__", "#define __gm__", "#endif",
                                             "#include <pto/pto-inst.hpp>", '#include "tensor.h"',
                                             '#include "intrinsic.h"']
    assert prelude.directives("#pragma once\n#include <x>\n") == []        # only includes and macro directives
    assert prelude.directives("#define A \\\n  1\n#include <x>\nint y;") == ["#define A   1", "#include <x>"]


def test_a_kernel_is_read_only_as_far_as_its_directives_go(tmp_path):
    k = tmp_path / "k.cpp"
    k.write_text("// licence\n" * 2000 + "#include <a>\n#define X \\\n  1\nint x;\n" + "int y;\n" * 10000)
    assert prelude.head_of(k) == ["#include <a>", "#define X   1"]     # past the first 4 KiB, whole lines
    k.write_text("#include <a>\n" * 10000)                                   # longer than HEAD_BYTES: none
    assert prelude.head_of(k) == []
    k.write_text("#include <a>\n#include <b>")                               # the file ends inside them
    assert prelude.head_of(k) == ["#include <a>", "#include <b>"]


def test_the_prelude_is_the_longest_run_most_kernels_begin_with():
    base = ["#include <cstdint>", "#ifndef G", "#define G", "#endif", "#include <pto/pto-inst.hpp>"]
    more = [*base, '#include "intrinsic.h"']
    # unbalanced conditionals and preludes without an #include are no boundaries
    assert prelude.boundaries(base) == [1, 4, 5]
    assert prelude.choose([base, base, more]) == tuple(base)
    assert prelude.choose([more, more, base]) == tuple(more)               # all but one take it
    assert prelude.choose([more] * 14 + [base] * 4) == tuple(base)          # all take the shorter one
    assert prelude.choose([more] * 19 + [base]) == tuple(more)
    edited = ["#include <cstdint>", "#define EDITED", *base[1:]]
    assert prelude.choose([base, base, edited]) == tuple(base)             # one hand edit leaves it as it was
    assert prelude.choose([base] * 17 + [edited]) == tuple(base)
    assert prelude.choose([base]) is None                                   # at least two kernels
    assert prelude.begins_with(more, base) and not prelude.begins_with(edited, base)


def test_an_argv_that_forces_its_own_includes_takes_no_prelude():
    assert prelude.pch_argv(("g++", "-O2", "-Ia", "-o", "k.so", "k.cpp")) == ("g++", "-O2", "-Ia")
    assert prelude.pch_argv(("g++", "-include", "x.h", "-o", "k.so", "k.cpp")) is None
    assert prelude.relative_paths(("g++", "-I./inc")) and not prelude.relative_paths(("g++", "-I/abs"))


# ---- the store ----------------------------------------------------------------------------------------------

def _fake_build(calls: list, header_dep: Path):
    def build_(header: Path, pch: Path) -> list[str]:
        calls.append(header)
        pch.write_bytes(b"x" * 1000)
        return [str(header), str(header_dep)]
    return build_


def _make(store: PreludeStore, key: str, text: str, calls: list, dep: Path, **kw):
    """`store.make` with the headers a probe would find now: `dep`."""
    return store.make(key, text, {str(dep): file_digest(str(dep))}, _fake_build(calls, dep), **kw)


def test_the_store_builds_a_key_once_under_concurrent_runs_and_checks_its_headers(tmp_path):
    dep = tmp_path / "dep.h"
    dep.write_text("one")
    store, calls = PreludeStore(tmp_path / "store"), []
    found = []
    threads = [threading.Thread(target=lambda: found.append(_make(store, "ab" * 8, "#include <x>\n", calls, dep)))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len({e.name for e in found}) == 1
    entry = found[0]
    assert sorted(os.listdir(entry.path)) == ["entry.json", "prelude.h", "prelude.h.gch"]
    assert list(json.loads(Path(entry.path, "entry.json").read_text())["headers"]) == [str(dep)]
    assert store.current("ab" * 8) == entry
    dep.write_text("two")                           # an edited header: the entry no longer answers
    assert store.current("ab" * 8) is None
    again = _make(store, "ab" * 8, "#include <x>\n", calls, dep)
    assert len(calls) == 2 and again.name != entry.name and os.path.isdir(entry.path)     # never changed in place
    with open(Path(again.path, "prelude.h.gch"), "r+b") as handle:                # changed in place, same size
        handle.write(b"y")
    assert store.current("ab" * 8) is None                                      # its digest is checked on use
    fixed = _make(store, "ab" * 8, "#include <x>\n", calls, dep)
    assert len(calls) == 3 and fixed.name == again.name and store.current("ab" * 8) == fixed     # built again
    assert _make(store, "ab" * 8, "#include <x>\n", calls, dep) == fixed and len(calls) == 3
    assert _make(store, "ab" * 8, "#include <x>\n", calls, dep, fresh=True) == fixed and len(calls) == 4
    with open(Path(fixed.path, "prelude.h.gch"), "r+b") as handle:                # a torn .gch: not whole
        handle.truncate(10)
    assert store.current("ab" * 8) is None


def test_the_store_is_bounded_and_evicts_the_least_recently_used(tmp_path):
    dep = tmp_path / "dep.h"
    dep.write_text("h")
    store = PreludeStore(tmp_path / "store", max_bytes=2500)     # two entries of ~1 KB fit, not three
    first = _make(store, "01" * 8, "a\n", [], dep)
    second = _make(store, "02" * 8, "b\n", [], dep)
    os.utime(Path(second.path, "entry.json"), ns=(1, 1))           # used long ago
    assert store.current("01" * 8) is not None                       # used just now
    third = _make(store, "03" * 8, "c\n", [], dep)
    assert store.holds(first.name) and store.holds(third.name) and not store.holds(second.name)
    assert not any(p.name.startswith(".tmp-") for p in (tmp_path / "store").iterdir())


def test_the_store_size_comes_from_its_variable_and_a_bad_one_is_refused_in_one_line(pto_tree, tmp_path, monkeypatch):
    dep = tmp_path / "dep.h"
    dep.write_text("h")
    monkeypatch.setenv("PYPTO_BUILD_PCH_SIZE", "2500")             # two entries of ~1 KB fit, not three
    store = PreludeStore(tmp_path / "store")
    made = [_make(store, f"0{i}" * 8, f"{i}\n", [], dep) for i in (1, 2, 3)]
    assert store.max_bytes == 2500 and [store.holds(e.name) for e in made] == [False, True, True]
    a = synth.write_l2(tmp_path / "a", kernels=2)
    bad = subprocess.run([sys.executable, "-m", "pypto_build", "build", str(a)], capture_output=True, text=True,
                         env={**os.environ, "PYPTO_BUILD_PCH_SIZE": "lots"})
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "PYPTO_BUILD_PCH_SIZE='lots'" in bad.stderr
    assert not (a / ".pypto_build").exists()


@builds
def test_cache_stats_and_clean_cover_the_preludes_with_or_without_an_artefact_cache(pto_tree, tmp_path):
    a = synth.write_l2(tmp_path / "a", kernels=KERNELS)
    build(a)
    store = Path(os.environ["XDG_CACHE_HOME"]) / "pypto_build" / "preludes"
    gch = sorted(store.glob("*/prelude.h.gch"))
    assert len(gch) == 2

    def cache(*args: str) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k != "PYPTO_BUILD_CACHE"}
        out = subprocess.run([sys.executable, "-m", "pypto_build", "cache", *args], capture_output=True, text=True,
                             env=env)
        assert out.returncode == 0, out.stderr
        return out

    stats = cache("stats").stdout
    assert "no artefact cache configured" in stats
    assert f"precompiled preludes {store}: 2 (" in stats and "limit 2.0 GiB" in stats, stats
    assert "removed" in cache("clean").stdout
    assert not any(p.exists() for p in gch) and not list(store.glob("*.json"))
    assert f"precompiled preludes {store}: 0 (0 B)" in cache("stats").stdout
    kernel = sorted((a / "kernels" / "aiv").glob("*.cpp"))[0]
    edit(kernel)
    again = build(a)                                  # the edited kernel's prelude is built again, and used
    ran = [t for t in again.names("ran") if t.startswith("prelude:")]
    assert len(ran) == 1 and ran[0].startswith("prelude:aiv.") and len(list(store.glob("*/prelude.h.gch"))) == 1
    assert f"(last compiled with {ran[0]})" in how(a)[f"compile:aiv/{kernel.stem}"]
    # with an artefact cache, its store is beside it
    beside = tmp_path / "cache"
    build(synth.write_l2(tmp_path / "b", kernels=KERNELS), cache_dir=beside)
    stats = cache("stats", "--cache-dir", str(beside)).stdout
    assert f"cache {beside}: " in stats and f"precompiled preludes {beside / 'preludes'}: 2 (" in stats, stats
