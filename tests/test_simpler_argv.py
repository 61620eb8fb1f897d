"""simpler's compile commands: ours equal what simpler's real `KernelCompiler` runs for PyPTO, argument by
argument and in the bytes they build; finding simpler and its identities without importing it."""
from __future__ import annotations

import runpy
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import git
from pypto_build.errors import ToolchainError
from pypto_build.platforms.simpler import argv as sa
from pypto_build.platforms import simpler_missing
from pypto_build.platforms.simpler.env import check_pto_isa, find_simpler, runtime_revision
from pypto_build.core.procs import run

pytestmark = pytest.mark.simpler

PLATFORMS = ("a2a3sim", "a5sim", "a2a3", "a5")
RUNTIMES = ("tensormap_and_ringbuffer", "host_build_graph")
COMPILE_TIMEOUT_S = 900
QWEN_KERNEL = "examples/a2a3/tensormap_and_ringbuffer/qwen3_14b_decode/kernels/aiv/rms_recip.cpp"
ORCHESTRATION = "examples/a2a3/tensormap_and_ringbuffer/vector_example/kernels/orchestration/example_orchestration.cpp"


@pytest.fixture(scope="module")
def install():
    return find_simpler()


def pypto_kernel_dirs(project_root: Path, platform: str, runtime: str) -> list[str]:
    """The include dirs PyPTO's `KernelCompiler` subclass puts before a kernel's own, restated for the test
    (P:python/pypto/runtime/kernel_compiler.py @e2d0f78, `get_kernel_include_dirs`): the `aicore`
    include dirs of the runtime's build_config.py (which it runs as a module), joined to the runtime's
    folder, then src/common and src/common/task_interface."""
    base = project_root / "src" / ("a5" if platform.startswith("a5") else "a2a3") / "runtime" / runtime
    config = runpy.run_path(str(base / "build_config.py"))["BUILD_CONFIG"]
    return [*(str(base / rel) for rel in config.get("aicore", {}).get("include_dirs", [])),
            str(project_root / "src" / "common"), str(project_root / "src" / "common" / "task_interface")]


def stand_in(path: Path, banner: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n# stand-in tool for tests: prints a version banner, compiles nothing\n"
                    f"echo '{banner}'\n")
    path.chmod(0o755)


@pytest.fixture
def ascend_home(tmp_path, monkeypatch):
    """`ASCEND_HOME_PATH` holding stand-ins for ccec, ld.lld and the aarch64 g++/gcc: simpler's device
    compiler only checks they exist and asks the cross g++ for `--version`; the commands it runs are
    captured (`captured`), never executed."""
    from simpler import env_manager
    home = tmp_path / "ascend"
    for tool in ("bin/ccec", "bin/ld.lld", "tools/hcc/bin/aarch64-target-linux-gnu-gcc"):
        stand_in(home / tool, "stand-in 0.0")
    stand_in(home / "tools/hcc/bin/aarch64-target-linux-gnu-g++", "aarch64-target-linux-gnu-g++ (GCC) 7.3.0")
    monkeypatch.setenv("ASCEND_HOME_PATH", str(home))
    monkeypatch.setattr(env_manager, "_cache", {})          # simpler reads the variable once per process
    return str(home)


@pytest.fixture
def captured(monkeypatch):
    """Every command simpler's `KernelCompiler` runs: recorded with its cwd, not run; a stand-in output
    file is written so simpler's compile succeeds."""
    import simpler_setup.kernel_compiler as kc
    calls: list[tuple[tuple[str, ...], str]] = []

    def record(cmd, **kwargs):
        calls.append((tuple(cmd), str(kwargs.get("cwd"))))
        Path(cmd[cmd.index("-o") + 1]).write_bytes(b"stand-in output")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(kc, "subprocess", SimpleNamespace(run=record, CompletedProcess=subprocess.CompletedProcess))
    return calls


def output_of(argv: tuple[str, ...]) -> str:
    return argv[argv.index("-o") + 1]


