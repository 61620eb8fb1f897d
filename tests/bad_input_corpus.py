"""The bad-input corpus: broken build directories, each a recipe applied to a fresh copy of a
small generated directory, with the command to run and what its one line must say.

Used by tests/test_bad_input.py (which runs and checks every case); how each copy is broken is
`bad_input_breaks.py`.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pypto_build.testing import fake_ptoas

from bad_input_breaks import (BEGIN, END, append, chain, compile_error, corrupt_state, delete, edit_json, empty_dir, fifo,
                             file_not_dir, golden, HOST_STATE_DB, K1, kc, KERNEL1, missing_dir,
                             orch_compile_error, pad_huge, parent_of_two, prepend, pto_edit, RAW, raw_edit_and,
                             replace, reverse_sentinels, set_dconfig, set_meta, set_param, STATE, truncate,
                             truncate_state, write, history, HISTORY, DEEP, report_file, link_loop, make_dir)

FAKE_PTOAS = str(Path(fake_ptoas.__file__).resolve())

# Every message says how to fix the problem; these are the remedies the tool's messages use.
FIX_RE = re.compile(r"recompile via ir\.compile\(\)|replay one of"
                    r"|\b(fix|restore|remove|add|pass|raise|check|replace|set|unset|free|copy|install) ", re.IGNORECASE)


# ---------------------------------------------------------------------------
# the corpus
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One broken directory: how to break it, how to run it, what the one line must say."""

    name: str
    base: str                                   # pristine dir: "l2" (pto, golden, built), "l3", "multi"
    breaks: Callable[[Path], Path | None]       # mutate the copy; may return the path to pass instead
    verb: str                                   # build | replay | validate | explain | history | ci | ci-report
    file: str                                   # the line names this file (substring)
    what: str                                   # ... and says this is wrong (regex)
    planning: bool = True                       # refused before anything runs: state folder untouched too
    args: tuple[str, ...] = ()
    env: dict = field(default_factory=dict)
    python: str = ""                            # "no_run_extra" / "no_simpler": `python -m pypto_build` of a Python
                                                # without torch / simpler
    status: int | None = None                   # the exit status it must be (None: any failure)


def _meta_cases() -> list[Case]:
    meta, v = "compiled_meta.json", "validate"
    return [
        Case("meta_truncated", "l2", lambda d: truncate(d / meta), "replay", meta, r"not valid JSON"),
        Case("meta_empty", "l2", write(meta, ""), v, meta, r"not valid JSON"),
        Case("meta_not_json", "l2", write(meta, "schema: 1\n"), v, meta, r"not valid JSON"),
        Case("meta_not_utf8", "l2", write(meta, b'{"schema": 1, "params": [], "x": "\xff\xfe"}'), v, meta,
             r"not valid UTF-8"),
        Case("meta_not_object", "l2", write(meta, "[1, 2]"), v, meta, r"expected a JSON object"),
        Case("meta_schema_wrong", "l2", set_meta("schema", 2), v, meta, r"schema 2 \(expected 1\)"),
        Case("meta_schema_missing", "l2", lambda d: edit_json(d / meta, lambda m: m.pop("schema")), v, meta,
             r"schema None \(expected 1\)"),
        Case("meta_params_not_list", "l2", set_meta("params", {"a": 1}), v, meta, r"params: must be a list"),
        Case("meta_param_not_object", "l2",
             lambda d: edit_json(d / meta, lambda m: m["params"].__setitem__(0, "a")), v, meta,
             r"params\[0\]: must be an object"),
        Case("meta_param_name", "l2", set_param(0, "name", 7), v, meta, r"params\[0\]\.name: must be a string"),
        Case("meta_param_missing_key", "l2",
             lambda d: edit_json(d / meta, lambda m: m["params"][1].pop("direction")), v, meta,
             r"params\[1\]\.direction: missing required key"),
        Case("meta_param_direction", "l2", set_param(1, "direction", "Sideways"), "replay", meta,
             r"params\[1\]\.direction: must be one of"),
        Case("meta_param_shape", "l2", set_param(0, "shape", "16"), v, meta, r"params\[0\]\.shape: must be null or"),
        Case("meta_param_dtype_unknown", "l2", set_param(0, "dtype", "fp33"), v, meta,
             r"params\[0\]\.dtype: unknown DataType string 'fp33'"),
        Case("meta_param_dtype_type", "l2", set_param(1, "dtype", 32), v, meta,
             r"params\[1\]\.dtype: must be a string"),
        Case("meta_num_return_types", "l2", set_meta("num_return_types", -1), v, meta,
             r"num_return_types: must be a non-negative integer"),
        Case("meta_platform", "l2", set_meta("platform", ["a2a3sim"]), v, meta, r"platform: must be a string"),
        Case("meta_backend_type", "l2", set_meta("backend_type", "Ascend999"), v, meta,
             r"backend_type: must be one of"),
        Case("meta_huge", "l2", pad_huge(meta), v, meta, r"is 65\.0 MiB, over the 16 MiB limit"),
    ]


