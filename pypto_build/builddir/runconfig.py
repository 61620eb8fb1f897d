"""`RunConfig`: PyPTO's run options, and what the host runtime does with each; `RunSpec`: a config and its timeout;
`InProcess`: how a caller in this process starts and hears a run (never part of a key)."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable, Mapping

from ..core.hashing import text_digest
from ..core.settings import RUN_TIMEOUT, seconds
from ..errors import ArgumentError

LOG_LEVELS = ("debug", "info", "timing", "warn", "error", "null")


@dataclass(frozen=True)
class RunConfig:
    """PyPTO's `RunConfig` fields that replay uses.

    On the host platform `enable_chip_swimlane` writes a Perfetto timeline and
    `enable_dump_args` an arguments dump under `dfx_outputs/` in simpler's format (level 2: with the
    tensors' bytes; 3: metadata only; 1: nothing, the host has no `dump(...)` marks); PMU, dep-gen and
    scope stats cannot be honoured there and are reported, not failed.
    """

    platform: str | None = None     # None: the directory's own (platforms.choose); a run resolves it first
    device_id: int = 0
    enable_pmu: int = 0
    enable_chip_swimlane: int = 0
    enable_dump_args: int = 0
    enable_dep_gen: bool = False
    enable_scope_stats: bool = False
    log_level: str | None = None

    def __post_init__(self):
        if self.log_level is not None and self.log_level not in LOG_LEVELS:
            raise ValueError(f"log_level {self.log_level!r}: expected one of {', '.join(LOG_LEVELS)}")

    @classmethod
    def of(cls, config: Any) -> Any:
        """A caller's `config=`: None is the default, a mapping of RunConfig's fields is `RunConfig(**it)`
        (an unknown key: ArgumentError, one line); anything else (a RunConfig, PyPTO's own) as it is."""
        if config is None:
            return cls()
        if not isinstance(config, Mapping):
            return config
        names = [f.name for f in fields(cls)]
        unknown = [repr(k) for k in config if k not in names]
        if unknown:
            raise ArgumentError(f"config: {', '.join(unknown)} is not a RunConfig field; pass a RunConfig or a "
                                f"dict of its fields ({', '.join(names)})")
        return cls(**config)

    @property
    def effective_log_level(self) -> str:
        level = self.log_level or os.environ.get("PYPTO_RUNTIME_LOG") or "warn"
        return level if level in LOG_LEVELS else "warn"

    def unsupported(self) -> list[str]:
        """One line per flag the host runtime cannot honour."""
        lines = []
        for flag, on in (("enable_pmu (--pmu)", self.enable_pmu), ("enable_dep_gen (--dep-gen)", self.enable_dep_gen),
                         ("enable_scope_stats (--scope-stats)", self.enable_scope_stats)):
            if on:
                lines.append(f"[execute] {flag} is not available on the host runtime; ignored")
        if self.device_id:
            lines.append(f"[execute] device_id {self.device_id} has no meaning on the host runtime; ignored")
        if self.enable_dump_args == 1:
            lines.append("[execute] enable_dump_args 1 (--dump-args) dumps only the arguments marked with dump(...); "
                         "the host runtime has no marks, so no args dump is written (simpler writes none either); "
                         "pass --dump-args 2 (enable_dump_args=2) for every task's arguments")
        return lines

    def key(self) -> str:
        """Digest of the fields that can change what a run computes or writes."""
        d = asdict(self)
        d.pop("log_level")
        return text_digest(*(f"{k}={d[k]}" for k in sorted(d)))


@dataclass(eq=False)
class InProcess:
    """How a caller in this process starts and hears the run of a `replay:`/`validate:` task (a `watch` round):
    `start` (the warm starter's), `timing_runs`, `on_phase`, `say` (the entry's arguments: `run.run_built`), and
    `ran`, where the task leaves what the entry returned (its whole `RunOutcome`: run times, golden.py's reads) or
    the error it raised, for that caller to read once the pipeline returns.

    They change how the run is started, timed and heard, not what it computes: no key holds them (a verdict's is
    `RunConfig.key`), and what doit records of the run is the same without them. `ran` is the channel back for what
    doit must not keep (run times are of one run, golden.py's reads are the caller's to watch) and for what doit
    would flatten (an exception the caller's own `on_phase` raised to stop the run becomes a plain failed task
    there). Only valid in the process that made it (a callable over this process's socket, a slot read here): a
    request that would run doit workers (`-j` > 1) refuses it (`options.Request`)."""

    start: Callable | None = None
    timing_runs: int = 1
    on_phase: Callable[[str], None] | None = None
    say: Callable[[str], None] | None = None
    ran: Any = None         # the entry's RunOutcome, or the exception it raised; None: it was not called
    ahead: Any = None       # `run.ahead.RunAhead`: the children begun while the binaries are built (-j 1)


@dataclass(frozen=True)
class RunSpec:
    """How replay/validate run a program: the RunConfig, the seconds a run may take before it is
    stopped (`--run-timeout`), whether it prints its progress (-q), and, for a caller in this process only,
    how the run is started and heard (`InProcess`); `options.run_spec` builds it from parsed flags."""

    config: RunConfig = RunConfig()
    timeout: float = field(default_factory=lambda: seconds(*RUN_TIMEOUT))    # $PYPTO_RUN_TIMEOUT or 1800 s
    quiet: bool = False     # -q: the run says only its verdict and the program's own log lines, not its progress
    in_process: InProcess | None = field(default=None, compare=False)

    @classmethod
    def given(cls, config: RunConfig | Mapping[str, Any] | None = None, timeout: float | None = None) -> RunSpec:
        """The library's form (`replay()`, `validate()`, `ci`): None means the default; a dict of RunConfig's
        fields is one (`RunConfig.of`)."""
        config = RunConfig.of(config)
        return cls(config) if timeout is None else cls(config, timeout)
