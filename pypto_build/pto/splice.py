"""ptoas output -> kernel wrapper body: PyPTO's preprocessing and sentinel splice.

Pure string functions (reference sections 5.1, 5.4, 5.5). Every function takes
any `str` and either returns or raises `SpliceError`.
"""
from __future__ import annotations

import os
import re
import stat
from bisect import bisect_left, bisect_right
from pathlib import Path

from ..builddir.markers import KERNELS_DIR
from ..errors import SpliceError

__all__ = ["BEGIN", "END", "preprocess", "function_names", "find_target", "split", "splice", "signature_of"]

BEGIN = "// --- ptoas-generated code ---"
END = "// --- Kernel entry point ---"

_WHERE = {BEGIN: "on its own line just above the ptoas-generated code",
          END: "on its own line just above the kernel entry point (after the ptoas-generated code)"}


def _sentinel_problem(path: object, begin: int, end: int) -> str:
    """Why a kernel wrapper cannot take a ptoas body (`begin`, `end`: where its sentinel lines are, or -1), and
    how to fix it: a sentinel line deleted by hand is restored; none at all is a kernel that predates them."""
    cannot = "so the edited .pto's code cannot be spliced in"
    regenerate = "or recompile via ir.compile() to regenerate the kernel"
    if begin < 0 and end < 0:
        return (f"{path}: neither ptoas sentinel line ({BEGIN!r}, {END!r}) is in this kernel (written before PyPTO "
                f"marked them, or both deleted by hand), {cannot}; restore both, {regenerate}")
    if begin < 0 or end < 0:
        gone = BEGIN if begin < 0 else END
        return (f"{path}: the sentinel line {gone!r} is missing from this kernel (deleted by hand?), {cannot}; "
                f"restore it {_WHERE[gone]}, {regenerate}")
    return (f"{path}: the sentinel line {END!r} comes before {BEGIN!r} in this kernel, {cannot}; restore their "
            f"order ({BEGIN!r} {_WHERE[BEGIN]}, {END!r} {_WHERE[END]}), {regenerate}")


# --- 5.4 preprocessing ------------------------------------------------------

_TENSOR_RE = re.compile(r"\bTensor\b")
_ENTRY_RE = re.compile(r'(?:extern\s*"C"\s*)?(?:__global__\s+)?AICORE\s+void')
_AICORE_RE = re.compile(r"\bAICORE\b")

_IDENT_RE = re.compile(r"\b[A-Za-z_]\w*\b")
_ALIAS_RES = (
    # __ubuf__|__cbuf__ <type>* <alias> = <wrapper>.data();
    re.compile(r"^\s*__(?:ubuf|cbuf)__\s+.+?\*\s*(?P<alias>[A-Za-z_]\w*)\s*=\s*(?P<wrapper>[A-Za-z_]\w*)\.data\(\);\s*$"),
    # __gm__ <type>* <alias> = (__gm__ <type>*)<wrapper>;
    re.compile(r"^\s*__gm__\s+.+?\*\s*(?P<alias>[A-Za-z_]\w*)\s*=\s*\(__gm__\s+.+?\*\)\s*(?P<wrapper>[A-Za-z_]\w*);\s*$"),
)
# PyPTO's call pattern is `\bMGATHER(?:<[^;()]+>)?\(<dst>, <table>, <idx>[, <scratch>]\);` (identifiers,
# `\s*` around the commas only); `_find_call` runs the same search in linear time.
_MGATHER_AT_RE = re.compile(r"\bMGATHER")
_DELIM_RE = re.compile(r"[;()]")
_OPERANDS_RE = re.compile(
    r"(?P<dst>[A-Za-z_]\w*)\s*,\s*(?P<table>[A-Za-z_]\w*)\s*,\s*(?P<idx>[A-Za-z_]\w*)"
    r"(?:\s*,\s*(?P<scratch>[A-Za-z_]\w*))?\);"
)


def _keep_line(line: str) -> bool:
    """Step 1: False for ptoas's own includes, `using namespace pto;`, set_ffts_base_addr(."""
    s = line.strip()
    if s.startswith("#include") and ("pto-inst" in s or "cstdint" in s or "tensor.h" in s):
        return False
    return s != "using namespace pto;" and not s.startswith("set_ffts_base_addr(")


