"""The variants of a program tried in a build directory: verdict and run time per content of its binaries.

A *variant* is the digest of every binary the program runs (kernels, orchestrations,
in plan order): an edit that changes no binary is the same variant, a revert is an
earlier one again. `watch` records each round's variant in `.pypto_build/history.json`
(atomically, the newest `KEEP` variants), so a tuning loop sees at once whether an edit
helped, and `pypto-build history DIR` lists what was tried.
"""
from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import atomic, safeio
from ..hashing import file_digest, text_digest
from ..markers import STATE_DIR

RECORD = "history.json"
KEEP = 500


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
    """The variants recorded for one build directory, oldest first."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / STATE_DIR / RECORD
        self.variants: dict[str, Variant] = {}
        try:
            for raw in json.loads(safeio.read_text(self.path)).get("variants", []):
                self.variants[raw["digest"]] = Variant(**raw)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            self.variants = {}          # none yet, or unreadable: a history starts afresh, nothing else depends on it

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
        first = next((v.median for v in variants if v.median), None)
        lines = [f"{'variant':<10}  {'first seen':<19}  {'rounds':>6}  {'verdict':<12}  {'median':>10}  "
                 f"{'vs first':>8}  changed"]
        for v in variants:
            median = f"{v.median * 1e3:.3f} ms" if v.median else "-"
            against = percent(v.median, first) if v.median and first else "-"
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(v.first_seen))
            lines.append(f"{v.short:<10}  {when:<19}  {v.rounds:>6}  {v.verdict:<12}  {median:>10}  {against:>8}  "
                         f"{', '.join(v.changed) or '-'}")
        return lines


def percent(value: float, base: float) -> str:
    """`value` against `base` as a signed percentage."""
    return f"{(value / base - 1) * 100:+.1f}%"
