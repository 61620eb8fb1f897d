"""The one L3 driver's reconciled helpers (issue 23 item 3), tested fast and without torch: how
`_alloc_intermediates` is called, and the clearing of stale dispatch folders (a link is refused, nothing deleted).

Both backends (host runtime, simpler) run under this one driver; tests/test_l3.py and tests/test_simpler_l3.py
run it end to end."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pypto_build.errors import PyptoBuildError
from pypto_build.platforms.host.runtime import ExecutorError
from pypto_build.platforms.l3_driver import call_alloc
from pypto_build.platforms.dfx_outputs import clear_dispatch_dirs


def test_alloc_intermediates_is_called_as_pypto_calls_it(tmp_path):
    """`world_size` by name whenever the function takes it by name or through **kwargs (PyPTO's codegen emits
    `_alloc_intermediates(tensors, world_size=1)`); an older one-argument allocator gets `tensors` only."""
    seen: dict = {}

    def positional(tensors, world_size=1):
        seen["positional"] = world_size

    def keyword_only(tensors, *, world_size=1):
        seen["keyword_only"] = world_size

    def var_kw(tensors, **kw):
        seen["var_kw"] = kw

    def one(tensors):
        seen["one"] = sorted(tensors)

    def other_name(tensors, n=1):           # PyPTO passes the world size by its name only
        seen["other_name"] = n

    for fn in (positional, keyword_only, var_kw, one, other_name):
        call_alloc(fn, {}, 4, tmp_path / "host_orch.py")
    assert seen == {"positional": 4, "keyword_only": 4, "var_kw": {"world_size": 4}, "one": [], "other_name": 1}


def test_a_type_error_inside_the_allocator_is_the_programs_failure_never_a_retry(tmp_path):
    calls = []

    def boom(tensors, world_size=1):
        calls.append(world_size)
        raise TypeError("inner failure")

    with pytest.raises(ExecutorError, match=r": _alloc_intermediates failed: TypeError: inner failure$"):
        call_alloc(boom, {}, 2, tmp_path / "host_orch.py")
    assert calls == [2]


def _tree(base: Path) -> dict[str, str]:
    return {p.relative_to(base).as_posix(): p.read_text() for p in sorted(base.rglob("*")) if p.is_file()}


def test_stale_dispatch_folders_go_and_nothing_else(tmp_path):
    dfx = tmp_path / "dfx_outputs"
    for folder in ("rank0/d0", "rank0/d7", "rank5/d0", "rank0/notes", "other/d0"):
        (dfx / folder).mkdir(parents=True)
        (dfx / folder / "f.json").write_text(folder)
    (dfx / "merged_swimlane_1.json").write_text("pypto's")
    clear_dispatch_dirs(dfx)
    assert _tree(dfx) == {"merged_swimlane_1.json": "pypto's", "other/d0/f.json": "other/d0",
                          "rank0/notes/f.json": "rank0/notes"}
    clear_dispatch_dirs(tmp_path / "absent")            # nothing there: nothing to do


@pytest.mark.parametrize("link", ["dfx_outputs", "dfx_outputs/rank1", "dfx_outputs/rank0/d3"])
def test_a_symlinked_dispatch_folder_is_refused_before_anything_is_deleted(tmp_path, link):
    """A link where the run clears (the dfx folder, a rank*, a d<k>) is one line naming it, and nothing is
    deleted: not through the link, and not the stale folders beside it either."""
    root = tmp_path / "root"
    target = root / "kept"
    (target / "d0").mkdir(parents=True)
    (target / "d0" / "mine.txt").write_text("the user's")
    dfx = root / "dfx_outputs"
    if link != "dfx_outputs":
        (dfx / "rank0" / "d0").mkdir(parents=True)
        (dfx / "rank0" / "d0" / "old.json").write_text("stale")
    os.symlink(target, root / link)
    before = _tree(root)
    with pytest.raises(PyptoBuildError) as info:
        clear_dispatch_dirs(dfx)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{root / link}: a symbolic link where the run clears its dispatch folders")
    assert "nothing was deleted" in message
    assert _tree(root) == before


def test_the_stand_ins_are_replaced_in_sys_modules_by_one_module_only():
    """Issue 23 item 6's exception: only the L3 driver's stand-ins module (`runtime/l3_shims.py`) replaces
    `sys.modules` entries in the runtime and the platforms (the driver and both backends use it)."""
    import pypto_build
    package = Path(pypto_build.__file__).parent
    found = sorted(str(p.relative_to(package)) for family in ("runtime", "platforms")
                   for p in (package / family).glob("*.py")
                   if "sys.modules[" in p.read_text() or "sys.modules.update" in p.read_text())
    assert found == ["platforms/l3_shims.py"]


def test_the_driver_loads_without_torch_or_simpler():
    code = ("import sys; import pypto_build.platforms.l3_driver, pypto_build.platforms.simpler.l3; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'simpler', 'pypto')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
