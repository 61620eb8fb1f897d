"""Stand-ins for CANN's `ccec` and `ld.lld`, for tests; not a real NPU toolchain (test support, NOT product code).

`fake_cann.make_fake_cann` copies this file to `bin/ccec` and `bin/ld.lld` of a
stand-in CANN tree (behind a sh/Python header that runs it with the interpreter
that wrote it); the copy acts as the tool its file name says. Standard library
only, no `from __future__` (the header line comes first).

`ccec` checks it got the flags simpler's `CCECToolchain` passes, in order
(`-c -O3 -g -x cce -Wall -std=c++17 --cce-aicore-only --cce-aicore-arch=<A>`,
the five `-mllvm -cce-aicore-...` pairs, `-DMEMORY_BASE`, and for `dav-c310-*`
only `-mllvm -cce-vf-aa-between-iters=true`), refuses any other core arch, then
takes `-I`, `-D`/`-U`, `-MD`/`-MMD`, `-MF`/`-MT`/`-MQ`, `-f*-prefix-map=`, `-o OUT`
and one source (anything else: "unsupported option", exit 1) and runs the host
compiler: `g++ -c -O2 -fPIC -std=<its -std> -x c++ -Wall -fno-exceptions
-D__CPU_SIM -DPTO_CPU_MAX_THREADS=1 -D__DAV_VEC__|-D__DAV_CUBE__
-DPYPTO_BUILD_FAKE_CCEC=1 -DMEMORY_BASE <-D/-U as given> <-I as given> <-M... as given>
<prefix maps> -o OUT SOURCE`, a real ELF relocatable object with a real depfile.
Why those defines: `__DAV_VEC__`/`__DAV_CUBE__` are what ccec itself defines
for a vec/cube arch; `__CPU_SIM` selects the host branch of PyPTO's kernel
wrapper (`__aicore__` empty instead of ccec's `[aicore]`) and of PTO-ISA (the
sim build's defines). `__CCE_KT_TEST__` is not defined: PyPTO's code never
reads it, and PTO-ISA only to refuse its host-only comm headers in kernel code
(`#error`). `-fno-exceptions`: kernels throw nothing, and it keeps
personality-routine references out of the static link. Kernel bodies must
be plain C++ at ccec's C++17 (the host pto-inst.hpp fallback does); PTO-ISA's
CPU headers need C++20 or later and GCC 13 or an overlay:
`make_fake_cann(std=..., cxx=...)` sets those.

`ld.lld` accepts exactly `-e SYMBOL -o OUT INPUT...` and runs the host
`ld -e SYMBOL -o OUT INPUT...`: a statically linked ELF executable whose
`.text` holds the kernel and its COMDAT `.text.*` code. Plain `ld` needs no
extra option for a kernel object that calls nothing outside itself, and fails,
as ld.lld would, on an undefined symbol. PTO-ISA's CPU code calls libstdc++/libc
(`operator new`, `__assert_fail`, the hidden `__dso_handle` of static
destructors): `make_fake_cann(unresolved=True)` adds
`--unresolved-symbols=ignore-all --defsym=__dso_handle=0` for such kernels
(the payload is then only bytes to compare, never code to run).

`--version` (alone) prints a labelled line naming the host tool's own first line; `ccec -x c++ -E -v -`
(which clang-based ccec answers with its header search list) is the host compiler's answer.
"""
import os
import subprocess
import sys

CONFIG = {"cxx": "g++", "ld": "ld", "std": None, "unresolved": False}   # make_fake_cann rewrites this line in the copy
LABEL = "stand-in for CANN's ccec/ld.lld, for tests; not a real NPU toolchain"
ARCHS = {"dav-c220-vec": "-D__DAV_VEC__", "dav-c220-cube": "-D__DAV_CUBE__",
         "dav-c310-vec": "-D__DAV_VEC__", "dav-c310-cube": "-D__DAV_CUBE__"}
HEAD = ["-c", "-O3", "-g", "-x", "cce", "-Wall", "-std=c++17", "--cce-aicore-only"]
TAIL = ["-mllvm", "-cce-aicore-stack-size=0x8000", "-mllvm", "-cce-aicore-function-stack-size=0x8000",
        "-mllvm", "-cce-aicore-record-overflow=false", "-mllvm", "-cce-aicore-addr-transform",
        "-mllvm", "-cce-aicore-dcci-insert-for-scalar=false", "-DMEMORY_BASE"]
A5_ONLY = ["-mllvm", "-cce-vf-aa-between-iters=true"]
WITH_VALUE = ("-I", "-D", "-U", "-MF", "-MT", "-MQ", "-o")
SEARCH_DIRS_QUERY = ["-x", "c++", "-E", "-v", "-"]   # where it finds headers by itself (clang's ccec answers it too)
PREFIX_MAPS = ("-ffile-prefix-map=", "-fdebug-prefix-map=", "-fmacro-prefix-map=")


class Refused(Exception):
    """An argv the real tool would not get from simpler: printed, exit 1."""


