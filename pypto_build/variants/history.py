"""The variants of a program tried in a build directory: verdict, error figures, run time and units per content
of its binaries.

A *variant* is the digest of every binary the program runs (kernels, orchestrations,
in plan order: `units.variant_id`): an edit that changes no binary is the same variant, a revert is an
earlier one again. Every run that reaches a verdict records its variant in the program's
`.pypto_build/history.json` (atomically, the newest `KEEP` variants; `record.record_verdict`, from the
`validate:` task): the verdict and its figures, and, in its own file `.pypto_build/variants/<id>.json` (so that
the history a verdict rewrites stays small on a program of hundreds of kernels), per unit the digests of its
binary and its source. `watch`
adds each round's run times and what it changed, so a tuning loop sees at once whether an edit
helped; `pypto-build history DIR` lists what was tried and `pypto-build bisect` compares two of them.

The file is data like any other in the directory: it is read capped (`limits`), and
every field is checked for its type and range before use (`Damaged`: one line naming
what is wrong). `history` refuses a damaged file; `watch` sets it aside
(`history.json.damaged`, never overwritten) and starts a new one.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..core import atomic
from ..errors import UserError, one_line
from ..core.limits import TooLarge, read_capped
from ..builddir.state_dir import HISTORY, STATE_DIR, VARIANT_UNITS

RECORD = HISTORY
ASIDE = ".damaged"      # a damaged history is kept as history.json.damaged (then .damaged.1, ...)
KEEP = 500


class Damaged(UserError):
    """The history file cannot be used (unreadable, not JSON, a field of the wrong type or out of range)."""

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(f"{path}: {what}; remove it, or run `pypto-build watch` or `validate`, which set a damaged "
                         f"history aside as {RECORD}{ASIDE} and start a new one")
        self.path, self.what = path, what


@dataclass
class Variant:
    """One content of the binaries: when it was first and last run, its last verdict and run times."""

    digest: str
    first_seen: float
    last_seen: float
    verdict: str
    seconds: list[float] = field(default_factory=list)    # the last round's timed runs
    changed: list[str] = field(default_factory=list)      # what the round that first made it changed
    rounds: int = 1
    figures: str = ""                                     # the last verdict's detail: how far off, what crashed
    units: int = 0                                        # how many units its own file records (`History.units`)
    platform: str = ""                                    # where it ran
    golden: str = ""                                      # the seal of the golden result the verdict was made on
    config: str = ""                                      # the run configuration's key it was made with

    @property
    def median(self) -> float | None:
        import statistics       # only `watch` and `history` ask: a verdict's record does not import it

        return statistics.median(self.seconds) if self.seconds else None

    @property
    def short(self) -> str:
        return self.digest[:10]


class History:
    """The variants recorded for one build directory, oldest first (none when the file is not there yet).

    `Damaged` (one line) when the file is there but cannot be used: `set_aside` moves it out of the way.
    """

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / STATE_DIR / RECORD
        self.units_dir = Path(root) / STATE_DIR / VARIANT_UNITS
        self.variants: dict[str, Variant] = {}
        self.pending: dict[str, list[dict]] = {}       # units to write with the next `save`, by variant
        try:
            data = read_capped(self.path)
        except FileNotFoundError:
            return                      # none yet
        except (OSError, TooLarge) as exc:
            raise Damaged(self.path, f"cannot be read ({one_line(exc)})") from None
        try:
            variants = _checked(json.loads(data))
        except (ValueError, RecursionError) as exc:     # a JSONDecodeError or UnicodeDecodeError is a ValueError
            raise Damaged(self.path, f"not a history pypto-build wrote ({one_line(exc, 200)})") from None
        self.variants = {v.digest: v for v in variants}

    @classmethod
    def set_aside(cls, root: Path) -> tuple[History, str | None]:
        """The history of `root`; a damaged file is first moved aside (never over an earlier one) and a new,
        empty history written. The second item says what was set aside (None: nothing was)."""
        try:
            return cls(root), None
        except Damaged as exc:
            aside = _free_name(exc.path.with_name(f"{RECORD}{ASIDE}"))
            os.replace(exc.path, aside)
            fresh = cls(root)
            fresh.save()
            return fresh, f"{exc.path}: {exc.what}; set aside as {aside.name}, a new history starts"

    def record(self, digest: str, verdict: str, seconds: list[float], changed: list[str], *,
               figures: str | None = None, units: list[dict] | None = None, platform: str | None = None,
               golden: str | None = None, config: str | None = None, again: bool = True) -> tuple[Variant, bool]:
        """Note one run of `digest`; (the variant, whether it was seen before). What is not given is kept from
        the variant's earlier record; `again=False` adds to the run just recorded (a watch round's times, after
        its `validate:` task recorded the verdict) instead of counting another."""
        now = time.time()
        seen = self.variants.pop(digest, None)
        if seen is None:
            variant = Variant(digest, now, now, verdict, list(seconds), list(changed), 1, figures or "",
                              len(units or ()), platform or "", golden or "", config or "")
        else:
            variant = Variant(digest, seen.first_seen, now, verdict, list(seconds) or seen.seconds,
                              seen.changed or list(changed), seen.rounds + (1 if again else 0),
                              seen.figures if figures is None else figures,
                              seen.units if units is None else len(units),
                              seen.platform if platform is None else platform,
                              seen.golden if golden is None else golden, seen.config if config is None else config)
        self.variants[digest] = variant
        if units:
            self.pending[digest] = list(units)
        return variant, seen is not None and again

    def find(self, prefix: str) -> Variant | None:
        """The variant whose id starts with `prefix` (what `listing` prints); None when none or several do."""
        found = [v for d, v in self.variants.items() if d.startswith(prefix.lower())] if prefix else []
        return found[0] if len(found) == 1 else None

    def newest(self, verdict: str) -> Variant | None:
        """The variant last run with `verdict` (e.g. the newest PASSED), or None."""
        found = [v for v in self.variants.values() if v.verdict == verdict]
        return max(found, key=lambda v: v.last_seen) if found else None

    def save(self) -> None:
        """Write the units recorded since, then the history (the newest `KEEP`), then drop the units files of the
        variants it no longer keeps."""
        kept = sorted(self.variants.values(), key=lambda v: v.last_seen)[-KEEP:]
        kept.sort(key=lambda v: v.first_seen)
        for digest, units in self.pending.items():
            atomic.write_text(self.units_dir / f"{digest}.json", json.dumps({"units": units}))
        self.pending = {}
        atomic.write_text(self.path, json.dumps({"variants": [asdict(v) for v in kept]}, indent=1))
        names = {f"{v.digest}.json" for v in kept}
        for stale in self.units_dir.glob("*.json") if self.units_dir.is_dir() else ():
            if stale.name not in names:
                stale.unlink(missing_ok=True)

    def units(self, variant: Variant) -> list:
        """The units `variant` recorded (`units.UnitState`), in plan order; [] when it recorded none. A units file
        that cannot be used is `Damaged` (one line)."""
        from .units import UnitState

        if not variant.units:
            return []
        path = self.units_dir / f"{variant.digest}.json"
        try:
            data = json.loads(read_capped(path))
        except FileNotFoundError:
            return []
        except (OSError, TooLarge, ValueError, RecursionError) as exc:
            raise Damaged(path, f"cannot be read as the units of variant {variant.short} ({one_line(exc, 200)})") \
                from None
        if not isinstance(data, dict) or not isinstance(data.get("units"), list) or \
                not all(_unit(u) for u in data["units"]):
            raise Damaged(path, f"not the units of variant {variant.short}")
        return [UnitState(**u) for u in data["units"]]

    def listing(self) -> list[str]:
        """`pypto-build history`: one line per variant, oldest first, with its change against the first."""
        variants = sorted(self.variants.values(), key=lambda v: v.first_seen)
        if not variants:
            return [f"no variants recorded in {self.path} yet; every verdict records one (`pypto-build validate DIR`, "
                    "`replay --validate`, each `watch` round)"]
        base = next((v for v in variants if v.median), None)      # what the others are against: "-" itself
        first = base.median if base else None
        lines = [f"{'variant':<10}  {'first seen':<19}  {'rounds':>6}  {'verdict':<12}  {'median':>10}  "
                 f"{'vs first':>8}  changed"]
        for v in variants:
            median = f"{v.median * 1e3:.3f} ms" if v.median else "-"
            against = percent(v.median, first) if v.median and first and v is not base else "-"
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(v.first_seen))
            lines.append(f"{v.short:<10}  {when:<19}  {v.rounds:>6}  {v.verdict:<12}  {median:>10}  {against:>8}  "
                         f"{', '.join(v.changed) or '-'}")
        return lines


def percent(value: float, base: float) -> str:
    """`value` against `base` as a signed percentage."""
    return f"{(value / base - 1) * 100:+.1f}%"


_EXPECTED = {"digest": "a digest", "first_seen": "a time", "last_seen": "a time", "verdict": "a verdict",
             "seconds": "a list of run times", "changed": "a list of file names", "rounds": "a count of rounds",
             "figures": "a line of text", "units": "a count of units", "platform": "a platform name",
             "golden": "a golden result's seal", "config": "a run configuration's key"}
_REQUIRED = {"digest", "first_seen", "last_seen", "verdict"}


def _checked(data: object) -> list[Variant]:
    """The variants of a history file's JSON, every field checked; ValueError naming the first wrong one."""
    if not isinstance(data, dict) or not isinstance(data.get("variants"), list):
        raise ValueError("no list of variants")
    out = []
    for i, raw in enumerate(data["variants"], 1):
        if not isinstance(raw, dict) or set(raw) - set(_EXPECTED) or _REQUIRED - set(raw):
            raise ValueError(f"variant #{i} is not a record of {', '.join(_EXPECTED)}")
        for name, value in raw.items():
            if not _fits(name, value):
                raise ValueError(f"variant #{i}'s {name!r} is {one_line(repr(value), 40)}, not "
                                 f"{_EXPECTED[name]}")
        out.append(Variant(**raw))
    return out


