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
directories of its own. Nothing can be executed: the fake has no runner (the
registry does not know it).
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Mapping

from ..core.hashing import text_digest
from ..builddir.markers import CACHE_DIR, STAMP_FILE
from ..toolchain.identity import BinaryContext, Revision
from ..platforms import Command, Platform, UnitSource
from ..core.procs import path_arg
from ..toolchain.compiler import Compiler

SCRIPT = str(Path(__file__).resolve().with_name("fake_compiler.py"))


@dataclass(frozen=True)
class FakePlatform(Platform):
    """Builds with `fake_compiler.py`; every field is an input a test may change (module docstring)."""

    version: str = "1"
    defines: tuple[str, ...] = ("-DFAKE_FLAG=1",)
    runtime_revision: Revision = Revision("fake-runtime-1")
    name: str = "fake"
    runtimes: ClassVar[tuple[str, ...]] = ("tensormap_and_ringbuffer", "host_build_graph")
    system_dirs: tuple[str, ...] = ()

    @property
    def compiler(self) -> Compiler:
        # -S: no site import (faster); the script needs the standard library only
        identity = text_digest("fake-c++", self.version)
        return Compiler((sys.executable, "-S", SCRIPT), identity, f"fake-c++ {self.version}", identity)

    @classmethod
    def locate(cls, env: Mapping[str, str]) -> FakePlatform:
        return cls()

    noop_record: ClassVar[bool] = True
    runtime_label: ClassVar[str] = "fake runtime"
    pto_isa_label: str = "none"

    def compiler_for(self, kind: str, runtime: str = "") -> Compiler:
        return self.compiler

    def toolchain_key(self) -> str:
        return self.compiler.probe

    def command(self, unit: UnitSource) -> Command:
        """In PyPTO's places (beside the source, cache/external/), as a platform PyPTO builds for does."""
        if unit.kind == "kernel" and unit.external:
            output = f"{CACHE_DIR}/external/{unit.func_id}_{unit.core_type}_{Path(unit.source).stem}.so"
        else:
            output = os.path.splitext(unit.source)[0] + ".so"
        incs = (f"-I{path_arg(d)}" for d in unit.include_dirs)
        return Command(output, (*self.compiler.command, *self.defines, *incs, "-o", path_arg(output),
                                path_arg(unit.source)), unit.sub_dir)

    @property
    def stamp_path(self) -> str:
        return STAMP_FILE

    def covered_roots(self) -> dict[str, str]:
        return {}

    def binary_context(self, runtime_name: str) -> BinaryContext:
        return BinaryContext(self.name, runtime_name, self.runtime_revision, Revision("none"))
