"""CANN for a2a3/a5 device builds: locate_cann, the labelled stand-in tree, and the kernel payload.

Runs with only g++, ld, objcopy, readelf and Python (no CANN, no simpler): kernels are
compiled through the stand-in ccec/ld.lld (pypto_build.testing.fake_cann) with the argv
PyPTO's runtime (simpler) uses, written out here from simpler's `compile_incore`.
The payload is checked against objcopy's, and, with $PYPTO_SRC, against PyPTO's own extractor
(tests/test_elf_payload.py).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from pypto_build.platforms.simpler.cann import ENV_VAR, TOOLS, locate_cann
from pypto_build.platforms.simpler.elf_payload import PayloadError, build_id_64, kernel_payload
from pypto_build.errors import ToolchainError
from pypto_build.testing.fake_cann import LABEL, make_fake_cann

RUNTIME = "tensormap_and_ringbuffer"
CCEC_FLAGS = ["-c", "-O3", "-g", "-x", "cce", "-Wall", "-std=c++17", "--cce-aicore-only"]
CCEC_TAIL = ["-mllvm", "-cce-aicore-stack-size=0x8000", "-mllvm", "-cce-aicore-function-stack-size=0x8000",
             "-mllvm", "-cce-aicore-record-overflow=false", "-mllvm", "-cce-aicore-addr-transform",
             "-mllvm", "-cce-aicore-dcci-insert-for-scalar=false", "-DMEMORY_BASE"]

# A PyPTO-style kernel: the wrapper's __gm__/__aicore__ block, <pto/pto-inst.hpp>, a header from the
# runtime include dirs, a static helper and a non-inlined template (COMDAT .text.* before the link).
KERNEL = """\
#include <cstdint>
#ifndef __gm__
#define __gm__
#endif
#ifndef __aicore__
#if defined(__CPU_SIM)
#define __aicore__
#else
#define __aicore__ [aicore]
#endif
#endif
#include <pto/pto-inst.hpp>
#include "kernel_helper.h"
#ifndef MEMORY_BASE
#error "simpler passes -DMEMORY_BASE"
#endif
#if defined(EXPECT_VEC) != defined(__DAV_VEC__) || defined(EXPECT_VEC) == defined(__DAV_CUBE__)
#error "the core arch did not become the right __DAV_*__ define"
#endif
using namespace pto;
template <typename T> __attribute__((noinline)) T twice(T x) { return x + x; }
static __attribute__((noinline)) int64_t helper(int64_t a) { return twice(a) * HELPER_SCALE; }
extern "C" __aicore__ void kernel_entry(__gm__ int64_t* args) {
    args[0] = helper(args[1]) + twice<int32_t>(static_cast<int32_t>(args[2]));
}
"""


def ccec_argv(cann: Path, arch: str, include_dirs: list[str], out: str, source: str) -> list[str]:
    """simpler's `compile_incore` argv for a2a3 (dav-c220-*) or a5 (dav-c310-*)."""
    a5 = ["-mllvm", "-cce-vf-aa-between-iters=true"] if arch.startswith("dav-c310") else []
    return [str(cann / "bin" / "ccec"), *CCEC_FLAGS, f"--cce-aicore-arch={arch}", *CCEC_TAIL, *a5,
            *(f"-I{d}" for d in include_dirs), "-o", out, source]


def simpler_tree(root: Path, arch: str = "a2a3") -> tuple[Path, list[str]]:
    """A stand-in simpler checkout + pto-isa, and PyPTO's kernel -I list relative to it (as simpler passes it)."""
    dirs = ["build/pto-isa/include", "build/pto-isa/include/pto", "simpler_setup/incore",
            "src/common/platform/include", f"src/{arch}/runtime/{RUNTIME}/runtime",
            f"src/{arch}/runtime/{RUNTIME}/common", f"src/{arch}/runtime", "src/common", "src/common/task_interface"]
    for d in dirs:
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "build/pto-isa/include/pto/pto-inst.hpp").write_text("// test stand-in, not PTO-ISA\nnamespace pto {}\n")
    (root / "simpler_setup/incore/kernel_helper.h").write_text("#pragma once\n#define HELPER_SCALE 3\n")
    return root, dirs


def run(argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300)


