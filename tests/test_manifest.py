"""Tests for pypto_build.builddir.manifest: reading kernel_config.py without executing it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pypto_build.errors import ManifestError
from pypto_build.builddir.manifest import KernelConfig, KernelSpec, parse_kernel_config, read_kernel_config

P = Path("/build/sub/kernel_config.py")

# Section 2.4, exactly as the generator writes it (TAB indentation).
EXAMPLE = """# Kernel and Orchestration Configuration

from pathlib import Path

from simpler.task_interface import ArgDirection as _D

_ROOT_DIR = Path(__file__).parent

# Runtime configuration for tensormap_and_ringbuffer.
# AICPU thread count 0 selects the runtime's architecture default (a2a3: 4; a5: 5).
RUNTIME_CONFIG = {
\t"runtime": "tensormap_and_ringbuffer",
\t"aicpu_thread_num": 0,
}

ORCHESTRATION = {
\t"source": str(_ROOT_DIR / "orchestration" / "main.cpp"),
\t"function_name": "aicpu_orchestration_entry",
\t"signature": [_D.IN, _D.IN, _D.OUT],
}

KERNELS = [
\t{"func_id": 0, "name": "main_incore_0_aic", "source": str(_ROOT_DIR / "kernels" / "aic" / "main_incore_0_aic.cpp"), "core_type": "aic", "signature": [_D.IN, _D.IN, _D.INOUT]},
\t{"func_id": 1, "name": "main_incore_0_aiv", "source": str(_ROOT_DIR / "kernels" / "aiv" / "main_incore_0_aiv.cpp"), "core_type": "aiv", "signature": [_D.IN, _D.OUT]},
]
"""

# The builtin-collective template style (multi-line, 4 spaces), rendered.
BUILTIN = """# Kernel and Orchestration Configuration
from pathlib import Path

from simpler.task_interface import ArgDirection as _D

_ROOT_DIR = Path(__file__).parent

RUNTIME_CONFIG = {
    "runtime": "tensormap_and_ringbuffer",
    "aicpu_thread_num": 4,
    "block_dim": 1,
}

ORCHESTRATION = {
    "source": str(_ROOT_DIR / "orchestration" / "allgather_entry.cpp"),
    "function_name": "aicpu_orchestration_entry",
    "signature": [_D.IN, _D.INOUT, _D.INOUT],
}

