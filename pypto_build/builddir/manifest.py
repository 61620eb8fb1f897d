"""Read a PyPTO `kernel_config.py` without executing it.

The file is parsed with `ast`; only literals, `_ROOT_DIR`-style path
expressions and `_D.IN/_D.OUT/_D.INOUT` are evaluated (by
`pypto_build.builddir.manifest_ast.Evaluator`); this module finds the three manifest
assignments and validates their entries.  Every problem with the
input is reported as exactly one `ManifestError` whose message is one line:
`<path>:<line>: <what is wrong>; expected <what was expected>. <how to fix>`.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ManifestError, one_line
from ..core.limits import TooLarge, read_capped
from .manifest_ast import FIX, PATH_EXPECTED, Evaluator, manifest_error, parse_quietly, short

__all__ = ["KernelSpec", "OrchestrationSpec", "KernelConfig", "read_kernel_config", "parse_kernel_config",
           "DEFAULT_RUNTIME", "FIX"]

DEFAULT_RUNTIME = "tensormap_and_ringbuffer"
_TOP_NAMES = ("KERNELS", "ORCHESTRATION", "RUNTIME_CONFIG")


@dataclass(frozen=True)
class KernelSpec:
    """One `KERNELS` entry."""

    func_id: int
    name: str | None
    source: str
    rooted: bool
    core_type: str
    signature: tuple[str, ...]
    external: bool
    extra_include_dirs: tuple[str, ...]  # literals as written; _ROOT_DIR ones relative to the file's dir
    line: int


@dataclass(frozen=True)
class OrchestrationSpec:
    """The `ORCHESTRATION` dict."""

    source: str
    rooted: bool
    function_name: str
    signature: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class KernelConfig:
    """A parsed `kernel_config.py`."""

    path: Path
    kernels: tuple[KernelSpec, ...]
    orchestration: OrchestrationSpec
    runtime_config: dict = field(default_factory=dict, hash=False)
    runtime_line: int = 0           # line of the RUNTIME_CONFIG assignment (0: none, the default runtime)

    @property
    def runtime_name(self) -> str:
        """The runtime ABI name (`RUNTIME_CONFIG["runtime"]` or the default)."""
        return self.runtime_config.get("runtime", DEFAULT_RUNTIME)


class _Parser(Evaluator):
    """Evaluate the three manifest assignments of one parsed module."""

    # -- module level -----------------------------------------------------
    def run(self, tree: ast.Module) -> KernelConfig:
        defs: dict[str, tuple[ast.stmt, ast.AST, frozenset[str], frozenset[str]]] = {}
        for stmt in tree.body:
            target, value = self._simple_assign(stmt)
            if target is not None:
                if target in _TOP_NAMES:
                    if target in defs:
                        first = defs[target][0].lineno
                        raise self.error(stmt.lineno, f"{target} is assigned a second time (first at line {first})",
                                         f"exactly one assignment to {target}")
                    if value is None:
                        raise self.error(stmt.lineno, f"{target} is declared without a value",
                                         f"{target} = <literal>")
                    # names visible when the assignment would run
                    defs[target] = (stmt, value, frozenset(self.root_names), frozenset(self.dir_names))
                else:
                    if self.is_root_base(value):
                        self.root_names.add(target)
                    else:
                        self.root_names.discard(target)
                    self._check_other_statement(stmt)
                continue
            self._check_other_statement(stmt)
        for name in ("KERNELS", "ORCHESTRATION"):
            if name not in defs:
                raise self.error(1, f"{name} is not defined", f"a top-level assignment `{name} = ...`")
        handlers = {"RUNTIME_CONFIG": self._runtime_config, "ORCHESTRATION": self._orchestration,
                    "KERNELS": self._kernels}
        results: dict[str, Any] = {"RUNTIME_CONFIG": {}}
        for name in sorted(defs, key=lambda n: defs[n][0].lineno):  # report the first error in file order
            results[name] = handlers[name](self._enter(defs[name]))
        runtime_line = defs["RUNTIME_CONFIG"][0].lineno if "RUNTIME_CONFIG" in defs else 0
        return KernelConfig(self.file, results["KERNELS"], results["ORCHESTRATION"], results["RUNTIME_CONFIG"],
                            runtime_line)

    def _enter(self, definition: tuple[ast.stmt, ast.AST, frozenset[str], frozenset[str]]) -> ast.AST:
        """Restore the names bound at the definition's position; return its value."""
        _stmt, value, roots, dirs = definition
        self.root_names, self.dir_names = set(roots), set(dirs)
        return value

    def _simple_assign(self, stmt: ast.stmt) -> tuple[str | None, ast.AST | None]:
        """`NAME = value` / `NAME: ann = value` -> (NAME, value); else (None, None)."""
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            return stmt.targets[0].id, stmt.value
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            return stmt.target.id, stmt.value
        return None, None

    def _check_other_statement(self, stmt: ast.stmt) -> None:
        """Reject statements that could rebind or mutate the manifest names."""
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                bound = (alias.asname or alias.name).split(".")[0]
                if isinstance(stmt, ast.ImportFrom) and alias.name == "ArgDirection":
                    self.dir_names.add(bound)
                if bound in _TOP_NAMES:
                    raise self.error(stmt.lineno, f"{bound} is bound by an import", f"a literal `{bound} = ...`")
            return
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name in _TOP_NAMES:
            raise self.error(stmt.lineno, f"{stmt.name} is redefined by a def/class", f"a literal `{stmt.name} = ...`")
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return
        stack: list[ast.AST] = [stmt]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Name) and node.id in _TOP_NAMES:
                raise self.error(getattr(node, "lineno", stmt.lineno),
                                 f"{node.id} is used or modified outside its assignment",
                                 f"a single plain top-level `{node.id} = <literal>`")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and node is not stmt:
                continue
            stack.extend(ast.iter_child_nodes(node))

    # -- sections ---------------------------------------------------------
    def _dict(self, node: ast.AST, where: str) -> dict[str, ast.AST]:
        if not isinstance(node, ast.Dict):
            raise self.error(node.lineno, f"{where} is not a dict literal", "a dict literal {...}")
        out: dict[str, ast.AST] = {}
        for key, value in zip(node.keys, node.values):
            if key is None:
                raise self.unsupported(value, where, "a dict literal without ** unpacking")
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                raise self.error(key.lineno, f"non-string key in {where}", 'string keys such as "source"')
            if key.value in out:
                raise self.error(key.lineno, f'duplicate key "{key.value}" in {where}', "each key once")
            out[key.value] = value
        return out

    def _require(self, keys: dict[str, ast.AST], key: str, where: str, line: int) -> ast.AST:
        if key not in keys:
            raise self.error(line, f'{where} has no "{key}" key', f'a "{key}" entry')
        return keys[key]

    def _str(self, node: ast.AST, where: str, *, allow_none: bool = False) -> str | None:
        value = self.literal(node, where)
        if value is None and allow_none:
            return None
        if not isinstance(value, str) or not value:
            raise self.error(node.lineno, f"{where} is {short(value)}", "a non-empty string")
        return value

    def _runtime_config(self, node: ast.AST) -> dict:
        if not isinstance(node, ast.Dict):
            raise self.error(node.lineno, "RUNTIME_CONFIG is not a dict literal", "a dict of literals")
        value = self.literal(node, "RUNTIME_CONFIG")
        for key in value:
            if not isinstance(key, str):
                raise self.error(node.lineno, f"RUNTIME_CONFIG key {short(key)} is not a string", "string keys")
        checks = {
            "runtime": (lambda v: isinstance(v, str) and v != "", "a non-empty string"),
            "aicpu_thread_num": (lambda v: type(v) is int and v >= 0, "an int >= 0"),
            "enable_sdma": (lambda v: type(v) is bool, "True or False"),
        }
        for key, (ok, expected) in checks.items():
            if key in value and not ok(value[key]):
                line = next((k.lineno for k in node.keys if isinstance(k, ast.Constant) and k.value == key),
                            node.lineno)
                raise self.error(line, f'RUNTIME_CONFIG["{key}"] is {short(value[key])}', expected)
        return value

    def _orchestration(self, node: ast.AST) -> OrchestrationSpec:
        where = "ORCHESTRATION"
        keys = self._dict(node, where)
        source, rooted = self.path(self._require(keys, "source", where, node.lineno), f'{where}["source"]')
        fn = self._str(self._require(keys, "function_name", where, node.lineno), f'{where}["function_name"]')
        sig = self.signature(keys["signature"], f'{where}["signature"]') if "signature" in keys else ()
        for key, value in keys.items():
            if key not in ("source", "function_name", "signature"):
                self.any_value(value, f'{where}["{key}"]')
        return OrchestrationSpec(source, rooted, str(fn), sig, node.lineno)

    def _kernels(self, node: ast.AST) -> tuple[KernelSpec, ...]:
        if not isinstance(node, ast.List):
            raise self.error(node.lineno, "KERNELS is not a list literal", "a list of kernel dicts [{...}, ...]")
        specs: list[KernelSpec] = []
        seen: dict[int, int] = {}
        for i, entry in enumerate(node.elts):
            spec = self._kernel(entry, f"KERNELS[{i}]")
            if spec.func_id in seen:
                raise self.error(spec.line, f"duplicate func_id {spec.func_id} (also used by the kernel at line "
                                 f"{seen[spec.func_id]})", "a unique func_id per kernel")
            seen[spec.func_id] = spec.line
            specs.append(spec)
        return tuple(sorted(specs, key=lambda s: s.func_id))

    def _kernel(self, node: ast.AST, where: str) -> KernelSpec:
        if not isinstance(node, ast.Dict):
            raise self.error(node.lineno, f"{where} is not a dict literal",
                             'a dict {"func_id": ..., "source": ..., ...}')
        keys = self._dict(node, where)
        fid_node = self._require(keys, "func_id", where, node.lineno)
        func_id = self.literal(fid_node, f'{where}["func_id"]')
        if type(func_id) is not int or func_id < 0:
            raise self.error(fid_node.lineno, f'{where}["func_id"] is {short(func_id)}', "an int >= 0")
        source, rooted = self.path(self._require(keys, "source", where, node.lineno), f'{where}["source"]')
        ct_node = self._require(keys, "core_type", where, node.lineno)
        core_type = self.literal(ct_node, f'{where}["core_type"]')
        if core_type not in ("aic", "aiv") or not isinstance(core_type, str):
            raise self.error(ct_node.lineno, f'{where}["core_type"] is {short(core_type)}', '"aic" or "aiv"')
        name = self._str(keys["name"], f'{where}["name"]', allow_none=True) if "name" in keys else None
        external = False
        if "external" in keys:
            external = self.literal(keys["external"], f'{where}["external"]')
            if type(external) is not bool:
                raise self.error(keys["external"].lineno, f'{where}["external"] is {short(external)}', "True or False")
        includes: tuple[str, ...] = ()
        if "extra_include_dirs" in keys:
            inc = keys["extra_include_dirs"]
            if not isinstance(inc, (ast.List, ast.Tuple)):
                raise self.error(inc.lineno, f'{where}["extra_include_dirs"] is not a list',
                                 f"a list of paths ({PATH_EXPECTED})")
            # a _ROOT_DIR include dir stays relative to the file's directory, like `source`
            includes = tuple(self.path(elt, f'{where}["extra_include_dirs"][{j}]', allow_root=True)[0]
                             for j, elt in enumerate(inc.elts))
        sig = self.signature(keys["signature"], f'{where}["signature"]') if "signature" in keys else ()
        known = ("func_id", "name", "source", "core_type", "external", "extra_include_dirs", "signature")
        for key, value in keys.items():
            if key not in known:
                self.any_value(value, f'{where}["{key}"]')
        return KernelSpec(func_id, name, source, rooted, core_type, sig, external, includes, node.lineno)


