"""Running a built directory on the host runtime: what the replay child does (reference §8).

`check_replayable` says whether a directory can run, `execute` runs it and writes
the diagnostics asked for, `save_outputs` keeps the run's outputs. Used by the
child process (`run_child`) and by `CompiledProgram`; it builds nothing and runs
no golden (`replayer.replay` and `replay_actions` put the steps together).
torch is imported only inside these functions, never on a build-only path.
"""
from __future__ import annotations

import io
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

from .. import atomic
from ..errors import PyptoBuildError
from ..layout import BuildKind, STATE_DIR, classify, confine_tree, load_layout
from ..runconfig import LOG_LEVELS, RunConfig


def check_replayable(work_dir: Path) -> Path:
    """The sub-build to run, or one clear error (PyPTO's L2/L3 rule, §8.1).

    Its sidecar is validated here, before anything is built or run (an L3 build needs distributed_meta.json).
    """
    from ..sidecars import DISTRIBUTED_META_FILENAME, load_sidecar

    kind, _markers = classify(work_dir)
    if kind is BuildKind.MULTI_ORCH:
        subs = ", ".join(str(s.path) for s in load_layout(work_dir).sub_builds)
        raise PyptoBuildError(f"{work_dir} is a multi-orchestration parent; replay one of its sub-builds "
                              f"instead: {subs}")
    if load_sidecar(work_dir) is None and kind is BuildKind.L3:
        raise PyptoBuildError(f"{Path(work_dir) / DISTRIBUTED_META_FILENAME} not found; a distributed build needs "
                              "it to run (device ids, parameters) — restore it or recompile via ir.compile()")
    return Path(work_dir)


def execute(sub_dir: Path, args: Sequence, config: RunConfig, *, names: Sequence[str] | None = None,
            say: Callable[[str], None] = print, device_ids: Sequence[int] | None = None,
            on_task: Callable[[str], None] | None = None) -> list[str]:
    """Run a built directory on the host runtime; write requested diagnostics. Returns dfx files.

    L3 (no kernel_config.py, an orchestration/host_orch.py: PyPTO's rule) runs the
    host driver with one worker process per device id; L2 runs in this process.
    """
    from ..runtime import write_args_dump, write_swimlane
    from ..runtime import HostExecutor

    if config.enable_chip_swimlane or config.enable_dump_args:
        base = Path(sub_dir).absolute()
        confine_tree(base, base / "dfx_outputs", "dfx_outputs folder")
        clear_dfx(base / "dfx_outputs")
    for line in config.unsupported():
        say(line)
    say("[execute] running on the host runtime (pypto_build: a functional CPU reference, not an NPU model)...")
    if not (sub_dir / "kernel_config.py").exists() and (sub_dir / "orchestration" / "host_orch.py").exists():
        from ..sidecars import load_distributed_meta
        from ..runtime import run_distributed
        ids = device_ids or load_distributed_meta(sub_dir / "distributed_meta.json").distributed_config.device_ids
        if on_task is not None:
            on_task("the host driver orchestration/host_orch.py")
        return run_distributed(sub_dir, args, config=config, device_ids=ids, say=say)
    threshold = LOG_LEVELS.index(config.effective_log_level)

    def log(level: str, text: str) -> None:
        if level == "always" or (level in LOG_LEVELS and LOG_LEVELS.index(level) >= threshold and level != "null"):
            say(f"[{level}] {text}")

    want_trace = bool(config.enable_chip_swimlane or config.enable_dump_args)
    with HostExecutor(sub_dir, log=log, on_task=on_task) as executor:
        trace = executor.run(args, param_names=names, trace=want_trace)
    written = []
    dfx = sub_dir / "dfx_outputs"
    if config.enable_chip_swimlane:
        path = dfx / f"merged_swimlane_{time.strftime('%Y%m%d_%H%M%S')}.json"
        write_swimlane(trace, path)
        written.append(str(path))
    if config.enable_dump_args:
        written.append(str(write_args_dump(trace, dfx / "args_dump")))
    return written


def clear_dfx(dfx: Path) -> None:
    """Remove what an earlier L2 run of ours wrote under dfx_outputs/ (PyPTO's own files stay): runs never mix."""
    for old in dfx.glob("merged_swimlane_*.json"):
        old.unlink(missing_ok=True)
    shutil.rmtree(dfx / "args_dump", ignore_errors=True)


def save_outputs(work_dir: Path, named: dict) -> None:
    """Keep the tensors of the last replay as `.pypto_build/replay/<name>.pt`, and only those.

    Written into a fresh folder that then replaces the previous one, so outputs of two runs never mix.
    """
    import torch

    base = Path(work_dir).absolute()
    state = base / STATE_DIR
    confine_tree(base, state / "replay", "replay outputs folder")
    fresh = Path(tempfile.mkdtemp(prefix=".replay.", suffix=".tmp", dir=_made(state)))
    try:
        for name, value in named.items():
            if isinstance(value, torch.Tensor):
                buf = io.BytesIO()
                torch.save(value.detach().cpu(), buf)
                atomic.write_bytes(fresh / f"{name}.pt", buf.getvalue())
        old = state / "replay"
        if old.exists():
            gone = Path(tempfile.mkdtemp(prefix=".replay.", suffix=".old", dir=state))
            os.replace(old, gone / "replay")
            shutil.rmtree(gone, ignore_errors=True)
        os.replace(fresh, old)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)


def _made(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
