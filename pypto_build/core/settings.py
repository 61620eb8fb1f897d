"""Our environment variables, parsed in one place.

A bad value is refused while planning, before anything is written: one line
naming the variable, its value, what is wrong and the fix (`SettingError`, a
`UserError`: exit 2, no traceback). Consumers call these functions
instead of reading `os.environ` themselves, so a value is judged the same way
everywhere (and a doit action never meets a value planning did not accept).
Standard library only: the no-op path imports this.
"""
from __future__ import annotations

import math
import os
import re
import shlex
import stat
from collections.abc import Mapping

from ..errors import UserError, say_fix

COMPILER_TIMEOUT = ("PYPTO_COMPILER_TIMEOUT", 900.0)
PTOAS_TIMEOUT = ("PYPTO_PTOAS_TIMEOUT", 60.0)
RUN_TIMEOUT = ("PYPTO_RUN_TIMEOUT", 1800.0)        # a replayed program (run/child.py)
PLATFORM = "PYPTO_BUILD_PLATFORM"                  # the target, over the one the directory records
REBUILD_FROM_PTO = "PYPTO_REBUILD_FROM_PTO"
_OFF, _ON = ("0", "false", "no"), ("1", "true", "yes")        # PyPTO turns the .pto stage off for the first three
CACHE = "PYPTO_BUILD_CACHE"                        # the artefact cache's directory (--cache-dir)
CACHE_SIZE = "PYPTO_BUILD_CACHE_SIZE"
REMOTE_CACHE = "PYPTO_BUILD_REMOTE_CACHE"          # the remote cache's URL (--remote-cache)
LAUNCHER = "PYPTO_BUILD_LAUNCHER"                  # the compile launcher (--launcher)
EMIT_DEBUG_RUNNER = "PYPTO_EMIT_DEBUG_RUNNER"       # PyPTO's: 0 writes no debug/run.py (emit-runner, example)
PCH = "PYPTO_BUILD_PCH"                            # precompiled preludes: 0 turns them off (--no-pch)
PCH_SIZE = "PYPTO_BUILD_PCH_SIZE"                  # the store of precompiled preludes' size limit
VARIANTS_SIZE = "PYPTO_BUILD_VARIANTS_SIZE"        # the store of the kept variants' binaries and sources
KEEP_REPLAY = "PYPTO_BUILD_KEEP_REPLAY"            # 0: a run keeps no output tensors under .pypto_build/replay
DEFAULT_CACHE_BYTES = 5 * 2**30
DEFAULT_VARIANTS_BYTES = 2 * 2**30      # the binaries of a few hundred variants of a large program
DEFAULT_PCH_BYTES = 2 * 2**30           # about twenty PTO-ISA preludes (~100 MB each)
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SIZE_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*", re.IGNORECASE)


class SettingError(UserError, ValueError):
    """An environment variable has a value we cannot use."""


def _env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def seconds(name: str, default: float, env: Mapping[str, str] | None = None) -> float:
    """A timeout in seconds from `$name` (unset or empty: `default`); finite and > 0, else `SettingError`."""
    raw = _env(env).get(name)
    if raw is None or not raw.strip():
        return float(default)
    return judge_seconds(name, raw, default)


def judge_seconds(name: str, raw: object, default: float) -> float:
    """`raw` (from `$name` or an option called `name`) as a timeout: finite and > 0, else `SettingError`."""
    try:
        value = float(raw)
        problem = ("is not a number" if math.isnan(value) else "is infinite" if math.isinf(value)
                   else "is not positive" if value <= 0 else "")
    except ValueError:
        problem = "is not a number"
    if problem:
        raise SettingError(f"{name}={raw!r}: {problem}; set it to a positive number of seconds "
                           f"(e.g. {name}={default:g}, the default) or unset it")
    return value


_EXAMPLES = {"CXX": "ccache g++", "CXXFLAGS": '-O2 -DNAME="a b"'}


