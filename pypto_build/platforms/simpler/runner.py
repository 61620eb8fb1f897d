"""Running a directory built for simpler's platforms: `SimplerRunner` (a2a3sim, a5sim) and `DeviceRunner` (a2a3, a5).

Execution only (planning's `sim.py` / `device.py` never import it): our binaries, assembled
into simpler's callables and run by simpler's Worker — one L2 program (`run.run_on_simpler`), or the
one L3 driver with simpler's backend (`l3.SimplerL3`). A device runner first checks that this machine
has an NPU.
"""
from __future__ import annotations

import glob
from pathlib import Path
from typing import Callable, Sequence

from ...errors import ToolchainError
from ...builddir.manifest import read_kernel_config
from ...builddir.markers import KERNEL_CONFIG
from ...builddir.runconfig import RunConfig
from ..base import Runner
from .places import kernel_payload_path, orchestration_path

NPU_DEVICES = "/dev/davinci[0-9]*"          # the Ascend driver's device nodes, one per NPU


class SimplerRunner(Runner):
    """simpler's Worker on this platform (`name`)."""

    def prepare(self) -> None:
        from .run import import_simpler
        try:
            import_simpler()
        except ToolchainError:
            pass                        # the run says it, in its own words

    def run_l2(self, sub_dir: Path, args: Sequence, config: RunConfig, *, names: Sequence[str] | None = None,
               say: Callable[[str], None] = print, on_task: Callable[[str], None] | None = None) -> list[str]:
        from .run import run_on_simpler

        self.check_machine()
        cfg = read_kernel_config(Path(sub_dir) / KERNEL_CONFIG)
        payloads = {k.func_id: Path(sub_dir) / kernel_payload_path(self.name, k.func_id, k.core_type, k.source,
                                                                   k.external) for k in cfg.kernels}
        orch = Path(sub_dir) / orchestration_path(cfg.orchestration.source)
        return run_on_simpler(sub_dir, self.name, payloads, orch, args, config, names=names, say=say,
                              device_id=config.device_id)

    def run_l3(self, root: Path, args: Sequence, config: RunConfig, *, names: Sequence[str] | None = None,
               say: Callable[[str], None] = print, device_ids: Sequence[int] | None = None) -> list[str]:
        from ..l3_driver import run_l3
        from .l3 import SimplerL3

        self.check_machine()
        return run_l3(root, args, SimplerL3(self.name, config), names=names, say=say, device_ids=device_ids)

    def check_machine(self) -> None:
        """Nothing to check on a simulator."""


class DeviceRunner(SimplerRunner):
    """simpler's Worker on an NPU; without one, one line before anything starts."""

    def check_machine(self) -> None:
        if not glob.glob(NPU_DEVICES):
            raise ToolchainError(f"platform {self.name}: this machine has no Ascend NPU ({NPU_DEVICES} missing), so "
                                 "the program cannot run here; run it on an NPU machine, or replay with --platform "
                                 f"{self.name}sim (simpler's simulator) or host")
