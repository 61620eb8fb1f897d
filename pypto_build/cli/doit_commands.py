"""`pypto-build doit <command> DIR`: doit's own commands on a build directory's graph (`engine.BuildDirMain`).

`run` goes through the one pipeline, as `pypto-build build` does (`verbs.run_verb`): its
lines and exit status are the result's (`BuildResult.status`: bad input 2, a failed unit 1),
and the no-op record may answer it. doit's `run` options keep their meaning: `-n`
is `--jobs`, `--continue` `--keep-going`, task names and `--recompile` and the graph's
options are the build's, and the options a build has no word for (`--reporter`,
`--verbosity`, `--always-execute`, ...: `engine.DOIT_ONLY`) ride in the request as
parsed values (`Request.doit`), handed to doit's `run` by the engine. The other commands
(`list`, `info`, `forget`, `clean`, `ignore`, `reset-dep`) run on the engine with the
pipeline's bookkeeping (`pipeline.BOOKKEEPING`: the no-op record is removed before any of them
can change the state).
"""
from __future__ import annotations

from pathlib import Path

from ..core.exits import guarded
from ..engine import DOIT_ONLY, BuildDirLoader, BuildDirMain, BuildDirRun
from ..errors import UserError
from ..pipeline import BOOKKEEPING


class PipelineRun(BuildDirRun):
    """`pypto-build doit run DIR [TASK...]`: doit's `run` command line (its options, its help), built by the
    pipeline."""

    def execute(self, params, args):
        return guarded(lambda: self.build(params, list(args)))

    def build(self, params, tasks: list[str]) -> int:
        """The build `params` and `tasks` ask for, through the pipeline: its status."""
        from ..verbs import run_verb
        self.loader.setup(params)           # the build root (`--dir`)
        defaults, _ = self.cmdparser.parse([])
        given = tuple((name, params[name]) for name in DOIT_ONLY if params.get(name) != defaults.get(name))
        values = {**params, "jobs": params.get("num_process") or 1, "keep_going": bool(params.get("continue"))}
        return run_verb("build", values, self.loader.root, tasks, doit=given)


def doit_verb(command: str, words: list[str]) -> int:
    """`pypto-build doit COMMAND DIR [...]`: DIR is the first word that is not an option (`doit list --all DIR`)."""
    from ..builddir.layout import find_root
    if not words:
        raise UserError("doit needs a build directory: pypto-build doit <command> DIR [...]")
    rest = list(words)
    directory = Path(rest.pop(next((i for i, a in enumerate(rest) if not a.startswith("-")), 0)))
    if not directory.is_dir():
        from ..core.safeio import unreachable
        what = "not a directory" if directory.exists() else unreachable(directory)
        raise UserError(f"{directory}: {what}; usage: pypto-build doit <command> DIR [...]")
    loader = BuildDirLoader(find_root(directory), bookkeeping=BOOKKEEPING)
    return BuildDirMain(loader, run=PipelineRun).run([command, *rest])
