"""The `watch` and `history` verbs with parsed option values: one behaviour for `pypto-build` and `doit pypto-watch`."""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from .. import options


def watch_options() -> tuple:
    """The option table of `watch`: the build's that make sense for a session, the run's, --validate, its own."""
    build = tuple(o for o in options.BUILD if o.dest in options.WATCH_BUILD)
    return (*build, *options.RUN, options.VALIDATE, *options.WATCH)


def watch_verb(values: Any, directory: Path | str) -> int:
    """`watch` with parsed option values (argparse namespace or doit dict): one behaviour for both front ends."""
    from ..errors import UserError
    from ..builddir.layout import find_root
    from ..builddir.markers import GOLDEN_PY
    from ..run import runnable
    from ..watch import watch
    from ..watch import Settings

    get = functools.partial(options.option_value, values)
    request = options.request(values)       # judged once: options, launcher, the remote cache's URL
    graph = request.plan(find_root(Path(directory)))       # the session's first plan: it says what can run
    root = runnable(graph).path
    if not (root / GOLDEN_PY).is_file():
        raise UserError(f"{root / GOLDEN_PY} not found; watch takes the program's inputs from golden.py — "
                        "add one (generate_inputs/compute_golden), or use `pypto-build build` after each edit")
    settings = Settings(request, validate=bool(get("validate", False)), runs=int(get("runs", 5)))
    return watch(root, settings, poll=True if get("poll", False) else None, graph=graph)


def history_verb(directory: Path | str) -> int:
    """`pypto-build history DIR`: the variants its verdicts recorded, oldest first (DIR must be a build directory;
    a multi-orchestration parent's sub-builds each have their own), then what its state holds (`state_report`)."""
    from ..builddir.markers import NEXT_LEVELS, next_level_names
    from ..builddir.state_dir import HISTORY, STATE_DIR
    from ..variants.history import History
    from .state_report import build_root, state_lines

    root = build_root(directory)
    subs = [f"{NEXT_LEVELS}/{name}" for name in next_level_names(root)
            if (root / NEXT_LEVELS / name / STATE_DIR / HISTORY).exists()]
    lines = History(root).listing() if not subs or (root / STATE_DIR / HISTORY).exists() else []
    for rel in subs:
        lines += [f"{rel}:", *("  " + line for line in History(root / rel).listing())]
    for line in [*lines, *state_lines(root)]:
        print(line)
    return 0
