"""Where simpler (PyPTO's runtime) lives and the identities it contributes, found without importing it.

Planning must stay light, so nothing here imports `simpler` or `simpler_setup`
(the latter loads simpler's whole scene-test harness): the import system is only
asked where their files are. Each decision reproduces the code that makes it
(simpler 93adc38, PyPTO e2d0f78):

* `project_root`: `simpler_setup/environment.py` -- its folder's `_assets/` when
  that holds `src/` (a wheel), else the folder above it (a checkout, editable);
  `installed.install_places`, light, as the no-op key asks it too.
* `runtime_revision`: PyPTO's `device_runner._runtime_revision` -- a checkout
  (`.git` present) is identified by its clean HEAD and nothing else; without
  `.git`, the commit `_task_interface` was built from.
* `pto_isa_root`: the tree simpler's resolver (`simpler_setup/pto_isa.py`) would
  reuse, `build/pto-isa` under `project_root`: `include/` there, HEAD equal to
  `pto_isa.pin`, `git status --porcelain` empty. Where the resolver would delete
  the tree and clone again, we only say so (`pto_isa_problem`): we never delete,
  clone or check out.
* `pto_isa_revision`: the clean HEAD of that tree, as PyPTO identifies it.
"""
from __future__ import annotations

import fcntl
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from ...errors import one_line
from ...toolchain.identity import Revision, clean_git_revision
from ...core.procs import Completed, run
from ..installed import PTO_ISA_TREE, install_places

PIN_FILE = "pto_isa.pin"
PTO_ISA_LOCK = Path("build") / ".pto-isa.lock"      # its resolver holds this (exclusive) while it works
PTO_ISA_URL = "https://github.com/hw-native-sys/pto-isa.git"
RESOLVE_HINT = ("python -c 'from simpler_setup.pto_isa import ensure_pto_isa_root as e; e(verbose=True)' "
                "(online; it deletes a dirty or off-pin tree first)")
HEAD_TIMEOUT_S = 5.0        # simpler's resolver: `git rev-parse HEAD`
STATUS_TIMEOUT_S = 30.0     # simpler's resolver: `git status --porcelain`
LOCK_WAIT_S = 30.0          # how long we wait for a resolver at work before saying so
_PIN = re.compile(r"[0-9a-fA-F]{40}")


@dataclass(frozen=True)
class SimplerInstall:
    """One simpler install as PyPTO compiles with it.

    `pto_isa_root` None: no tree simpler would reuse; `pto_isa_problem` says why
    and what to do, in one line. `setup_dir` is the resolved folder of
    `simpler_setup/kernel_compiler.py` (its `incore/` is on every kernel's path).
    """

    project_root: Path
    runtime_revision: Revision
    pto_isa_root: Path | None
    pto_isa_revision: Revision
    pto_isa_problem: str | None
    setup_dir: Path

    @property
    def label(self) -> str:
        """`simpler 93adc38`, or `simpler unknown revision`, for messages."""
        value = self.runtime_revision.value
        return f"simpler {value[:7]}" if value else "simpler unknown revision"


def find_simpler(platform: str | None = None) -> SimplerInstall:
    """The simpler install this Python would use, with its identities; ToolchainError when there is none
    (naming `platform`, the one that needs it)."""
    root, setup_dir = map(Path, install_places(platform))
    pto_root, pto_revision, problem = check_pto_isa(root)
    return SimplerInstall(root, runtime_revision(root), pto_root, pto_revision, problem, setup_dir)


def runtime_revision(project_root: Path) -> Revision:
    """PyPTO's runtime identity: a checkout's clean HEAD (final, even when unknown), else the build commit."""
    if (project_root / ".git").exists():
        return clean_git_revision(project_root)
    try:
        import _task_interface  # noqa: PLC0415 -- a small native module; only wheels need it
    except Exception as exc:  # noqa: BLE001 -- any failure leaves the identity unknown (fail closed)
        return Revision(None, f"simpler's _task_interface cannot be imported ({one_line(exc, 200)})")
    commit = getattr(_task_interface, "__build_commit__", "")
    if isinstance(commit, str) and commit.strip():
        return Revision(commit.strip())
    return Revision(None, f"simpler at {project_root} is no git checkout and its _task_interface records no "
                          "build commit; reinstall simpler from a git checkout")


