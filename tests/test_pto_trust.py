"""No `.pto` edit is lost and "up to date" is never a guess (issue 11, items 1, 2 and 6).

First sight of a directory is decided from content: ptoas (the labelled stand-in
`pypto_build/testing/fake_ptoas.py`) is run once and compared with the raw output; without ptoas
the directory is taken as found. A failure keeps what the next run needs; an edit that
cannot be applied fails the run unless `--allow-unapplied-pto` accepts it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from conftest import FAKE_PTOAS
from pypto_build.testing import synth
from pypto_build.testing.fake_ptoas import make_fake_ptoas
from pypto_build.api import build
from test_stage_pto import K2, OLD_LINE, ptoas_runs

SENTINEL = "// --- Kernel entry point ---"


@pytest.fixture
def d(tmp_path) -> Path:
    root = synth.write_l2(tmp_path / "d", kernels=3, pto=True)
    build(root)                          # ptoas (if any) checks each unit once; nothing is rewritten
    return root


def edit_pto(root: Path, value: str) -> None:
    pto = synth.pto_path(root, "main_incore_2_aic")
    pto.write_text(pto.read_text().replace(OLD_LINE, f"synth_scale(a[i], {value})"))


def pypto_build(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["pypto-build", *args], capture_output=True, text=True, timeout=300)


def test_a_failed_splice_never_drops_the_pto_edit(d, ptoas_env):
    """The issue's case: sentinel removed, .pto edited, splice refused; sentinel restored -> the edit lands."""
    kernel = d / K2
    pristine = kernel.read_text()
    kernel.write_text(pristine.replace(SENTINEL, "// entry"))
    os.utime(kernel, (1, 1))                                   # mtimes must not matter either way
    edit_pto(d, "5.0f")
    first = build(d, check=False)
    assert first.names("failed") == ["splice:main_incore_2_aic"]
    assert kernel.read_text() == pristine.replace(SENTINEL, "// entry")     # untouched
    kernel.write_text(pristine)                                # the user restores the sentinel
    explained = pypto_build("explain", str(d)).stdout
    assert "splice:main_incore_2_aic: ptoas/main_incore_2_aic.cpp changed" in explained
    second = build(d)
    assert second.spliced == (K2,) and second.compiled == ["compile:aic/main_incore_2_aic"]
    assert "synth_scale(a[i], 5.0f)" in kernel.read_text()
    assert build(d).compiled == []


def test_after_a_failure_the_reason_is_the_real_one(d, ptoas_env):
    k1 = synth.kernel_path(d, 1)
    good = k1.read_text()
    k1.write_text(good + "\nthis is not C++;\n")
    assert build(d, check=False).names("failed") == ["compile:aiv/main_incore_1_aiv"]
    reasons = {u.task: u.reason for u in build(d, check=False).units}       # state of the last good build kept
    assert reasons["compile:aiv/main_incore_1_aiv"] == "changed: kernels/aiv/main_incore_1_aiv.cpp"
    k1.write_text(good)                                        # back to the content last built
    result = build(d)
    assert {u.task: u.reason for u in result.units}["compile:aiv/main_incore_1_aiv"] == "its last run failed"
    assert result.compiled == ["compile:aiv/main_incore_1_aiv"] and build(d).compiled == []


def test_first_sight_of_an_edited_pto_applies_it_whatever_the_mtimes(tmp_path, ptoas_env):
    root = synth.write_l2(tmp_path / "fresh", kernels=3, pto=True)
    edit_pto(root, "6.0f")
    raw = root / "ptoas/main_incore_2_aic.cpp"
    old_raw = raw.read_text()
    for p in root.rglob("*"):
        os.utime(p, (10**9, 10**9))                            # the .pto is NOT newer than its raw output
    result = build(root)
    assert result.spliced == (K2,) and "synth_scale(a[i], 6.0f)" in (root / K2).read_text()
    backups = [p for p in (root / ".pypto_build/backup").rglob("*") if p.is_file()]
    assert [p.read_text() for p in backups] == [old_raw]        # the raw output as found is kept


@pytest.mark.slow
@pytest.mark.parametrize("how", ["cp -r", "git clone", "copytree"])
def test_a_directory_never_seen_never_reports_unapplied_edits(tmp_path, monkeypatch, how):
    monkeypatch.setenv("PTOAS_ROOT", str(tmp_path / "no-ptoas"))        # no ptoas anywhere
    src = synth.write_l2(tmp_path / "src", kernels=3, pto=True)
    for p in src.rglob("*.pto"):
        os.utime(p, None)                                       # .pto files newer than their raw outputs
    dst = tmp_path / "dst"
    if how == "cp -r":
        subprocess.run(["cp", "-r", str(src), str(dst)], check=True)
    elif how == "copytree":
        shutil.copytree(src, dst, copy_function=shutil.copy)    # new mtimes, in copy order
    else:
        subprocess.run(["git", "init", "-q", str(src)], check=True)
        subprocess.run(["git", "-C", str(src), "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(src), "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "x"],
                       check=True)
        subprocess.run(["git", "clone", "-q", str(src), str(dst)], check=True)
    out = pypto_build("build", str(dst))
    assert out.returncode == 0, out.stderr
    assert "NOT applied" not in out.stdout + out.stderr and "[pto->cpp] no .pto changes detected" in out.stdout
    edit_pto(dst, "5.0f")                                      # a real edit afterwards is seen, by content
    out = pypto_build("build", str(dst))
    assert out.returncode == 1 and "ptoas/main_incore_2_aic.pto: edited, but ptoas not found" in out.stderr


