"""Property-based tests over every reader of untrusted text: any input either gives a well-formed
result or raises the documented error type (ManifestError, MetaError, SpliceError; the depfile parser
raises only DepfileError), and the splice round trip holds for generated wrapper files.

More focused fuzzers live beside each module's tests (test_manifest, test_meta, test_splice); these
feed raw bytes through the file readers the CLI uses.
"""
from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pypto_build.compile.depfile import DepfileError, parse_depfile
from pypto_build.errors import ManifestError, MetaError, SpliceError
from pypto_build.builddir.manifest import KernelConfig, read_kernel_config
from pypto_build.builddir.sidecars import ProgramMeta, load_compiled_meta, load_distributed_meta
from pypto_build.pto.splice import BEGIN, END, preprocess, splice, split
from pypto_build.testing.synth_kernels import _kernel_cpp

FUZZ = settings(max_examples=300, deadline=None)
SCRATCH = Path(tempfile.mkdtemp(prefix="pypto-fuzz-"))
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)

# ---------------------------------------------------------------------------
# depfile parser
# ---------------------------------------------------------------------------

PATH_CHARS = st.sampled_from(list("abcxyz019_-+./ $#@%=,~:\\\t") + ["ü", "日"])
# What a depfile can represent: no newline (not in PATH_CHARS), no trailing backslash.
dep_paths = st.text(PATH_CHARS, min_size=1, max_size=24).filter(lambda p: not p.endswith("\\"))
TARGET = "out dir/k:1.so"        # -MT text is written verbatim: spaces and colons included


def gcc_escape(path: str) -> str:
    """How g++ 12 -MD writes one prerequisite (libcpp's `munge`): a space or tab gets a backslash and the
    backslashes before it are doubled, '#' gets a backslash, '$' is doubled; everything else is as is."""
    out, run = [], 0
    for ch in path:
        if ch in " \t":
            out.append("\\" * run + "\\" + ch)
        elif ch == "#":
            out.append("\\#")
        elif ch == "$":
            out.append("$$")
        else:
            out.append(ch)
        run = run + 1 if ch == "\\" else 0
    return "".join(out)


@FUZZ
@given(st.text(max_size=400))
@example(f"{TARGET}: b.h \\\n c.h\n")
@example(f"{TARGET}:b.h\nb.h:\n")
@example(f"{TARGET}: a\\")
@example("\\")
def test_depfile_any_text_gives_distinct_strings_or_a_depfile_error(text: str) -> None:
    for candidate in (text, f"{TARGET}:{text}"):
        try:
            deps = parse_depfile(candidate, TARGET)
        except DepfileError:
            continue
        assert isinstance(deps, list) and all(isinstance(d, str) and d for d in deps)
        assert len(deps) == len(set(deps))


@pytest.mark.slow
@FUZZ
@given(st.lists(dep_paths, min_size=1, max_size=12), st.lists(st.integers(1, 4), min_size=1, max_size=12),
       st.booleans(), st.booleans())
def test_depfile_round_trip_of_gcc_output(deps: list[str], widths: list[int], phony: bool, crlf: bool) -> None:
    lines, row = [], [f"{TARGET}:"]
    for i, dep in enumerate(deps):
        row.append(gcc_escape(dep))
        if len(row) > widths[i % len(widths)]:
            lines.append(" ".join(row))
            row = [""]
    lines.append(" ".join(row))
    newline = "\r\n" if crlf else "\n"
    text = (" \\" + newline).join(lines) + newline
    if phony:                                   # -MP: an empty rule per header
        text += "".join(f"{newline}{gcc_escape(d)}:{newline}" for d in deps[1:])
    unique = list(dict.fromkeys(deps))
    assert parse_depfile(text, TARGET) == unique


# ---------------------------------------------------------------------------
# file readers: raw bytes in, a model or the documented error out
# ---------------------------------------------------------------------------