def _platform_sidecar_cases() -> list[Case]:
    """A damaged sidecar is refused by every verb that reads the platform, never read as "no platform recorded"
    (a silent switch to host; issue 22 item 5). The l2 copy is built: the no-op record must not answer either."""
    meta, dmeta, sub = "compiled_meta.json", "distributed_meta.json", "next_levels/orch_a/compiled_meta.json"
    torn = lambda rel, keep=0.5: (lambda d: truncate(d / rel, keep))    # noqa: E731
    return [
        Case("meta_truncated_build", "l2", torn(meta), "build", meta, r"not valid JSON"),
        Case("meta_truncated_build_platform", "l2", torn(meta), "build", meta, r"not valid JSON",
             args=("--platform", "host")),
        Case("meta_truncated_explain", "l2", torn(meta), "explain", meta, r"not valid JSON"),
        Case("meta_truncated_compdb", "l2", torn(meta), "compdb", meta, r"not valid JSON"),
        Case("meta_truncated_watch", "l2", torn(meta), "watch", meta, r"not valid JSON"),
        Case("meta_empty_build", "l2", write(meta, ""), "build", meta, r"not valid JSON"),
        Case("meta_platform_type_build", "l2", set_meta("platform", ["a2a3sim"]), "build", meta,
             r"platform: must be a string"),
        Case("meta_params_type_explain", "l2", set_meta("params", "a, b"), "explain", meta, r"params: must be a list"),
        Case("fifo_compiled_meta_build", "l2", fifo(meta), "build", meta, r"is a FIFO \(named pipe\)"),
        Case("dmeta_truncated_build", "l3", torn(dmeta, 0.7), "build", dmeta, r"not valid JSON"),
        Case("multi_sub_meta_truncated_build", "multi", torn(sub), "build", sub, r"not valid JSON"),
    ]


def _dmeta_cases() -> list[Case]:
    dmeta, v = "distributed_meta.json", "validate"
    return [
        Case("dmeta_truncated", "l3", lambda d: truncate(d / dmeta, 0.7), "replay", dmeta, r"not valid JSON"),
        Case("dmeta_missing", "l3", delete(dmeta), v, dmeta, r"not found"),
        Case("dmeta_schema", "l3", lambda d: edit_json(d / dmeta, lambda m: m.__setitem__("schema", 1)), v, dmeta,
             r"schema 1 \(expected 2\)"),
        Case("dmeta_param_dtype", "l3",
             lambda d: edit_json(d / dmeta, lambda m: m["params"][0].__setitem__("dtype", "float")), v, dmeta,
             r"params\[0\]\.dtype: unknown DataType"),
        Case("dmeta_config_not_object", "l3",
             lambda d: edit_json(d / dmeta, lambda m: m.__setitem__("distributed_config", [0, 1])), v, dmeta,
             r"distributed_config: must be an object"),
        Case("dmeta_config_unknown_key", "l3", set_dconfig("devices", [0]), v, dmeta,
             r"unknown key\(s\) \['devices'\]"),
        Case("dmeta_device_ids_type", "l3", set_dconfig("device_ids", "0,1"), v, dmeta,
             r"device_ids: must be a list of ints"),
        Case("dmeta_device_ids_empty", "l3", set_dconfig("device_ids", []), v, dmeta, r"device_ids: must not be empty"),
        Case("dmeta_device_ids_duplicate", "l3", set_dconfig("device_ids", [0, 0]), v, dmeta,
             r"device_ids: must be distinct"),
        Case("dmeta_device_ids_negative", "l3", set_dconfig("device_ids", [-1, 0]), v, dmeta,
             r"device_ids: must be non-negative"),
        Case("dmeta_num_sub_workers", "l3", set_dconfig("num_sub_workers", "2"), v, dmeta,
             r"num_sub_workers: must be an int"),
        Case("dmeta_runtime", "l3", set_dconfig("runtime", 5), v, dmeta, r"runtime: must be a string"),
        Case("dmeta_aicpu_thread_num", "l3", set_dconfig("aicpu_thread_num", 1), v, dmeta,
             r"aicpu_thread_num: must be 0 \(architecture default\) or at least 2"),
    ]


