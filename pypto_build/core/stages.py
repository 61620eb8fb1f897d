"""The stages of a build, by their doit task-group names: the one home of these names.

A task is `<stage>:<name>` (`compile:aiv/k0`, `stamp:.`): `task()` makes one,
`prefix()` is what every task of a stage starts with. Each stage makes its own tasks
(`stage_seam.Stage`; the table: `build_stages.py`); everything else asks about them through the names here.
"""
from __future__ import annotations

import inspect

PTOAS, SPLICE, COMPILE, ORCH, STAMP, REPLAY, VALIDATE = "ptoas", "splice", "compile", "orch", "stamp", "replay", "validate"
LINK, EXTRACT = "link", "extract"          # a device kernel's steps after its compile
PRELUDE = "prelude"                         # a precompiled prelude (compile/prelude.py), before the kernels using it
ALL = (PTOAS, SPLICE, PRELUDE, COMPILE, ORCH, LINK, EXTRACT, STAMP, REPLAY, VALIDATE)       # in the order the graph runs them


def task(stage: str, name: str) -> str:
    """The doit task name of `name` in `stage`."""
    return f"{stage}:{name}"


def prefix(stage: str) -> str:
    """What the name of every task of `stage` starts with."""
    return f"{stage}:"


UNITS = (prefix(COMPILE), prefix(ORCH))                 # one compile unit each: a kernel, an orchestration
STEPS = (prefix(LINK), prefix(EXTRACT))                 # file-to-file steps after a device kernel's compile
PTO = (prefix(PTOAS), prefix(SPLICE))                   # the .pto -> kernel .cpp stage
BUILD = (*PTO, prefix(PRELUDE), *UNITS, *STEPS, prefix(STAMP))           # everything `build` runs


# doit asks every check's signature (inspect.signature: ~20 us on a callable object) for every task of every
# run; each stage's checks state it once, as `__signature__ = CHECK_SIGNATURE`, and it is read back at no cost
CHECK_SIGNATURE = inspect.Signature([inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                                     for name in ("task", "values")])
