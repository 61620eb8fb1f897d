"""Compile stage, the command (issue 23 item 7): assembled once, run by the build, listed by compdb.

`compile_command` is the one function that turns a unit into what runs. The build's compiles are
captured as they were started (the stand-in compiler's `$PYPTO_FAKE_CXX_LOG`; for g++, a recording
`$CXX` and launcher), and `compile_commands.json` must hold exactly those argv — but for the two
documented differences of names (docs/guide.md, compdb): the output's own name where the build
writes a temp file, and no depfile flags.
"""
from __future__ import annotations

import json
import os
import shlex
import stat
import sys
from pathlib import Path

import pytest

from pypto_build.core import atomic
from pypto_build.api import build
from pypto_build.cache import prelude_store_dir
from pypto_build import pipeline
from pypto_build.options import Request
from pypto_build.cli.main import main as cli_main
from pypto_build.cli.compdb import compile_commands
from pypto_build.compile.command import compile_command, listed, output_at
from pypto_build.plan.graph import load_graph
from pypto_build.toolchain.launcher import Launcher
from pypto_build.core.procs import path_arg
from pypto_build.core.shared_flag import SharedFlag
from pypto_build.testing import FakePlatform, fake_compiler, synth
from pypto_build.compile.plan import CompileUnit

FAKE = FakePlatform()


def unit(**fields) -> CompileUnit:
    base = dict(task="compile:aiv/k", kind="kernel", sub_rel="sub", source="sub/kernels/aiv/k.cpp",
                output="sub/kernels/aiv/k.so", argv=("cxx", "-shared", "-O2", "-Wl,--as-needed", "-o",
                                                     "./kernels/aiv/k.so", "./kernels/aiv/k.cpp"),
                stamp_path="sub/cache/binary_context.json", argv_key="key", covered=())
    return CompileUnit(**{**base, **fields})


LAUNCHER = Launcher(("/usr/bin/distcc",), SharedFlag(), "g++")


# ---------------------------------------------------------------------------
# the function itself
# ---------------------------------------------------------------------------


def test_the_command_writes_the_given_binary_and_depfile_before_the_last_o(tmp_path):
    real = os.path.realpath(tmp_path)
    command = compile_command(unit(), "sub/kernels/aiv/.k.so.tmp", "sub/kernels/aiv/.k.so.d.tmp", root=tmp_path)
    assert command.cwd == "sub" and command.target == "./kernels/aiv/k.so" and not command.launched
    assert command.compile == ("cxx", "-shared", "-O2", "-Wl,--as-needed", f"-ffile-prefix-map={real}/sub=.",
                               "-MD", "-MF", "./kernels/aiv/.k.so.d.tmp", "-MT", "./kernels/aiv/k.so",
                               "-o", "./kernels/aiv/.k.so.tmp", "./kernels/aiv/k.cpp")
    assert command.link == ()


def test_listed_names_the_output_and_leaves_out_the_depfile_flags(tmp_path):
    real = os.path.realpath(tmp_path)
    assert listed(unit(), root=tmp_path).compile == (
        "cxx", "-shared", "-O2", "-Wl,--as-needed", f"-ffile-prefix-map={real}/sub=.", "-o", "./kernels/aiv/k.so",
        "./kernels/aiv/k.cpp")


def test_a_toolchain_cwd_gets_paths_relative_to_it_and_no_prefix_map(tmp_path):
    tool = tmp_path / "toolchain"
    command = compile_command(unit(cwd=str(tool)), "sub/out.tmp", "sub/out.d", root=tmp_path)
    assert command.cwd == str(tool)
    assert not any(a.startswith("-ffile-prefix-map") for a in command.compile)
    assert command.compile[-3:] == ("-o", "../sub/out.tmp", "./kernels/aiv/k.cpp")
    assert command.target == "../sub/kernels/aiv/k.so"


def test_a_launcher_splits_into_a_launched_compile_and_a_link_here(tmp_path):
    real = os.path.realpath(tmp_path)
    command = compile_command(unit(), "sub/b.tmp", "sub/d.tmp", "sub/o.tmp.o", LAUNCHER, root=tmp_path)
    assert command.launched
    assert command.compile == ("/usr/bin/distcc", "g++", "-O2", f"-ffile-prefix-map={real}/sub=.", "-MD", "-MF",
                               "./d.tmp", "-MT", "./kernels/aiv/k.so", "-o", "./o.tmp.o", "-c", "./kernels/aiv/k.cpp")
    assert command.link == ("cxx", "-shared", "-O2", "-Wl,--as-needed", "-o", "./b.tmp", "./o.tmp.o")
    assert listed(unit(), LAUNCHER, tmp_path).compile[-3:] == ("./kernels/aiv/k.so.o", "-c", "./kernels/aiv/k.cpp")