def compile_kernel(cann: Path, work: Path, arch: str = "dav-c220-vec", *, extra: list[str] = (),
                   source_text: str = KERNEL) -> tuple[Path, Path]:
    """Compile and link KERNEL the way simpler does (cwd = its checkout, -o in a temp dir): (.o, linked .elf)."""
    project, dirs = simpler_tree(work / "simpler", "a5" if "c310" in arch else "a2a3")
    (work / "tmp").mkdir(exist_ok=True)
    source = work / "kernels" / "aiv" / "k.cpp"
    source.parent.mkdir(parents=True, exist_ok=True)
    define = "#define EXPECT_VEC 1\n" if arch.endswith("-vec") else ""
    source.write_text(define + source_text)
    obj, elf = work / "tmp" / "k.cpp.incore_x.o", work / "tmp" / "k.cpp.incore_x.o.linked_y.elf"
    argv = ccec_argv(cann, arch, dirs, str(obj), str(source))
    done = run([*argv[:-3], *extra, *argv[-3:]], cwd=project)
    assert done.returncode == 0, done.stderr
    done = run([str(cann / "bin" / "ld.lld"), "-e", "kernel_entry", "-o", str(elf), str(obj)], cwd=project)
    assert done.returncode == 0, done.stderr
    return obj, elf


def sections(path: Path) -> dict[str, str]:
    with open(path, "rb") as handle:
        return {s.name: s["sh_type"] for s in ELFFile(handle).iter_sections()}


@pytest.fixture(scope="module")
def cann(tmp_path_factory) -> Path:
    return make_fake_cann(tmp_path_factory.mktemp("cann") / "ascend-toolkit")


@pytest.fixture(scope="module")
def kernel(cann, tmp_path_factory) -> tuple[Path, Path]:
    return compile_kernel(cann, tmp_path_factory.mktemp("kernel"))


# --- locate_cann --------------------------------------------------------------------------------


def test_locate_cann_finds_the_stand_in_tree(cann):
    found = locate_cann({ENV_VAR: str(cann)})
    assert found.home == cann
    assert found.ccec == cann / "bin" / "ccec" and found.linker == cann / "bin" / "ld.lld"
    assert found.cross_gxx == cann / "tools/hcc/bin/aarch64-target-linux-gnu-g++"
    assert found.cross_gcc == cann / "tools/hcc/bin/aarch64-target-linux-gnu-gcc"
    assert found.version.startswith("ccec ") and LABEL in found.version
    assert locate_cann({ENV_VAR: str(cann)}).identity == found.identity
    assert LABEL in (cann / "README.txt").read_text()
    for rel in TOOLS:
        assert LABEL in (cann / rel).read_text().splitlines()[2 if rel.startswith("bin/") else 1]


def test_identity_follows_each_tool(tmp_path):
    root = make_fake_cann(tmp_path / "cann")
    before = locate_cann({ENV_VAR: str(root)}).identity
    for rel in TOOLS:
        with open(root / rel, "a") as handle:
            handle.write("# changed\n")
        after = locate_cann({ENV_VAR: str(root)}).identity
        assert after != before, rel
        before = after


def test_relative_home_is_taken_from_the_working_directory(cann, monkeypatch):
    monkeypatch.chdir(cann.parent)
    assert locate_cann({ENV_VAR: cann.name}).ccec == cann / "bin" / "ccec"


def one_line_error(env: dict) -> str:
    with pytest.raises(ToolchainError) as info:
        locate_cann(env)
    message = str(info.value)
    assert "\n" not in message and ENV_VAR in message, message
    assert "set_env.sh" in message and "--platform" in message, message
    return message


@pytest.mark.parametrize("value", [None, ""])
def test_unset_variable_is_one_line(value):
    env = {} if value is None else {ENV_VAR: value}
    assert "is not set" in one_line_error(env)


def test_missing_directory_is_one_line(tmp_path):
    assert "no such directory" in one_line_error({ENV_VAR: str(tmp_path / "nowhere")})


@pytest.mark.parametrize("rel", TOOLS)
def test_each_missing_tool_is_one_line_naming_it(tmp_path, rel):
    root = make_fake_cann(tmp_path / "cann")
    (root / rel).unlink()
    message = one_line_error({ENV_VAR: str(root)})
    assert f"{rel} not found ({root / rel})" in message


