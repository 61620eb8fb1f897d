"""Each platform is declared once (issue 34 item 2): its record in `platforms/records.py`. A platform added
there — here the fake one, as a test declares it — is seen wherever platforms are named (the names, the
registry, the no-op keys, the choice, the `--platform` help), and what a recorded platform falls back to is
its record's, not a rule on its name."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pypto_build.errors import ToolchainError
from pypto_build.plan.graph import load_graph
from pypto_build.platforms import (RECORDS, Record, cannot_serve, choose, implementation, key_module,
                                   platform_names)
from pypto_build.testing import FAKE_RECORD, FakePlatform, synth


def fake(name: str = "fake", **fields) -> Record:
    """The fake platform's record under `name`, with `fields` (serves, unserved, fallback, noop_key, arch, simulator)."""
    return Record(name, FAKE_RECORD.planning, FAKE_RECORD.execution, **fields)


def recording(root: Path, platform: str) -> Path:
    """A directory whose compiled_meta.json records `platform`."""
    root.mkdir(parents=True)
    (root / "compiled_meta.json").write_text(json.dumps({"schema": 1, "params": [], "platform": platform}))
    return root


def test_a_platform_declared_in_one_record_is_seen_wherever_platforms_are_named(monkeypatch, tmp_path):
    monkeypatch.setitem(RECORDS, "fake", fake(serves=("fake", "fake-v2"), noop_key=".host.noop_key"))
    assert platform_names() == ("host", "a2a3sim", "a5sim", "a2a3", "a5", "fake")
    assert implementation("fake").platform_class is FakePlatform
    assert implementation("fake").locate({}) == FakePlatform(name="fake")
    with pytest.raises(ToolchainError, match="the fake platform runs nothing"):
        implementation("fake").runner()
    assert key_module("fake") is key_module("host")           # the light module its record names
    older = recording(tmp_path / "older", "fake-v2")            # a name the record serves besides its own
    assert (choose(older, env={}).name, choose(older, env={}).why()) == ("fake", "recorded in compiled_meta.json")
    monkeypatch.setenv("PYPTO_BUILD_PLATFORM", "fake")          # judged against the names, then planned by name
    graph = load_graph(synth.write_l2(tmp_path / "d", kernels=2))
    assert graph.platform == FakePlatform() and graph.banner().startswith("pypto-build: platform fake (")


def test_the_fallback_of_a_recorded_platform_is_its_records_not_its_names(monkeypatch, tmp_path):
    monkeypatch.setitem(RECORDS, "fake", fake(unserved=lambda name: f"no {name} runtime here", fallback="host"))
    monkeypatch.setitem(RECORDS, "othersim", fake("othersim", unserved=lambda name: "nor this one"))
    assert cannot_serve("fake") == "no fake runtime here" and cannot_serve("host") is None
    chosen = choose(recording(tmp_path / "f", "fake"), env={}, cannot_serve=cannot_serve)
    assert (chosen.name, chosen.why()) == ("host", "not the recorded fake: no fake runtime here")
    # named like a simulator, yet no fallback declared: built for what it records (locating says what is missing)
    assert choose(recording(tmp_path / "s", "othersim"), env={}, cannot_serve=cannot_serve).name == "othersim"
    assert [name for name, r in RECORDS.items() if r.fallback == "host"] == ["a2a3sim", "a5sim", "fake"]
    assert choose(recording(tmp_path / "a", "a2a3"), env={}, cannot_serve=lambda name: "never").name == "a2a3"


def test_the_platform_option_lists_the_records():
    from pypto_build.options import BUILD
    helped = next(o.help for o in BUILD if o.dest == "platform")
    assert helped.startswith("target platform: host, a2a3sim, a5sim, a2a3 or a5 (default: ")
    code = ("from pypto_build.platforms import RECORDS; from pypto_build.testing import FAKE_RECORD\n"
            "RECORDS['fake'] = FAKE_RECORD\n"
            "from pypto_build.options import BUILD; print(next(o.help for o in BUILD if o.dest == 'platform'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("target platform: host, a2a3sim, a5sim, a2a3, a5 or fake (default: ")


def test_the_records_are_light():
    """The console script's quick answer reads them (noop keys, whether a platform can serve here) before
    `dataclasses`, `typing` or `json` load: a record is a plain class, and no platform's code is imported."""
    code = ("import sys; from pypto_build.platforms import cannot_serve, key_module; cannot_serve('a2a3sim'); "
            "key_module('host'); print(' '.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    loaded = set(out.stdout.split())
    assert "pypto_build.platforms.records" in loaded
    assert sorted(loaded & {"dataclasses", "typing", "json", "pypto_build.platforms.base",
                            "pypto_build.platforms.registry", "pypto_build.platforms.host.platform"}) == []



def test_simplers_platforms_and_what_it_simulates_are_the_records(monkeypatch):
    """simpler's implementation keeps no table of its own: which platforms it builds for, their architecture and
    whether they run in its simulator come from the records (no name ending in "sim" decides)."""
    from pypto_build.platforms.simpler import argv
    from pypto_build.platforms.simpler.run import require_simpler

    assert argv.simpler_platforms() == ("a2a3sim", "a5sim", "a2a3", "a5")
    assert [argv.simulated(n) for n in argv.simpler_platforms()] == [True, True, False, False]
    assert argv.arch_of("a5sim") == "a5"
    with pytest.raises(ToolchainError, match="'host' does not run on simpler; choose one of a2a3sim, a5sim, a2a3, a5"):
        require_simpler("host")
    with pytest.raises(ToolchainError, match="not one simpler compiles for"):
        argv.arch_of("host")
    monkeypatch.setitem(RECORDS, "b7emu", fake("b7emu", arch="a5", simulator=True))
    monkeypatch.setitem(RECORDS, "a5", fake("a5", arch="a5", simulator=True))      # the record says it, not the name
    assert argv.arch_of("b7emu") == "a5" and argv.simulated("b7emu") and argv.simulated("a5")
    require_simpler("b7emu")
