"""What `.pypto_build/` holds (issue 35 item 3): `history` and `cache stats` show it, part by part, with the
figures on disk — for the build root and each sub-build, links never followed, torch never imported."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pypto_build.builddir.state_usage import measure, usage
from pypto_build.cache import human_size
from pypto_build.testing import synth
from pypto_build.variants.history import History

MiB = 2**20


def run(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "PYPTO_BUILD_CACHE"}
    return subprocess.run(["pypto-build", *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**base, **(env or {})})


def put(path: Path, size: int) -> int:
    """A file of `size` bytes at `path` (folders made); its size."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x5a" * size)
    return size


def kept_state(root: Path) -> dict[str, int]:
    """A .pypto_build/ as a run leaves it, with files of known sizes; the bytes written per part."""
    state = root / ".pypto_build"
    index = json.dumps({"outputs": ["out"], "inputs_kept": False, "rtol": 1e-5}).encode()
    (state / "golden").mkdir(parents=True)
    (state / "golden" / "golden.json").write_bytes(index)
    golden = len(index) + put(state / "golden" / "golden.pt", 3 * MiB + 100)
    replay = put(state / "replay" / "out.pt", MiB)
    build = (put(state / "state" / "host" / "state.sqlite3", 40_000) + put(state / "digests.json", 1234)
             + put(state / "host" / "kernels" / "aiv" / "k.so", 9000) + put(state / "lock", 0))
    recorded = History(root)
    recorded.record("3f2a91c0de" * 4, "PASSED", [0.002], ["(first round)"])
    recorded.save()
    history = (state / "history.json").stat().st_size + put(state / "history.json.damaged", 77)
    other = put(state / "backup" / "kernels" / "aiv" / "k.cpp.20261205", 300)
    return {"golden": golden, "replay": replay, "build state": build, "history": history, "other": other}


def test_measure_counts_each_part_as_on_disk(tmp_path):
    root = synth.write_l2(tmp_path / "d", kernels=1)
    sizes = kept_state(root)
    u = measure(root)
    assert u.present and u.rel == "."
    assert {p.name: p.bytes for p in u.parts} == sizes
    assert {p.name: p.files for p in u.parts} == {"golden": 2, "replay": 1, "build state": 4, "history": 2,
                                                  "other": 1}
    assert u.total == sum(sizes.values())
    assert u.replay_tensors == 1 and u.golden.outputs == 1 and u.golden.inputs_kept is False


def test_history_and_cache_stats_show_what_the_state_holds(tmp_path):
    """`history DIR` ends with the state line; `cache stats DIR` and `cache stats` run inside the directory print
    today's lines, then the same state line: the sizes written, in the units `cache stats` uses."""
    root = synth.write_l2(tmp_path / "d", kernels=1)
    sizes = kept_state(root)
    line = (f"state    golden {human_size(sizes['golden'])} (1 expected output; inputs not stored) · "
            f"replay 1.0 MiB (1 output) · build state {human_size(sizes['build state'])} · "
            f"history {human_size(sizes['history'])} · other 300 B (1 file)")
    assert human_size(sizes["golden"]) == "3.0 MiB" and human_size(sizes["build state"]) == "49.1 KiB"
    shown = run("history", str(root))
    assert shown.returncode == 0, shown.stderr
    heading, variant, state = shown.stdout.splitlines()
    assert heading.startswith("variant ") and variant.startswith("3f2a91c0de ") and state == line
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    today = ["pypto-build: no artefact cache configured (--cache-dir DIR or PYPTO_BUILD_CACHE)",
             f"precompiled preludes {tmp_path}/xdg/pypto_build/preludes: 0 (0 B), limit 2.0 GiB"]
    for stats in (run("cache", "stats", str(root / "kernels"), env=env),
                  run("cache", "stats", cwd=root / "kernels", env=env)):
        assert stats.returncode == 0, stats.stderr
        assert stats.stdout.splitlines() == [*today, f"build directory {root}:", line]


