"""Running a built directory on its platform: what the replay child does (PyPTO's replay).

`runnable` says whether a planned directory can run (and which program), `execute` runs it on its
platform's runner (`Runner.run_l2` or `run_l3`, as the layout's kind says: the caller
hands it in, nothing here tells L2 from L3 again) and writes the diagnostics asked
for, `save_outputs` keeps the run's outputs. Used by the run stage's entry only (`entry.run_built`: in
process, and in the child, `child.py`); it builds nothing and runs no golden (`child.in_child` puts the
steps together).
torch is imported only inside these functions, never on a build-only path.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from ..errors import UserError
from ..core import procs, settings
from ..core.confine import confine_tree
from ..builddir.layout import BuildKind
from ..builddir.markers import DFX_OUTPUTS, DISTRIBUTED_META, HOST_ORCH
from ..builddir.state_dir import REPLAY, STATE_DIR
from ..builddir.runconfig import RunConfig

if TYPE_CHECKING:
    from ..plan.graph import Graph
    from ..plan.program import Program


def runnable(graph: Graph) -> Program:
    """The program a planned directory runs as a whole, or one clear error (PyPTO's L2/L3 rule), from the plan's
    layout (nothing is classified again).

    Its sidecar is validated here, before anything is built or run (an L3 build needs distributed_meta.json).
    """
    from ..builddir.sidecars import load_sidecar
    from ..plan.program import program

    layout = graph.layout
    if layout.kind is BuildKind.MULTI_ORCH:
        subs = ", ".join(str(s.path) for s in layout.sub_builds)
        raise UserError(f"{layout.root} is a multi-orchestration parent; replay one of its sub-builds "
                        f"instead: {subs}")
    if load_sidecar(layout.root) is None and layout.kind is BuildKind.L3:
        raise UserError(f"{layout.root / DISTRIBUTED_META} not found; a distributed build needs "
                        "it to run (device ids, parameters) — restore it or recompile via ir.compile()")
    return program(graph, ".")


def execute(sub_dir: Path, args: Sequence, config: RunConfig, *, kind: BuildKind,
            names: Sequence[str] | None = None, say: Callable[[str], None] = print,
            device_ids: Sequence[int] | None = None, on_task: Callable[[str], None] | None = None) -> list[str]:
    """Run the built directory `sub_dir`, of the layout's `kind`, on `config.platform`'s runner; write the
    diagnostics asked for, after clearing what an earlier run of ours wrote. Returns the diagnostics files."""
    from ..platforms import clear_dfx, implementation

    runner = implementation(config.platform or "host").runner()
    if kind is BuildKind.L3:            # PyPTO's rule: a host driver over chip programs (it clears its own dfx)
        if on_task is not None:
            on_task(f"the host driver {HOST_ORCH}")
        return runner.run_l3(sub_dir, args, config, names=names, say=say, device_ids=device_ids)
    if kind is not BuildKind.L2:
        raise UserError(f"{sub_dir} is a {kind.value}, which does not run itself; run one of its sub-builds")
    if config.enable_chip_swimlane or config.enable_dump_args:
        base = Path(sub_dir).absolute()
        confine_tree(base, base / DFX_OUTPUTS, "dfx_outputs folder")
        clear_dfx(base / DFX_OUTPUTS)
    return runner.run_l2(sub_dir, args, config, names=names, say=say, on_task=on_task)


def save_outputs(work_dir: Path, named: dict) -> None:
    """Keep the output tensors of the last run as `.pypto_build/replay/<name>.pt`, and only those (`named`: the
    tensors the run wrote); with PYPTO_BUILD_KEEP_REPLAY=0, none (an earlier run's are removed too).

    Written into a fresh folder that then replaces the previous one, so outputs of two runs never mix and an
    unfinished write is never read as a result.
    """
    import torch

    base = Path(work_dir).absolute()
    state = base / STATE_DIR
    confine_tree(base, state / REPLAY, "replay outputs folder")
    keep = settings.keep_replay()
    _sweep(_made(state))
    fresh = Path(tempfile.mkdtemp(prefix=f"{_TEMP}{os.getpid()}.", suffix=".tmp", dir=state))
    try:
        for name, value in named.items():
            if keep and isinstance(value, torch.Tensor):
                with open(fresh / f"{name}.pt", "wb") as handle:     # seen only once the folder is in place
                    torch.save(value.detach().cpu(), handle)
                    handle.flush()
                    os.fsync(handle.fileno())
        old = state / REPLAY
        if old.exists():
            gone = Path(tempfile.mkdtemp(prefix=f"{_TEMP}{os.getpid()}.", suffix=".old", dir=state))
            os.replace(old, gone / REPLAY)
            shutil.rmtree(gone, ignore_errors=True)
        if keep:
            os.replace(fresh, old)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)


_TEMP = ".replay."          # a writer's folders: `.replay.<pid>.<random>.tmp` (being written), `.old` (going)


def _sweep(state: Path) -> None:
    """Remove the folders a killed writer left (its pid no longer runs): never read, now not kept either."""
    for entry in os.scandir(state):
        pid = entry.name[len(_TEMP):].partition(".")[0]
        if entry.name.startswith(_TEMP) and pid.isdigit() and entry.is_dir(follow_symlinks=False) \
                and not procs.alive(int(pid)):
            shutil.rmtree(entry.path, ignore_errors=True)


def _made(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