def split_words(value: str, name: str) -> list[str]:
    """`value` split as a shell would (it came from `$name`); unbalanced quotes are a `SettingError`."""
    try:
        return shlex.split(value)
    except ValueError as exc:
        example = _EXAMPLES.get(name, "word 'two words'")
        raise SettingError(f"{name}={value!r}: cannot be split into words ({str(exc).lower()}: unbalanced "
                           f"quotes or a trailing backslash); fix the quoting as a shell would read it "
                           f"(e.g. {name}={shlex.quote(example)}) or unset it") from None


def words(name: str, env: Mapping[str, str] | None = None, default: str = "") -> list[str]:
    """`$name` (unset or empty: `default`) split into words as a shell would."""
    return split_words(_env(env).get(name) or default, name)


def parse_size(text: str) -> int:
    """Bytes for "500M", "5G", "1.5G", "64KiB" or a plain byte count (binary units); ValueError otherwise."""
    match = _SIZE_RE.fullmatch(text)
    if not match:
        raise ValueError(f"invalid cache size {text!r} (expected e.g. 500M, 5G or a byte count)")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def cache_size(env: Mapping[str, str] | None = None) -> int:
    """The artefact cache's size limit from `$PYPTO_BUILD_CACHE_SIZE` (unset or empty: 5G)."""
    return _size(env, CACHE_SIZE, DEFAULT_CACHE_BYTES, "5G")


def pch_size(env: Mapping[str, str] | None = None) -> int:
    """The precompiled preludes' store's size limit from `$PYPTO_BUILD_PCH_SIZE` (unset or empty: 2G)."""
    return _size(env, PCH_SIZE, DEFAULT_PCH_BYTES, "2G")


def _size(env: Mapping[str, str] | None, name: str, default: int, default_text: str) -> int:
    raw = _env(env).get(name, "")
    if not raw.strip():
        return default
    try:
        return parse_size(raw)
    except ValueError:
        raise SettingError(f"{name}={raw!r}: not a size; set it to a byte count or a size such as 500M, "
                           f"5G or 1.5G (binary units), or unset it for the default {default_text}") from None


def variants_size(env: Mapping[str, str] | None = None) -> int:
    """The kept variants' store's size limit from `$PYPTO_BUILD_VARIANTS_SIZE` (unset or empty: 2G)."""
    return _size(env, VARIANTS_SIZE, DEFAULT_VARIANTS_BYTES, "2G")


def pto_rebuild(env: Mapping[str, str] | None = None) -> bool:
    """Whether `$PYPTO_REBUILD_FROM_PTO` lets edited `.pto` files regenerate kernels: False for 0 / false / no
    (PyPTO's words, any case), True when unset, empty or 1 / true / yes; anything else is a `SettingError`
    (PyPTO would take `off` or a typo as on and run ptoas)."""
    return _switch(env, REBUILD_FROM_PTO, _OFF, _ON, "set it to 0 (or false, no) to leave edited .pto files out, "
                   "or to 1 (or true, yes) or unset it to regenerate kernels from them")


def precompiled_preludes(env: Mapping[str, str] | None = None) -> bool:
    """Whether `$PYPTO_BUILD_PCH` lets kernels take precompiled preludes: False for 0 / false / no / off (any
    case), True when unset, empty or 1 / true / yes / on; anything else is a `SettingError`."""
    return _switch(env, PCH, (*_OFF, "off"), (*_ON, "on"), "set it to 0 (or off) to compile every kernel without "
                   "a precompiled prelude, or to 1 (or on) or unset it to use them")


def keep_replay(env: Mapping[str, str] | None = None) -> bool:
    """Whether `$PYPTO_BUILD_KEEP_REPLAY` lets a run keep its output tensors (`.pypto_build/replay/`): False for
    0 / false / no / off (any case), True when unset, empty or 1 / true / yes / on; else a `SettingError`."""
    return _switch(env, KEEP_REPLAY, (*_OFF, "off"), (*_ON, "on"), "set it to 0 (or off) to keep no output "
                   "tensors of the last run, or to 1 (or on) or unset it to keep them")


