"""`pypto-build ci --bisect`: a directory whose validation FAILED names its culprits in its JSON and JUnit entries
(real builds, real runs, real processes); the reports and ci-report carry them; ci's exit status is unchanged."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from pypto_build.ci import bisects
from pypto_build.errors import UserError
from pypto_build.testing import synth

pytest.importorskip("torch")

KERNELS = 3
CULPRIT = "compile:aiv/main_incore_1_aiv"
SOURCE = "kernels/aiv/main_incore_1_aiv.cpp"


def pb(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pypto_build", *args], capture_output=True, text=True, timeout=600,
                          cwd=cwd, env=env)


def breaks(root: Path, func_id: int = 1) -> None:
    """Change the numbers kernel `func_id` computes (its coefficient)."""
    path = synth.kernel_path(root, func_id)
    text = path.read_text()
    assert text.count(f"{func_id + 1}.0f") == 1
    path.write_text(text.replace(f"{func_id + 1}.0f", f"{func_id + 1}.5f"))


def junit_failures(path: Path) -> dict:
    return {c.get("name"): c.find("failure") for c in ET.parse(path).getroot().iter("testcase")}


@pytest.fixture
def env(tmp_path, monkeypatch) -> dict:
    """The user's cache folder (the kept variants live there) for this test's processes."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))
    return {**os.environ}


