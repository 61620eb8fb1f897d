"""simpler's `Worker(level=3)` under the one L3 driver (`l3_driver.run_l3`): `SimplerL3`, never compiling anything.

What PyPTO's one-shot distributed run does with simpler (`distributed_runner.execute_distributed`): every
`next_levels/<chip>/` sub-build becomes one `ChipCallable` (our prebuilt binaries, assembled as `run`
does for L2), all are registered on one `Worker(level=3, device_ids=...)` before `init()` forks its chip
processes, and host_orch.py runs as the Worker's orchestration function with simpler's real `orch`,
`CallConfig`, `TaskArgs` and `TensorArgType`. Of the stand-ins only PyPTO's `make_tensor_arg` is this
backend's (host tensors through simpler's own `torch_interop.make_tensor_arg`); `_submit_chip` is the
driver's. Argument tensors reach the forked chips through shared memory. torch and simpler are imported only
inside functions.
"""
from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ...errors import ToolchainError, UserError, one_line
from ...builddir.manifest import read_kernel_config
from ...builddir.markers import KERNEL_CONFIG
from ...builddir.runconfig import RunConfig
from ..l3_shims import TENSOR_ARG
from ..l3_driver import L3Backend, Prepared
from .places import kernel_payload_path, orchestration_path
from .run import (LogLevel, call_config, call_settings, chip_callable, import_simpler, require_simpler,
                  missing_runtime, read_binaries, unsupported_lines)

if TYPE_CHECKING:
    from ...builddir.sidecars import ProgramMeta

__all__ = ["SimplerL3", "chip_programs"]


class SimplerL3(L3Backend):
    """simpler's `platform` runtime with one chip per device id."""

    unit = "chip"

    def __init__(self, platform: str, config: RunConfig) -> None:
        require_simpler(platform)
        self.platform, self.config = platform, config
        self.worker: Any = None

    def prepare(self, root: Path, chips: dict[str, Path], meta: ProgramMeta) -> Prepared:
        self.simpler = import_simpler()
        self.chips, self.runtime, sdma = chip_programs(chips, self.platform, self.simpler)
        dc = meta.distributed_config
        aicpu = {} if dc is None else {"aicpu_thread_num": dc.aicpu_thread_num}
        settings = call_settings(self.config, {**aicpu, "enable_sdma": sdma}, root)
        # one pass on the simulator: the swimlane brings its task graph along (PyPTO's co-enabled dep-gen)
        self.settings = replace(settings, enable_dep_gen=settings.enable_dep_gen or settings.enable_chip_swimlane > 0)
        self.num_sub_workers = 0 if dc is None else dc.num_sub_workers
        self.cfg = call_config(self.settings, self.simpler)
        dfx = Path(self.settings.output_prefix) if self.settings.output_prefix else None
        return Prepared(f"simpler's {self.platform} runtime ({self.runtime})", dfx,
                        tuple(unsupported_lines(self.settings, self.platform)))

    def stand_ins(self) -> dict[str, dict[str, Any]]:
        return {TENSOR_ARG: {"make_tensor_arg": _make_tensor_arg}}

    @contextlib.contextmanager
    def started(self, device_ids: list[int]) -> Iterator[dict[str, Any]]:
        """Worker(level=3) -> register every chip -> init (forks the chips); close always."""
        with LogLevel(self.settings.log_level, self.simpler):
            self.worker = self.simpler.Worker(level=3, device_ids=device_ids, num_sub_workers=self.num_sub_workers,
                                              platform=self.platform, runtime=self.runtime,
                                              enable_sdma=self.settings.enable_sdma)
            try:
                handles = {name: self.worker.register(chip) for name, chip in self.chips.items()}
                self._init()
                yield handles
            finally:
                self.worker.close()

    def _init(self) -> None:
        try:
            self.worker.init(prewarm_config=self.cfg)
        except FileNotFoundError as exc:
            raise ToolchainError(missing_runtime(exc, self.platform, self.runtime)) from None
        except ValueError as exc:
            if "not available for platform" not in str(exc):
                raise
            raise ToolchainError(f"simpler has no runtime {self.runtime!r} for {self.platform}; "
                                 "RUNTIME_CONFIG[\"runtime\"] in the chips' kernel_config.py must name one "
                                 f"({one_line(exc, 200)})") from None

    def run(self, orchestrate: Callable[[Any, Any], None], tensors: dict[str, Any]) -> None:
        self.worker.run(lambda orch, _args, _config: orchestrate(orch, self.cfg))   # under `started`'s log level


def chip_programs(chips: dict[str, Path], platform: str, simpler: Any) -> tuple[dict[str, Any], str, bool]:
    """Each chip program's ChipCallable by name; the one runtime they share; whether any asks for SDMA. One line
    for a missing binary, or runtimes that differ."""
    callables: dict[str, Any] = {}
    runtimes: dict[str, str] = {}
    sdma = False
    for name, sub in chips.items():
        manifest = read_kernel_config(sub / KERNEL_CONFIG)
        payloads = {k.func_id: sub / kernel_payload_path(platform, k.func_id, k.core_type, k.source, k.external)
                    for k in manifest.kernels}
        blobs = read_binaries(manifest, payloads, sub / orchestration_path(manifest.orchestration.source))
        callables[name] = chip_callable(manifest, blobs, simpler)
        runtimes[name] = manifest.runtime_name
        sdma = sdma or bool(manifest.runtime_config.get("enable_sdma", False))
    if len(set(runtimes.values())) > 1:
        found = ", ".join(f"{n}: {r}" for n, r in runtimes.items())
        level = next(iter(chips.values())).parent
        raise UserError(f"{level}: the chip programs name different runtimes ({found}); one Worker runs "
                              "one runtime, so RUNTIME_CONFIG[\"runtime\"] must agree in every kernel_config.py")
    return callables, next(iter(runtimes.values())), sdma


def _make_tensor_arg(worker: Any, arg: Any) -> Any:
    """PyPTO's `make_tensor_arg` for host tensors: simpler's own conversion (a shared view, fork-visible)."""
    import torch
    from simpler.task_interface import Tensor
    from simpler_setup.torch_interop import make_tensor_arg

    if isinstance(arg, Tensor):
        return arg
    if not isinstance(arg, torch.Tensor):
        raise UserError(f"make_tensor_arg: got a {type(arg).__name__}; pypto_build's simpler L3 path takes "
                        "host torch tensors only (device-resident tensors need PyPTO's DistributedWorker)")
    return make_tensor_arg(worker, arg)
