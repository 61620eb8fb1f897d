"""The docs and the help texts say what the tool does: each claim checked here is run (or read from the code that
decides it) and compared with what the doc says. docs/cli.md against the parser: test_cli.py."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pypto_build.cli.main import VERBS, _BY_NAME
from pypto_build.cli.example import EXAMPLES

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SCRIPT = ROOT / "tools" / "build-simpler.sh"
# What a user of the project does not have: the developers' own folder and its reference notes. (Spelt so that
# this file does not name them either.)
OUTSIDE = re.compile("|".join((r"\.\./shared", r"shared[/](tools|reference)", r"/work[/]shared", "steer" "ing",
                               r"(simpler-toolchain|simpler-runtime|pypto-build-output|doit-engine)[.]md",
                               "pypto-replay" "-doc", r"§\d")))     # § N: a section of those notes


def run(*argv: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def section(doc: str, title: str) -> str:
    """The text of `## title` up to the next `## ` heading."""
    text = (DOCS / doc).read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def one_line(text: str) -> str:
    return " ".join(text.split())


def example_copy(tmp: Path, name: str = "matmul_relu") -> Path:
    return Path(shutil.copytree(EXAMPLES / name, tmp / name))


def test_no_tracked_file_names_anything_outside_the_project():
    listed = run("git", "ls-files", "-z", cwd=ROOT)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: no list of tracked files")
    hits = []
    for name in filter(None, listed.stdout.split("\0")):
        path = ROOT / name
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_bytes().decode("utf-8", "replace").splitlines(), 1):
            if OUTSIDE.search(line):
                hits.append(f"{name}:{number}: {line.strip()[:100]}")
    assert not hits, "\n".join(hits)


def test_ci_jobs_help_guide_and_ci_md_agree_that_it_counts_directories():
    # ci.run_ci: `jobs` directories at once, each in its own process building one unit at a time
    done = run("pypto-build", "ci", "--help", env={**os.environ, "COLUMNS": "300"})
    jobs = next(line for line in done.stdout.splitlines() if "--jobs N" in line)
    assert "N directories at once" in jobs and "compiles" not in jobs.replace("compiling one unit at a time", "")
    assert "`-j N` runs N directories at once" in one_line(section("guide.md", "Many directories (CI)"))
    assert "`ci -j N` is directories at once" in one_line((DOCS / "ci.md").read_text(encoding="utf-8"))


def test_replay_and_validate_help_say_they_run_on_the_recorded_platform(tmp_path):
    for name in ("replay", "validate"):
        verb = _BY_NAME[name]
        assert "host runtime" not in verb.help + verb.description, name
        assert "the platform DIR records" in verb.description, name
        shown = run("pypto-build", name, "--help", env={**os.environ, "COLUMNS": "300"}).stdout
        description = shown.split("\n\n")[1]                   # usage, description, arguments
        assert "host runtime" not in description and "the platform DIR records" in one_line(description)
    doit = run("doit", "help", "replay", cwd=tmp_path).stdout
    purpose = one_line(doit.split("OPTIONS")[0])
    assert "host runtime" not in purpose and "on the platform it records" in purpose
    from pypto_build.compat.runner import render_run_script
    from pypto_build.compat.runner_main import make_parser
    from pypto_build.builddir.sidecars import load_compiled_meta
    assert "host runtime" not in make_parser().description and "records" in make_parser().description
    script = render_run_script(load_compiled_meta(EXAMPLES / "matmul_relu" / "compiled_meta.json"))
    assert "always uses the" not in script and "on the platform\nthe directory records" in script


def test_guide_says_the_default_platform_is_the_recorded_one():
    from pypto_build.platforms import cannot_serve, choose
    chosen = choose(EXAMPLES / "matmul_relu", env={}, cannot_serve=cannot_serve)
    assert chosen.recorded == "a2a3sim"
    assert chosen.name == "a2a3sim" if cannot_serve("a2a3sim") is None else (chosen.name, bool(chosen.fallback)) == (
        "host", True)
    bullet = one_line(section("guide.md", "Commands").split("* `--platform")[1].split("\n* ")[0])
    assert "else the platform the directory records" in bullet and "falls back to `host`" in bullet
    assert "stop with a message" not in bullet and "`host` (default" not in bullet


@pytest.mark.slow
def test_device_platform_without_cann_exits_as_the_docs_say(tmp_path):
    ex = example_copy(tmp_path)
    meta = json.loads((ex / "compiled_meta.json").read_text())
    (ex / "compiled_meta.json").write_text(json.dumps({**meta, "platform": "a2a3"}))
    done = run("pypto-build", "build", str(ex), env={k: v for k, v in os.environ.items() if k not in (
        "ASCEND_HOME_PATH", "PYPTO_BUILD_PLATFORM")})
    assert len(done.stderr.strip().splitlines()) == 1 and "ASCEND_HOME_PATH" in done.stderr
    platforms = re.search(r"A device platform \(`a2a3`, `a5`\) without CANN: one line naming `ASCEND_HOME_PATH`, "
                          r"exit (\d)", one_line((DOCS / "platforms.md").read_text(encoding="utf-8")))
    guide = re.search(r"a recorded device platform without CANN stops with one line naming `ASCEND_HOME_PATH` "
                      r"\(exit (\d)\)", one_line(section("guide.md", "Commands")))
    assert platforms and guide
    assert done.returncode == int(platforms.group(1)) == int(guide.group(1))


def task_table() -> list[list[str]]:
    """The rows of the guide's task table (one table: no blank line splits it)."""
    lines = section("guide.md", "What it does").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| task |"))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[start + 2:end]]
    assert [r[0].split(":")[0] for r in rows] == ["`compile", "`orch", "`stamp", "`ptoas", "`splice"]
    return rows