@pytest.mark.slow
def test_unapplied_edits_fail_build_validate_and_ci_unless_allowed(tmp_path, monkeypatch):
    monkeypatch.setenv("PTOAS_ROOT", str(tmp_path / "no-ptoas"))
    root = synth.write_l2(tmp_path / "g", kernels=3, pto=True, golden=True)
    assert pypto_build("build", str(root)).returncode == 0
    edit_pto(root, "5.0f")
    for verb in (["build"], ["validate"], ["replay", "--validate"]):
        out = pypto_build(*verb, str(root))
        assert out.returncode == 1, (verb, out.stdout, out.stderr)
        assert "FAILED ptoas:main_incore_2_aic: ptoas/main_incore_2_aic.pto: edited, but ptoas not found " \
               f"under PTOAS_ROOT={tmp_path / 'no-ptoas'}" in out.stderr
        assert "--allow-unapplied-pto" in out.stderr and "PASSED" not in out.stdout
        assert "no .pto changes detected" not in out.stdout           # never both in one run
    report, junit = tmp_path / "r.json", tmp_path / "r.xml"
    out = pypto_build("ci", "-q", str(root), "--json", str(report), "--junit-xml", str(junit))
    assert out.returncode == 1
    entry = json.loads(report.read_text())["directories"][0]
    assert not entry["ok"] and entry["unapplied_pto"] == ["ptoas/main_incore_2_aic.pto"]
    assert "edited, but ptoas not found" in ET.parse(junit).getroot().find("testcase/failure").get("message")
    # accepted knowingly: success, but said, and listed in the reports
    out = pypto_build("validate", "--allow-unapplied-pto", str(root))
    assert out.returncode == 0 and "Golden validation: PASSED" in out.stdout
    assert "[pto->cpp] edits NOT applied (ptoas not found; accepted by --allow-unapplied-pto): " \
           "ptoas/main_incore_2_aic.pto" in out.stdout and "no .pto changes detected" not in out.stdout
    out = pypto_build("ci", "-q", "--allow-unapplied-pto", str(root), "--json", str(report), "--junit-xml", str(junit))
    assert out.returncode == 0
    assert json.loads(report.read_text())["directories"][0]["unapplied_pto"] == ["ptoas/main_incore_2_aic.pto"]
    assert ".pto edits NOT applied" in ET.parse(junit).getroot().find("testcase/system-out").text


@pytest.mark.slow
def test_the_stage_checks_by_content_with_ptoas_and_keeps_hand_edited_kernels(tmp_path, ptoas_env):
    root = synth.write_l2(tmp_path / "h", kernels=3, pto=True)
    k2 = root / K2
    k2.write_text(k2.read_text().replace("out[i] * 0.5f", "out[i] * 0.25f", 1))    # a hand edit of the body
    result = build(root)
    assert len(ptoas_runs(ptoas_env)) == 2 and result.spliced == ()
    assert "out[i] * 0.25f" in k2.read_text()                                 # kept: the .pto is unedited
    edit_pto(root, "9.0f")                                                    # now the .pto wins, with a backup
    assert build(root).spliced == (K2,)
    backups = [p for p in (root / ".pypto_build/backup").rglob("*.cpp.*") if p.is_file()]
    assert any("out[i] * 0.25f" in p.read_text() for p in backups)


@pytest.mark.slow
def test_a_reverted_pto_edit_builds_again_without_ptoas(tmp_path, monkeypatch):
    """Without ptoas an edit fails the build; put back as it was, the directory is up to date again
    (the failure wrote nothing) — it used to keep failing with "edited" until ptoas was installed."""
    monkeypatch.setenv("PTOAS_ROOT", str(tmp_path / "no-ptoas"))
    root = synth.write_l2(tmp_path / "g", kernels=3, pto=True)
    assert pypto_build("build", str(root)).returncode == 0
    pto = synth.pto_path(root, "main_incore_2_aic")
    original = pto.read_bytes()
    edit_pto(root, "5.0f")
    assert pypto_build("build", str(root)).returncode == 1
    pto.write_bytes(original)
    out = pypto_build("build", str(root))
    assert out.returncode == 0, out.stderr
    assert "0 compiled, 4 up to date" in out.stdout
    edit_pto(root, "6.0f")                                   # and a new edit is still seen
    out = pypto_build("build", str(root))
    assert out.returncode == 1 and "ptoas/main_incore_2_aic.pto: edited, but ptoas not found" in out.stderr


# --- a ptoas that cannot compile a .pto nobody edited (issue 22, items 2 and 3) ----------------------------------

REJECTION = "custom op 'pto.tload' is unknown"


