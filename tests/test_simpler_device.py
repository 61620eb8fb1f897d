"""a2a3 device builds through the engine with a labelled stand-in CANN tree (testing/fake_cann.py: its ccec
and ld.lld check simpler's command lines and make real ELF files with g++/ld): one compile, one link, one
extraction per kernel, each its own task; the payload equals an independent extraction (objcopy). Needs
simpler for its include dirs and runtime identity (the `simpler` marker)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pypto_build.testing.fake_cann import make_fake_cann

pytestmark = [pytest.mark.simpler, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[1] / "pypto_build" / "examples" / "matmul_relu"
AIV = "aiv/matmul_relu_incore_1_aiv"
AIC = "aic/matmul_relu_incore_0_aic"


@pytest.fixture(scope="module")
def cann(tmp_path_factory) -> Path:
    gxx15 = shutil.which("g++-15")
    if gxx15 is None:
        pytest.skip("needs g++-15 on PATH (tools/build-simpler.sh writes a shim into the simpler venv's "
                    "bin/: put that first on PATH; docs/platforms.md)")
    # PTO-ISA's CPU headers need C++20+ and leave libstdc++ calls unresolved in a static link (payload only)
    return make_fake_cann(tmp_path_factory.mktemp("cann") / "cann", cxx=gxx15, std="c++23", unresolved=True)


def cli(cann: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pypto_build", *args], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "ASCEND_HOME_PATH": str(cann)})


def ran(out: str) -> set[str]:
    """The tasks a build ran (one `<task>  (<reason>)` line each)."""
    return {line.split("  (")[0] for line in out.splitlines() if "  (" in line and ":" in line.split("  (")[0]
            and not line.startswith(("pypto-build", "["))}


def objcopy_text(image: Path, tmp: Path) -> bytes:
    out = tmp / f"{image.name}.text"
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.text", str(image), str(out)], check=True)
    return out.read_bytes()


def test_device_kernels_compile_link_extract_as_separate_tasks(cann, tmp_path):
    root = Path(shutil.copytree(EXAMPLE, tmp_path / "ex"))
    first = cli(cann, "build", "--platform", "a2a3", str(root))
    assert first.returncode == 0, first.stdout + first.stderr
    assert ran(first.stdout) == {"orch:matmul_relu", "stamp:.",
                                 *(f"{s}:{k}" for s in ("compile", "link", "extract") for k in (AIV, AIC))}
    for core, stem, fid in (("aiv", "matmul_relu_incore_1_aiv", 1), ("aic", "matmul_relu_incore_0_aic", 0)):
        image = root / f"kernels/{core}/{stem}.o"                    # PyPTO's sidecar: the linked image
        payload = root / f"cache/incore_{fid}_{core}_{stem}_a2a3.bin"
        assert payload.read_bytes() == objcopy_text(image, tmp_path) and payload.stat().st_size > 0
    assert '"platform": "a2a3"' in (root / "cache/binary_context.json").read_text()

    kernel = root / "kernels/aiv/matmul_relu_incore_1_aiv.cpp"
    kernel.write_text(kernel.read_text().replace("for (int64_t i = 0; i < M; ++i)", "for (int64_t i = M; i-- > 0;)", 1))
    second = cli(cann, "build", "--platform", "a2a3", str(root))
    assert second.returncode == 0, second.stdout + second.stderr
    assert ran(second.stdout) == {f"compile:{AIV}", f"link:{AIV}", f"extract:{AIV}", "stamp:."}
    assert second.stdout.splitlines()[-1] == "pypto-build: 1 compiled, 2 up to date, 1 stamp(s) written"
    third = cli(cann, "build", "--platform", "a2a3", str(root))
    assert ran(third.stdout) == set() and third.stdout.splitlines()[-1] == "pypto-build: 0 compiled, 3 up to date"

    # A lost image is relinked and nothing recompiled; the same bytes again leave the payload's extraction current.
    (root / "kernels/aic/matmul_relu_incore_0_aic.o").unlink()
    fourth = cli(cann, "build", "--platform", "a2a3", str(root))
    assert ran(fourth.stdout) == {f"link:{AIC}", "stamp:."}


def test_device_and_host_builds_keep_their_own_state(cann, tmp_path):
    """a2a3's binaries (PyPTO's places) and host's (.pypto_build/host/) are apart, and so is their build state:
    switching back and forth compiles, links and extracts nothing."""
    root = Path(shutil.copytree(EXAMPLE, tmp_path / "ex"))
    assert cli(cann, "build", "--platform", "a2a3", str(root)).returncode == 0
    assert ran(cli(cann, "build", "--platform", "host", str(root)).stdout) == {
        "orch:matmul_relu", f"compile:{AIV}", f"compile:{AIC}", "stamp:."}
    for platform in ("a2a3", "host", "a2a3"):
        os.utime(root / "kernels/aiv/matmul_relu_incore_1_aiv.cpp")     # past the no-op record: doit decides
        done = cli(cann, "build", "--platform", platform, str(root))
        assert ran(done.stdout) == set() and done.stdout.splitlines()[-1] == "pypto-build: 0 compiled, 3 up to date"


def test_device_replay_without_an_npu_stops_with_one_line(cann, tmp_path):
    root = Path(shutil.copytree(EXAMPLE, tmp_path / "ex"))
    done = cli(cann, "replay", "--platform", "a2a3", str(root))
    assert done.returncode != 0
    assert "platform a2a3: this machine has no Ascend NPU" in done.stdout + done.stderr
    assert (root / "cache/incore_1_aiv_matmul_relu_incore_1_aiv_a2a3.bin").is_file()     # the build did compile