def table_outputs(column: int, platform: str) -> list[str]:
    """The binaries the table names in `column` for compile/orch/stamp, as globs."""
    rows = [r for r in task_table() if r[0].startswith(("`compile", "`orch", "`stamp"))]
    return [re.sub(r"<platform>", platform, re.sub(r"<(?!platform)[a-z_]+>", "*", re.search(r"`([^`]+)`",
                                                                                            r[column]).group(1)))
            for r in rows]


@pytest.mark.slow
def test_guide_task_table_names_where_a_host_build_writes(tmp_path):
    ex = example_copy(tmp_path)
    done = run("pypto-build", "build", "--platform", "host", str(ex))
    assert done.returncode == 0, done.stdout + done.stderr
    for pattern in table_outputs(2, "host"):
        assert list(ex.glob(pattern)), pattern
    assert not list(ex.glob("kernels/*/*.so")) and not (ex / "cache").exists()       # nothing in PyPTO's places


@pytest.mark.simpler
@pytest.mark.slow
def test_guide_task_table_names_where_a_simulator_build_writes(tmp_path):
    if shutil.which("g++-15") is None:
        pytest.skip("needs g++-15 on PATH (tools/build-simpler.sh writes a shim into the simpler venv's bin/: put "
                    "that first on PATH; docs/platforms.md)")
    ex = example_copy(tmp_path)
    done = run("pypto-build", "build", "--platform", "a2a3sim", str(ex))
    assert done.returncode == 0, done.stdout + done.stderr
    for pattern in table_outputs(3, "a2a3sim"):
        assert list(ex.glob(pattern)), pattern


def test_doit_commands_the_docs_quote_are_accepted(tmp_path):
    ex = example_copy(tmp_path)
    quoted = {m for doc in [*DOCS.glob("*.md"), ROOT / "README.md"]
              for m in re.findall(r"`doit (pypto-build(?: -[^`|]+))`", doc.read_text(encoding="utf-8"))}
    assert quoted
    for command in sorted(quoted):
        done = run("doit", *command.split(), "--dry-run", cwd=ex)
        assert done.returncode == 0, f"`doit {command}` in the docs: {done.stderr.strip()}"


def test_guide_describes_every_verb():
    guide = (DOCS / "guide.md").read_text(encoding="utf-8")
    assert not [v.name for v in VERBS if not re.search(rf"pypto-build {re.escape(v.name)}\b(?!-)", guide)]
    assert "pypto-build example --l3" in guide


