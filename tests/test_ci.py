"""`pypto-build ci`: many directories, failures do not stop the run, reports match what happened."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from conftest import FAKE_PTOAS
from pypto_build.testing import synth

pytest.importorskip("torch")

pytestmark = pytest.mark.slow


@pytest.fixture
def dirs(tmp_path) -> list[Path]:
    good = synth.write_l2(tmp_path / "good", kernels=2, golden=True)
    plain = synth.write_l2(tmp_path / "plain", kernels=2)
    wrong = synth.write_l2(tmp_path / "wrong", kernels=2, golden=True)
    k = synth.kernel_path(wrong, 1)
    k.write_text(k.read_text().replace("0.5f", "0.75f"))
    return [good, plain, wrong, tmp_path / "missing"]


def ci(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["pypto-build", "ci", "-q", *args], capture_output=True, text=True, timeout=300)


def test_ci_goes_on_past_failures_and_reports(dirs, tmp_path):
    junit, report = tmp_path / "j.xml", tmp_path / "r.json"
    out = ci(*map(str, dirs), "--junit-xml", str(junit), "--json", str(report))
    assert out.returncode == 1
    assert out.stdout.splitlines()[-1] == "pypto-build ci: 2 ok, 2 failed"
    suite = ET.parse(junit).getroot()
    assert suite.get("tests") == "4" and suite.get("failures") == "2"
    failed = {c.get("name"): c.find("failure") for c in suite.findall("testcase")}
    assert failed[str(dirs[0])] is None and failed[str(dirs[1])] is None
    assert "Output 'out' does not match golden" in failed[str(dirs[2])].get("message")
    assert "does not exist" in failed[str(dirs[3])].get("message")
    data = json.loads(report.read_text())
    by_path = {d["path"]: d for d in data["directories"]}
    good = by_path[str(dirs[0])]
    assert good["ok"] and good["kind"] == "validate"
    assert {u["task"]: u["status"] for u in good["units"]}["validate:."] == "ran"
    assert by_path[str(dirs[1])]["kind"] == "build" and not data["ok"]


def test_unchanged_directories_reuse_their_verdict(dirs, tmp_path):
    assert ci(str(dirs[0]), str(dirs[1])).returncode == 0
    report = tmp_path / "again.json"
    out = ci(str(dirs[0]), str(dirs[1]), "--json", str(report))
    assert out.returncode == 0 and "ok validate" in out.stdout and "(verdict reused)" in out.stdout
    data = json.loads(report.read_text())
    assert data["directories"][0]["cached_verdict"] is True
    assert all(u["status"] == "up-to-date" for d in data["directories"] for u in d["units"])


def test_ci_runs_directories_in_parallel_with_the_same_verdicts(dirs, tmp_path):
    report = tmp_path / "par.json"
    out = ci(*map(str, dirs), "-j", "2", "--json", str(report))
    assert out.returncode == 1 and out.stdout.splitlines()[-1] == "pypto-build ci: 2 ok, 2 failed"
    data = json.loads(report.read_text())
    assert [d["ok"] for d in data["directories"]] == [True, True, False, False]
    assert [d["path"] for d in data["directories"]] == [str(p) for p in dirs]


def test_ci_takes_the_options_its_messages_name(tmp_path):
    """An edited .pto without ptoas: ci's line says to pass --ptoas, and ci takes it, and --platform (issue 22,
    item 8: ci refused both)."""
    d = synth.write_l2(tmp_path / "d", kernels=2, golden=True, pto=True)
    assert ci(str(d)).returncode == 0            # first sight: the .pto is taken as found
    with open(d / "ptoas" / "main_group.pto", "a", encoding="utf-8") as handle:
        handle.write("// edited\n")
    refused = ci(str(d))
    assert refused.returncode == 1 and "or --ptoas" in refused.stderr, refused.stderr
    report = tmp_path / "r.json"
    out = subprocess.run(["pypto-build", "ci", "--ptoas", str(FAKE_PTOAS), "--platform", "host", "--json", str(report),
                          str(d)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "pypto-build: platform host (--platform;" in out.stdout
    units = {u["task"]: u["status"] for u in json.loads(report.read_text())["directories"][0]["units"]}
    assert units["ptoas:main_group"] == "ran" and units["validate:."] == "ran"


def test_an_ignored_validation_is_never_reported_ok(tmp_path):
    """issue 25 item 8: after `doit ignore validate:.` a wrong kernel is "not validated": exit 1, and the
    line, the JSON and the JUnit report say so."""
    wrong = synth.write_l2(tmp_path / "wrong", kernels=2, golden=True)
    ignored = subprocess.run(["pypto-build", "doit", "ignore", str(wrong), "validate:."], capture_output=True,
                             text=True, timeout=120)
    assert ignored.returncode == 0, ignored.stderr
    k = synth.kernel_path(wrong, 1)
    k.write_text(k.read_text().replace("0.5f", "0.75f"))
    junit, report = tmp_path / "j.xml", tmp_path / "r.json"
    out = ci(str(wrong), "--junit-xml", str(junit), "--json", str(report))
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stdout.splitlines()[-1] == "pypto-build ci: 0 ok, 0 failed, 1 not validated"
    assert f"pypto-build ci: NOT VALIDATED validate {wrong}: validate:.: ignored (doit ignore)" in out.stderr
    data = json.loads(report.read_text())
    d = data["directories"][0]
    assert not data["ok"] and not d["ok"] and d["not_validated"] is True and d["kind"] == "validate"
    assert {u["task"]: u["status"] for u in d["units"]}["validate:."] == "skipped"
    suite = ET.parse(junit).getroot()
    assert suite.get("failures") == "1"
    failure = suite.find("testcase/failure")
    assert failure.get("type") == "not validated"
    assert failure.get("message").startswith("not validated: validate:.: ignored (doit ignore)")


def test_a_directory_refused_as_bad_input_records_status_2(tmp_path):
    """issue 34 item 4: each directory records the status `pypto-build validate` gives it — 2 for one that is
    not a build directory (as `build notbuild` exits), 1 for a wrong result — in the JSON and the JUnit report,
    also from `-j 2`'s per-directory processes; ci itself exits 1 as any directory failed."""
    good = synth.write_l2(tmp_path / "good", kernels=1)
    wrong = synth.write_l2(tmp_path / "wrong", kernels=2, golden=True)
    k = synth.kernel_path(wrong, 1)
    k.write_text(k.read_text().replace("0.5f", "0.75f"))
    notbuild = tmp_path / "notbuild"
    notbuild.mkdir()
    (notbuild / "notes.txt").write_text("not a build directory\n")
    assert subprocess.run(["pypto-build", "build", str(notbuild)], capture_output=True, timeout=60).returncode == 2
    junit, report = tmp_path / "j.xml", tmp_path / "r.json"
    out = ci(str(good), str(wrong), str(notbuild), "-j", "2", "--junit-xml", str(junit), "--json", str(report))
    assert out.returncode == 1 and out.stdout.splitlines()[-1] == "pypto-build ci: 1 ok, 2 failed", out.stderr
    dirs = json.loads(report.read_text())["directories"]
    assert [(d["ok"], d["exit_status"]) for d in dirs] == [(True, 0), (False, 1), (False, 2)]
    cases = ET.parse(junit).getroot().findall("testcase")
    assert [c.find("failure") is None for c in cases] == [True, False, False]
    assert [c.find("failure").get("type") for c in cases[1:]] == ["failed", "bad input"]
