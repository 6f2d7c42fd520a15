"""The fenced code blocks of the documentation, as `tests/docs/test_snippets.py` reads and runs them.

The convention (docs/contributing.md, "Examples that run"): a block whose language is `sh` or `sql`
is run, unless its info string has a title that starts with "needs" (```sh title="needs a real
corpus"```), which says what the block needs that the bundled samples cannot give; blocks in any other
language are shown, not run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

RUN_LANGUAGES = ("sh", "sql")
_FENCE = re.compile(r"^(?P<fence>`{3,})(?P<info>[^`]*)$")
_TITLE = re.compile(r"""title\s*=\s*"(?P<title>[^"]*)\"""")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    title: str | None
    text: str

    @property
    def runs(self) -> bool:
        return self.language in RUN_LANGUAGES and not (self.title or "").startswith("needs")

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, in order (a block inside a longer fence is text of it)."""
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").split("\n")
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, info = opening["fence"], opening["info"].strip()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not re.fullmatch(rf"`{{{len(fence)},}}\s*", lines[j]):
            body.append(lines[j])
            j += 1
        language = info.split()[0] if info else ""
        title = _TITLE.search(info)
        found.append(Block(path, i + 1, language, title["title"] if title else None, "\n".join(body)))
        i = j + 1
    return found
