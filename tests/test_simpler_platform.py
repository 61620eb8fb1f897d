"""a2a3sim through simpler, end to end with the real engine: PyPTO's bytes, places and stamp; incremental; run
on simpler's Worker. Needs simpler (the `simpler` marker: skipped with a reason where it is missing)."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import age_tree, edit, imported, recording_git
from pypto_build.plan import noop_record

pytestmark = [pytest.mark.simpler, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[1] / "pypto_build" / "examples" / "matmul_relu"
QWEN_KERNEL = "examples/a2a3/tensormap_and_ringbuffer/qwen3_14b_decode/kernels/aiv/rms_recip.cpp"
KERNELS = {"cache/incore_0_aic_matmul_relu_incore_0_aic_a2a3sim.bin": ("aic", "kernels/aic/matmul_relu_incore_0_aic.cpp"),
           "cache/incore_1_aiv_matmul_relu_incore_1_aiv_a2a3sim.bin": ("aiv", "kernels/aiv/matmul_relu_incore_1_aiv.cpp")}


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "PYPTO_BUILD_PLATFORM"}     # the recorded platform
    return subprocess.run([sys.executable, "-m", "pypto_build", *args], capture_output=True, text=True, timeout=900,
                          env={**base, **(env or {})})


def git_head(path: Path) -> str:
    return subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture(scope="module")
def install():
    from pypto_build.platforms.simpler.env import find_simpler
    if shutil.which("g++-15") is None:
        pytest.skip("needs g++-15 on PATH (tools/build-simpler.sh writes a shim into the simpler venv's "
                    "bin/: put that first on PATH; docs/platforms.md)")
    return find_simpler()


@pytest.fixture(scope="module")
def built(install, tmp_path_factory) -> Path:
    """The example, built once for a2a3sim by pypto-build (each test works on its own copy)."""
    root = tmp_path_factory.mktemp("sim") / "ex"
    shutil.copytree(EXAMPLE, root)
    done = cli("build", "-j", "2", str(root))
    assert done.returncode == 0, done.stdout + done.stderr
    return root


@pytest.fixture
def ex(built, tmp_path) -> Path:
    return Path(shutil.copytree(built, tmp_path / "ex", symlinks=True))


def pypto_kernel_dirs(project_root: Path, runtime: str = "tensormap_and_ringbuffer") -> list[str]:
    """PyPTO's extra kernel include dirs (its KernelCompiler subclass), as tests/test_simpler_argv.py restates them."""
    import runpy
    base = project_root / "src" / "a2a3" / "runtime" / runtime
    config = runpy.run_path(str(base / "build_config.py"))["BUILD_CONFIG"]
    return [*(str(base / rel) for rel in config.get("aicore", {}).get("include_dirs", [])),
            str(project_root / "src" / "common"), str(project_root / "src" / "common" / "task_interface")]


def test_the_first_line_places_and_stamp_are_pyptos(install, ex):
    done = cli("build", str(ex))
    head = done.stdout.splitlines()[0]
    assert head == (f"pypto-build: platform a2a3sim (recorded in compiled_meta.json) · runtime: simpler "
                    f"{git_head(install.project_root)[:7]}, tensormap_and_ringbuffer · PTO-ISA: simpler's managed tree "
                    f"{install.pto_isa_root} {git_head(install.pto_isa_root)[:7]}")
    assert done.stdout.splitlines()[-1] == "pypto-build: 0 compiled, 3 up to date"
    assert all((ex / rel).is_file() for rel in KERNELS) and (ex / "orchestration/matmul_relu.so").is_file()
    assert not (ex / ".pypto_build/host").exists() and not (ex / "kernels/aiv/matmul_relu_incore_1_aiv.so").exists()
    assert json.loads((ex / "cache/binary_context.json").read_text()) == {
        "platform": "a2a3sim", "runtime_name": "tensormap_and_ringbuffer", "schema": 1,
        "runtime_revision": git_head(install.project_root), "pto_isa_revision": git_head(install.pto_isa_root)}