def _kernel_config_cases() -> list[Case]:
    k, b = "kernel_config.py", "build"
    return [
        Case("kc_syntax_error", "l2", kc("KERNELS = [", "KERNELS = [[["), b, k, r"Python syntax error"),
        Case("kc_empty", "l2", write(k, ""), b, k, r"KERNELS is not defined"),
        Case("kc_not_utf8", "l2", append(k, b"# caf\xe9\n"), b, k, r"not valid UTF-8"),
        Case("kc_no_kernels", "l2", kc("KERNELS = [", "KERNEL_LIST = ["), b, k, r"KERNELS is not defined"),
        Case("kc_no_orchestration", "l2", kc("ORCHESTRATION = {", "ORCH = {"), b, k, r"ORCHESTRATION is not defined"),
        Case("kc_kernel_no_func_id", "l2", kc('{"func_id": 1, ', "{"), b, k, r'KERNELS\[1\] has no "func_id" key'),
        Case("kc_kernel_no_source", "l2", kc(K1 + ", ", ""), b, k, r'KERNELS\[1\] has no "source" key'),
        Case("kc_kernel_no_core_type", "l2", kc('"core_type": "aiv", ', ""), b, k, r'has no "core_type" key'),
        Case("kc_orch_no_source", "l2", kc('\t"source": str(_ROOT_DIR / "orchestration" / "main.cpp"),\n', ""), b, k,
             r'ORCHESTRATION has no "source" key'),
        Case("kc_orch_no_function_name", "l2", kc('\t"function_name": "aicpu_orchestration_entry",\n', ""), b, k,
             r'ORCHESTRATION has no "function_name" key'),
        Case("kc_func_id_type", "l2", kc('"func_id": 1,', '"func_id": "1",'), b, k,
             r"func_id\"\] is '1'; expected an int"),
        Case("kc_core_type_value", "l2", kc('"core_type": "aiv"', '"core_type": "vector"'), b, k,
             r"core_type\"\] is 'vector'; expected \"aic\" or \"aiv\""),
        Case("kc_kernels_not_list", "l2", chain(kc("KERNELS = [", "KERNELS = {0: ["), kc("},\n]", "},\n]}")), b, k,
             r"KERNELS is not a list literal"),
        Case("kc_signature_type", "l2", kc('"signature": [_D.IN, _D.INOUT]', '"signature": "in, inout"'), b, k,
             r"signature\"\] is not a list"),
        Case("kc_runtime_config_type", "l2", kc('"aicpu_thread_num": 0', '"aicpu_thread_num": "four"'), b, k,
             r'RUNTIME_CONFIG\["aicpu_thread_num"\] is \'four\''),
        Case("kc_duplicate_func_id", "l2", kc('"func_id": 1,', '"func_id": 0,'), b, k, r"duplicate func_id 0"),
        Case("kc_source_missing", "l2", kc('"main_incore_1_aiv.cpp")', '"main_incore_9_aiv.cpp")'), b, k,
             r"kernels/aiv/main_incore_9_aiv\.cpp.* does not exist"),
        Case("kc_orch_source_missing", "l2", delete("orchestration/main.cpp"), b, k,
             r"orchestration/main\.cpp.* does not exist"),
        Case("kc_l3_sub_build", "l3", kc("KERNELS = [", "KERNELS = [[", sub="next_levels/chip_b"), b,
             "next_levels/chip_b/kernel_config.py", r"Python syntax error"),
        Case("kc_huge", "l2", pad_huge(k, b"#"), b, k, r"is 65\.0 MiB, over the 16 MiB limit"),
    ]