def test_cache_stats_outside_a_build_directory_is_unchanged(tmp_path):
    """No DIR and a working directory in no build directory: exactly what `cache stats` printed before; a DIR that
    is no build directory, or a DIR given to `clean`: one line, exit 2, nothing removed."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    (tmp_path / "elsewhere").mkdir()
    stats = run("cache", "stats", cwd=tmp_path / "elsewhere", env=env)
    assert stats.returncode == 0, stats.stderr
    assert stats.stdout.splitlines() == [
        "pypto-build: no artefact cache configured (--cache-dir DIR or PYPTO_BUILD_CACHE)",
        f"precompiled preludes {tmp_path}/xdg/pypto_build/preludes: 0 (0 B), limit 2.0 GiB"]
    refused = run("cache", "stats", str(tmp_path / "elsewhere"), env=env)
    assert refused.returncode == 2 and refused.stdout == "" and "not a build_output directory" in refused.stderr
    assert len(refused.stderr.splitlines()) == 1
    prelude = put(tmp_path / "xdg" / "pypto_build" / "preludes" / "entry", 10)
    root = synth.write_l2(tmp_path / "d", kernels=1)
    clean = run("cache", "clean", str(root), env=env)
    assert clean.returncode == 2 and "cache clean takes no DIR" in clean.stderr and clean.stdout == ""
    assert (tmp_path / "xdg" / "pypto_build" / "preludes" / "entry").stat().st_size == prelude


def test_a_directory_without_state_says_nothing_is_kept(tmp_path):
    root = synth.write_l2(tmp_path / "d", kernels=1)
    shown = run("history", str(root))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[-1] == "state    nothing kept (.pypto_build/ is not there)"
    assert not (root / ".pypto_build").exists()                     # looking made nothing


def test_each_sub_build_of_a_multi_orch_directory_has_its_line(tmp_path):
    """The parent's own state, then each next_levels/<name>/ that has a .pypto_build/ (orch_b has none); a
    sub-build given as DIR is a build directory of its own."""
    root = synth.write_multi_orch(tmp_path / "m")
    put(root / ".pypto_build" / "state" / "host" / "state.sqlite3", 100)
    sub = root / "next_levels" / "orch_a"
    put(sub / ".pypto_build" / "golden" / "golden.pt", 2048)
    put(sub / ".pypto_build" / "replay" / "out.pt", 1024)
    put(sub / ".pypto_build" / "replay" / "extra.pt", 1024)
    a = ("state next_levels/orch_a    golden 2.0 KiB · replay 2.0 KiB (2 outputs) · build state 0 B · "
         "history none")
    shown = run("history", str(root))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[1:] == [
        "state    golden none · replay none · build state 100 B · history none", a]
    assert [u.rel for u in usage(root)] == [".", "next_levels/orch_a"]
    alone = run("history", str(sub))
    assert alone.stdout.splitlines()[1:] == [a.replace("state next_levels/orch_a", "state")]


def test_symbolic_links_are_counted_as_themselves_never_followed(tmp_path):
    """A link to a 5 MiB file in replay/ and a link to a folder of files count as links (their own few bytes),
    no tensor; a .pypto_build that is itself a link is not read."""
    root = synth.write_l2(tmp_path / "d", kernels=1)
    outside = tmp_path / "outside"
    put(outside / "big.pt", 5 * MiB)
    put(outside / "folder" / "inner.bin", MiB)
    state = root / ".pypto_build"
    put(state / "replay" / "out.pt", 1000)
    (state / "replay" / "big.pt").symlink_to(outside / "big.pt")
    (state / "state").mkdir()
    (state / "state" / "elsewhere").symlink_to(outside / "folder", target_is_directory=True)
    links = len(os.fsencode(outside / "big.pt")), len(os.fsencode(outside / "folder"))
    u = measure(root)
    assert (u.part("replay").bytes, u.part("replay").files, u.replay_tensors) == (1000 + links[0], 2, 1)
    assert (u.part("build state").bytes, u.part("build state").files) == (links[1], 1)
    shown = run("history", str(root))
    assert shown.stdout.splitlines()[-1] == (f"state    golden none · replay {human_size(1000 + links[0])} (1 output) "
                                             f"· build state {links[1]} B · history none")
    moved = tmp_path / "state-elsewhere"
    os.rename(state, moved)
    state.symlink_to(moved, target_is_directory=True)
    assert not measure(root).present
    linked = run("history", str(root))
    assert linked.stdout.splitlines()[-1] == "state    nothing kept (.pypto_build/ is not a folder; not read)"


def test_measuring_imports_no_torch(tmp_path):
    """`history` (and so the state it shows) runs without torch: the figures come from names and sizes."""
    root = synth.write_l2(tmp_path / "d", kernels=1)
    kept_state(root)
    code = ("import sys; from pypto_build.cli.main import main; assert main(['history', sys.argv[1]]) == 0; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "False"
