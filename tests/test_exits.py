"""One error tree, one map to exit statuses (issue 23, item 4).

Every exception class the package defines is in the tree (`PyptoBuildError`: `UserError` or `Failure`),
`errors.exit_status` gives each its one status (0 ok, 1 failed, 2 user or environment, 3 a bug, 130
interrupted), nothing raises the root bare, and every front end ends through `exits.guarded`: the same
line and status, `--debug` adding a traceback and changing nothing else.
"""
from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import inject
import pypto_build
from pypto_build import errors
from pypto_build.errors import Failure, PyptoBuildError, UserError, exit_status
from pypto_build.core.exits import guarded
from pypto_build.testing import synth

PACKAGE = Path(pypto_build.__file__).parent

# Each named class and the status the map gives it: the failures, then the user's and the environment's.
STATUS = {
    "errors.BuildError": 1, "errors.ProgramFailed": 1, "errors.ExecutorError": 1, "errors.ValidationFailed": 1,
    "run.golden.GoldenError": 1, "run.golden.NothingCompared": 1,
    "errors.LayoutError": 2, "errors.ManifestError": 2, "errors.MetaError": 2, "errors.ArgumentError": 2,
    "errors.ToolchainError": 2, "errors.DepfileError": 2, "errors.TooLarge": 2, "errors.SpliceError": 2,
    "errors.RemoteError": 2, "errors.HttpError": 2, "errors.WatcherFailed": 2, "errors.WorkerDied": 2,
    "core.settings.SettingError": 2, "platforms.simpler.elf_payload.PayloadError": 2, "engine.lock.NotWritable": 2,
    "variants.history.Damaged": 2, "core.safeio.NotRegularFile": 2, "platforms.host.runtime.abi.UnsupportedDType": 2,
    "platforms.l3_shims.HostUnimplemented": 2,
}
# Where they were defined before the tree took them in, and the builtin base callers still catch.
KEPT_BASES = {
    "platforms.host.runtime.executor.ExecutorError": RuntimeError, "compile.depfile.DepfileError": ValueError, "core.limits.TooLarge": UserError,
    "cache.remote.RemoteError": UserError, "cache.remote_http.HttpError": UserError,
    "watch.loop.WatcherFailed": UserError, "errors.ValidationFailed": AssertionError,
    "errors.ArgumentError": ValueError, "core.safeio.NotRegularFile": OSError, "platforms.l3_shims.HostUnimplemented":
        AttributeError,
}


def obj(dotted: str):
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(f"pypto_build.{module}"), name)


def package_modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if "examples" in parts or "testing" in parts or parts[-1] == "__main__":     # __main__ runs the CLI
            continue
        found.append((".".join(parts[:-1] if parts[-1] == "__init__" else parts), path))
    return found


@pytest.mark.parametrize("dotted, status", sorted(STATUS.items()))
def test_each_error_has_its_one_status(dotted, status):
    cls = obj(dotted)
    assert issubclass(cls, PyptoBuildError)
    assert issubclass(cls, Failure) != issubclass(cls, UserError)        # one branch, never both
    assert exit_status(cls.__new__(cls)) == status


@pytest.mark.parametrize("dotted, base", sorted(KEPT_BASES.items()))
def test_errors_taken_into_the_tree_keep_their_builtin_base(dotted, base):
    cls = obj(dotted)
    assert issubclass(cls, PyptoBuildError) and issubclass(cls, base)


def test_a_failure_is_never_a_user_error_and_the_rest_of_the_map():
    assert not issubclass(errors.BuildError, UserError)
    assert not issubclass(errors.ProgramFailed, UserError)
    assert exit_status(KeyboardInterrupt()) == 130
    assert exit_status(OSError(28, "No space left on device", "/x")) == 2
    assert exit_status(KeyError("x")) == 3 and exit_status(RuntimeError("x")) == 3     # a bug: its own status
    assert exit_status(AssertionError("x")) == 3      # a bare assert is ours; a validation is ValidationFailed
    assert {errors.OK, errors.FAILED, errors.USER, errors.INTERNAL, errors.INTERRUPTED_STATUS} == {0, 1, 2, 3, 130}