# a damaged state database: remove that file, never the state folder (it holds the host binaries)
ONLY_DB = rf".*; remove \S+/{re.escape(STATE)}/state/host/state\.sqlite3 \(only that file: keep the rest of {re.escape(STATE)}/"


def _run_cases() -> list[Case]:
    """Cases that get past planning: a unit runs and fails (the state folder may change)."""
    pto = ("--ptoas", FAKE_PTOAS)
    return [
        # issue 33 item 7: the sentinel line deleted by hand is named, with where to restore it
        Case("sentinel_begin_missing", "l2", raw_edit_and(lambda t: t.replace(BEGIN, "// ptoas code")), "build",
             KERNEL1, rf"the sentinel line '{BEGIN}' is missing from this kernel .*; restore it on its own line just "
             "above the ptoas-generated code", planning=False),
        Case("sentinel_end_missing", "l2", raw_edit_and(lambda t: t.replace(END, "// entry")), "build", KERNEL1,
             rf"the sentinel line '{END}' is missing from this kernel .*; restore it on its own line just above the "
             "kernel entry point", planning=False),
        Case("sentinels_reversed", "l2", raw_edit_and(reverse_sentinels), "build", KERNEL1,
             rf"the sentinel line '{END}' comes before '{BEGIN}' .*; restore their order", planning=False),
        Case("kernel_not_utf8_on_splice", "l2",
             chain(raw_edit_and(lambda t: t), prepend(KERNEL1, b"// \xff\xfe\n")),
             "build", KERNEL1, r"not UTF-8", planning=False),
        Case("raw_not_utf8", "l2", append(RAW, b"// \xff\xfe\n"), "build", RAW, r"not UTF-8", planning=False),
        Case("ptoas_fails", "l2", pto_edit("FAKE_PTOAS_FAIL"), "build", "ptoas/main_group.pto",
             r"ptoas .*failed.*FAKE_PTOAS_FAIL requested", planning=False, args=pto),
        Case("ptoas_hangs", "l2", pto_edit("FAKE_PTOAS_HANG"), "build", "ptoas/main_group.pto", r"timed out after 1 s",
             planning=False, args=pto, env={"PYPTO_PTOAS_TIMEOUT": "1"}),
        Case("ptoas_garbage", "l2", pto_edit("FAKE_PTOAS_GARBAGE"), "build", "ptoas/main_group.pto",
             r"defines no kernel", planning=False, args=pto),
        Case("ptoas_not_found", "l2", pto_edit("edited"), "build", "no/such/ptoas", r"not an executable file",
             args=("--ptoas", "no/such/ptoas")),
        Case("compile_error", "l2", compile_error, "build", KERNEL1, r"error: expected", planning=False),
        Case("orch_compile_error", "l2", orch_compile_error, "build", "orchestration/main.cpp",
             r"error: .undeclared_name. was not declared", planning=False),
        Case("state_db_garbage", "l2", corrupt_state, "build", "state.sqlite3", r"not a (valid )?.*database" + ONLY_DB,
             planning=False),
        Case("state_db_truncated", "l2", truncate_state, "build", "state.sqlite3", r"database" + ONLY_DB,
             planning=False),
        Case("state_db_explain", "l2", corrupt_state, "explain", "state.sqlite3", r"unreadable" + ONLY_DB),
        Case("host_orch_syntax_error", "l3", lambda d: replace(d / "orchestration/host_orch.py", "def host_orch(",
                                                               "def host_orch(("), "validate",
             "orchestration/host_orch.py", r"SyntaxError", planning=False),
    ]