def test_the_bytes_equal_what_simplers_kernel_compiler_builds(install, built):
    """Where they were built: the orchestration's debug information names its source's absolute path."""
    from simpler_setup import KernelCompiler
    ex = built
    compiler = KernelCompiler(platform="a2a3sim")
    for rel, (core, source) in KERNELS.items():
        theirs = compiler.compile_incore(str(ex / source), core_type=core, pto_isa_root=str(install.pto_isa_root),
                                         extra_include_dirs=pypto_kernel_dirs(install.project_root))
        assert (ex / rel).read_bytes() == theirs, rel
    theirs = compiler.compile_orchestration("tensormap_and_ringbuffer", str(ex / "orchestration/matmul_relu.cpp"))
    assert (ex / "orchestration/matmul_relu.so").read_bytes() == theirs


def test_a_real_generated_kernel_compiles_to_simplers_bytes(install, ex):
    from simpler_setup import KernelCompiler
    source = ex / "kernels/aiv/matmul_relu_incore_1_aiv.cpp"
    shutil.copyfile(install.project_root / QWEN_KERNEL, source)       # qwen3 decode's rms_recip, as PyPTO generated it
    done = cli("build", str(ex))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 compiled, 2 up to date" in done.stdout
    theirs = KernelCompiler(platform="a2a3sim").compile_incore(
        str(source), core_type="aiv", pto_isa_root=str(install.pto_isa_root),
        extra_include_dirs=pypto_kernel_dirs(install.project_root))
    assert (ex / "cache/incore_1_aiv_matmul_relu_incore_1_aiv_a2a3sim.bin").read_bytes() == theirs


def test_one_edit_one_compile_and_a_copy_compiles_nothing(ex, tmp_path):
    edit(ex / "kernels/aic/matmul_relu_incore_0_aic.cpp")
    done = cli("build", str(ex))
    assert done.returncode == 0 and "compile:aic/matmul_relu_incore_0_aic" in done.stdout
    # a comment: the same bytes, kept (and said)
    assert done.stdout.splitlines()[-1] == ("pypto-build: 1 compiled, 2 up to date, 1 stamp(s) written, 1 recompiled, "
                                            "identical bytes kept")
    clone = Path(shutil.copytree(ex, tmp_path / "clone"))
    assert cli("build", str(clone)).stdout.splitlines()[-1] == "pypto-build: 0 compiled, 3 up to date"


def test_pyptos_own_cache_transaction_keeps_our_binaries(install, ex):
    """PyPTO's `_binary_cache.prepare_binary_context` (pure Python: run from a PyPTO checkout named by
    $PYPTO_SRC) finds our stamp equal to its context and deletes nothing."""
    src = os.environ.get("PYPTO_SRC")
    if not src:
        pytest.skip("set PYPTO_SRC to a PyPTO checkout to run PyPTO's own stamp check")
    spec = importlib.util.spec_from_file_location("pypto_binary_cache",
                                                  Path(src) / "python/pypto/runtime/_binary_cache.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    before = {p: p.read_bytes() for p in (ex / "cache").glob("*.bin")}
    context = module.BinaryCacheContext("a2a3sim", "tensormap_and_ringbuffer", git_head(install.project_root),
                                        git_head(install.pto_isa_root))
    assert module.prepare_binary_context(ex, context) == 0
    assert {p: p.read_bytes() for p in (ex / "cache").glob("*.bin")} == before
    module.record_binary_context(ex, context)                 # PyPTO's stamp after its transaction...
    done = cli("build", str(ex))
    assert done.stdout.splitlines()[-1] == "pypto-build: 0 compiled, 3 up to date"     # ...is ours too
    # A directory PyPTO built that we never saw: each unit compiles once (to learn its headers); the same bytes
    # leave PyPTO's files as they were. (Built here first: the orchestration's -g names its source's path.)
    assert cli("build", "--recompile", str(ex)).returncode == 0
    shutil.rmtree(ex / ".pypto_build")
    files = {p: p.stat() for p in [*(ex / "cache").glob("*.bin"), ex / "orchestration/matmul_relu.so"]}
    done = cli("build", str(ex))
    assert done.stdout.splitlines()[-1] == "pypto-build: 3 compiled, 0 up to date, 1 stamp(s) written, " \
                                           "3 recompiled, identical bytes kept"     # the files say nothing
    assert {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in files} == \
        {p: (st.st_ino, st.st_mtime_ns) for p, st in files.items()}
    assert module.prepare_binary_context(ex, context) == 0


def test_replay_validates_on_simpler(ex):
    done = cli("replay", "--validate", str(ex))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[execute] running on simpler's a2a3sim" in done.stdout
    assert "Golden validation: PASSED" in done.stdout


def test_host_fallback_on_request_leaves_pyptos_files(ex):
    before = {p: p.read_bytes() for p in [*(ex / "cache").iterdir(), ex / "orchestration/matmul_relu.so"]}
    done = cli("replay", "--validate", "--platform", "host", str(ex))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "running on the host runtime" in done.stdout and "Golden validation: PASSED" in done.stdout
    assert {p: p.read_bytes() for p in before} == before


def test_host_build_graph_builds_and_validates_through_simpler(install, tmp_path):
    """The other runtime PyPTO writes: its orchestration runs in the host process (simpler's runtime of that name)."""
    root = Path(shutil.copytree(EXAMPLE, tmp_path / "hbg"))
    config = root / "kernel_config.py"
    config.write_text(config.read_text().replace('"runtime": "tensormap_and_ringbuffer"', '"runtime": "host_build_graph"'))
    done = cli("replay", "--validate", "-j", "2", str(root))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0].endswith(f", host_build_graph · PTO-ISA: simpler's managed tree "
                                                f"{install.pto_isa_root} {git_head(install.pto_isa_root)[:7]}")
    assert "Golden validation: PASSED" in done.stdout
    assert json.loads((root / "cache/binary_context.json").read_text())["runtime_name"] == "host_build_graph"


