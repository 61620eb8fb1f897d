"""How the bad-input corpus (`bad_input_corpus.py`) breaks a copy of a pristine directory: each helper returns (or
is) a function of the copy's root that damages one thing."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

from pypto_build.builddir.state_dir import STATE_DB, state_folder
from pypto_build.platforms.host.places import HOST_STAMP, host_binary
from pypto_build.testing import synth

STATE = ".pypto_build"
HOST_STATE_DB = f"{state_folder('host')}/{STATE_DB}"     # the host platform's doit state (the corpus builds host)
HUGE = 65 * 2**20          # past the documented 16 MiB limit of metadata files (docs/guide.md)


def replace(path: Path, old: str, new: str) -> None:
    """Replace the first occurrence of `old` (which must be there) in the text file `path`."""
    text = path.read_text(encoding="utf-8")
    assert text.count(old) >= 1, (path, old)
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def edit_json(path: Path, change: Callable[[dict], object]) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def pad_huge(rel: str, line_start: bytes = b"") -> Callable[[Path], None]:
    """Make a file larger than the limit while keeping it valid: a last line of HUGE blanks."""
    def apply(d: Path) -> None:
        with open(d / rel, "ab") as handle:
            handle.write(b"\n" + line_start + b" " * HUGE + b"\n")
    return apply


def set_param(index: int, key: str, value) -> Callable[[Path], None]:
    def apply(d: Path) -> None:
        edit_json(d / "compiled_meta.json", lambda m: m["params"][index].__setitem__(key, value))
    return apply


def set_meta(key: str, value) -> Callable[[Path], None]:
    def apply(d: Path) -> None:
        edit_json(d / "compiled_meta.json", lambda m: m.__setitem__(key, value))
    return apply


def set_dconfig(key: str, value) -> Callable[[Path], None]:
    def apply(d: Path) -> None:
        edit_json(d / "distributed_meta.json", lambda m: m["distributed_config"].__setitem__(key, value))
    return apply


def kc(old: str, new: str, sub: str = ".") -> Callable[[Path], None]:
    def apply(d: Path) -> None:
        replace(d / sub / "kernel_config.py", old, new)
    return apply


def golden(old: str, new: str) -> Callable[[Path], None]:
    def apply(d: Path) -> None:
        replace(d / "golden.py", old, new)
    return apply


K1 = '"source": str(_ROOT_DIR / "kernels" / "aiv" / "main_incore_1_aiv.cpp")'
KERNEL1 = "kernels/aiv/main_incore_1_aiv.cpp"
RAW = "ptoas/main_group.cpp"
BEGIN, END = synth.BEGIN_SENTINEL, synth.END_SENTINEL


def pto_edit(knob: str) -> Callable[[Path], None]:
    def apply(d: Path) -> None:
        with open(d / "ptoas" / "main_group.pto", "a", encoding="utf-8") as handle:
            handle.write(f"// {knob}\n")
    return apply


def raw_edit_and(wrapper_change: Callable[[str], str]) -> Callable[[Path], None]:
    """Hand-edit the raw ptoas output (so the splice runs) and break kernel 1's wrapper."""
    def apply(d: Path) -> None:
        replace(d / RAW, "* 2.0f;", "* 2.0f + 0.0f;")
        path = d / KERNEL1
        path.write_text(wrapper_change(path.read_text(encoding="utf-8")), encoding="utf-8")
    return apply


def reverse_sentinels(text: str) -> str:
    return text.replace(BEGIN, "\0").replace(END, BEGIN).replace("\0", END)


def compile_error(d: Path) -> None:
    """Break kernel 1 whose binary (and the stamp) are absent: the build writes nothing new."""
    (d / host_binary("kernels/aiv/main_incore_1_aiv.cpp")).unlink()
    (d / HOST_STAMP).unlink()
    replace(d / KERNEL1, "int64_t n = n_conv.val;", "int64_t n = n_conv.val  // missing semicolon")


def orch_compile_error(d: Path) -> None:
    (d / host_binary("orchestration/main.cpp")).unlink()
    (d / HOST_STAMP).unlink()
    replace(d / "orchestration/main.cpp", "int64_t n = 1;", "int64_t n = undeclared_name;")