@pytest.fixture
def old_ptoas(tmp_path, monkeypatch) -> Path:
    """PTOAS_ROOT holding a labelled stand-in for a ptoas that cannot compile these .pto files (`ptoas 0.50`);
    returns the log of its invocations."""
    make_fake_ptoas(tmp_path / "old-ptoas", version="0.50", reject=REJECTION)
    log = tmp_path / "old-ptoas.log"
    monkeypatch.setenv("PTOAS_ROOT", str(tmp_path / "old-ptoas"))
    monkeypatch.setenv("FAKE_PTOAS_LOG", str(log))
    return log


def sources(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and ".pypto_build" not in p.parts}


def assert_kept_line(line: str, pto: str, ptoas: Path) -> None:
    """The one warning for an unedited .pto ptoas cannot compile: the installed ptoas with its version, the file,
    that the kernels are built as they are, and how to skip the stage; never "fix the .pto"."""
    assert line.startswith(f"pypto-build: warning: {pto}: "), line
    assert "ptoas 0.50" in line and str(ptoas) in line and "cannot compile" in line and REJECTION in line, line
    assert "kernels as they are" in line and "PYPTO_REBUILD_FROM_PTO=0" in line, line
    assert "fix the .pto" not in line


def test_first_sight_of_a_pto_the_installed_ptoas_rejects_builds_the_kernels_as_they_are(tmp_path, old_ptoas):
    root = synth.write_l2(tmp_path / "fresh", kernels=3, pto=True)
    before = sources(root)
    out = pypto_build("build", str(root))
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 2, out.stderr                           # one line per unit, nothing else
    ptoas = tmp_path / "old-ptoas" / "ptoas"
    assert_kept_line(lines[0], "ptoas/main_group.pto", ptoas)
    assert_kept_line(lines[1], "ptoas/main_incore_2_aic.pto", ptoas)
    assert "FAILED" not in out.stdout + out.stderr and "4 compiled" in out.stdout
    assert sources(root) == before                                # the kernels (and raw outputs) as they were
    assert len(ptoas_runs(old_ptoas)) == 2
    again = pypto_build("build", str(root))                       # the same ptoas, the same .pto: nothing to do
    assert again.returncode == 0 and again.stderr == "" and "0 compiled" in again.stdout
    assert len(ptoas_runs(old_ptoas)) == 2


def test_an_edit_after_a_rejected_first_sight_still_fails_and_a_revert_builds_again(tmp_path, old_ptoas):
    root = synth.write_l2(tmp_path / "fresh", kernels=3, pto=True)
    assert pypto_build("build", str(root)).returncode == 0
    pto = synth.pto_path(root, "main_incore_2_aic")
    original = pto.read_bytes()
    edit_pto(root, "5.0f")
    kernel = (root / K2).read_bytes()
    out = pypto_build("build", str(root))
    assert out.returncode == 1                                    # an edited .pto that fails fails the build
    assert "FAILED ptoas:main_incore_2_aic: ptoas rebuild failed for ptoas/main_incore_2_aic.pto" in out.stderr
    assert (root / K2).read_bytes() == kernel
    pto.write_bytes(original)                                     # back as first seen: the kernels are the truth
    out = pypto_build("build", str(root))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "FAILED" not in out.stderr and "kernels as they are" in out.stderr


def test_a_later_edit_is_applied_by_a_ptoas_that_can_compile_it(tmp_path, old_ptoas, monkeypatch):
    root = synth.write_l2(tmp_path / "fresh", kernels=3, pto=True)
    assert pypto_build("build", str(root)).returncode == 0
    edit_pto(root, "7.0f")
    good = tmp_path / "good-ptoas"
    good.mkdir()
    shutil.copy(FAKE_PTOAS, good / "ptoas")
    monkeypatch.setenv("PTOAS_ROOT", str(good))
    result = build(root)
    assert result.spliced == (K2,) and "synth_scale(a[i], 7.0f)" in (root / K2).read_text()
    assert result.compiled == ["compile:aic/main_incore_2_aic"]


def test_an_upgraded_ptoas_that_rejects_an_unchanged_pto_warns_and_an_edit_still_fails(tmp_path, ptoas_env,
                                                                                       monkeypatch):
    root = synth.write_l2(tmp_path / "built", kernels=3, pto=True)
    build(root)                                                   # ptoas (the stand-in) checked both units
    monkeypatch.setenv("PTOAS_ROOT", str(make_fake_ptoas(tmp_path / "new-ptoas", version="0.50",
                                                         reject=REJECTION).parent))
    before = sources(root)
    result = build(root)
    assert result.ok and result.compiled == [] and sources(root) == before
    assert result.names("ran", "ptoas:") == ["ptoas:main_group", "ptoas:main_incore_2_aic"]
    assert [w for w in result.warnings if "cannot compile" in w and "ptoas 0.50" in w and REJECTION in w] \
        and len(result.pto_rejected) == 2
    edit_pto(root, "5.0f")
    failed = build(root, check=False)
    assert failed.names("failed") == ["ptoas:main_incore_2_aic"]
    assert "fix the .pto" in failed.failures[0].headline