def _inputs(root: Path) -> tuple[list, object]:
    """golden.py's inputs and the expected `out`."""
    from pypto_build.run.golden import load_golden
    golden = load_golden(root)
    pairs = golden.inputs()
    return [v for _, v in pairs], golden.expected(dict(pairs))["out"]


def test_validate_caches_its_verdict_per_platform(ex):
    first = cli("validate", str(ex))
    assert first.returncode == 0 and "Golden validation: PASSED" in first.stdout
    again = cli("validate", str(ex))
    assert again.returncode == 0 and "Golden validation: PASSED (cached:" in again.stdout       # the kept verdict
    assert "running on simpler" not in again.stdout
    on_host = cli("validate", "--platform", "host", str(ex))
    assert on_host.returncode == 0 and "running on the host runtime" in on_host.stdout     # another platform's


def test_switching_to_host_and_back_compiles_nothing_and_keeps_each_verdict(ex):
    """Each platform keeps its own build state, as its binaries: the recorded a2a3sim, host, and back."""
    assert cli("build", "--platform", "host", str(ex)).stdout.splitlines()[-1].startswith("pypto-build: 3 compiled")
    for args in (("--platform", "host"), (), ("--platform", "host"), ()):
        os.utime(ex / "kernels/aiv/matmul_relu_incore_1_aiv.cpp")       # past the no-op record: doit decides
        done = cli("build", *args, str(ex))
        assert done.stdout.splitlines()[-1] == "pypto-build: 0 compiled, 3 up to date", done.stdout + done.stderr
    assert "running on simpler" in cli("validate", str(ex)).stdout
    assert "running on the host runtime" in cli("validate", "--platform", "host", str(ex)).stdout
    assert "Golden validation: PASSED (cached:" in cli("validate", str(ex)).stdout     # a2a3sim's verdict kept


def test_compiled_program_benchmark_and_debug_run_py_run_on_simpler(ex):
    import torch
    from pypto_build.compat import CompiledProgram, benchmark, write_run_script
    program = CompiledProgram.from_dir(ex)
    assert program.platform is None and program.persisted_platform == "a2a3sim"
    args, expected = _inputs(ex)
    program(*args)
    assert program.platform == "a2a3sim" and torch.allclose(args[-1], expected, rtol=1e-5, atol=1e-5)
    stats = benchmark(program, args, rounds=2, warmup=1)
    assert stats.samples == 2 and stats.host_us_min > 0
    script = write_run_script(ex)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=900, cwd="/")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[execute] running on simpler's a2a3sim" in done.stdout and "Golden validation: PASSED" in done.stdout


