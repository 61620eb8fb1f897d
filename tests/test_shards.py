"""`ci --shard K/N`, `--list` and `ci-report`: every directory on exactly one shard, the same plan on every
machine, few moves when a directory is added, and a merge that never makes a missing shard look green."""
from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from conftest import needs_nginx
from pypto_build import merge_reports, shard_plan
from pypto_build.errors import PyptoBuildError
from pypto_build.ci.shards import MAX_SHARDS, directory_key
from pypto_build.testing import synth

NAMES = [f"build_output/_jit_model_{i:03d}" for i in range(100)]


def pb(*args: str, cwd: Path | None = None, seed: str = "0") -> subprocess.CompletedProcess:
    """The installed `pypto-build`; `seed` varies PYTHONHASHSEED (the plan must not depend on it)."""
    return subprocess.run(["pypto-build", *args], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**os.environ, "PYTHONHASHSEED": seed})


def listed(out: subprocess.CompletedProcess) -> list[tuple[str, str]]:
    assert out.returncode == 0 and out.stderr == "", out.stderr
    return [tuple(line.split("\t")) for line in out.stdout.splitlines()]


def moved(before, after, names) -> int:
    return sum(1 for n in names if before.shard_of(n) != after.shard_of(n))


# --- the plan (library) ---------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7, 16])
@pytest.mark.parametrize("n", [0, 1, 5, 8, 100])
def test_every_directory_is_on_exactly_one_shard_and_loads_differ_by_at_most_one(n, count):
    plan = shard_plan(NAMES[:n], count)
    assert sorted(k for keys in plan.shards for k in keys) == sorted(NAMES[:n])
    loads = [len(keys) for keys in plan.shards]
    assert sum(loads) == n == plan.total and max(loads) - min(loads) <= 1


def test_the_plan_ignores_order_duplicates_and_spelling():
    shuffled = random.Random(7).sample(NAMES, len(NAMES))
    spelled = [f"./{n}/" for n in NAMES[:10]] + [n.replace("/", "//") for n in NAMES[10:20]]
    plan = shard_plan(NAMES, 4)
    assert shard_plan(shuffled, 4) == plan
    assert shard_plan(NAMES + spelled + NAMES[:3], 4) == plan
    assert plan.total == len(NAMES)


def test_checkouts_at_different_roots_agree(tmp_path):
    inside = [f"/ci/runner-1/repo/{n}" for n in NAMES[:12]]
    elsewhere = [f"/home/me/src/repo/{n}" for n in NAMES[:12]]
    one = shard_plan(inside, 3, cwd="/ci/runner-1/repo")
    two = shard_plan(elsewhere, 3, cwd="/home/me/src/repo")
    assert one == two == shard_plan(NAMES[:12], 3, cwd="/anywhere")
    assert directory_key("/ci/runner-1/other", cwd="/ci/runner-1/repo") == "/ci/runner-1/other"   # outside: absolute
    assert directory_key("../repo/a/./b/", cwd="/x/repo") == "a/b" and directory_key(".", cwd="/x") == "."


def test_a_checkout_reached_through_a_symbolic_link_plans_alike(tmp_path):
    """`$PWD/...` paths in a checkout whose root is a symbolic link (the working directory is its real path):
    the keys and the plan are those of the real path and of plain relative paths (issue 25 item 12)."""
    real = tmp_path / "disk" / "checkout"
    for name in NAMES[:12]:
        (real / name).mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "disk")
    linked = tmp_path / "link" / "checkout"
    plain = shard_plan(NAMES[:12], 3, cwd=real)
    assert shard_plan([f"{linked}/{n}" for n in NAMES[:12]], 3, cwd=real) == plain
    assert shard_plan([f"{real}/{n}" for n in NAMES[:12]], 3, cwd=linked) == plain
    assert directory_key(f"{linked}/{NAMES[0]}/./", cwd=real) == NAMES[0] and directory_key(linked, cwd=real) == "."
    assert directory_key(tmp_path / "disk", cwd=real) == f"{tmp_path}/disk"          # above it: absolute
    via_link = listed(pb("ci", "--list", "--shard", "3", *(f"{linked}/{n}" for n in NAMES[:12]), cwd=linked))
    assert via_link == listed(pb("ci", "--list", "--shard", "3", *NAMES[:12], cwd=real))
    assert sorted(d for _s, d in via_link) == NAMES[:12]


