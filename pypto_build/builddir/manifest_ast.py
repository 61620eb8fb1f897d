"""AST evaluation of the values in a PyPTO `kernel_config.py` (used by `pypto_build.builddir.manifest`).

`Evaluator` evaluates plain literals, `_ROOT_DIR`-style path expressions and
`_D.IN/_D.OUT/_D.INOUT` directions without executing anything; any other
expression is a `ManifestError` built by `manifest_error`, whose message is one
line: `<path>:<line>: <what is wrong>; expected <what was expected>. <how to fix>`.
"""
from __future__ import annotations

import ast
import warnings
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import ManifestError, one_line

__all__ = ["Evaluator", "FIX", "PATH_EXPECTED", "manifest_error", "one_line", "short"]

FIX = "Fix the entry by hand or recompile via ir.compile() to regenerate kernel_config.py"
PATH_EXPECTED = 'a string literal or str(_ROOT_DIR / "dir" / "file")'
_DIRECTIONS = ("IN", "OUT", "INOUT")
_DIR_EXPECTED = "_D.IN, _D.OUT or _D.INOUT"
_KINDS = {
    ast.Call: "function call", ast.Name: "name", ast.JoinedStr: "f-string", ast.ListComp: "comprehension",
    ast.SetComp: "comprehension", ast.DictComp: "comprehension", ast.GeneratorExp: "comprehension",
    ast.Lambda: "lambda", ast.BinOp: "operator expression", ast.Attribute: "attribute access",
    ast.Subscript: "subscript", ast.Starred: "unpacking",
}


