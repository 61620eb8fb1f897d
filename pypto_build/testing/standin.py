"""Writing a labelled stand-in tool (test support): a Python script run by this interpreter behind a sh header."""
from __future__ import annotations

import sys
from pathlib import Path

from ..core import atomic


def python_tool(path: Path, script: str, label: str) -> Path:
    """Write `script` (no `from __future__`: the header line comes first) as the executable `path`,
    behind a two-line sh/Python header running it with this interpreter and a comment naming `label`."""
    header = f"#!/bin/sh\n\"exec\" {python_word()} \"$0\" \"$@\"\n# {label}\n"
    return write_executable(path, header + script)


def python_word() -> str:
    """This interpreter's path as one word that both sh and Python read as a string literal."""
    exe = sys.executable
    if not exe or any(c in exe for c in "\\\n'\""):
        raise RuntimeError(f"cannot write a stand-in tool header for the interpreter path {exe!r}")
    return f"'{exe}'"


def write_executable(path: Path, text: str) -> Path:
    atomic.write_text(path, text, mode=0o755)
    return path
