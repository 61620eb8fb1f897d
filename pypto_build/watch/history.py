"""The variants of a program tried in a build directory: verdict and run time per content of its binaries.

A *variant* is the digest of every binary the program runs (kernels, orchestrations,
in plan order): an edit that changes no binary is the same variant, a revert is an
earlier one again. `watch` records each round's variant in `.pypto_build/history.json`
(atomically, the newest `KEEP` variants), so a tuning loop sees at once whether an edit
helped, and `pypto-build history DIR` lists what was tried.

The file is data like any other in the directory: it is read capped (`limits`), and
every field is checked for its type and range before use (`Damaged`: one line naming
what is wrong). `history` refuses a damaged file; `watch` sets it aside
(`history.json.damaged`, never overwritten) and starts a new one.
"""
from __future__ import annotations

import json
import math
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..core import atomic
from ..errors import UserError, one_line
from ..core.hashing import file_digest, text_digest
from ..core.limits import TooLarge, read_capped
from ..builddir.state_dir import HISTORY, STATE_DIR

RECORD = HISTORY
ASIDE = ".damaged"      # a damaged history is kept as history.json.damaged (then .damaged.1, ...)
KEEP = 500


class Damaged(UserError):
    """The history file cannot be used (unreadable, not JSON, a field of the wrong type or out of range)."""

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(f"{path}: {what}; remove it, or run `pypto-build watch`, which sets a damaged history "
                         f"aside as {RECORD}{ASIDE} and starts a new one")
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

    @property
    def median(self) -> float | None:
        return statistics.median(self.seconds) if self.seconds else None

    @property
    def short(self) -> str:
        return self.digest[:10]


def variant_digest(root: Path, outputs: list[str]) -> str | None:
    """The digest of the binaries `outputs` (relative to `root`); None when one is missing."""
    parts = []
    for rel in outputs:
        try:
            parts += [rel, file_digest(os.path.join(root, rel))]
        except OSError:
            return None
    return text_digest(*parts)


class History:
    """The variants recorded for one build directory, oldest first (none when the file is not there yet).

    `Damaged` (one line) when the file is there but cannot be used: `set_aside` moves it out of the way.
    """

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / STATE_DIR / RECORD
        self.variants: dict[str, Variant] = {}
        try:
            data = read_capped(self.path)
        except FileNotFoundError:
            return                      # none yet
        except (OSError, TooLarge) as exc:
            raise Damaged(self.path, f"cannot be read ({one_line(exc)})") from None
        try:
            variants = _checked(json.loads(data))
        except (ValueError, RecursionError) as exc:     # a JSONDecodeError or UnicodeDecodeError is a ValueError
            raise Damaged(self.path, f"not a history `pypto-build watch` wrote ({one_line(exc, 200)})") from None
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

    def record(self, digest: str, verdict: str, seconds: list[float], changed: list[str]) -> tuple[Variant, bool]:
        """Note one round of `digest`; (the variant, whether it was seen before)."""
        now = time.time()
        seen = self.variants.pop(digest, None)
        if seen is None:
            variant = Variant(digest, now, now, verdict, list(seconds), list(changed))
        else:
            variant = Variant(digest, seen.first_seen, now, verdict, list(seconds) or seen.seconds, seen.changed,
                              seen.rounds + 1)
        self.variants[digest] = variant
        return variant, seen is not None

    def save(self) -> None:
        kept = sorted(self.variants.values(), key=lambda v: v.last_seen)[-KEEP:]
        kept.sort(key=lambda v: v.first_seen)
        atomic.write_text(self.path, json.dumps({"variants": [asdict(v) for v in kept]}, indent=1))

    def listing(self) -> list[str]:
        """`pypto-build history`: one line per variant, oldest first, with its change against the first."""
        variants = sorted(self.variants.values(), key=lambda v: v.first_seen)
        if not variants:
            return [f"no variants recorded in {self.path} yet; `pypto-build watch DIR` records one per round"]
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
             "seconds": "a list of run times", "changed": "a list of file names", "rounds": "a count of rounds"}
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
    if name == "rounds":
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1
    return isinstance(value, str) and (name != "digest" or bool(value))


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
