"""Multi-orchestration parents and L3 programs through the public API."""
from __future__ import annotations

import pytest

from pypto_build import CompiledProgram, DistributedCompiledProgram, DistributedConfig
from pypto_build.testing import synth
from pypto_build.api import build, validate
from pypto_build.run.golden import compare, load_golden

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.slow


def test_multi_orch_parent_validate_covers_every_sub_build(tmp_path):
    root = synth.write_multi_orch(tmp_path / "m", golden=True)
    first = validate(root)
    assert first.names("ran", "validate:") == ["validate:orch_a", "validate:orch_b"]
    assert validate(root).names("up-to-date", "validate:") == ["validate:orch_a", "validate:orch_b"]


def test_from_dir_on_a_multi_orch_sub_build(tmp_path):
    root = synth.write_multi_orch(tmp_path / "m", golden=True)
    sub = root / "next_levels" / "orch_b"
    program = CompiledProgram.from_dir(sub)
    golden = load_golden(sub)
    pairs = golden.inputs()
    expected = golden.expected(dict(pairs))          # from the inputs before the run
    program(*[v for _, v in pairs])
    assert compare(golden, dict(pairs), expected) == ["out"]
    with pytest.raises(FileNotFoundError, match="parent of a multi-orch build"):
        CompiledProgram.from_dir(root)


def test_distributed_program_from_dir_with_config_override(tmp_path):
    root = synth.write_l3(tmp_path / "l3", golden=True)
    build(root)
    program = DistributedCompiledProgram.from_dir(root)
    assert program.device_ids == (0, 1)
    golden = load_golden(root)
    pairs = golden.inputs()
    expected = golden.expected(dict(pairs))
    program(*[v for _, v in pairs])
    assert compare(golden, dict(pairs), expected) == ["out"]
    other = DistributedCompiledProgram.from_dir(root, distributed_config=DistributedConfig(device_ids=[4, 7]))
    assert other.device_ids == (4, 7)
    pairs = golden.inputs()
    other(*[v for _, v in pairs])                    # ranks 0 and 1 on devices 4 and 7
    assert compare(golden, dict(pairs), expected) == ["out"]
    with pytest.raises(ValueError, match="device_ids"):
        DistributedConfig(device_ids=[1, 1])
    with pytest.raises(FileNotFoundError, match="not a distributed"):
        DistributedCompiledProgram.from_dir(synth.write_l2(tmp_path / "l2"))


def test_replay_api_and_doit_replay_on_an_l3_dir(tmp_path):
    import subprocess
    from pypto_build import replay
    root = synth.write_l3(tmp_path / "l3", golden=True)
    golden = load_golden(root)
    names = [n for n, _ in golden.inputs()]
    values = [v for _, v in golden.inputs()]
    out = values[names.index("out")]
    result = replay(root, *values, validate=True, progress=None)
    assert result.validated == ["out"] and out.abs().sum() > 0
    done = subprocess.run(["doit", "replay", "--validate"], cwd=root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Golden validation: PASSED" in done.stdout and "2 rank(s)" in done.stdout