@pytest.mark.parametrize("where", ["outside", "inside"])
@pytest.mark.parametrize("core_type", ["aiv", "aic"])
@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("platform", PLATFORMS)
def test_kernel_argv_is_simplers(install, ascend_home, captured, tmp_path, platform, runtime, core_type, where):
    from simpler_setup import KernelCompiler
    root = install.project_root
    source = tmp_path / "k.cpp" if where == "outside" else root / QWEN_KERNEL      # absolute / root-relative
    if where == "outside":
        source.write_text("// kernel\n")
    extra = [str(tmp_path / "inc"), str(root / "src" / "a2a3" / "runtime" / ".." / "platform" / "include")]
    compiler = KernelCompiler(platform=platform)
    compiler.compile_incore(str(source), core_type=core_type, pto_isa_root=str(install.pto_isa_root),
                            extra_include_dirs=[*pypto_kernel_dirs(root, platform, runtime), *extra])
    arch = sa.arch_of(platform)
    assert {cwd for _argv, cwd in captured} == {str(sa.compile_cwd(install))}
    if platform.endswith("sim"):
        [(theirs, _cwd)] = captured
        ours = sa.sim_kernel_argv(install, arch, runtime, core_type, source, output_of(theirs), extra)
        assert list(ours) == list(theirs)
    else:
        [(compile_cmd, _), (link_cmd, _)] = captured
        obj = output_of(compile_cmd)
        ours = sa.device_kernel_argv(install, ascend_home, arch, runtime, core_type, source, obj, extra)
        assert list(ours) == list(compile_cmd)
        assert list(sa.device_link_argv(ascend_home, obj, output_of(link_cmd))) == list(link_cmd)
    expected_source = str(source) if where == "outside" else QWEN_KERNEL
    assert ours[-1] == expected_source
    include_dirs = sa.kernel_include_dirs(install, arch, runtime, extra)
    assert include_dirs[2:] == ["simpler_setup/incore", "src/common/platform/include",
                                f"src/{arch}/runtime/{runtime}/runtime", f"src/{arch}/runtime/{runtime}/common",
                                f"src/{arch}/runtime", "src/common", "src/common/task_interface",
                                str(tmp_path / "inc"), "src/a2a3/platform/include"]


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("platform", PLATFORMS)
def test_orchestration_argv_is_simplers(install, ascend_home, captured, tmp_path, platform, runtime):
    from simpler_setup import KernelCompiler
    source = tmp_path / "orch.cpp"
    source.write_text("// orchestration\n")
    KernelCompiler(platform=platform).compile_orchestration(runtime, str(source))
    [(theirs, cwd)] = captured
    cxx, host_gxx = sa.orchestration_compiler(platform, runtime, ascend_home)
    ours = sa.orchestration_argv(install, platform, runtime, cxx, source, output_of(theirs), host_gxx,
                                 no_gnu_unique=sa.compiler_is_gcc(cxx))
    assert list(ours) == list(theirs)
    assert cwd == str(install.project_root)
    assert ("-pthread" in ours) == host_gxx == (platform.endswith("sim") or runtime == "host_build_graph")


def test_a_clang_cross_compiler_keeps_gnu_unique(install, ascend_home, captured, tmp_path):
    from simpler_setup import KernelCompiler
    cross = Path(ascend_home) / "tools/hcc/bin/aarch64-target-linux-gnu-g++"
    stand_in(cross, "clang version 15.0.0")
    source = tmp_path / "orch.cpp"
    source.write_text("// orchestration\n")
    KernelCompiler(platform="a2a3").compile_orchestration("tensormap_and_ringbuffer", str(source))
    [(theirs, _cwd)] = captured
    assert not sa.compiler_is_gcc(str(cross))
    ours = sa.orchestration_argv(install, "a2a3", "tensormap_and_ringbuffer", str(cross), source,
                                 output_of(theirs), False, no_gnu_unique=False)
    assert list(ours) == list(theirs) and "-fno-gnu-unique" not in ours


def needs_gxx15() -> None:
    if shutil.which("g++-15") is None:
        pytest.skip("needs g++-15 on PATH (tools/build-simpler.sh writes a shim into the simpler venv's "
                    "bin/: put that first on PATH; docs/platforms.md)")


def test_sim_kernel_bytes_equal_simplers(install, tmp_path):
    """A real generated fp32 AIV kernel, compiled by our command line and by simpler's compiler."""
    from simpler_setup import KernelCompiler
    needs_gxx15()
    source = tmp_path / "rms_recip.cpp"
    shutil.copyfile(install.project_root / QWEN_KERNEL, source)
    runtime = "tensormap_and_ringbuffer"
    ours_out = tmp_path / "ours.so"
    argv = sa.sim_kernel_argv(install, "a2a3", runtime, "aiv", source, ours_out)
    done = run(argv, cwd=sa.compile_cwd(install), timeout=COMPILE_TIMEOUT_S)
    assert done.returncode == 0, done.output
    theirs = KernelCompiler(platform="a2a3sim").compile_incore(
        str(source), core_type="aiv", pto_isa_root=str(install.pto_isa_root),
        extra_include_dirs=pypto_kernel_dirs(install.project_root, "a2a3sim", runtime))
    assert ours_out.read_bytes() == theirs


def test_sim_orchestration_bytes_equal_simplers(install, tmp_path):
    """A real orchestration (built with -g: the same absolute source and cwd give the same debug info)."""
    from simpler_setup import KernelCompiler
    source = tmp_path / "example_orchestration.cpp"
    shutil.copyfile(install.project_root / ORCHESTRATION, source)
    runtime = "tensormap_and_ringbuffer"
    cxx, host_gxx = sa.orchestration_compiler("a2a3sim", runtime, None)
    ours_out = tmp_path / "ours.so"
    argv = sa.orchestration_argv(install, "a2a3sim", runtime, cxx, source, ours_out, host_gxx,
                                 no_gnu_unique=sa.compiler_is_gcc(cxx))
    done = run(argv, cwd=sa.compile_cwd(install), timeout=COMPILE_TIMEOUT_S)
    assert done.returncode == 0, done.output
    theirs = KernelCompiler(platform="a2a3sim").compile_orchestration(runtime, str(source))
    assert ours_out.read_bytes() == theirs


