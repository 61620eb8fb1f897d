"""Precompiled preludes are exact or not used (issue 32 items 1, 2 and 6): each way a prelude could build another
program than the plain compile — found by attacking it with real headers, flags and file systems — gives the
`--no-pch` bytes, on host kernels against a small PTO-ISA-style tree (tests/test_prelude.py's)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import binaries, edit
from test_prelude import KERNELS, how, plain_twin
from pypto_build.api import build
from pypto_build.compile import prelude
from pypto_build.testing import synth

pytestmark = pytest.mark.slow

# Appended to every kernel: code whose bytes show what TAG (and BASE) were when the kernel's text was compiled.
TAG = '''
extern "C" int prelude_tag() {
#ifdef TAG
  return TAG;
#else
  return -1;
#endif
}
'''


def kernels(root: Path) -> list[Path]:
    return sorted((root / "kernels").glob("*/*.cpp"))


def lead(root: Path, before: str, after: str = TAG) -> Path:
    """Put `before` in front of every kernel's first directive and `after` at its end."""
    for k in kernels(root):
        text = k.read_text()
        i = text.index("#include <cstdint>")
        k.write_text(text[:i] + before + text[i:] + after)
    return root


def include_dir(tmp_path: Path, monkeypatch, name: str, text: str) -> Path:
    """A folder holding the header `name` (`text`), searched by every compile ($CXXFLAGS -I)."""
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / name).write_text(text)
    monkeypatch.setenv("CXXFLAGS", f"-I{inc}")
    return inc


def hows(root: Path) -> list[str]:
    return [v for k, v in how(root).items() if k.startswith("compile:")]


def same_as_plain(root: Path, tmp_path: Path, name: str = "plain") -> dict[str, bytes]:
    """The binaries of `root`, which must be those of its sources built without preludes."""
    got = binaries(root)
    assert got == plain_twin(root, tmp_path / name)
    return got


def test_a_comment_continued_into_a_define_is_a_comment(pto_tree, tmp_path):
    a = lead(synth.write_l2(tmp_path / "a", kernels=KERNELS), "// a note \\\n#define TAG 3\n")
    assert prelude.directives("// a note \\\n#define TAG 3\n#include <x>\n") == ["#include <x>"]
    build(a)
    assert all("with prelude:" in v for v in hows(a))        # the rest of the directives still make one
    same_as_plain(a, tmp_path)


@pytest.mark.parametrize("directives", [
    '#if !__has_include("beside.h")\n#define TAG 2\n#endif\n',
    "#if __LINE__ < 4\n#define TAG 1\n#endif\n",
    "#ifdef LATE\n#define TAG 4\n#endif\n#define LATE 1\n",     # read twice (the kernel after the prelude) it differs
], ids=["has_include", "line", "order"])
def test_directives_whose_value_differs_in_the_prelude_stay_out_of_it(pto_tree, tmp_path, directives):
    a = lead(synth.write_l2(tmp_path / "a", kernels=KERNELS), "#include <vector>\n" + directives)
    for k in kernels(a):
        (k.parent / "beside.h").write_text("// here\n")
    build(a)
    same_as_plain(a, tmp_path)


def test_directives_read_twice_giving_more_are_refused_and_said(pto_tree, tmp_path, monkeypatch):
    a = lead(synth.write_l2(tmp_path / "a", kernels=KERNELS), "#include <vector>\n#include <twice.h>\n")
    include_dir(tmp_path, monkeypatch, "twice.h",
                "#ifndef TAG\n#define TAG 1\n#else\n#undef TAG\n#define TAG 2\n#endif\n")
    build(a)
    said = hows(a)
    assert all("read twice give other macros than once" in v for v in said), said
    same_as_plain(a, tmp_path)


@pytest.mark.parametrize("macro", ["__BASE_FILE__", "__TIMESTAMP__", "__DATE__ \" \" __TIME__",
                                   "__INCLUDE_LEVEL__ ? \"n\" : \"0\""])
