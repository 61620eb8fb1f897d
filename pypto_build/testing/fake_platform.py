"""`FakePlatform`: a platform that compiles with the stand-in compiler (test support, NOT product code).

Plan with it (`graph.load_graph(root, platform=FakePlatform(...))`) to test
staleness decisions without g++: each compile is `python fake_compiler.py`
(see that module), which reads the sources and headers, writes a digest as the
"binary" and an exact `-MD` depfile. A test changes one input of every unit
by planning with another value of a field:

* `version`: the compiler's version, part of its identity ("compiler changed");
* `defines`: the `-D` flags of every command line ("command line changed");
* `runtime_revision`: the runtime revision of every sub-build's binary context
  ("runtime/PTO-ISA identity changed"; `Revision(None, why)` makes it unknown:
  every unit rebuilds every run and no stamp is written).

Command lines are short: the flags, `-I` of the kernel's own include dirs,
`-o OUT SOURCE`. No root is identity-covered and the compiler has no search
directories of its own. Nothing can be executed: the fake has no runner. Its
record (`FAKE_RECORD`) is not in `platforms.records.RECORDS`: planning takes the
platform itself; a test that adds the record sees it where names are read
(choice, registry, no-op keys, options).
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Mapping

from ..core.hashing import text_digest
from ..builddir.markers import CACHE_DIR, STAMP_FILE
from ..toolchain.identity import BinaryContext, Revision
from ..platforms import Command, Facts, NoopKey, Platform, Record, UnitSource
from ..core.procs import path_arg
from ..toolchain.compiler import Compiler

SCRIPT = str(Path(__file__).resolve().with_name("fake_compiler.py"))
FAKE_RECORD = Record("fake", f"{__name__}:FakePlatform")      # no runner, no fallback, no quick no-op record


@dataclass(frozen=True)
class FakePlatform(Platform):
    """Builds with `fake_compiler.py`; every field is an input a test may change (module docstring)."""

    version: str = "1"
    defines: tuple[str, ...] = ("-DFAKE_FLAG=1",)
    runtime_revision: Revision = Revision("fake-runtime-1")
    name: str = "fake"

    @cached_property
    def facts(self) -> Facts:       # type: ignore[override]
        """Both runtimes, no prelude, PyPTO's stamp place; nothing identity-covered; the no-op key: the compiler."""
        return Facts(("tensormap_and_ringbuffer", "host_build_graph"), "fake runtime", "none", STAMP_FILE,
                     noop=NoopKey(self.compiler.probe))

    @property
    def compiler(self) -> Compiler:
        # -S: no site import (faster); the script needs the standard library only
        identity = text_digest("fake-c++", self.version)
        return Compiler((sys.executable, "-S", SCRIPT), identity, f"fake-c++ {self.version}", identity)

    @classmethod
    def locate(cls, env: Mapping[str, str], name: str = "fake") -> FakePlatform:
        return cls(name=name)

    def compiler_for(self, kind: str, runtime: str = "") -> Compiler:
        return self.compiler

    def command(self, unit: UnitSource) -> Command:
        """In PyPTO's places (beside the source, cache/external/), as a platform PyPTO builds for does."""
        if unit.kind == "kernel" and unit.external:
            output = f"{CACHE_DIR}/external/{unit.func_id}_{unit.core_type}_{Path(unit.source).stem}.so"
        else:
            output = os.path.splitext(unit.source)[0] + ".so"
        incs = (f"-I{path_arg(d)}" for d in unit.include_dirs)
        return Command(output, (*self.compiler.command, *self.defines, *incs, "-o", path_arg(output),
                                path_arg(unit.source)), unit.sub_dir)

    def binary_context(self, runtime_name: str) -> BinaryContext:
        return BinaryContext(self.name, runtime_name, self.runtime_revision, Revision("none"))
