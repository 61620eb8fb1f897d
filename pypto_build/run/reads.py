"""What golden.py's code reads while it runs in the child process: files, modules, environment variables.

The kept golden result is keyed on them (`golden_cache`, `golden_key`). An audit hook sees every file
Python opens and every module imported (files of the Python installation and of this package aside);
`os.environ` is replaced by `Environ`, the same variables, which records each one golden.py's code asks for
(`os.getenv`, `in`, `get`, iteration) with the value it saw. Not seen: reads in C or C++ (torch.from_file,
getenv in an extension) — the key holds the sub-build's own files whatever reads them, and the guide says
which variables count.
"""
from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from pathlib import Path


class Reads:
    """An audit hook that records the files golden.py's code opens and the modules it imports, and
    `os.environ` (`Environ`) the environment variables it reads (name -> the value it saw, None: unset)."""

    doing = "starting"
    _active: "Reads | None" = None
    _installed = False

    def __init__(self, sub: Path):
        import sysconfig

        self.sub = sub
        self.found: set[str] = set()
        self.imported: set[str] = set()         # top-level names of the modules imported meanwhile
        self.environ: dict[str, str | None] = {}
        self.written: set[str] = set()          # variables golden.py set itself before reading them
        skip = {sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(__file__).resolve().parents[1])}  # the package
        skip |= {p for p in sysconfig.get_paths().values() if p}
        self.skip = tuple(os.path.realpath(p) + os.sep for p in skip)
        if not Reads._installed:
            sys.addaudithook(Reads._hook)
            os.environ = Environ(os.environ)       # os.getenv reads through it too
            Reads._installed = True

    def __enter__(self) -> "Reads":
        self.modules = set(sys.modules)
        Reads._active = self
        return self

    def __exit__(self, *exc) -> None:
        Reads._active = None
        for name in set(sys.modules) - self.modules:
            self.imported.add(name.partition(".")[0])
            path = getattr(sys.modules[name], "__file__", None)
            if path:
                self.add(path)

    @staticmethod
    def _hook(event: str, args: tuple) -> None:
        active = Reads._active
        if active is None or event != "open" or not args:
            return
        path, mode, flags = (tuple(args) + (None, None))[:3]
        if isinstance(path, int) or path is None:
            return
        writing = (("w" in mode or "a" in mode or "x" in mode) and "+" not in mode) if isinstance(mode, str) \
            else isinstance(flags, int) and flags & os.O_ACCMODE == os.O_WRONLY
        if not writing:
            active.add(os.fsdecode(path))

    def add(self, path: str) -> None:
        real = os.path.realpath(path)
        if real.startswith(self.skip) or real.startswith(("/dev/", "/proc/", "/sys/")):
            return
        if f"{os.sep}__pycache__{os.sep}" in real:      # bytecode: the import's own cache of a .py we record
            return
        self.found.add(real)

    def paths(self) -> list[str]:
        return sorted(p for p in self.found if os.path.isfile(p))

    @staticmethod
    def saw(name: str, value: str | None) -> None:
        active = Reads._active
        if active is not None and name not in active.environ and name not in active.written:
            active.environ[name] = value

    @staticmethod
    def wrote(name: str) -> None:
        active = Reads._active
        if active is not None and name not in active.environ:
            active.written.add(name)


class Environ(MutableMapping):
    """`os.environ` in the child: the same variables, and every one golden.py's code reads (`in`, `get`,
    `os.getenv`, iteration) is recorded with the value it saw while a `Reads` is active."""

    def __init__(self, real):
        self._real = real

    def __getitem__(self, name):
        try:
            value = self._real[name]
        except KeyError:
            Reads.saw(name, None)
            raise
        Reads.saw(name, value)
        return value

    def __setitem__(self, name, value) -> None:
        Reads.wrote(name)
        self._real[name] = value

    def __delitem__(self, name) -> None:
        Reads.wrote(name)
        del self._real[name]

    def __iter__(self):
        return iter(self._real)

    def __len__(self) -> int:
        return len(self._real)

    def copy(self) -> dict:
        return dict(self.items())

    def __repr__(self) -> str:
        return repr(self._real)
