"""What tests share besides fixtures: paths, small file writers, notebook runs, and hand-built
artifact folders for testing `apply` independently of the engines."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import duckdb

from pipeline.consolidator import tools

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "data" / "samples"


def write_jsonl(path: Path, records: list, *, trailing_newline: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records)
    path.write_text(text + ("\n" if trailing_newline else ""), encoding="utf-8")
    return path


def copy_samples(samples_warehouse: Path, folder: Path) -> Path:
    """A private, writable copy of the sample warehouse: copying the file beats ingesting again."""
    path = folder / "w.duckdb"
    shutil.copyfile(samples_warehouse, path)
    return path


def execute_notebook(*args: object, **kwargs: object) -> object:
    """papermill.execute_notebook, run again when the kernel died before running anything (Jupyter
    sometimes loses a kernel while the two test workers start theirs at once)."""
    import papermill as pm

    from pipeline.nightly.kernels import KERNEL_START_RETRIES, kernel_did_not_start

    for attempt in range(KERNEL_START_RETRIES + 1):
        try:
            return pm.execute_notebook(*args, **kwargs)
        except RuntimeError as exc:
            if attempt == KERNEL_START_RETRIES or not kernel_did_not_start(str(exc)):
                raise
    raise AssertionError("unreachable")


def raising_notebook(path: Path) -> Path:
    """A notebook whose fourth cell (index 3) raises, after a parameters cell and one that prints."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("# fails on purpose"),
        nbformat.v4.new_code_cell("session_ids = ''", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("print('reading', session_ids)"),
        nbformat.v4.new_code_cell("ids = list(int(session_ids))  # an int is not iterable"),
        nbformat.v4.new_code_cell("print('never runs')"),
    ]
    nbformat.write(nb, path)
    return path


EXPECTED = json.loads((SAMPLES / "expected.json").read_text(encoding="utf-8"))


def occurrences(pattern_id: str) -> list[dict[str, Any]]:
    return next(p for p in EXPECTED["patterns"] if p["id"] == pattern_id)["occurrences"]


def commitment(cid: str) -> dict[str, Any]:
    return next(c for c in EXPECTED["commitments"] if c["id"] == cid)


def candidate(pattern_id: str, claim: str, *, kind: str = "error_pattern", gist: str = "", n: int = 2) -> dict[str, Any]:
    occ = occurrences(pattern_id)[:n]
    return {
        "kind": kind, "claim": claim, "gist": gist or f"Seen in {len(occ)} sessions.",
        "entities": [{"type": "concept", "name": pattern_id}],
        "evidence": [{"sessionId": o["sessionId"], "quote": o["quote"]} for o in occ],
    }


def commitment_entry(cid: str, *, statement: str | None = None, resolved: bool | None = None,
                     actor: str | None = None, confidence: float = 0.9) -> dict[str, Any]:
    c = commitment(cid)
    return {
        "statement": statement or c["quote"], "actor": actor or c["actor"], "dueHint": c.get("dueHint"),
        "evidence": [{"sessionId": c["sessionId"], "quote": c["quote"]}], "confidence": confidence,
        "resolved": c["resolved"] if resolved is None else resolved,
    }


def write_artifact(
    folder: Path,
    con: duckdb.DuckDBPyConnection,
    sessions: list[str],
    *,
    candidates: list[dict[str, Any]] | None = None,
    commitments: list[dict[str, Any]] | None = None,
    read: list[str] | None = None,
    touched: list[str] | None = None,
    run_id: str = "run-1",
    batch_id: str = "b01",
    created_at: str = "2026-11-30T02:00:00Z",
    answer: bool = True,
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    manifest = tools.list_sessions(con, sessions)
    (folder / "manifest.json").write_text(json.dumps({
        "runId": run_id, "batchId": batch_id, "engine": "rules", "model": None, "createdAt": created_at,
        "sessions": [{k: e[k] for k in ("sessionId", "lineCount", "sizeBytes", "newFromLine")} for e in manifest],
    }, indent=2))
    read = sessions if read is None else read
    touched = read if touched is None else touched
    if answer:
        (folder / "answer.json").write_text(json.dumps({
            "candidates": candidates or [], "commitments": commitments or [], "readSessionIds": read,
        }, indent=2, ensure_ascii=False))
    (folder / "problems.json").write_text("[]")
    (folder / "tool_calls.jsonl").write_text("".join(
        json.dumps({"run_id": run_id, "batch_id": batch_id, "seq": i, "name": "scan", "arguments": {"sessionId": s},
                    "session_id": s, "ok": True, "result_chars": 0, "at": created_at}) + "\n"
        for i, s in enumerate(touched)
    ))
    (folder / "llm_calls.jsonl").write_text(json.dumps({
        "call_id": f"{run_id}:{batch_id}:1", "source": "consolidator", "at": created_at, "model": "m",
        "prompt_tokens": 1000, "cached_tokens": 800, "completion_tokens": 50, "run_id": run_id, "batch_id": batch_id,
    }) + "\n")
    (folder / "run.json").write_text(json.dumps({
        "outcome": "accepted" if answer else "budget", "reason": None if answer else "tool-call budget spent",
        "budgets": {}, "tokens": {"prompt": 1000, "cached": 800, "completion": 50}, "cachedShare": 0.8,
        "startedAt": created_at, "finishedAt": created_at,
    }))
    return folder


def not_camel_case(doc: object, path: str = "$") -> list[str]:
    """Every key of a JSON document that is not camelCase (a space, an underscore, a capital first)."""
    import re

    bad: list[str] = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            if not re.fullmatch(r"[a-z][A-Za-z0-9]*", str(key)):
                bad.append(f"{path}.{key}")
            bad += not_camel_case(value, f"{path}.{key}")
    elif isinstance(doc, list):
        for item in doc:
            bad += not_camel_case(item, f"{path}[]")
    return bad
