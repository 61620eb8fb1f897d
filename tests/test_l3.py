"""Distributed (L3) replay on the host runtime: the one L3 driver (runtime.run_l3) with the host backend (HostL3)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pypto_build.testing import synth
from pypto_build.api import build
from pypto_build.run.golden import load_golden
from pypto_build.errors import PyptoBuildError
from pypto_build.builddir.runconfig import RunConfig
from pypto_build.culprits import read_dump
from pypto_build.platforms.host.runtime import HostL3
from pypto_build.platforms.l3_driver import run_l3
from pypto_build.platforms.host.runtime.executor import ExecutorError

from conftest import copy_dir

pytestmark = pytest.mark.slow

HOST = RunConfig()
ENTRY_LINE = "host_orch._pypto_distributed_entry = True"


@pytest.fixture(scope="session")
def built_l3g(tmp_path_factory) -> Path:
    root = synth.write_l3(tmp_path_factory.mktemp("pristine3g") / "l3", golden=True)
    build(root, jobs=2)
    return root


@pytest.fixture
def l3g(built_l3g, tmp_path) -> Path:
    return copy_dir(built_l3g, tmp_path / "l3")


def inputs(root: Path) -> dict[str, torch.Tensor]:
    return dict(load_golden(root).inputs())


def run_distributed(root: Path, args: list, *, config: RunConfig = HOST, device_ids=(0, 1),
                    say=lambda _line: None) -> list[str]:
    return run_l3(root, args, HostL3(config, say), say=say, device_ids=device_ids)


def run(root: Path, named: dict[str, torch.Tensor], config: RunConfig = HOST, lines: list | None = None) -> list[str]:
    say = lines.append if lines is not None else (lambda _line: None)
    return run_distributed(root, list(named.values()), config=config, device_ids=(0, 1), say=say)


def expected_out(named: dict[str, torch.Tensor], chip_b_half: float = 0.5) -> torch.Tensor:
    """Both chips: y = x; y = y * c + 2x (c = 0.5, or `chip_b_half` for chip_b)."""
    x = named["a"]
    for c in (0.5, chip_b_half):
        x = x * 1.0 * c + x * 2.0
    return x


def edit_host_orch(root: Path, old: str, new: str) -> None:
    path = root / "orchestration" / "host_orch.py"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_result_matches_golden_in_place_and_stand_ins_are_removed(l3g):
    named = inputs(l3g)
    out = named["out"]
    ptr = out.data_ptr()
    lines: list[str] = []
    assert run(l3g, named, lines=lines) == []
    assert out.data_ptr() == ptr and named["out"] is out  # written into the caller's own storage
    golden = load_golden(l3g)
    torch.testing.assert_close(out, golden.expected(named)["out"], rtol=golden.rtol, atol=golden.atol)
    assert any("4 dispatch(es)" in line for line in lines)
    assert not {"simpler", "pypto", "pypto.runtime.distributed_runner"} & set(sys.modules)


def test_shared_caller_tensors_are_used_directly(l3g):
    named = {k: v.share_memory_() for k, v in inputs(l3g).items()}
    ptr = named["out"].data_ptr()
    run(l3g, named)
    assert named["out"].data_ptr() == ptr
    torch.testing.assert_close(named["out"], expected_out(named))


def test_unplaced_dispatches_go_round_robin_and_cross_rank_order_holds(l3g):
    # _submit_chip(..., None): chip_a of a row runs on rank 0, chip_b (reading chip_a's row) on rank 1.
    path = l3g / "orchestration" / "host_orch.py"
    path.write_text(path.read_text().replace("config, rank__idx_v0)", "config, None)"))
    named = inputs(l3g)
    files = run(l3g, named, RunConfig(enable_dump_args=1))
    torch.testing.assert_close(named["out"], expected_out(named))
    programs = {Path(f).parent.relative_to(l3g / "dfx_outputs").as_posix(): json.loads(Path(f).read_text())
                for f in files if f.endswith("dispatch_program.json")}
    assert programs == {"rank0/d0": {"program": "chip_a"}, "rank0/d1": {"program": "chip_a"},
                        "rank1/d0": {"program": "chip_b"}, "rank1/d1": {"program": "chip_b"}}


@pytest.mark.parametrize("old,new,named_feature", [
    ("    t__tmp_v0 = world_size\n",
     "    t__tmp_v0 = world_size\n    with (_domain_provider or orch.allocate_domain)(name=\"comm_d0\", "
     "workers=[*range(world_size)], window_size=32, buffers=[CommBufferSpec(name=\"b\", dtype=\"opaque\", "
     "count=8, nbytes=32)]) as __comm_d0:\n        pass\n",
     "communication domains (orch.allocate_domain)"),
    ("import make_tensor_arg\n", "import make_tensor_arg\nfrom simpler.task_interface import Tensor\n",
     "simpler.task_interface.Tensor"),
    ("        _keep.append(_ta_0)\n", "        orch.submit_sub(sub_ids[\"sampler\"], _ta_0)\n",
     "SubWorkers (orch.submit_sub)"),
    ("TensorArgType.OUTPUT_EXISTING)", "TensorArgType.OUTPUT)", "runtime-allocated outputs"),
])
def test_unimplemented_feature_is_one_line_naming_it(l3, old, new, named_feature):
    edit_host_orch(l3, old, new)
    with pytest.raises(ExecutorError) as info:
        run(l3, {"a": torch.zeros(2, 16), "out": torch.zeros(2, 16)})
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"host runtime: {named_feature}")
    assert "not implemented for distributed programs" in message and "host_orch.py" in message
    assert "simpler" not in sys.modules


@pytest.mark.parametrize("extra,found", [("", "found 0"), ("host_orch._pypto_distributed_entry = True\n"
                                                            "helper = lambda: None\n"
                                                            "def other(*a, **k):\n    pass\n"
                                                            "other._pypto_distributed_entry = True\n",
                                                            "found 2: host_orch, other")])
def test_entry_must_be_unique(l3, extra, found):
    edit_host_orch(l3, ENTRY_LINE + "\n", extra)
    with pytest.raises(PyptoBuildError, match=f"exactly one function marked `_pypto_distributed_entry = True`, "
                                            f"{found}"):
        run(l3, {"a": torch.zeros(2, 16), "out": torch.zeros(2, 16)})


def test_host_orch_bug_names_its_line(l3):
    edit_host_orch(l3, "    t__tmp_v0 = world_size\n", "    t__tmp_v0 = world_size\n    tensors[\"nope\"]\n")
    with pytest.raises(ExecutorError, match=r"host_orch\.py:\d+: KeyError: 'nope'"):
        run(l3, {"a": torch.zeros(2, 16), "out": torch.zeros(2, 16)})


def test_bad_arguments_and_unbuilt_chip_are_clear(tmp_path):
    root = synth.write_l3(tmp_path / "l3")  # not built
    with pytest.raises(PyptoBuildError, match=r"the host driver takes 2 argument\(s\) \(a, out\), got 1"):
        run_distributed(root, [torch.zeros(2, 16)], config=HOST, device_ids=(0, 1), say=lambda _l: None)
    with pytest.raises(ExecutorError, match=r"rank [01] \(device [01]\), dispatch d0 \(chip_a\): .*build the dir"):
        run(root, {"a": torch.zeros(2, 16), "out": torch.zeros(2, 16)})


def test_diagnostics_per_rank_and_dispatch_replace_stale_dirs(l3g):
    dfx = l3g / "dfx_outputs"
    for stale in ("rank0/d7", "rank5/d0"):
        (dfx / stale).mkdir(parents=True)
        (dfx / stale / "old.json").write_text("{}")
    (dfx / "rank0" / "notes").mkdir()
    named = inputs(l3g)
    files = run(l3g, named, RunConfig(enable_chip_swimlane=1, enable_dump_args=2))
    assert not (dfx / "rank0/d7").exists() and not (dfx / "rank5/d0").exists()
    assert (dfx / "rank0" / "notes").is_dir()  # only d<k> dirs are dispatch dirs
    assert all(Path(f).is_file() for f in files)
    for rank in (0, 1):
        for k, chip in enumerate(("chip_a", "chip_b")):
            leaf = dfx / f"rank{rank}" / f"d{k}"
            assert json.loads((leaf / "dispatch_program.json").read_text()) == {"program": chip}
            (swim,) = leaf.glob("merged_swimlane_*.json")
            events = json.loads(swim.read_text())["traceEvents"]
            assert {e["name"] for e in events if e.get("cat") in ("aic", "aiv")} == \
                {f"{chip}_incore_0_aic", f"{chip}_incore_1_aiv"}
            dump = json.loads((leaf / "args_dump" / "args_dump.json").read_text())     # simpler's format
            assert [r["func_id"] for r in dump["args"] if r["arg_index"] == 0] == [[0], [1]]
            assert dump["args"][0]["shape"] == [16] and dump["bin_file"] == "args.bin"
            assert (leaf / "args_dump" / "args.bin").stat().st_size == sum(r["bin_size"] for r in dump["args"]) > 0
            tasks = read_dump(leaf / "args_dump").tasks                             # the one reader reads it
            assert [(t.func_id, len(t.outputs)) for t in tasks] == [((0,), 1), ((1,), 1)]
            assert all(t.outputs[0].name.startswith("t__") for t in tasks)     # host_orch's names for them
    assert len(files) == 16
    torch.testing.assert_close(named["out"], expected_out(named))


def test_editing_one_chip_kernel_and_rebuilding_changes_the_result(l3g):
    kernel = synth.kernel_path(l3g / "next_levels" / "chip_b", 1)
    kernel.write_text(kernel.read_text().replace("out[i] * 0.5f", "out[i] * 0.25f"))
    result = build(l3g)
    assert result.compiled  # only chip_b's kernel is rebuilt
    named = inputs(l3g)
    run(l3g, named)
    torch.testing.assert_close(named["out"], expected_out(named, chip_b_half=0.25))
    assert not torch.allclose(named["out"], expected_out(named))


@pytest.mark.parametrize("signature,world", [("(tensors, *, world_size=1)", "world_size"),
                                             ("(tensors, **kw)", "kw['world_size']")])
def test_alloc_intermediates_gets_the_world_size_by_name(l3g, signature, world):
    """The one driver calls `_alloc_intermediates` as PyPTO does (issue 23 item 3): `world_size=` whenever the
    allocator takes it by name, so an intermediate sized by it has a row per rank."""
    edit_host_orch(l3g, "def _alloc_intermediates(tensors, world_size=1):\n"
                        "    tensors[\"mid_0\"] = torch.zeros((2, 16), dtype=torch.float32).share_memory_()\n",
                   f"def _alloc_intermediates{signature}:\n"
                   f"    tensors[\"mid_0\"] = torch.zeros(({world}, 16), dtype=torch.float32)\n")
    named = inputs(l3g)
    run(l3g, named)
    torch.testing.assert_close(named["out"], expected_out(named))


@pytest.mark.parametrize("link", ["dfx_outputs/rank0", "dfx_outputs/rank1/d0"])
def test_a_symlinked_dispatch_folder_is_refused_and_nothing_is_deleted(l3g, link):
    """Stale dispatch folders are cleared before a diagnostics run, but never through a link (issue 23 item 3):
    the run stops before it starts, in one line, and every file is where it was."""
    kept = l3g / "kept"
    (kept / "d0").mkdir(parents=True)
    (kept / "d0" / "mine.txt").write_text("the user's")
    stale = l3g / "dfx_outputs" / "rank1" / "d3"
    stale.mkdir(parents=True)
    (l3g / link).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(kept if link.endswith("rank0") else kept / "d0", l3g / link)
    named = inputs(l3g)
    with pytest.raises(PyptoBuildError) as info:
        run(l3g, named, RunConfig(enable_dump_args=1))
    assert "\n" not in str(info.value) and str(info.value).startswith(f"{l3g / link}: a symbolic link")
    assert (kept / "d0" / "mine.txt").read_text() == "the user's" and stale.is_dir()
    assert not torch.equal(named["out"], expected_out(named))           # nothing ran


def test_replay_refuses_a_symlinked_dispatch_folder_in_one_line(l3g):
    """A link among the dispatch folders is the user's to fix, not a failed program: `pypto-build replay` says
    it in one error line naming the link and the fix, and exits 2 (a user error), with nothing deleted."""
    kept = l3g / "kept"
    (kept / "d0").mkdir(parents=True)
    (kept / "d0" / "mine.txt").write_text("the user's")
    (l3g / "dfx_outputs").mkdir()
    os.symlink(kept, l3g / "dfx_outputs" / "rank0")
    done = subprocess.run([sys.executable, "-m", "pypto_build", "replay", "--platform", "host", "--dump-args-level",
                           "1", str(l3g)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [done.stderr.strip()], done.stderr       # one line, nothing else
    assert done.stderr.startswith(f"pypto-build: error: {l3g / 'dfx_outputs' / 'rank0'}: a symbolic link")
    assert "replace the link with a folder" in done.stderr
    assert (kept / "d0" / "mine.txt").read_text() == "the user's"


def test_rank_workers_are_forked_from_one_server_and_see_the_callers_environment_at_each_call(l3g, monkeypatch):
    """Issue 33 item 11: a rank worker is forked from one server that imported torch once (not a new interpreter
    per rank and call), reused by the next call in the process; it still takes the caller's environment as it is
    at that call (the server's is that of its start). The kernel writes its worker's parent pid and a variable."""
    from pypto_build import DistributedCompiledProgram

    kernel = synth.kernel_path(l3g / "next_levels" / "chip_b", 1)
    text = kernel.read_text().replace("out[i] = out[i] * 0.5f + a[i] * 2.0f;",
                                      'out[i] = i == 0 ? (float)getppid() : (float)atof(getenv("PYPTO_TEST_VALUE"));')
    kernel.write_text("#include <cstdlib>\n#include <unistd.h>\n" + text)
    program = DistributedCompiledProgram.from_dir(l3g, platform="host")
    seen = []
    for value in ("1.5", "2.5"):
        monkeypatch.setenv("PYPTO_TEST_VALUE", value)
        named = inputs(l3g)
        program(named["a"], named["out"])
        seen.append(named["out"])
    parents = {int(out[rank, 0]) for out in seen for rank in (0, 1)}
    assert len(parents) == 1 and parents != {os.getpid()}          # one server, the same for both calls
    assert [float(out[rank, 1]) for out in seen for rank in (0, 1)] == [1.5, 1.5, 2.5, 2.5]


def test_a_kernel_rebuilt_between_two_calls_runs_its_new_code_on_the_reused_rank_server(l3g):
    """Issue 33 item 11's fast path steps aside for a rebuilt kernel: the server the workers are forked from
    never loads a kernel, so the second call of a program in one process runs the rebuilt binary, as a fresh
    process would (the same result as the in-process driver on a new pool)."""
    from pypto_build import DistributedCompiledProgram

    program = DistributedCompiledProgram.from_dir(l3g, platform="host")
    named = inputs(l3g)
    program(named["a"], named["out"])
    torch.testing.assert_close(named["out"], expected_out(named))
    kernel = synth.kernel_path(l3g / "next_levels" / "chip_b", 1)
    kernel.write_text(kernel.read_text().replace("out[i] * 0.5f", "out[i] * 0.25f"))
    again = inputs(l3g)
    program(again["a"], again["out"])               # builds what changed, then runs on the same server
    torch.testing.assert_close(again["out"], expected_out(again, chip_b_half=0.25))
    fresh = inputs(l3g)
    run(l3g, fresh)
    assert torch.equal(again["out"], fresh["out"])
