"""`DistributedCompiledProgram.from_dir(dir)` for L3 build directories (PyPTO's distributed replay).

Calling the program builds what changed in every sub-build, then runs the host
driver (the one L3 driver) on the platform the build chose.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..run import require_fit
from ..errors import ArgumentError
from ..builddir.manifest import DEFAULT_RUNTIME
from ..builddir.markers import DISTRIBUTED_META
from ..builddir.sidecars import DistributedConfigMeta, ProgramMeta, load_distributed_meta

__all__ = ["DistributedConfig", "DistributedCompiledProgram"]

_MISSING = ("{path} not found — cannot reconstruct a distributed program from this directory. It predates the "
            "L3 replay feature or is not a distributed (L3+) build. Recompile via ir.compile() to refresh.")


@dataclass(frozen=True)
class DistributedConfig:
    """Overrides the `distributed_config` persisted in distributed_meta.json (same fields and rules)."""

    device_ids: tuple[int, ...] = (0,)
    num_sub_workers: int = 0
    runtime: str = DEFAULT_RUNTIME
    aicpu_thread_num: int = 0

    def __post_init__(self):
        ids = tuple(self.device_ids)
        object.__setattr__(self, "device_ids", ids)
        if not ids or any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in ids) \
                or len(set(ids)) != len(ids):
            raise ArgumentError(f"DistributedConfig.device_ids {ids!r}: expected a non-empty list of distinct "
                             "non-negative ints")
        if not isinstance(self.num_sub_workers, int) or self.num_sub_workers < 0:
            raise ArgumentError(f"DistributedConfig.num_sub_workers {self.num_sub_workers!r}: expected an int >= 0")
        n = self.aicpu_thread_num
        if isinstance(n, bool) or not isinstance(n, int) or (n != 0 and n < 2):
            raise ArgumentError(f"DistributedConfig.aicpu_thread_num {self.aicpu_thread_num!r}: expected 0 or >= 2")


class DistributedCompiledProgram:
    """An L3 build directory as a callable program (one-shot or reusable)."""

    def __init__(self, output_dir: Path, meta: ProgramMeta, *, platform: str | None = None,
                 backend_type: str | None = None, distributed_config: DistributedConfig | None = None):
        self.output_dir = Path(output_dir)
        self.meta = meta
        self.params = meta.params
        self.output_indices = meta.output_indices
        self.persisted_platform = meta.platform
        self.platform: str | None = platform       # None: the recorded one (platforms.choose); set by the first build
        self.backend_type = backend_type or meta.backend_type
        persisted: DistributedConfigMeta | None = meta.distributed_config
        self.distributed_config = distributed_config or DistributedConfig(
            *(persisted.device_ids, persisted.num_sub_workers, persisted.runtime, persisted.aicpu_thread_num)
            if persisted else ())
        self.program = None

    @classmethod
    def from_dir(cls, output_dir, *, platform: str | None = None, backend_type: str | None = None,
                 distributed_config: DistributedConfig | None = None) -> "DistributedCompiledProgram":
        """Load `<output_dir>/distributed_meta.json` only; `distributed_config` skips validating the persisted one."""
        root = Path(output_dir).resolve()
        path = root / DISTRIBUTED_META
        if not path.is_file():
            raise FileNotFoundError(_MISSING.format(path=path))
        meta = load_distributed_meta(path, validate_config=distributed_config is None)
        return cls(root, meta, platform=platform, backend_type=backend_type, distributed_config=distributed_config)

    @property
    def device_ids(self) -> tuple[int, ...]:
        return self.distributed_config.device_ids

    def __call__(self, *tensors: Sequence, config=None) -> None:
        """Build what changed, then run on the platform the build chose (the recorded one, or host where simpler
        cannot run it); outputs are written into `tensors` in place. The tensors are checked against
        distributed_meta.json first (count, dtype, shape, contiguous, CPU, no Out/InOut tensor sharing memory
        with another): a misfit raises ArgumentError, nothing is built or run."""
        from ..api import build
        from ..run import Loaded, run_built

        require_fit(self.meta, tensors)
        built = build(self.output_dir, platform=self.platform, progress=None)
        self.platform = built.platform
        run_built(built.program(), config=config, tensors=list(tensors), names=[p.name for p in self.params],
                  loaded=Loaded(), device_ids=self.device_ids)

    def __repr__(self) -> str:
        return f"DistributedCompiledProgram({self.output_dir}, device_ids={list(self.device_ids)})"