def test_build_simpler_script_says_where_the_sources_are_and_which_commits(tmp_path):
    done = run("bash", str(SCRIPT))
    assert done.returncode == 2 and done.stdout == ""
    usage = done.stderr
    assert "https://github.com/hw-native-sys/simpler.git" in usage
    assert "https://github.com/hw-native-sys/pto-isa.git" in usage
    pinned = re.search(r"^DEFAULT_SIMPLER_COMMIT=([0-9a-f]{40})$", SCRIPT.read_text(), re.M).group(1)
    assert f"simpler  {pinned}" in usage and pinned in (DOCS / "platforms.md").read_text(encoding="utf-8")
    bad = run("bash", str(SCRIPT), str(tmp_path / "no-such-dir"), str(tmp_path), str(tmp_path / "venv"))
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "no-such-dir" in bad.stderr
    assert not (tmp_path / "venv").exists()


PACKAGE = ROOT / "pypto_build"
CHECKOUT = ("tests", "tools", "bench")
# Files and folders of a PyPTO build directory, of a user's tree or of the tools we integrate with: not ours.
NOT_OURS = {"golden.py", "kernel_config.py", "host_orch.py", "run.py", "dodo.py", "pypto_build.py", "setup.py",
            "sitecustomize.py", "_binary_cache.py", "elf_parser.py", "cache/external/", "include/pto/"}
# The docs that describe the code as it is (the benchmark notes record the revisions they measured).
LIVING = ("architecture.md", "guide.md", "platforms.md", "ci.md", "reliability.md", "../README.md")
MODULE_FILE = re.compile(r"(?<![\w./-])((?:[A-Za-z_]\w*/)*[A-Za-z_]\w*\.py)\b")
FOLDER = re.compile(r"(?<![\w./-])((?:[A-Za-z_]\w*/)+)(?![\w.])")


def unknown_modules(text: str) -> list[str]:
    """The module files (`x.py`, `folder/x.py`, `pypto_build/...`) and package folders (`run/`) a doc names
    that do not exist. A path that starts with one of the package's folder names is looked up under the
    package at any depth (`host/run.py` is `platforms/host/run.py`); `tests/`, `tools/` and `bench/` paths,
    and a bare file name, may also be the checkout's own (`test_docs.py`)."""
    ours = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")}
    folders = {p.relative_to(PACKAGE).as_posix() + "/" for p in PACKAGE.rglob("*") if p.is_dir()}
    folder_names = {f.rstrip("/").rpartition("/")[2] for f in folders}
    checkout = {p.name for top in CHECKOUT for p in (ROOT / top).rglob("*.py")}
    names = {name.rpartition("/")[2] for name in ours} | checkout | NOT_OURS

    def under_package(path: str, known: set[str]) -> bool:
        return any(f"/{m}".endswith(f"/{path}") for m in known)

    missing = []
    for name in [*MODULE_FILE.findall(text), *FOLDER.findall(text)]:
        path = name.removeprefix("pypto_build/")
        first = path.split("/")[0]
        if name in NOT_OURS:
            continue
        if first in CHECKOUT:
            found = (ROOT / path).exists()
        elif name.startswith("pypto_build/"):
            found = (PACKAGE / path).exists()
        elif "/" not in path.rstrip("/"):
            found = path in names if path.endswith(".py") else (name == path and first not in folder_names
                                                                 or under_package(path, folders))
        elif first in folder_names:
            found = under_package(path, ours if path.endswith(".py") else folders)
        else:
            found = True                            # not a path of ours (a build directory's, a user's)
        if not found:
            missing.append(name)
    return sorted(set(missing))


def test_unknown_modules_sees_a_moved_module():
    assert unknown_modules("`request.py`, `runtime/l3_driver.py`, `pypto_build/engine/noop.py`, `run/tasks/`, "
                           "`pypto_build/shards.py`") == [
        "pypto_build/engine/noop.py", "pypto_build/shards.py", "request.py", "run/tasks/", "runtime/l3_driver.py"]
    assert unknown_modules("`platforms/l3_driver.py`, `host/run.py`, `plan/noop.py`, `golden.py`, "
                           "`tests/test_docs.py`, `platforms/host/runtime/`") == []


@pytest.mark.parametrize("doc", LIVING)
def test_the_docs_name_only_modules_that_exist(doc):
    """docs/architecture.md draws the tree, the other docs point into it: a module moved or renamed without
    the docs fails here."""
    assert unknown_modules((DOCS / doc).read_text(encoding="utf-8")) == []
