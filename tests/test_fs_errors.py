"""A read-only build directory, a full disk and 255-byte file names (issue 11, item 13).

Real filesystems: a read-only bind mount of a build directory (root ignores
permission bits, so chmod would prove nothing) and a small tmpfs filled up
before or while building. Both need `mount`; each test skips with the reason
where mounting is not permitted. The contract: one line naming the problem
and its fix, no traceback, nothing torn or lost, and the next run (with
space, or writable) completes exactly as a clean build does.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import FAKE_PTOAS, age_tree, copy_dir, edit, settle_ctimes
from pypto_build.run import KEPT_VERDICT
from pypto_build.core import atomic
from pypto_build.testing import synth
from pypto_build.api import build
from pypto_build.platforms.host.places import HOST_STAMP, host_binary

pytestmark = pytest.mark.slow

STAMP = HOST_STAMP
NOOP = ".pypto_build/noop.marshal"
K1_UNIT = "main_incore_1_aiv"
K1 = f"kernels/aiv/{K1_UNIT}.cpp"


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["pypto-build", *args], capture_output=True, text=True, errors="replace", timeout=180,
                          env={**os.environ, **(env or {})})


def one_line(out: subprocess.CompletedProcess) -> str:
    """The single stderr line of a failed run (and no traceback anywhere)."""
    assert "Traceback" not in out.stdout + out.stderr, out.stdout + out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr:\n{out.stderr}"
    assert lines[0].startswith("pypto-build: "), lines[0]
    return lines[0]


@contextlib.contextmanager
def mounted(target: Path, *commands: list[str]):
    """Run the mount `commands` (the first creates the mount at `target`); skip when not permitted."""
    target.mkdir(parents=True, exist_ok=True)
    for i, command in enumerate(commands):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            if i:
                subprocess.run(["umount", "-l", str(target)], capture_output=True)
            pytest.skip(f"cannot mount here ({' '.join(command[:3])}: {done.stderr.strip() or done.returncode})")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


def read_only_view(src: Path, view: Path):
    """`view`: `src` bind-mounted read-only (a read-only filesystem, as root sees it too)."""
    return mounted(view, ["mount", "--bind", str(src), str(view)],
                   ["mount", "-o", "remount,bind,ro", str(view)])


def small_disk(where: Path, size: str = "1m"):
    return mounted(where, ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)])


def fill(disk: Path, leave: int = 0) -> Path:
    """Fill `disk` up, then give back `leave` bytes; returns the filler file (remove it to free the space)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    os.truncate(filler, max(0, os.stat(filler).st_size - leave))
    return filler


def digests(root: Path, pattern: str) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob(pattern)) if p.is_file()}


def temps(root: Path) -> list[str]:
    return [p.name for p in root.rglob("*") if ".tmp" in p.name]


