"""kernel_payload against PyPTO's own `.text` extractor (needs $PYPTO_SRC: a PyPTO checkout; skipped otherwise).

PyPTO's `python/pypto/runtime/elf_parser.py` is loaded by file path: it imports only the
standard library, so neither PyPTO's C++ extension nor PyPTO itself is needed. The claim
checked (elf_payload's docstring): wherever ours returns bytes PyPTO returns the same bytes,
and wherever PyPTO fails ours fails; ours refuses some corrupt inputs PyPTO accepts.
"""
from __future__ import annotations

import importlib.util
import io
import os
import random
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from pypto_build.platforms.simpler.elf_payload import PayloadError, build_id_64, kernel_payload
from test_cann import compile_kernel

PARSER = "python/pypto/runtime/elf_parser.py"


@pytest.fixture(scope="module")
def pypto_parser():
    src = os.environ.get("PYPTO_SRC")
    if not src:
        pytest.skip("set PYPTO_SRC to a PyPTO checkout to compare with PyPTO's own extractor")
    path = Path(src) / PARSER
    if not path.is_file():
        pytest.skip(f"PYPTO_SRC={src}: no {PARSER} there")
    before = set(sys.modules)
    spec = importlib.util.spec_from_file_location("pypto_elf_parser_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert not [m for m in set(sys.modules) - before if m.split(".")[0] == "pypto"], "must load standalone"
    return module


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> dict[str, bytes]:
    """A linked kernel, its unlinked object, and odd-but-valid objects made with g++ and objcopy."""
    from pypto_build.testing.fake_cann import make_fake_cann

    work = tmp_path_factory.mktemp("images")
    obj, elf = compile_kernel(make_fake_cann(work / "cann"), work)
    out = {"linked": elf.read_bytes(), "unlinked": obj.read_bytes()}
    data = work / "d.cpp"
    data.write_text("int counter = 7;\nconst long table[2] = {1, 2};\nstatic char buf[256];\n"
                    'extern "C" char* get() { buf[0] = char(counter + table[1]); return buf; }\n')
    (work / "e.cpp").write_text("int only_data = 1;\n")
    for src in ("d", "e"):
        done = subprocess.run(["g++", "-c", "-O2", "-fPIC", "-o", str(work / f"{src}.o"), str(work / f"{src}.cpp")],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    out["empty_text"] = (work / "e.o").read_bytes()

    def objcopy(name: str, *renames: str) -> bytes:
        args = [a for r in renames for a in ("--rename-section", r)]
        done = subprocess.run(["objcopy", *args, str(work / "d.o"), str(work / name)],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return (work / name).read_bytes()

    # two sections named .text, neither of them the code: PyPTO takes the first in index order
    out["two_texts"] = objcopy("two.o", ".text=.code", ".data=.text", ".rodata=.text")
    # a name with a non-ASCII byte PyPTO drops when it decodes: ".t\xffext" reads as ".text"
    out["non_ascii_name"] = objcopy("na.o", ".text=.tZext").replace(b"tZext\0", b"t\xffext\0")
    out["nobits_text"] = objcopy("nobits.o", ".text=.code", ".bss=.text")
    return out


def pypto(parser, data: bytes) -> bytes | Exception:
    try:
        return parser.extract_text_section(data)
    except Exception as exc:        # PyPTO raises ValueError, and struct.error on some corrupt headers
        return exc


def ours(data: bytes) -> bytes | PayloadError:
    try:
        return kernel_payload(data, "k")
    except PayloadError as exc:
        return exc


@pytest.mark.parametrize("name", ["linked", "unlinked", "empty_text", "two_texts", "non_ascii_name"])
def test_same_bytes_as_pypto(pypto_parser, images, name):
    theirs = pypto(pypto_parser, images[name])
    assert isinstance(theirs, bytes)
    assert ours(images[name]) == theirs


def test_the_odd_images_are_what_they_claim(images):
    assert kernel_payload(images["empty_text"], "k") == b""
    assert kernel_payload(images["two_texts"], "k") == (7).to_bytes(4, "little")     # .data came first
    assert len(kernel_payload(images["non_ascii_name"], "k")) > 0


def test_where_pypto_fails_we_fail(pypto_parser, images):
    linked = images["linked"]
    no_names = linked[:62] + b"\0\0" + linked[64:]       # e_shstrndx = 0: no section names at all
    for data in (b"", b"\x7fELF", linked[:63], b"\x7fELX" + linked[4:], no_names):
        assert isinstance(pypto(pypto_parser, data), Exception)
        assert isinstance(ours(data), PayloadError)


def test_where_we_refuse_what_pypto_returns(pypto_parser, images):
    """The documented differences: PyPTO returns bytes that are not the section's contents."""
    nobits = images["nobits_text"]
    assert isinstance(pypto(pypto_parser, nobits), bytes) and "SHT_NOBITS" in str(ours(nobits))
    linked = images["linked"]
    elf = ELFFile(io.BytesIO(linked))
    index = next(i for i, s in enumerate(elf.iter_sections()) if s.name == ".text")
    size_field = elf["e_shoff"] + index * 64 + 32            # Elf64_Shdr.sh_size
    oversized = linked[:size_field] + struct.pack("<Q", 2 * len(linked)) + linked[size_field + 8:]
    start = elf.get_section(index)["sh_offset"]
    assert pypto(pypto_parser, oversized) == oversized[start:]   # PyPTO: whatever lies up to the end of the file
    assert "runs past the end of the file" in str(ours(oversized))


@pytest.mark.parametrize("name", ["linked", "unlinked"])
def test_mutants_never_disagree(pypto_parser, images, name):
    """Truncations and byte flips (headers more often): ours is PyPTO's bytes or a PayloadError, and
    ours fails wherever PyPTO fails. Deterministic (seeded)."""
    rng = random.Random(13)
    base = images[name]
    counts = {"same": 0, "both fail": 0, "we refuse": 0}
    for _ in range(600):
        data = bytearray(base)
        if rng.random() < 0.3:
            data = data[: rng.randrange(len(data) + 1)]
        else:
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(64) if rng.random() < 0.5 else rng.randrange(len(data))] = rng.randrange(256)
        theirs, mine = pypto(pypto_parser, bytes(data)), ours(bytes(data))
        if isinstance(mine, bytes):
            assert mine == theirs
            counts["same"] += 1
        else:
            counts["we refuse" if isinstance(theirs, bytes) else "both fail"] += 1
    assert counts["same"] and counts["both fail"], counts


def test_build_id_64_agrees_with_pypto(pypto_parser, images, tmp_path):
    source, so = tmp_path / "o.cpp", tmp_path / "o.so"
    source.write_text('extern "C" int f() { return 1; }\n')
    subprocess.run(["g++", "-shared", "-fPIC", "-Wl,--build-id=sha1", "-o", str(so), str(source)], check=True,
                   timeout=300)
    data = so.read_bytes()
    assert build_id_64(data) == pypto_parser.elf_build_id_64(data)
    assert build_id_64(images["linked"]) is None         # PyPTO (like the runtime) falls back to FNV-1a here