def _golden_cases() -> list[Case]:
    g, v = "golden.py", "validate"
    return [
        Case("golden_missing", "l2", delete(g), "replay", g, r"not found"),
        Case("golden_raises", "l2", golden("gen = torch", "raise RuntimeError('no data')\n    gen = torch"), v, g,
             r"generate_inputs\(\) raised RuntimeError: no data", planning=False),
        Case("golden_syntax_error", "l2", golden("def compute_golden(tensors, params):", "def compute_golden(:"), v, g,
             r"SyntaxError", planning=False),
        Case("golden_no_generate_inputs", "l2", golden("def generate_inputs(", "def make_inputs("), v, g,
             r"no generate_inputs\(\)", planning=False),
        Case("golden_no_compute_golden", "l2", golden("def compute_golden(", "def golden_of("), v, g,
             r"no compute_golden\(\)", planning=False),
        Case("golden_wrong_count", "l2", golden('        ("out", out),\n', ""), v, g,
             r"1 input.*compiled_meta\.json.* 2 param", planning=False),
        Case("golden_wrong_dtype", "l2", golden("out = torch.zeros((16,), dtype=torch.float32)",
                                                "out = torch.zeros((16,), dtype=torch.float64)"), v, g,
             r"'out'.*float64.*fp32", planning=False),
        Case("golden_wrong_shape", "l2", golden("a = torch.randn((16,)", "a = torch.randn((8,)"), v, g,
             r"'a' has shape \[8\], but compiled_meta\.json declares 'a' as fp32 \[16\]", planning=False),
        Case("golden_not_pairs", "l2", golden('("a", a),', '["a", a],'), v, g,
             r"item 0 is .*expected a \(name, value\)", planning=False),
        Case("golden_compute_raises", "l2", golden('tensors["out"][:] = out', 'tensors["missing"][:] = out'), v, g,
             r"compute_golden\(\) raised KeyError", planning=False),
        # issue 22 item 8: torch not installed is the run extra missing, not golden.py's fault ...
        Case("torch_not_installed", "l2", lambda d: None, v, "module 'torch' is not installed",
             r"replay and validate need the run extra: pip install 'pypto_build\[run\]'$", planning=False,
             python="no_run_extra"),
        # ... while a module of the user's own that is missing stays golden.py's to fix
        Case("golden_own_module_missing", "l2", golden("import torch", "import torch\nimport my_golden_helpers"), v, g,
             r"importing golden\.py raised ModuleNotFoundError: No module named 'my_golden_helpers'; fix golden\.py$",
             planning=False),
    ]


def _layout_cases() -> list[Case]:
    return [
        Case("empty_directory", "l2", empty_dir, "build", "{dir}", r"not a build_output directory"),
        Case("missing_directory", "l2", missing_dir, "build", "{dir}", r": does not exist; pass "),
        Case("file_not_directory", "l2", file_not_dir, "replay", "{dir}", r"not a directory"),
        Case("mixed_markers", "l2", write("distributed_meta.json", "{}"), "build", "{dir}",
             r"ambiguous build directory"),
        Case("incomplete_markers", "l2", delete("kernel_config.py"), "build", "{dir}", r"no kernel_config\.py"),
        Case("multi_orch_replay", "multi", lambda d: None, "replay", "{dir}", r"multi-orchestration parent"),
        # `pypto-build example DEST` replays an existing DEST only when it is a copy of the example (issue 22, 8)
        Case("example_other_directory", "l2", chain(empty_dir, write("notes.txt", "mine\n")), "example", "{dir}",
             r"exists and is not a copy of the example .*\(no compiled_meta\.json\)"),
        Case("example_other_build_directory", "l2", lambda d: None, "example", "{dir}",
             r"exists and is not a copy of the example .*\(no kernels/aic/matmul_relu_incore_0_aic\.cpp\)"),
        Case("multi_orch_validate", "multi", lambda d: None, "validate", "{dir}", r"multi-orchestration parent"),
        Case("parent_of_build_dirs", "l2", parent_of_two, "build", "{dir}",
             r"not a build directory itself, but holds 2 \(_jit_a, _jit_b\); pass one of them, or build and validate "
             r"them all with `pypto-build ci \S+/build_output/\*/`"),
    ]


