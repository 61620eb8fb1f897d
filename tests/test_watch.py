"""`pypto-build watch` / `doit auto`: real sessions (a process, real edits, real g++), and its parts."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import copy_dir, inject
from watching import WAIT_S, Watcher, processes, wait_gone
from pypto_build.testing.synth import kernel_path
from pypto_build.variants.history import Damaged, History
from pypto_build.variants.units import UnitRef, unit_states, variant_id
from pypto_build.watch.inputs import Inputs, Snapshot, ignored

def save_like_an_editor(path: Path, text: str) -> None:
    """Write a temporary file beside `path`, then rename it over `path` (vim, VS Code, JetBrains)."""
    tmp = path.with_name(f".{path.name}.swp~")
    tmp.write_text(text)
    os.replace(tmp, path)


def ratio(root: Path) -> float:
    """out / a of the last run (out as saved in .pypto_build/replay/, which keeps outputs only; a as golden.py's
    generate_inputs makes it): which kernel version computed it."""
    import torch

    from pypto_build.run.golden import load_golden

    out = torch.load(root / ".pypto_build" / "replay" / "out.pt")
    assert sorted(p.name for p in (root / ".pypto_build" / "replay").iterdir()) == ["out.pt"]
    a = dict(load_golden(root).inputs())["a"]
    mask = a.abs() > 1e-3
    return float((out[mask] / a[mask]).mean())


def watch_cmd(*extra: str) -> list[str]:
    return [sys.executable, "-m", "pypto_build", "watch", "--validate", "--runs", "3", *extra, "."]


@pytest.mark.slow
def test_watch_session_rebuilds_reruns_and_keeps_going(built_golden, tmp_path):
    """One session: each real edit is one round with a fresh kernel (its result changes twice), a touch,
    our own writes and a concurrent build start none, a compile error is shown and the next save retries,
    a revert is recognised as a variant tried before, Ctrl-C exits 130 with the history kept."""
    root = copy_dir(built_golden, tmp_path / "g")
    k1 = kernel_path(root, 1)
    original = k1.read_text()
    w = Watcher(watch_cmd(), root)
    try:
        first = w.block(1)
        assert "   verdict  PASSED (out)" in first
        assert any(line.startswith("   program  ") and "median of 3" in line for line in first)
        w.wait_for(r"^\[watch\] watching ")
        os.utime(kernel_path(root, 0))                                   # same content: no round
        (root / ".pypto_build" / "scratch").write_text("ours")           # our state folder: never a round
        save_like_an_editor(k1, original.replace("out[i] * 0.5f", "out[i] * 0.25f"))
        second = w.block(2)
        assert second[0].endswith("changed: kernels/aiv/" + k1.name), second
        assert f"   rebuilt  compile:aiv/{k1.stem}" in second
        assert any(line.startswith("   verdict  FAILED: Output 'out' does not match golden") and "max abs error" in line
                   for line in second), second
        assert ratio(root) == pytest.approx(4.125)                       # ((a*0.25 + 2a) * 0.5 + 3a) / a
        diverges = [line for line in second if line.startswith("   diverges ")]   # a FAIL right after a PASS
        assert len(diverges) == 1 and diverges[0].startswith(f"   diverges task #1 {k1.stem} (func_id 1): output "), second
        assert any(line.startswith("   bisect   against ") and "pypto-build bisect" in line for line in second)
        with open(k1, "w") as handle:                                    # a burst of writes: one round
            handle.write(original.replace("out[i] * 0.5f", "out[i] * 0.75f")[:100])
            handle.flush()
            handle.write(original.replace("out[i] * 0.5f", "out[i] * 0.75f")[100:])
        third = w.block(3)
        assert any("FAILED" in line for line in third)
        assert not any(line.startswith("   diverges ") for line in third)       # a FAIL after a FAIL: not traced
        assert ratio(root) == pytest.approx(4.375)                       # the kernel rebuilt again ran, not round 2's
        inject(k1, "not C++ at all;")                                    # a compile error
        fourth = w.block(4)
        assert any(line.startswith(f"   verdict  BUILD FAILED: compile:aiv/{k1.stem}") for line in fourth), fourth
        assert any("error" in line for line in fourth)
        save_like_an_editor(k1, original)                                # the next save retries
        fifth = w.block(5)
        assert "   verdict  PASSED (out)" in fifth
        assert any("(tried before)" in line for line in fifth), fifth    # the revert is round 1's variant
        assert ratio(root) == pytest.approx(4.25)
        built = subprocess.run([sys.executable, "-m", "pypto_build", "build", str(root)], capture_output=True,
                               text=True, timeout=WAIT_S)                # another run on the directory meanwhile
        assert built.returncode == 0, built.stderr
        assert "0 compiled" in built.stdout
        k2 = kernel_path(root, 2)
        k2.write_text(k2.read_text() + "\n// a comment\n")                # proves no round came in between
        sixth = w.block(6)
        assert sixth[0].endswith("changed: kernels/aic/" + k2.name), sixth
        rc, err = w.interrupt()
    finally:
        w.stop()
    assert rc == 130
    assert "Traceback" not in err
    assert any(line.startswith("[watch] stopped after 6 round(s)") for line in w.lines)
    assert sum(1 for line in w.lines if line.startswith("── round ")) == 6
    listing = subprocess.run([sys.executable, "-m", "pypto_build", "history", str(root)], capture_output=True,
                             text=True, timeout=60).stdout.splitlines()
    assert len(listing) == 1 + 3 + 1                                     # heading, 0.5 (twice), 0.25, 0.75, state
    assert [line.split()[4] for line in listing[1:4]] == ["PASSED", "FAILED", "FAILED"]
    assert listing[4].startswith("state    golden ") and " · history " in listing[4], listing[4]


@pytest.mark.slow
def test_doit_pypto_watch_polling_crash_and_golden_edit(built_golden, tmp_path):
    """`doit pypto-watch --poll` inside the directory is watch (polling): a crashing kernel is reported and the
    watch goes on; editing golden.py is a change and validates against the new golden; a broken
    kernel_config.py is an ERROR round (planned again, nothing built), and fixing it recovers."""
    root = copy_dir(built_golden, tmp_path / "g")
    doit = Path(sys.executable).with_name("doit")
    w = Watcher([str(doit), "pypto-watch", "--validate", "--poll", "--runs", "1"], root)
    try:
        assert "   verdict  PASSED (out)" in w.block(1)
        assert ", polling)" in w.wait_for(r"^\[watch\] watching ")
        k0 = kernel_path(root, 0)
        original = k0.read_text()
        inject(k0, "abort();", includes="#include <cstdlib>")
        crashed = w.block(2)
        assert any(line.startswith("   verdict  CRASHED: ") and "SIGABRT" in line for line in crashed), crashed
        k0.write_text(original)
        assert "   verdict  PASSED (out)" in w.block(3)
        golden = root / "golden.py"
        golden.write_text(golden.read_text().replace("RTOL", "RTOL_UNUSED = 0\nRTOL", 1) + "\n")
        fourth = w.block(4)
        assert fourth[0].endswith("changed: golden.py"), fourth
        assert "   rebuilt  nothing" in fourth
        config = root / "kernel_config.py"
        good = config.read_text()
        config.write_text(good + "\nthis is not python(\n")                 # a planning input: planned again
        fifth = w.block(5)
        assert any(line.startswith("   verdict  ERROR: ") and "kernel_config.py" in line for line in fifth), fifth
        config.write_text(good)
        assert "   verdict  PASSED (out)" in w.block(6)
        rc, err = w.interrupt()
    finally:
        w.stop()
    assert rc == 130 and "Traceback" not in err


@pytest.mark.slow
def test_run_errors_are_error_rounds_and_the_watch_goes_on(built_golden, tmp_path):
    """An orchestration that submits a func_id kernel_config.py does not list — a typo, or a multi-file edit
    saved orchestration first — is an ERROR round; the next consistent save gives the right verdict."""
    root = copy_dir(built_golden, tmp_path / "g")
    orch, config, golden = root / "orchestration" / "main.cpp", root / "kernel_config.py", root / "golden.py"
    good = orch.read_text()
    last_task = "        rt_submit_aic_task(2, params_t2);\n"
    w = Watcher(watch_cmd("--runs", "1"), root)
    try:
        assert "   verdict  PASSED (out)" in w.block(1)
        w.wait_for(r"^\[watch\] watching ")
        orch.write_text(good.replace("rt_submit_aic_task(2,", "rt_submit_aic_task(7,"))          # a typo
        typo = w.block(2)
        assert any(line.startswith("   verdict  ERROR: ") and "func_id 7" in line and "kernel_config.py" in line
                   for line in typo), typo
        orch.write_text(good)
        assert "   verdict  PASSED (out)" in w.block(3)
        k1 = kernel_path(root, 1)                      # a new kernel 3: out *= 2, in four files
        (k1.parent / "main_incore_3_aiv.cpp").write_text(
            k1.read_text().replace("main_incore_1_aiv", "main_incore_3_aiv")
            .replace("out[i] * 0.5f + a[i] * 2.0f", "out[i] * 2.0f"))
        golden.write_text(golden.read_text().replace("  # func_id 2\n", "  # func_id 2\n    out = out * 2.0\n"))
        orch.write_text(good.replace(last_task, last_task + last_task.replace("aic", "aiv").replace("2", "3")
                                     .replace("(3, params_t3)", "(3, params_t2)")))
        early = w.block(4)                             # saved before kernel_config.py
        assert any(line.startswith("   verdict  ERROR: ") and "func_id 3" in line for line in early), early
        entry = next(line for line in config.read_text().splitlines() if '"func_id": 1,' in line)
        config.write_text(config.read_text().replace(entry, entry + "\n" + entry.replace('"func_id": 1', '"func_id": 3')
                                                     .replace("main_incore_1_aiv", "main_incore_3_aiv")))
        complete = w.block(5)
        assert "   rebuilt  compile:aiv/main_incore_3_aiv" in complete, complete
        assert "   verdict  PASSED (out)" in complete, complete    # golden's out * 2 holds: kernel 3 ran
        rc, err = w.interrupt()
    finally:
        w.stop()
    assert rc == 130 and "Traceback" not in err


def hang(kernel: Path, started: Path, until: str = "") -> None:
    """Make `kernel` create `started` and then wait: for a signal, or until the file `until` exists."""
    wait = f"while (access(\"{until}\", F_OK) != 0) usleep(10000);" if until else "pause();"
    inject(kernel, f'{{ std::FILE* f = std::fopen("{started}", "w"); if (f) std::fclose(f); {wait} }}',
           includes="#include <cstdio>\n#include <unistd.h>")


def wait_for_file(path: Path) -> None:
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_watch_killed_mid_run_leaves_no_process_behind(built_golden, tmp_path, signum):
    """`kill PID` of a watch whose program hangs in a kernel ends it as Ctrl-C does (summary, history and build
    state kept, exit 130); after `kill -9` too, nothing it started lives on: its process group (the run server,
    multiprocessing's resource tracker) and their descendants (the run, in its own session), by `ps`."""
    root = copy_dir(built_golden, tmp_path / "g")
    started = tmp_path / "in-kernel"
    w = Watcher(watch_cmd("--runs", "1"), root)
    family: dict[int, str] = {}
    try:
        assert "   verdict  PASSED (out)" in w.block(1)
        w.wait_for(r"^\[watch\] watching ")
        hang(kernel_path(root, 0), started)
        w.wait_for(r"^── round 2 ")
        wait_for_file(started)                         # the run is in the kernel, blocked
        family = w.family()
        table = processes()
        runs = [pid for pid in family if pid != w.proc.pid and table[pid][1] == pid]    # leads its own group
        assert len(runs) == 1 and table[runs[0]][0] in family, (family, table)
        rc, err = w.interrupt(signum, group=False)
        left = wait_gone(family)
    finally:
        w.stop(family)                                 # what it left behind, when it did
    assert left == {}, left
    if signum == signal.SIGKILL:
        assert rc == -signal.SIGKILL
        return
    assert rc == 130 and "Traceback" not in err, err
    assert w.lines[-1].startswith("[watch] stopped after 1 round(s); history in "), w.lines
    assert len(History(root).variants) == 1
    built = subprocess.run([sys.executable, "-m", "pypto_build", "build", str(root)], capture_output=True, text=True,
                           timeout=WAIT_S)
    assert built.returncode == 0 and "0 compiled" in built.stdout, built.stdout     # round 2's compile was kept


@pytest.mark.slow
def test_a_burst_of_writes_is_one_round_for_its_final_content(built_golden, tmp_path):
    """20 quick writes of a kernel (half-written, wrong, then right) are one round, with the verdict of the last
    content and none for the others; a burst that ends while a round runs makes that round run again, in its
    block, and its only verdict is the final content's."""
    root = copy_dir(built_golden, tmp_path / "g")
    k1 = kernel_path(root, 1)
    original = k1.read_text()
    right = original.replace("out[i] * 0.5f", "out[i] / 2.0f")                 # the same numbers: PASSED
    wrong = original.replace("out[i] * 0.5f", "out[i] * 0.25f")                # FAILED
    w = Watcher(watch_cmd("--runs", "1"), root)
    try:
        assert "   verdict  PASSED (out)" in w.block(1)
        w.wait_for(r"^\[watch\] watching ")
        for i in range(19):                            # what an editor's or a generator's writes leave between
            k1.write_text(wrong if i % 2 else right[: len(right) * (i + 1) // 20])
            time.sleep(0.01)
        k1.write_text(right)
        burst = w.block(2)
        assert [line for line in burst if line.startswith("   verdict ")] == ["   verdict  PASSED (out)"], burst
        assert ratio(root) == pytest.approx(4.25)
        released = tmp_path / "release"
        hang(k1, tmp_path / "in-kernel", until=str(released))
        wait_for_file(tmp_path / "in-kernel")         # round 3 is running the program
        for i in range(19):
            k1.write_text(right if i % 2 else wrong[: len(wrong) * (i + 1) // 20])
            time.sleep(0.01)
        k1.write_text(wrong)
        released.touch()
        during = w.block(3)
        assert any(line.startswith("   again    kernels/aiv/") for line in during), during
        verdicts = [line for line in during if line.startswith("   verdict ")]
        assert len(verdicts) == 1 and verdicts[0].startswith("   verdict  FAILED: "), during
        assert ratio(root) == pytest.approx(4.125)                             # the final content ran
        k2 = kernel_path(root, 2)
        k2.write_text(k2.read_text() + "\n// a comment\n")                     # no round came in between
        after = w.block(4)
        assert after[0].endswith("changed: kernels/aic/" + k2.name), after
        rc, err = w.interrupt()
    finally:
        w.stop()
    assert rc == 130 and "Traceback" not in err
    assert sum(1 for line in w.lines if line.startswith("── round ")) == 4


@pytest.mark.slow
def test_watch_refuses_bad_input_in_one_line(tmp_path, l2):
    r = subprocess.run([sys.executable, "-m", "pypto_build", "watch", str(l2)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "golden.py not found" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_watch_starts_on_a_damaged_history_setting_it_aside(built_golden, tmp_path):
    """A history.json nested past the JSON parser's depth (or of wrong types): the session starts, says what it
    set aside, and the round is recorded in a new, valid history; `history` then lists it."""
    root = copy_dir(built_golden, tmp_path / "g")
    record = root / ".pypto_build" / "history.json"
    damaged = "[" * 100_000 + "]" * 100_000
    record.write_text(damaged)
    refused = subprocess.run([sys.executable, "-m", "pypto_build", "history", str(root)], capture_output=True,
                             text=True, timeout=60)
    assert refused.returncode == 2 and refused.stdout == "" and "Traceback" not in refused.stderr
    assert refused.stderr.startswith(f"pypto-build: error: {record}: not a history") and \
        len(refused.stderr.splitlines()) == 1
    w = Watcher(watch_cmd(), root)
    try:
        said = w.wait_for(r"^\[watch\] .*history\.json")
        assert said == (f"[watch] {record}: not a history pypto-build wrote (maximum recursion depth "
                        "exceeded while decoding a JSON array from a unicode string); set aside as "
                        "history.json.damaged, a new history starts")
        assert "   verdict  PASSED (out)" in w.block(1)
        w.wait_for(r"^\[watch\] watching ")
        rc, err = w.interrupt()
    finally:
        w.stop()
    assert rc == 130 and "Traceback" not in err
    assert (root / ".pypto_build" / "history.json.damaged").read_text() == damaged
    assert [v.verdict for v in History(root).variants.values()] == ["PASSED"]
    listing = subprocess.run([sys.executable, "-m", "pypto_build", "history", str(root)], capture_output=True,
                             text=True, timeout=60)
    assert listing.returncode == 0 and len(listing.stdout.splitlines()) == 3, listing.stdout + listing.stderr
    assert listing.stdout.splitlines()[2].startswith("state    golden "), listing.stdout   # the damaged one counts


def test_snapshot_counts_content_not_writes(tmp_path):
    """A touch, a same-content rename-over and unknown paths are no change; an edit, a removal are."""
    a, b, c = tmp_path / "a.cpp", tmp_path / "b.h", tmp_path / "c.py"
    for f in (a, b, c):
        f.write_text(f"// {f.name}\n")
    snap = Snapshot()
    snap.take([str(a), str(b), str(c)])
    os.utime(a, (1, 1))
    save_like_an_editor(b, "// b.h\n")
    assert snap.changed([str(a), str(b), str(tmp_path / "unknown.cpp")]) == []
    a.write_text("// a.cpp, edited\n")
    c.unlink()
    assert snap.changed([str(a), str(b), str(c)]) == [(str(a), "modified"), (str(c), "removed")]
    snap.take([str(a)])
    assert snap.changed([str(a)]) == []


def test_inputs_roles_and_what_an_unknown_path_means(tmp_path):
    inputs = Inputs(tmp_path)
    inputs.add(["kernels/aiv/k.cpp"], "source")
    inputs.add([str(tmp_path / "kernels/aiv/k.cpp")], "header")       # the first role stays
    assert inputs.roles == {str(tmp_path / "kernels/aiv/k.cpp"): "source"}
    assert inputs.starts_round(str(tmp_path / "ptoas" / "new.pto"))
    assert inputs.starts_round(str(tmp_path / "data" / "x.bin"))
    assert inputs.starts_round(str(tmp_path / "kernel_config.py"))
    assert not inputs.starts_round(str(tmp_path / "kernels" / "aiv" / "notes.txt"))
    assert not inputs.starts_round(str(tmp_path / ".pypto_build" / "data" / "x"))
    assert not inputs.starts_round("/elsewhere/kernel_config.py")
    assert ignored(tmp_path, str(tmp_path / "sub" / "dfx_outputs" / "x.json"))
    assert not ignored(tmp_path, str(tmp_path / "kernels" / "x.cpp"))


def variant_digest(root, binaries):
    states = unit_states(root, [UnitRef(f"compile:{b}", "k.cpp", b, "argv") for b in binaries])
    return None if states is None else variant_id(states)


def test_history_keys_variants_by_binary_content(tmp_path):
    (tmp_path / "k.so").write_bytes(b"one")
    first = variant_digest(tmp_path, ["k.so"])
    history = History(tmp_path)
    assert history.record(first, "PASSED", [0.002, 0.003, 0.0025], ["k.cpp"]) == (history.variants[first], False)
    (tmp_path / "k.so").write_bytes(b"two")
    second = variant_digest(tmp_path, ["k.so"])
    assert second != first
    history.record(second, "FAILED", [0.001], ["k.cpp"])
    (tmp_path / "k.so").write_bytes(b"one")
    assert variant_digest(tmp_path, ["k.so"]) == first
    _, seen = history.record(first, "PASSED", [0.004], ["k.cpp"])
    assert seen
    history.save()
    again = History(tmp_path)
    assert [v.rounds for v in again.variants.values()] == [2, 1]            # oldest first; the revert counted
    lines = again.listing()
    assert lines[1].split()[4:6] == ["PASSED", "4.000"] and lines[2].split()[4] == "FAILED"
    assert lines[2].split()[7] == "-75.0%"                              # 1 ms against the first's 4 ms
    assert lines[1].split()[7] == "-"                                   # the first is what they are against
    assert variant_digest(tmp_path, ["missing.so"]) is None


GOOD = {"digest": "ab" * 16, "first_seen": 1.7e9, "last_seen": 1.7e9, "verdict": "PASSED", "seconds": [0.002],
        "changed": ["k.cpp"], "rounds": 1}
DAMAGED = {
    "seconds_text": (json.dumps({"variants": [{**GOOD, "seconds": "fast"}]}), "variant #1's 'seconds' is 'fast', "
                     "not a list of run times"),
    "first_seen_text": (json.dumps({"variants": [GOOD, {**GOOD, "digest": "cd", "first_seen": "monday"}]}),
                        "variant #2's 'first_seen' is 'monday', not a time"),
    "time_past_time_t": (json.dumps({"variants": [{**GOOD, "last_seen": 1e20}]}),
                         "variant #1's 'last_seen' is 1e+20, not a time"),
    "rounds_bool": (json.dumps({"variants": [{**GOOD, "rounds": True}]}), "'rounds' is True, not a count"),
    "deep": ("[" * 100_000 + "]" * 100_000, "maximum recursion depth exceeded"),
    "not_json": ("{not json", "Expecting property name"),
    "no_list": (json.dumps({"variants": {}}), "no list of variants"),
}


@pytest.mark.parametrize("damage", list(DAMAGED))
def test_a_damaged_history_is_one_line_and_watch_sets_it_aside(tmp_path, damage):
    text, says = DAMAGED[damage]
    record = tmp_path / ".pypto_build" / "history.json"
    record.parent.mkdir()
    record.write_text(text)
    with pytest.raises(Damaged) as refused:
        History(tmp_path)
    line = str(refused.value)
    assert line.startswith(f"{record}: ") and says in line and "\n" not in line and "remove it" in line, line
    (tmp_path / ".pypto_build" / "history.json.damaged").write_text("an earlier one")      # kept, not overwritten
    history, said = History.set_aside(tmp_path)
    assert history.variants == {} and said.endswith("set aside as history.json.damaged.1, a new history starts")
    assert (tmp_path / ".pypto_build" / "history.json.damaged.1").read_text() == text
    assert (tmp_path / ".pypto_build" / "history.json.damaged").read_text() == "an earlier one"
    assert History(tmp_path).variants == {} and json.loads(record.read_text()) == {"variants": []}
    assert History.set_aside(tmp_path)[1] is None


def test_identity_files_are_the_covering_checkouts_head_and_index(pto_isa, tmp_path):
    from pypto_build.watch.inputs import identity_files

    assert identity_files([str(pto_isa / "include"), str(pto_isa / "include" / "pto")]) == \
        [str(pto_isa / ".git" / "HEAD"), str(pto_isa / ".git" / "index")]
    assert identity_files([str(tmp_path / "elsewhere")]) == []