def test_every_exception_class_the_package_defines_is_in_the_tree():
    """A class deriving from an exception anywhere in the package (its test stand-ins and private control flow
    aside) derives from PyptoBuildError: a front end knows its status."""
    outside = []
    for name, _path in package_modules():
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if (isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == name
                    and not attr.startswith("_") and not issubclass(value, PyptoBuildError)):
                outside.append(f"{name}.{attr}")
    assert outside == []


def test_nothing_raises_the_root_bare():
    """`PyptoBuildError(...)` says neither "your input" nor "it failed": every raise names its branch."""
    bare = []
    for name, path in package_modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "PyptoBuildError":
                bare.append(f"{name}:{node.lineno}")
    assert bare == []


@pytest.mark.parametrize("raised, status, line", [
    (errors.BuildError("1 unit(s) failed; first: compile:aiv/k0: k0.cpp: error"), 1,
     "pypto-build: 1 unit(s) failed; first: compile:aiv/k0: k0.cpp: error"),
    (errors.LayoutError("/d: not a directory; pass a build directory"), 2,
     "pypto-build: error: /d: not a directory; pass a build directory"),
    (PermissionError(13, "Permission denied", "/d/x"), 2,
     "pypto-build: error: /d/x: permission denied; make it writable and readable by you, or copy the build "
     "directory somewhere writable (cp -a DIR NEWDIR) and build there"),
])
@pytest.mark.parametrize("debug", [False, True])
def test_guarded_says_one_line_and_debug_adds_only_a_traceback(capsys, raised, status, line, debug):
    def fail():
        raise raised

    assert guarded(fail, debug=debug) == status
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == line
    assert (len(err) > 1 and err[0] == "Traceback (most recent call last):") if debug else err == [line]


def test_a_bug_is_its_traceback_and_status_3_never_a_user_error(capsys):
    assert guarded(lambda: {}["missing"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and "KeyError: 'missing'" in err
    assert err.splitlines()[-1].startswith("pypto-build: error: internal error: KeyError: 'missing'")


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=300, cwd=cwd)


@pytest.mark.parametrize("argv", [["doit", "pypto-build", "--bogus"], ["doit", "replay", "-j", "x"],
                                  ["pypto-build", "doit", "list", "--bogus", "{d}"]])
def test_a_bad_doit_option_is_one_line_and_status_2(tmp_path, argv):
    """doit's own command line says a bad option with status 3 (and every option it knows); ours with 2."""
    d = synth.write_l2(tmp_path / "d", kernels=1)
    out = run(*[a.format(d=d) for a in argv], cwd=d)
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("pypto-build: error: ")
    assert "see `" in out.stderr and "CmdOption" not in out.stderr


@pytest.mark.slow
def test_debug_run_py_says_a_crashed_program_as_a_failure(tmp_path):
    """debug/run.py's inline inputs (runner_main): a program that aborts is exit 1 and the line every front end
    prints for a failure; it was 2 and `pypto-build replay: error: ...`, as if the input were bad."""
    pytest.importorskip("torch")
    d = synth.write_l2(tmp_path / "d", kernels=2, golden=True)
    inject(synth.kernel_path(d, 1), "abort();", includes="#include <cstdlib>")
    code = ("import sys, torch; from pypto_build.compat.runner_main import main; "
            "sys.exit(main([sys.argv[1], '--no-validate'], inline_inputs=lambda: [torch.ones(16), torch.zeros(16)]))")
    out = run(sys.executable, "-c", code, str(d))
    assert out.returncode == 1, out.stderr
    last = out.stderr.splitlines()[-1]
    assert last.startswith("pypto-build: ") and "was killed by SIGABRT" in last and "error:" not in last
    assert "Traceback" not in out.stderr