KERNELS = [
    {
        "func_id": 0,
        "name": "allgather_entry_kernel",
        "source": str(_ROOT_DIR / "kernels" / "aiv" / "allgather_entry_kernel.cpp"),
        "core_type": "aiv",
        "signature": [_D.IN, _D.INOUT, _D.INOUT],
    },
]
"""

HEAD = ("from pathlib import Path\nfrom simpler.task_interface import ArgDirection as _D\n"
        "_ROOT_DIR = Path(__file__).parent\n")
ORCH = 'ORCHESTRATION = {"source": str(_ROOT_DIR / "orchestration" / "o.cpp"), "function_name": "f"}\n'
K_OK = '{"func_id": 0, "source": str(_ROOT_DIR / "k.cpp"), "core_type": "aiv"}'
MSG_RE = re.compile(r"^(?P<path>.+):(?P<line>\d+): (?P<what>.+); expected (?P<exp>.+)\. (?P<fix>.+)$")


def kernels(*entries: str) -> str:
    return HEAD + ORCH + "KERNELS = [\n" + "".join(f"    {e},\n" for e in entries) + "]\n"


def fail(text: str, path: Path = P) -> re.Match:
    """Parse `text`, expect one ManifestError in the documented one-line shape."""
    with pytest.raises(ManifestError) as info:
        parse_kernel_config(text, path)
    msg = str(info.value)
    assert "\n" not in msg
    match = MSG_RE.match(msg)
    assert match, msg
    assert match["path"] == str(path)
    return match


def test_example_2_4() -> None:
    cfg = parse_kernel_config(EXAMPLE, P)
    assert isinstance(cfg, KernelConfig) and cfg.path == P
    assert cfg.runtime_config == {"runtime": "tensormap_and_ringbuffer", "aicpu_thread_num": 0}
    assert cfg.runtime_name == "tensormap_and_ringbuffer"
    o = cfg.orchestration
    assert (o.source, o.rooted, o.function_name, o.signature, o.line) == (
        "orchestration/main.cpp", True, "aicpu_orchestration_entry", ("IN", "IN", "OUT"), 16)
    assert cfg.kernels == (
        KernelSpec(0, "main_incore_0_aic", "kernels/aic/main_incore_0_aic.cpp", True, "aic",
                   ("IN", "IN", "INOUT"), False, (), 23),
        KernelSpec(1, "main_incore_0_aiv", "kernels/aiv/main_incore_0_aiv.cpp", True, "aiv",
                   ("IN", "OUT"), False, (), 24),
    )


def test_read_from_disk_and_four_space_indent(tmp_path: Path) -> None:
    f = tmp_path / "kernel_config.py"
    f.write_text(EXAMPLE.replace("\t", "    "), encoding="utf-8")
    cfg = read_kernel_config(f)
    assert cfg.path == f and [k.func_id for k in cfg.kernels] == [0, 1]


def test_builtin_multiline_style() -> None:
    cfg = parse_kernel_config(BUILTIN, P)
    assert cfg.runtime_config["aicpu_thread_num"] == 4 and cfg.runtime_config["block_dim"] == 1
    (k,) = cfg.kernels
    assert (k.func_id, k.name, k.source, k.rooted, k.core_type, k.signature, k.line) == (
        0, "allgather_entry_kernel", "kernels/aiv/allgather_entry_kernel.cpp", True, "aiv",
        ("IN", "INOUT", "INOUT"), 21)
    assert cfg.orchestration.signature == ("IN", "INOUT", "INOUT")


def test_external_kernel_and_sorting() -> None:
    text = kernels(
        '{"func_id": 2, "name": "my_gemm", "source": \'/abs/path/my_gemm.cpp\', "core_type": "aic", '
        '"external": True, "extra_include_dirs": [\'/abs/inc\', str(_ROOT_DIR / "inc")], "signature": [_D.IN, _D.OUT]}',
        K_OK,
    )
    cfg = parse_kernel_config(text, P)
    assert [k.func_id for k in cfg.kernels] == [0, 2]  # sorted by func_id
    ext = cfg.kernels[1]
    assert (ext.source, ext.rooted, ext.external, ext.signature) == (
        "/abs/path/my_gemm.cpp", False, True, ("IN", "OUT"))
    assert ext.extra_include_dirs == ("/abs/inc", "inc")  # rooted include dirs: relative to the file's dir
    assert cfg.kernels[0].external is False and cfg.kernels[0].name is None


def test_hand_edit_forms() -> None:
    text = (
        '"""doc"""\nimport os\nfrom pathlib import Path\nfrom simpler.task_interface import ArgDirection\n'
        "_ROOT_DIR = Path(__file__).parent\nOTHER = os.environ.get('X')\nVERSION = 3\n"
        'ORCHESTRATION: dict = {"source": "/abs/orch.cpp", "function_name": "f", "signature": []}\n'
        "KERNELS: list = [\n"
        '  {"func_id": 0, "source": str(_ROOT_DIR / "kernels/aiv/a.cpp"), "core_type": "aiv", "x-note": [1, "y"]},\n'
        '  {"func_id": 1, "source": _ROOT_DIR / "kernels" / "aic" / "b.cpp", "core_type": "aic",'
        ' "signature": (ArgDirection.IN, ArgDirection.INOUT)},\n'
        '  {"func_id": 2, "source": str(Path(__file__).parent / "c.cpp"), "core_type": "aiv", "name": "c"},\n'
        "]\n"
    )
    cfg = parse_kernel_config(text, P)
    assert cfg.runtime_config == {} and cfg.runtime_name == "tensormap_and_ringbuffer"
    o = cfg.orchestration
    assert (o.source, o.rooted, o.signature) == ("/abs/orch.cpp", False, ())
    assert [(k.source, k.rooted) for k in cfg.kernels] == [
        ("kernels/aiv/a.cpp", True), ("kernels/aic/b.cpp", True), ("c.cpp", True)]
    assert cfg.kernels[1].signature == ("IN", "INOUT")


def test_runtime_name_from_config() -> None:
    text = EXAMPLE.replace('"runtime": "tensormap_and_ringbuffer"', '"runtime": "host_build_graph"')
    assert parse_kernel_config(text, P).runtime_name == "host_build_graph"


ERRORS = [
    # (name, text, line, substring of the message)
    ("syntax", HEAD + ORCH + "KERNELS = [\n  {\n\n", 6, "syntax error"),
    ("indent", HEAD + "  x = 1\n", 4, "syntax error"),
    ("no_kernels", HEAD + ORCH, 1, "KERNELS is not defined"),
    ("no_orch", HEAD + "KERNELS = []\n", 1, "ORCHESTRATION is not defined"),
    ("kernels_dict", HEAD + ORCH + "KERNELS = {}\n", 5, "KERNELS is not a list"),
    ("entry_not_dict", kernels(K_OK, "[1, 2]"), 7, "KERNELS[1] is not a dict"),
    ("no_func_id", kernels('{"source": "/a.cpp", "core_type": "aic"}'), 6, '"func_id"'),
    ("no_source", kernels('{"func_id": 0, "core_type": "aic"}'), 6, '"source"'),
    ("no_core_type", kernels('{"func_id": 0, "source": "/a.cpp"}'), 6, '"core_type"'),
    ("orch_no_source", HEAD + 'ORCHESTRATION = {"function_name": "f"}\nKERNELS = []\n', 4, '"source"'),
    ("orch_no_fn", HEAD + 'ORCHESTRATION = {"source": "/o.cpp"}\nKERNELS = []\n', 4, '"function_name"'),
    ("orch_not_dict", HEAD + "ORCHESTRATION = []\nKERNELS = []\n", 4, "ORCHESTRATION is not a dict"),
    ("func_id_bool", kernels('{"func_id": True, "source": "/a.cpp", "core_type": "aic"}'), 6, "func_id"),
    ("func_id_neg", kernels('{"func_id": -1, "source": "/a.cpp", "core_type": "aic"}'), 6, ">= 0"),
    ("func_id_str", kernels('{"func_id": "0", "source": "/a.cpp", "core_type": "aic"}'), 6, "func_id"),
    ("core_type", kernels('{"func_id": 0, "source": "/a.cpp", "core_type": "cube"}'), 6, "core_type"),
    ("name_type", kernels('{"func_id": 0, "name": 3, "source": "/a.cpp", "core_type": "aic"}'), 6, "name"),
    ("external_type", kernels('{"func_id": 0, "source": "/a.cpp", "core_type": "aic", "external": 1}'), 6, "external"),
    ("incl_not_list", kernels('{"func_id": 0, "source": "/a.cpp", "core_type": "aic", "extra_include_dirs": "/i"}'),
     6, "extra_include_dirs"),
    ("incl_bad_item", kernels('{"func_id": 0, "source": "/a.cpp", "core_type": "aic", "extra_include_dirs": [1]}'),
     6, "extra_include_dirs"),
    ("sig_not_list", kernels('{"func_id": 0, "source": "/a.cpp", "core_type": "aic", "signature": _D.IN}'),
     6, "signature"),
    ("unknown_dir", kernels('{"func_id": 0, "source": "/a.cpp", "core_type": "aic", "signature": [_D.IN, _D.SCALAR]}'),
     6, "unknown direction _D.SCALAR"),
    ("sig_string", kernels('{"func_id": 0, "source": "/a.cpp", "core_type": "aic", "signature": ["IN"]}'),
     6, "signature"),
    ("call", kernels('{"func_id": len("ab"), "source": "/a.cpp", "core_type": "aic"}'), 6, "function call"),
    ("name", kernels('{"func_id": FID, "source": "/a.cpp", "core_type": "aic"}'), 6, "(name)"),
    ("fstring", kernels('{"func_id": 0, "source": f"/{x}.cpp", "core_type": "aic"}'), 6, "f-string"),
    ("comprehension", kernels('{"func_id": 0, "source": "/a.cpp", "core_type": "aic", "extra": [i for i in "ab"]}'),
     6, "comprehension"),
    ("arith", kernels('{"func_id": 1 + 1, "source": "/a.cpp", "core_type": "aic"}'), 6, "operator"),
    ("unknown_key_call", kernels('{"func_id": 0, "source": "/a.cpp", "core_type": "aic", "x": print(1)}'),
     6, "function call"),
    ("empty_source", kernels('{"func_id": 0, "source": "", "core_type": "aic"}'), 6, "empty path"),
    ("root_only", kernels('{"func_id": 0, "source": str(_ROOT_DIR), "core_type": "aic"}'), 6, "empty path"),
    ("no_root_dir", "from pathlib import Path\n" + ORCH + "KERNELS = []\n", 2, "_ROOT_DIR"),
    ("root_redefined", HEAD + '_ROOT_DIR = Path("/elsewhere")\n' + ORCH + "KERNELS = []\n", 5, "_ROOT_DIR"),
    ("dup_key", kernels('{"func_id": 0, "func_id": 1, "source": "/a.cpp", "core_type": "aic"}'), 6, "duplicate key"),
    ("star_unpack", kernels('{**BASE, "func_id": 0}'), 6, "unpacking"),
    ("runtime_not_dict", HEAD + ORCH + "RUNTIME_CONFIG = []\nKERNELS = []\n", 5, "RUNTIME_CONFIG"),
    ("runtime_call", HEAD + ORCH + 'RUNTIME_CONFIG = {"runtime": get()}\nKERNELS = []\n', 5, "function call"),
    ("runtime_value", HEAD + ORCH + 'RUNTIME_CONFIG = {\n "runtime": 5}\nKERNELS = []\n', 6, "runtime"),
    ("mutated", kernels(K_OK) + 'KERNELS.append({"func_id": 9})\n', 8, "outside its assignment"),
    ("augassign", kernels(K_OK) + "KERNELS += []\n", 8, "outside its assignment"),
    ("reassigned", kernels(K_OK) + "KERNELS = []\n", 8, "second time"),
    ("no_value", HEAD + ORCH + "KERNELS: list\n", 5, "without a value"),
    ("def_rebind", kernels(K_OK) + "def KERNELS():\n    pass\n", 8, "def/class"),
    ("import_rebind", kernels(K_OK) + "from elsewhere import KERNELS\n", 8, "import"),
    ("bytes", kernels('{"func_id": 0, "source": b"/a.cpp", "core_type": "aic"}'), 6, "source"),
]


@pytest.mark.parametrize("text,line,needle", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors(text: str, line: int, needle: str) -> None:
    m = fail(text)
    assert int(m["line"]) == line, m.group(0)
    assert needle in m.group(0)


def test_error_fix_hint() -> None:
    m = fail(kernels('{"func_id": 0, "source": "/a.cpp", "core_type": "cube"}'))
    assert m["fix"] == "Fix the entry by hand or recompile via ir.compile() to regenerate kernel_config.py"
    assert '"aic" or "aiv"' in m["exp"]


def test_duplicate_func_id_names_both_lines() -> None:
    m = fail(kernels(K_OK, '{"func_id": 1, "source": "/b.cpp", "core_type": "aic"}', K_OK))
    assert int(m["line"]) == 8 and "line 6" in m["what"] and "duplicate func_id 0" in m["what"]


def test_multiline_error_points_at_value_line() -> None:
    text = BUILTIN.replace('"core_type": "aiv",\n', '"core_type": "vec",\n')
    assert int(fail(text)["line"]) == 25


def test_no_execution(tmp_path: Path) -> None:
    marker1, marker2 = tmp_path / "opened", tmp_path / "system"
    text = (
        f"import os\nopen({str(marker1)!r}, 'w').write('x')\nos.system('touch {marker2}')\n"
        f"raise SystemExit(1)\n" + EXAMPLE
    )
    f = tmp_path / "kernel_config.py"
    f.write_text(text, encoding="utf-8")
    cfg = read_kernel_config(f)
    assert not marker1.exists() and not marker2.exists()
    assert [k.name for k in cfg.kernels] == ["main_incore_0_aic", "main_incore_0_aiv"]


def test_not_utf8(tmp_path: Path) -> None:
    f = tmp_path / "kernel_config.py"
    f.write_bytes(b"# ok\nKERNELS = ['\xff\xfe']\n")
    m = fail_read(f)
    assert int(m["line"]) == 2 and "UTF-8" in m["what"]


def test_unreadable(tmp_path: Path) -> None:
    m = fail_read(tmp_path)  # a directory cannot be read as a file
    assert "cannot be read" in m["what"]
    m = fail_read(tmp_path / "missing.py")
    assert "cannot be read" in m["what"]


def fail_read(path: Path) -> re.Match:
    with pytest.raises(ManifestError) as info:
        read_kernel_config(path)
    match = MSG_RE.match(str(info.value))
    assert match and match["path"] == str(path), str(info.value)
    return match


@pytest.mark.parametrize("text,line", [
    ("a = 1\nb\x00 = 2\n", 2),
    ("x = " + "(" * 300 + ")" * 300 + "\n", 1),
    ("x = " + "[" * 100_000, 1),
    ("x = " + "-" * 100_000 + "1\n", 1),
    ("x = 1" + " + 1" * 30_000 + "\n" + HEAD + ORCH + "KERNELS = []\n", 1),
    (kernels('{"func_id": 0, "source": str(_ROOT_DIR' + ' / "a"' * 30_000 + '), "core_type": "aic"}'), 1),
])
def test_hostile_input(text: str, line: int) -> None:
    assert int(fail(text)["line"]) == line


def test_deep_but_legal_literal() -> None:
    expected: list = []
    for _ in range(89):
        expected = [expected]
    deep = "[" * 90 + "]" * 90
    cfg = parse_kernel_config(HEAD + ORCH + f"RUNTIME_CONFIG = {{'a': {deep}}}\nKERNELS = []\n", P)
    assert cfg.runtime_config["a"] == expected and cfg.kernels == ()


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_fuzz_random_text(text: str) -> None:
    try:
        parse_kernel_config(text, P)
    except ManifestError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(f"{P}:")


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(EXAMPLE.splitlines() + BUILTIN.splitlines() + [
    "_ROOT_DIR = 3", "KERNELS = [", "{", "}", "]", "\t{**x},", '"x": _D.FOO,', "\x00", "'''"]), max_size=40),
    st.integers(0, 50), st.text(max_size=5))
def test_fuzz_recombined_lines(lines: list[str], pos: int, junk: str) -> None:
    text = "\n".join(lines)
    text = text[:pos] + junk + text[pos:]
    try:
        cfg = parse_kernel_config(text, P)
    except ManifestError as exc:
        assert "\n" not in str(exc) and MSG_RE.match(str(exc))
    else:
        assert all(k.core_type in ("aic", "aiv") and k.func_id >= 0 for k in cfg.kernels)
