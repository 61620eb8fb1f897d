"""`pypto-build example`: copy an example build directory shipped with the package, replay and validate it,
then edit it once and replay again to show that only what the edit reaches is rebuilt. The copy gets the
`debug/run.py` PyPTO's `ir.compile()` writes (by the emitter, unless PYPTO_EMIT_DEBUG_RUNNER=0).

The plain example ships no `.pto` files, so it passes whatever ptoas is installed (or none). `--pto` adds
the example's `ptoas/` stage — `.pto` files in the package's stand-in format — and always runs it with the
package's labelled stand-in ptoas (`testing/fake_ptoas.py`, written into the copy), never the one on PATH.
"""
from __future__ import annotations

import dataclasses
import os
import re
import secrets
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from ..core import atomic, settings
from ..compat import interpreter, write_run_script
from .. import pipeline
from ..core import stages
from ..builddir.markers import PTOAS_DIR
from ..errors import OK, LayoutError
from ..options import Request

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"      # the package's (this module is in cli/)
STANDIN = Path("standin_ptoas") / "ptoas"       # the stand-in ptoas, inside a copy of the `--pto` example
EDIT_MARK = "edited by `pypto-build example`"
BYTECODE = "__pycache__"        # pip byte-compiles the examples' .py files on install: not part of an example


@dataclass(frozen=True)
class Example:
    """One shipped example: its folders under `examples/` (laid over each other), what it computes, the file
    the demonstration edits, the default destination and whether its `.pto` stage runs."""

    folders: tuple[str, ...]
    what: str
    edit: str
    default_dest: str
    pto: bool = False

    def files(self) -> list[str]:
        """Every file the copy starts with, relative to it."""
        return sorted({p.relative_to(EXAMPLES / f).as_posix() for f in self.folders
                       for p in (EXAMPLES / f).rglob("*") if p.is_file() and BYTECODE not in p.parts})


PLAIN = Example(("matmul_relu",), "out = relu(a @ b + bias)", "kernels/aiv/matmul_relu_incore_1_aiv.cpp",
                "pypto_build_example")
WITH_PTO = Example(("matmul_relu", "matmul_relu_ptoas"), "out = relu(a @ b + bias), with its ptoas/*.pto",
                   "ptoas/matmul_relu_incore_1_aiv.pto", "pypto_build_example_pto", pto=True)
L3 = Example(("two_chips",), "two chip programs on two ranks, comm-free",
             "next_levels/chip_b/kernels/aiv/chip_b_incore_1_aiv.cpp", "pypto_build_example_l3")