def _environment_cases() -> list[Case]:
    """Bad values of our environment variables: refused while planning (issue 11, item 13)."""
    b, never = "build", os.path.join(tempfile.gettempdir(), "pypto-build-corpus-cache-never-created")
    number, positive = r"is not a number; set it to a positive number of seconds", r"is not positive"
    return [
        Case("env_cxx_unbalanced_quote", "l2", lambda d: None, b, "CXX='g++ \"-O2'", r"unbalanced quotes",
             env={"CXX": 'g++ "-O2'}),
        Case("env_cxxflags_unbalanced_quote", "l2", lambda d: None, b, "CXXFLAGS=\"-DNAME='a b\"",
             r"unbalanced quotes", env={"CXXFLAGS": "-DNAME='a b"}),
        Case("env_cxxflags_trailing_backslash", "l2", lambda d: None, "replay", "CXXFLAGS", r"trailing backslash",
             env={"CXXFLAGS": "-O2 \\"}),
        Case("env_compiler_timeout_text", "l2", lambda d: None, b, "PYPTO_COMPILER_TIMEOUT='soon'", number,
             env={"PYPTO_COMPILER_TIMEOUT": "soon"}),
        Case("env_compiler_timeout_zero", "l2", lambda d: None, b, "PYPTO_COMPILER_TIMEOUT='0'", positive,
             env={"PYPTO_COMPILER_TIMEOUT": "0"}),
        Case("env_compiler_timeout_negative", "l2", lambda d: None, "validate", "PYPTO_COMPILER_TIMEOUT='-5'",
             positive, env={"PYPTO_COMPILER_TIMEOUT": "-5"}),
        Case("env_compiler_timeout_nan", "l2", lambda d: None, b, "PYPTO_COMPILER_TIMEOUT='nan'", number,
             env={"PYPTO_COMPILER_TIMEOUT": "nan"}),
        Case("env_compiler_timeout_inf", "l2", lambda d: None, b, "PYPTO_COMPILER_TIMEOUT='inf'", r"is infinite",
             env={"PYPTO_COMPILER_TIMEOUT": "inf"}),
        Case("env_ptoas_timeout_text", "l2", lambda d: None, b, "PYPTO_PTOAS_TIMEOUT='1m'", number,
             env={"PYPTO_PTOAS_TIMEOUT": "1m"}),
        Case("env_ptoas_timeout_explain", "l2", lambda d: None, "explain", "PYPTO_PTOAS_TIMEOUT='-inf'",
             r"is infinite", env={"PYPTO_PTOAS_TIMEOUT": "-inf"}),
        Case("env_cache_size", "l2", lambda d: None, b, "PYPTO_BUILD_CACHE_SIZE='lots'", r"not a size",
             env={"PYPTO_BUILD_CACHE_SIZE": "lots", "PYPTO_BUILD_CACHE": never}),
        # issue 22 item 8: the compiler's own error line, the variable named, values refused instead of taken
        Case("env_cxxflags_bad_flag", "l2", lambda d: None, b, "CXXFLAGS='-fno-such-flag'",
             r"when asked for its include directories .*: \S*g\+\+\S*: error: unrecognized command-line option",
             env={"CXXFLAGS": "-fno-such-flag"}),
        Case("env_platform_unknown", "l2", lambda d: None, b, "PYPTO_BUILD_PLATFORM='bar'", r"not a platform; set it "
             "to one of host, a2a3sim, a5sim, a2a3, a5", env={"PYPTO_BUILD_PLATFORM": "bar"}),
        Case("env_rebuild_from_pto_maybe", "l2", lambda d: None, b, "PYPTO_REBUILD_FROM_PTO='maybe'",
             r"not a yes/no value", env={"PYPTO_REBUILD_FROM_PTO": "maybe"}),
        Case("env_pch_maybe", "l2", lambda d: None, b, "PYPTO_BUILD_PCH='maybe'",
             r"PYPTO_BUILD_PCH='maybe': not a yes/no value; set it to 0", env={"PYPTO_BUILD_PCH": "maybe"}),
        Case("env_pch_number", "l2", lambda d: None, "explain", "PYPTO_BUILD_PCH='2'",
             r"PYPTO_BUILD_PCH='2': not a yes/no value", env={"PYPTO_BUILD_PCH": "2"}),
        Case("env_pch_size", "l2", lambda d: None, b, "PYPTO_BUILD_PCH_SIZE='lots'",
             r"PYPTO_BUILD_PCH_SIZE='lots': not a size; .* or unset it for the default 2G",
             env={"PYPTO_BUILD_PCH_SIZE": "lots"}),
    ]


