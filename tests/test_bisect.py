"""`pypto-build bisect`: real builds, real runs, real processes (issue: which kernel broke it)."""
from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pypto_build.errors import UserError
from pypto_build.testing import synth
from pypto_build.variants.history import History
from pypto_build.variants.store import store_dir

pytestmark = pytest.mark.slow

KERNELS = 6


def cli(*args: str, check: int | None = None, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "pypto_build", *args], capture_output=True, text=True,
                          timeout=600, **kwargs)
    if check is not None:
        assert done.returncode == check, done.stdout + done.stderr
    return done


def kernel(root: Path, func_id: int) -> Path:
    return synth.kernel_path(root, func_id)


def breaks(root: Path, func_id: int) -> None:
    """Change the numbers kernel `func_id` computes (its coefficient)."""
    path = kernel(root, func_id)
    text = path.read_text()
    assert text.count(f"{func_id + 1}.0f") == 1
    path.write_text(text.replace(f"{func_id + 1}.0f", f"{func_id + 1}.5f"))


def harmless(root: Path, func_id: int) -> None:
    """Change kernel `func_id`'s binary but not its numbers."""
    path = kernel(root, func_id)
    path.write_text(path.read_text().replace("using namespace pto;",
                                             f'using namespace pto;\nextern "C" volatile int harmless_{func_id} = 7;'))


def nudges(root: Path, func_id: int, by: str) -> None:
    """Add `by` to what kernel `func_id` writes (within the tolerance alone, or not)."""
    path = kernel(root, func_id)
    text = path.read_text()
    assert text.count("out[i] = ") == 1
    path.write_text(text.replace("out[i] = ", f"out[i] = {by} + "))


