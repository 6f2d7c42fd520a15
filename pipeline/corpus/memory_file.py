"""One memory as a Markdown file: its id, its path, its rendering, and the gate it must pass.

The path and id derive from content only (kind and claim), so a re-run of the same night writes the
same paths. The render gate refuses a file that does not parse back to the same data, breaks a
limit, still holds a secret, or repeats an evidence quote (quotes belong in the commit message).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from pipeline.consolidator.contract import (
    KINDS,
    MAX_CLAIM_CHARS,
    MAX_GIST_CHARS,
    QUOTE_LEAK_MIN,
    clean_block,
    one_line,
)
from pipeline.corpus import front_matter
from pipeline.secrets.redact import find_secrets

__all__ = ["QUOTE_LEAK_MIN", "MemoryDoc", "clean_block", "gate", "memory_id", "one_line", "parse", "path_for",
           "render", "slugify"]

SLUG_MAX = 60

# A memory's review state: `new` as a night lands it, `kept` once a reviewer vouched for it
# (`pipeline memories keep`). A dropped memory has no file; its `drop:` commit is its record.
STATUSES = ("new", "kept")


class MemoryDoc(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    kind: str
    claim: str = Field(max_length=MAX_CLAIM_CHARS)
    entities: list[str]
    sessions: list[str]
    created: str
    run: str
    batch: str
    gist: str = Field(default="", max_length=MAX_GIST_CHARS)
    # Files written before the review state existed have neither field: they read as `new`.
    status: Literal["new", "kept"] = "new"
    kept: str | None = None  # when a reviewer kept it (UTC, ISO 8601): the export drops the least recent first

    def front_matter(self) -> dict[str, Any]:
        return self.model_dump(exclude={"gist", "kept"} if self.kept is None else {"gist"})


def normalise_claim(claim: str) -> str:
    return " ".join(claim.lower().split())


def memory_id(kind: str, claim: str) -> str:
    digest = hashlib.sha256(f"{kind}\n{normalise_claim(claim)}".encode()).hexdigest()
    return f"{kind}-{digest[:12]}"


def slugify(text: str, limit: int = SLUG_MAX) -> str:
    """Lowercase ASCII words joined by '-', cut at a word boundary; never empty, never a path."""
    ascii_text = unicodedata.normalize("NFKD", text.replace("'", "").replace("\u2019", "")).encode("ascii", "ignore").decode()
    words = re.findall(r"[a-z0-9]+", ascii_text.lower())
    slug = ""
    for w in words:
        candidate = f"{slug}-{w}" if slug else w
        if len(candidate) > limit:
            break
        slug = candidate
    return slug or (words[0][:limit] if words else "memory")


def path_for(root: Path, kind: str, claim: str, taken: dict[Path, str], mid: str) -> Path:
    """`<kind>/<slug>.md`, with -2, -3… when another memory already holds that path."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}")
    base = slugify(claim)
    n = 1
    while True:
        name = f"{base}.md" if n == 1 else f"{base}-{n}.md"
        path = root / kind / name
        owner = taken.get(path)
        if owner is None or owner == mid:
            assert path.resolve().is_relative_to(root.resolve())
            return path
        n += 1


def render(doc: MemoryDoc) -> str:
    fm = yaml.safe_dump(doc.front_matter(), sort_keys=False, allow_unicode=True, width=100_000)
    body = f"# {doc.claim}\n"
    if doc.gist:
        body += f"\n{doc.gist}\n"
    return f"---\n{fm}---\n\n{body}"


def parse(text: str) -> MemoryDoc:
    if not text.startswith("---\n"):
        raise ValueError("no front matter")
    fm_text, _, body = text[4:].partition("\n---\n\n")
    data = front_matter.load(fm_text)
    title, _, rest = body.partition("\n")
    if not title.startswith("# "):
        raise ValueError("no claim heading")
    gist = rest[1:].rstrip("\n") if rest.startswith("\n") else rest.rstrip("\n")
    return MemoryDoc(**data, gist=gist)


def gate(doc: MemoryDoc, quotes: list[str]) -> list[str]:
    """Every reason this document may not be written (empty when it passes)."""
    problems: list[str] = []
    text = render(doc)
    try:
        back = parse(text)
        if back != doc:
            problems.append("the rendered file does not parse back to the same data")
    except (ValueError, yaml.YAMLError) as exc:
        problems.append(f"the rendered file does not parse back: {exc}")
    try:
        text.encode("utf-8", "strict")
    except UnicodeEncodeError:
        problems.append("the rendered file is not valid UTF-8")
    if len(doc.claim) > MAX_CLAIM_CHARS or len(doc.gist) > MAX_GIST_CHARS:
        problems.append("claim or gist over its limit")
    secrets = find_secrets(text)
    if secrets:
        problems.append(f"secrets left in the file: {', '.join(secrets)}")
    # The prose of the memory, as the contract judges it (ids and dates in the front matter are not prose).
    prose = "\n".join([doc.claim, doc.gist, *doc.entities])
    for q in quotes:
        if len(q.strip()) >= QUOTE_LEAK_MIN and q in prose:
            problems.append("an evidence quote appears in the claim, gist or entities; quotes belong only in the "
                            "commit message")
            break
    return problems