def _fits(name: str, value: object) -> bool:
    if name in ("first_seen", "last_seen"):
        return _number(value) and _local_time(value)
    if name == "seconds":
        return isinstance(value, list) and all(_number(t) and t >= 0 for t in value)
    if name == "changed":
        return isinstance(value, list) and all(isinstance(c, str) for c in value)
    if name == "units":
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if name == "rounds":
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1
    return isinstance(value, str) and (name != "digest" or bool(value))


def _unit(value: object) -> bool:
    """A unit record as `units.UnitState` writes it: its fields, each a string (a missing source's digest: null)."""
    from .units import UNIT_FIELDS
    return (isinstance(value, dict) and set(value) == set(UNIT_FIELDS)
            and all(isinstance(v, str) or (v is None and k == "source_digest") for k, v in value.items()))


def _number(value: object) -> bool:
    """A finite JSON number (true/false are not numbers)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _local_time(value: float) -> bool:
    """Whether `value` is a time `listing` can print (1e20 is past what the C library's time_t holds)."""
    try:
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))
    except (OverflowError, OSError, ValueError):
        return False
    return True


def _free_name(path: Path) -> Path:
    """`path`, or the first of `path`.1, `path`.2, ... that does not exist (an earlier damaged file is kept)."""
    n, candidate = 0, path
    while os.path.lexists(candidate):
        n += 1
        candidate = path.with_name(f"{path.name}.{n}")
    return candidate
