#!/usr/bin/env python3
# Test stand-in for ptoas: same command line, trivial input language; it is not ptoas.
"""A labelled stand-in for ptoas (test support and `pypto-build example --pto`; NOT a compiler of PTO).

Run as a program it accepts exactly PyPTO's rebuild command line
    ptoas <in>.pto -o <out>.cpp --enable-insert-sync --pto-level=<level2|level3>
(anything else: usage on stderr, exit 2) and `--version` alone (`ptoas <version> (...)`, the
shape of real ptoas' answer, labelled). Like ptoas (LLVM's command line), a path argument
starting with `-` would be an option and one starting with `@` a response file: such
arguments are refused (exit 2). The "input language": every line whose text, after leading
whitespace, starts with `// CPP:` contributes the rest of the line (one space after the colon
dropped) as one line of raw C++; all other lines are ignored. The output starts with the two
lines real ptoas output carries and PyPTO's preprocessing strips (`#include
"pto/pto-inst.hpp"`, `using namespace pto;`).

`make_fake_ptoas(folder, version=..., reject=...)` writes a copy as `folder/ptoas`, run by this
interpreter; with `reject` the copy stands for a ptoas that cannot compile its input (an older
or stricter release, or a real ptoas given this stand-in's format): every compile fails with an
MLIR-style `<file>:1:1: error: <reject>`, nothing written, exit 1.

Knobs for tests (searched in the .pto text):
  FAKE_PTOAS_FAIL     message on stderr, exit 1, no output written
  FAKE_PTOAS_HANG     sleep 3600 s
  FAKE_PTOAS_FORK_HANG  start a child `sleep 3600`, append "<own pid> <child pid>" to
                      $FAKE_PTOAS_PIDFILE when set, then sleep 3600 s: a hung tool with a helper
  FAKE_PTOAS_GARBAGE  write an output without any kernel function
Env FAKE_PTOAS_LOG: append "<pto path> <level>" per accepted invocation.

Standard library only and no `from __future__` (a copy runs behind a sh header line).
"""
import os
import re
import subprocess
import sys
import time

LABEL = "pypto_build's labelled stand-in for ptoas, not a compiler of PTO"
CONFIG = {'version': '0.0+standin', 'reject': None}     # make_fake_ptoas rewrites this line in its copy
PROLOGUE = '#include "pto/pto-inst.hpp"\nusing namespace pto;\n'
USAGE = "usage: ptoas <in>.pto -o <out>.cpp --enable-insert-sync --pto-level=<level2|level3>"


def compile_text(pto: str) -> str:
    out = [PROLOGUE]
    for line in pto.splitlines():
        stripped = line.lstrip()
        if stripped.startswith("// CPP:"):
            payload = stripped[len("// CPP:"):]
            out.append((payload[1:] if payload.startswith(" ") else payload) + "\n")
    return "".join(out)


def main(argv: list) -> int:
    if argv == ["--version"]:
        print(f"ptoas {CONFIG['version']} ({LABEL})")
        return 0
    if (len(argv) != 5 or not argv[0].endswith(".pto") or argv[1] != "-o" or not argv[2].endswith(".cpp")
            or argv[3] != "--enable-insert-sync" or not re.fullmatch(r"--pto-level=level[23]", argv[4])):
        print(f"fake_ptoas: unexpected command line {argv!r}\n{USAGE}", file=sys.stderr)
        return 2
    pto_path, out_path, level = argv[0], argv[2], argv[4].split("=", 1)[1]
    for path in (pto_path, out_path):
        if path.startswith(("-", "@")):
            what = "an option" if path.startswith("-") else "a response file"
            print(f"fake_ptoas: {path!r} would be read as {what}, not a path\n{USAGE}", file=sys.stderr)
            return 2
    log = os.environ.get("FAKE_PTOAS_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(f"{pto_path} {level}\n")
    try:
        with open(pto_path, encoding="utf-8") as handle:
            pto = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        print(f"fake_ptoas: cannot read {pto_path}: {exc}", file=sys.stderr)
        return 1
    if CONFIG["reject"]:
        print(f"{pto_path}:1:1: error: {CONFIG['reject']}", file=sys.stderr)
        return 1
    if "FAKE_PTOAS_FAIL" in pto:
        print(f"fake_ptoas: error: {pto_path}: FAKE_PTOAS_FAIL requested", file=sys.stderr)
        return 1
    if "FAKE_PTOAS_FORK_HANG" in pto:
        child = subprocess.Popen(["sleep", "3600"])
        pidfile = os.environ.get("FAKE_PTOAS_PIDFILE")
        if pidfile:
            with open(pidfile, "a", encoding="utf-8") as handle:
                handle.write(f"{os.getpid()} {child.pid}\n")
        time.sleep(3600)
    if "FAKE_PTOAS_HANG" in pto:
        time.sleep(3600)
    if "FAKE_PTOAS_GARBAGE" in pto:
        text = PROLOGUE + "// fake_ptoas: FAKE_PTOAS_GARBAGE\nint fake_ptoas_garbage = 0;\n"
    else:
        text = compile_text(pto)
    with open(out_path, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(text)
    return 0


def make_fake_ptoas(folder, version: str = CONFIG["version"], reject=None):
    """Write the stand-in as `folder/ptoas` (with a README.txt saying what it is) and return its path.

    `version`: what `--version` names; `reject`: every compile fails with this message (see above).
    """
    from pathlib import Path

    from ..core import atomic
    from .standin import python_tool

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    script = Path(__file__).read_text(encoding="utf-8")
    line = _config_line(CONFIG)
    if script.count(line) != 1:
        raise RuntimeError(f"{__file__}: the line {line!r} must occur exactly once")
    script = script.replace(line, _config_line({"version": version, "reject": reject}))
    what = f"fails every compile ({reject})" if reject else "turns the `// CPP:` lines of a .pto into C++"
    atomic.write_text(folder / "README.txt", f"ptoas here is {LABEL}: it {what}. Written by "
                      "pypto_build.testing.fake_ptoas; nothing here is a real ptoas.\n")
    return python_tool(folder / "ptoas", script.split("\n", 1)[1], LABEL)


def _config_line(config: dict) -> str:
    return f"CONFIG = {config!r}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
