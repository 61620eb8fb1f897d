"""The commands a compile unit runs, assembled in one place: for the compile action and for compdb.

A unit's argv (`CompileUnit.argv`, the platform's command) says what is compiled; what runs adds where
it writes and how it runs: the binary's path (the build's temp file, moved onto the output after the
checks), the depfile flags (`-MD -MF <file> -MT <output>`), `-ffile-prefix-map` (a relocatable binary,
unless the unit runs in a toolchain's own directory), and with a launcher that distributes compile-only
jobs, the split into a compile through it and a link here (`launcher.split`), and the flags that take a
precompiled prelude (`prelude_actions.take`). `compile_commands.json` lists the same commands under the
names the build installs (`listed`): the output itself, no depfile flags, and a split compile's object as
`<output>.o`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from ..toolchain.launcher import split
from ..core.procs import path_arg
from .plan import CompileUnit

if TYPE_CHECKING:
    from ..toolchain.launcher import Launcher
    from ..toolchain.compiler import Compiler

OBJECT_SUFFIX = ".o"        # compdb's name of a split compile's object: the output's name plus this


@dataclass(frozen=True)
class CompileCommand:
    """What one compile runs, in `cwd` (relative to the build root, or absolute): `compile`, then, when a
    launcher runs the compile-only part elsewhere, `link` here (its object in place of the source).
    `target`: the unit's output as the argv names it (the depfile's rule is for it)."""

    cwd: str
    compile: tuple[str, ...]
    target: str
    link: tuple[str, ...] = ()
    launched: bool = False          # `compile` goes through the launcher (`link` always runs here)


def unit_launcher(launcher: Launcher | None, compiler: Compiler) -> Launcher | None:
    """The run's launcher as it runs a unit's compiler (`Compiler.launched_as`), or None."""
    return launcher.for_compiler(compiler.launched_as) if launcher is not None else None


def splits(unit: CompileUnit, launcher: Launcher | None) -> bool:
    """Whether the unit runs as a compile through `launcher` and a link here (else whole, here)."""
    return launcher is not None and split(unit.argv) is not None


def compile_command(unit: CompileUnit, binary: str | os.PathLike, depfile: str | os.PathLike | None = None,
                    obj: str | os.PathLike | None = None, launcher: Launcher | None = None,
                    root: str | os.PathLike = ".", prelude: tuple[str, ...] = ()) -> CompileCommand:
    """The commands that compile `unit` into `binary`, writing `depfile` (None: no depfile flags) and, when
    split (`splits`), the object `obj` in between. Paths are relative to the build root `root` (the
    compile action's working directory) or absolute; the argv names them relative to the unit's cwd.
    `prelude`: the flags that take a precompiled prelude (`prelude_actions.take`; never with a launcher)."""
    real_root = os.path.realpath(root)
    here = os.path.normpath(os.path.join(real_root, unit.cwd or unit.sub_rel))

    def arg(path: str | os.PathLike) -> str:
        return path_arg(os.path.relpath(os.path.join(real_root, path), here))

    cwd, target = unit.cwd or unit.sub_rel, arg(unit.output)
    dep = None if depfile is None else ("-MD", "-MF", arg(depfile), "-MT", target)
    parts = split(unit.argv) if launcher is not None else None
    if parts is None:
        return CompileCommand(cwd, _writing(unit, unit.argv, arg(binary), (*prelude, *(dep or ())) if prelude
                                            else dep, here), target)
    if obj is None:
        raise ValueError(f"{unit.task}: a split compile needs the object's path")
    link = list(output_at(parts[1], arg(binary)))
    link[-1] = arg(obj)                                 # the object in the source's place
    return CompileCommand(cwd, tuple(launcher.wrap(_writing(unit, parts[0], arg(obj), dep, here))), target,
                          tuple(link), True)


def listed(unit: CompileUnit, launcher: Launcher | None = None, root: str | os.PathLike = ".",
           prelude: tuple[str, ...] = ()) -> CompileCommand:
    """The unit's commands as compile_commands.json lists them: the build's, under the names it installs
    (the output, not its temp file; a split compile's object as `<output>.o`), without the depfile flags;
    `prelude`: the flags that take a precompiled prelude, where the build adds them."""
    return compile_command(unit, unit.output, None, unit.output + OBJECT_SUFFIX, launcher, root, prelude)


def output_at(argv: Sequence[str], out: str) -> tuple[str, ...]:
    """`argv` with its (last) `-o` naming `out`."""
    o = last_o(argv)
    return (*argv[:o + 1], out, *argv[o + 2:])


def _writing(unit: CompileUnit, argv: Sequence[str], out: str, depfile: tuple[str, ...] | None,
             here: str) -> tuple[str, ...]:
    """`argv` writing `out` (and, with `depfile`, its flags) from the cwd `here`."""
    found = list(output_at(argv, out))
    o = last_o(found)
    if depfile is not None:
        # -MD, not -MMD: -MMD leaves out every header it deems a system one (under -isystem, after
        # `#pragma GCC system_header`, and all they include), and those are inputs like any other.
        found[o:o] = depfile
    if not unit.cwd:
        # relocatable binaries of a relocatable directory; a toolchain's own cwd (unit.cwd) keeps its exact bytes
        found[o:o] = [f"-ffile-prefix-map={here}=."]
    return tuple(found)


def last_o(argv: Sequence[str]) -> int:
    """Where `argv`'s last `-o` is (ValueError: it has none)."""
    return len(argv) - 1 - list(argv)[::-1].index("-o")