def ccec_argv(argv):
    """The host compiler argv for ccec's `argv` (after the program name); Refused when it is not simpler's."""
    if argv[:len(HEAD)] != HEAD:
        raise Refused(f"expected simpler's leading flags {' '.join(HEAD)}")
    arch_flag = argv[len(HEAD)] if len(argv) > len(HEAD) else ""
    arch = arch_flag.removeprefix("--cce-aicore-arch=")
    if not arch_flag.startswith("--cce-aicore-arch=") or arch not in ARCHS:
        raise Refused(f"unknown core arch {arch_flag!r} (expected --cce-aicore-arch= one of {', '.join(ARCHS)})")
    rest = argv[len(HEAD) + 1:]
    fixed = TAIL + (A5_ONLY if arch.startswith("dav-c310") else [])
    if rest[:len(fixed)] != fixed or rest[len(fixed):len(fixed) + 2] == A5_ONLY:
        raise Refused(f"expected after the arch: {' '.join(fixed)}")
    defines, includes, deps, maps, out, sources = [], [], [], [], None, []
    i, rest = 0, rest[len(fixed):]
    while i < len(rest):
        arg = rest[i]
        flag = next((f for f in WITH_VALUE if arg.startswith(f)), None)
        if arg in ("-MD", "-MMD"):
            deps.append(arg)
        elif arg.startswith(PREFIX_MAPS):
            maps.append(arg)
        elif flag is not None and (arg == flag or flag in ("-I", "-D", "-U")):
            if arg == flag:
                if i + 1 >= len(rest):
                    raise Refused(f"missing argument to {flag}")
                i += 1
                value = rest[i]
            else:
                value = arg[len(flag):]
            if flag == "-o":
                if out is not None:
                    raise Refused("-o given twice")
                out = value
            else:
                target = {"-I": includes, "-D": defines, "-U": defines}.get(flag, deps)
                target += [flag, value] if flag in ("-MF", "-MT", "-MQ") else [flag + value]
        elif arg.startswith("-"):
            raise Refused(f"unsupported option {arg!r}")
        else:
            sources.append(arg)
        i += 1
    if out is None or len(sources) != 1:
        raise Refused(f"expected one -o and one source, got -o {out!r} and sources {sources}")
    std = f"-std={CONFIG['std']}" if CONFIG["std"] else HEAD[6]
    return [CONFIG["cxx"], "-c", "-O2", "-fPIC", std, "-x", "c++", "-Wall", "-fno-exceptions",
            "-D__CPU_SIM", "-DPTO_CPU_MAX_THREADS=1", ARCHS[arch], "-DPYPTO_BUILD_FAKE_CCEC=1",
            TAIL[-1], *defines, *includes, *deps, *maps, "-o", out, sources[0]]


def ld_argv(argv):
    """The host `ld` argv for ld.lld's `argv`; Refused unless it is `-e SYMBOL -o OUT INPUT...`."""
    entry = out = None
    inputs = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-e", "-o"):
            if i + 1 >= len(argv):
                raise Refused(f"missing argument to {arg}")
            if (entry if arg == "-e" else out) is not None:
                raise Refused(f"{arg} given twice")
            if arg == "-e":
                entry = argv[i + 1]
            else:
                out = argv[i + 1]
            i += 2
            continue
        if arg.startswith("-"):
            raise Refused(f"unsupported option {arg!r} (simpler links with -e kernel_entry -o OUT IN)")
        inputs.append(arg)
        i += 1
    if entry is None or out is None or not inputs:
        raise Refused("expected -e SYMBOL -o OUT INPUT...")
    lenient = ["--unresolved-symbols=ignore-all", "--defsym=__dso_handle=0"] if CONFIG["unresolved"] else []
    return [CONFIG["ld"], *lenient, "-e", entry, "-o", out, *inputs]


def version(tool, host):
    """The labelled `--version` text: which stand-in, and the first line of the host tool's own."""
    try:
        said = subprocess.run([host, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        said = f"host {host} unusable: {exc}"
    first = said.splitlines()[0] if said.strip() else f"host {host}: no version"
    return f"{tool} 0.0 ({LABEL}; runs {first})"


def main(argv):
    tool = os.path.basename(argv[0])
    if tool not in ("ccec", "ld.lld"):
        print(f"fake_cann_tools: run me as bin/ccec or bin/ld.lld, not {tool!r}", file=sys.stderr)
        return 2
    host = CONFIG["cxx"] if tool == "ccec" else CONFIG["ld"]
    if argv[1:] == ["--version"]:
        print(version(tool, host))
        return 0
    if tool == "ccec" and argv[1:] == SEARCH_DIRS_QUERY:
        return subprocess.run([host, *SEARCH_DIRS_QUERY]).returncode
    try:
        command = ccec_argv(argv[1:]) if tool == "ccec" else ld_argv(argv[1:])
    except Refused as exc:
        print(f"{tool} ({LABEL}): error: {exc}", file=sys.stderr)
        return 1
    try:
        return subprocess.run(command).returncode
    except OSError as exc:
        print(f"{tool} ({LABEL}): error: cannot run {command[0]}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
