"""Environment variables are judged in one place (`pypto_build.core.settings`; issue 11, item 13).

The CLI side (one line, exit 2, nothing written) is in the bad-input corpus
(`tests/bad_input_corpus.py`, `_environment_cases`); here the functions other
modules call, and the library API.
"""
from __future__ import annotations

import pytest

from pypto_build.core import settings
from pypto_build.testing import synth
from pypto_build.api import build
from pypto_build.errors import PyptoBuildError
from pypto_build.core.settings import SettingError


@pytest.mark.parametrize("raw, expected", [(None, 600.0), ("", 600.0), ("  ", 600.0), ("2", 2.0), ("0.5", 0.5),
                                           (" 30 ", 30.0), ("1e3", 1000.0)])
def test_seconds_accepts(raw, expected):
    env = {} if raw is None else {"PYPTO_RUN_TIMEOUT": raw}
    assert settings.seconds("PYPTO_RUN_TIMEOUT", 600, env) == expected


@pytest.mark.parametrize("raw, problem", [("soon", "is not a number"), ("nan", "is not a number"),
                                          ("NaN", "is not a number"), ("inf", "is infinite"),
                                          ("-Infinity", "is infinite"), ("0", "is not positive"),
                                          ("-1", "is not positive"), ("1e999", "is infinite"), ("5s", "is not a number")])
def test_seconds_refuses_in_one_line(raw, problem):
    with pytest.raises(SettingError) as info:
        settings.seconds("PYPTO_RUN_TIMEOUT", 600, {"PYPTO_RUN_TIMEOUT": raw})
    assert str(info.value) == (f"PYPTO_RUN_TIMEOUT={raw!r}: {problem}; set it to a positive number of seconds "
                               "(e.g. PYPTO_RUN_TIMEOUT=600, the default) or unset it")
    assert isinstance(info.value, PyptoBuildError) and isinstance(info.value, ValueError)


def test_words_and_cache_size():
    assert settings.words("CXX", {}, "g++") == ["g++"]
    assert settings.words("CXXFLAGS", {"CXXFLAGS": "-O2 -DNAME='a b'"}) == ["-O2", "-DNAME=a b"]
    with pytest.raises(SettingError, match=r"^CXX='ccache \"g\+\+': cannot be split into words \(no closing "):
        settings.words("CXX", {"CXX": 'ccache "g++'})
    assert settings.cache_size({}) == 5 * 2**30
    assert settings.cache_size({"PYPTO_BUILD_CACHE_SIZE": "1.5G"}) == int(1.5 * 2**30)
    with pytest.raises(SettingError, match=r"^PYPTO_BUILD_CACHE_SIZE='-1G': not a size; set it to"):
        settings.cache_size({"PYPTO_BUILD_CACHE_SIZE": "-1G"})
    assert settings.seconds(*settings.COMPILER_TIMEOUT, env={}) == 900.0
    assert settings.seconds(*settings.PTOAS_TIMEOUT, env={}) == 60.0


def test_bad_value_stops_the_api_before_anything_is_written(tmp_path, monkeypatch):
    root = synth.write_l2(tmp_path / "d", kernels=1)
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    monkeypatch.setenv("PYPTO_COMPILER_TIMEOUT", "nan")
    with pytest.raises(SettingError, match="PYPTO_COMPILER_TIMEOUT='nan'"):
        build(root)
    monkeypatch.setenv("PYPTO_COMPILER_TIMEOUT", "5")
    monkeypatch.setenv("CXXFLAGS", "-DX='")
    with pytest.raises(SettingError, match="CXXFLAGS=\"-DX='\""):
        build(root)
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before


@pytest.mark.parametrize("raw, expected", [(None, True), ("", True), ("1", True), ("TRUE", True), (" yes ", True),
                                           ("0", False), ("False", False), ("no", False)])
def test_pto_rebuild_takes_yes_and_no(raw, expected):
    assert settings.pto_rebuild({} if raw is None else {"PYPTO_REBUILD_FROM_PTO": raw}) is expected


@pytest.mark.parametrize("raw", ["maybe", "off", "2", "nope"])
def test_pto_rebuild_refuses_anything_else(raw):
    """Issue 22 item 8: PyPTO would read these as on (and run ptoas); here they are one line."""
    with pytest.raises(SettingError) as info:
        settings.check_environment({"PYPTO_REBUILD_FROM_PTO": raw})
    assert str(info.value).startswith(f"PYPTO_REBUILD_FROM_PTO={raw!r}: not a yes/no value; set it to 0 ")


def test_platform_variable_is_named_when_unknown():
    known = ("host", "a2a3sim")
    assert settings.platform(known, {}) is None and settings.platform(known, {"PYPTO_BUILD_PLATFORM": "host"}) == "host"
    with pytest.raises(SettingError) as info:
        settings.platform(known, {"PYPTO_BUILD_PLATFORM": "bar"})
    assert str(info.value) == ("PYPTO_BUILD_PLATFORM='bar': not a platform; set it to one of host, a2a3sim, or unset "
                               "it to target the platform the directory records")