def parse_kernel_config(text: str, path: Path) -> KernelConfig:
    """Parse `kernel_config.py` source text; raises only `ManifestError`."""
    path = Path(path)
    try:
        return _parse(text, path)
    except ManifestError:
        raise
    except (RecursionError, MemoryError) as exc:
        raise manifest_error(path, 1, f"kernel_config.py is nested too deeply to analyse ({type(exc).__name__})",
                             "the flat structure PyPTO generates") from None
    except Exception as exc:  # last-resort guard: the contract is ManifestError only
        raise manifest_error(path, 1,
                             f"kernel_config.py could not be analysed ({type(exc).__name__}: {one_line(exc, 200)})",
                             "the structure PyPTO generates") from None


def _parse(text: str, path: Path) -> KernelConfig:
    if not isinstance(text, str):
        raise manifest_error(path, 1, "kernel_config.py text is not a str", "decoded UTF-8 text")
    nul = text.find("\x00")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise manifest_error(path, line, "file contains a NUL byte", "Python source text")
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        tree = parse_quietly(text, path)
    except SyntaxError as exc:
        detail = one_line(exc.msg or "invalid syntax", 200)
        raise manifest_error(path, exc.lineno, f"Python syntax error ({detail})", "valid Python source") from None
    return _Parser(text, path).run(tree)


def read_kernel_config(path: Path) -> KernelConfig:
    """Read and parse `kernel_config.py` at `path`; raises only `ManifestError`."""
    path = Path(path)
    try:
        data = read_capped(path)
    except TooLarge as exc:
        raise manifest_error(path, 1, f"kernel_config.py {exc}", "a generated kernel_config.py",
                             "Restore the generated file or recompile via ir.compile() to regenerate it") from None
    except OSError as exc:
        reason = one_line(exc.strerror or exc, 200)
        raise manifest_error(path, 1, f"kernel_config.py cannot be read ({reason})", "a readable file",
                             "Check the path and permissions, or recompile via ir.compile() to regenerate "
                             "kernel_config.py") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise manifest_error(path, line, f"file is not valid UTF-8 (byte {exc.start})",
                             "UTF-8 Python source") from None
    return parse_kernel_config(text, path)