class _Aliases:
    """Pointer-alias definitions and identifier occurrences of a text, by line."""

    def __init__(self, lines: list[str]):
        self.n = len(lines)
        self.defs: dict[str, list[tuple[int, str]]] = {}  # alias -> [(line, wrapper)] in line order
        self.def_lines: dict[str, list[int]] = {}
        self.seen: dict[str, list[int]] = {}  # identifier -> line of each occurrence (sorted)
        for i, line in enumerate(lines):
            for ident in _IDENT_RE.findall(line):
                self.seen.setdefault(ident, []).append(i)
            for pattern in _ALIAS_RES:
                m = pattern.match(line)
                if m:
                    self.defs.setdefault(m["alias"], []).append((i, m["wrapper"]))
                    self.def_lines.setdefault(m["alias"], []).append(i)
                    break

    def resolve(self, alias: str, call: int) -> tuple[int, str] | None:
        """The last definition of `alias` before line `call`, if the alias is used
        exactly twice (definition + call) up to its next redefinition."""
        defs = self.defs.get(alias, [])
        k = bisect_left(self.def_lines.get(alias, []), call) - 1
        if k < 0:
            return None
        start = defs[k][0]
        stop = defs[k + 1][0] if k + 1 < len(defs) else self.n
        occ = self.seen.get(alias, [])
        if bisect_left(occ, stop) - bisect_left(occ, start) != 2:
            return None
        return defs[k]


def _find_call(line: str) -> tuple[int, str, re.Match[str]] | None:
    """The first MGATHER call of `line`: (start, `MGATHER<...>(` prefix, operands match ending at `);`)."""
    delims: list[int] | None = None
    for m in _MGATHER_AT_RE.finditer(line):
        at = m.end()
        if line.startswith("(", at):
            open_at = at
        elif line.startswith("<", at):
            # `<[^;()]+>` then `(`: the template runs to the first `;`, `(` or `)`, which must be a
            # `(` preceded by `>`, with at least one character between `<` and `>`.
            if delims is None:
                delims = [d.start() for d in _DELIM_RE.finditer(line)]
            k = bisect_right(delims, at)
            if k == len(delims):
                continue
            open_at = delims[k]
            if line[open_at] != "(" or line[open_at - 1] != ">" or open_at - at < 3:
                continue
        else:
            continue
        operands = _OPERANDS_RE.match(line, open_at + 1)
        if operands:
            return m.start(), line[m.start():open_at + 1], operands
    return None


def _restore_mgather(text: str) -> str:
    """Step 2: put wrapper names back into MGATHER calls lowered to raw pointers (PTOAS <= v0.53)."""
    if "MGATHER" not in text:
        return text
    lines = text.splitlines(keepends=True)
    aliases = _Aliases(lines)
    drop: set[int] = set()
    for i, line in enumerate(lines):
        call = _find_call(line)
        if call is None:
            continue
        start, prefix, m = call
        resolved = [aliases.resolve(m[g], i) for g in ("dst", "table", "idx")]
        used = [d for d in resolved if d is not None]
        if len(used) != 3:
            continue  # some operand is not a uniquely used alias: leave the call alone
        names = [wrapper for _line, wrapper in used]
        scratch = m["scratch"]
        if scratch:
            d = aliases.resolve(scratch, i)
            if d is not None:
                used.append(d)
                names.append(d[1])
            elif scratch in aliases.defs:
                continue  # an alias, but not a uniquely used one: leave the call alone
            else:
                names.append(scratch)
        lines[i] = f"{line[:start]}{prefix}{', '.join(names)});{line[m.end():]}"
        drop.update(line_no for line_no, _wrapper in used)
    return "".join(line for i, line in enumerate(lines) if i not in drop)


def preprocess(raw: str) -> str:
    """PyPTO's preprocessing of raw ptoas output (5.4 steps 1-5, line endings kept)."""
    text = "".join(line for line in raw.splitlines(keepends=True) if _keep_line(line))
    text = _restore_mgather(text)
    text = _TENSOR_RE.sub("ChipTensor", text)
    text = _ENTRY_RE.sub("static __aicore__ void", text)
    return _AICORE_RE.sub("__aicore__", text)


# --- 5.5 targets and splice -------------------------------------------------

_FUNC_RE = re.compile(r"(?:__global__\s+)?AICORE\s+void\s+(\w+)\s*\(")


def function_names(raw: str) -> list[str]:
    """Names of the `[__global__] AICORE void <name>(` functions of RAW ptoas output, first occurrence order."""
    return list(dict.fromkeys(_FUNC_RE.findall(raw)))


