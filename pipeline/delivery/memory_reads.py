"""What an agent or an export reads of the memory corpus: memories by review state, kind, project and
words, and one memory with its evidence at the transcript line each quote stands on.

The corpus's last commit is the source (never its work tree, which a running night writes into), and
the published warehouse says which project each cited session belongs to and where a quote is.
Dropped memories have no file, so they are never read here. Every text leaves masked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import duckdb
import yaml

from pipeline.consolidator.quotes import WarehouseQuotes
from pipeline.corpus import memory_file
from pipeline.corpus.git_corpus import Corpus
from pipeline.errors import ToolError
from pipeline.secrets.redact import redacted

MAX_MEMORIES = 50  # search_memories lists at most this many
MAX_EVIDENCE = 20  # get_memory shows at most this many quotes (the total is always given)
REVIEW_STATES = ("new", "kept")


@dataclass(frozen=True)
class Memory:
    path: str
    doc: memory_file.MemoryDoc

    @property
    def recency(self) -> str:
        """When it was last vouched for: kept, else landed (ISO text sorts in time order)."""
        return self.doc.kept or self.doc.created


def memories_at_head(repo: Corpus) -> list[Memory]:
    """Every memory file of the corpus's last commit (a file that does not parse is skipped: the
    render gate never lets one in, and a reader must keep serving)."""
    if not (repo.git_dir / "HEAD").exists():  # no night has written a memory yet
        return []
    out: list[Memory] = []
    for path, text in sorted(repo.files_at_head(memory_file.KINDS).items()):
        try:
            out.append(Memory(path, memory_file.parse(text)))
        except (ValueError, yaml.YAMLError):
            continue
    return out


def session_projects(con: duckdb.DuckDBPyConnection, session_ids: Iterable[str]) -> dict[str, dict[str, str | None]]:
    """{session id: {slug, cwd}} for the sessions the warehouse holds."""
    ids = sorted(set(session_ids))
    if not ids:
        return {}
    rows = con.execute("SELECT session_id, slug, cwd FROM sessions WHERE session_id IN (SELECT unnest(?::VARCHAR[]))",
                       [ids]).fetchall()
    return {sid: {"slug": slug, "cwd": cwd} for sid, slug, cwd in rows}


def projects_of(m: Memory, where: dict[str, dict[str, str | None]]) -> list[str]:
    return sorted({str(where[s]["slug"]) for s in m.doc.sessions if s in where and where[s]["slug"]})


def in_project(m: Memory, project: str, where: dict[str, dict[str, str | None]]) -> bool:
    """A memory belongs to a project when one of its sessions does (by slug or by cwd, as `--project`
    means everywhere)."""
    return any(s in where and project in (where[s]["slug"], where[s]["cwd"]) for s in m.doc.sessions)


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.casefold())


def _score(m: Memory, words: list[str]) -> int:
    hay = " ".join([m.doc.claim, m.doc.gist, m.doc.kind, *m.doc.entities]).casefold()
    return sum(w in hay for w in words)


def check_choice(value: str | None, allowed: Iterable[str], name: str) -> None:
    allowed = tuple(allowed)
    if value is not None and value not in allowed:
        raise ToolError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def search_memories(con: duckdb.DuckDBPyConnection, repo: Corpus, query: str = "", *, project: str | None = None,
                    kind: str | None = None, status: str | None = None, limit: int = 20) -> dict[str, Any]:
    """Memories holding the most of the query's words (every memory when the query is empty), kept
    before new, most recent first; `total` counts every match even when the list is cut."""
    check_choice(kind, memory_file.KINDS, "kind")
    check_choice(status, REVIEW_STATES, "status (dropped memories are never served)")
    if not 1 <= limit <= MAX_MEMORIES:
        raise ToolError(f"limit must be between 1 and {MAX_MEMORIES}; got {limit}")
    mems = [m for m in memories_at_head(repo)
            if (kind is None or m.doc.kind == kind) and (status is None or m.doc.status == status)]
    where = session_projects(con, (s for m in mems for s in m.doc.sessions))
    if project is not None:
        mems = [m for m in mems if in_project(m, project, where)]
    words = _words(query)
    scored = [(_score(m, words), m) for m in mems]
    if words:
        scored = [(n, m) for n, m in scored if n > 0]
    # stable sorts, last key first: by id, then most recent first, then best score with kept before new
    scored.sort(key=lambda nm: nm[1].doc.id)
    scored.sort(key=lambda nm: nm[1].recency, reverse=True)
    scored.sort(key=lambda nm: (-nm[0], nm[1].doc.status != "kept"))
    shown = [m for _, m in scored[:limit]]
    return {
        "total": len(scored),
        "memories": [
            {"memoryId": m.doc.id, "kind": m.doc.kind, "claim": redacted(m.doc.claim), "status": m.doc.status,
             "project": (p[0] if len(p := projects_of(m, where)) == 1 else None), "projects": p,
             "sessions": m.doc.sessions, "created": m.doc.created, "kept": m.doc.kept}
            for m in shown
        ],
        "truncated": len(scored) > limit,
    }


# -- one memory and its evidence ----------------------------------------------------------------------
_QUOTE_HEAD = re.compile(r"^\[(\d+)\] session (\S+)(?: \(redacted: [^)]*\))?$", re.MULTILINE)


def evidence_quotes(body: str) -> list[tuple[str, str]]:
    """(session id, quote) of each numbered item of a `memory:` or `link:` commit's evidence (the format
    `corpus.apply` writes: "[n] session ID" then the quote, items apart by a blank line, trailers last)."""
    heads = [m for m in _QUOTE_HEAD.finditer(body)]
    # Only the numbered run 1, 2, 3…: a quote that itself holds "[7] session x" on a line is text.
    run: list[re.Match[str]] = []
    for m in heads:
        if int(m.group(1)) == len(run) + 1:
            run.append(m)
    out: list[tuple[str, str]] = []
    for i, m in enumerate(run):
        end = run[i + 1].start() - 2 if i + 1 < len(run) else _trailers_start(body)
        out.append((m.group(2), body[m.end() + 1:end]))
    return out


def _trailers_start(body: str) -> int:
    """Where the trailer paragraph (`Key: value` lines at the end) begins, less its blank line."""
    stripped = body.rstrip("\n")
    cut = stripped.rfind("\n\n")
    if cut < 0:
        return len(stripped)
    last = stripped[cut + 2:].split("\n")
    if all(re.match(r"^[A-Za-z][A-Za-z0-9-]*: ", line) for line in last):
        return cut
    return len(stripped)


def get_memory(con: duckdb.DuckDBPyConnection, repo: Corpus, memory_id: str) -> dict[str, Any]:
    if not isinstance(memory_id, str) or not memory_id.strip():
        raise ToolError("memory_id must be a non-empty string: a memoryId from search_memories")
    found = next((m for m in memories_at_head(repo) if m.doc.id == memory_id), None)
    if found is None:
        raise ToolError(f"unknown memory {memory_id!r} (dropped memories are not served); "
                        "search_memories lists the ids")
    doc = found.doc
    quotes = WarehouseQuotes(con)
    commit, items = None, []
    for c in reversed(repo.commits()):  # oldest first: the memory's own quotes, then each link's
        if c.trailers.get("Memory-Id") != memory_id or not c.subject.startswith(("memory: ", "link: ")):
            continue
        if c.subject.startswith("memory: "):
            commit = commit or c.sha
        items += [(sid, q, c.sha) for sid, q in evidence_quotes(c.body)]
    evidence = []
    for sid, quote, sha in items[:MAX_EVIDENCE]:
        lines = quotes.lines_with(sid, quote, 1)
        evidence.append({"sessionId": sid, "line": lines[0] if lines else None, "quote": redacted(quote),
                         "commit": sha})
    where = session_projects(con, doc.sessions)
    return {
        "memoryId": doc.id, "kind": doc.kind, "claim": redacted(doc.claim), "gist": redacted(doc.gist),
        "entities": [redacted(e) for e in doc.entities], "status": doc.status, "created": doc.created,
        "kept": doc.kept, "projects": projects_of(found, where), "sessions": doc.sessions, "path": found.path,
        "commit": commit, "evidenceTotal": len(items), "evidence": evidence,
    }