def test_compile_commands_name_the_directory_the_compiler_runs_in(install, ex):
    done = cli("compdb", str(ex))
    assert done.returncode == 0, done.stdout + done.stderr
    entries = json.loads((ex / "compile_commands.json").read_text())
    assert {e["directory"] for e in entries} == {str(install.project_root)}      # simpler's root, as simpler runs them
    assert sorted(Path(e["file"]).name for e in entries) == [
        "matmul_relu.cpp", "matmul_relu_incore_0_aic.cpp", "matmul_relu_incore_1_aiv.cpp"]


def test_watch_rebuilds_and_validates_on_simpler(ex):
    """`pypto-build watch` on the recorded a2a3sim: the run goes through simpler's Worker in a process forked
    from the warm server; an edit is one round that rebuilds that kernel only and validates again."""
    from watching import Watcher

    env = {k: v for k, v in os.environ.items() if k != "PYPTO_BUILD_PLATFORM"}
    w = Watcher([sys.executable, "-m", "pypto_build", "watch", "--validate", "--runs", "2", "."], ex, env=env)
    try:
        assert w.wait_for(r"^pypto-build: platform ").startswith("pypto-build: platform a2a3sim (recorded")
        assert "   verdict  PASSED (out)" in w.block(1)
        w.wait_for(r"^\[watch\] watching ")
        kernel = ex / "kernels" / "aiv" / "matmul_relu_incore_1_aiv.cpp"
        kernel.write_text(kernel.read_text() + '\nextern "C" int watch_edit(void) { return 1; }\n')
        second = w.block(2)
        assert "   rebuilt  compile:aiv/matmul_relu_incore_1_aiv" in second, second
        assert "   verdict  PASSED (out)" in second
        rc, err = w.interrupt()
    finally:
        w.stop()
    assert rc == 130 and "Traceback" not in err


@pytest.mark.skipif(shutil.which("distccd") is None, reason="distcc not installed (apt-get install distcc)")
def test_sim_kernels_compile_on_distccd_to_simplers_bytes(install, built, tmp_path):
    """`--launcher distcc` on a2a3sim: each kernel's compile runs on a real distccd (127.0.0.1), the link here,
    and the binaries are still exactly what simpler's KernelCompiler builds."""
    from simpler_setup import KernelCompiler
    from pypto_build.testing.loopback import distccd

    ex = built                                  # in place: the orchestration's debug info names its path
    before = {rel: (ex / rel).read_bytes() for rel in KERNELS}
    with distccd(tmp_path / "distccd", compilers=[shutil.which("g++-15")]) as server:
        done = cli("build", "--launcher", "distcc", "--recompile", "-j", "4", str(ex), env=server.env())
        jobs = server.compiled()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning" not in done.stderr
    assert sorted(Path(j).name for j in jobs) == sorted(Path(src).name for _, src in KERNELS.values())
    compiler = KernelCompiler(platform="a2a3sim")
    for rel, (core, source) in KERNELS.items():
        theirs = compiler.compile_incore(str(ex / source), core_type=core, pto_isa_root=str(install.pto_isa_root),
                                         extra_include_dirs=pypto_kernel_dirs(install.project_root))
        assert (ex / rel).read_bytes() == theirs == before[rel], rel


