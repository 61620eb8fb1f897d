"""Every platform, declared once: one `Record` each in `RECORDS` (adding a platform is a line here plus its
implementation folder).

A record says what a platform is called, which names a directory's sidecar records that it serves, whether it
can serve here (and why not) and what a recorded directory falls back to then, where its planning class and
its runner are, and its no-op key's light module. `choice` (which platform a directory targets), `registry`
(the classes by name), `noop_keys` (the no-op key's part) and `options` (the `--platform` help) read this table,
when they are asked: a record added to it is seen by all of them. What a located platform knows (its runtimes,
labels, system directories, identities) is data too: `base.Facts`.

Light: the console script's quick answer reads it (`noop_keys`, `cannot_serve`) before `dataclasses`, `typing`
or `json` load, so a record is a plain class with slots, not a dataclass.
"""
from __future__ import annotations

from .installed import unserved as simpler_unserved

TYPE_CHECKING = False
if TYPE_CHECKING:           # annotations only: `collections.abc` would cost the quick answer's start
    from collections.abc import Callable


class Record:
    """One platform as declared. `planning` and `execution` are `module:Class` (importlib names, relative to this
    package unless absolute), imported only when asked for (`registry`); `execution` None: it runs nothing.
    `serves`: the names a sidecar records that mean this platform (default: its own name). `unserved(name)`:
    why it cannot serve here, in one line with what to do, or None — light, asked before planning; None: nothing
    to ask (locating says what is missing). `fallback`: the platform a directory recording it is built for when
    it cannot serve here (None: never; asked for on purpose, it never falls back). `noop_key`: the light module
    (relative name) with `places(env)` and `compilers(env)` (`noop_keys`); None: it keeps no quick no-op record. `arch`: the device architecture its binaries are for (`a2a3`, `a5`; None: this
machine's own); `simulator`: it runs them in a simulator on this machine (no device); `dump_payloads`: its
arguments dump (`enable_dump_args` 2) carries trustworthy tensor payloads, so two runs can be compared task by task
(`pypto-build bisect`'s trace; simpler's a5 payloads are not yet trustworthy)."""

    __slots__ = ("name", "planning", "execution", "serves", "unserved", "fallback", "noop_key", "arch", "simulator",
                 "dump_payloads")

    def __init__(self, name: str, planning: str, execution: str | None = None, *, serves: tuple[str, ...] = (),
                 unserved: Callable[[str], str | None] | None = None, fallback: str | None = None,
                 noop_key: str | None = None, arch: str | None = None, simulator: bool = False,
                 dump_payloads: bool = False) -> None:
        self.name = name
        self.planning = planning
        self.execution = execution
        self.serves = serves or (name,)
        self.unserved = unserved
        self.fallback = fallback
        self.noop_key = noop_key
        self.arch = arch
        self.simulator = simulator
        self.dump_payloads = dump_payloads

    def __repr__(self) -> str:
        return f"Record({self.name!r}, {self.planning!r}, {self.execution!r})"


DEFAULT_PLATFORM = "host"       # what a run targets when nothing chooses another (`choice.choose`)

RECORDS: dict[str, Record] = {record.name: record for record in (
    Record("host", ".host.platform:HostPlatform", ".host.run:HostRunner", noop_key=".host.noop_key",
           dump_payloads=True),
    Record("a2a3sim", ".simpler.sim:SimplerSimPlatform", ".simpler.runner:SimplerRunner", unserved=simpler_unserved,
           fallback=DEFAULT_PLATFORM, noop_key=".simpler.noop_key", arch="a2a3", simulator=True, dump_payloads=True),
    Record("a5sim", ".simpler.sim:SimplerSimPlatform", ".simpler.runner:SimplerRunner", unserved=simpler_unserved,
           fallback=DEFAULT_PLATFORM, noop_key=".simpler.noop_key", arch="a5", simulator=True),
    # a device's build needs CANN and its replay an NPU: locating and the runner say what is missing
    Record("a2a3", ".simpler.device:SimplerDevicePlatform", ".simpler.runner:DeviceRunner", arch="a2a3",
           dump_payloads=True),
    Record("a5", ".simpler.device:SimplerDevicePlatform", ".simpler.runner:DeviceRunner", arch="a5"),
)}


def platform_names() -> tuple[str, ...]:
    """Every platform's name, in declaration order."""
    return tuple(RECORDS)


def serving(recorded: str) -> Record | None:
    """The platform a sidecar recording `recorded` is built for, or None when no record serves that name."""
    return next((record for record in RECORDS.values() if recorded in record.serves), None)


def cannot_serve(name: str) -> str | None:
    """Why platform `name` cannot be built and run here (what to do, in the same line), or None: its record's
    `unserved`. Light (imports nothing of simpler): the no-op path asks it."""
    record = RECORDS.get(name)
    return record.unserved(name) if record is not None and record.unserved is not None else None