def test_unusable_tools_are_one_line(tmp_path):
    root = make_fake_cann(tmp_path / "cann")
    (root / "bin/ld.lld").chmod(0o644)
    assert "bin/ld.lld is not executable" in one_line_error({ENV_VAR: str(root)})
    (root / "bin/ld.lld").chmod(0o755)
    gxx = root / "tools/hcc/bin/aarch64-target-linux-gnu-g++"
    gxx.unlink()
    gxx.mkdir()
    assert "is not a file" in one_line_error({ENV_VAR: str(root)})
    gxx.rmdir()
    gxx.symlink_to(root / "gone")
    assert "dangling symlink" in one_line_error({ENV_VAR: str(root)})
    gxx.unlink()
    gxx.write_text("#!/bin/sh\necho broken >&2\nexit 3\n")
    gxx.chmod(0o755)
    assert "'--version' failed (exit status 3: broken)" in one_line_error({ENV_VAR: str(root)})


# --- the stand-in ccec / ld.lld with simpler's argv -----------------------------------------------


def test_kernel_compiles_and_links_into_one_text(kernel):
    obj, elf = kernel
    before = sections(obj)
    assert before[".text"] == "SHT_PROGBITS" and ".rela.text" in before
    assert [n for n in before if n.startswith(".text.")], "COMDAT .text.* expected before the link"
    after = sections(elf)
    assert after[".text"] == "SHT_PROGBITS" and not [n for n in after if n.startswith((".text.", ".rela"))]
    with open(elf, "rb") as handle:
        linked = ELFFile(handle)
        assert linked["e_type"] == "ET_EXEC"
        assert linked.get_section_by_name(".symtab").get_symbol_by_name("kernel_entry")


def test_payload_is_what_objcopy_extracts(kernel, tmp_path):
    _obj, elf = kernel
    out = tmp_path / "text.bin"
    done = run(["objcopy", "-O", "binary", "--only-section=.text", str(elf), str(out)])
    assert done.returncode == 0, done.stderr
    payload = kernel_payload(elf.read_bytes(), "kernels/aiv/k.o")
    assert payload == out.read_bytes() and len(payload) > 0


@pytest.mark.parametrize("arch", ["dav-c220-cube", "dav-c310-vec", "dav-c310-cube"])
def test_other_core_archs(cann, tmp_path, arch):
    _obj, elf = compile_kernel(cann, tmp_path, arch)
    assert kernel_payload(elf.read_bytes(), "k")


def test_engine_flags_depfile_and_prefix_map(cann, tmp_path):
    dep = tmp_path / "k.d"
    extra = ["-MD", "-MF", str(dep), "-MT", "kernels/aiv/k.o", f"-ffile-prefix-map={tmp_path}=."]
    compile_kernel(cann, tmp_path, extra=extra)
    text = dep.read_text()
    assert text.startswith("kernels/aiv/k.o:") and "kernel_helper.h" in text and "pto-inst.hpp" in text


@pytest.mark.parametrize("change, said", [
    (lambda a: [x.replace("dav-c220-vec", "dav-c100-vec") for x in a], "unknown core arch"),
    (lambda a: [x for x in a if x != "-DMEMORY_BASE"], "expected after the arch"),
    (lambda a: [x for x in a if x != "--cce-aicore-only"], "leading flags"),
    (lambda a: [*a[:-3], "-mllvm", "-cce-vf-aa-between-iters=true", *a[-3:]], "expected after the arch"),
    (lambda a: [*a[:-3], "-fsanitize=address", *a[-3:]], "unsupported option '-fsanitize=address'"),
    (lambda a: [*a, "second.cpp"], "expected one -o and one source"),
])
def test_stand_in_ccec_refuses_an_argv_simpler_would_not_pass(cann, tmp_path, change, said):
    argv = ccec_argv(cann, "dav-c220-vec", [], str(tmp_path / "k.o"), str(tmp_path / "k.cpp"))
    done = run(change(argv))
    assert done.returncode == 1 and said in done.stderr and LABEL in done.stderr


def test_stand_in_ld_refuses_other_options(cann, kernel, tmp_path):
    obj, _elf = kernel
    done = run([str(cann / "bin/ld.lld"), "-shared", "-e", "kernel_entry", "-o", str(tmp_path / "x"), str(obj)])
    assert done.returncode == 1 and "unsupported option '-shared'" in done.stderr


