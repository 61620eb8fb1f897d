"""Identities: runtime / PTO-ISA revisions recompile what they affect, unknown fails closed."""
from __future__ import annotations

import json

import pytest

from conftest import git
from pypto_build.api import build
from pypto_build.toolchain.identity import clean_git_revision
from pypto_build.platforms.host.places import HOST_STAMP


def test_clean_git_revision_rules(pto_isa, tmp_path):
    assert clean_git_revision(pto_isa).value == git(pto_isa, "rev-parse", "HEAD")
    assert clean_git_revision(tmp_path).value is None                       # not a checkout
    (pto_isa / "untracked.txt").write_text("x")
    rev = clean_git_revision(pto_isa)
    assert rev.value is None and "uncommitted or untracked" in rev.why_unknown


@pytest.mark.slow
def test_pto_isa_revision_change_recompiles_every_sub_build(l3, pto_isa, monkeypatch):
    monkeypatch.setenv("PTO_ISA_ROOT", str(pto_isa))
    first = build(l3)
    assert len(first.compiled) == 6                       # argv changed: C++20 and PTO-ISA includes
    stamp = json.loads((l3 / "next_levels/chip_a" / HOST_STAMP).read_text())
    assert stamp["pto_isa_revision"] == git(pto_isa, "rev-parse", "HEAD")
    assert build(l3).compiled == []
    (pto_isa / "README").write_text("new revision\n")
    git(pto_isa, "add", ".")
    git(pto_isa, "commit", "-qm", "two")
    result = build(l3)
    assert len(result.compiled) == 6
    assert {u.reason for u in result.units if u.task in result.compiled} == {"runtime/PTO-ISA identity changed"}
    stamp = json.loads((l3 / "next_levels/chip_b" / HOST_STAMP).read_text())
    assert stamp["pto_isa_revision"] == git(pto_isa, "rev-parse", "HEAD")


@pytest.mark.slow
def test_unknown_identity_rebuilds_every_time_and_never_stamps(l2, pto_isa, monkeypatch):
    (pto_isa / "dirty.txt").write_text("untracked\n")
    monkeypatch.setenv("PTO_ISA_ROOT", str(pto_isa))
    for _ in range(3):
        result = build(l2)
        assert len(result.compiled) == 4
        assert not (l2 / HOST_STAMP).exists()
        assert any("PTO-ISA identity unknown" in w for w in result.warnings)
    assert {u.reason for u in result.units if u.task in result.compiled} == {
        f"PTO-ISA identity unknown ({pto_isa} has uncommitted or untracked changes)"}
    (pto_isa / "dirty.txt").unlink()                 # clean again: trusted, stamped, then no-op
    assert len(build(l2).compiled) == 4
    assert (l2 / HOST_STAMP).exists()
    assert build(l2).compiled == []


def test_host_runtime_header_change_recompiles(l2, monkeypatch, tmp_path):
    from pypto_build.toolchain.identity import Revision
    from pypto_build.platforms.host import platform as host
    monkeypatch.setattr(host, "host_runtime_revision", lambda: Revision("pypto_build-other"))
    result = build(l2)
    assert len(result.compiled) == 4
    stamp = json.loads((l2 / HOST_STAMP).read_text())
    assert stamp["runtime_revision"] == "pypto_build-other"
