"""A labelled stand-in CANN tree for tests (test support, NOT product code; not a real NPU toolchain).

`make_fake_cann(root)` writes, under `root` (use it as `$ASCEND_HOME_PATH`):

* `README.txt`: what the tree is;
* `bin/ccec`, `bin/ld.lld`: `fake_cann_tools.py` (its docstring says what they
  accept and run: host `g++ -c` and host `ld`), copied behind a two-line
  sh/Python header that runs it with the interpreter that wrote the tree;
* `tools/hcc/bin/aarch64-target-linux-gnu-g++` and `-gcc`: sh scripts running
  the host `g++` / `gcc` (host objects, not aarch64 ones).

simpler reads no version file from a CANN install (only the tools'
`--version`), so none is written. Every script carries the label in a header
comment; every `--version` says it is a stand-in.
"""
from __future__ import annotations

from pathlib import Path

from .standin import python_tool, write_executable

LABEL = "stand-in for CANN's ccec/ld.lld, for tests; not a real NPU toolchain"
TOOLS_SCRIPT = Path(__file__).resolve().with_name("fake_cann_tools.py")
_CONFIG_LINE = 'CONFIG = {"cxx": "g++", "ld": "ld", "std": None, "unresolved": False}'
_CROSS = {"aarch64-target-linux-gnu-g++": "g++", "aarch64-target-linux-gnu-gcc": "gcc"}


def make_fake_cann(root: Path, *, cxx: str = "g++", ld: str = "ld", std: str | None = None,
                   unresolved: bool = False) -> Path:
    """Write the stand-in tree under `root` and return `root` (for `$ASCEND_HOME_PATH`).

    `cxx` / `ld`: the host compiler and linker the stand-in ccec / ld.lld run
    (names looked up on PATH when they run, or paths). `std`: the `-std=` the
    stand-in ccec compiles at instead of ccec's c++17 (e.g. "c++23" for
    PTO-ISA's CPU headers); None keeps c++17. `unresolved`: link leaving
    undefined symbols unresolved (PTO-ISA's CPU code calls the C++ runtime).
    """
    root = Path(root)
    (root / "bin").mkdir(parents=True, exist_ok=True)
    (root / "tools" / "hcc" / "bin").mkdir(parents=True, exist_ok=True)
    (root / "README.txt").write_text(
        f"{LABEL}.\nWritten by pypto_build.testing.fake_cann: bin/ccec compiles with the host {cxx}, "
        f"bin/ld.lld links with the host {ld}, tools/hcc/bin/aarch64-target-linux-gnu-g++/-gcc run the "
        "host g++/gcc. Nothing here targets an NPU.\n", encoding="utf-8")
    script = TOOLS_SCRIPT.read_text(encoding="utf-8")
    if script.count(_CONFIG_LINE) != 1:
        raise RuntimeError(f"{TOOLS_SCRIPT}: the line {_CONFIG_LINE!r} must occur exactly once")
    config = {"cxx": cxx, "ld": ld, "std": std, "unresolved": unresolved}
    script = script.replace(_CONFIG_LINE, f"CONFIG = {config!r}")
    for name in ("ccec", "ld.lld"):
        python_tool(root / "bin" / name, script, f"{LABEL} (pypto_build.testing.fake_cann)")
    for name, host in _CROSS.items():
        write_executable(root / "tools" / "hcc" / "bin" / name,
                         f"#!/bin/sh\n# {LABEL}: this {name} runs the host {host} (host objects, not aarch64 ones).\n"
                         f"exec {host} \"$@\"\n")
    return root