def test_std_override_for_newer_kernels(tmp_path):
    source = KERNEL + "consteval int one() { return 1; }\n"
    with pytest.raises(AssertionError):
        compile_kernel(make_fake_cann(tmp_path / "c17"), tmp_path / "a", source_text=source)
    _obj, elf = compile_kernel(make_fake_cann(tmp_path / "c20", std="c++20"), tmp_path / "b", source_text=source)
    assert kernel_payload(elf.read_bytes(), "k")


def test_undefined_symbols_fail_the_link_unless_asked(tmp_path):
    source = KERNEL.replace('extern "C" __aicore__', 'extern "C" void elsewhere();\nextern "C" __aicore__')
    source = source.replace("args[0] = ", "elsewhere();\n    args[0] = ")
    with pytest.raises(AssertionError, match="undefined reference to `elsewhere'"):
        compile_kernel(make_fake_cann(tmp_path / "strict"), tmp_path / "a", source_text=source)
    _obj, elf = compile_kernel(make_fake_cann(tmp_path / "lenient", unresolved=True), tmp_path / "b",
                               source_text=source)
    assert kernel_payload(elf.read_bytes(), "k")


# --- kernel_payload errors and build_id_64 -------------------------------------------------------


def payload_error(data: bytes) -> str:
    with pytest.raises(PayloadError) as info:
        kernel_payload(data, "kernels/aiv/k.o")
    message = str(info.value)
    assert "\n" not in message and message.startswith("kernels/aiv/k.o: "), message
    return message


def test_truncated_and_corrupt_images_are_one_line(kernel):
    data = kernel[1].read_bytes()
    assert "not an ELF" in payload_error(b"")
    assert "not an ELF" in payload_error(data[:63])
    assert "not an ELF" in payload_error(b"MZ" + data[2:])
    assert "Mach-O" in payload_error(b"\xcf\xfa\xed\xfe" + bytes(60))
    assert "truncated" in payload_error(data[: len(data) - 10])
    for cut in range(64, len(data), max(1, len(data) // 97)):
        try:
            assert kernel_payload(data[:cut], "k") == kernel_payload(data, "k")
        except PayloadError as exc:
            assert "\n" not in str(exc)


def test_an_image_without_text_is_one_line(kernel, tmp_path):
    renamed = tmp_path / "code.o"
    done = run(["objcopy", "--rename-section", ".text=.code", str(kernel[0]), str(renamed)])
    assert done.returncode == 0, done.stderr
    assert "no .text section" in payload_error(renamed.read_bytes())


def test_elf32_is_refused(kernel, tmp_path):
    out = tmp_path / "k32.o"
    done = run(["objcopy", "-O", "elf32-x86-64", str(kernel[0]), str(out)])
    if done.returncode != 0:
        pytest.skip(f"objcopy cannot write elf32-x86-64 here: {done.stderr.strip()}")
    assert "not a little-endian ELF64" in payload_error(out.read_bytes())


def test_build_id_64_is_the_notes_first_eight_bytes(cann, tmp_path):
    source, so = tmp_path / "orch.cpp", tmp_path / "orch.so"
    source.write_text('extern "C" int aicpu_orchestration_entry() { return 0; }\n')
    gxx = cann / "tools/hcc/bin/aarch64-target-linux-gnu-g++"
    done = run([str(gxx), "-shared", "-fPIC", "-O3", "-g", "-std=c++17", "-fno-gnu-unique", "-Wl,--build-id=sha1",
                "-o", str(so), str(source)])
    assert done.returncode == 0, done.stderr
    notes = run(["readelf", "-n", str(so)]).stdout
    hex_id = next(line.split(":", 1)[1].strip() for line in notes.splitlines() if "Build ID:" in line)
    assert len(hex_id) == 40
    assert build_id_64(so.read_bytes()) == int.from_bytes(bytes.fromhex(hex_id)[:8], "little")


def test_build_id_64_none_without_a_note(kernel):
    assert build_id_64(kernel[1].read_bytes()) is None      # plain `ld` writes no build-id
    assert build_id_64(b"not an elf") is None
    assert build_id_64(kernel[1].read_bytes()[:100]) is None


def test_tools_exist_for_the_ci():
    for tool in ("g++", "ld", "objcopy", "readelf"):
        assert shutil.which(tool), f"{tool} is needed by these tests"
    assert os.name == "posix"
