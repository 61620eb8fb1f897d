"""The exact command lines PyPTO runs through simpler's `KernelCompiler` (simpler 93adc38, PyPTO e2d0f78).

PyPTO compiles with a subclass of simpler's `KernelCompiler` that puts the
runtime's kernel include dirs (`get_kernel_include_dirs`) before a kernel's own.
Every command runs in simpler's project root (`compile_cwd`), and every `-I`
and input is spelled as simpler's `compile_paths.compiler_visible_path` does
(`visible_path`): relative to the project root when inside it, else absolute,
normalised. Outputs (`-o`) are given as they come: pass absolute paths.

The runtime's `build_config.py` is read as literals (`read_build_config`).
simpler and PyPTO import it as a module (running it); we refuse to run it and
accept only a file whose running could not compute anything else.
"""
from __future__ import annotations

import ast
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from ...errors import ToolchainError, one_line
from ...builddir.manifest_ast import parse_quietly
from ...core.procs import path_arg, run
from ..records import RECORDS
from .env import SimplerInstall
from .noop_key import HOST_CXX, SIM_CXX

RUNTIMES = ("tensormap_and_ringbuffer", "host_build_graph")
CCE_ARCH = {"a2a3": "dav-c220", "a5": "dav-c310"}
PROBE_TIMEOUT_S = 5.0       # simpler's `--version` probe of the orchestration compiler

_SIM_FLAGS = ("-shared", "-O2", "-fPIC", "-std=c++23", "-fpermissive", "-Wno-macro-redefined",
              "-Wno-ignored-attributes", "-D__CPU_SIM", "-DPTO_CPU_MAX_THREADS=1", "-DNDEBUG")
_SIM_CORE_FLAGS = {"aiv": ("-D__DAV_VEC__",), "aic": ("-D__DAV_CUBE__",)}
_CCEC_HEAD = ("-c", "-O3", "-g", "-x", "cce", "-Wall", "-std=c++17", "--cce-aicore-only")
_CCEC_TAIL = ("-mllvm", "-cce-aicore-stack-size=0x8000", "-mllvm", "-cce-aicore-function-stack-size=0x8000",
              "-mllvm", "-cce-aicore-record-overflow=false", "-mllvm", "-cce-aicore-addr-transform",
              "-mllvm", "-cce-aicore-dcci-insert-for-scalar=false", "-DMEMORY_BASE")
_CCEC_A5 = ("-mllvm", "-cce-vf-aa-between-iters=true")
_ORCH_FLAGS = ("-shared", "-fPIC", "-O3", "-g", "-std=c++17")


def simpler_platforms() -> tuple[str, ...]:
    """The platforms simpler builds and runs: those whose record names a device architecture."""
    return tuple(name for name, record in RECORDS.items() if record.arch)


def arch_of(platform: str) -> str:
    """`a2a3` or `a5`: the source tree a platform compiles against (its record's `arch`)."""
    record = RECORDS.get(platform)
    if record is None or not record.arch:
        raise ToolchainError(f"platform {platform!r} is not one simpler compiles for; use one of "
                             f"{', '.join(simpler_platforms())}")
    return record.arch


def simulated(platform: str) -> bool:
    """Whether `platform` runs in simpler's simulator on this machine (its record's `simulator`), not on a device."""
    record = RECORDS.get(platform)
    return record is not None and record.simulator


def compile_cwd(install: SimplerInstall) -> Path:
    """Where every simpler compile runs: its project root (relative paths in argv are from there)."""
    return install.project_root


def visible_path(install: SimplerInstall, path: str | os.PathLike) -> str:
    """`path` as simpler shows it to a compiler: relative to the project root when inside, else absolute."""
    absolute = Path(os.path.abspath(path))
    try:
        return str(absolute.relative_to(Path(os.path.abspath(install.project_root))))
    except ValueError:
        return str(absolute)


def kernel_include_dirs(install: SimplerInstall, arch: str, runtime: str,
                        extra_include_dirs: Sequence[str | os.PathLike] = ()) -> list[str]:
    """Every kernel's include dirs, in order: PTO-ISA `include`, `include/pto`; simpler's incore dirs
    (`simpler_setup/incore`, `src/common/platform/include`); PyPTO's runtime dirs (the `aicore` include
    dirs of the runtime's build_config.py, `src/common`, `src/common/task_interface`); then the kernel's."""
    if install.pto_isa_root is None:
        raise ToolchainError(install.pto_isa_problem or "no PTO-ISA tree")
    root, pto = install.project_root, install.pto_isa_root
    dirs: list[str | os.PathLike] = [os.path.join(pto, "include"), os.path.join(pto, "include", "pto"),
                                     install.setup_dir / "incore", root / "src" / "common" / "platform" / "include"]
    base = _runtime_dir(install, arch, runtime)
    config_file = base / "build_config.py"
    if config_file.is_file():
        config = read_build_config(config_file)
        if config is None:
            raise ToolchainError(f"{config_file} defines no BUILD_CONFIG (PyPTO needs one); restore it from git")
        aicore = _section(config_file, config, "aicore") or {}
        dirs += [base / rel for rel in _strings(config_file, aicore, "include_dirs")]
    else:
        dirs.append(base / "runtime")
    dirs += [root / "src" / "common", root / "src" / "common" / "task_interface", *extra_include_dirs]
    return [visible_path(install, d) for d in dirs]


