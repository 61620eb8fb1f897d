"""Running a directory built for `host`: `HostRunner` (execution; planning's `platform.py` never imports it).

L2 runs in this process on `runtime.HostExecutor`; L3 runs the one L3 driver (`l3_driver.run_l3`) with the host
backend, one worker process per device id. torch and the runtime are imported only when a run starts.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Sequence

from ...builddir.markers import ARGS_DUMP_DIR, DFX_OUTPUTS, SWIMLANE_PREFIX
from ...builddir.runconfig import LOG_LEVELS, RunConfig
from ..base import Runner


class HostRunner(Runner):
    """The host runtime: a functional CPU reference, not an NPU model."""

    def run_l2(self, sub_dir: Path, args: Sequence, config: RunConfig, *, names: Sequence[str] | None = None,
               say: Callable[[str], None] = print, on_task: Callable[[str], None] | None = None) -> list[str]:
        from .runtime import HostExecutor, payloads_wanted, write_args_dump, write_swimlane

        for line in config.unsupported():
            say(line)
        level = int(config.enable_dump_args)
        say("[execute] running on the host runtime (pypto_build: a functional CPU reference, not an NPU model)...")
        threshold = LOG_LEVELS.index(config.effective_log_level)

        def log(level: str, text: str) -> None:
            if level == "always" or (level in LOG_LEVELS and LOG_LEVELS.index(level) >= threshold and level != "null"):
                say(f"[{level}] {text}")

        want_trace = bool(config.enable_chip_swimlane or level > 1)
        with HostExecutor(sub_dir, log=log, on_task=on_task) as executor:
            trace = executor.run(args, param_names=names, trace=want_trace, payloads=payloads_wanted(level))
        written = []
        dfx = sub_dir / DFX_OUTPUTS
        if config.enable_chip_swimlane:
            path = dfx / f"{SWIMLANE_PREFIX}{time.strftime('%Y%m%d_%H%M%S')}.json"
            write_swimlane(trace, path)
            written.append(str(path))
        dump = write_args_dump(trace, dfx / ARGS_DUMP_DIR, level) if level else None
        if dump is not None:
            written.append(str(dump))
        return written

    def prepare_l3(self) -> None:
        from .runtime.l3 import start_rank_server

        start_rank_server()

    def run_l3(self, root: Path, args: Sequence, config: RunConfig, *, names: Sequence[str] | None = None,
               say: Callable[[str], None] = print, device_ids: Sequence[int] | None = None) -> list[str]:
        from .runtime import HostL3
        from ..l3_driver import run_l3

        return run_l3(root, args, HostL3(config, say), names=names, say=say, device_ids=device_ids)
