"""Identities that decide whether binaries may be reused (reference §7).

`BinaryContext` mirrors PyPTO's `cache/binary_context.json`. A revision that
cannot be established makes the context unknown: nothing is trusted, every
unit rebuilds and no stamp is written (fail closed).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import __version__
from .hashing import file_digest, text_digest
from .procs import run
from .toolchain import PACKAGE_DIR, Platform

HOST_RUNTIME_DIR = PACKAGE_DIR / "runtime" / "host"
GIT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Revision:
    value: str | None
    why_unknown: str = ""


@dataclass(frozen=True)
class BinaryContext:
    platform: str
    runtime_name: str
    runtime_revision: Revision
    pto_isa_revision: Revision

    @property
    def unknown(self) -> str | None:
        """Why this context cannot be trusted, or None when it is known."""
        for what, rev in (("runtime", self.runtime_revision), ("PTO-ISA", self.pto_isa_revision)):
            if rev.value is None:
                return f"{what} identity unknown ({rev.why_unknown})"
        return None

    def stamp(self) -> dict:
        """The dict PyPTO stores in cache/binary_context.json (schema 1)."""
        return {"platform": self.platform, "pto_isa_revision": self.pto_isa_revision.value,
                "runtime_name": self.runtime_name, "runtime_revision": self.runtime_revision.value,
                "schema": 1}

    @property
    def digest(self) -> str | None:
        if self.unknown:
            return None
        s = self.stamp()
        return text_digest(*(f"{k}={s[k]}" for k in sorted(s)))


def clean_git_revision(root: Path) -> Revision:
    """HEAD of a clean git checkout (no modified, staged or untracked files)."""
    if not (root / ".git").exists():
        return Revision(None, f"{root} is not a git checkout")
    try:
        head = run(["git", "rev-parse", "HEAD"], cwd=root, timeout=GIT_TIMEOUT_S)
        status = run(["git", "status", "--porcelain=v1", "--untracked-files=normal"], cwd=root,
                     timeout=GIT_TIMEOUT_S)
    except OSError as exc:
        return Revision(None, f"git failed in {root}: {exc}")
    if head.timed_out or status.timed_out:
        return Revision(None, f"git did not answer within {GIT_TIMEOUT_S:g} s in {root}")
    if head.returncode or status.returncode or not head.stdout.strip():
        return Revision(None, f"git cannot read {root}")
    if status.stdout.strip():
        return Revision(None, f"{root} has uncommitted or untracked changes")
    return Revision(head.stdout.strip())


def host_runtime_revision() -> Revision:
    """Our own runtime: the package version plus a digest of the headers it ships."""
    files = sorted(p for p in HOST_RUNTIME_DIR.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    parts = [f"{p.relative_to(HOST_RUNTIME_DIR).as_posix()}:{file_digest(str(p))}" for p in files]
    return Revision(f"pypto_build-{__version__}+{text_digest(*parts)[:16]}")


def _pto_isa_revision(root: Path | None) -> Revision:
    return Revision("none") if root is None else clean_git_revision(root)


def binary_context(platform: Platform, runtime_name: str) -> BinaryContext:
    """The context binaries of one sub-build are built under."""
    return BinaryContext(platform.name, runtime_name, host_runtime_revision(),
                         _pto_isa_revision(platform.pto_isa_root))
