"""What a run keeps of its tensors (issue 35 item 3): one copy of each output under `.pypto_build/replay/`, none
with PYPTO_BUILD_KEEP_REPLAY=0, and a write that was killed half way is never read as a result.
Real runs of the built fixtures (host runtime), real files, real processes."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import copy_dir

torch = pytest.importorskip("torch")


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["pypto-build", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def kept(root: Path) -> list[str]:
    folder = root / ".pypto_build" / "replay"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["l2", "l3"])
def test_a_run_keeps_its_outputs_once_and_keep_replay_0_none(built_golden, tmp_path, kind):
    """The outputs only (not golden.py's inputs), replaced whole by each run; the golden result without its
    inputs (generate_inputs makes them again); `PYPTO_BUILD_KEEP_REPLAY=0` keeps no tensors and removes the
    last run's; a value that is not yes/no is refused in one line before anything runs."""
    from pypto_build.testing import synth

    root = copy_dir(built_golden, tmp_path / "d") if kind == "l2" else synth.write_l3(tmp_path / "d", golden=True)
    done = run("replay", "--validate", str(root))
    assert done.returncode == 0, done.stdout + done.stderr
    assert kept(root) == ["out.pt"]
    stored = torch.load(root / ".pypto_build" / "golden" / "golden.pt", weights_only=True)
    assert stored["inputs"] is None and list(stored["expected"]) == ["out"]     # the expected output, no inputs
    assert run("replay", str(root)).returncode == 0 and kept(root) == ["out.pt"]
    refused = run("replay", "--validate", str(root), env={"PYPTO_BUILD_KEEP_REPLAY": "maybe"})
    assert refused.returncode == 2 and "PYPTO_BUILD_KEEP_REPLAY='maybe'" in refused.stderr
    assert kept(root) == ["out.pt"]
    done = run("replay", "--validate", str(root), env={"PYPTO_BUILD_KEEP_REPLAY": "0"})
    assert done.returncode == 0 and "Golden validation: PASSED" in done.stdout, done.stdout + done.stderr
    assert kept(root) == [] and not [p for p in (root / ".pypto_build").iterdir() if p.name.startswith(".replay")]


KILLED = '''
import os, signal, sys
import torch
from pypto_build.run import execution

def half_then_killed(value, handle):
    handle.write(b"half of a tensor")
    handle.flush()
    os.kill(os.getpid(), signal.SIGKILL)

torch.save = half_then_killed
execution.save_outputs(sys.argv[1], {"out": torch.full((8,), 9.0)})
'''


def test_a_write_killed_half_way_is_never_read_as_a_result(tmp_path):
    """The outputs are written into a fresh folder that replaces the last run's only when whole: a writer killed
    half way leaves the last run's outputs as they were, and the next write removes what it left."""
    from pypto_build.run.execution import save_outputs

    root = tmp_path / "d"
    root.mkdir()
    save_outputs(root, {"out": torch.full((8,), 1.0)})
    before = (root / ".pypto_build" / "replay" / "out.pt").read_bytes()
    killed = subprocess.run([sys.executable, "-c", KILLED, str(root)], capture_output=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL
    assert (root / ".pypto_build" / "replay" / "out.pt").read_bytes() == before
    assert torch.equal(torch.load(root / ".pypto_build" / "replay" / "out.pt"), torch.full((8,), 1.0))
    left = [p for p in (root / ".pypto_build").iterdir() if p.name.startswith(".replay.")]
    assert len(left) == 1 and left[0].name.endswith(".tmp")
    save_outputs(root, {"out": torch.full((8,), 2.0)})
    assert [p.name for p in (root / ".pypto_build").iterdir() if p.name.startswith(".replay")] == []
    assert torch.equal(torch.load(root / ".pypto_build" / "replay" / "out.pt"), torch.full((8,), 2.0))
