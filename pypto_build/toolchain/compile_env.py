"""The environment variables that change what a compile reads or the bytes it writes: in every compile key.

One place for the list and the reason per variable. `driver.keyed` puts those set (name and value; unset
and empty differ) into every compiler identity — so into each unit's check, the artefact-cache key and the
prelude key — and both no-op readers compare them (`noop.key`, `noop_record.environment`). Light (no
imports): the console script's quick answer reads it before anything else loads.

From GCC's manual, "Environment Variables Affecting GCC", and what the driver's programs read; each
"same bytes" below was checked with g++ 12 / binutils 2.40 on a `-shared -g` compile and link.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:           # annotations only: the quick answer imports nothing it does not run
    from collections.abc import Mapping

COMPILE_ENV = (
    # Directories searched for #include, after -I (CPATH for every language; C_ and OBJC*_ apply when a source
    # is compiled as C or Objective-C: `-x c` in $CXXFLAGS). A header found there is recorded by the depfile
    # under its path: switching the variable to a folder with a same-named header is seen only here.
    "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "OBJC_INCLUDE_PATH", "OBJCPLUS_INCLUDE_PATH",
    # Where the driver finds cc1plus, as and collect2 (and collect2 finds ld); GCC_EXEC_PREFIX also moves
    # its own include and library directories. The programs found are digested as well (`driver`).
    "COMPILER_PATH", "GCC_EXEC_PREFIX",
    # Where the link (every unit is linked into a .so) finds -l libraries and start files.
    "LIBRARY_PATH",
    # The time __DATE__ and __TIME__ expand to.
    "SOURCE_DATE_EPOCH",
    # Equivalent to -fcompare-debug: a -g compile records `-fcompare-debug=-gtoggle -frandom-seed=<random>`
    # in its DW_AT_producer (other bytes, checked), and a mismatch fails the compile.
    "GCC_COMPARE_DEBUG",
    # GNU ld (collect2 runs it) takes it as the runpath when the command has no -rpath: DT_RUNPATH (checked).
    "LD_RUN_PATH",
    # clang as $CXX: CCC_OVERRIDE_OPTIONS edits its command line; SDKROOT is its sysroot on Darwin.
    "CCC_OVERRIDE_OPTIONS", "SDKROOT",
)
# Left out, each for its reason:
# * DEPENDENCIES_OUTPUT, SUNPRO_DEPENDENCIES: GCC (c-opts.cc) and clang read them only when the command has no
#   -M option, and every compile and prelude passes `-MD -MF`: no extra file, the same depfile and bytes
#   (checked). The one compiler run without -M, `-x c++ -E -v` (its include directories), runs without
#   them (PROBE_DROPS), so it never appends to the file they name.
# * TMPDIR: where the driver puts the .s and .o passed between cc1plus, as and collect2; their names reach
#   no output (the same bytes with -g, checked).
# * LANG, LC_ALL, LC_CTYPE, LC_MESSAGES: the language and encoding of diagnostics. The input charset does
#   not follow the locale (libcpp's locale lookup is compiled out: UTF-8 unless -finput-charset), so the
#   bytes are the same under C and C.UTF-8 (checked); we keep no diagnostics (ccache hashes the locale
#   because it replays stderr).
# * GCC_EXTRA_DIAGNOSTIC_OUTPUT, GCC_COLORS, GCC_URLS, TERM_URLS: the form of diagnostics only.
# * LDEMULATION, GNUTARGET: ld's defaults, which the driver's `-m <emulation>` and BFD's format detection
#   override (same bytes, checked).
# * COLLECT_GCC, COLLECT_GCC_OPTIONS, COLLECT_LTO_WRAPPER: set by the driver for its children.
# * PATH: not itself, but what it finds: the compiler (its identity) and the programs the driver runs by
#   a bare name (`driver`). The no-op key compares it as well.
# * LD_LIBRARY_PATH, LD_PRELOAD: the shared libraries the tools themselves load; not digested (no build
#   tool does).

PROBE_DROPS = ("DEPENDENCIES_OUTPUT", "SUNPRO_DEPENDENCIES")    # removed from a probe run without -M (above)


def env_part(env: Mapping[str, str]) -> tuple[str, ...]:
    """`NAME=value` of each COMPILE_ENV variable set in `env` (a mapping), in COMPILE_ENV's order."""
    return tuple(f"{name}={env[name]}" for name in COMPILE_ENV if name in env)
