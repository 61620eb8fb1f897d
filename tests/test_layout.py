"""Classifying build directories and refusing paths that escape them."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from pypto_build.testing import synth
from pypto_build.api import build
from pypto_build.errors import LayoutError, ToolchainError
from pypto_build.builddir.layout import BuildKind, classify, load_layout
from pypto_build.platforms.host.places import host_binary, host_external_binary
from pypto_build.platforms import implementation


def test_kinds(tmp_path):
    assert classify(synth.write_l2(tmp_path / "l2"))[0] is BuildKind.L2
    assert classify(synth.write_l3(tmp_path / "l3"))[0] is BuildKind.L3
    assert classify(synth.write_multi_orch(tmp_path / "m"))[0] is BuildKind.MULTI_ORCH


def test_sub_builds_are_next_levels_entries_with_kernel_config(tmp_path):
    root = synth.write_l3(tmp_path / "l3", chips=("zeta", "alpha"))
    (root / "next_levels" / "leftover_without_config").mkdir()
    layout = load_layout(root)
    assert [s.name for s in layout.sub_builds] == ["alpha", "zeta"]
    assert [s.rel for s in layout.sub_builds] == ["next_levels/alpha", "next_levels/zeta"]
    l2 = load_layout(synth.write_l2(tmp_path / "l2"))
    assert [s.rel for s in l2.sub_builds] == ["."]


def test_l2_kernel_config_wins_over_stale_next_levels(tmp_path):
    root = synth.write_l2(tmp_path / "l2")
    synth.write_l2(root / "next_levels" / "old", kernels=1)
    assert [s.name for s in load_layout(root).sub_builds] == ["."]


def test_mixed_markers_are_ambiguous(tmp_path):
    root = synth.write_l2(tmp_path / "l2")
    (root / "distributed_meta.json").write_text("{}")
    with pytest.raises(LayoutError, match="ambiguous.*distributed_meta.json"):
        classify(root)


def test_not_a_build_dir(tmp_path):
    with pytest.raises(LayoutError, match="not a build_output directory"):
        classify(tmp_path)


def test_a_parent_of_build_dirs_names_them(tmp_path):
    """build_output/ itself (issue 22, item 8): the build directories in it, at most five named, and `ci DIR/*/`."""
    parent = tmp_path / "build_output"
    synth.write_l2(parent / "_jit_a", kernels=1)
    (parent / "notes").mkdir()                      # not a build directory: never named
    with pytest.raises(LayoutError) as info:
        classify(parent)
    assert str(info.value) == f"{parent}: not a build directory itself, but {parent / '_jit_a'} is one; pass that"
    for name in ("_jit_b", "_jit_c", "_jit_d", "_jit_e", "_jit_f", "_jit_g"):
        synth.write_l3(parent / name) if name == "_jit_g" else synth.write_l2(parent / name, kernels=1)
    with pytest.raises(LayoutError) as info:
        classify(parent)
    assert str(info.value) == (f"{parent}: not a build directory itself, but holds 7 (_jit_a, _jit_b, _jit_c, _jit_d, "
                               f"_jit_e and 2 more); pass one of them, or build and validate them all with "
                               f"`pypto-build ci {parent}/*/`")


def _set_kernel_source(root: Path, old: str, new_expr: str) -> None:
    cfg = root / "kernel_config.py"
    text = cfg.read_text()
    needle = f'str(_ROOT_DIR / "kernels" / "aiv" / "{old}.cpp")'
    assert needle in text
    cfg.write_text(text.replace(needle, new_expr))


@pytest.mark.parametrize("expr", [
    'str(_ROOT_DIR / ".." / "outside.cpp")',
    "'/etc/hostname'",
])
def test_kernel_source_outside_is_refused(tmp_path, expr):
    root = synth.write_l2(tmp_path / "d", kernels=2)
    _set_kernel_source(root, "main_incore_1_aiv", expr)
    with pytest.raises(LayoutError, match="outside the build directory"):
        build(root)
    assert not (root / ".pypto_build").exists(), "nothing written on refusal"


def test_symlink_pointing_out_is_refused(tmp_path):
    root = synth.write_l2(tmp_path / "d", kernels=2)
    outside = tmp_path / "evil.cpp"
    outside.write_text(synth.kernel_path(root, 1).read_text())
    src = synth.kernel_path(root, 1)
    src.unlink()
    os.symlink(outside, src)
    with pytest.raises(LayoutError, match="outside the build directory"):
        build(root)


def test_external_kernel_outside_is_allowed(tmp_path):
    root = synth.write_l2(tmp_path / "d", kernels=2)
    ext = tmp_path / "ext" / "my_kernel.cpp"
    ext.parent.mkdir()
    ext.write_text(synth.kernel_path(root, 1).read_text().replace('"../common.h"', '"common.h"'))
    cfg = root / "kernel_config.py"
    cfg.write_text(cfg.read_text().replace(
        'str(_ROOT_DIR / "kernels" / "aiv" / "main_incore_1_aiv.cpp"), "core_type": "aiv"',
        f'{str(ext)!r}, "core_type": "aiv", "external": True'))
    result = build(root)
    assert "compile:aiv/my_kernel" in result.compiled
    assert (root / host_external_binary(1, "aiv", "my_kernel")).exists()
    assert not list(ext.parent.glob("*.so")), "nothing written next to an external source"


def test_missing_platform_tools_are_one_clear_error():
    with pytest.raises(ToolchainError, match="ASCEND_HOME_PATH is not set.*--platform a2a3sim, a5sim or host"):
        implementation("a2a3").locate({"PATH": os.environ["PATH"]})
    with pytest.raises(ToolchainError, match="unknown platform"):
        implementation("gpu")


def test_missing_compiler_is_one_clear_error(monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler-xyz")
    with pytest.raises(ToolchainError, match="no-such-compiler-xyz.*not found"):
        implementation("host").locate()


@pytest.mark.slow
def test_l3_leftover_sub_build_is_reported_and_built_only_when_asked(tmp_path):
    root = synth.write_l3(tmp_path / "l3")
    synth.write_l2(root / "next_levels" / "old_chip", kernels=1)      # an earlier compile's leftover
    (root / "next_levels/old_chip/compiled_meta.json").unlink()
    layout = load_layout(root)
    assert [s.name for s in layout.sub_builds] == ["chip_a", "chip_b"]
    assert layout.unreferenced == ("next_levels/old_chip",)
    result = build(root)
    assert not any("old_chip" in n for n in result.compiled)
    assert any("next_levels/old_chip: never referenced by orchestration/host_orch.py" in w for w in result.warnings)
    old_orch = root / "next_levels/old_chip" / host_binary("orchestration/main.cpp")
    assert not old_orch.exists()
    result = build(root, include_stale=True)
    assert [n for n in result.compiled if "old_chip" in n] == ["compile:old_chip/aic/main_incore_0_aic",
                                                               "orch:old_chip/main"]
    assert old_orch.is_file()