def sim_kernel_argv(install: SimplerInstall, arch: str, runtime: str, core_type: str, source: str | os.PathLike,
                    output: str | os.PathLike, extra_include_dirs: Sequence[str | os.PathLike] = ()
                    ) -> tuple[str, ...]:
    """One kernel for a2a3sim/a5sim: a `.so` built by `g++-15` (cwd: `compile_cwd`)."""
    dirs = kernel_include_dirs(install, arch, runtime, extra_include_dirs)
    return (SIM_CXX, *_SIM_FLAGS, *_SIM_CORE_FLAGS.get(core_type, ()), *(f"-I{d}" for d in dirs),
            "-o", path_arg(output), _input(install, source))


def device_kernel_argv(install: SimplerInstall, ascend_home: str, arch: str, runtime: str, core_type: str,
                       source: str | os.PathLike, output: str | os.PathLike,
                       extra_include_dirs: Sequence[str | os.PathLike] = ()) -> tuple[str, ...]:
    """One kernel for a2a3/a5: an object built by `$ASCEND_HOME_PATH/bin/ccec` (then `device_link_argv`)."""
    if arch not in CCE_ARCH:
        raise ToolchainError(f"arch {arch!r} is not one ccec compiles for; use a2a3 or a5")
    unit = "vec" if core_type == "aiv" else "cube"
    dirs = kernel_include_dirs(install, arch, runtime, extra_include_dirs)
    return (os.path.join(ascend_home, "bin", "ccec"), *_CCEC_HEAD, f"--cce-aicore-arch={CCE_ARCH[arch]}-{unit}",
            *_CCEC_TAIL, *(_CCEC_A5 if arch == "a5" else ()), *(f"-I{d}" for d in dirs),
            "-o", path_arg(output), _input(install, source))


def device_link_argv(ascend_home: str, obj: str | os.PathLike, output: str | os.PathLike) -> tuple[str, ...]:
    """Link a device kernel object at `kernel_entry` with `$ASCEND_HOME_PATH/bin/ld.lld` (its `.text` is
    the payload)."""
    return (os.path.join(ascend_home, "bin", "ld.lld"), "-e", "kernel_entry", "-o", path_arg(output),
            path_arg(obj))


def orchestration_compiler(platform: str, runtime: str, ascend_home: str | None) -> tuple[str, bool]:
    """(compiler, host_gxx) of an orchestration: host `g++` for the sims and for host_build_graph (its
    orchestration runs in the host process), else the aarch64 cross compiler of `$ASCEND_HOME_PATH`."""
    arch_of(platform)
    if runtime not in RUNTIMES:
        raise ToolchainError(f"RUNTIME_CONFIG runtime {runtime!r} is not one simpler builds; use one of "
                             f"{', '.join(RUNTIMES)}")
    if runtime == "host_build_graph" or simulated(platform):
        return HOST_CXX, True
    if not ascend_home:
        raise ToolchainError(f"ASCEND_HOME_PATH is not set: platform {platform} needs the CANN toolkit; "
                             "set it to the toolkit's install folder")
    return os.path.join(ascend_home, "tools", "hcc", "bin", "aarch64-target-linux-gnu-g++"), False


def compiler_is_gcc(cxx: str) -> bool:
    """simpler's `-fno-gnu-unique` rule: the compiler's `--version` runs and does not say clang.

    Only a failure to run (not a non-zero exit) counts as not GCC, as in simpler.
    """
    try:
        probe = run([cxx, "--version"], timeout=PROBE_TIMEOUT_S)
    except OSError:
        return False
    return not probe.timed_out and "clang" not in probe.stdout.lower()