def test_a_command_a_launcher_cannot_split_runs_whole_without_it(tmp_path):
    debug = unit(argv=("cxx", "-shared", "-g", "-o", "./k.so", "./k.cpp"))
    command = compile_command(debug, "sub/b.tmp", None, None, LAUNCHER, root=tmp_path)
    assert not command.launched and command.compile[0] == "cxx" and command.link == ()


def test_output_at_replaces_only_the_last_o():
    assert output_at(("c", "-o", "a", "-x", "-o", "b", "s"), "new") == ("c", "-o", "a", "-x", "-o", "new", "s")


# ---------------------------------------------------------------------------
# compdb == what the build ran
# ---------------------------------------------------------------------------


def runs(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def as_listed(argv: list[str], unit: CompileUnit, root: Path, cwd: str) -> list[str]:
    """The build's argv under compdb's names: its depfile flags dropped (checked: exactly ours) and its
    temp binary or object (checked: a temp file of the output) named as compdb names them."""
    argv = list(argv)
    target = os.path.relpath(root / unit.output, cwd)
    m = argv.index("-MD")
    flags = argv[m:m + 5]
    assert flags[:2] == ["-MD", "-MF"] and flags[3:] == ["-MT", path_arg(target)]
    assert atomic.is_temp_of(root / unit.output, os.path.basename(flags[2])) and flags[2].endswith(".d.tmp")
    del argv[m:m + 5]
    o = len(argv) - 1 - argv[::-1].index("-o")
    temp = argv[o + 1]
    assert atomic.is_temp_of(root / unit.output, os.path.basename(temp))
    argv[o + 1] = path_arg(target + ".o" if temp.endswith(".tmp.o") else target)
    return argv


def what_ran(graph, *logs: Path) -> dict[str, tuple[list[str], str]]:
    """task -> (argv, cwd) of the first logged run that compiled each unit's source (not --version, -E -v or
    a link: those have no depfile flags). A launcher's log goes first: its record is what the build started."""
    sources = {os.path.basename(u.source): u for p in graph.plans for u in p.units}
    found: dict[str, tuple[list[str], str]] = {}
    for run in [r for log in logs for r in runs(log)]:
        names = [os.path.basename(a) for a in run["argv"] if os.path.basename(a) in sources]
        if names and "-MD" in run["argv"]:
            found.setdefault(sources[names[-1]].task, (run["argv"], run["cwd"]))
    return found


def assert_compdb_is_what_ran(root: Path, graph, ran: dict[str, tuple[list[str], str]],
                              store: str | None = None) -> list[dict]:
    entries = {e["file"]: e for e in compile_commands(graph, store)}
    units = [u for p in graph.plans for u in p.units]
    assert sorted(ran) == sorted(u.task for u in units)
    for u in units:
        argv, cwd = ran[u.task]
        entry = entries[os.path.normpath(root / u.source)]
        assert os.path.realpath(entry["directory"]) == cwd
        assert entry["arguments"] == as_listed(argv, u, root, cwd), u.task
    return list(entries.values())


def test_compdb_holds_the_argv_the_fake_build_ran(tmp_path, monkeypatch):
    """Kernels and the orchestration, with the stand-in compiler (its command line cannot be split: a
    launcher leaves it whole, and compdb too)."""
    root = synth.write_l2(tmp_path / "d", kernels=2)
    log = tmp_path / "cxx.log"
    monkeypatch.setenv(fake_compiler.LOG_ENV, str(log))
    graph = load_graph(root, platform=FAKE, launcher=str(recorder(tmp_path / "rec-launcher", tmp_path / "l.log")))
    assert pipeline.run(graph.layout.root, Request(), graph=graph).ok
    assert not (tmp_path / "l.log").exists()            # nothing went through the launcher
    entries = assert_compdb_is_what_ran(root, graph, what_ran(graph, log))
    assert all(e["arguments"][:3] == [sys.executable, "-S", fake_compiler.__file__] for e in entries)


RECORD = ("import json, os, sys\n"
          "with open(sys.argv[1], 'a') as log:\n"
          "    log.write(json.dumps({'argv': sys.argv[2:], 'cwd': os.getcwd()}) + '\\n')\n")


def recorder(path: Path, log: Path, then: str = "") -> Path:
    """A script that appends its argv (as started: its own path first) and cwd to `log`, then runs `then`
    (a command; empty: its arguments are the command) with its arguments."""
    script = path.with_suffix(".py")
    script.write_text(RECORD)
    path.write_text(f'#!/bin/sh\n"{sys.executable}" -S "{script}" "{log}" "$0" "$@"\nexec {then} "$@"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def host_dir(tmp_path, monkeypatch):
    """An L2 directory (two kernels) on the host platform, with $CXX a recording g++."""
    root = synth.write_l2(tmp_path / "d", kernels=2, header_every=0)
    log = tmp_path / "cxx.log"
    monkeypatch.setenv("CXX", str(recorder(tmp_path / "rec-g++", log, "g++")))
    return root, log


def test_compdb_holds_the_argv_the_host_build_ran(host_dir):
    root, log = host_dir
    assert build(root).ok
    graph = load_graph(root, "host")
    entries = assert_compdb_is_what_ran(root, graph, what_ran(graph, log))
    assert all(any(a.startswith("-ffile-prefix-map=") for a in e["arguments"]) for e in entries)


def test_compdb_with_a_launcher_holds_the_launched_compile_the_build_ran(host_dir, tmp_path):
    """Kernels go through the launcher (-c there, linked here); the orchestration (-g) runs whole here.
    `pypto-build compdb --launcher` lists exactly that."""
    root, log = host_dir
    launcher = recorder(tmp_path / "rec-launcher", tmp_path / "launcher.log")
    assert build(root, launcher=str(launcher)).ok
    graph = load_graph(root, "host", launcher=str(launcher))
    ran = what_ran(graph, tmp_path / "launcher.log", log)
    launched = {t for t, (argv, _cwd) in ran.items() if argv[0] == str(launcher)}
    assert launched == {u.task for p in graph.plans for u in p.units if u.kind == "kernel"}
    assert_compdb_is_what_ran(root, graph, ran)
    assert cli_main(["compdb", "--launcher", str(launcher), "-o", str(tmp_path / "cc.json"), str(root)]) == 0
    assert json.loads((tmp_path / "cc.json").read_text()) == compile_commands(graph)


@pytest.mark.slow          # a whole build against the PTO-ISA-style tree (as tests/test_prelude.py's)
def test_compdb_holds_the_prelude_flags_the_host_build_ran(pto_tree, tmp_path, monkeypatch):
    """On a platform that plans preludes (host, g++, a PTO-ISA-style tree) each kernel compiles with its
    precompiled prelude (`-Winvalid-pch -include <entry>/prelude.h`): compdb lists exactly those flags, and
    `pypto-build compdb` finds the same store (the user's, as the build did)."""
    root = synth.write_l2(tmp_path / "d", kernels=4, header_every=0)    # two kernels per core type: a prelude each
    log = tmp_path / "cxx.log"
    monkeypatch.setenv("CXX", str(recorder(tmp_path / "rec-g++", log, "g++")))
    assert build(root).ok
    graph = load_graph(root, "host")
    ran = what_ran(graph, log)
    took = {t for t, (argv, _cwd) in ran.items() if "-Winvalid-pch" in argv}
    assert took == {u.task for p in graph.plans for u in p.units if u.kind == "kernel"} and len(took) == 4
    store = prelude_store_dir(None)
    entries = assert_compdb_is_what_ran(root, graph, ran, store)
    headers = {e["arguments"][e["arguments"].index("-include") + 1] for e in entries if "-include" in e["arguments"]}
    assert len(headers) == 2 and all(h.startswith(store + os.sep) and h.endswith("/prelude.h") for h in headers)
    assert cli_main(["compdb", "-o", str(tmp_path / "cc.json"), str(root)]) == 0
    assert json.loads((tmp_path / "cc.json").read_text()) == compile_commands(graph, store)
    assert cli_main(["compdb", "--no-pch", "-o", str(tmp_path / "plain.json"), str(root)]) == 0
    assert not any("-include" in e["arguments"] for e in json.loads((tmp_path / "plain.json").read_text()))


def test_a_failed_compile_shows_the_command_that_ran(tmp_path, monkeypatch):
    root = synth.write_l2(tmp_path / "d", kernels=1, header_every=0)
    kernel = synth.kernel_path(root, 0)
    kernel.write_text(kernel.read_text() + "#error broken on purpose\n")
    log = tmp_path / "cxx.log"
    monkeypatch.setenv(fake_compiler.LOG_ENV, str(log))
    graph = load_graph(root, platform=FAKE)
    result = pipeline.run(graph.layout.root, Request(keep_going=True), graph=graph, check=False)
    (failed,) = result.failures
    started = [r["argv"] for r in runs(log) if os.path.basename(kernel) in map(os.path.basename, r["argv"])]
    assert len(started) == 1 and "-MD" in started[0]
    assert failed.message.splitlines()[1] == f"  command (in .): {shlex.join(started[0])}"