def _option_cases() -> list[Case]:
    """Option values out of range: refused in one line, never taken silently (issue 22, item 8)."""
    return [
        Case("jobs_zero", "l2", lambda d: None, "build", "-j/--jobs 0", r"out of range; pass a number of at least 1",
             args=("-j", "0")),
        Case("jobs_negative", "l2", lambda d: None, "validate", "-j/--jobs -3", r"out of range", args=("-j", "-3")),
        Case("dump_args_level", "l2", lambda d: None, "replay", "--dump-args 7", r"out of range; pass a number from "
             "0 to 3", args=("--dump-args", "7")),
    ]


def _odd_file_cases() -> list[Case]:
    """A FIFO where a file we read should be: one line, never a blocked read (issue 11, item 11)."""
    b, fifo_re = "build", r"is a FIFO \(named pipe\), not a regular file"
    return [
        Case("fifo_kernel_config", "l2", fifo("kernel_config.py"), b, "kernel_config.py", fifo_re),
        Case("fifo_compiled_meta", "l2", fifo("compiled_meta.json"), "validate", "compiled_meta.json", fifo_re),
        Case("fifo_host_orch", "l3", fifo("orchestration/host_orch.py"), b, "host_orch.py", fifo_re),
        Case("fifo_kernel_source", "l2", fifo(KERNEL1), b, KERNEL1, fifo_re),
        Case("fifo_state_db", "l2", chain(fifo(HOST_STATE_DB), lambda d: os.utime(d / KERNEL1)), b,
             "state.sqlite3", fifo_re, planning=False),         # checked under the lock (its pid is written)
        Case("fifo_state_journal_explain", "l2", fifo(f"{HOST_STATE_DB}-journal"), "explain",
             "state.sqlite3-journal", fifo_re),
        Case("fifo_lock", "l2", chain(fifo(f"{STATE}/lock"), lambda d: os.utime(d / KERNEL1)), b, "lock",
             fifo_re),
        Case("fifo_header", "l2", fifo("kernels/common.h"), b, "kernels/common.h", fifo_re, planning=False),
        Case("fifo_raw_ptoas_output", "l2", fifo(RAW), b, RAW, fifo_re, planning=False),
        Case("fifo_golden_data", "l2", chain(write("data/extra.bin", b"\0" * 16), fifo("data/extra.bin")),
             "validate", "data/extra.bin", fifo_re, planning=False),
    ]


def _history_and_ci_cases() -> list[Case]:
    """`history` on a damaged history.json or no directory; ci-report on deep JSON; --shard N past any CI
    (issue 25 item 11, issue 22 item 8): one line, exit 2."""
    h, refused = "history", r"not a history pypto-build wrote"
    ci = ("--list", "--shard")
    return [
        Case("history_seconds_text", "l2", history(seconds="fast"), h, HISTORY,
             rf"{refused} \(variant #1's 'seconds' is 'fast', not a list of run times\)", status=2),
        Case("history_first_seen_text", "l2", history(first_seen="monday"), h, HISTORY,
             r"'first_seen' is 'monday', not a time", status=2),
        Case("history_time_past_time_t", "l2", history(first_seen=1e20), h, HISTORY,
             r"'first_seen' is 1e\+20, not a time", status=2),
        Case("history_deep_json", "l2", write(HISTORY, DEEP), h, HISTORY, rf"{refused} \(maximum recursion depth",
             status=2),
        Case("history_missing_directory", "l2", missing_dir, h, "{dir}", r": does not exist; pass ", status=2),
        Case("history_not_a_build_directory", "l2", empty_dir, h, "{dir}", r"not a build_output directory",
             status=2),
        Case("ci_report_deep_json", "l2", report_file(DEEP), "ci-report", "report.json",
             r"JSON nested deeper than Python's parser goes", status=2),
        Case("ci_report_count_past_any_ci", "l2", report_file(json.dumps({
            "directories": [], "shard": {"index": 1, "count": 10**12, "plan": "x", "directories": 0, "assigned": 0}})),
            "ci-report", "report.json", r"\"shard\" record is malformed \(index or count\)", status=2),
        Case("ci_list_shard_billion", "l2", lambda d: None, "ci", "--shard '1/1000000000'",
             r"1,000,000,000 shards, more than the 10,000 a plan takes", args=(*ci, "1/1000000000"), status=2),
        Case("ci_list_shard_trillion", "l2", lambda d: None, "ci", "--shard '1/1000000000000'",
             r"more than the 10,000 a plan takes", args=(*ci, "1/1000000000000"), status=2),
        Case("ci_list_shard_count_billion", "l2", lambda d: None, "ci", "--shard '1000000000'",
             r"more than the 10,000 a plan takes", args=(*ci, "1000000000"), status=2),
        Case("ci_shard_billion", "l2", lambda d: None, "ci", "--shard '1/1000000000'",
             r"more than the 10,000 a plan takes", args=("--shard", "1/1000000000"), status=2),
    ]


