"""The ```python blocks of README.md and docs/*.md, as a reader sees them (shared by
tests/test_readme.py, which checks their values, and tests/test_doc_blocks.py, which
pastes each into a fresh ``python``).

A python fence may carry these words after ``python`` and no others:

- ``needs=X``: the block needs hardware or software a plain machine lacks (cuda, torch...);
- ``continues``: the block goes on from the page's previous python block (its names).

A ```text (or ```output) block right after a python block, with only blank lines
between, is what that block prints.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The pages whose python blocks a reader may paste.
PAGES = ["README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]
#: Fence info strings that mark a block as the previous block's printed output.
OUTPUT_INFO = ("text", "output")
_FENCE = re.compile(r"^```(.*)$")
_NEEDS = re.compile(r"^needs=([a-z0-9_]+)$")


@dataclass
class Block:
    """One ```python block: where it is, what it runs, what it prints."""

    page: str
    number: int  # 1-based, among the page's python blocks
    line: int  # the fence's line in the page
    code: str
    needs: tuple[str, ...] = ()
    continues: bool = False
    unknown: tuple[str, ...] = ()  # fence words other than needs=X and continues
    output: str | None = None  # the text block that follows, if any
    previous: Block | None = field(default=None, repr=False)

    @property
    def id(self) -> str:
        return f"{self.page}:{self.number}"

    def program(self) -> str:
        """The block with every block it continues before it, in page order."""
        chain, block = [], self
        while block is not None:
            chain.append(block.code)
            block = block.previous if block.continues else None
        return "\n".join(reversed(chain))


def _fences(text: str) -> list[tuple[int, str, str, int]]:
    """(fence line, info, body, closing line) of each fenced block of a page."""
    found, opened, body = [], None, []
    for n, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if m is None:
            if opened is not None:
                body.append(line)
        elif opened is None:
            opened, body = (n, m.group(1).strip()), []
        else:
            found.append((opened[0], opened[1], "".join(f"{b}\n" for b in body), n))
            opened = None
    return found


def blocks(page: str) -> list[Block]:
    """The python blocks of ``page`` (a path relative to the repository root)."""
    text = (ROOT / page).read_text()
    lines = text.splitlines()
    found: list[Block] = []
    python_closed = None  # the closing line of the last fence, if that fence was a python block
    for start, info, body, close in _fences(text):
        kind, rest = (info.split() or [""])[0], info.split()[1:]
        if kind in OUTPUT_INFO and python_closed is not None \
                and not any(s.strip() for s in lines[python_closed:start - 1]):
            found[-1].output = body
        python_closed = close if kind == "python" else None
        if kind != "python":
            continue
        found.append(Block(
            page, len(found) + 1, start, body,
            needs=tuple(_NEEDS.match(w).group(1) for w in rest if _NEEDS.match(w)),
            continues="continues" in rest,
            unknown=tuple(w for w in rest if w != "continues" and not _NEEDS.match(w)),
            previous=found[-1] if found else None))
    return found


def every_block() -> list[Block]:
    """The python blocks of every page, page by page."""
    return [b for page in PAGES for b in blocks(page)]


def repl_breaks(code: str) -> list[str]:
    """Why ``code`` would not paste into the interactive interpreter as it runs from a
    file: there a blank line ends an indented body (so none may be inside a statement),
    and a compound statement must end with one before the next statement starts."""
    lines = code.splitlines()
    problems = []
    for stmt in ast.parse(code).body:
        first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])
        inside = [n for n in range(first, stmt.end_lineno + 1) if not lines[n - 1].strip()]
        problems += [f"line {n}: a blank line inside the statement of line {first}" for n in inside]
        if hasattr(stmt, "body") and stmt.end_lineno < len(lines) and lines[stmt.end_lineno].strip():
            problems.append(f"line {stmt.end_lineno + 1}: no blank line after the statement of line {first}")
    return problems
