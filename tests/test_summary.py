"""The summary lines say what was done, never more (issue 22 item 6).

Every count the last lines of a build print — compiled, from cache, up to date, stamps
written, kernel files re-spliced from `.pto`, `.pto` edits not applied — is checked here
against the files on disk: which binaries and stamps were (re)written, which are the
same files as before.
"""
from __future__ import annotations

import hashlib
import io
import re
import shutil
from pathlib import Path

import pytest

from conftest import FAKE_PTOAS, git, inject
from pypto_build.api import build
from pypto_build.plan.graph import load_graph
from pypto_build.testing import synth
from test_stage_pto import OLD_LINE

pytestmark = pytest.mark.slow

SUMMARY = re.compile(r"pypto-build: (\d+) compiled, (?:(\d+) from cache, )?(\d+) up to date(?:,|$)")


def built(root: Path, **options) -> tuple[list[str], object]:
    """Build `root` in process; (the lines it printed, the result)."""
    out = io.StringIO()
    result = build(root, progress=out, check=False, **options)
    return out.getvalue().splitlines(), result


def files(root: Path) -> tuple[dict[str, tuple | None], dict[str, tuple | None]]:
    """(binary -> identity, stamp -> identity) of every output the plan names; an identity is (inode, ctime,
    digest), None when the file is not there. A rewrite (atomic: a new inode) changes it."""
    graph = load_graph(root)

    def ident(rel: str) -> tuple | None:
        path = root / rel
        if not path.is_file():
            return None
        st = path.stat()
        return st.st_ino, st.st_ctime_ns, hashlib.sha256(path.read_bytes()).hexdigest()

    return ({o: ident(o) for p in graph.plans for o in p.outputs},
            {p.stamp_path: ident(p.stamp_path) for p in graph.plans})


def counts(line: str) -> tuple[int, int, int]:
    """(compiled, from cache, up to date) of a summary line."""
    compiled, cached, current = SUMMARY.match(line).groups()
    return int(compiled), int(cached or 0), int(current)


def kept(result) -> str:
    """The summary's last part when units rebuilt the bytes already in place (their files kept), else ""."""
    return f", {len(result.identical)} recompiled, identical bytes kept" if result.identical else ""


def changed(before: dict, after: dict) -> list[str]:
    return sorted(k for k in after if after[k] != before.get(k))


def test_no_stamp_is_claimed_when_a_dirty_pto_isa_tree_writes_none(l3, pto_isa, monkeypatch):
    (pto_isa / "dirty.txt").write_text("untracked\n")        # identity unknown: no sub-build may be stamped
    monkeypatch.setenv("PTO_ISA_ROOT", str(pto_isa))
    lines, result = built(l3)
    binaries, stamps = files(l3)
    assert len(stamps) == 2 and set(stamps.values()) == {None}
    assert lines[-1] == f"pypto-build: {len(binaries)} compiled, 0 up to date, 2 sub-build(s) not stamped " \
                        "(identity unknown)" + kept(result)
    assert "stamp(s) written" not in "\n".join(lines)
    git(pto_isa, "add", ".")
    git(pto_isa, "commit", "-qm", "two")                     # clean: trusted, so both are stamped
    lines, result = built(l3)
    after, stamps = files(l3)
    assert None not in stamps.values() and lines[-1] == f"pypto-build: {len(after)} compiled, 0 up to date, " \
                                                          "2 stamp(s) written" + kept(result)


def test_compiled_and_up_to_date_count_the_binaries_rewritten_and_left_alone(l2):
    before, stamps = files(l2)
    for i in (0, 2):                                          # two kernels change what they compute
        inject(synth.kernel_path(l2, i), f"volatile int changed = {i}; (void)changed;")
    lines, result = built(l2)
    after, stamps_after = files(l2)
    assert lines[-1] == "pypto-build: 2 compiled, 2 up to date, 1 stamp(s) written"
    assert len(changed(before, after)) == 2 and len(after) == 4
    assert changed(stamps, stamps_after) == list(stamps)     # the one stamp: rewritten
    lines, _ = built(l2)                                      # nothing to do: nothing rewritten, no stamp claimed
    assert lines[-1] == "pypto-build: 0 compiled, 4 up to date" and files(l2) == (after, stamps_after)