def parse_quietly(source: str | bytes, path: Path) -> ast.Module:
    """ast.parse without the compiler's warnings (an invalid escape in a user's file is not ours to print)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(source, filename=str(path))


def manifest_error(path: Path, line: int | None, what: str, expected: str, fix: str = FIX) -> ManifestError:
    """Build the one-line `<path>:<line>: <what>; expected <expected>. <fix>` error."""
    where = str(path).replace("\n", " ").replace("\r", " ")
    return ManifestError(f"{where}:{line or 1}: {one_line(what, 300)}; expected {one_line(expected, 200)}. {fix}")


def short(value: Any) -> str:
    """A short one-line repr of `value` for messages."""
    try:
        return one_line(repr(value), 60)
    except Exception:  # pragma: no cover - repr of a literal cannot really fail
        return "<value>"


class Evaluator:
    """Evaluate value expressions of one parsed `kernel_config.py`; errors name `path`."""

    def __init__(self, text: str, path: Path) -> None:
        self.text = text
        self.file = path
        self.root_names: set[str] = set()
        self.dir_names: set[str] = {"_D", "ArgDirection"}

    # -- errors -----------------------------------------------------------
    def error(self, line: int | None, what: str, expected: str, fix: str = FIX) -> ManifestError:
        return manifest_error(self.file, line, what, expected, fix)

    def unsupported(self, node: ast.AST, where: str, expected: str) -> ManifestError:
        kind = _KINDS.get(type(node), type(node).__name__.lower())
        seg = ast.get_source_segment(self.text, node) or ""
        snippet = f" `{one_line(seg, 60)}`" if seg else ""
        return self.error(getattr(node, "lineno", 1), f"unsupported expression ({kind}){snippet} in {where}", expected)

    # -- value evaluators -------------------------------------------------
    def literal(self, node: ast.AST, where: str) -> Any:
        """A plain literal: str/int/float/bool/None, lists, tuples, dicts of those."""
        if isinstance(node, ast.Constant):
            if node.value is None or type(node.value) in (str, int, float, bool):
                return node.value
            raise self.unsupported(node, where, "a str, int, float, bool or None literal")
        if (isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd))
                and isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float)):
            return -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [self.literal(elt, where) for elt in node.elts]
            return items if isinstance(node, ast.List) else tuple(items)
        if isinstance(node, ast.Dict):
            out = {}
            for key, value in zip(node.keys, node.values):
                if key is None:
                    raise self.unsupported(value, where, "a dict literal without ** unpacking")
                k = self.literal(key, where)
                try:
                    hash(k)
                except TypeError:
                    raise self.error(key.lineno, f"unhashable dict key {short(k)} in {where}", "a str key") from None
                out[k] = self.literal(value, where)
            return out
        raise self.unsupported(node, where, "a literal (str, number, bool, None, list or dict)")

    def _is_path_call(self, node: ast.AST) -> bool:
        func = getattr(node, "func", None)
        return isinstance(node, ast.Call) and not node.keywords and len(node.args) == 1 and (
            (isinstance(func, ast.Name) and func.id == "Path")
            or (isinstance(func, ast.Attribute) and func.attr == "Path"
                and isinstance(func.value, ast.Name) and func.value.id == "pathlib"))

    def is_root_base(self, node: ast.AST | None) -> bool:
        """`_ROOT_DIR` or `Path(__file__)[.resolve()|.absolute()].parent`."""
        if isinstance(node, ast.Name):
            return node.id in self.root_names
        if not (isinstance(node, ast.Attribute) and node.attr == "parent"):
            return False
        inner = node.value
        if (isinstance(inner, ast.Call) and not inner.args and not inner.keywords
                and isinstance(inner.func, ast.Attribute) and inner.func.attr in ("resolve", "absolute")):
            inner = inner.func.value
        return (self._is_path_call(inner) and isinstance(inner.args[0], ast.Name)
                and inner.args[0].id == "__file__")

    def path(self, node: ast.AST, where: str, *, allow_root: bool = False) -> tuple[str, bool]:
        """Evaluate a path expression -> (posix path, rooted)."""
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str"
                and len(node.args) == 1 and not node.keywords):
            node = node.args[0]
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text, rooted = node.value, False
        else:
            parts: list[str] = []
            cur = node
            while isinstance(cur, ast.BinOp) and isinstance(cur.op, ast.Div):
                if not (isinstance(cur.right, ast.Constant) and isinstance(cur.right.value, str)):
                    raise self.unsupported(cur.right, where, "a string literal path component")
                parts.append(cur.right.value)
                cur = cur.left
            parts.reverse()
            if self.is_root_base(cur):
                base, rooted = ".", True
            elif (self._is_path_call(cur) and isinstance(cur.args[0], ast.Constant)
                  and isinstance(cur.args[0].value, str)):
                base, rooted = cur.args[0].value, False
            elif isinstance(cur, ast.Name) and cur.id in ("_ROOT_DIR", "ROOT_DIR"):
                raise self.error(cur.lineno, f"{cur.id} is used in {where} but not defined as Path(__file__).parent",
                                 "`_ROOT_DIR = Path(__file__).parent` at the top of the file")
            else:
                raise self.unsupported(cur if parts else node, where, PATH_EXPECTED)
            pure = PurePosixPath(base, *parts)
            rooted = rooted and not pure.is_absolute()
            text = pure.as_posix()
        if "\x00" in text:
            raise self.error(node.lineno, f"path in {where} contains a NUL character", PATH_EXPECTED)
        if not text or (text == "." and not allow_root):
            raise self.error(node.lineno, f"{where} is an empty path", "a path naming a file")
        return text, rooted

    def direction(self, node: ast.AST, where: str) -> str:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in self.dir_names:
            if node.attr in _DIRECTIONS:
                return node.attr
            raise self.error(node.lineno, f"unknown direction {node.value.id}.{node.attr} in {where}", _DIR_EXPECTED)
        raise self.unsupported(node, where, _DIR_EXPECTED)

    def signature(self, node: ast.AST, where: str) -> tuple[str, ...]:
        if not isinstance(node, (ast.List, ast.Tuple)):
            raise self.error(node.lineno, f"{where} is not a list", f"a list of {_DIR_EXPECTED}")
        return tuple(self.direction(elt, f"{where}[{i}]") for i, elt in enumerate(node.elts))

    def any_value(self, node: ast.AST, where: str) -> None:
        """Check an ignored (unknown-key) value is still a supported expression."""
        if isinstance(node, (ast.List, ast.Tuple)):
            for i, elt in enumerate(node.elts):
                self.any_value(elt, f"{where}[{i}]")
            return
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if key is None:
                    raise self.unsupported(value, where, "a dict literal without ** unpacking")
                self.literal(key, where)
                self.any_value(value, where)
            return
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in self.dir_names:
            self.direction(node, where)
            return
        try:
            self.literal(node, where)
        except ManifestError:
            self.path(node, where, allow_root=True)
