"""`doit replay`, `doit pypto-build`, `doit pypto-validate`, `doit pypto-watch` (entry points `doit.COMMAND`).

Each is `pypto-build <verb>` with the same options (options.py), the same lines and
the same exit status (verbs.py, exits.py: a bad option too is one line and exit 2);
only the spelling of the front end differs. They
work in any build directory (or a subdirectory of one) without a dodo.py, and
never read a `doit.cfg`/`pyproject.toml` found there (a build directory is data).

A doit command name is global: doit refuses every dodo.py, in any project of the
environment, that defines a task of that name. So only `replay`, the entry point of a
build directory, has a plain name; the others carry a hyphen, which no `task_*`
function can (`NAMES`; docs/guide.md, "Names added to doit").
"""
from __future__ import annotations

import os

from doit.cmd_base import Command

from .. import options
from ..core.exits import OneLineOptions, guarded
from .watch import watch_options

_ALL = options.BUILD


class _Verb(OneLineOptions, Command):
    verb = "build"

    def __init__(self, task_loader=None, config=None, bin_name="doit", cmds=None, opt_vals=None, **kwargs):
        super().__init__(config={}, bin_name=bin_name, opt_vals=opt_vals)

    def execute(self, params, args):
        from ..verbs import run_verb

        directory = params.get("build_dir") or os.getcwd()
        return guarded(lambda: run_verb(self.verb, params, directory, list(args)))


class Build(_Verb):
    """`doit pypto-build [TASK...]`: compile what changed; `--dry-run` says what would run and why."""

    name = "pypto-build"
    verb = "build"
    doc_purpose = "build a PyPTO build directory incrementally (same as pypto-build build)"
    doc_usage = "[TASK ...]"
    doc_description = ("Compiles every kernel and orchestration whose inputs changed (by content), then writes "
                       "cache/binary_context.json per sub-build.")
    cmd_options = (options.DOIT_DIR, *options.doit_options((*_ALL, options.DRY_RUN)))


class Replay(_Verb):
    """`doit replay`: build what changed, run on golden.py's inputs (with --validate: compare)."""

    name = "replay"
    verb = "replay"
    doc_purpose = "replay a PyPTO build directory on the platform it records (same as pypto-build replay)"
    doc_usage = ""
    doc_description = ("Builds what changed (content-keyed), runs the program on golden.py's inputs in a child "
                       "process on the platform the directory records (or --platform's; see docs/platforms.md), "
                       "and with --validate compares outputs with compute_golden.")
    cmd_options = (options.DOIT_DIR, *options.doit_options((*_ALL, *options.RUN, options.VALIDATE)))


class Validate(_Verb):
    """`doit pypto-validate`: like replay --validate, reusing the last verdict while nothing it depends on changed."""

    name = "pypto-validate"
    verb = "validate"
    doc_purpose = "validate a PyPTO build directory against golden.py (same as pypto-build validate)"
    doc_usage = ""
    doc_description = ("Builds what changed, runs and validates; the verdict is reused while the binaries, "
                       "the run configuration and golden.py's kept result (with all it depends on) are unchanged.")
    cmd_options = (options.DOIT_DIR, *options.doit_options((*_ALL, *options.RUN)))


class Watch(_Verb):
    """`doit pypto-watch` in a build directory: `pypto-build watch` (not `auto`: the doit-auto1 plugin owns that
    name, and watches `file_dep`, which our tasks do not declare: they decide by content in `uptodate`)."""

    name = "pypto-watch"
    verb = "watch"
    doc_purpose = "watch a PyPTO build directory: rebuild, run and validate on every change (same as pypto-build watch)"
    doc_usage = ""
    doc_description = ("Builds, replays (with --validate: validates) and times the program, then repeats on every "
                       "change of a source, header, .pto, kernel_config.py, golden.py or its data. Ctrl-C ends it.")

    cmd_options = (options.DOIT_DIR, *options.doit_options(watch_options()))

    def execute(self, params, args):
        from .watch import watch_verb

        directory = params.get("build_dir") or os.getcwd()
        return guarded(lambda: watch_verb(params, directory))


NAMES: dict[str, str] = {cls.name: cls.verb for cls in (Replay, Build, Validate, Watch)}
"""Every name pypto_build adds to doit (its entry points) -> the `pypto-build` verb it runs."""