def test_a_header_whose_text_depends_on_its_build_is_not_precompiled(pto_tree, tmp_path, monkeypatch, macro):
    inc = include_dir(tmp_path, monkeypatch, "when.h",
                      f"#pragma once\ninline const char *when() {{ return {macro}; }}\n")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")       # plain compiles are reproducible
    a = lead(synth.write_l2(tmp_path / "a", kernels=KERNELS), "#include <when.h>\n",
             TAG + 'extern "C" const char *prelude_when() { return when(); }\n')
    build(a)
    word = macro.split()[0]
    assert all(f"uses {word}" in v for v in hows(a)), hows(a)
    for k in kernels(a):
        edit(k)
    os.utime(inc / "when.h", (1_600_000_000, 1_600_000_000))   # __TIMESTAMP__: the header's time, not its text
    build(a)
    assert not any(b".tmp-" in data for data in same_as_plain(a, tmp_path).values())


@pytest.mark.parametrize("flag, taken", [("-g", True), ("-g3", False)])
def test_debug_information_records_no_flag_or_file_of_the_prelude(pto_tree, tmp_path, monkeypatch, flag, taken):
    monkeypatch.setenv("CXXFLAGS", flag)
    a = synth.write_l2(tmp_path / "a", kernels=KERNELS)
    build(a)
    assert all(("with prelude:" in v) == taken for v in hows(a)), hows(a)
    assert not any(b"-fpch-deps" in data for data in same_as_plain(a, tmp_path).values())


def test_a_header_that_now_shadows_another_makes_another_prelude(pto_tree, tmp_path, monkeypatch):
    inc_a, inc_b = tmp_path / "incA", tmp_path / "incB"
    inc_a.mkdir()
    inc_b.mkdir()
    (inc_b / "x.h").write_text("#ifndef X_H\n#define X_H\n#define TAG 1\n#endif\n")
    monkeypatch.setenv("CXXFLAGS", f"-I{inc_a} -I{inc_b}")
    a = lead(synth.write_l2(tmp_path / "a", kernels=KERNELS), "#include <x.h>\n")
    build(a)
    (inc_a / "x.h").write_text("#ifndef X_H\n#define X_H\n#define TAG 2\n#endif\n")     # the same guard, found first
    for k in kernels(a):
        edit(k)
    build(a)
    assert all("with prelude:" in v for v in hows(a))
    first = same_as_plain(a, tmp_path)
    result = build(a, recompile=True)
    assert sum(t.startswith("prelude:") for t in result.names("ran")) == 2      # --recompile builds them again
    assert binaries(a) == first


def test_a_retargeted_include_link_makes_another_prelude_and_another_cache_entry(pto_tree, tmp_path, monkeypatch):
    for version in (1, 2):
        (tmp_path / f"inc-v{version}").mkdir()
        (tmp_path / f"inc-v{version}" / "x.h").write_text(f"#ifndef X_H\n#define X_H\n#define TAG {version}\n#endif\n")
    inc = tmp_path / "inc"
    inc.symlink_to("inc-v1")
    monkeypatch.setenv("CXXFLAGS", f"-I{inc}")
    cache = tmp_path / "cache"
    a = lead(synth.write_l2(tmp_path / "a", kernels=KERNELS), "#include <x.h>\n")
    build(a, cache_dir=cache)
    inc.unlink()
    inc.symlink_to("inc-v2")
    result = build(a, cache_dir=cache)
    assert len(result.compiled) == KERNELS and all("with prelude:" in v for v in hows(a))
    v2 = same_as_plain(a, tmp_path)
    assert build(a, cache_dir=cache).compiled == []
    # the artefact cache hands a fresh copy built without preludes exactly what a plain compile gives
    b = tmp_path / "b"
    shutil.copytree(a, b, ignore=shutil.ignore_patterns(".pypto_build", "*.so", "binary_context.json"))
    build(b, cache_dir=cache, preludes=False)
    assert binaries(b) == v2


