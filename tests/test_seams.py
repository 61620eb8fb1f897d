"""The seams issue 12 introduced, tested directly: the option table rendered twice, the platform
interface and its registry, the task dicts of a planned graph, confinement, the CLI's verb table.
Fast: no g++ run (the graph is planned with `FakePlatform`), no torch."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from pypto_build import options, stages
from pypto_build.cache import Caches
from pypto_build.confine import confine, inside, resolves_inside
from pypto_build.errors import LayoutError, PyptoBuildError, ToolchainError
from pypto_build.graph import load_graph
from pypto_build.runconfig import RunConfig, RunSpec
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
    from pypto_build.platforms import PLATFORMS, HostPlatform, load_platform, platform_class
    assert PLATFORMS == ("host", "a2a3sim", "a5sim", "a2a3", "a5")
    assert platform_class("host") is HostPlatform
    assert [platform_class(name).name for name in PLATFORMS] == list(PLATFORMS)     # one implementation each
    with pytest.raises(ToolchainError, match="ASCEND_HOME_PATH is not set, and a2a3/a5 device builds need CANN"):
        load_platform("a5", {"PATH": os.environ["PATH"]})
    with pytest.raises(ToolchainError, match="unknown platform 'gpu'"):
        platform_class("gpu")
    with pytest.raises(ToolchainError, match="unknown platform 'gpu'; choose one of host, a2a3sim"):
        load_platform("gpu")


def test_host_platform_places_binaries_and_refuses_a_bad_pto_isa_root(tmp_path):
    from pypto_build.platforms import HostPlatform
    with pytest.raises(ToolchainError, match="no include/ directory there"):
        HostPlatform.locate({"PTO_ISA_ROOT": str(tmp_path), "PATH": os.environ["PATH"]})
    host = HostPlatform.locate({"PATH": os.environ["PATH"]})
    # apart from PyPTO's places (beside the source, cache/): a host build never overwrites PyPTO's binaries
    assert host.kernel_binary(1, "aiv", "kernels/aiv/k.cpp", False) == ".pypto_build/host/kernels/aiv/k.so"
    assert host.kernel_binary(1, "aiv", "../common/k.cpp", False) == ".pypto_build/host/__/common/k.so"  # under it
    assert host.kernel_binary(3, "aiv", "/ext/my_kernel.cpp", True) == \
        ".pypto_build/host/cache/external/3_aiv_my_kernel.so"
    assert host.orchestration_binary("orchestration/main.cpp") == ".pypto_build/host/orchestration/main.so"
    assert host.stamp_path == ".pypto_build/host/cache/binary_context.json"
    out = host.kernel_binary(1, "aiv", "kernels/aiv/k.cpp", False)
    argv = host.kernel_argv("aiv", "kernels/aiv/k.cpp", out, ["inc"], sub_dir=tmp_path,
                            runtime="tensormap_and_ringbuffer")
    assert argv[: len(host.compiler.command)] == host.compiler.command
    assert argv[-3:] == ("-o", out, "./kernels/aiv/k.cpp")       # names are data, never options (out starts ".")
    assert "-D__DAV_VEC__" in argv
    assert "-I./inc" in argv and "-std=c++17" in argv            # no PTO_ISA_ROOT: the fallback headers
    assert host.binary_context("tensormap_and_ringbuffer").stamp()["pto_isa_revision"] == "none"


def test_task_dicts_carry_the_runs_caches_and_run_settings(tmp_path):
    from pypto_build.engine.tasks import task_dicts
    root = synth.write_l2(tmp_path / "d", kernels=2)
    graph = load_graph(root, platform=FakePlatform())
    caches = Caches(str(tmp_path / "cache"), None)
    groups = task_dicts(graph, caches, RunSpec(RunConfig(enable_dump_args=1), 9.0, quiet=True))
    assert list(groups) == list(stages.ALL)
    compiles = groups[stages.COMPILE] + groups[stages.ORCH]
    assert sorted(f"{d['actions'][0][1][0].task}" for d in compiles) == sorted(graph.compile_tasks)
    assert [d["actions"][0][1][3:] for d in compiles] == [[".pypto_build/state/fake", caches.directory, None, None]] \
        * len(compiles)        # the platform's state folder, the caches, no launcher
    (replay,) = groups[stages.REPLAY]
    assert replay["actions"][0][1][1:] == [RunConfig(platform="fake", enable_dump_args=1), 9.0, True]  # the graph's; -q
    assert replay["task_dep"] == [stages.task(stages.STAMP, ".")]
    default = task_dicts(graph)                                 # no caches, the default run settings
    assert all(d["actions"][0][1][4:] == [None, None, None] for d in default[stages.COMPILE])


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
    from pypto_build import cli
    _parser, verbs = cli._parsers()
    assert list(verbs) == [v.name for v in cli.VERBS]
    assert all(callable(v.run) and v.help and v.description for v in cli.VERBS)
