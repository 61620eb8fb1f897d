"""The prelude stage (issues 24, 32): its plan, its action and its check, each on its own, fast, with real g++.

The plan through the public door (`graph.load_graph`, which calls `compile/prelude.py`'s `plan_preludes`), on
host kernels against a small PTO-ISA-style tree (`pto_tree`); the action (`prelude_actions.run_prelude`) and
the check (`PreludeCheck`, called as doit calls it) on a prelude of a header written here, into a store in
tmp_path; a kernel's compile taking it (`take`), whose object is the plain compile's, byte for byte. No doit
run. Whole builds with preludes: tests/test_prelude.py and tests/test_prelude_exact.py.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pypto_build.cache import PreludeStore
from pypto_build.compile.plan import CompileUnit
from pypto_build.compile.prelude import (PreludeUnit, directives, head_of, header_text, pch_argv, prelude_key,
                                         relative_paths)
from pypto_build.compile.prelude_actions import PCH_FLAGS, PreludeCheck, run_prelude, take
from pypto_build.core.shared_flag import SharedFlag
from pypto_build.plan.graph import load_graph
from pypto_build.testing import synth

LIB_H = "#ifndef LIB_H\n#define LIB_H\ninline int lib() { return 41; }\n#endif\n"
TEXT = "#include <cstdint>\n#include <lib.h>\n"
KERNEL = TEXT + "int kernel(int x) { return x + lib() + (int)sizeof(std::int64_t); }\n"


# ---------------------------------------------------------------------------
# the plan
# ---------------------------------------------------------------------------


def kernels(graph) -> list[CompileUnit]:
    return [u for p in graph.plans for u in p.units if u.kind == "kernel"]


def test_the_kernels_of_one_command_line_share_the_prelude_they_begin_with(pto_tree, tmp_path):
    root = synth.write_l2(tmp_path / "d", kernels=4)             # two aic and two aiv: one command line each
    graph = load_graph(root, "host")
    units, preludes = kernels(graph), graph.preludes
    assert [u.task.rpartition(".")[0] for u in preludes.units] == ["prelude:aic", "prelude:aiv"]
    assert sorted(preludes.used_by) == sorted((u.task, preludes.of(u.task).task) for u in units)
    assert preludes.others == () and all(preludes.begins(u.task) for u in units)
    for p in preludes.units:
        first = next(u for u in units if preludes.of(u.task) is p)
        assert p.directives == tuple(head_of(root / first.source)[:len(p.directives)])
        assert "#include <pto/pto-inst.hpp>" in p.directives and p.text == header_text(p.directives)
        assert p.argv == pch_argv(first.argv) and os.path.normpath(p.cwd) == str(root)
        where = p.cwd if relative_paths(p.argv) else ""                   # the cwd counts when a path is relative
        assert p.key == prelude_key(p.compiler, p.argv, where, p.text) and p.task.endswith(p.key[:8])
        assert first.task in preludes.firsts                          # its build is set up by that kernel


def test_a_kernel_that_does_not_begin_with_it_is_planned_plain(pto_tree, tmp_path):
    root = synth.write_l2(tmp_path / "d", kernels=6)             # three aiv: one edit leaves two
    edited = root / "kernels/aiv/main_incore_1_aiv.cpp"
    edited.write_text(edited.read_text().replace("#include <pto/pto-inst.hpp>", "#define EDITED\n"
                                                 "#include <pto/pto-inst.hpp>"))
    preludes = load_graph(root, "host").preludes
    task = "compile:aiv/main_incore_1_aiv"
    assert [t for t, _ in preludes.others] == [task] and not preludes.begins(task)
    assert preludes.of(task) is preludes.of("compile:aiv/main_incore_3_aiv")      # its command line's prelude


def test_no_prelude_without_pto_isa_off_or_for_one_kernel(pto_tree, tmp_path, monkeypatch):
    root = synth.write_l2(tmp_path / "d", kernels=4)
    assert load_graph(root, "host", preludes=False).preludes.units == ()
    assert load_graph(synth.write_l2(tmp_path / "two", kernels=2), "host").preludes.units == ()   # one per line
    monkeypatch.delenv("PTO_ISA_ROOT")
    assert load_graph(root, "host").preludes.units == ()         # the host's fallback headers: not worth one


def test_the_key_follows_the_command_line(pto_tree, tmp_path, monkeypatch):
    root = synth.write_l2(tmp_path / "d", kernels=4)
    keys = [u.key for u in load_graph(root, "host").preludes.units]
    monkeypatch.setenv("CXXFLAGS", "-DMORE=1")
    assert not set(keys) & {u.key for u in load_graph(root, "host").preludes.units}


# ---------------------------------------------------------------------------
# the action
# ---------------------------------------------------------------------------


@pytest.fixture
def lib(tmp_path) -> Path:
    """An include folder outside the build directory, with lib.h."""
    (tmp_path / "include").mkdir()
    (tmp_path / "include/lib.h").write_text(LIB_H)
    return tmp_path / "include/lib.h"


@pytest.fixture
def store(tmp_path) -> str:
    return str(tmp_path / "store")


def unit_of(tmp_path: Path, text: str = TEXT, *flags: str) -> PreludeUnit:
    argv = ("g++", "-O2", "-fPIC", f"-I{tmp_path / 'include'}", *flags)
    key = prelude_key("g++ id", argv, "", text)
    return PreludeUnit("prelude:aiv.test", key, text, tuple(directives(text)), argv, str(tmp_path), "g++ id", 60.0)


def test_the_prelude_is_built_into_the_store_once_and_named_by_its_headers(tmp_path, lib, store):
    unit = unit_of(tmp_path)
    entry = PreludeStore(store).current(unit.key)
    assert entry is None
    done = run_prelude(unit, store)
    entry = PreludeStore(store).current(unit.key)
    assert done == {"key": unit.key, "store": store, "entry": entry.name}
    assert str(lib) in entry.headers and any(h.endswith("/cstdint") for h in entry.headers)
    assert Path(entry.header).read_text() == TEXT and Path(entry.header + ".gch").stat().st_size > 0
    gch = os.stat(entry.header + ".gch").st_ino
    assert run_prelude(unit, store) == done and os.stat(entry.header + ".gch").st_ino == gch    # kept
    assert run_prelude(unit, store, fresh=True) == done                                         # --recompile
    assert os.stat(entry.header + ".gch").st_ino != gch


@pytest.mark.parametrize("text, flags, why", [
    ("#include <lib.h>\n#include <stamped.h>\n", (), "uses __DATE__, whose value would be the prelude's build's"),
    (TEXT, ("-g3",), "-g3 records each macro definition with the file it came from"),
    ("#include <lib.h>\n#include <unguarded.h>\n", (), "its directives read twice give other tokens than once"),
])
def test_an_inexact_prelude_is_recorded_as_refused_and_said(tmp_path, lib, store, capsys, text, flags, why):
    (lib.parent / "stamped.h").write_text('static const char *when = __DATE__;\n')
    (lib.parent / "unguarded.h").write_text("struct Twice { int x; };\n")
    unit = unit_of(tmp_path, text, *flags)
    done = run_prelude(unit, store)
    assert done["entry"] is None and why in done["why"]
    assert PreludeStore(store).ref(unit.key)["why"] == done["why"]
    assert f"{unit.task}: no precompiled prelude ({done['why']}); its kernels compile the plain way" in \
        capsys.readouterr().err


def test_a_prelude_that_does_not_compile_is_said_and_leaves_no_entry(tmp_path, lib, store, capsys):
    unit = unit_of(tmp_path, "#include <no_such_header.h>\n")
    done = run_prelude(unit, store)
    assert done["entry"] is None and "no_such_header.h" in done["why"]
    assert PreludeStore(store).ref(unit.key) == {}
    assert "the precompiled prelude could not be built" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# the check
# ---------------------------------------------------------------------------


def test_the_check_holds_while_the_store_names_the_entry_of_the_headers_found_now(tmp_path, lib, store):
    unit = unit_of(tmp_path)
    check = PreludeCheck(unit, store)
    assert check(None, {}) is False and repr(check) == "never built for the headers as they are found now"
    run_prelude(unit, store)
    assert check(None, {}) is True and repr(check) == "prelude current"
    assert PreludeCheck(unit, store, fresh=True)(None, {}) is False        # --recompile
    lib.write_text(LIB_H.replace("41", "42"))                               # an edited header: another entry
    assert check(None, {}) is False and check.reason == "never built for the headers as they are found now"
    run_prelude(unit, store)
    assert check(None, {}) is True
    shutil.rmtree(PreludeStore(store).current(unit.key).path)
    assert check(None, {}) is False and check.reason == "its entry left the store (or is damaged)"
    lib.unlink()
    assert check(None, {}) is False and check.reason.startswith("its headers cannot be listed (")


def test_a_refusal_holds_for_the_headers_it_was_made_for(tmp_path, lib, store):
    (lib.parent / "stamped.h").write_text('static const char *when = __DATE__;\n')
    unit = unit_of(tmp_path, "#include <lib.h>\n#include <stamped.h>\n")
    run_prelude(unit, store)
    check = PreludeCheck(unit, store)
    assert check(None, {}) is True                                          # said once, when it was refused
    (lib.parent / "stamped.h").write_text('static const char *when = "today";\n')
    assert check(None, {}) is False


# ---------------------------------------------------------------------------
# a kernel's compile taking it
# ---------------------------------------------------------------------------


def kernel_unit(root: Path, text: str = KERNEL) -> CompileUnit:
    (root / "kernels").mkdir(parents=True, exist_ok=True)
    (root / "kernels/k.cpp").write_text(text)
    return CompileUnit(task="compile:aiv/k", kind="kernel", sub_rel=".", source="kernels/k.cpp",
                       output="kernels/k.so", argv=("g++",), stamp_path="cache/binary_context.json", argv_key="",
                       covered=())


def compiled(unit: PreludeUnit, root: Path, *flags: str) -> bytes:
    out = root / "k.o"
    subprocess.run([*unit.argv, *flags, "-c", "-o", str(out), str(root / "kernels/k.cpp")], check=True)
    return out.read_bytes()


def test_a_kernel_takes_the_entry_and_compiles_to_the_plain_bytes(tmp_path, lib, store):
    root, unit = tmp_path / "d", unit_of(tmp_path)
    kernel = kernel_unit(root)
    use = take(kernel, unit, store, None, root=root)
    assert not use.flags and use.how == f"plainly: {unit.task} is not in the store (or a header it read has " \
                                        "changed since)"
    run_prelude(unit, store)
    use = take(kernel, unit, store, None, root=root)
    entry = PreludeStore(store).current(unit.key)
    assert use.flags == (*PCH_FLAGS, entry.header) and use.how == f"with {unit.task}"
    assert set(use.headers) == set(entry.headers)                           # dependencies of the kernel too
    assert compiled(unit, root, *use.flags) == compiled(unit, root)


def test_a_kernel_compiles_plainly_when_it_cannot_take_the_entry(tmp_path, lib, store):
    root, unit = tmp_path / "d", unit_of(tmp_path)
    run_prelude(unit, store)
    kernel = kernel_unit(root)
    dropped = SharedFlag()
    dropped.raise_once()
    assert take(kernel, unit, store, None, dropped, root=root).how.startswith("plainly: a precompiled header failed")
    assert take(kernel, unit, store, None, began=False, root=root).how.startswith(
        f"plainly: its leading directives do not begin with {unit.task}'s")
    (root / "kernels/lib.h").write_text(LIB_H)
    quoted = unit_of(tmp_path, '#include <cstdint>\n#include "lib.h"\n')
    run_prelude(quoted, store)
    assert take(kernel_unit(root, KERNEL.replace("<lib.h>", '"lib.h"')), quoted, store, None, root=root).how == \
        'plainly: "lib.h" beside it answers the prelude\'s #include'
    assert take(kernel, None, store, None, root=root) is None and take(kernel, unit, None, None, root=root) is None