@pytest.fixture
def three(tmp_path, env) -> list[Path]:
    """Three directories validated PASSED (recorded); then `broken`'s kernel 1 computes other numbers and `cannot`'s
    kernel does not compile; `fine` is untouched."""
    roots = [synth.write_l2(tmp_path / "cur" / name, kernels=KERNELS, golden=True)
             for name in ("broken", "fine", "cannot")]
    out = pb("ci", "-q", *map(str, roots), env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    breaks(roots[0])
    k = synth.kernel_path(roots[2], 0)
    k.write_text(k.read_text() + "\nthis is not C++;\n")
    return roots


@pytest.mark.slow
def test_a_failing_directory_names_its_culprit_and_the_others_are_not_bisected(three, env, tmp_path):
    """Each directory in its own process (-j 2): the bisect runs there and comes back in its result."""
    broken, fine, cannot = map(str, three)
    plain = pb("ci", "-q", broken, fine, cannot, env=env)
    out = pb("ci", "-q", "-j", "2", broken, fine, cannot, "--bisect", "--json", "r.json",
             "--junit-xml", "j.xml", cwd=tmp_path, env=env)          # the host's dump has payloads: the trace
    assert out.returncode == plain.returncode == 1, out.stdout + out.stderr      # bisect changes no exit status
    assert out.stdout.splitlines()[-1] == plain.stdout.splitlines()[-1] == "pypto-build ci: 1 ok, 2 failed"
    assert f"pypto-build ci: {broken}: bisect: culprit {CULPRIT} ({SOURCE})" in out.stderr
    entries = {d["path"]: d for d in json.loads((tmp_path / "r.json").read_text())["directories"]}
    found = entries[broken]["bisect"]
    assert [(c["unit"], c["source"]) for c in found["culprits"]] == [(CULPRIT, SOURCE)]
    assert found["outcome"] == "culprits" and found["method"] == "trace" and found["good_dir"] is None
    assert found["first_divergence"]["kernel"] == CULPRIT.rpartition("/")[2]
    assert found["good"].startswith("variant ") and "(PASSED)" in found["good"]
    assert any("2.5f" in line and line.startswith("+") for line in found["culprits"][0]["diff"])
    assert entries[fine]["bisect"] is None and entries[fine]["ok"]
    assert entries[cannot]["bisect"] is None and not entries[cannot]["ok"]      # a unit failed: no verdict
    failures = junit_failures(tmp_path / "j.xml")
    assert failures[fine] is None
    assert f"bisect: culprit {CULPRIT} ({SOURCE})" in failures[broken].get("message")
    assert "does not match golden" in failures[broken].get("message")
    assert f"bisect: culprit {CULPRIT} ({SOURCE})" in failures[broken].text
    assert "first divergent task" in failures[broken].text
    assert "bisect" not in failures[cannot].get("message") and "bisect" not in failures[cannot].text


@pytest.mark.slow
def test_good_dir_gives_each_directory_its_good_copy_and_a_missing_copy_falls_back_to_the_history(env, tmp_path):
    """Neither directory has a PASSED variant: prev/a is a's good copy (built before the edit); b has none."""
    a = synth.write_l2(tmp_path / "cur" / "a", kernels=KERNELS, golden=True)
    b = synth.write_l2(tmp_path / "cur" / "b", kernels=KERNELS, golden=True)
    shutil.copytree(a, tmp_path / "prev" / "a", symlinks=True)
    assert pb("build", str(tmp_path / "prev" / "a"), env=env).returncode == 0
    breaks(a)
    breaks(b)
    plain = pb("ci", "-q", str(a), str(b), env=env)
    out = pb("ci", "-q", str(a), str(b), "--bisect", "--bisect-method", "mix", "--good-dir", "prev",
             "--json", "r.json", "--junit-xml", "j.xml", cwd=tmp_path, env=env)
    assert out.returncode == plain.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    entries = {d["path"]: d for d in json.loads((tmp_path / "r.json").read_text())["directories"]}
    found = entries[str(a)]["bisect"]
    assert found["good_dir"] == str(tmp_path / "prev" / "a") and found["good"].endswith(str(tmp_path / "prev" / "a"))
    assert [(c["unit"], c["source"]) for c in found["culprits"]] == [(CULPRIT, SOURCE)]
    none = entries[str(b)]["bisect"]
    assert none["notes"] == [f"no good copy at {tmp_path / 'prev' / 'b'}: compared with the newest PASSED variant "
                             "in the history"]
    assert "no PASSED variant recorded" in none["error"] and "\n" not in none["error"]
    assert f"{b}: bisect could not run: " in out.stderr and "no PASSED variant recorded" in out.stderr
    failures = junit_failures(tmp_path / "j.xml")
    assert f"culprit {CULPRIT} ({SOURCE})" in failures[str(a)].get("message")
    assert "bisect could not run" in failures[str(b)].get("message")
    assert f"no good copy at {tmp_path / 'prev' / 'b'}" in failures[str(b)].text


@pytest.mark.slow
def test_shards_carry_bisect_and_ci_report_keeps_it(env, tmp_path):
    roots = [synth.write_l2(tmp_path / name, kernels=KERNELS, golden=True) for name in ("x", "y")]
    assert pb("ci", "-q", "x", "y", cwd=tmp_path, env=env).returncode == 0
    breaks(roots[0])
    for k in (1, 2):
        out = pb("ci", "-q", "--shard", f"{k}/2", "x", "y", "--bisect", "--bisect-method", "mix",
                 "--json", f"s{k}.json", cwd=tmp_path, env=env)
        assert "Traceback" not in out.stderr
    merged = pb("ci-report", "s1.json", "s2.json", "--json", "m.json", "--junit-xml", "m.xml", cwd=tmp_path, env=env)
    assert merged.returncode == 1, merged.stdout + merged.stderr
    assert f"bisect: culprit {CULPRIT} ({SOURCE})" in merged.stderr
    entries = {d["key"]: d for d in json.loads((tmp_path / "m.json").read_text())["directories"]}
    assert [c["unit"] for c in entries["x"]["bisect"]["culprits"]] == [CULPRIT]
    assert entries["y"]["bisect"] is None
    failures = junit_failures(tmp_path / "m.xml")
    assert f"culprit {CULPRIT} ({SOURCE})" in failures[str(roots[0])].get("message")


def test_a_report_whose_bisect_is_not_an_object_is_refused_and_one_that_is_is_carried(tmp_path):
    out = pb("ci", "-q", "--bisect", "--shard", "1/1", "gone", "--json", "s.json", cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    data = json.loads((tmp_path / "s.json").read_text())
    assert data["directories"][0]["bisect"] is None         # bad input is not bisected
    (tmp_path / "odd.json").write_text(json.dumps({**data, "directories": [{**data["directories"][0],
                                                                           "bisect": "culprit"}]}))
    refused = pb("ci-report", "odd.json", cwd=tmp_path)
    assert refused.returncode == 2 and "odd.json: directory #1 mistypes bisect" in refused.stderr
    found = {"culprits": [{"unit": CULPRIT, "source": SOURCE}], "outcome": "culprits",
             "first_divergence": {"index": 4, "func_id": 1, "kernel": "main_incore_1_aiv", "max_abs": 0.5}}
    (tmp_path / "ok.json").write_text(json.dumps({**data, "directories": [{**data["directories"][0],
                                                                          "bisect": found}]}))
    merged = pb("ci-report", "ok.json", "--json", "m.json", "--junit-xml", "m.xml", cwd=tmp_path)
    assert merged.returncode == 1, merged.stderr
    assert json.loads((tmp_path / "m.json").read_text())["directories"][0]["bisect"] == found
    failure = ET.parse(tmp_path / "m.xml").getroot().find(".//failure")
    assert f"culprit {CULPRIT} ({SOURCE})" in failure.get("message")
    assert "first divergent task: index=4, func_id=1, kernel=main_incore_1_aiv, max_abs=0.5" in failure.text


def test_without_bisect_the_report_is_as_before(tmp_path):
    out = pb("ci", "-q", "gone", "--json", "s.json", cwd=tmp_path)
    assert out.returncode == 1
    assert "bisect" not in json.loads((tmp_path / "s.json").read_text())["directories"][0]


@pytest.mark.parametrize("args, says", [
    (["--good-dir", "."], "--good-dir: only with --bisect"),
    (["--bisect-method", "mix"], "--bisect-method: only with --bisect"),
    (["--bisect", "--good-dir", "nowhere"], "--good-dir nowhere: not a directory"),
])
def test_bisect_options_given_wrong_are_one_line(args, says, tmp_path):
    out = pb("ci", "gone", *args, "--json", "s.json", cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and says in out.stderr, out.stderr
    assert not (tmp_path / "s.json").exists()


def test_the_good_copy_is_the_same_path_under_base_as_the_directory_under_the_common_parent(tmp_path):
    for rel in ("base/m/a", "base/n/b"):
        (tmp_path / rel).mkdir(parents=True)
    given = [tmp_path / "run" / "m" / "a", tmp_path / "run" / "n" / "b", tmp_path / "run" / "n" / "c"]
    plan = bisects.plan(given, True, tmp_path / "base", "mix")
    assert plan.good_for(given[0]) == bisects.Good(tmp_path / "base" / "m" / "a", method="mix")
    assert plan.good_for(given[1]).directory == tmp_path / "base" / "n" / "b"
    assert plan.good_for(given[2]) == bisects.Good(missing=tmp_path / "base" / "n" / "c", method="mix")
    one = bisects.plan([tmp_path / "run" / "m" / "a"], True, tmp_path / "base" / "m", None)
    assert one.good_for(tmp_path / "run" / "m" / "a").directory == tmp_path / "base" / "m" / "a"   # BASE/<name>
    assert bisects.plan(given, True, None, None).good_for(given[0]) == bisects.Good()
    with pytest.raises(UserError, match="only with --bisect"):
        bisects.plan(given, False, tmp_path / "base", None)


def test_a_parent_of_several_programs_names_each_programs_culprits():
    found = {"programs": [{"directory": "/d/orch_a", "outcome": "culprits",
                           "culprits": [{"unit": "compile:aiv/k1", "source": "orch_a/kernels/aiv/k1.cpp"}]},
                          {"directory": "/d/orch_b", "outcome": "agree", "culprits": []}]}
    assert bisects.summary(found) == ["bisect (/d/orch_a): culprit compile:aiv/k1 (orch_a/kernels/aiv/k1.cpp)",
                                      "bisect (/d/orch_b): the two variants agree: nothing to blame"]
    message, text = bisects.junit_failure("x" * 1000 + "\ndetails", found)
    assert len(message) <= 500 and "culprit compile:aiv/k1" in message and text.startswith("x" * 1000 + "\ndetails")