def tree(root: Path) -> dict[str, bytes]:
    """Every file under `root` (state included) with its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def user_cache(tmp_path_factory) -> Path:
    """The user's cache folder of this module's tests: the kept variants of `passed` live there."""
    return tmp_path_factory.mktemp("bisect-user-cache")


@pytest.fixture(scope="module")
def passed(tmp_path_factory, user_cache) -> Path:
    """A built directory of KERNELS kernels whose PASSED verdict is recorded."""
    root = synth.write_l2(tmp_path_factory.mktemp("bisect") / "d", kernels=KERNELS, golden=True)
    cli("validate", str(root), check=0, env={**os.environ, "XDG_CACHE_HOME": str(user_cache)})
    return root


@pytest.fixture
def d(passed, user_cache, tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(user_cache))
    copy = tmp_path / "d"
    subprocess.run(["cp", "-a", str(passed), str(copy)], check=True)
    return copy


def failing(root: Path) -> None:
    """Validate after the edits: FAILED, recorded."""
    cli("validate", str(root), check=1)


def test_one_culprit_among_several_changed_kernels_is_named_and_the_directory_is_untouched(d, tmp_path):
    harmless(d, 1)
    breaks(d, 3)
    harmless(d, 4)
    failing(d)
    before = tree(d)
    out = tmp_path / "report.json"
    done = cli("bisect", str(d), "--method", "mix", "--json", str(out), check=0)
    report = json.loads(out.read_text())
    assert [c["unit"] for c in report["culprits"]] == ["compile:aiv/main_incore_3_aiv"]
    assert report["culprits"][0]["source"] == "kernels/aiv/main_incore_3_aiv.cpp"
    assert any("4.5f" in line and line.startswith("+") for line in report["culprits"][0]["diff"])
    assert report["method"] == "mix" and report["first_divergence"] is None
    assert len(report["suspects"]) == 3
    assert len(report["runs"]) <= math.ceil(math.log2(3)) + 2           # the bound for one culprit
    assert any("the good variant's PASSED verdict on this golden result holds" in n for n in report["notes"])
    assert all(set(r) >= {"units", "verdict", "seconds"} for r in report["runs"])
    assert "culprit  compile:aiv/main_incore_3_aiv" in done.stdout
    assert re.search(r"\[bisect\] run 1: (PASSED|FAILED) in", done.stdout)        # each run shown as it goes
    assert tree(d) == before                          # sources, binaries, stamp, state, history: byte for byte


def test_a_harmless_binary_change_alone_is_not_blamed(d):
    harmless(d, 2)
    cli("validate", str(d), check=0)
    done = cli("bisect", str(d), "--method", "mix", "--good", History(d).newest("PASSED").short, check=1)
    assert "the two variants agree: nothing to blame" in done.stdout


def test_two_culprits_that_only_fail_together_are_found_together(d, tmp_path):
    golden = d / "golden.py"
    golden.write_text(golden.read_text().replace("RTOL = 1e-05", "RTOL = 0.0").replace("ATOL = 1e-05", "ATOL = 0.01"))
    cli("validate", str(d), check=0)                  # the good variant under this oracle
    nudges(d, KERNELS - 2, "0.012f")                  # halved by the last kernel: 0.006 alone
    nudges(d, KERNELS - 1, "0.006f")                  # 0.006 alone; together 0.012 > ATOL
    harmless(d, 0)
    failing(d)
    out = tmp_path / "r.json"
    cli("bisect", str(d), "--method", "mix", "--json", str(out), check=0)
    report = json.loads(out.read_text())
    assert sorted(c["unit"] for c in report["culprits"]) == ["compile:aic/main_incore_4_aic",
                                                             "compile:aiv/main_incore_5_aiv"]


def test_a_recorded_good_verdict_is_reused_only_on_the_same_golden_result(d, tmp_path):
    breaks(d, 3)
    failing(d)
    golden = d / "golden.py"                          # other inputs: the recorded PASSED is not theirs
    golden.write_text(golden.read_text().replace("manual_seed(1234)", "manual_seed(7)"))
    out = tmp_path / "r.json"
    cli("bisect", str(d), "--method", "mix", "--json", str(out), check=0)
    report = json.loads(out.read_text())
    assert [r["units"] for r in report["runs"]][:2] == [report["suspects"], []]       # all current, then all good
    assert not any("holds" in n for n in report["notes"])
    assert [c["unit"] for c in report["culprits"]] == ["compile:aiv/main_incore_3_aiv"]


def test_against_the_good_variants_outputs_and_with_given_tolerances(d, tmp_path):
    breaks(d, 5)
    harmless(d, 2)
    failing(d)
    out = tmp_path / "r.json"
    cli("bisect", str(d), "--method", "mix", "--against-good", "--json", str(out), check=0)
    assert [c["unit"] for c in json.loads(out.read_text())["culprits"]] == ["compile:aiv/main_incore_5_aiv"]
    lax = cli("bisect", str(d), "--method", "mix", "--against-good", "--atol", "100", check=1)
    assert "the two variants agree" in lax.stdout   # within a tolerance that wide, nothing differs


def test_good_as_another_directory_of_the_same_program(d, passed, tmp_path):
    breaks(d, 2)
    out = tmp_path / "r.json"
    cli("bisect", str(d), "--method", "mix", "--good", str(passed), "--json", str(out), check=0)
    report = json.loads(out.read_text())
    assert [c["unit"] for c in report["culprits"]] == ["compile:aic/main_incore_2_aic"]
    assert report["good"] == f"directory {passed}"


def test_an_evicted_good_binary_is_rebuilt_from_its_kept_source(d, tmp_path):
    breaks(d, 3)
    failing(d)
    history = History(d)
    unit = next(u for u in history.units(history.newest("PASSED")) if u.task == "compile:aiv/main_incore_3_aiv")
    entry = Path(store_dir(None)) / unit.binary_digest[:2] / unit.binary_digest
    entry.unlink()                                    # as the store's size limit would
    out = tmp_path / "r.json"
    done = cli("bisect", str(d), "--method", "mix", "--json", str(out), check=0)
    report = json.loads(out.read_text())
    assert [c["unit"] for c in report["culprits"]] == ["compile:aiv/main_incore_3_aiv"]
    assert any("rebuilt from its kept source with its recorded command: the same bytes as recorded" in n
               for n in report["notes"]), report["notes"]
    assert "evicted" in done.stdout


@pytest.mark.parametrize("args, says", [
    (["--good", "0123456789"], "no single variant '0123456789' recorded"),
    (["--good", "./no-such-dir"], "no such directory"),
    (["--method", "guess"], "invalid choice"),
    (["--rtol", "-1", "--against-good"], "not a tolerance"),
])
def test_bad_input_is_one_line_and_exit_2(d, args, says):
    before = tree(d)
    done = cli("bisect", str(d), *args, check=2)
    assert says in done.stderr and "Traceback" not in done.stderr
    assert tree(d) == before


def test_a_good_directory_of_another_program_is_refused_naming_the_first_difference(d, tmp_path):
    other = synth.write_l2(tmp_path / "other", kernels=KERNELS - 1, golden=True)
    cli("build", str(other), check=0)
    done = cli("bisect", str(d), "--good", str(other), check=2)
    assert "not the same program" in done.stderr and "main_incore_5_aiv" in done.stderr
    unbuilt = synth.write_l2(tmp_path / "unbuilt", kernels=KERNELS, golden=True)
    done = cli("bisect", str(d), "--good", str(unbuilt), check=2)
    assert "not built" in done.stderr


def test_no_passed_variant_is_one_line(tmp_path):
    root = synth.write_l2(tmp_path / "fresh", kernels=2, golden=True)
    breaks(root, 1)
    cli("validate", str(root), check=1)
    done = cli("bisect", str(root), check=2)
    assert "no PASSED variant recorded" in done.stderr


def test_every_verdict_records_its_variant_and_history_lists_them(d):
    before = History(d).variants
    breaks(d, 1)
    failing(d)
    after = History(d)
    new = [v for k, v in after.variants.items() if k not in before]
    assert len(new) == 1 and new[0].verdict == "FAILED" and "does not match golden" in new[0].figures
    units = {u.task: u for u in after.units(new[0])}
    assert len(units) == KERNELS + 1 and all(u.binary_digest and u.source_digest for u in units.values())
    assert (d / ".pypto_build" / "variants" / f"{new[0].digest}.json").is_file()     # its own file: history stays small
    assert len((d / ".pypto_build" / "history.json").read_text()) < 2000 * len(after.variants)
    assert all((Path(store_dir(None)) / u.binary_digest[:2] / u.binary_digest).is_file() for u in units.values())
    listing = cli("history", str(d), check=0).stdout
    assert new[0].short in listing and "FAILED" in listing


def test_a_killed_bisect_leaves_only_its_scratch_which_the_next_removes(d):
    breaks(d, 3)
    slow = kernel(d, 1)                               # a run of the current variant takes a second: killed mid-run
    slow.write_text(slow.read_text().replace("#include <cstdint>", "#include <cstdint>\n#include <unistd.h>")
                    .replace("    for (int64_t i = 0; i < n; ++i) {", "    usleep(1000000);\n    for (int64_t i = 0; "
                             "i < n; ++i) {"))
    failing(d)
    before = tree(d)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        proc = subprocess.Popen([sys.executable, "-m", "pypto_build", "bisect", str(d), "--method", "mix"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if "unit(s) differ" in line:              # the runs begin: the first takes a second at least
                break
        time.sleep(0.3)
        proc.send_signal(sig)
        seen.append(proc.stdout.read())
        proc.wait(60)
        assert proc.returncode == (130 if sig != signal.SIGKILL else -signal.SIGKILL), "".join(seen)
        assert tree(d) == before
    work = Path(store_dir(None)).parent / "bisect"
    assert any((w / "scratch").exists() for w in work.iterdir())       # what kill -9 left
    cli("bisect", str(d), "--method", "mix", check=0)
    assert not any((w / "scratch").exists() for w in work.iterdir())


def test_two_bisects_of_one_directory_are_serialised(d):
    breaks(d, 3)
    failing(d)
    procs = [subprocess.Popen([sys.executable, "-m", "pypto_build", "bisect", str(d), "--method", "mix"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert any("waiting for another run" in err for _out, err in outs)


def test_trace_names_the_first_divergent_task_and_its_kernel(d, tmp_path):
    harmless(d, 1)
    breaks(d, 3)
    failing(d)
    out = tmp_path / "r.json"
    done = cli("bisect", str(d), "--json", str(out), check=0)      # host: the dump carries payloads
    report = json.loads(out.read_text())
    assert report["method"] == "trace" and len(report["runs"]) == 2
    assert [c["unit"] for c in report["culprits"]] == ["compile:aiv/main_incore_3_aiv"]
    first = report["first_divergence"]
    assert (first["index"], first["func_id"], first["kernel"]) == (3, [3], "main_incore_3_aiv")
    assert first["source"] == "kernels/aiv/main_incore_3_aiv.cpp"
    assert first["later"] == KERNELS - 4 and first["differing"] > 0 and first["max_abs"] > 0
    assert "first divergent task  #3: main_incore_3_aiv" in done.stdout
    again = cli("bisect", str(d), "--json", str(out), check=0)      # the good variant's dump was kept
    report = json.loads(out.read_text())
    assert len(report["runs"]) == 1 and report["first_divergence"]["index"] == 3
    assert "the good variant's dump on these inputs is kept" in again.stdout
    golden = d / "golden.py"                                          # other inputs: the kept dump is not used
    golden.write_text(golden.read_text().replace("manual_seed(1234)", "manual_seed(99)"))
    report = json.loads((cli("bisect", str(d), "--json", str(out), check=0), out.read_text())[1])
    assert len(report["runs"]) == 2 and report["culprits"][0]["unit"] == "compile:aiv/main_incore_3_aiv"


def test_a_task_sequence_that_differs_is_said_and_the_mix_names_the_orchestration(d, tmp_path):
    orch = d / "orchestration" / "main.cpp"
    text = orch.read_text()
    call = f"rt_submit_aiv_task({KERNELS - 1}, "
    assert text.count(call) == 1
    orch.write_text(text.replace(call, f"if (0) rt_submit_aiv_task({KERNELS - 1}, "))
    harmless(d, 2)
    failing(d)
    out = tmp_path / "r.json"
    cli("bisect", str(d), "--json", str(out), check=0)
    report = json.loads(out.read_text())
    assert report["method"] == "trace+mix"
    assert report["parting"]["index"] == KERNELS - 1 and report["parting"]["current_func_id"] is None
    assert [c["unit"] for c in report["culprits"]] == ["orch:main"]


def _chip_kernel(root: Path, chip: str, func_id: int) -> Path:
    return synth.kernel_path(root / "next_levels" / chip, func_id)


def test_l3_the_first_rank_and_task_that_part_and_the_chip_unit_by_mix(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = synth.write_l3(tmp_path / "l3", golden=True)
    cli("validate", str(root), check=0)
    target = _chip_kernel(root, "chip_b", 1)
    target.write_text(target.read_text().replace("2.0f", "2.5f"))
    harmless(root / "next_levels" / "chip_a", 0)
    cli("validate", str(root), check=1)
    before = tree(root)
    out = tmp_path / "r.json"
    cli("bisect", str(root), "--json", str(out), check=0)
    report = json.loads(out.read_text())
    assert [c["unit"] for c in report["culprits"]] == ["compile:chip_b/aiv/chip_b_incore_1_aiv"]
    assert report["method"] == "trace+mix"                      # the dispatch's chip is not in its dump
    first = report["first_divergence"]
    assert first is not None and re.search(r"in rank\d+/d\d+$", first["kernel"])
    assert tree(root) == before


def test_multi_orchestration_each_sub_build_against_its_own_history(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = synth.write_multi_orch(tmp_path / "multi", golden=True)
    for sub in ("orch_a", "orch_b"):                  # each validated on its own: its history is its own
        cli("validate", str(root / "next_levels" / sub), check=0)
    target = synth.kernel_path(root / "next_levels" / "orch_b", 1)
    target.write_text(target.read_text().replace("2.0f", "2.5f"))
    cli("validate", str(root / "next_levels" / "orch_b"), check=1)
    listing = cli("history", str(root), check=0).stdout
    assert "next_levels/orch_a:" in listing and "next_levels/orch_b:" in listing
    out = tmp_path / "r.json"
    done = cli("bisect", str(root), "--method", "mix", "--json", str(out), check=0)
    programs = json.loads(out.read_text())["programs"]
    by_dir = {Path(p["directory"]).name: p for p in programs}
    assert by_dir["orch_a"]["outcome"] == "agree" and by_dir["orch_a"]["culprits"] == []
    assert [c["unit"] for c in by_dir["orch_b"]["culprits"]] == ["compile:orch_b/aiv/orch_b_incore_1_aiv"]
    assert "culprit  compile:orch_b/aiv/orch_b_incore_1_aiv" in done.stdout


def test_the_guides_worked_example_through_the_api(tmp_path, monkeypatch):
    """The guide's example: the shipped example, both kernels edited, one harmlessly; `pypto_build.bisect` returns
    the report as data classes and names the other."""
    import pypto_build
    from pypto_build.culprits import Culprit, Divergence, Report

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = tmp_path / "my_example"
    cli("example", str(root), check=0)
    aiv = root / "kernels" / "aiv" / "matmul_relu_incore_1_aiv.cpp"
    aiv.write_text(aiv.read_text().replace("? v : 0.0f", "? v * 1.5f : 0.0f"))
    aic = root / "kernels" / "aic" / "matmul_relu_incore_0_aic.cpp"
    aic.write_text(aic.read_text().replace("using namespace pto;",
                                           'using namespace pto;\nextern "C" volatile int tuning_marker = 1;', 1))
    cli("validate", str(root), check=1)
    heard: list[str] = []
    [report] = pypto_build.bisect(root, say=heard.append)
    assert isinstance(report, Report) and report.status == 0 and report.method == "trace"
    assert report.culprits == (Culprit("compile:aiv/matmul_relu_incore_1_aiv",
                                       "kernels/aiv/matmul_relu_incore_1_aiv.cpp", report.culprits[0].diff),)
    assert isinstance(report.first_divergence, Divergence) and report.first_divergence.max_abs > 0
    assert len(report.suspects) == 2 and any(line.startswith("[bisect] run 1:") for line in heard)
    [mixed] = pypto_build.bisect(root, method="mix")
    assert [c.unit for c in mixed.culprits] == ["compile:aiv/matmul_relu_incore_1_aiv"]
    assert all(isinstance(r.seconds, float) and r.verdict in ("PASSED", "FAILED") for r in mixed.runs)


def test_the_api_and_ci_record_variants_too(tmp_path, monkeypatch):
    import pypto_build

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = synth.write_l2(tmp_path / "api", kernels=2, golden=True)
    pypto_build.validate(root)
    assert [v.verdict for v in History(root).variants.values()] == ["PASSED"]
    breaks(root, 1)
    with pytest.raises(AssertionError):
        pypto_build.replay(root, validate=True)
    assert [v.verdict for v in History(root).variants.values()] == ["PASSED", "FAILED"]
    harmless(root, 0)
    cli("ci", str(root), check=1)
    assert [v.verdict for v in History(root).variants.values()] == ["PASSED", "FAILED", "FAILED"]


def _without_kept_verdict(root: Path) -> None:
    """Blank the golden seal the PASSED variants were recorded with: a mix then runs the good variant itself."""
    path = root / ".pypto_build" / "history.json"
    data = json.loads(path.read_text())
    for v in data["variants"]:
        if v["verdict"] == "PASSED":
            v["golden"] = ""
    path.write_text(json.dumps(data))


def _same_answer(report: dict) -> dict:
    """What a bisect answers, without how it got there (its runs, their times, its notes)."""
    return {k: v for k, v in report.items() if k not in ("runs", "notes")}


@pytest.mark.parametrize("case", ["one culprit", "two only together", "nothing to blame"])
def test_every_fast_path_of_a_bisect_gives_the_slow_paths_answer(d, tmp_path, case):
    """The recorded good verdict reused, the good variant's kept dump, runs forked from the warm starter, the copy
    built on the directory's own state: each gives the answer of its slow path (the good variant run again, its dump
    made again, every run spawned afresh), the same culprits, the same divergence, the same refusal to blame."""
    from pypto_build import bisect
    from pypto_build.run.starter import spawn

    good = History(d).newest("PASSED").short                          # the variant before the edits
    if case == "one culprit":
        harmless(d, 1), breaks(d, 3), harmless(d, 4)
    elif case == "two only together":
        golden = d / "golden.py"
        golden.write_text(golden.read_text().replace("RTOL = 1e-05", "RTOL = 0.0").replace("ATOL = 1e-05",
                                                                                          "ATOL = 0.01"))
        cli("validate", str(d), check=0)
        nudges(d, KERNELS - 2, "0.012f"), nudges(d, KERNELS - 1, "0.006f"), harmless(d, 0)
    else:
        harmless(d, 2), harmless(d, 5)
    cli("validate", str(d), check=0 if case == "nothing to blame" else 1)
    recorded = max(History(d).variants.values(), key=lambda v: v.last_seen)
    copies = {name: tmp_path / name for name in ("slow", "spawned")}
    for copy in copies.values():
        subprocess.run(["cp", "-a", str(d), str(copy)], check=True)
    _without_kept_verdict(copies["slow"])
    for method in ("mix", "trace"):
        fast = bisect(d, good=good, method=method)[0].as_json()
        again = bisect(d, good=good, method=method)[0].as_json()      # a trace: the good dump kept
        slow = bisect(copies["slow"], good=good, method=method)[0].as_json()
        spawned = bisect(copies["spawned"], good=good, method=method, start=spawn)[0].as_json()
        assert fast["outcome"] == ("agree" if case == "nothing to blame" else "culprits") and len(fast["suspects"]) >= 2
        assert fast["current"] == recorded.digest                         # the copy built the directory's bytes
        for other in (again, slow, spawned):
            assert _same_answer(other) | {"directory": ""} == _same_answer(fast) | {"directory": ""}, (method, case)
        if method == "mix" and case == "one culprit":
            assert any("holds" in n for n in fast["notes"]) and not any("holds" in n for n in slow["notes"])
            assert [] in [r["units"] for r in slow["runs"]] and [] not in [r["units"] for r in fast["runs"]]
        if method == "trace" and case != "nothing to blame":
            assert len(again["runs"]) == 1 and len(fast["runs"]) == 2


def test_on_a_platform_whose_dump_has_no_payloads_the_trace_is_refused_and_the_mix_is_the_default(d, monkeypatch):
    """a5/a5sim: simpler's payloads are not trustworthy there (the platform record says so): --method trace is one
    line, exit 2, before any run; without --method the bisect mixes."""
    from pypto_build import bisect
    from pypto_build.platforms import RECORDS

    breaks(d, 3)
    failing(d)
    monkeypatch.setattr(RECORDS["host"], "dump_payloads", False)
    before = tree(d)
    with pytest.raises(UserError, match="--method trace needs an arguments dump with payloads, which host does not"):
        bisect(d, method="trace")
    [report] = bisect(d)
    assert report.method == "mix" and [c.unit for c in report.culprits] == ["compile:aiv/main_incore_3_aiv"]
    assert tree(d) == before
