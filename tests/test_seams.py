"""The seams issue 12 introduced, tested directly: the option table rendered twice, the platform
interface and its registry, the task dicts of a planned graph, confinement, the CLI's verb table.
Fast: no g++ run (the graph is planned with `FakePlatform`), no torch."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from pypto_build.cli.main import options
from pypto_build.core import stages
from pypto_build.cache import Caches
from pypto_build.core.confine import confine, inside, resolves_inside
from pypto_build.errors import LayoutError, PyptoBuildError, ToolchainError
from pypto_build.plan.graph import load_graph
from pypto_build.builddir.runconfig import RunConfig, RunSpec
from pypto_build.testing import FakePlatform, synth


def test_the_option_table_renders_the_same_options_for_argparse_and_doit():
    table = (*options.BUILD, *options.RUN, options.VALIDATE)
    parser = argparse.ArgumentParser()
    options.add_to_parser(parser, table)
    longs = {s for a in parser._actions for s in a.option_strings if s.startswith("--")}
    doit = options.doit_options(table)
    assert {f"--{d['long']}" for d in doit} <= longs
    assert [d["name"] for d in doit] == [o.dest for o in table]
    assert {d["name"]: d["default"] for d in doit if d["type"] is not bool} == \
        {o.dest: o.default for o in table if o.kind in ("int", "float", "str")}
    assert next(d for d in doit if d["name"] == "validate")["inverse"] == "no-validate"


def test_run_spec_is_made_from_flags_in_one_place(monkeypatch):
    monkeypatch.setenv("PYPTO_RUN_TIMEOUT", "7")
    parser = argparse.ArgumentParser()
    options.add_to_parser(parser, (*options.BUILD, *options.RUN))
    spec = options.run_spec(parser.parse_args(["--swimlane", "--dump-args-level", "2", "--device-id", "3"]))
    assert spec == RunSpec(RunConfig(device_id=3, enable_chip_swimlane=4, enable_dump_args=2), 7.0)
    assert options.run_spec({"run_timeout": 2.5}).timeout == 2.5             # doit's dict, same names
    assert options.run_spec(parser.parse_args(["-q"])).quiet and options.run_spec({"quiet": True}).quiet
    assert RunSpec().timeout == 7.0                                            # the default reads the env too
    with pytest.raises(PyptoBuildError, match="log_level"):
        options.run_spec({"log_level": "loud"})


def test_the_registry_knows_every_pypto_platform_and_says_what_is_missing():
    from pypto_build.platforms import HostPlatform, Runner, implementation, platform_names
    assert platform_names() == ("host", "a2a3sim", "a5sim", "a2a3", "a5")
    assert implementation("host").platform_class is HostPlatform
    assert implementation("host").locate({"PATH": os.environ["PATH"]}).name == "host"
    assert [implementation(name).name for name in platform_names()] == list(platform_names())  # one each
    assert all(isinstance(implementation(name).runner(), Runner) and implementation(name).runner().name == name
               for name in platform_names())
    with pytest.raises(ToolchainError, match="ASCEND_HOME_PATH is not set, and a2a3/a5 device builds need CANN"):
        implementation("a5").locate({"PATH": os.environ["PATH"]})
    with pytest.raises(ToolchainError, match="unknown platform 'gpu'; choose one of host, a2a3sim"):
        implementation("gpu")


def test_the_platform_interface_is_two_small_ones_planning_and_running():
    """Issue 23 item 5, issue 34 item 2: planning (toolchain, argv, outputs, identities, post-steps) and execution
    (run a built L2 or L3 directory) are separate interfaces of a handful of members each; what every platform
    shares is data (`Facts`, the same fields for each, and its `Record`), not members; no planning class can
    run."""
    from pypto_build.platforms import Facts, NoopKey, Platform, Record, Runner, implementation
    from pypto_build.platforms.base import Command, UnitSource

    def members(cls) -> set[str]:
        return {n for n in (*vars(cls), *getattr(cls, "__annotations__", {})) if not n.startswith("_")}

    questions = {"locate", "compiler_for", "command", "binary_context"}
    assert members(Platform) == questions | {"name", "facts"}
    assert set(Platform.__abstractmethods__) == questions
    assert set(Facts.__dataclass_fields__) == {"runtimes", "runtime_label", "pto_isa_label", "stamp_path",
                                               "system_dirs", "covered_roots", "no_preludes", "noop"}
    assert set(NoopKey.__dataclass_fields__) == {"toolchain_key", "watched_checkouts"}  # what the no-op record keys
    assert set(Record.__slots__) == {"name", "serves", "unserved", "fallback", "planning", "execution", "noop_key",
                                     "arch", "simulator", "dump_payloads"}
    assert members(Runner) == {"run_l2", "run_l3", "prepare", "prepare_l3"}     # the prepares: optional (nothing by default)
    assert set(Runner.__abstractmethods__) == {"run_l2", "run_l3"}
    for name in ("host", "a2a3sim", "a5sim", "a2a3", "a5", FakePlatform):
        cls = name if isinstance(name, type) else implementation(name).platform_class
        assert not hasattr(cls, "execute") and not hasattr(cls, "run_l2") and not hasattr(cls, "run_l3"), cls
        assert members(cls) - members(Platform) <= {"compiler", "facts"} | set(cls.__dataclass_fields__), cls
    assert {f for f in UnitSource.__dataclass_fields__} == {"kind", "source", "sub_dir", "runtime", "include_dirs",
                                                            "func_id", "core_type", "external"}
    assert {f for f in Command.__dataclass_fields__} == {"output", "argv", "cwd", "steps"}


@pytest.mark.parametrize("name", ["host", "a2a3sim", "a2a3"])
def test_planning_imports_no_execution_and_running_no_planning(name):
    """A platform's planning module loads none of its runner's code (nor the runtime, torch or simpler), and its
    runner loads none of planning's toolchain code: each side is what its process needs."""
    import subprocess
    import sys
    code = ("import sys; from pypto_build.platforms import implementation; i = implementation(sys.argv[1]); "
            "i.platform_class; print(' '.join(sorted(sys.modules))); i.runner(); print(' '.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code, name], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    planning, both = (set(line.split()) for line in out.stdout.splitlines())
    running = {"pypto_build.platforms.host.run", "pypto_build.platforms.simpler.runner",
               "pypto_build.platforms.simpler.run", "pypto_build.platforms.simpler.l3", "torch", "simpler"}
    assert sorted(m for m in planning if m in running or m.startswith("pypto_build.platforms.host.runtime")) == []
    code = ("import sys; from pypto_build.platforms import implementation; implementation(sys.argv[1]).runner(); "
            "print(' '.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code, name], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    loaded = set(out.stdout.split())
    assert {"pypto_build.platforms.host.run" if name == "host" else "pypto_build.platforms.simpler.runner"} <= loaded
    assert sorted(loaded & {"pypto_build.platforms.host.platform", "pypto_build.platforms.simpler.sim",
                            "pypto_build.platforms.simpler.device", "pypto_build.platforms.simpler.env",
                            "pypto_build.toolchain.compiler", "pypto_build.platforms.simpler.cann", "torch"}) == []
    assert both >= planning


def test_host_platform_places_binaries_and_refuses_a_bad_pto_isa_root(tmp_path):
    from pypto_build.platforms import HostPlatform, UnitSource
    with pytest.raises(ToolchainError, match="no include/ directory there"):
        HostPlatform.locate({"PTO_ISA_ROOT": str(tmp_path), "PATH": os.environ["PATH"]})
    host = HostPlatform.locate({"PATH": os.environ["PATH"]})
    rt = "tensormap_and_ringbuffer"

    def kernel(source: str, external: bool = False, func_id: int = 1):
        return host.command(UnitSource("kernel", source, tmp_path, rt, ("inc",), func_id, "aiv", external))

    # apart from PyPTO's places (beside the source, cache/): a host build never overwrites PyPTO's binaries
    assert kernel("kernels/aiv/k.cpp").output == ".pypto_build/host/kernels/aiv/k.so"
    assert kernel("../common/k.cpp").output == ".pypto_build/host/__/common/k.so"  # under it
    assert kernel("/ext/my_kernel.cpp", True, 3).output == ".pypto_build/host/cache/external/3_aiv_my_kernel.so"
    orch = host.command(UnitSource("orchestration", "orchestration/main.cpp", tmp_path, rt))
    assert orch.output == ".pypto_build/host/orchestration/main.so" and orch.cwd == tmp_path and orch.steps == ()
    assert host.facts.stamp_path == ".pypto_build/host/cache/binary_context.json"
    command = kernel("kernels/aiv/k.cpp")
    argv, out = command.argv, command.output
    assert command.cwd == tmp_path and command.steps == ()
    assert argv[: len(host.compiler.command)] == host.compiler.command
    assert argv[-3:] == ("-o", out, "./kernels/aiv/k.cpp")       # names are data, never options (out starts ".")
    assert "-D__DAV_VEC__" in argv
    assert "-I./inc" in argv and "-std=c++17" in argv            # no PTO_ISA_ROOT: the fallback headers
    assert host.binary_context("tensormap_and_ringbuffer").stamp_fields()["pto_isa_revision"] == "none"


def test_task_dicts_carry_the_runs_caches_and_run_settings(tmp_path):
    from pypto_build.engine.tasks import task_dicts
    root = synth.write_l2(tmp_path / "d", kernels=2)
    graph = load_graph(root, platform=FakePlatform())
    caches = Caches(str(tmp_path / "cache"), None)
    groups = task_dicts(graph, caches, RunSpec(RunConfig(enable_dump_args=1), 9.0, quiet=True))
    assert list(groups) == list(stages.ALL)
    compiles = groups[stages.COMPILE] + groups[stages.ORCH]
    assert sorted(f"{d['actions'][0][1][0].task}" for d in compiles) == sorted(graph.compile_tasks)
    assert [d["actions"][0][1][3:] for d in compiles] == [[".pypto_build/state/fake", caches.directory, None, None,
                                                           None, None, None, False]] \
        * len(compiles)        # the platform's state folder, the caches, no launcher, no precompiled prelude
    (replay,) = groups[stages.REPLAY]
    program, *rest = replay["actions"][0][1]
    assert (program.path, program.kind.name, program.platform) == (graph.layout.root, "L2", "fake")  # the plan's
    assert rest == [RunConfig(enable_dump_args=1), 9.0, True, None]    # the caller's config (the entry adds the
    # platform); -q; no caller in this process hears the run (`RunSpec.in_process`)
    assert program.config(rest[0]) == RunConfig(platform="fake", enable_dump_args=1)
    assert replay["task_dep"] == [stages.task(stages.STAMP, ".")]
    default = task_dicts(graph)                                 # no caches, the default run settings
    assert all(d["actions"][0][1][4:] == [None] * 6 + [False] for d in default[stages.COMPILE])


def test_confinement_answers_by_name_or_by_resolved_path(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "out.h").write_text("")
    os.symlink(tmp_path / "out.h", root / "sub" / "link.h")
    assert inside(str(root / "sub" / "link.h"), str(root))                 # by name: inside
    assert not resolves_inside(str(root / "sub" / "link.h"), str(root))    # resolved: outside
    assert not inside(str(root) + "-other/x", str(root))                   # a prefix is not a parent
    with pytest.raises(LayoutError, match=r"link.h: header resolves outside the build directory .*; fix it"):
        confine(root, root / "sub" / "link.h", "header", "fix it")
    assert confine(root, root / "sub", "dir") == Path(os.path.realpath(root / "sub"))


def test_every_cli_verb_has_a_parser_and_a_runner():
    from pypto_build.cli import main as cli
    _parser, verbs = cli._parsers()
    assert list(verbs) == [v.name for v in cli.VERBS]
    assert all(callable(v.run) and v.help and v.description for v in cli.VERBS)
