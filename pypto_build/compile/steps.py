"""doit action of a step after a kernel's compile (a device kernel's link, its payload's extraction).

Like `actions.run_compile`: plain-data arguments, the output written atomically,
the values the next up-to-date check (`checks.StepCheck`) compares returned.
"""
from __future__ import annotations

import os
import shlex
from pathlib import Path

from doit.exceptions import TaskFailed

from ..core import atomic, procs, safeio
from .command import output_at
from ..errors import PyptoBuildError
from ..core.filestate import make_state
from ..toolchain.local_slots import local_work
from ..core.oserrors import one_line_failures
from ..builddir.stamp import remove_stamp
from .plan import StepUnit

STEP_TIMEOUT_S = 900.0


@one_line_failures
@local_work
def run_step(step: StepUnit):
    """Run one step into a temp file, then move it onto its output; the previous output stays on failure."""
    remove_stamp(Path(step.stamp_path))            # the sub-build is in flux until every step is done
    out = Path(step.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic.remove_stale_temps(out)
    if step.argv:
        tmp = atomic.temp_path_for(out)
        argv = list(output_at(step.argv, procs.path_arg(os.path.abspath(tmp))))
        try:
            proc = procs.run(argv, cwd=step.cwd or None, timeout=STEP_TIMEOUT_S)
            if proc.timed_out or proc.returncode != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
                why = (f"timed out after {STEP_TIMEOUT_S:g} s" if proc.timed_out else
                       proc.how if proc.returncode else "wrote no output")
                return TaskFailed(f"{step.input}: {step.kind} failed: {why} — fix it and rebuild ({step.task})\n"
                                  f"  command: {shlex.join(step.argv)}\n{proc.output}")
            atomic.install(tmp, out)
        finally:
            tmp.unlink(missing_ok=True)
    else:
        from ..platforms import kernel_payload         # pyelftools: only device builds extract
        try:
            payload = kernel_payload(safeio.read_bytes(Path(step.input)), step.input)
        except PyptoBuildError as exc:
            return TaskFailed(f"{exc} ({step.task})")
        tmp = atomic.temp_path_for(out)
        try:
            tmp.write_bytes(payload)
            os.chmod(tmp, 0o644)
            atomic.install(tmp, out)
        finally:
            tmp.unlink(missing_ok=True)
    return {"key": step.key, "input": make_state(step.input), "output": make_state(step.output)}
