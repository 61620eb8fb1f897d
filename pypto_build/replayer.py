"""Replay: build what changed, run the program on the host runtime, validate (reference §8).

`replay(work_dir, *tensors, ...)` is PyPTO's replay with the same steps and
words; the build step is ours (content-keyed, so `recompile` defaults to False).
torch is imported only here and in the runtime, never on a build-only path.
"""
from __future__ import annotations

import io
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence, TextIO

from . import atomic
from .errors import PyptoBuildError
from .layout import BuildKind, STATE_DIR, classify, confine_tree, load_layout
from .runconfig import LOG_LEVELS, RunConfig


@dataclass
class ReplayResult:
    work_dir: Path
    build: object                         # BuildResult
    validated: list[str] = field(default_factory=list)
    dfx: list[str] = field(default_factory=list)      # files written under dfx_outputs/


def check_replayable(work_dir: Path) -> Path:
    """The sub-build to run, or one clear error (PyPTO's L2/L3 rule, §8.1).

    Its sidecar is validated here, before anything is built or run (an L3 build needs distributed_meta.json).
    """
    from .meta import DISTRIBUTED_META_FILENAME, load_sidecar

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
            say: Callable[[str], None] = print, device_ids: Sequence[int] | None = None) -> list[str]:
    """Run a built directory on the host runtime; write requested diagnostics. Returns dfx files.

    L3 (no kernel_config.py, an orchestration/host_orch.py: PyPTO's rule) runs the
    host driver with one worker process per device id; L2 runs in this process.
    """
    from .runtime.dfx import write_args_dump, write_swimlane
    from .runtime.executor import HostExecutor

    if config.enable_chip_swimlane or config.enable_dump_args:
        base = Path(sub_dir).absolute()
        confine_tree(base, base / "dfx_outputs", "dfx_outputs folder")
    for line in config.unsupported():
        say(line)
    say("[execute] running on the host runtime (pypto_build: a functional CPU reference, not an NPU model)...")
    if not (sub_dir / "kernel_config.py").exists() and (sub_dir / "orchestration" / "host_orch.py").exists():
        from .meta import load_distributed_meta
        from .runtime.l3 import run_distributed
        ids = device_ids or load_distributed_meta(sub_dir / "distributed_meta.json").distributed_config.device_ids
        return run_distributed(sub_dir, args, config=config, device_ids=ids, say=say)
    threshold = LOG_LEVELS.index(config.effective_log_level)

    def log(level: str, text: str) -> None:
        if level == "always" or (level in LOG_LEVELS and LOG_LEVELS.index(level) >= threshold and level != "null"):
            say(f"[{level}] {text}")

    want_trace = bool(config.enable_chip_swimlane or config.enable_dump_args)
    with HostExecutor(sub_dir, log=log) as executor:
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


def save_outputs(work_dir: Path, named: dict) -> None:
    """Keep the tensors of the last replay under .pypto_build/replay/ (torch.save, atomic)."""
    import torch

    base = Path(work_dir).absolute()
    confine_tree(base, base / STATE_DIR / "replay", "replay outputs folder")
    for name, value in named.items():
        if isinstance(value, torch.Tensor):
            buf = io.BytesIO()
            torch.save(value.detach().cpu(), buf)
            atomic.write_bytes(Path(work_dir) / STATE_DIR / "replay" / f"{name}.pt", buf.getvalue())


def replay(work_dir, *tensors, config: RunConfig | None = None, recompile: bool = False,
           rebuild_from_pto: bool = True, validate: bool = False, jobs: int = 1,
           progress: TextIO | None | str = "stdout") -> ReplayResult:
    """Build what changed, run the program on `tensors` (outputs written in place), optionally validate.

    With `validate`, outputs named in golden.py's `__outputs__` are compared with
    `compute_golden` (RTOL/ATOL); a mismatch raises AssertionError naming the output.
    Progress goes to `progress` (default: the current sys.stdout; None: silent).
    """
    from .api import build
    from .golden import compare, load_golden

    config = config or RunConfig()
    if progress == "stdout":
        progress = sys.stdout           # looked up per call (tests and callers may replace sys.stdout)
    if config.platform != "host":
        raise PyptoBuildError(f"platform {config.platform!r}: replay runs on the host runtime only; "
                              "use RunConfig(platform='host')")
    work_dir = check_replayable(Path(work_dir).resolve())
    say = (lambda line: print(line, file=progress, flush=True)) if progress else (lambda line: None)
    golden = names = None
    if validate:
        import torch
        golden = load_golden(work_dir)
        names = [n for n, _ in golden.inputs()]
        if len(names) != len(tensors):
            raise ValueError(f"replay(validate=True): expected {len(names)} tensors (orchestration parameter "
                             f"count from {work_dir}/golden.py), got {len(tensors)}")
        for n, t in zip(names, tensors):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"replay(validate=True): argument {n!r} is {type(t).__name__}, expected a torch.Tensor")
    result = build(work_dir, recompile=recompile, rebuild_from_pto=None if rebuild_from_pto else False,
                   jobs=jobs, progress=progress)
    dfx = execute(work_dir, tensors, config, names=names, say=say)
    say(f"Replay finished. DFX artefacts (if any) under {work_dir / 'dfx_outputs'}")
    named = dict(zip(names or [f"arg{i}" for i in range(len(tensors))], tensors))
    save_outputs(work_dir, named)
    checked: list[str] = []
    if golden is not None:
        checked = compare(golden, named)
        if checked:
            say("Golden validation: PASSED")
    return ReplayResult(work_dir, result, checked, dfx)
