"""One tool, one behaviour, whichever front end (issue 11, item 16).

`pypto-build build|replay|validate` and `doit pypto-build|replay|pypto-validate` (entry points, run
inside the directory) accept the same options and give the same exit status and the
same one-line errors; the build root is found from a subdirectory; and the smaller
promises: `--dump-args DIR`, `--dry-run --recompile`, explain's counts, a recorded
`replay --validate` verdict, `PTOAS_ROOT` named, errors on stderr, `cache stats` for
people, no piled-up DFX or replay outputs.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import copy_dir, edit
from pypto_build.cli.doit_plugins import NAMES
from pypto_build.builddir.state_dir import STATE_DIR
from pypto_build.platforms.host.places import HOST_OUTPUTS
from pypto_build.testing import synth

torch = pytest.importorskip("torch")


def run(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**os.environ, **(env or {})})


@pytest.fixture
def g(built_golden, tmp_path) -> Path:
    return copy_dir(built_golden, tmp_path / "g")


DOIT = {verb: name for name, verb in NAMES.items()}      # the doit spelling of each verb


def long_options(help_text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", help_text)) - {"--help", "--dir"}


@pytest.mark.parametrize("verb", ["build", "replay", "validate"])
def test_both_front_ends_accept_the_same_options(g, verb):
    ours = long_options(run("pypto-build", verb, "--help").stdout)
    theirs = long_options(run("doit", "help", DOIT[verb], cwd=g).stdout)
    assert ours and ours == theirs, (ours ^ theirs)


def one_line(out: subprocess.CompletedProcess) -> str:
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, out.stderr
    return lines[0]


OUTCOMES = {
    "ok": (None, 0),
    "compile error": (lambda d: edit(synth.kernel_path(d, 1), "\nnot C++;\n"), 1),
    "wrong result": (lambda d: synth.kernel_path(d, 1).write_text(
        synth.kernel_path(d, 1).read_text().replace("0.5f", "0.75f")), 1),
    "bad kernel_config.py": (lambda d: (d / "kernel_config.py").write_text("KERNELS = [\n"), 2),
}


VERBS = {"build": ["build"], "validate": ["validate"], "replay": ["replay", "--validate", "-q"]}
# every outcome through every verb, except that a program that runs (ok, wrong result) runs through one
# verb each: validate and replay --validate share the child process that runs it.
SLOW = {("ok", "replay"), ("wrong result", "validate")}


@pytest.mark.slow
@pytest.mark.parametrize("outcome, verb", [(o, VERBS[v]) for o in OUTCOMES for v in VERBS if (o, v) not in SLOW])
def test_same_outcome_same_exit_status_and_line(built_golden, tmp_path, outcome, verb):
    change, status = OUTCOMES[outcome]
    a, b = copy_dir(built_golden, tmp_path / "a"), copy_dir(built_golden, tmp_path / "b")
    if change:
        change(a), change(b)
    if outcome == "wrong result" and verb == ["build"]:
        status = 0
    ours = run("pypto-build", *verb, str(a))
    theirs = run("doit", DOIT[verb[0]], *verb[1:], cwd=b)
    assert (ours.returncode, theirs.returncode) == (status, status), (ours.stderr, theirs.stderr)
    if status:
        assert one_line(ours).replace(str(a), "DIR") == one_line(theirs).replace(str(b), "DIR")
    assert "Traceback" not in ours.stderr + theirs.stderr


# issue 34 item 4: one outcome, one status, from every front end that runs a program
def wrong_result(d: Path) -> Path:
    OUTCOMES["wrong result"][0](d)
    return d


def fifo_in_data(d: Path) -> Path:
    """A FIFO among golden.py's data/ files: bad input (it would block the reader), found by the run's stage."""
    (d / "data").mkdir(exist_ok=True)
    os.mkfifo(d / "data" / "in.bin")
    return d


def not_a_build_directory(d: Path) -> Path:
    nothing = d.parent / f"{d.name}-notbuild"
    nothing.mkdir()
    (nothing / "notes.txt").write_text("not a build directory\n")
    return nothing


# a watch of one round (`watch(rounds=1)` returns its status), ended as every front end ends (`exits.guarded`)
WATCH_ONE_ROUND = ("import sys; from pathlib import Path; from pypto_build.core.exits import guarded; "
                   "from pypto_build.options import request; from pypto_build.watch import Settings, watch; "
                   "sys.exit(guarded(lambda: watch(Path(sys.argv[1]), Settings(request({}), runs=1), rounds=1)))")


def ci_record(d: Path) -> int:
    """The status `ci` records for the directory (ci itself exits 1 when it is not 0)."""
    report = d.parent / f"{d.name}.json"
    out = run("pypto-build", "ci", "-q", "--json", str(report), str(d))
    status = json.loads(report.read_text())["directories"][0].get("exit_status", "not recorded")
    assert out.returncode == (1 if status else 0), out.stderr
    return status


def api_status(d: Path) -> int:
    """`validate(..., check=False).status`; what the API raises, as the error tree maps it."""
    from pypto_build import validate
    from pypto_build.errors import PyptoBuildError, exit_status

    try:
        return validate(d, check=False).status
    except PyptoBuildError as exc:
        return exit_status(exc)


FRONT_ENDS = {
    "replay --validate": lambda d: run("pypto-build", "replay", "--validate", "-q", str(d)).returncode,
    "validate": lambda d: run("pypto-build", "validate", "-q", str(d)).returncode,
    "ci": ci_record,
    "watch round": lambda d: run(sys.executable, "-c", WATCH_ONE_ROUND, str(d)).returncode,
    "api": api_status,
    "doit run": lambda d: run("pypto-build", "doit", "run", str(d), "validate:.").returncode,
}


@pytest.mark.slow
@pytest.mark.parametrize("change, status", [(wrong_result, 1), (fifo_in_data, 2), (not_a_build_directory, 2)],
                         ids=["wrong result", "a FIFO in data", "not a build directory"])
def test_one_outcome_one_status_from_every_front_end(built_golden, tmp_path, change, status):
    """The status `BuildResult.status` decides is what replay, validate, ci's record for the directory, a watch
    round, the API and `pypto-build doit run` (issue 34 item 5: through the pipeline; refused input was 1 there)
    give: a FIFO in data/ is bad input (2) whichever stage meets it."""
    got = {}
    for name, front_end in FRONT_ENDS.items():
        d = copy_dir(built_golden, tmp_path / name.replace(" ", "_"))
        got[name] = front_end(change(d))
    assert got == dict.fromkeys(FRONT_ENDS, status)


@pytest.mark.slow
def test_the_build_root_is_found_from_a_subdirectory(g, l3):
    sub = g / "kernels" / "aiv"
    out = run("pypto-build", "build", ".", cwd=sub)
    assert out.returncode == 0 and not (sub / ".pypto_build").exists()
    assert "0 compiled, 4 up to date" in out.stdout
    edit(synth.kernel_path(g, 1))
    out = run("doit", "pypto-build", cwd=sub)
    assert out.returncode == 0 and "1 compiled" in out.stdout and not (sub / ".pypto_build").exists()
    deep = l3 / "next_levels" / "chip_a" / "kernels"               # an L3 sub-build's folder: the L3 root
    out = run("pypto-build", "explain", str(deep))
    assert out.returncode == 0 and "0 would compile" in out.stdout
    chip = l3 / "next_levels" / "chip_a"                           # no state there: only its host binaries
    assert [p.relative_to(chip).as_posix() for p in (chip / STATE_DIR).iterdir()] == [HOST_OUTPUTS]


@pytest.mark.slow
def test_dump_args_before_the_directory(g):
    out = run("pypto-build", "replay", "--dump-args", str(g))
    assert out.returncode == 0, out.stderr
    # the switch is level 1: only dump()-marked arguments, and the host runtime has no marks (as simpler: none)
    assert "enable_dump_args 1 (--dump-args) dumps only the arguments marked" in out.stdout
    assert not (g / "dfx_outputs" / "args_dump").exists()


@pytest.mark.slow
def test_dry_run_shows_what_recompile_will_do(g):
    out = run("pypto-build", "build", "--dry-run", "--recompile", str(g))
    assert out.returncode == 0
    assert out.stdout.count("forced by --recompile") == 4
    assert out.stdout.splitlines()[-1].startswith("pypto-build: 4 would compile, 0 up to date")
    built = run("pypto-build", "build", "--recompile", str(g))
    assert "4 compiled, 0 up to date" in built.stdout


@pytest.mark.slow
def test_explain_counts_are_builds(g):
    edit(synth.kernel_path(g, 0))
    edit(g / "kernels" / "common.h")                  # kernels 0 and 2 include it
    explained = run("pypto-build", "explain", str(g)).stdout.splitlines()[-1]
    built = run("pypto-build", "build", str(g)).stdout
    would = re.match(r"pypto-build: (\d+) would compile, (\d+) up to date", explained).groups()
    did = re.search(r"pypto-build: (\d+) compiled, (\d+) up to date", built).groups()
    assert would == did == ("2", "2")


@pytest.mark.slow
def test_replay_validate_records_its_verdict_for_validate(g):
    out = run("pypto-build", "replay", "--validate", str(g))
    assert out.returncode == 0 and "Golden validation: PASSED" in out.stdout
    again = run("pypto-build", "validate", str(g))
    assert again.returncode == 0 and "Golden validation: PASSED (cached" in again.stdout
    assert "[execute] running" not in again.stdout


@pytest.mark.slow
def test_ptoas_root_is_named_with_the_paths_it_searched(tmp_path):
    root = synth.write_l2(tmp_path / "p", kernels=2, pto=True)
    out = run("pypto-build", "build", str(root), env={"PTOAS_ROOT": "/bad"})
    assert out.returncode == 0
    assert "[pto->cpp] skipped: ptoas not found under PTOAS_ROOT=/bad (looked for /bad/ptoas, /bad/ptoas.sh, " \
           "/bad/bin/ptoas)" in out.stdout


@pytest.mark.parametrize("args, env", [(["build", "/nonexistent/dir"], {}), (["validate", "/nonexistent/dir"], {}),
                                       (["cache", "stats"], {"PYPTO_BUILD_PCH_SIZE": "lots"}),
                                       (["doit", "list", "/nonexistent/dir"], {})])
def test_errors_go_to_stderr(args, env):
    out = run("pypto-build", *args, env={"PYPTO_BUILD_CACHE": "", **env})
    assert out.returncode == 2 and out.stdout == "" and out.stderr.startswith("pypto-build: error:")


@pytest.mark.slow
def test_cache_stats_counts_binaries_in_sizes_for_people(g, built_golden, tmp_path):
    cache = tmp_path / "cache"
    fresh = synth.write_l2(tmp_path / "fresh", kernels=3, golden=True)
    assert run("pypto-build", "build", "--cache-dir", str(cache), str(fresh)).returncode == 0
    clone = tmp_path / "clone"
    subprocess.run(["cp", "-r", str(fresh), str(clone)], check=True)
    subprocess.run(["rm", "-rf", str(clone / ".pypto_build")], check=True)
    assert "4 from cache" in run("pypto-build", "build", "--cache-dir", str(cache), str(clone)).stdout
    line, preludes, variants = run("pypto-build", "cache", "stats", "--cache-dir", str(cache)).stdout.strip().split("\n")
    assert preludes == f"precompiled preludes {cache / 'preludes'}: 0 (0 B), limit 2.0 GiB", preludes
    assert variants == (f"kept variants {cache / 'variants'}: 0 binaries and sources (0 B), limit 2.0 GiB; "
                        "0 evicted"), variants
    assert re.fullmatch(rf"cache {re.escape(str(cache))}: 4 binaries \(\d+\.\d KiB\) \+ 4 index records "
                        r"\(\d+(\.\d KiB| B)\), limit 5\.0 GiB; 4 hits, 4 misses, 8 stores, 0 corrupt dropped, "
                        r"0 evicted", line), line


@pytest.mark.slow
def test_dfx_and_replay_outputs_never_pile_up_or_mix(g):
    for _ in range(2):
        assert run("pypto-build", "replay", "--swimlane", "--dump-args", str(g)).returncode == 0
    assert len(list((g / "dfx_outputs").glob("merged_swimlane_*.json"))) == 1
    (g / ".pypto_build" / "replay" / "stale.pt").write_bytes(b"from an older run")
    assert run("pypto-build", "replay", str(g)).returncode == 0
    assert sorted(p.name for p in (g / ".pypto_build" / "replay").iterdir()) == ["out.pt"]      # the outputs only