def test_from_cache_counts_the_binaries_restored(l2, tmp_path):
    cache = tmp_path / "cache"
    inject(synth.kernel_path(l2, 1), "volatile int changed = 3; (void)changed;")
    lines, _ = built(l2, cache_dir=cache)
    assert counts(lines[-1]) == (1, 0, 3)                     # only the compile it ran is stored
    first, _stamps = files(l2)
    for rel in first:                                         # every binary gone, and what was recorded of it
        (l2 / rel).unlink()
    lines, result = built(l2, cache_dir=cache)
    after, stamps = files(l2)
    assert counts(lines[-1]) == (3, 1, 0) and lines[-1].endswith(", 1 stamp(s) written")
    assert None not in after.values() and all(after[r][2] == first[r][2] for r in after)
    assert len(result.from_cache) == 1 and result.from_cache[0].endswith("main_incore_1_aiv")


def test_the_pto_lines_count_the_kernel_files_spliced_and_name_the_edits_not_applied(tmp_path, monkeypatch):
    root = synth.write_l2(tmp_path / "p", kernels=3, pto=True)
    empty = tmp_path / "no-ptoas"
    empty.mkdir()
    monkeypatch.setenv("PTOAS_ROOT", str(empty))
    built(root)
    pto = synth.pto_path(root, "main_incore_2_aic")
    pto.write_text(pto.read_text().replace(OLD_LINE, "synth_scale(a[i], 5.0f)"))
    kernels = {p: p.read_bytes() for p in (root / "kernels").rglob("*.cpp")}
    lines, result = built(root, allow_unapplied_pto=True)
    assert {p: p.read_bytes() for p in (root / "kernels").rglob("*.cpp")} == kernels     # nothing applied ...
    assert "[pto->cpp] edits NOT applied (ptoas not found; accepted by --allow-unapplied-pto): " \
           "ptoas/main_incore_2_aic.pto" in lines                                         # ... and said so
    assert [w for w in result.warnings if "NOT applied" in w] == [next(x for x in lines if "NOT applied" in x)]
    assert not any(line.startswith("[pto->cpp] updated") for line in lines)
    shutil.copy(FAKE_PTOAS, empty / "ptoas")                                              # now it lands
    lines, result = built(root)
    now = {p: p.read_bytes() for p in (root / "kernels").rglob("*.cpp")}
    assert "[pto->cpp] updated 1 kernel cpp(s)" in lines and len(changed(kernels, now)) == 1
    assert not any("NOT applied" in line for line in lines)
    assert counts(lines[-1]) == (1, 0, 3)


def test_a_recompile_to_the_same_bytes_says_the_files_were_kept(l2):
    """--recompile (or the first build after `invalidate_binary_cache()`) rebuilds the same bytes: the files
    are left as they were, and the summary and `BuildResult.identical` say why nothing looks rebuilt."""
    from pypto_build.compat.recipe import invalidate_binary_cache

    binaries, _ = files(l2)
    lines, result = built(l2, recompile=True)
    assert lines[-1].endswith(f", {len(binaries)} recompiled, identical bytes kept"), lines[-1]
    assert counts(lines[-1])[0] == len(binaries) and files(l2)[0] == binaries
    assert sorted(result.identical) == sorted(result.compiled) and len(result.identical) == len(binaries)
    invalidate_binary_cache(l2)
    lines, result = built(l2)
    assert lines[-1].endswith(f"{len(binaries)} recompiled, identical bytes kept") and files(l2)[0] == binaries
    inject(synth.kernel_path(l2, 0), "volatile int changed = 9; (void)changed;")
    lines, result = built(l2)           # new bytes: installed, nothing said about kept files
    assert "identical" not in lines[-1] and result.identical == () and len(result.compiled) == 1