def emit_debug_runner(env: Mapping[str, str] | None = None) -> bool:
    """Whether `$PYPTO_EMIT_DEBUG_RUNNER` lets debug/run.py be written: False for 0 / false / no (PyPTO's
    words, any case), True when unset, empty or 1 / true / yes; anything else is a `SettingError`."""
    return _switch(env, EMIT_DEBUG_RUNNER, _OFF, _ON, "set it to 0 (or false, no) to write no debug/run.py, "
                   "or to 1 (or true, yes) or unset it to write one")


def _switch(env: Mapping[str, str] | None, name: str, off: tuple[str, ...], on: tuple[str, ...], fix: str) -> bool:
    """A yes/no variable: False for a word of `off`, True when unset, empty or a word of `on` (any case); else
    a `SettingError` that says `fix`."""
    raw = _env(env).get(name)
    flag = (raw or "").strip().lower()
    if flag in off:
        return False
    if not flag or flag in on:
        return True
    raise SettingError(f"{name}={raw!r}: not a yes/no value; {fix}")


def platform(known: tuple[str, ...], env: Mapping[str, str] | None = None) -> str | None:
    """`$PYPTO_BUILD_PLATFORM` (unset or empty: None) when it is one of `known`, else a `SettingError`."""
    raw = _env(env).get(PLATFORM)
    if not raw:
        return None
    if raw not in known:
        raise SettingError(f"{PLATFORM}={raw!r}: not a platform; set it to one of {', '.join(known)}, or unset it "
                           "to target the platform the directory records")
    return raw


def cache_folder(given: str | None = None, env: Mapping[str, str] | None = None) -> str | None:
    """The artefact cache's folder: `given` (--cache-dir, cache_dir=), else $PYPTO_BUILD_CACHE (unset or empty:
    None). One that exists and is no folder (a file, a path through one) is a `SettingError`, before anything
    is written; one that does not exist yet is made by the first build that stores."""
    raw = given or _env(env).get(CACHE) or None
    if raw is None:
        return None
    try:
        mode = os.stat(os.path.expanduser(raw)).st_mode
    except (FileNotFoundError, PermissionError):
        return raw                  # made when first stored to (a permission is said then, in one line)
    except NotADirectoryError:
        what = "a path through a file, not a folder"
    else:
        if stat.S_ISDIR(mode):
            return raw
        what = "a file, not a folder" if stat.S_ISREG(mode) else "not a folder"
    if given:
        said, fix = say_fix(f"--cache-dir {raw!r}", f"cache_dir={raw!r}"), say_fix("pass --cache-dir", "pass cache_dir=")
    else:
        said, fix = f"{CACHE}={raw!r}", f"set {CACHE} to"
    raise SettingError(f"{said}: {what}; {fix} a folder for the artefact cache (made when missing)")


def check_environment(env: Mapping[str, str] | None = None, *, cache: bool = False, preludes: bool = True) -> None:
    """Judge every variable a build reads (the cache size only when a cache is used, the preludes' store size
    only when preludes are on: `preludes` and `$PYPTO_BUILD_PCH`); the first bad one raises."""
    env = _env(env)
    seconds(*COMPILER_TIMEOUT, env=env)
    seconds(*PTOAS_TIMEOUT, env=env)
    seconds(*RUN_TIMEOUT, env=env)
    words("CXX", env, "g++")
    words("CXXFLAGS", env)
    pto_rebuild(env)
    keep_replay(env)
    variants_size(env)
    if precompiled_preludes(env) and preludes:
        pch_size(env)
    if cache:
        cache_size(env)


def check_planning(known: tuple[str, ...], env: Mapping[str, str] | None = None, *, preludes: bool = True) -> None:
    """What planning judges before it reads a build directory (`graph.load_graph`), and the no-op record's
    answer before it answers (`noop.refuse`): every variable a build reads and `$PYPTO_BUILD_PLATFORM`."""
    check_environment(env, preludes=preludes)
    platform(known, env)