def test_a_noop_runs_no_git_and_is_answered_before_the_command_line_loads(ex, install, tmp_path):
    """simpler's checkout and its PTO-ISA tree are watched by the no-op record (git_watch): git is asked when
    the record is taken, never by the no-op itself, which the console script's quick answer gives
    (noop_record.quick: no argparse, options, pipeline or doit loaded)."""
    log = recording_git(tmp_path / "git-stand-in")
    env = {"PATH": f"{log.parent}{os.pathsep}{os.environ['PATH']}"}
    age_tree(ex)
    first = cli("build", str(ex), env=env)
    assert first.returncode == 0 and (ex / ".pypto_build/noop.marshal").exists(), first.stdout + first.stderr
    assert "status" in log.read_text()
    log.write_text("")
    done = cli("build", str(ex), env={**env, "PYTHONPROFILEIMPORTTIME": "1"})
    assert done.stdout.splitlines()[-1] == "pypto-build: 0 compiled, 3 up to date", done.stdout + done.stderr
    assert log.read_text() == ""
    loaded = imported(done.stderr)
    assert "pypto_build.plan.noop_record" in loaded
    assert sorted(loaded & {"doit", "pypto_build.options", "pypto_build.cli.main", "pypto_build.plan.noop"}) == []
    trees = noop_record.load(ex)["trees"]
    assert [t[0] for t in trees] == [str(install.project_root), str(install.pto_isa_root)]


# aiv: three kernels with PyPTO's four-directive prelude, one that adds "intrinsic.h" after it; aic: two that add
# "intrinsic.h" and one that does not (all take the four directives); and one aic kernel edited by hand
PRELUDE_KERNELS = ("attn_out_seed", "kv_seed", "q_seed", "dcr_xgamma", "out_proj", "out_proj_0", "k_proj", "v_proj")


def with_and_without_preludes(install, tmp_path: Path, names: tuple[str, ...], change) -> Path:
    """A real directory of `names` (bench/real_dir.py), changed by `change(root)`, built with preludes and a copy
    built with `--no-pch`: every binary the same. Returns the one built with preludes."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    try:
        from real_dir import write_real_dir
    finally:
        sys.path.pop(0)
    with_, plain = tmp_path / "with", tmp_path / "plain"
    write_real_dir(with_, install.project_root, names)
    change(with_)
    shutil.copytree(with_, plain)
    done = cli("build", "-j", "2", str(with_))
    assert done.returncode == 0, done.stdout + done.stderr
    assert cli("build", "-j", "2", "--no-pch", str(plain)).returncode == 0
    ours = {p.relative_to(with_): p.read_bytes() for p in with_.rglob("cache/*.bin")}
    assert len(ours) == len(names)
    assert ours == {p.relative_to(plain): p.read_bytes() for p in plain.rglob("cache/*.bin")}
    return with_


def test_precompiled_preludes_give_the_plain_bytes_on_real_aiv_and_aic_kernels(install, tmp_path):
    def v_proj_edited(root: Path) -> None:
        edited = root / "kernels/aic/v_proj.cpp"
        edited.write_text(edited.read_text().replace("#include <cstdint>", "#include <cstdint>\n#define V_PROJ_EDITED 1"))

    with_ = with_and_without_preludes(install, tmp_path, PRELUDE_KERNELS, v_proj_edited)
    said = {line.split(": ", 1)[0]: line for line in cli("explain", "--all", str(with_)).stdout.splitlines()}
    taken = [t for t, line in said.items() if "last compiled with prelude:" in line]
    assert len(taken) == 7 and "plainly: its leading directives do not begin with" in said["compile:aic/v_proj"], \
        said


@pytest.mark.parametrize("head, taken", [
    ("// a note \\\n#define PRELUDE_TAG 3\n", 3),                        # the comment swallows the define
    ("#ifdef LATE\n#define PRELUDE_TAG 4\n#endif\n#define LATE 1\n", 0),  # read twice it defines more: refused
], ids=["continued-comment", "read-twice"])
def test_real_kernels_attacked_in_their_directives_keep_the_plain_bytes(install, tmp_path, head, taken):
    tag = '\nextern "C" int prelude_tag() {\n#ifdef PRELUDE_TAG\n  return PRELUDE_TAG;\n#else\n  return -1;\n#endif\n}\n'

    def attacked(root: Path) -> None:
        for k in (root / "kernels").glob("*/*.cpp"):
            text = k.read_text()
            k.write_text(text.replace("#include <cstdint>", head + "#include <cstdint>", 1) + tag)

    with_ = with_and_without_preludes(install, tmp_path, PRELUDE_KERNELS[:3], attacked)
    said = cli("explain", "--all", str(with_)).stdout
    assert said.count("last compiled with prelude:") == taken, said
