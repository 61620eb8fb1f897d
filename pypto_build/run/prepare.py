"""The half of a run that needs no binaries: golden.py's inputs and expected outputs, made in the child process.

`prepare` is what the child (`child._child`) does before it is told which binaries to run: it imports torch,
takes the kept golden result (`golden_cache.lookup`) or runs golden.py (generate_inputs, and compute_golden
when validating), keeps a freshly computed result, and checks the inputs against the sidecar. None of it reads
a binary, so the pipeline may start it while the compiler runs (`ahead.RunAhead`). `Ready.holds` says, when
the binaries are there, whether what was prepared is still what golden.py would give now (the key of the kept
result, `golden_key.stale`); when it is not, the child prepares again: a run never uses a stale input or golden.

An entry that keeps no inputs (golden.py makes the same ones each time: `golden_cache`) is used only after
generate_inputs was called again and made inputs with exactly its digests; otherwise golden.py's result is
computed again here and kept with its inputs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import ArgumentError, one_line
from .reads import Reads


@dataclass
class Ready:
    """What a run needs besides its binaries: the named arguments in call order, the outputs to compare and
    what to compare them with, and what golden.py's result is keyed on."""

    named: dict                             # parameter name -> value, in call order (the run writes into them)
    outputs: list[str]                      # __outputs__, when validating
    golden: object = None                   # the Golden (or the kept result's stand-in) answering RTOL/ATOL
    expected: dict | None = None            # output name -> expected tensor, when validating
    seal: str | None = None                 # the kept golden result this is (None: none was kept)
    key: dict | None = None                 # what `golden_key.stale` checks: the kept index, or golden.py's key
    unkeyed: str | None = None              # why golden.py's result has no key (a file changed while it ran)
    files: list[str] = field(default_factory=list)      # the files golden.py's result is keyed on

    def holds(self, sub: Path) -> str | None:
        """Why what was prepared may no longer hold (a file golden.py's result is keyed on changed since, or it
        could not be keyed), or None. Nothing to check when golden.py did not run and no kept result was used
        (the caller's tensors)."""
        from . import golden_key

        if self.unkeyed:
            return f"its result could not be keyed: {self.unkeyed}"
        stale = None if self.key is None else golden_key.stale(sub, self.key)
        return stale and f"{stale} while the program was built"


def prepare(request: dict, say: Callable[[str], None], at: Callable[[str], None]) -> Ready:
    """golden.py's inputs (or the caller's tensors) and, when validating, the expected outputs; `say` notes
    (quiet: nothing), `at` names the step being taken."""
    from . import golden_cache
    from ..builddir.sidecars import load_sidecar

    sub = Path(request["sub"])
    tensors, validate = request["tensors"], request["validate"]
    from_golden = tensors is None                   # only a result of golden.py's own inputs is kept
    if tensors is not None and not validate:
        names = request["names"] or [f"arg{i}" for i in range(len(tensors))]
        return Ready(dict(zip(names, tensors)), [])
    at("looking up the cached golden result")
    cached, stale = golden_cache.lookup(sub)
    if cached is not None and not from_golden and not cached.same_inputs(tensors):
        cached, stale = None, None                  # the caller's own inputs: compute_golden runs on them
    reads, golden, pairs, taken, unseeded = Reads(sub), None, None, None, False
    if cached is not None and cached.inputs is None and from_golden:
        taken = golden_cache.before(sub)
        with reads:
            golden, pairs = _generate(sub, at)
        unseeded = not cached.same_inputs([v for _, v in pairs])
        if unseeded:
            cached, stale = None, "golden.py's generate_inputs() made other inputs than last time"
    if cached is not None:
        again = "generate_inputs() made the same inputs, compute_golden() not run" if golden else "golden.py not run"
        say(f"golden: cached (computed {cached.when}); {again}")
        pairs = pairs or list(zip(cached.names, cached.inputs if from_golden else tensors))
        ready = Ready({}, [], cached.golden(), cached.expected, seal=cached.seal, key=cached.index,
                      files=cached.files)
    else:
        if stale and validate and from_golden:
            say(f"golden: computing again ({stale})")
        if golden is None:
            taken = golden_cache.before(sub)
            with reads:
                golden, pairs = _generate(sub, at)
        ready = Ready({}, [], golden)
    if tensors is None:
        ready.golden.check_inputs(pairs, load_sidecar(sub))
        ready.named = dict(pairs)
    elif len(pairs) != len(tensors):
        raise ArgumentError(f"replay(validate=True): expected {len(pairs)} tensors (orchestration parameter "
                            f"count from {sub}/golden.py), got {len(tensors)}")
    else:
        ready.named = dict(zip([n for n, _ in pairs], tensors))
    if validate:
        ready.outputs = ready.golden.check_outputs(list(ready.named), ready.named, load_sidecar(sub))
    if cached is None:
        _compute(ready, sub, golden, reads, taken, say, at, validate=validate, from_golden=from_golden,
                 keep_inputs=unseeded)
    return ready


def _generate(sub: Path, at: Callable[[str], None]):
    from .golden import load_golden

    at("loading golden.py")
    golden = load_golden(sub)
    at("calling golden.py generate_inputs()")
    return golden, golden.inputs()


def _compute(ready: Ready, sub: Path, golden, reads: Reads, taken, say: Callable[[str], None],
             at: Callable[[str], None], *, validate: bool, from_golden: bool, keep_inputs: bool) -> None:
    """compute_golden (validating), the result kept for the next run (golden.py's own inputs), and the key
    the run checks before it uses what was prepared."""
    from . import golden_cache

    if validate:
        at("calling golden.py compute_golden()")
        with reads:
            ready.expected = golden.expected(ready.named, ready.outputs)
    modules = reads.imported | golden_cache.modules_of(golden.module)
    ready.files = sorted({*reads.paths(), *(str(sub / rel) for rel in taken.files)})
    try:
        ready.key, ready.unkeyed = golden_cache.key_index(sub, taken, reads.paths(), modules, reads.environ)
    except OSError as exc:              # a file it read is gone already
        ready.key, ready.unkeyed = None, one_line(str(exc), 200)
    if validate and from_golden:
        at("keeping the golden result")
        ready.seal = _keep(say, sub, golden, ready, keep_inputs)


def _keep(say: Callable[[str], None], sub: Path, golden, ready: Ready, keep_inputs: bool) -> str | None:
    """Store golden.py's result for the next run (golden_cache): its seal, or None when it was not kept (no key,
    or a file system that refuses: it only costs that)."""
    from . import golden_cache

    if ready.key is None:
        seal, why = None, ready.unkeyed
    else:
        try:
            seal, why = golden_cache.save(sub, golden, list(ready.named), ready.named, ready.expected, ready.key,
                                          keep_inputs=keep_inputs)
        except OSError as exc:
            seal, why = None, one_line(str(exc), 200)
    if why:
        say(f"golden: result not cached ({why})")
    return seal