def test_find_simpler_here(install):
    import simpler_setup.environment
    import simpler_setup.kernel_compiler
    from simpler_setup.pto_isa import _is_cloned, _is_pristine_at_commit, get_pto_isa_clone_path, read_pto_isa_pin
    assert simpler_missing() is None
    assert install.project_root == Path(simpler_setup.environment.PROJECT_ROOT)
    assert install.setup_dir == Path(simpler_setup.kernel_compiler.__file__).resolve().parent
    assert install.runtime_revision.value == git(install.project_root, "rev-parse", "HEAD")
    assert install.label == f"simpler {install.runtime_revision.value[:7]}"
    tree = get_pto_isa_clone_path()
    assert _is_cloned(tree) and _is_pristine_at_commit(tree, read_pto_isa_pin(), verbose=False)  # read-only
    assert install.pto_isa_root == tree.resolve() and install.pto_isa_problem is None
    assert install.pto_isa_revision.value == git(tree, "rev-parse", "HEAD") == read_pto_isa_pin()


def test_finding_simpler_imports_neither_simpler_nor_torch():
    code = ("import sys; from pypto_build.platforms.simpler.env import find_simpler; find_simpler(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'torch', 'simpler', 'simpler_setup', '_task_interface'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_pto_isa_tree_states_agree_with_simplers_resolver(install, tmp_path):
    """A shared clone of the real tree under a stand-in project root, taken through the states simpler's
    resolver tells apart; the real tree is never touched."""
    from simpler_setup.pto_isa import _is_cloned, _is_pristine_at_commit
    real = install.pto_isa_root
    before = (git(real, "rev-parse", "HEAD"), git(real, "status", "--porcelain"))
    root = tmp_path / "root"
    (root / "build").mkdir(parents=True)
    shutil.copyfile(install.project_root / "pto_isa.pin", root / "pto_isa.pin")
    pin = (root / "pto_isa.pin").read_text().strip().lower()

    tree_root, revision, problem = check_pto_isa(root)
    assert tree_root is None and revision.value is None and "no PTO-ISA tree" in problem

    clone = root / "build" / "pto-isa"
    git(tmp_path, "clone", "-q", "--shared", "--no-checkout", str(real), str(clone))
    git(clone, "checkout", "-q", "--detach", pin)

    def state() -> tuple:
        ours = check_pto_isa(root)
        reused = _is_cloned(clone) and _is_pristine_at_commit(clone, pin, verbose=False)
        assert (ours[0] is not None) == reused
        return ours

    assert state() == (clone.resolve(), type(revision)(pin), None)
    (clone / "scratch.txt").write_text("x")
    tree_root, revision, problem = state()
    assert tree_root is None and "local changes" in problem and "scratch.txt" in problem
    assert "\n" not in problem and problem in revision.why_unknown
    (clone / "scratch.txt").unlink()
    tracked = clone / git(clone, "ls-files", "include").splitlines()[0]
    tracked.write_bytes(tracked.read_bytes() + b"\n")
    assert state()[2] is not None
    git(clone, "checkout", "-q", "--", ".")
    assert state()[0] == clone.resolve()
    git(clone, "checkout", "-q", "--detach", "HEAD~1")
    tree_root, _revision, problem = state()
    assert tree_root is None and f"wants {pin}" in problem and f"checkout {pin}" in problem
    assert (git(real, "rev-parse", "HEAD"), git(real, "status", "--porcelain")) == before


def test_a_wheel_is_identified_by_its_build_commit(tmp_path):
    import _task_interface
    assert runtime_revision(tmp_path).value == _task_interface.__build_commit__.strip()


def test_build_config_is_read_as_simpler_runs_it(install, tmp_path):
    configs = sorted((install.project_root / "src").glob("*/runtime/*/build_config.py"))
    assert len(configs) == 4
    for config in configs:
        assert sa.read_build_config(config) == runpy.run_path(str(config))["BUILD_CONFIG"]
    computed = tmp_path / "build_config.py"
    computed.write_text('"""doc"""\nBUILD_CONFIG = dict(aicore={})\n')
    with pytest.raises(ToolchainError, match=r"build_config.py:2: not a plain literal"):
        sa.read_build_config(computed)
    computed.write_text('BUILD_CONFIG = {"aicore": {}}\nBUILD_CONFIG["aicore"]["include_dirs"] = ["x"]\n')
    with pytest.raises(ToolchainError, match=r"build_config.py:2:"):
        sa.read_build_config(computed)


def test_unusable_pto_isa_stops_kernel_argv_with_the_problem(install):
    from dataclasses import replace
    broken = replace(install, pto_isa_root=None, pto_isa_problem="PTO-ISA tree /x has local changes")
    with pytest.raises(ToolchainError, match="local changes"):
        sa.sim_kernel_argv(broken, "a2a3", "tensormap_and_ringbuffer", "aiv", "/k.cpp", "/k.so")
    with pytest.raises(ToolchainError, match="platform 'a3sim'"):
        sa.arch_of("a3sim")
