"""pypto_build.pto.splice: PyPTO's ptoas preprocessing, target lookup, sentinel splice, signatures."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pypto_build.testing import synth
from pypto_build.errors import PyptoBuildError, SpliceError
from pypto_build.pto.splice import BEGIN, END, find_target, function_names, preprocess, signature_of, splice, split

NEITHER = "neither ptoas sentinel line"
GONE = "the sentinel line {!r} is missing from this kernel (deleted by hand?)"
ORDER = f"the sentinel line {END!r} comes before {BEGIN!r}"


def units_and_targets(root: Path):
    """(unit, raw ptoas output, [kernel wrapper paths]) of every ptoas unit of a synth sub-build."""
    for unit in synth.pto_units(root):
        raw = (root / "ptoas" / f"{unit}.cpp").read_text()
        targets = [find_target(root, name) for name in function_names(raw)]
        yield unit, raw, [t for t in targets if t is not None]


# ---------------------------------------------------------------------------
# preprocess (reference 5.4)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("line, dropped", [
    ('#include "pto/pto-inst.hpp"', True),
    ("   #include <cstdint>   ", True),
    ('#include "tensor.h"', True),
    ('#include "my_tensor.hpp"', True),  # substring match, as in PyPTO
    ("#include <vector>", False),
    ("// #include <cstdint>", False),
    ("using namespace pto;", True),
    ("\tusing namespace pto;  ", True),
    ("using namespace pto; // why", False),
    ("using namespace std;", False),
    ("set_ffts_base_addr(ffts);", True),
    ("    set_ffts_base_addr(a, b)", True),
    ("set_ffts_base_addr (ffts);", False),
    ("x = set_ffts_base_addr(ffts);", False),
])
def test_line_filter(line, dropped):
    text = f"int a;\n{line}\nint b;\n"
    assert preprocess(text) == ("int a;\nint b;\n" if dropped else text)


def test_line_filter_keeps_line_endings():
    raw = 'int a;\r\n#include "pto/pto-inst.hpp"\r\nusing namespace pto;\nint b;\r\nint c;'
    assert preprocess(raw) == "int a;\r\nint b;\r\nint c;"
    assert preprocess("") == ""


def test_tensor_becomes_chip_tensor_on_word_boundaries_only():
    raw = "Tensor t; GlobalTensor<float> g; TensorView v; Tensor* p; my_Tensor q; ChipTensor c; (Tensor)\n"
    assert preprocess(raw) == ("ChipTensor t; GlobalTensor<float> g; TensorView v; ChipTensor* p; my_Tensor q; "
                               "ChipTensor c; (ChipTensor)\n")
    assert preprocess(preprocess(raw)) == preprocess(raw)


@pytest.mark.parametrize("raw, expected", [
    ('extern "C" __global__ AICORE void f(int a)', "static __aicore__ void f(int a)"),
    ('extern"C"AICORE void f()', "static __aicore__ void f()"),
    ('extern  "C"\n__global__\tAICORE\nvoid f()', "static __aicore__ void f()"),
    ("__global__ AICORE void f()", "static __aicore__ void f()"),
    ("AICORE   void f();", "static __aicore__ void f();"),
    ("static AICORE void f()", "static static __aicore__ void f()"),  # PyPTO's regex, verbatim
    ("AICORE inline float h(float x)", "__aicore__ inline float h(float x)"),
    ('extern "C" AICORE int g()', 'extern "C" __aicore__ int g()'),
    ("AICORE_X MY_AICORE AICORE", "AICORE_X MY_AICORE __aicore__"),
    ("__global__ void k()", "__global__ void k()"),
])
def test_entry_and_aicore_rewrites(raw, expected):
    assert preprocess(raw) == expected


UB = "__ubuf__ float* v1 = dstTile.data();\n"
GM = "__gm__ float* v2 = (__gm__ float*)tableGlobal;\n"
IDX = "__ubuf__ uint32_t* v3 = idxTile.data();\n"
CB = "__cbuf__ half* v4 = scratchTile.data();\n"


def test_mgather_restores_wrapper_operands_and_drops_alias_lines():
    raw = f"  {UB}  {GM}  {IDX}  int keep = 1;\n  MGATHER<Tile, GT>(v1, v2, v3);  // gather\n"
    assert preprocess(raw) == "  int keep = 1;\n  MGATHER<Tile, GT>(dstTile, tableGlobal, idxTile);  // gather\n"
    assert preprocess(f"{UB}{GM}{IDX}MGATHER(v1,v2 ,  v3);\n") == "MGATHER(dstTile, tableGlobal, idxTile);\n"


def test_mgather_runs_after_the_line_filter_and_before_renames():
    # the filtered set_ffts_base_addr line would be a third use of v1; `Tensor` is renamed afterwards
    raw = f"{UB}set_ffts_base_addr(v1);\n__gm__ Tensor* v2 = (__gm__ Tensor*)Tensor;\n{IDX}MGATHER(v1, v2, v3);\n"
    assert preprocess(raw) == "MGATHER(dstTile, ChipTensor, idxTile);\n"


def test_mgather_fourth_operand():
    assert preprocess(f"{UB}{GM}{IDX}{CB}MGATHER(v1, v2, v3, v4);\n") == \
        "MGATHER(dstTile, tableGlobal, idxTile, scratchTile);\n"
    # not an alias at all: kept verbatim
    assert preprocess(f"{UB}{GM}{IDX}MGATHER(v1, v2, v3, tmp);\n") == "MGATHER(dstTile, tableGlobal, idxTile, tmp);\n"
    # an alias, but used elsewhere too: the whole call is left alone
    unchanged = f"{UB}{GM}{IDX}{CB}use(v4);\nMGATHER(v1, v2, v3, v4);\n"
    assert preprocess(unchanged) == unchanged
    # an alias defined only after the call still counts as "an alias": left alone
    later = f"{UB}{GM}{IDX}MGATHER(v1, v2, v3, v4);\n{CB}"
    assert preprocess(later) == later


@pytest.mark.parametrize("raw", [
    f"{UB}{GM}{IDX}use(v2);\nMGATHER(v1, v2, v3);\n",  # alias used three times
    f"{UB}{GM}{IDX}MGATHER(v1, v2, v3);\nagain(v3);\n",  # ... also after the call
    f"{UB}{GM}MGATHER(v1, v2, plain);\n",  # idx is no alias
    f"{UB}{GM}MGATHER(v1, v2, v3);\n{IDX}",  # idx defined after the call
    f"{UB}{GM}{IDX}MGATHER( v1, v2, v3);\n",  # not the identifier-only call form
    f"{UB}{GM}{IDX}MGATHER(v1, v2, v3)\n;\n",
    f"{UB}{GM}{IDX}MGATHER(v1, v1, v3);\n",  # v1 three times, v2 once
    f"__ubuf__ float* v1 = dstTile.data(); // c\n{GM}{IDX}MGATHER(v1, v2, v3);\n",  # not a whole-line alias
    f"{UB}{GM}{IDX}MGATHERX(v1, v2, v3);\n",
    f"{UB}{GM}{IDX}NOT_MGATHER(v1, v2, v3);\n",
])
def test_mgather_leaves_the_call_unchanged(raw):
    assert preprocess(raw) == raw


def test_mgather_uses_the_most_recent_definition():
    raw = f"{UB}use(v1);\n__ubuf__ float* v1 = otherTile.data();\n{GM}{IDX}MGATHER(v1, v2, v3);\nuse(v1b);\n"
    assert preprocess(raw) == f"{UB}use(v1);\nMGATHER(otherTile, tableGlobal, idxTile);\nuse(v1b);\n"


def test_mgather_each_call_line_once():
    raw = (f"{UB}{GM}{IDX}MGATHER(v1, v2, v3);\n"
           "__ubuf__ float* w1 = a.data();\n__ubuf__ float* w2 = b.data();\n__ubuf__ float* w3 = c.data();\n"
           "MGATHER(w1, w2, w3);\n")
    assert preprocess(raw) == "MGATHER(dstTile, tableGlobal, idxTile);\nMGATHER(a, b, c);\n"


# ---------------------------------------------------------------------------
# function names and targets (reference 5.5)
# ---------------------------------------------------------------------------


def test_function_names_in_order_without_duplicates():
    raw = ('#include "pto/pto-inst.hpp"\n'
           "AICORE void k_aiv(__gm__ float* a);\n"  # forward declaration
           'extern "C" __global__ AICORE void k_aic (int x)\n{\n}\n'
           "AICORE inline float helper(float x) { return x; }\n"
           "__global__   AICORE\nvoid\tk_aiv(__gm__ float* a)\n{\n}\n"
           "static AICORE void local_helper()\n{}\n"
           "AICORE void\n")
    assert function_names(raw) == ["k_aiv", "k_aic", "local_helper"]
    assert function_names("") == [] and function_names(preprocess(raw)) == []


def test_find_target_prefers_aic_then_aiv_regular_files(tmp_path):
    (tmp_path / "kernels" / "aic").mkdir(parents=True)
    (tmp_path / "kernels" / "aiv").mkdir(parents=True)
    assert find_target(tmp_path, "k") is None
    (tmp_path / "kernels" / "aiv" / "k.cpp").write_text("v")
    assert find_target(tmp_path, "k") == tmp_path / "kernels" / "aiv" / "k.cpp"
    (tmp_path / "kernels" / "aic" / "k.cpp").write_text("c")
    assert find_target(tmp_path, "k") == tmp_path / "kernels" / "aic" / "k.cpp"
    (tmp_path / "kernels" / "aic" / "d.cpp").mkdir()  # not a regular file
    (tmp_path / "kernels" / "aiv" / "d.cpp").write_text("v")
    assert find_target(tmp_path, "d") == tmp_path / "kernels" / "aiv" / "d.cpp"
    os.symlink(tmp_path / "kernels" / "aiv" / "d.cpp", tmp_path / "kernels" / "aic" / "s.cpp")
    assert find_target(tmp_path, "s") == tmp_path / "kernels" / "aic" / "s.cpp"
    for odd in ("", ".", "..", "../aiv/k", "a\0b", "x" * 5000):
        assert find_target(tmp_path, odd) is None


# ---------------------------------------------------------------------------
# split / splice
# ---------------------------------------------------------------------------


def test_round_trip_on_every_generated_wrapper(tmp_path):
    roots = [synth.write_l2(tmp_path / "l2", kernels=5, pto=True),
             synth.write_l2(tmp_path / "one", kernels=1, pto=True, header_every=1)]
    l3 = synth.write_l3(tmp_path / "l3", chips=("x", "y"), kernels=3, pto=True)
    roots += [l3 / "next_levels" / "x", l3 / "next_levels" / "y"]
    for root in roots:
        wrappers = sorted(root.glob("kernels/*/*.cpp"))
        assert wrappers
        for path in wrappers:
            text = path.read_text()
            head, body, tail = split(text, str(path))
            assert head + "\n" + body + "\n" + tail == text
            assert splice(text, body, str(path)) == text


def test_splicing_each_units_preprocessed_output_reproduces_the_wrappers(tmp_path):
    root = synth.write_l2(tmp_path / "b", kernels=4, pto=True)
    assert synth.pto_units(root) == ["main_group", "main_incore_2_aic", "main_incore_3_aiv"]
    spliced = []
    for unit, raw, targets in units_and_targets(root):
        body = preprocess(raw)
        for target in targets:
            text = target.read_bytes().decode()
            assert splice(text, body, str(target)).encode() == target.read_bytes(), (unit, target)
            spliced.append(target.stem)
    assert sorted(spliced) == [synth.kernel_name("main", k) for k in range(4)]
    group = (root / "ptoas" / "main_group.cpp").read_text()
    assert function_names(group) == ["main_incore_1_aiv", "main_incore_0_aic"]


def test_edits_outside_the_body_survive_a_splice(tmp_path):
    root = synth.write_l2(tmp_path / "b", kernels=2, pto=True)
    path = synth.kernel_path(root, 1)
    original = path.read_text()
    head, _body, tail = split(original, str(path))
    head = head.replace("using namespace pto;", "using namespace pto;\n// user header edit\t ")
    tail = tail.replace("    // Forward to", "    int user_edit = 0;  \r\n    // Forward to")
    edited = f"{head}\n// old body\n{tail}"
    new_body = "static __aicore__ void f()\n{\n}\n"
    out = splice(edited, new_body, str(path))
    assert out == f"{head}\n{new_body}\n{tail}"
    assert split(out, str(path)) == (head, new_body, tail)


@pytest.mark.parametrize("text, says", [
    ("", NEITHER),
    ("no sentinels at all\n", NEITHER),
    (f"{BEGIN}\nbody\n", GONE.format(END)),
    (f"body\n{END}\n", GONE.format(BEGIN)),
    (f"{END}\nbody\n{BEGIN}\n", ORDER),
    (f"{END}\n{BEGIN}\nbody\n{END}\n", ORDER),  # first END precedes first BEGIN
    (f"{BEGIN[:-1]}\nbody\n{END}\n", GONE.format(BEGIN)),
])
def test_missing_or_out_of_order_sentinels(text, says):
    """Each says which sentinel line is missing (or out of order), and how to restore it (issue 33 item 7)."""
    for call in (lambda: split(text, "kernels/aiv/k.cpp"), lambda: splice(text, "b", "kernels/aiv/k.cpp")):
        with pytest.raises(SpliceError) as info:
            call()
        message = str(info.value)
        assert message.startswith(f"kernels/aiv/k.cpp: {says}"), message
        assert "; restore " in message and message.endswith("or recompile via ir.compile() to regenerate the kernel")
        assert "predates" not in message and "\n" not in message
        assert isinstance(info.value, PyptoBuildError)


def test_a_body_containing_the_end_sentinel_is_refused():
    text = f"{BEGIN}\nold\n{END}\n"
    with pytest.raises(SpliceError, match="contains the sentinel"):
        splice(text, f"x\n{END}\ny", "k.cpp")
    assert splice(text, f"x\n{BEGIN}\ny", "k.cpp") == f"{BEGIN}\nx\n{BEGIN}\ny\n{END}\n"


def test_split_framing_edge_cases():
    assert split(f"h{BEGIN}{END}t", "p") == (f"h{BEGIN}", "", f"{END}t")
    assert split(f"{BEGIN}\n{END}", "p") == (BEGIN, "", END)
    assert split(f"{BEGIN}\n\n{END}", "p") == (BEGIN, "", END)
    assert split(f"{BEGIN}\nx{END}", "p") == (BEGIN, "x", END)
    assert split(f"{BEGIN}\n{BEGIN}\n{END}\n{END}", "p") == (BEGIN, BEGIN, f"{END}\n{END}")
    # The round trip needs the region to start and end with its own "\n"; else splice normalises it.
    assert splice(f"{BEGIN}\n{END}", "", "p") == f"{BEGIN}\n\n{END}"
    crlf = f"{BEGIN}\r\nx\r\n{END}"
    assert split(crlf, "p")[1] == "\r\nx\r" and splice(crlf, "\r\nx\r", "p") == f"{BEGIN}\n\r\nx\r\n{END}"


# ---------------------------------------------------------------------------
# signature_of
# ---------------------------------------------------------------------------

BODY = """\
static __aicore__ void k(int x);  // forward declaration, different parameters
// static __aicore__ void k(float commented) { }
/* static __aicore__ void k(float block) { } */
static __aicore__ void k_other(__gm__ float* z)
{
    const char* s = "static __aicore__ void k(bogus) {";
    char c = '(';
}
static __aicore__ void k(__gm__ float *a ,
                          __gm__ float * out, /* count */ int64_t   n,
                          const GlobalTensor< float, Shape< 1, 16 > > &g, void (*cb)(int, const char*) = nullptr)
  // comment between ) and {
{
    const char* s = "static __aicore__ void k(bogus) {";
}
"""


def test_signature_of_definition_skips_declarations_and_comments():
    assert signature_of(BODY, "k") == ("__gm__ float*a, __gm__ float*out, int64_t n, "
                                       "const GlobalTensor<float, Shape<1, 16>>&g, void(*cb)(int, const char*)=nullptr")
    assert signature_of(BODY, "k_other") == "__gm__ float*z"
    assert signature_of(BODY, "k_") is None and signature_of(BODY, "missing") is None and signature_of(BODY, "") is None
    assert signature_of("static __aicore__ void k(int x);\n", "k") is None
    assert signature_of("static __aicore__ void k(int x\n{\n", "k") is None
    assert signature_of("static __aicore__ void k() {}", "k") == ""
    assert signature_of("static __aicore__ void k((int x;\nstatic __aicore__ void k(int y) {}", "k") == "int y"
    assert signature_of('static __aicore__ void k(const char* s = ")") {}', "k") == 'const char*s=")"'


def test_signature_change_is_detected(tmp_path):
    root = synth.write_l2(tmp_path / "b", kernels=3, pto=True)
    for _unit, raw, targets in units_and_targets(root):
        body = preprocess(raw)
        for target in targets:
            wrapper_body = split(target.read_text(), str(target))[1]
            expected = "__gm__ float*a, __gm__ float*out, int64_t n"
            assert signature_of(body, target.stem) == signature_of(wrapper_body, target.stem) == expected
            reformatted = body.replace("__gm__ float* out, int64_t n", "__gm__ float  *out,\n   int64_t n /* n */")
            assert signature_of(reformatted, target.stem) == expected
            changed = body.replace("int64_t n)", "int32_t n)")
            assert signature_of(changed, target.stem) not in (None, expected)
            added = body.replace("int64_t n)", "int64_t n, int64_t m)")
            assert signature_of(added, target.stem) != expected


# ---------------------------------------------------------------------------
# pto=True builds still compute the same result
# ---------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ on PATH: kernels cannot be compiled")
def test_group_member_kernels_compute_as_before(tmp_path):
    from test_synth import call_kernel, compile_kernel
    sub = synth.write_l2(tmp_path / "b", kernels=3, pto=True)
    a, out = [1.0, 2.0, -3.0, 0.25], [10.0, 20.0, 30.0, 40.0]
    so0 = compile_kernel(sub, synth.kernel_path(sub, 0), "k0.so", ["-D__DAV_CUBE__"])
    so1 = compile_kernel(sub, synth.kernel_path(sub, 1), "k1.so", ["-D__DAV_VEC__"])
    so2 = compile_kernel(sub, synth.kernel_path(sub, 2), "k2.so", ["-D__DAV_CUBE__"])
    assert call_kernel(so0, a, out) == a
    assert call_kernel(so1, a, out) == [o * 0.5 + x * 2.0 for x, o in zip(a, out)]
    assert call_kernel(so2, a, out) == [o * 0.5 + x * 3.0 for x, o in zip(a, out)]


def test_pto_option_passes_through_l3_and_multi_orch(tmp_path):
    l3 = synth.write_l3(tmp_path / "l3", chips=("c",), kernels=1, pto=True)
    assert synth.pto_units(l3 / "next_levels" / "c") == ["c_incore_0_aic"]
    assert synth.pto_path(l3 / "next_levels" / "c", "c_incore_0_aic").is_file()
    multi = synth.write_multi_orch(tmp_path / "m", orchs=("p", "q"), kernels=2, pto=True)
    assert [synth.pto_units(multi / "next_levels" / o) for o in ("p", "q")] == [["p_group"], ["q_group"]]
    assert synth.pto_units(synth.write_l2(tmp_path / "plain", kernels=2)) == []
    assert not (tmp_path / "plain" / "ptoas").exists()


# ---------------------------------------------------------------------------
# fuzzing: any text either works or raises SpliceError
# ---------------------------------------------------------------------------

TOKENS = [BEGIN, END, "\n", "\r\n", " ", "(", ")", "{", "}", ";", ",", "*", "&", "//", "/*", "*/", '"', "'", "\\",
          "MGATHER", "MGATHER<T>(", "__ubuf__ float* ", "__gm__ float* ", "(__gm__ float*)", ".data();", " = ",
          "v1", "v2", "v3", "w", "Tensor", "AICORE", "void", "static __aicore__ void ", "k", "extern \"C\" ",
          "__global__ ", "#include <cstdint>", "using namespace pto;", "set_ffts_base_addr(", "\u2028", "\x85"]
texts = st.one_of(st.text(), st.lists(st.sampled_from(TOKENS) | st.text(max_size=3), max_size=40).map("".join))


def _works_or_splice_error(call):
    try:
        return call()
    except SpliceError:
        return None


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(texts)
def test_fuzz_preprocess(raw):
    assert isinstance(preprocess(raw), str)
    assert all(isinstance(n, str) for n in function_names(raw))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(texts, texts)
def test_fuzz_split_and_splice(text, body):
    parts = _works_or_splice_error(lambda: split(text, "p"))
    if parts is None:
        return
    head, old, tail = parts
    out = _works_or_splice_error(lambda: splice(text, body, "p"))
    assert out == (None if END in body else f"{head}\n{body}\n{tail}")
    middle = text[len(head):len(text) - len(tail)]
    if len(middle) >= 2 and middle[0] == "\n" and middle[-1] == "\n":
        assert splice(text, old, "p") == text


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(texts, st.sampled_from(["k", "v1", "", "w", "k(", ".*"]))
def test_fuzz_signature_of(body, name):
    result = _works_or_splice_error(lambda: signature_of(body, name))
    assert result is None or isinstance(result, str)