def test_the_plan_costs_the_shards_that_can_take_a_directory_only():
    """With more shards than directories only shards 1..n have room: n x n pairs weighed, not n x N (a plan over
    the largest N is as cheap as over N = n); N is bounded by what a CI run can have (MAX_SHARDS)."""
    plan = shard_plan(NAMES[:5], MAX_SHARDS)
    assert [len(keys) for keys in plan.shards[:5]] == [1] * 5 and plan.total == 5
    assert len(plan.shards) == MAX_SHARDS and plan.record(MAX_SHARDS)["assigned"] == 0
    assert shard_plan(NAMES[:5], 5).shards == plan.shards[:5]
    with pytest.raises(PyptoBuildError, match="must be 1 to 10000"):
        shard_plan(NAMES, MAX_SHARDS + 1)


@pytest.mark.parametrize("count", [2, 3, 4, 5, 6, 8, 16, 32])
def test_adding_a_directory_moves_few_others(count):
    """Each of 40 different additions to 100 directories moves at most N - 1 others (the chain of displaced
    directories visits a shard at most once) and at most 3 up to five shards; about one to three on average
    for every N (a plan that reshuffled would move most of the 100). Removing is the same change backwards."""
    before = shard_plan(NAMES, count)
    counts = []
    for j in range(40):
        after = shard_plan([*NAMES, f"build_output/_jit_new_{j}"], count)
        counts.append(moved(before, after, NAMES))
        assert moved(after, shard_plan(NAMES, count), NAMES) == counts[-1]
    assert max(counts) <= count - 1 and (count > 5 or max(counts) <= 3), counts
    assert sum(counts) / len(counts) <= 3.5, counts


def test_a_share_that_grows_for_every_shard_at_once_would_move_many():
    """Why the shares grow one shard at a time: 100 -> 101 directories over 4 shards makes
    share 26 (shard 1 takes the one extra); the plan keeps the 100 where they were but for a short chain."""
    assert moved(shard_plan(NAMES, 4), shard_plan([*NAMES, "x"], 4), NAMES) <= 3
    assert [len(k) for k in shard_plan([*NAMES, "x"], 4).shards] == [26, 25, 25, 25]


