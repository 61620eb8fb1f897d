"""Parse the Makefile-style depfiles that `g++ -MD -MF` writes."""
from __future__ import annotations


def parse_depfile(text: str) -> list[str]:
    """Prerequisites of every rule in a depfile, in order, without duplicates.

    Handles line continuations, backslash-escaped spaces, `$$` and phony
    `header:` rules (from -MP). Targets are dropped.
    """
    text = text.replace("\\\r\n", " ").replace("\\\n", " ")
    deps: list[str] = []
    seen: set[str] = set()
    for line in text.splitlines():
        words = _split_words(line)
        if not words:
            continue
        colon = next((i for i, w in enumerate(words) if w.endswith(":") and not w.endswith("\\:")), None)
        if colon is None:
            continue
        for word in words[colon + 1:]:
            if word not in seen:
                seen.add(word)
                deps.append(word)
    return deps


def _split_words(line: str) -> list[str]:
    words: list[str] = []
    cur: list[str] = []
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\" and i + 1 < len(line) and line[i + 1] in " #":
            cur.append(line[i + 1])
            i += 2
            continue
        if ch == "$" and i + 1 < len(line) and line[i + 1] == "$":
            cur.append("$")
            i += 2
            continue
        if ch in " \t":
            if cur:
                words.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
        i += 1
    if cur:
        words.append("".join(cur))
    # "target:" may be glued to the first prerequisite ("a.o:b.h") only on odd input; split it.
    out: list[str] = []
    for word in words:
        if ":" in word[:-1] and not word.endswith(":") and not _is_drive(word):
            head, _, tail = word.partition(":")
            out.extend([head + ":", tail] if tail else [head + ":"])
        else:
            out.append(word)
    return out


def _is_drive(word: str) -> bool:
    return len(word) > 2 and word[1] == ":" and word[0].isalpha() and word[2] in "/\\"
