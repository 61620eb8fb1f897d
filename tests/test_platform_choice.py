"""Which platform a directory is built for: the recorded one, the overrides, the fallback to host, and host
outputs kept apart from the binaries and stamp PyPTO reads for the recorded platform."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pypto_build.errors import MetaError, ToolchainError
from pypto_build.plan.graph import load_graph
from pypto_build.platforms.host.places import HOST_STAMP, host_binary
from pypto_build.platforms import choose
from pypto_build.testing import synth

SIMPLER_HERE = importlib.util.find_spec("simpler") is not None


def _meta(root: Path, platform, name: str = "compiled_meta.json") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    schema = 2 if name == "distributed_meta.json" else 1
    (root / name).write_text(json.dumps({"schema": schema, "params": [], "platform": platform}))
    return root


def _never(name: str) -> str | None:
    return None


def _no_simpler(name: str) -> str | None:
    return "simpler is not importable here" if name.endswith("sim") else None


def test_the_recorded_platform_is_the_target_unless_overridden(tmp_path):
    d = _meta(tmp_path / "d", "a5sim")
    assert choose(d, env={}, cannot_serve=_never).name == "a5sim"
    assert choose(d, env={}, cannot_serve=_never).why() == "recorded in compiled_meta.json"
    by_flag = choose(d, "host", env={"PYPTO_BUILD_PLATFORM": "a2a3"}, cannot_serve=_never)
    assert (by_flag.name, by_flag.why()) == ("host", "--platform; compiled_meta.json records a5sim")
    by_env = choose(d, env={"PYPTO_BUILD_PLATFORM": "host"}, cannot_serve=_never)
    assert (by_env.name, by_env.why()) == ("host", "$PYPTO_BUILD_PLATFORM; compiled_meta.json records a5sim")
    l3 = _meta(tmp_path / "l3", "a2a3", "distributed_meta.json")
    assert choose(l3, env={}, cannot_serve=_never).name == "a2a3"
    multi = _meta(tmp_path / "multi" / "next_levels" / "x", "a5sim").parent.parent
    assert choose(multi, env={}, cannot_serve=_never).name == "a5sim"


def test_a_recorded_simulator_that_cannot_be_served_falls_back_to_host_saying_why(tmp_path):
    d = _meta(tmp_path / "d", "a2a3sim")
    choice = choose(d, env={}, cannot_serve=_no_simpler)
    assert choice.name == "host" and choice.recorded == "a2a3sim"
    assert choice.why() == "not the recorded a2a3sim: simpler is not importable here"
    # asked for explicitly: no fallback (loading it then says what is missing)
    assert choose(d, "a2a3sim", env={}, cannot_serve=_no_simpler).name == "a2a3sim"
    # a device platform never falls back: its build needs CANN, its replay an NPU
    assert choose(_meta(tmp_path / "dev", "a2a3"), env={}, cannot_serve=_no_simpler).name == "a2a3"


def test_nothing_or_nonsense_recorded_means_host_and_says_so(tmp_path):
    assert choose(tmp_path, env={}).why() == "no platform recorded in the directory"
    odd = choose(_meta(tmp_path / "odd", "gpu9"), env={})
    assert odd.name == "host" and odd.why().startswith("not the recorded gpu9: not a platform PyPTO has")


@pytest.mark.parametrize("name, text, what", [
    ("compiled_meta.json", '{"schema": 1, "params": [], "platform": "a2a3', "not valid JSON"),
    ("compiled_meta.json", '{"schema": 1, "params": [], "platform": 5}', "platform: must be a string"),
    ("distributed_meta.json", '{"schema": 2, "params": {}, "platform": "a2a3"}', "params: must be a list"),
])
def test_a_damaged_sidecar_is_refused_never_read_as_no_platform(tmp_path, name, text, what):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / name).write_text(text)
    for requested in (None, "host"):        # an explicit platform does not make a damaged directory whole
        with pytest.raises(MetaError) as info:
            choose(broken, requested, env={})
        assert str(info.value).startswith(f"Invalid {name} in {broken / name}: {what}")
        assert "recompile via ir.compile()" in str(info.value) and "\n" not in str(info.value)
    multi = tmp_path / "multi" / "next_levels"
    _meta(multi / "a", "a5sim")
    (multi / "b").mkdir()
    (multi / "b" / "compiled_meta.json").write_text('{"schema": 1, "par')
    with pytest.raises(MetaError, match=r"next_levels/b/compiled_meta\.json: not valid JSON"):
        choose(multi.parent, env={})


@pytest.mark.skipif(SIMPLER_HERE, reason="the fallback wording is for a machine without simpler")
def test_the_first_line_names_platform_runtime_and_pto_isa_and_the_fallback(tmp_path):
    root = synth.write_l2(tmp_path / "d", kernels=2)           # records a2a3sim, as PyPTO writes it
    graph = load_graph(root)
    assert graph.platform.name == "host"
    assert graph.banner().startswith("pypto-build: platform host (not the recorded a2a3sim: simpler (PyPTO's "
                                     "runtime) is not importable here — install it for a2a3sim's results")
    assert " · runtime: pypto_build host runtime pypto_build-" in graph.banner()
    assert graph.banner().endswith(", tensormap_and_ringbuffer · PTO-ISA: none (PTO_ISA_ROOT unset: the host "
                                   "runtime's fallback headers)")


def test_a_device_platform_without_its_toolchain_is_one_line_naming_ascend_home_path(tmp_path, monkeypatch):
    root = synth.write_l2(tmp_path / "d", kernels=1)
    monkeypatch.delenv("ASCEND_HOME_PATH", raising=False)
    with pytest.raises(ToolchainError) as info:
        load_graph(root, "a2a3")
    assert "\n" not in str(info.value) and str(info.value).startswith("ASCEND_HOME_PATH is not set")
    done = subprocess.run(["pypto-build", "build", "--platform", "a5", str(root)], capture_output=True, text=True,
                          timeout=300, env={k: v for k, v in os.environ.items() if k != "ASCEND_HOME_PATH"})
    assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1 and "ASCEND_HOME_PATH" in done.stderr


@pytest.mark.slow
def test_host_builds_never_touch_what_pypto_reads_and_the_noop_says_the_same_first_line(tmp_path):
    root = synth.write_l2(tmp_path / "d", kernels=2, golden=True)
    # What PyPTO left for the recorded platform: its payloads, a sidecar, its stamp.
    pypto = {"cache/binary_context.json": b'{"platform": "a2a3sim", "schema": 1}\n',
             "cache/incore_1_aiv_main_incore_1_aiv_a2a3sim.bin": b"pypto payload",
             "kernels/aiv/main_incore_1_aiv.so": b"pypto sidecar", "orchestration/main.so": b"pypto orchestration"}
    for rel, data in pypto.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    env = {**os.environ, "PYPTO_BUILD_PLATFORM": ""}
    first = subprocess.run(["pypto-build", "replay", "--validate", "--platform", "host", str(root)],
                           capture_output=True, text=True, timeout=300, env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    head = first.stdout.splitlines()[0]
    assert head.startswith("pypto-build: platform host (--platform; compiled_meta.json records a2a3sim) · runtime: ")
    assert "Golden validation: PASSED" in first.stdout
    assert {rel: (root / rel).read_bytes() for rel in pypto} == pypto
    assert (root / host_binary("orchestration/main.cpp")).is_file() and (root / HOST_STAMP).is_file()
    assert json.loads((root / HOST_STAMP).read_text())["platform"] == "host"
    again = subprocess.run(["pypto-build", "build", "--platform", "host", str(root)], capture_output=True, text=True,
                           timeout=300, env=env)
    assert again.returncode == 0 and again.stdout.splitlines()[0] == head
    assert again.stdout.splitlines()[-1] == "pypto-build: 0 compiled, 3 up to date"


def test_a_kernel_missing_pto_isa_headers_says_to_set_pto_isa_root(tmp_path):
    from conftest import inject
    from pypto_build.api import build
    from pypto_build.errors import BuildError
    root = synth.write_l2(tmp_path / "d", kernels=1)
    inject(synth.kernel_path(root, 0), "(void)0;", includes="#include <pto/common/type.hpp>")
    with pytest.raises(BuildError) as info:
        build(root, platform="host")
    assert info.value.failures[0].headline.endswith(
        "fatal error: pto/common/type.hpp: No such file or directory — PTO-ISA headers are missing "
        "(pto/common/type.hpp): set PTO_ISA_ROOT to a pto-isa checkout (the host platform's fallback headers cover "
        "pto/pto-inst.hpp only), then rebuild (compile:aic/main_incore_0_aic)")


@pytest.mark.slow
def test_a_rebuilt_binary_identical_to_the_one_there_leaves_that_file_alone(tmp_path):
    """First sight of a directory someone else built (PyPTO, say): every unit compiles once to learn its
    headers, and a binary with the same bytes keeps the file that was there (inode and mtime)."""
    from pypto_build.api import build
    root = synth.write_l2(tmp_path / "d", kernels=2)
    build(root, platform="host")
    binary = root / host_binary("kernels/aiv/main_incore_1_aiv.cpp")
    before = binary.stat()
    for entry in (root / ".pypto_build").iterdir():         # forget everything but the binaries
        if entry.name != "host":
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    again = build(root, platform="host")
    assert len(again.compiled) == 3
    after = binary.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
