"""`debug/run.py` as PyPTO's `ir.compile()` writes it, running pypto_build's replay.

`write_run_script(work_dir)` renders the script from the sidecar of a
single-chip (L2, `compiled_meta.json`) or distributed (L3, `distributed_meta.json`)
directory: `_inline_inputs()` with one statement per
parameter, a `_user_compare(...)` hook, and a main that calls
`pypto_build.compat.runner_main.main` (same flags as `pypto-build replay`, validation
on by default). Run by a Python without torch or pypto_build, the script says in
one line which interpreter to use (the one that wrote it). `emit_runner_command(args)`
is the `pypto-build emit-runner DIR` verb. No torch import here: the statements are text.
"""
from __future__ import annotations

import argparse
import keyword
import os
import shlex
import sys
from pathlib import Path
from typing import Callable

from ..core import atomic, settings
from ..errors import OK, UserError
from ..builddir.markers import COMPILED_META, DEBUG_RUNNER, DISTRIBUTED_META
from ..builddir.sidecars import ParamMeta, ProgramMeta, known_torch_dtype, load_sidecar

__all__ = ["write_run_script", "render_run_script", "skip_reason", "inline_statement", "torch_dtype_name",
           "emit_runner_command", "add_emit_runner_arguments", "interpreter", "ENV_VAR"]

ENV_VAR = settings.EMIT_DEBUG_RUNNER
_NOTE_DYNAMIC = "  # NOTE: dynamic dim(s) filled with 1 — edit as needed"
_SCALAR_TODO = "None  # TODO: scalar param — set a ctypes value"

_INTEGER = frozenset(("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"))


def torch_dtype_name(dtype: str) -> str:
    """`torch.<name>` for a compiled_meta dtype string (PyPTO's dtype table; unknown -> torch.float32)."""
    return f"torch.{known_torch_dtype(dtype) or 'float32'}"


def _py_name(name: str) -> str:
    """The parameter name as a usable Python identifier in the script."""
    if not name.isidentifier() or keyword.iskeyword(name):
        name = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "arg"
        name = f"_{name}" if name[0].isdigit() or keyword.iskeyword(name) else name
    return f"{name}_" if name in ("torch", "sys", "Path", "main") else name


def inline_statement(param: ParamMeta, name: str | None = None) -> str:
    """The `_inline_inputs()` statement for one parameter (as PyPTO's debug runner writes it)."""
    name = name or _py_name(param.name)
    if param.shape is None:
        return f"{name} = {_SCALAR_TODO}"
    shape = tuple(d if d >= 0 else 1 for d in param.shape)
    note = _NOTE_DYNAMIC if any(d < 0 for d in param.shape) else ""
    torch_name = known_torch_dtype(param.dtype) or "float32"
    dtype = f"torch.{torch_name}"
    if param.direction == "Out":
        return f"{name} = torch.zeros({shape!r}, dtype={dtype}){note}"
    if torch_name == "bool":
        return f"{name} = torch.randint(0, 2, {shape!r}, dtype={dtype}){note}"
    if torch_name in _INTEGER:
        return f"{name} = torch.randint(0, 8, {shape!r}, dtype={dtype}){note}"
    return f"{name} = torch.randn({shape!r}, dtype={dtype}){note}"


def _docstring_safe(text: str) -> str:
    """`text` as it reads inside the script's (non-raw) docstring."""
    return text.replace("\\", "\\\\").replace('"""', "'''")


def _flags_text(command: str) -> str:
    from .runner_main import make_parser

    parser = make_parser(prog=command, validate_default=True)
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=100, max_help_position=32)
    return "\n".join(f"  {line}".rstrip() for line in _docstring_safe(parser.format_help()).splitlines())


