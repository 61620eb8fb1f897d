"""Finding the smallest set of culprit units among suspects, by probing mixes of two variants (pure).

A probe runs the program with the current binaries of a subset of the suspects and the good binaries of
the rest, and answers True when the result fails the oracle. Probes are whole program runs, so the
search counts them and never repeats one.

Guarantee: the culprits returned were probed directly as a mix and failed (or are the all-current
endpoint), and are 1-minimal as far as the probes show: the mix without any one of them was probed (or
is the all-good endpoint) and passed. Deterministic, in the suspects' order.

Bound: one culprit among n suspects takes at most ceil(log2 n) + 1 probes besides the two endpoints: a
binary split probes one half and infers the other when the probed half passes; an inferred last
suspect is probed once more ("verify"). When that verification passes, the inference was wrong
(culprits that fail only together, or an oracle that is not monotone): ddmin (Zeller & Hildebrandt:
subsets, then complements, then finer granularity) takes over from the last mix that failed when
probed, and finds interacting culprits together.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Probe:
    """One run the search made."""
    current: tuple[str, ...]        # the suspects run with their current binaries (the rest good)
    fails: bool                     # the run's result differs from the oracle
    why: str                        # "all current", "all good", "half 1/2 of 6", "verify", "ddmin complement 2/4 of 7"


@dataclass(frozen=True)
class Search:
    """What the search found, and every run it took, in order. Verdicts: "culprits" (these suspects, with
    their current binaries, make the program fail); "agree" (all-current does not fail: nothing to blame);
    "good fails" (all-good fails the oracle: the good variant itself fails, nothing can be blamed);
    "no suspects" (all-current fails but no unit differs: the difference is not in the binaries)."""
    culprits: tuple[str, ...]       # empty unless verdict is "culprits"
    probes: tuple[Probe, ...]
    verdict: str


class _Prober:
    """Runs probes through the caller's callable, once per mix, and records them."""

    def __init__(self, probe: Callable[[frozenset[str]], bool], on_probe: Callable[[Probe], None]) -> None:
        self.probe, self.on_probe = probe, on_probe
        self.known: dict[frozenset[str], bool] = {}
        self.made: list[Probe] = []

    def fails(self, mix: tuple[str, ...], why: str) -> bool:
        """Whether `mix` (in the suspects' order) fails: probed unless known."""
        key = frozenset(mix)
        if key not in self.known:
            answer = bool(self.probe(key))
            self.known[key] = answer
            record = Probe(mix, answer, why)
            self.made.append(record)
            self.on_probe(record)
        return self.known[key]


def _parts(mix: tuple[str, ...], n: int) -> list[tuple[str, ...]]:
    """`mix` cut into `n` consecutive parts, as equal as can be, the longer ones first."""
    size, extra = divmod(len(mix), n)
    cuts = [i * size + min(i, extra) for i in range(n + 1)]
    return [mix[cuts[i]:cuts[i + 1]] for i in range(n)]


def _bisect(suspects: tuple[str, ...], prober: _Prober) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    """Binary split: (the last mix known to fail, the one culprit found or None when the inference broke)."""
    failed, candidate, verified = suspects, suspects, True
    while len(candidate) > 1:
        first, second = _parts(candidate, 2)
        if prober.fails(first, f"half 1/2 of {len(candidate)}"):
            failed, candidate, verified = first, first, True
        else:
            candidate, verified = second, False         # inferred: fails only if the oracle is monotone
    if verified or prober.fails(candidate, "verify"):
        return candidate, candidate
    return failed, None


def _ddmin(failing: tuple[str, ...], prober: _Prober) -> tuple[str, ...]:
    """A 1-minimal failing sub-mix of `failing` (which failed when probed)."""
    mix, n = failing, 2
    while len(mix) > 1:
        parts = _parts(mix, n)
        smaller = next((p for i, p in enumerate(parts)
                        if prober.fails(p, f"ddmin subset {i + 1}/{n} of {len(mix)}")), None)
        if smaller is not None:
            mix, n = smaller, 2
            continue
        complements = [tuple(s for s in mix if s not in p) for p in map(set, parts)] if n > 2 else []
        smaller = next((c for i, c in enumerate(complements)
                        if prober.fails(c, f"ddmin complement {i + 1}/{n} of {len(mix)}")), None)
        if smaller is not None:
            mix, n = smaller, max(n - 1, 2)
        elif n < len(mix):
            n = min(2 * n, len(mix))
        else:
            break
    return mix


def find_culprits(suspects: Sequence[str], probe: Callable[[frozenset[str]], bool], *,
                  current_fails: bool | None = None, good_fails: bool | None = None,
                  on_probe: Callable[[Probe], None] = lambda p: None) -> Search:
    """A 1-minimal set of suspects whose current binaries make the program fail (see the module's
    guarantee and bound). `current_fails` / `good_fails`: the endpoints' answers when the caller knows
    them (None: probed here, "all current" first; "all good" only when all-current fails); a known
    failing all-good is "good fails" at once. `on_probe` sees each run as soon as it answers; a probe
    that raises propagates (the runs before it were shown)."""
    names = tuple(suspects)
    if len(set(names)) != len(names):
        raise ValueError(f"suspects named twice: {sorted({s for s in names if names.count(s) > 1})}")
    prober = _Prober(probe, on_probe)

    def done(verdict: str, culprits: tuple[str, ...] = ()) -> Search:
        return Search(culprits, tuple(prober.made), verdict)

    if good_fails:
        return done("good fails")
    if current_fails is None:
        current_fails = prober.fails(names, "all current")
    prober.known[frozenset(names)] = current_fails
    if not current_fails:
        return done("agree")
    if not names:
        return done("no suspects")
    if good_fails is None:
        good_fails = prober.fails((), "all good")
    prober.known[frozenset()] = good_fails
    if good_fails:
        return done("good fails")
    failed, culprit = _bisect(names, prober)
    return done("culprits", culprit if culprit is not None else _ddmin(failed, prober))