def orchestration_argv(install: SimplerInstall, platform: str, runtime: str, cxx: str, source: str | os.PathLike,
                       output: str | os.PathLike, host_gxx: bool, *, no_gnu_unique: bool) -> tuple[str, ...]:
    """One orchestration `.so` (cwd: `compile_cwd`). `cxx`, `host_gxx` from `orchestration_compiler`;
    `no_gnu_unique` from `compiler_is_gcc(cxx)`. Helper sources are compiled in (each only if it exists)."""
    arch = arch_of(platform)
    root = install.project_root
    base = _runtime_dir(install, arch, runtime)
    config_dirs, config_sources = _orchestration_config(base)
    helpers = root / "src" / "common" / "platform" / ("sim" if simulated(platform) else "onboard") / "aicpu"
    sources: list[Path] = [*config_sources, helpers / "cache_ops.cpp", helpers / "device_time.cpp"]
    dirs: list[Path] = [base / "runtime", base / "common", root / "src" / "common" / "task_interface",
                        root / "src" / "common", root / "src" / arch / "platform" / "include",
                        root / "src" / "common" / "platform" / "include"]
    if host_gxx:
        log = root / "src" / "common" / "log"
        sources += [log / "host_log.cpp", log / "unified_log_host.cpp"]
        dirs.append(log / "include")
    link = ("-undefined", "dynamic_lookup") if sys.platform == "darwin" else ("-Wl,--build-id=sha1",)
    return (cxx, *_ORCH_FLAGS, *(("-fno-gnu-unique",) if no_gnu_unique else ()), *link,
            *(("-pthread",) if host_gxx else ()),
            *(_input(install, s) for s in sources if os.path.isfile(os.path.abspath(s))),
            *(f"-I{visible_path(install, d)}" for d in [*dirs, *config_dirs]),
            "-o", path_arg(output), _input(install, source))


def read_build_config(path: Path) -> dict | None:
    """`BUILD_CONFIG` of a runtime's build_config.py, read without running it (None: not defined).

    Only literal assignments (and docstrings, `from __future__` imports) are
    accepted, so the value is what importing the file would give; anything else
    is a ToolchainError naming the line.
    """
    try:
        tree = parse_quietly(path.read_bytes(), path)
    except (OSError, SyntaxError, ValueError) as exc:
        raise ToolchainError(f"{path}: cannot be read ({one_line(exc, 200)}); restore it from git") from None
    found: dict | None = None
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, RecursionError):
                _unreadable(path, node)
            if any(t.id == "BUILD_CONFIG" for t in node.targets):
                found = value if isinstance(value, dict) else _unreadable(path, node)
            continue
        _unreadable(path, node)
    return found


def _orchestration_config(base: Path) -> tuple[list[Path], list[Path]]:
    """simpler's orchestration section of build_config.py: its include dirs and the `.cpp`/`.c` files of
    its source dirs (sorted), both resolved from the runtime's folder; nothing when absent."""
    config_file = base / "build_config.py"
    if not config_file.is_file():
        return [], []
    section = _section(config_file, read_build_config(config_file) or {}, "orchestration")
    if section is None:
        return [], []
    dirs = [(base / rel).resolve() for rel in _strings(config_file, section, "include_dirs")]
    sources: list[Path] = []
    for rel in _strings(config_file, section, "source_dirs"):
        folder = (base / rel).resolve()
        if folder.is_dir():
            sources += [f for f in sorted(folder.iterdir()) if f.suffix in (".cpp", ".c") and f.is_file()]
    return dirs, sources


def _runtime_dir(install: SimplerInstall, arch: str, runtime: str) -> Path:
    if runtime not in RUNTIMES:
        raise ToolchainError(f"RUNTIME_CONFIG runtime {runtime!r} is not one simpler builds; use one of "
                             f"{', '.join(RUNTIMES)}")
    return install.project_root / "src" / arch / "runtime" / runtime


def _section(path: Path, config: dict, name: str) -> dict | None:
    """BUILD_CONFIG[name], None when absent."""
    section = config.get(name)
    if section is not None and not isinstance(section, dict):
        raise ToolchainError(f"{path}: BUILD_CONFIG[{name!r}] is not a dict; restore the file from git")
    return section


def _strings(path: Path, section: dict, key: str) -> list[str]:
    value = section.get(key, [])
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ToolchainError(f"{path}: {key} is not a list of strings; restore the file from git")
    return list(value)


def _unreadable(path: Path, node: ast.stmt) -> NoReturn:
    raise ToolchainError(f"{path}:{node.lineno}: not a plain literal assignment; pypto_build reads "
                         "build_config.py without running it, so BUILD_CONFIG must be written out as literals")


def _input(install: SimplerInstall, path: str | os.PathLike) -> str:
    """An input file as simpler names it; a relative name that would read as an option is refused."""
    shown = visible_path(install, path)
    if shown.startswith(("-", "@")):
        raise ToolchainError(f"{path}: a file under simpler's root named like a compiler option ({shown}); "
                             "rename it")
    return shown