def corrupt_state(d: Path) -> None:
    (d / HOST_STATE_DB).write_bytes(b"this is not an sqlite database\n" * 40)
    os.utime(d / KERNEL1)           # something to look at, so the run reaches the state


def truncate_state(d: Path) -> None:
    truncate(d / HOST_STATE_DB, 0.3)
    os.utime(d / KERNEL1)


def empty_dir(d: Path) -> Path:
    shutil.rmtree(d)
    d.mkdir()
    return d


def missing_dir(d: Path) -> Path:
    shutil.rmtree(d)
    return d


def file_not_dir(d: Path) -> Path:
    shutil.rmtree(d)
    d.write_text("not a directory\n")
    return d


def write(rel: str, data: bytes | str) -> Callable[[Path], None]:
    def apply(d: Path) -> None:
        path = d / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
    return apply


def append(rel: str, data: bytes) -> Callable[[Path], None]:
    def apply(d: Path) -> None:
        with open(d / rel, "ab") as handle:
            handle.write(data)
    return apply


def prepend(rel: str, data: bytes) -> Callable[[Path], None]:
    def apply(d: Path) -> None:
        (d / rel).write_bytes(data + (d / rel).read_bytes())
    return apply


def delete(rel: str) -> Callable[[Path], None]:
    def apply(d: Path) -> None:
        (d / rel).unlink()
    return apply


def fifo(rel: str) -> Callable[[Path], None]:
    """Put a FIFO (named pipe) where the file `rel` is: reading it would block forever."""
    def apply(d: Path) -> None:
        path = d / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            path.unlink()
        os.mkfifo(path)
    return apply


def parent_of_two(d: Path) -> Path:
    """A build_output/ holding two jit directories (copies of `d`): the parent is passed instead of either."""
    parent = d.parent / "build_output"
    parent.mkdir()
    shutil.copytree(d, parent / "_jit_b", symlinks=True)
    d.rename(parent / "_jit_a")
    return parent


def python_without(where: Path, *left_out: str) -> Path:
    """A Python like this one, whose installed packages are this one's but those whose names start with one
    of `left_out` (a real environment without them: `pip install .` without an extra); its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    ours, theirs = (Path(subprocess.run([exe, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        check=True, capture_output=True, text=True).stdout.strip())
                    for exe in (sys.executable, str(python)))
    for entry in ours.iterdir():
        if entry.name != "__pycache__" and not entry.name.lower().startswith(left_out):
            (theirs / entry.name).symlink_to(entry)
    return python


NO_RUN_EXTRA = ("torch", "functorch", "numpy")        # what `pypto_build[run]` brings (torch's wheel has functorch)


def chain(*steps: Callable[[Path], object]) -> Callable[[Path], None]:
    def apply(d: Path) -> None:
        for step in steps:
            step(d)
    return apply


HISTORY = f"{STATE}/history.json"
VARIANT = {"digest": "ab" * 16, "first_seen": 1.7e9, "last_seen": 1.7e9, "verdict": "PASSED", "seconds": [0.002],
           "changed": [], "rounds": 1}
DEEP = "[" * 100_000 + "]" * 100_000           # past the JSON parser's recursion limit


def history(**fields) -> Callable[[Path], None]:
    """A history.json whose one variant has `fields` changed."""
    return write(HISTORY, json.dumps({"variants": [{**VARIANT, **fields}]}))


def report_file(text: str) -> Callable[[Path], Path]:
    """A JSON file to pass to ci-report instead of the directory."""
    def apply(d: Path) -> Path:
        (d / "report.json").write_text(text)
        return d / "report.json"
    return apply


def link_loop(rel: str) -> Callable[[Path], None]:
    """Put a symbolic link to itself where the file `rel` is."""
    def apply(d: Path) -> None:
        (d / rel).unlink()
        (d / rel).symlink_to((d / rel).name)
    return apply


def make_dir(rel: str) -> Callable[[Path], None]:
    """Put an empty directory where the file `rel` is."""
    def apply(d: Path) -> None:
        (d / rel).unlink()
        (d / rel).mkdir()
    return apply