NO_SIMPLER = ("simpler", "_task_interface", "__editable___simpler")     # what a simpler install provides
PASSWD = "/etc/passwd"          # a file everywhere, never written


def _issue_33_cases() -> list[Case]:
    """Lines that said what was not so, or what the user cannot act on (issue 33 items 2, 6, 7)."""
    simpler = ("PyPTO's runtime simpler is not installed .*, and a2a3sim runs on it: pass --platform host to run on "
               "the host runtime, or give no --platform nor \\$PYPTO_BUILD_PLATFORM \\(a directory recording a "
               "simulator then falls back to the host runtime, as `pypto-build example` does\\); or build simpler "
               ".*Building simpler locally")
    typo = lambda d: d / "typo"         # noqa: E731 — a cache folder never made
    return [
        Case("platform_sim_without_simpler", "l2", lambda d: None, "replay", "tools/build-simpler.sh", simpler,
             args=("--platform", "a2a3sim"), python="no_simpler", status=2),
        Case("platform_sim_without_simpler_validate", "l2", lambda d: None, "validate", "tools/build-simpler.sh",
             simpler, env={"PYPTO_BUILD_PLATFORM": "a2a3sim"}, python="no_simpler", status=2),
        Case("cache_dir_is_a_file", "l2", lambda d: os.utime(d / KERNEL1), "build", f"--cache-dir '{PASSWD}'",
             r"a file, not a folder; pass --cache-dir a folder", args=("--cache-dir", PASSWD), status=2),
        Case("env_cache_is_a_file", "l2", lambda d: os.utime(d / KERNEL1), "build", f"PYPTO_BUILD_CACHE='{PASSWD}'",
             r"a file, not a folder; set PYPTO_BUILD_CACHE to a folder", env={"PYPTO_BUILD_CACHE": PASSWD}, status=2),
        Case("cache_dir_through_a_file", "l2", lambda d: None, "validate", f"--cache-dir '{PASSWD}/x'",
             r"a path through a file, not a folder", args=("--cache-dir", f"{PASSWD}/x"), status=2),
        Case("cache_stats_no_cache", "l2", typo, "cache", "{dir}", r"no cache at \S+: nothing was ever stored there",
             args=("stats", "--cache-dir"), status=2),
        Case("cache_clean_no_cache", "l2", typo, "cache", "{dir}", r"no cache at \S+", args=("clean", "--cache-dir"),
             status=2),
        Case("kernel_source_link_loop", "l2", link_loop(KERNEL1), "build", KERNEL1,
             r"is a symbolic link loop \(it leads back to itself\)", status=2),
        Case("kernel_config_is_a_directory", "l2", make_dir("kernel_config.py"), "build", "kernel_config.py",
             r"kernel_config\.py: is a directory, not a file; remove it and restore", status=2),
        Case("compiled_meta_is_a_directory", "l2", make_dir("compiled_meta.json"), "validate", "compiled_meta.json",
             r"is a directory, not a file", status=2),
    ]


CASES = [*_meta_cases(), *_platform_sidecar_cases(), *_dmeta_cases(), *_kernel_config_cases(), *_run_cases(),
         *_golden_cases(), *_layout_cases(), *_environment_cases(), *_option_cases(), *_odd_file_cases(),
         *_history_and_ci_cases(), *_issue_33_cases()]
assert len({c.name for c in CASES}) == len(CASES)