def run_example(args) -> int:
    """Copy the shipped example (unless DEST holds a copy already), replay it with validation, then show one
    edit-rebuild-replay loop."""
    example = L3 if args.l3 else WITH_PTO if args.pto else PLAIN
    dest = args.dest or Path(example.default_dest)
    fresh = not os.path.lexists(dest)
    if fresh:
        emit = settings.emit_debug_runner()         # a bad value is refused before anything is copied
        _copy(example, dest)
        print(f"pypto-build: copied the example ({example.what}) to {dest}")
        if emit:
            script = write_run_script(dest, ptoas=STANDIN.as_posix() if example.pto else None)
            if script is not None:
                print(f"pypto-build: wrote {script}, PyPTO's debug runner (run it: {interpreter()} "
                      f"{shlex.quote(str(script))})")
    else:
        _check_copy(example, dest)
        if example is PLAIN and (dest / PTOAS_DIR).is_dir():
            example = WITH_PTO                   # a copy of the `--pto` example replays as one
    # replay --validate on the recorded platform (or host where simpler is missing), through the one pipeline;
    # no artefact cache: the demonstration compiles
    standin = {"pto": _standin_options(dest)} if example.pto else {}
    request = Request(jobs=max(1, args.jobs), tasks=(stages.VALIDATE,), force=(stages.prefix(stages.VALIDATE),),
                      **standin)

    def replay_once() -> int:
        return pipeline.run(dest, request, progress=sys.stdout, check=False).status

    status = replay_once()
    if status != OK:
        return status
    if fresh:
        edited = dest / example.edit
        if example.pto:
            print(f"\npypto-build: now editing {edited} (a `// CPP:` line: a comment in the kernel it makes) and "
                  "replaying: the stand-in ptoas regenerates its raw output, the body is spliced into the kernel "
                  "file, and only that kernel recompiles")
            _add_cpp_comment(edited)
        else:
            print(f"\npypto-build: now editing {edited} (a comment) and replaying: only that kernel recompiles")
            with open(edited, "a", encoding="utf-8") as handle:
                handle.write(f"// {EDIT_MARK} to show an incremental rebuild\n")
        status = replay_once()
        if status != OK:
            return status
    if example.pto:
        print(f"\npypto-build: now `pypto-build watch --validate --ptoas {dest / STANDIN} {dest}` and edit the "
              f"`// CPP:` lines of its ptoas/*.pto (or the kernels): every save rebuilds, runs and validates. "
              f"{dest / STANDIN} is the package's labelled stand-in, not a real ptoas: these .pto files are in its "
              "format, not real PTO")
    else:
        print(f"\npypto-build: now `pypto-build watch --validate {dest}` and edit the kernels under it: every save "
              f"rebuilds, runs and validates (or, once: `pypto-build replay --validate {dest}`); "
              "`pypto-build example --pto` shows the ptoas/*.pto flow")
    return OK


def _copy(example: Example, dest: Path) -> None:
    """The example's folders into a temporary sibling of `dest`, renamed onto it when complete: an
    interrupted copy leaves no half example at `dest`."""
    tmp = dest.parent / f".{dest.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        for folder in example.folders:
            shutil.copytree(EXAMPLES / folder, tmp, dirs_exist_ok=True, ignore=shutil.ignore_patterns(BYTECODE))
        if example.pto:
            from ..testing import fake_ptoas
            fake_ptoas.make_fake_ptoas(tmp / STANDIN.parent)
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _check_copy(example: Example, dest: Path) -> None:
    """An existing DEST is replayed only when it is a copy of this example (edits and all)."""
    missing = next((f for f in example.files() if not (dest / f).is_file()), None)
    if not dest.is_dir() or missing is not None:
        what = "not a directory" if not dest.is_dir() else f"no {missing}"
        raise LayoutError(f"{dest}: exists and is not a copy of the example `pypto-build example"
                          f"{' --pto' if example.pto else ' --l3' if example is L3 else ''}` makes ({what}); "
                          f"pass a DEST that does not exist yet (the example is copied there), e.g. "
                          f"{example.default_dest}")


def _standin_options(dest: Path):
    """The `.pto` stage run with the copy's stand-in ptoas (written again if it was removed), whatever
    PATH, PTOAS_ROOT or PYPTO_REBUILD_FROM_PTO say: these `.pto` files are in the stand-in's format."""
    from ..pto import pto_options

    standin = dest / STANDIN
    if not standin.is_file():
        from ..testing import fake_ptoas
        fake_ptoas.make_fake_ptoas(standin.parent)
    return dataclasses.replace(pto_options(ptoas=str(standin.resolve())), enabled=True, disabled_by="")


def _add_cpp_comment(pto: Path) -> None:
    """A `// CPP:` line before the first one of the stand-in `.pto`: a comment at the top of the kernel body."""
    text = pto.read_text(encoding="utf-8")
    first = re.search(r"^([ \t]*)// CPP:", text, re.MULTILINE)
    if first is None:
        raise LayoutError(f"{pto}: no `// CPP:` line to edit; restore it from the package's example")
    atomic.write_text(pto, f"{text[:first.start()]}{first.group(1)}// CPP: // {EDIT_MARK} --pto: from the .pto to "
                           f"the kernel\n{text[first.start():]}")