def find_target(sub_dir: Path, name: str) -> Path | None:
    """`kernels/aic/<name>.cpp`, else `kernels/aiv/<name>.cpp`: the first regular file (symlinks followed)."""
    if not name or "/" in name or os.sep in name or "\0" in name or name in (".", ".."):
        return None
    for core in ("aic", "aiv"):
        candidate = Path(sub_dir) / KERNELS_DIR / core / f"{name}.cpp"
        try:
            if stat.S_ISREG(os.stat(candidate).st_mode):
                return candidate
        except (OSError, ValueError):
            continue
    return None


def split(text: str, path: str) -> tuple[str, str, str]:
    """(head through BEGIN, body, tail from END on) of a kernel wrapper.

    The body is the text strictly between the sentinels minus one framing
    "\\n" at each end (each removed only if present). `splice(t, split(t)[1])`
    reproduces `t` exactly when that region is "\\n" + body + "\\n", i.e. starts
    and ends with its own "\\n" (everything PyPTO writes). Otherwise (e.g. a
    region of exactly "\\n", sentinels on one line, CRLF framing) the splice
    normalises the framing to PyPTO's.
    """
    begin = text.find(BEGIN)
    end = text.find(END)
    if begin < 0 or end < 0 or end <= begin:
        raise SpliceError(_sentinel_problem(path, begin, end))
    cut = begin + len(BEGIN)  # END cannot start inside BEGIN, so cut <= end
    middle = text[cut:end]
    if middle.startswith("\n"):
        middle = middle[1:]
    if middle.endswith("\n"):
        middle = middle[:-1]
    return text[:cut], middle, text[end:]


def splice(text: str, body: str, path: str) -> str:
    """`text` with the region between the sentinels replaced by "\\n" + body + "\\n" (".pto wins").

    A body containing the END sentinel is refused (SpliceError): the next split
    would cut the file there.
    """
    head, _old, tail = split(text, path)
    if END in body:
        raise SpliceError(f"{path}: cannot splice — the new body contains the sentinel line {END!r}; "
                          "remove it from the .pto's output")
    return f"{head}\n{body}\n{tail}"


# --- signatures ---------------------------------------------------------------

_COMMENT_OR_LITERAL_RE = re.compile(
    r"//[^\n]*|/\*.*?(?:\*/|\Z)|\"(?:\\.|[^\"\\\n])*\"?|(?<!\w)'(?:\\.|[^'\\\n])*'?", re.DOTALL
)
_PUNCT_SPACE_RE = re.compile(r"\s*([*&,()\[\]<>=])\s*")
_BRACE_RE = re.compile(r"\s*\{")
_PAREN_RE = re.compile(r"[()]")


def _blanked(text: str) -> tuple[str, str]:
    """(text with comments blanked, the same with string/char literal contents masked too).

    Both have `text`'s length, so offsets found in the second apply to the first.
    """
    kept: list[str] = []
    masked: list[str] = []
    pos = 0
    for m in _COMMENT_OR_LITERAL_RE.finditer(text):
        token = m[0]
        kept.append(text[pos:m.start()])
        masked.append(text[pos:m.start()])
        if token.startswith(("//", "/*")):
            kept.append(" " * len(token))
            masked.append(" " * len(token))
        else:
            kept.append(token)
            masked.append(token[0] + "_" * (len(token) - 1))
        pos = m.end()
    kept.append(text[pos:])
    masked.append(text[pos:])
    return "".join(kept), "".join(masked)


def _paren_pairs(text: str) -> dict[int, int]:
    """Index of each `(` -> index of its matching `)` (unbalanced ones left out)."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for m in _PAREN_RE.finditer(text):
        if m[0] == "(":
            stack.append(m.start())
        elif stack:
            pairs[stack.pop()] = m.start()
    return pairs


def _normalise(params: str) -> str:
    text = " ".join(params.split())
    text = _PUNCT_SPACE_RE.sub(r"\1", text)
    return text.replace(",", ", ")


def signature_of(body: str, name: str) -> str | None:
    """Normalised parameter list of the definition `static __aicore__ void <name>(...) {`.

    Forward declarations (`...);`), comments and string literals are skipped;
    in the result comments are removed, whitespace collapsed, no spaces around
    `*`, `&`, `=`, brackets and `<>`, and ", " after each comma. None when there
    is no such definition.
    """
    if not name:
        return None
    kept, masked = _blanked(body)
    pattern = re.compile(r"\bstatic\s+__aicore__\s+void\s+" + re.escape(name) + r"\s*\(")
    pairs: dict[int, int] | None = None
    for m in pattern.finditer(masked):
        pairs = _paren_pairs(masked) if pairs is None else pairs
        close = pairs.get(m.end() - 1)
        if close is not None and _BRACE_RE.match(masked, close + 1):
            return _normalise(kept[m.end():close])
    return None