GOOD_CONFIG = (b'KERNELS = [{"func_id": 0, "source": "kernels/aiv/k.cpp", "core_type": "aiv"}]\n'
               b'ORCHESTRATION = {"source": "orchestration/main.cpp", "function_name": "main"}\n'
               b'RUNTIME_CONFIG = {"runtime": "tensormap_and_ringbuffer"}\n')
GOOD_META = json.dumps({"schema": 1, "params": [{"name": "a", "direction": "in", "shape": [4], "dtype": "FP32"}],
                        "num_return_types": 0}).encode()


def mutations(seed: bytes) -> st.SearchStrategy[bytes]:
    """Random bytes, and the seed with bytes overwritten, inserted, or cut short."""
    def mutate(args: tuple[int, bytes, int]) -> bytes:
        at, junk, cut = args
        at %= len(seed) + 1
        return (seed[:at] + junk + seed[at + len(junk):])[: cut if cut else None]
    return st.binary(max_size=300) | st.tuples(st.integers(0, 10_000), st.binary(max_size=8),
                                               st.integers(0, len(seed))).map(mutate)


def write_scratch(name: str, data: bytes) -> Path:
    path = SCRATCH / name           # one file per name, rewritten for every example
    path.write_bytes(data)
    return path


@pytest.mark.slow
@FUZZ
@given(mutations(GOOD_CONFIG))
@example(b"\xff\xfe")
@example(GOOD_CONFIG)
def test_kernel_config_reader_gives_a_config_or_manifest_error(data: bytes) -> None:
    path = write_scratch("kernel_config.py", data)
    try:
        cfg = read_kernel_config(path)
    except ManifestError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(str(path))
    else:
        assert isinstance(cfg, KernelConfig)
        assert all(k.core_type in ("aic", "aiv") and k.func_id >= 0 for k in cfg.kernels)
        assert len({k.func_id for k in cfg.kernels}) == len(cfg.kernels)


@pytest.mark.slow
@FUZZ
@given(mutations(GOOD_META), st.sampled_from([1, 2]))
@example(GOOD_META, 1)
def test_sidecar_readers_give_a_meta_or_meta_error(data: bytes, schema: int) -> None:
    name, load = (("compiled_meta.json", load_compiled_meta) if schema == 1
                  else ("distributed_meta.json", load_distributed_meta))
    path = write_scratch(name, data)
    try:
        meta = load(path)
    except MetaError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
    else:
        assert isinstance(meta, ProgramMeta)


# ---------------------------------------------------------------------------
# splice round trip on generated wrapper files
# ---------------------------------------------------------------------------

TOKENS = ["\n", " ", "(", ")", "{", "}", ";", ",", "*", "//", "/*", "*/", '"', "\\", "MGATHER", "v1", "AICORE",
          "__gm__ float* ", "= ", ".data();", "__ubuf__ ", "Tensor", "using namespace pto;", BEGIN, "\r\n"]
raw_outputs = st.lists(st.sampled_from(TOKENS) | st.text(max_size=4), max_size=40).map("".join)
names = st.from_regex(r"[a-z_][a-z0-9_]{0,15}", fullmatch=True)


@pytest.mark.slow
@FUZZ
@given(names, st.integers(0, 63), st.booleans(), raw_outputs, raw_outputs)
def test_splice_round_trip_on_generated_wrappers(name: str, func_id: int, header: bool, old_raw: str,
                                                 new_raw: str) -> None:
    old, new = preprocess(old_raw), preprocess(new_raw)
    if END in old:
        return                                  # such a body cannot be written between the sentinels
    wrapper = _kernel_cpp(name, func_id, header, body=old)
    head, body, tail = split(wrapper, "k.cpp")
    assert body == old and head + "\n" + body + "\n" + tail == wrapper
    assert splice(wrapper, body, "k.cpp") == wrapper
    try:
        spliced = splice(wrapper, new, "k.cpp")
    except SpliceError:
        assert END in new
        return
    assert spliced == _kernel_cpp(name, func_id, header, body=new)
    assert split(spliced, "k.cpp")[1] == new
    assert splice(spliced, old, "k.cpp") == wrapper