def tree(root: Path) -> dict[str, str]:
    """Every file (and link) under `root`, state folder included, by content."""
    return {p.relative_to(root).as_posix(): ("->" + os.readlink(p) if p.is_symlink() else
                                             hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir")
            for p in sorted(root.rglob("*"))}


@pytest.fixture(scope="module")
def unbuilt(tmp_path_factory) -> Path:
    return synth.write_l2(tmp_path_factory.mktemp("fs") / "d", kernels=3, golden=True, pto=True)


@pytest.fixture(scope="module")
def reference(unbuilt, tmp_path_factory) -> Path:
    """A clean build of `unbuilt`, aged past the racy window and built again (no-op record written)."""
    root = copy_dir(unbuilt, tmp_path_factory.mktemp("fs-ref") / "d")
    build(root)
    age_tree(root)
    build(root)
    assert (root / NOOP).is_file()
    return root


# ---------------------------------------------------------------------------
# read-only build directory
# ---------------------------------------------------------------------------


def test_read_only_dir_explain_and_dry_run_work_build_and_replay_refuse(reference, tmp_path):
    src = copy_dir(reference, tmp_path / "src")
    edit(src / K1)                                  # something to do, so no command is a no-op
    before = tree(src)
    with read_only_view(src, tmp_path / "view") as view:
        for args in (["explain", str(view)], ["build", "--dry-run", str(view)]):
            out = cli(*args)
            assert out.returncode == 0, out.stderr
            assert f"compile:aiv/main_incore_1_aiv: changed: {K1}" in out.stdout
            assert "pypto-build: 1 would compile, 3 up to date, also 1 stamp" in out.stdout
        for verb in ("build", "replay", "validate"):
            line = one_line(out := cli(verb, str(view)))
            assert out.returncode == 2
            assert line == refusal(view, "is on a read-only filesystem", f"compile:aiv/{K1_UNIT} needs to run "
                                   f"(changed: {K1})")
    assert tree(src) == before


def test_read_only_dir_is_forced_as_a_build_forces_it(reference, tmp_path):
    """Issue 34 item 6: `--recompile` and an `invalidate_binary_cache()` mark are applied to a read-only
    directory by the build's own forcing (`forcing.force_rebuilds`, in memory): explain says every unit is
    forced, and a build is refused naming the unit it would force and why (before: a refusal naming none);
    the mark stays."""
    from pypto_build.plan import invalidation
    src = copy_dir(reference, tmp_path / "src")
    with read_only_view(src, tmp_path / "view") as view:
        out = cli("explain", "--recompile", str(view))
        assert out.returncode == 0 and "pypto-build: 4 would compile, 0 up to date" in out.stdout, out.stdout
        line = one_line(out := cli("build", "--recompile", str(view)))
        assert out.returncode == 2 and line.startswith(refusal(view, "is on a read-only filesystem", "")[:60])
        assert "needs to run (forced by --recompile)" in line, line
    invalidation.mark(src)
    before = tree(src)
    with read_only_view(src, tmp_path / "view2") as view:
        assert f"compile:aiv/{K1_UNIT}: forced by invalidate_binary_cache()" in cli("explain", str(view)).stdout
        line = one_line(out := cli("build", str(view)))
        assert out.returncode == 2 and "needs to run (forced by invalidate_binary_cache())" in line, line
    assert tree(src) == before


def refusal(view: Path, what: str, needs: str) -> str:
    """The one line of a run that must write into a directory it cannot write."""
    return (f"pypto-build: error: {view}: {what}, and {needs}; a build writes binaries and its state there — copy "
            f"it somewhere writable (cp -a {view} NEWDIR) and build there, or use explain / build --dry-run, which "
            "write nothing")


@contextlib.contextmanager
def unwritable(src: Path, way: str, where: Path):
    """`src` as a directory this process cannot write: chmod'ed read-only (not for root, whom permission bits
    do not stop) or bind-mounted read-only (needs mount); yields it and what its refusal line says."""
    if way == "chmod":
        if os.geteuid() == 0:
            pytest.skip("root writes through permission bits: chmod proves nothing (the read-only mount case runs)")
        subprocess.run(["chmod", "-R", "a-w", str(src)], check=True)
        try:
            yield src, f"is not writable by you (Permission denied: {src}/.pypto_build/lock)"
        finally:
            subprocess.run(["chmod", "-R", "u+w", str(src)], check=True)
    else:
        with read_only_view(src, where) as view:
            yield view, "is on a read-only filesystem"


@pytest.mark.parametrize("way", ["chmod", "read-only mount"])
def test_unwritable_dir_answers_an_up_to_date_validate_read_only(reference, tmp_path, way):
    """Issue 22 item 8: a directory you cannot write still answers a cached validate (the verdict, exit 0) and an
    up-to-date build without the no-op record, writing nothing; with work to do, one line says what would run."""
    src = copy_dir(reference, tmp_path / "src")
    assert cli("validate", str(src)).returncode == 0                 # the verdict, recorded
    (src / NOOP).unlink(missing_ok=True)             # a build decided from the state, not by the no-op record
    before = tree(src)
    with unwritable(src, way, tmp_path / "view") as (view, what):
        out = cli("validate", str(view))
        assert out.returncode == 0 and out.stderr == "", out.stderr
        assert f"validate:.  Golden validation: PASSED {KEPT_VERDICT}" in out.stdout
        assert out.stdout.splitlines()[-1] == "pypto-build: 0 compiled, 4 up to date"
        out = cli("build", str(view))
        assert out.returncode == 0 and out.stdout.splitlines()[-1] == "pypto-build: 0 compiled, 4 up to date"
        line = one_line(out := cli("replay", "--validate", str(view)))     # a fresh verdict: it must run
        assert out.returncode == 2
        assert line == refusal(view, what, "validate:. needs to run (replay --validate makes a fresh verdict)")
    assert tree(src) == before
    edit(src / K1)
    before = tree(src)
    with unwritable(src, way, tmp_path / "view2") as (view, what):
        line = one_line(out := cli("validate", str(view)))
        assert out.returncode == 2
        assert line == refusal(view, what, f"compile:aiv/{K1_UNIT} needs to run (changed: {K1})")
    assert tree(src) == before


def test_read_only_dir_never_built_and_up_to_date(unbuilt, reference, tmp_path):
    """explain on a never-built one creates nothing; an up-to-date one builds (the no-op record answers)."""
    with read_only_view(unbuilt, tmp_path / "fresh") as view:
        out = cli("explain", str(view))
        assert out.returncode == 0 and "compile:aic/main_incore_0_aic: never built" in out.stdout, out.stderr
    src = copy_dir(reference, tmp_path / "built")
    settle_ctimes()                 # files changed within the racy window are never put in the record
    build(src)                      # new inodes: the record is written again (it is per inode)
    with read_only_view(src, tmp_path / "built-view") as view:
        out = cli("build", str(view))
        assert out.returncode == 0 and "pypto-build: 0 compiled, 4 up to date" in out.stdout, out.stderr


# ---------------------------------------------------------------------------
# full disk
# ---------------------------------------------------------------------------


def test_full_disk_before_and_while_building(tmp_path):
    """Out of space at several points of a build: one line with the fix, nothing torn, then a clean finish."""
    unbuilt = synth.write_l2(tmp_path / "small", kernels=2)
    reference = copy_dir(unbuilt, tmp_path / "reference")
    build(reference)
    binaries, stamp = digests(reference, "*.so"), (reference / STAMP).read_bytes()
    need = sum((reference / rel).stat().st_size for rel in binaries) + 65536      # binaries + state, roughly
    codes = set()
    for leave in (0, need // 3, need * 2 // 3):
        with small_disk(tmp_path / f"disk{leave}") as disk:
            root = copy_dir(unbuilt, disk / "d")
            filler = fill(disk, leave)
            out = cli("build", str(root))
            codes.add(out.returncode)
            assert out.returncode in (1, 2), (leave, out.stdout, out.stderr)
            line = one_line(out)
            assert "no space left on device" in line and "free space" in line, line
            present = digests(root, "*.so")
            assert present == {k: binaries[k] for k in present}, "a binary was torn"
            assert temps(root) == []
            filler.unlink()
            assert build(root).ok
            assert digests(root, "*.so") == binaries and (root / STAMP).read_bytes() == stamp
            assert build(root).compiled == []
    assert codes == {1, 2}, "expected both a failed unit (exit 1) and a failed run (exit 2)"


def test_full_disk_no_op_build_still_succeeds(reference, tmp_path):
    """Everything current, but the state refresh and the no-op record cannot be written: a warning, exit 0."""
    with small_disk(tmp_path / "disk") as disk:
        root = copy_dir(reference, disk / "d")
        (root / NOOP).unlink()
        settle_ctimes()     # the copy's files are new: a record taken within the racy window is not even tried
        filler = fill(disk)
        out = cli("build", str(root))
        assert out.returncode == 0, out.stderr
        assert out.stderr.strip() == (f"pypto-build: warning: {root}/.pypto_build/noop.marshal: could not be "
                                      "written: no space left on device; free space and rebuild (the build is "
                                      "complete; until then every build decides by content)")
        filler.unlink()
        assert cli("build", str(root)).returncode == 0
        result = build(root)
        assert {u.reason for u in result.units} == {"no-op record"}


def test_full_disk_splice_then_stamp(reference, tmp_path):
    """A splice, then the stamp, cannot be written: the unit fails in one line; kernel files stay whole."""
    with small_disk(tmp_path / "disk") as disk:
        root = copy_dir(reference, disk / "d")
        raw = root / "ptoas/main_group.cpp"
        raw.write_text(raw.read_text().replace("* 2.0f;", "* 2.0f + 0.0f;"))     # hand edit: re-splice
        kernels = digests(root, "kernels/*/*.cpp")
        (root / NOOP).unlink()          # else removing it at the start of the run frees a page
        filler = fill(disk)
        out = cli("build", str(root))
        assert out.returncode == 1
        line = one_line(out)
        assert line.startswith("pypto-build: FAILED splice:main_group: kernels/"), line
        assert line.endswith(": no space left on device; free space and rebuild"), line
        assert digests(root, "kernels/*/*.cpp") == kernels and temps(root) == []
        filler.unlink()
        out = cli("build", str(root))
        assert out.returncode == 0, out.stderr
        assert "+ 0.0f" in (root / K1).read_text()
        stamp = (root / STAMP).read_bytes()
        (root / STAMP).unlink()
        (root / NOOP).unlink(missing_ok=True)
        filler = fill(disk)
        out = cli("build", str(root))
        assert out.returncode == 1
        assert one_line(out) == (f"pypto-build: FAILED stamp:.: {STAMP}: no space left on device; "
                                 "free space and rebuild")
        assert not (root / STAMP).exists() and temps(root) == []
        filler.unlink()
        assert cli("build", str(root)).returncode == 0 and (root / STAMP).read_bytes() == stamp


# ---------------------------------------------------------------------------
# file names of 255 bytes (the longest a name can be): our temp and backup names must still fit
# ---------------------------------------------------------------------------


def test_255_byte_names_build_splice_and_back_up(tmp_path, monkeypatch):
    orch = "o" * (255 - len("_incore_2_aic.cpp"))
    root = synth.write_l2(tmp_path / "d", kernels=3, orch_name=orch, pto=True)
    kernel = root / "kernels/aic" / f"{orch}_incore_2_aic.cpp"
    assert len(kernel.name) == 255 and len(synth.pto_path(root, f"{orch}_incore_2_aic").name) == 255
    assert len(build(root).compiled) == 4
    records = list((root / ".pypto_build/splice").iterdir())
    assert records and max(len(p.name) for p in records) <= 255
    ptoas_root = tmp_path / "ptoas-root"
    ptoas_root.mkdir()
    shutil.copy(FAKE_PTOAS, ptoas_root / "ptoas")
    monkeypatch.setenv("PTOAS_ROOT", str(ptoas_root))
    kernel.write_text(kernel.read_text().replace("out[i] * 0.5f", "out[i] * 0.25f", 1))     # hand-edited body
    pto = synth.pto_path(root, f"{orch}_incore_2_aic")
    pto.write_text(pto.read_text().replace("synth_scale(a[i], 3.0f)", "synth_scale(a[i], 9.0f)"))
    binary = root / host_binary(kernel.relative_to(root).as_posix())
    assert binary.is_file() and len(binary.name) == 254
    stale = binary.parent / f"{atomic.temp_prefix(binary)}0123abcd.tmp"
    stale.write_bytes(b"left by a killed compile")
    result = build(root)
    assert result.compiled == [f"compile:aic/{orch}_incore_2_aic"], result.failures
    assert "synth_scale(a[i], 9.0f)" in kernel.read_text()
    backups = [p for p in (root / ".pypto_build/backup").rglob("*") if p.is_file()]
    assert len(backups) == 1 and "out[i] * 0.25f" in backups[0].read_text() and len(backups[0].name) <= 255
    assert not stale.exists() and temps(root) == []


def test_temp_names_fit_and_each_writer_sweeps_only_its_own(tmp_path):
    """`.<name>.XXXXXXXX.tmp` per target: glob characters and look-alike names never match another's."""
    names = ["k[1].so", "k1.so", "a.so", "a.so.abcdefgh", "x" * 255, "x" * 254 + "y"]
    for name in names:
        (tmp_path / name).write_bytes(b"target")
    made = {name: [atomic.temp_path_for(tmp_path / name, suffix) for suffix in atomic.SUFFIXES] for name in names}
    assert all(len(p.name) <= 255 for paths in made.values() for p in paths)
    (tmp_path / ".a.so.q1w2e3r4.tmp").write_bytes(b"an older run's tempfile.mkstemp name")
    for i, name in enumerate(names):
        assert atomic.remove_stale_temps(tmp_path / name) == len(made[name]) + (name == "a.so"), name
        assert all(not p.exists() for p in made[name])
        assert all(p.exists() for later in names[i + 1:] for p in made[later]), name
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)
    atomic.write_text(tmp_path / ("z" * 255), "fits")
    assert (tmp_path / ("z" * 255)).read_text() == "fits" and temps(tmp_path) == []