def test_the_plan_is_the_same_in_every_process():
    code = "import sys; from pypto_build import shard_plan; print(shard_plan(sys.argv[1:], 5).shards)"
    runs = {subprocess.run(["python", "-c", code, *NAMES[:30]], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2", "3")}
    assert len(runs) == 1 and str(shard_plan(NAMES[:30], 5).shards) + "\n" in runs


def test_a_bad_count_is_refused():
    with pytest.raises(PyptoBuildError, match="must be 1 to 10000"):
        shard_plan(NAMES, 0)


# --- the command line: --list, --shard ------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path) -> list[str]:
    """Ten directory names (relative to tmp_path) of which none exists: --list builds nothing."""
    return [f"models/m{i}" for i in range(10)]


def test_four_shards_listed_cover_every_directory_once(tree, tmp_path):
    whole = listed(pb("ci", "--list", "--shard", "4", *tree, cwd=tmp_path))
    parts = [listed(pb("ci", "--list", "--shard", f"{k}/4", *tree, cwd=tmp_path)) for k in range(1, 5)]
    assert sorted(d for _s, d in whole) == sorted(tree)
    assert [row for part in parts for row in part] == whole
    assert all(s == f"{k}/4" for k, part in enumerate(parts, 1) for s, _d in part)
    assert all(part for part in parts)              # ten over four: 3, 3, 2, 2
    assert listed(pb("ci", "--list", *tree, cwd=tmp_path)) == [("1/1", d) for d in sorted(tree)]
    assert not (tmp_path / "models").exists()


def test_argument_order_and_spelling_do_not_change_the_plan(tree, tmp_path):
    plan = listed(pb("ci", "--list", "--shard", "3", *tree, cwd=tmp_path))
    shuffled = random.Random(3).sample(tree, len(tree))
    respelled = [f"./{d}" if i % 2 else str(tmp_path / d) for i, d in enumerate(shuffled)]
    assert listed(pb("ci", "--list", "--shard", "3", *respelled, tree[0], cwd=tmp_path, seed="99")) == plan


@pytest.mark.parametrize("value, says", [("0/4", "numbered from 1"), ("5/4", "no shard 5 of 4"),
                                         ("1/0", "at least 1"), ("x", "not K/N"), ("1/4/2", "not K/N"),
                                         ("4", "names no shard to build"), ("1/1000000000", "1,000,000,000 shards"),
                                         ("1/1000000000000", "more than the 10,000")])
def test_a_bad_shard_is_one_line(value, says, tree, tmp_path):
    out = pb("ci", "--shard", value, *tree, cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and out.stderr.startswith(f"pypto-build: error: --shard {value!r}: ")
    assert says in out.stderr
    assert "Traceback" not in out.stderr and "; pass K/N" in out.stderr


# --- ci-report on reports of directories that fail fast (none exists) -----------------------------------


@pytest.fixture
def failing(tmp_path) -> list[Path]:
    """Three shards' reports over five missing directories (each fails at once: nothing to build)."""
    names = [f"gone/d{i}" for i in range(5)]
    reports = []
    for k in (1, 2, 3):
        out = pb("ci", "-q", "--shard", f"{k}/3", *names, "--json", f"s{k}.json", cwd=tmp_path)
        assert out.returncode == 1, out.stderr
        reports.append(tmp_path / f"s{k}.json")
    return reports


def report(*paths: Path, cwd: Path) -> subprocess.CompletedProcess:
    return pb("ci-report", *map(str, paths), "--json", "merged.json", "--junit-xml", "merged.xml", cwd=cwd)


def refused(out: subprocess.CompletedProcess, says: str, cwd: Path) -> str:
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.count("\n") == 1 and says in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert not (cwd / "merged.json").exists() and not (cwd / "merged.xml").exists()      # nothing partial
    return out.stderr


def test_failed_directories_merge_to_exit_1(failing, tmp_path):
    out = report(*failing, cwd=tmp_path)
    assert out.returncode == 1
    assert out.stdout.splitlines()[-1] == ("pypto-build ci-report: 5 directories over 3 shards: 0 passed, "
                                           "5 failed, 0 cache hits")
    assert out.stderr.count("FAILED build") == 5 and "does not exist" in out.stderr
    data = json.loads((tmp_path / "merged.json").read_text())
    assert sorted(d["key"] for d in data["directories"]) == [f"gone/d{i}" for i in range(5)]
    assert [s["index"] for s in data["shards"]] == [1, 2, 3] and not data["ok"]
    suites = ET.parse(tmp_path / "merged.xml").getroot()
    assert suites.tag == "testsuites" and suites.get("tests") == "5" and suites.get("failures") == "5"
    assert [s.get("name") for s in suites] == [f"pypto-build ci shard {k}/3" for k in (1, 2, 3)]


def test_a_missing_shard_is_refused(failing, tmp_path):
    refused(report(failing[0], failing[2], cwd=tmp_path), "shard 2/3 missing", tmp_path)


def test_a_shard_given_twice_is_refused(failing, tmp_path):
    copy = tmp_path / "again.json"
    copy.write_bytes(failing[1].read_bytes())
    refused(report(*failing, copy, cwd=tmp_path), f"{copy}: shard 2/3 again (also {failing[1]})", tmp_path)


def test_reports_of_another_plan_are_refused(failing, tmp_path):
    pb("ci", "-q", "--shard", "2/3", "gone/d0", "gone/d1", "gone/other", "--json", "other.json", cwd=tmp_path)
    refused(report(failing[0], tmp_path / "other.json", failing[2], cwd=tmp_path),
            f"{tmp_path / 'other.json'}: shard 2/3 of plan", tmp_path)
    pb("ci", "-q", "--shard", "2/4", *(f"gone/d{i}" for i in range(5)), "--json", "four.json", cwd=tmp_path)
    refused(report(*failing, tmp_path / "four.json", cwd=tmp_path), "four.json: shard 2/4 of plan", tmp_path)


def test_edited_or_broken_reports_are_refused(failing, tmp_path):
    data = json.loads(failing[0].read_text())
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps({**data, "directories": data["directories"][1:]}))
    refused(report(cut, *failing[1:], cwd=tmp_path), f"{cut}: shard 1/3 lists", tmp_path)
    renamed = tmp_path / "renamed.json"
    renamed.write_text(json.dumps({**data, "directories": [{**d, "key": d["key"] + "x"} for d in data["directories"]]}))
    refused(report(renamed, *failing[1:], cwd=tmp_path), "directories are not those of plan", tmp_path)
    moved_in = tmp_path / "dup.json"
    other = json.loads(failing[1].read_text())
    moved_in.write_text(json.dumps({**data, "directories": [other["directories"][0], *data["directories"][1:]]}))
    refused(report(moved_in, *failing[1:], cwd=tmp_path), f"directory {other['directories'][0]['key']} also in",
            tmp_path)
    for name, text in (("bad.json", "{not json"), ("list.json", "[1]"), ("whole.json", json.dumps({"ok": True,
                       "directories": []})), ("odd.json", json.dumps({**data, "shard": {**data["shard"], "count": "3"}})),
                       ("secs.json", json.dumps({**data, "seconds": "soon"}))):
        (tmp_path / name).write_text(text)
        refused(report(tmp_path / name, *failing[1:], cwd=tmp_path), f"{tmp_path / name}: ", tmp_path)
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    refused(report(tmp_path / "deep.json", *failing[1:], cwd=tmp_path), "deep.json: JSON nested deeper", tmp_path)
    (tmp_path / "huge.json").write_text(json.dumps({**data, "shard": {**data["shard"], "count": 10**12}}))
    refused(report(tmp_path / "huge.json", cwd=tmp_path), "huge.json: its \"shard\" record is malformed", tmp_path)
    refused(report(tmp_path / "nowhere.json", *failing[1:], cwd=tmp_path), "nowhere.json: cannot be read", tmp_path)


def test_an_empty_shard_writes_passing_reports(tmp_path):
    names = ["gone/a", "gone/b"]
    empty = next(k for k in range(1, 5) if not listed(pb("ci", "--list", "--shard", f"{k}/4", *names, cwd=tmp_path)))
    out = pb("ci", "--shard", f"{empty}/4", *names, "--json", "e.json", "--junit-xml", "e.xml", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert f"shard {empty}/4: 0 of 2 directories" in out.stdout and "nothing to build here" in out.stdout
    data = json.loads((tmp_path / "e.json").read_text())
    assert data["ok"] and data["directories"] == [] and data["shard"]["index"] == empty
    assert data["shard"]["directories"] == 2 and data["shard"]["assigned"] == 0
    suite = ET.parse(tmp_path / "e.xml").getroot()
    assert suite.get("tests") == "0" and suite.get("failures") == "0"
    assert {p.get("name"): p.get("value") for p in suite.iter("property")}["shard.index"] == str(empty)


# --- real shards: builds, verdicts, a merge; the remote cache across shards -----------------------------


@pytest.mark.slow
def test_two_real_shards_merge_into_one_report(tmp_path):
    pytest.importorskip("torch")
    dirs = [synth.write_l2(tmp_path / "b" / "good", kernels=1, golden=True)]
    dirs += [synth.write_l2(tmp_path / "b" / f"plain{i}", kernels=1) for i in range(3)]
    names = [str(d.relative_to(tmp_path)) for d in dirs]

    def shard(k: int) -> subprocess.CompletedProcess:
        return pb("ci", "-q", "--shard", f"{k}/2", *names, "--json", f"s{k}.json", "--junit-xml", f"s{k}.xml",
                  cwd=tmp_path)

    assert [shard(k).returncode for k in (1, 2)] == [0, 0]
    out = report(tmp_path / "s1.json", tmp_path / "s2.json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads((tmp_path / "merged.json").read_text())
    assert sorted(d["key"] for d in data["directories"]) == sorted(names) and data["ok"]
    assert {d["key"]: d["kind"] for d in data["directories"]}["b/good"] == "validate"
    for k in (1, 2):
        suite = ET.parse(tmp_path / f"s{k}.xml").getroot()
        assert suite.get("name") == f"pypto-build ci shard {k}/2" and suite.get("tests") == "2"
    good = next(k for k in (1, 2) if "b/good" in {d["key"] for d in json.loads((tmp_path / f"s{k}.json").read_text())[
        "directories"]})
    other = tmp_path / "checkout2"                              # another machine: another root, new mtimes,
    other.mkdir()                                               # each directory's .pypto_build/ restored
    subprocess.run(["cp", "-r", str(tmp_path / "b"), str(other / "b")], check=True)
    assert listed(pb("ci", "--list", "--shard", "2", *names, cwd=other)) == listed(
        pb("ci", "--list", "--shard", "2", *names, cwd=tmp_path))
    again = pb("ci", "--shard", f"{good}/2", *names, cwd=other)
    assert again.returncode == 0 and f"ok validate {other / 'b' / 'good'} (verdict reused)" in again.stdout
    kernel = synth.kernel_path(dirs[0], 0)                      # break one directory, rerun only its shard
    text = kernel.read_text()
    assert "1.0f" in text
    kernel.write_text(text.replace("1.0f", "1.5f"))
    assert shard(good).returncode == 1
    out = report(tmp_path / "s1.json", tmp_path / "s2.json", cwd=tmp_path)
    assert out.returncode == 1 and "FAILED validate" in out.stderr and "b/good" in out.stderr
    assert "4 directories over 2 shards: 3 passed, 1 failed" in out.stdout


@pytest.mark.slow
@needs_nginx
def test_a_shard_reuses_what_another_shard_uploaded(nginx_cache, tmp_path):
    url, _store = nginx_cache
    pristine = synth.write_l2(tmp_path / "pristine", kernels=2)
    names = []
    for i in range(4):                                          # four copies: the same units, other paths
        subprocess.run(["cp", "-a", str(pristine), str(tmp_path / f"copy{i}")], check=True)
        names.append(f"copy{i}")
    runs = [pb("ci", "-q", "--shard", f"{k}/2", *names, "--remote-cache", url, "--cache-dir", f"local{k}",
               "--json", f"s{k}.json", cwd=tmp_path) for k in (1, 2)]   # two machines, one after the other
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    assert all("remote cache" not in r.stderr for r in runs)
    second = json.loads((tmp_path / "s2.json").read_text())
    units = [u for d in second["directories"] for u in d["units"] if u["task"].startswith(("compile:", "orch:"))]
    assert len(units) == 6 and {u["status"] for u in units} == {"from-cache"}       # nothing compiled
    assert all(d["cache_hits"] == 3 for d in second["directories"])
    first = json.loads((tmp_path / "s1.json").read_text())
    assert sum(u["status"] == "ran" for d in first["directories"] for u in d["units"]
               if u["task"].startswith(("compile:", "orch:"))) == 3              # the first copy compiled
    out = report(tmp_path / "s1.json", tmp_path / "s2.json", cwd=tmp_path)
    assert out.returncode == 0 and "4 directories over 2 shards: 4 passed, 0 failed, 9 cache hits" in out.stdout


def test_merge_reports_is_the_library_door(failing):
    merged = merge_reports(failing)
    assert [r.shard["index"] for r in merged.shards] == [1, 2, 3] and not merged.ok
    with pytest.raises(PyptoBuildError, match="shard 3/3 missing"):
        merge_reports(failing[:2])