def check_pto_isa(project_root: Path) -> tuple[Path | None, Revision, str | None]:
    """(tree, revision, problem) for the PTO-ISA tree simpler's resolver would reuse under `project_root`.

    Read-only. Waits (bounded) for a resolver holding simpler's lock, so a clone
    in progress is not mistaken for a broken tree.
    """
    tree = project_root / PTO_ISA_TREE
    pin, problem = read_pin(project_root / PIN_FILE)
    if pin is not None:
        fd = _open_lock(project_root / PTO_ISA_LOCK)
        try:
            if fd is not None and not _lock_shared(fd, LOCK_WAIT_S):
                problem = (f"{project_root / PTO_ISA_LOCK} is held by another process for more than "
                           f"{LOCK_WAIT_S:g} s (simpler resolving PTO-ISA?); let it finish and try again")
            else:
                problem = tree_problem(tree, pin)
            if problem is None:
                resolved = tree.resolve()
                return resolved, clean_git_revision(resolved), None
        finally:
            if fd is not None:
                os.close(fd)
    return None, Revision(None, f"no usable PTO-ISA tree: {problem}"), problem


def read_pin(pin_file: Path) -> tuple[str | None, str | None]:
    """(pin, None), or (None, problem): simpler's rule, 40 hex digits once stripped, compared lower-case."""
    try:
        value = pin_file.read_text(encoding="utf-8", errors="replace").strip()
    except OSError as exc:
        return None, f"cannot read simpler's PTO-ISA pin {pin_file} ({exc.strerror or exc}); reinstall simpler"
    if not _PIN.fullmatch(value):
        return None, f"{pin_file} holds {one_line(value, 60)!r}, not a 40-digit commit; restore it from git"
    return value.lower(), None


def tree_problem(tree: Path, pin: str) -> str | None:
    """Why simpler's resolver would not reuse `tree` at `pin` (it would delete it and clone), or None."""
    if not (tree / "include").is_dir():
        return (f"no PTO-ISA tree at {tree} (include/ missing): run simpler's resolver once, {RESOLVE_HINT}, "
                f"or git clone {PTO_ISA_URL} {tree} && git -C {tree} checkout {pin}")
    head = _git(["rev-parse", "HEAD"], tree, HEAD_TIMEOUT_S)
    commit = head.stdout.strip().lower() if head.returncode == 0 else ""
    if commit != pin:
        if not (tree / ".git").exists():
            return (f"PTO-ISA tree {tree} is no git checkout of its own, so simpler cannot check it against "
                    f"pin {pin}: replace it with a clone (git clone {PTO_ISA_URL} {tree}) checked out at the pin")
        at = f"is at {commit}" if commit else "has no readable HEAD"
        return (f"PTO-ISA tree {tree} {at} but simpler's {PIN_FILE} wants {pin}: run git -C {tree} checkout "
                f"{pin} (git -C {tree} fetch origin {pin} first if it is missing), or {RESOLVE_HINT}")
    status = _git(["status", "--porcelain"], tree, STATUS_TIMEOUT_S)
    if status.returncode != 0:
        return (f"git status failed in PTO-ISA tree {tree} ({status.how}: {one_line(status.output, 200)}); "
                "fix the checkout, or " + RESOLVE_HINT)
    if status.stdout.strip():
        return (f"PTO-ISA tree {tree} has local changes (git status --porcelain: "
                f"{one_line(status.stdout, 80)}); simpler would delete the tree: save what you need, then "
                f"git -C {tree} stash -u (or checkout -- . && clean -fd)")
    return None


def _git(args: list[str], cwd: Path, timeout: float) -> Completed:
    """`git args` in `cwd` as simpler's resolver runs it: once more with `safe.directory` when git refuses
    a tree owned by someone else. A failure to start or a timeout is a failed run."""
    result = _run_git(args, cwd, timeout)
    if result.returncode and "detected dubious ownership" in result.stderr and "safe.directory" in result.stderr:
        result = _run_git(["-c", f"safe.directory={cwd.resolve()}", *args], cwd, timeout)
    return result


def _run_git(args: list[str], cwd: Path, timeout: float) -> Completed:
    try:
        return run(["git", *args], cwd=cwd, timeout=timeout)
    except OSError as exc:
        return Completed(("git", *args), 127, "", str(exc))


def _open_lock(path: Path) -> int | None:
    """simpler's PTO-ISA lock file, opened read-only (never created); None when there is none."""
    try:
        return os.open(path, os.O_RDONLY)
    except OSError:
        return None


def _lock_shared(fd: int, wait_s: float) -> bool:
    """Take a shared flock on `fd` within `wait_s` seconds (released when `fd` is closed)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        except OSError:
            return True     # a file system without flock: simpler's own lock would not hold either