def test_what_the_artefact_cache_stored_with_preludes_is_what_a_plain_build_makes(pto_tree, tmp_path):
    cache = tmp_path / "cache"
    a = lead(synth.write_l2(tmp_path / "a", kernels=KERNELS), "// x \\\n#define TAG 5\n#include <vector>\n")
    build(a, cache_dir=cache)
    b = tmp_path / "b"
    shutil.copytree(a, b, ignore=shutil.ignore_patterns(".pypto_build", "*.so", "binary_context.json"))
    build(b, cache_dir=cache, preludes=False)
    assert binaries(b) == plain_twin(a, tmp_path / "plain")


def test_the_cli_says_why_a_kernel_compiled_plainly(pto_tree, tmp_path, monkeypatch):
    include_dir(tmp_path, monkeypatch, "when.h", "#pragma once\ninline const char *when() { return __TIME__; }\n")
    a = lead(synth.write_l2(tmp_path / "a", kernels=KERNELS), "#include <when.h>\n")
    out = subprocess.run([sys.executable, "-m", "pypto_build", "build", str(a)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("no precompiled prelude") == 2 and "uses __TIME__" in out.stderr, out.stderr
    again = subprocess.run([sys.executable, "-m", "pypto_build", "build", str(a)], capture_output=True, text=True)
    assert again.returncode == 0 and "no precompiled prelude" not in again.stderr      # said once, not each run


def test_the_directives_are_read_as_the_preprocessor_reads_them():
    d = prelude.directives
    assert d("#include <a>\n// note \\\n#define X 1\n#include <b>\nint x;") == ["#include <a>", "#include <b>"]
    assert d("#include <a>\n#define B 1 /* two\nlines */ + 2\n#include <c>\n") == \
        ["#include <a>", "#define B 1   + 2", "#include <c>"]                 # a comment is one space
    assert d("/* x */ #include <a>\r\n#define S \"a//b\" // c\n") == ["#include <a>", '#define S "a//b"']
    assert d("#define A \\  \n  1\n#include <x>\n") == ["#define A   1", "#include <x>"]   # spaces after \
    # what it does not read exactly ends the run (the kernel's own text decides the rest)
    assert d("#include <a>\n#define Q ??/\n#include <c>\n") == ["#include <a>"]          # a trigraph
    assert d("#include <a>\n#define R R\"(x)\"\n#include <c>\n") == ["#include <a>"]    # a raw string
    assert d("#include <a>\n#define N 1'000\n#include <c>\n") == ["#include <a>"]       # a digit separator
    assert d("#include <a>\n#include <b//c.h>\n") == ["#include <a>"]                   # a comment marker in a name
    assert d("#include <a>\n#define T \"open\n#include <c>\n") == ["#include <a>"]      # an open literal
    assert d("#include <a>\r#include <c>\n") == []                                        # a lone CR
    # what differs in a prelude built elsewhere ends it
    for word in prelude.DYNAMIC:
        assert d(f"#include <a>\n#if {word}\n#endif\n") == ["#include <a>"], word
    assert d("#include <a>\n#pragma once\n#include <c>\n") == ["#include <a>"]         # not a prelude directive


def test_a_kernel_that_does_not_compile_fails_as_it_does_without_preludes(pto_tree, tmp_path):
    a = synth.write_l2(tmp_path / "a", kernels=KERNELS)
    build(a)
    broken = kernels(a)[0]
    broken.write_text(broken.read_text() + "\nthis is not C++;\n")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    outs = [subprocess.run([sys.executable, "-m", "pypto_build", "build", *flags, str(root)], capture_output=True,
                           text=True) for flags, root in (((), a), (("--no-pch",), b))]
    assert [o.returncode for o in outs] == [1, 1]
    failed = [[line.replace(str(root), "ROOT") for line in o.stderr.splitlines() if "FAILED" in line]
              for o, root in zip(outs, (a, b))]
    assert failed[0] == failed[1] and len(failed[0]) == 1, failed
    assert "rejected" not in outs[0].stderr and "prelude" not in failed[0][0]