def interpreter() -> str:
    """The command that runs debug/run.py with this process's torch and pypto_build: this Python, after the
    PYTHONPATH entry pypto_build was imported from when it came from there."""
    root = str(Path(__file__).resolve().parents[2])
    entries = [str(Path(e).resolve()) for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    python = shlex.quote(sys.executable or "python3")
    return f"PYTHONPATH={shlex.quote(root)} {python}" if root in entries else python


def render_run_script(meta: ProgramMeta, script: Path | str = DEBUG_RUNNER, ptoas: str | None = None) -> str:
    """The text of `debug/run.py` for a validated sidecar (compiled_meta or distributed_meta); `script` is
    where it is written (its usage lines name it); `ptoas`, a path inside the build directory, becomes the
    script's default `--ptoas`."""
    command = f"python {shlex.quote(str(script))}"
    usage = _docstring_safe(command)
    names = [_py_name(p.name) for p in meta.params]
    inits = "\n".join(f"    {inline_statement(p, n)}" for p, n in zip(meta.params, names)) or "    pass"
    joined = ", ".join(names)
    platform = meta.platform or "unknown"
    level = "distributed (L3) program" if meta.distributed_config is not None else "program"
    defaults = f"_DEFAULTS = ['--ptoas', str(_WORK_DIR / {ptoas!r})]\n" if ptoas else ""
    sidecar = DISTRIBUTED_META if meta.distributed_config is not None else COMPILED_META
    needs = f"pypto-build: debug/run.py needs pypto_build and torch: run it with {interpreter()}"
    return f'''#!/usr/bin/env python3
"""Auto-generated debug runner — only ``_inline_inputs`` and ``_user_compare`` are editable.

Rebuild what changed in the parent build directory (content-keyed, by
pypto_build) and run it, as ``pypto-build replay`` does, on the platform
the directory records (or ``--platform``'s):

    {usage}

When a sibling ``golden.py`` exists (and --validate, the default, is in
effect), inputs come from ``golden.generate_inputs`` and the outputs are
validated against ``compute_golden``. Otherwise the inputs declared inline
in ``_inline_inputs`` are used and ``_user_compare`` is called after the run
so you can write your own assertions.

The {level} was compiled for platform {platform}: it runs there through
simpler where simpler is installed, else on pypto_build's host runtime (a
functional CPU reference, not an NPU model), and the first line says which.

------------------------------------------------------------------------
CLI flags (forwarded to ``pypto_build.compat.runner_main.main``; the same as
``pypto-build replay``; ``--help`` is authoritative)
------------------------------------------------------------------------
{_flags_text(command)}

Examples:
  {usage} --swimlane            # also write a task timeline to dfx_outputs/
  {usage} --no-validate         # skip golden, run _user_compare
  {usage} --recompile           # rebuild every binary once

Generated by pypto_build.compat.runner.
"""

import sys
from pathlib import Path

try:
    import torch

    from pypto_build.compat.runner_main import main
except ModuleNotFoundError as _missing:         # run by a Python without them: say which one has them
    if (_missing.name or "").partition(".")[0] not in ("torch", "pypto_build"):
        raise
    print({needs!r}, f"(not {{sys.executable}}, which has no {{_missing.name}})", file=sys.stderr)
    sys.exit(2)

_WORK_DIR = Path(__file__).resolve().parent.parent
{defaults}

def _inline_inputs():
    """Materialise inputs from the shape / dtype info in {sidecar}."""
{inits}
    return [{joined}]


def _user_compare({joined}):
    """Hand-written comparison, called after the run when golden validation did NOT run.

    Output tensors have been filled in place. Edit the body to add your own
    assertions, for example::

        expected = a + b
        assert torch.allclose(c, expected, rtol=1e-5, atol=1e-5), (
            f"max diff = {{(c - expected).abs().max().item()}}"
        )
    """
    return  # TODO: add your comparison here


if __name__ == "__main__":
    sys.exit(main([str(_WORK_DIR), {"*_DEFAULTS, " if ptoas else ""}*sys.argv[1:]], inline_inputs=_inline_inputs, user_compare=_user_compare))
'''


def skip_reason(work_dir: Path) -> str | None:
    """Why no run.py would be written for `work_dir` (disabled, a multi-orch parent, no sidecar), else None.
    A bad PYPTO_EMIT_DEBUG_RUNNER value raises its SettingError."""
    from ..builddir.layout import BuildKind, classify

    if not settings.emit_debug_runner():
        return f"{ENV_VAR}={os.environ[ENV_VAR]} disables debug/run.py"
    work_dir = Path(work_dir)
    kind, _markers = classify(work_dir)
    if kind is BuildKind.MULTI_ORCH:
        return (f"{work_dir} is a multi-orchestration parent; PyPTO writes no debug/run.py for it (replay one of "
                "its next_levels/<name>/ sub-builds)")
    sidecar = DISTRIBUTED_META if kind is BuildKind.L3 else COMPILED_META
    if not (work_dir / sidecar).is_file():
        return f"{work_dir / sidecar} not found; the inline inputs are derived from it"
    return None


def write_run_script(work_dir: Path, *, on_skip: Callable[[str], None] | None = None,
                     ptoas: str | None = None) -> Path | None:
    """Write `<work_dir>/debug/run.py` (atomic, mode 0o755); return its path, or None when skipped.

    Written for single-chip (L2) and distributed (L3) builds, from compiled_meta.json or
    distributed_meta.json. Skipped (None, reason passed to `on_skip`) when PYPTO_EMIT_DEBUG_RUNNER is
    0/false/no, for multi-orch parents and without the sidecar. A malformed sidecar raises its MetaError
    (ValueError). `ptoas` (relative to `work_dir`) is the script's default `--ptoas`.
    """
    work_dir = Path(work_dir).resolve()
    reason = skip_reason(work_dir)
    if reason is not None:
        if on_skip is not None:
            on_skip(reason)
        return None
    meta = load_sidecar(work_dir)
    assert meta is not None                     # skip_reason found it
    target = work_dir / DEBUG_RUNNER
    from ..core.confine import confine_tree
    confine_tree(work_dir, target, "debug runner")
    atomic.write_text(target, render_run_script(meta, target, ptoas), mode=0o755)
    return target


def add_emit_runner_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of `pypto-build emit-runner DIR`."""
    p.add_argument("dir", type=Path, metavar="DIR",
                   help="build_output/<jit_dir>/ directory (single-chip or distributed)")


def emit_runner_command(args: argparse.Namespace) -> int:
    """`pypto-build emit-runner DIR`: print the path written, or that PYPTO_EMIT_DEBUG_RUNNER disables it (0);
    any other reason nothing was written is a UserError (one line, exit 2)."""
    reasons: list[str] = []
    path = write_run_script(args.dir, on_skip=reasons.append)
    if path is not None:
        print(f"pypto-build: wrote {path} (run it: {interpreter()} {shlex.quote(str(path))})")
        return OK
    if not settings.emit_debug_runner():
        print(f"pypto-build: no debug/run.py written: {reasons[0]}")
        return OK
    raise UserError(f"no debug/run.py written: {reasons[0] if reasons else 'skipped'}")
