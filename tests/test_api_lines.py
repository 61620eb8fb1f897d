"""The library's lines name the library's parameters, never the command line's flags (issue 33, items 2 and 7):
`errors.say_fix` words a remedy for the front end that runs. And `config=` takes a dict of RunConfig's fields."""
from __future__ import annotations

from pathlib import Path

import pytest

from pypto_build import build, replay, validate
from pypto_build.builddir.runconfig import RunConfig
from pypto_build.errors import ArgumentError, BuildError, ToolchainError, command_line, say_fix
from pypto_build.testing import synth


@pytest.fixture(scope="module")
def l2(tmp_path_factory) -> Path:
    root = synth.write_l2(tmp_path_factory.mktemp("api_lines") / "d", kernels=2, golden=True, pto=True)
    build(root)
    return root


def test_say_fix_names_the_flag_only_under_the_command_line():
    assert say_fix("--platform host", 'platform="host"') == 'platform="host"'
    with command_line():
        assert say_fix("--platform host", 'platform="host"') == "--platform host"
    assert say_fix("--platform host", 'platform="host"') == 'platform="host"'


def test_simpler_not_importable_at_run_time_says_the_same_remedies(monkeypatch):
    """Where simpler cannot be imported when a run needs it, the line points at the same recipe for building it
    and the host runtime as every other line about a missing simpler, in the words of the front end that runs."""
    import builtins

    from pypto_build.platforms.simpler.run import import_simpler

    real = builtins.__import__

    def refuse(name, *args, **kwargs):
        if name.partition(".")[0] in ("simpler", "simpler_setup"):
            raise ImportError(f"No module named {name!r}")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", refuse)
    with pytest.raises(ToolchainError) as api:
        import_simpler()
    with command_line(), pytest.raises(ToolchainError) as cli:
        import_simpler()
    assert 'tools/build-simpler.sh' in str(api.value) and "pip install" not in str(api.value)
    assert 'pass platform="host"' in str(api.value) and "--platform" not in str(api.value)
    assert "pass --platform host" in str(cli.value)


def test_a_simulator_without_simpler_names_the_api_parameter(l2, monkeypatch):
    """replay(config=RunConfig(platform="a2a3sim")) where simpler is missing: what the caller can do, in the
    API's words; the platform asked for is refused, never replaced."""
    from pypto_build.platforms import installed
    monkeypatch.setattr(installed, "simpler_missing", lambda: "PyPTO's runtime simpler is not installed for x")
    with pytest.raises(ToolchainError) as info:
        replay(l2, config=RunConfig(platform="a2a3sim"), progress=None)
    line = str(info.value)
    assert 'pass platform="host"' in line and "leave platform None" in line and "--platform" not in line, line
    assert 'docs/platforms.md, "Building simpler locally": tools/build-simpler.sh' in line
    assert "pip install" not in line


def test_an_unapplied_pto_edit_names_the_api_parameters(tmp_path):
    root = synth.write_l2(tmp_path / "d", kernels=2, golden=True, pto=True)
    build(root)
    with open(root / "ptoas" / "main_group.pto", "a", encoding="utf-8") as handle:
        handle.write("// edited\n")
    with pytest.raises(BuildError) as info:
        build(root, ptoas=None)
    said = str(info.value) + " ".join(f.message for f in info.value.failures)
    assert "allow_unapplied_pto=True" in said and "ptoas=" in said, said
    assert "--allow-unapplied-pto" not in said and "--ptoas" not in said, said


def test_config_may_be_a_dict_of_runconfig_fields(l2):
    result = validate(l2, config={"platform": "host", "log_level": "warn"})
    assert result.platform == "host"


def test_a_dict_with_an_unknown_field_is_refused_in_one_line(l2):
    with pytest.raises(ArgumentError) as info:
        replay(l2, config={"platfrom": "host"}, progress=None)
    line = str(info.value)
    assert line.startswith("config: 'platfrom' is not a RunConfig field; pass a RunConfig or a dict of its fields (")
    assert "\n" not in line and "platform, device_id" in line
