"""What tests share besides fixtures: paths, small file writers, notebook runs, and hand-built
artifact folders for testing `apply` independently of the engines."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
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


def built_once(tmp_path_factory: Any, name: str, build: Callable[[Path], Any]) -> Any:
    """What `build(folder)` returns (JSON), built once for the whole test run: pytest-xdist's workers
    share one folder under their common base temp folder, and the first to take its lock builds it.
    For what is expensive and then only read (a whole night); a test that writes copies it first."""
    import fcntl
    import os

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder, done = root / name, root / f"{name}.json"
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a build that failed half-way
            folder.mkdir()
            value = build(folder)
            done.write_text(json.dumps(value), encoding="utf-8")
        return json.loads(done.read_text(encoding="utf-8"))


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


# --- planted secrets ----------------------------------------------------------------------------
# A scratch copy of the checkout-api sample sessions with live-looking secrets of many kinds planted
# where they show up in real transcripts: recurring tool errors (an AuthenticationError, a
# connection URL, a boto error, a failed git push), tool inputs, URLs, a file's content and what
# the user and the agent said. The values are generated at test time (none is written in the
# repository) and each kind appears in at least two sessions where a pattern needs it.
CHECKOUT = "-home-ana-src-checkout-api"
CODEX_CHECKOUT = "01a16429-82e6-7f9b-8a2a-d5fcc8ee2920"


def fake_secrets(seed: int = 15) -> dict[str, str]:
    import random
    import string

    rng = random.Random(seed)
    alnum = string.ascii_letters + string.digits

    def run(n: int, chars: str = alnum) -> str:
        while True:
            out = "".join(rng.choice(chars) for _ in range(n))
            if any(c.isdigit() for c in out) and any(c.islower() for c in out) and any(c.isupper() for c in out):
                return out

    upper_digits = string.ascii_uppercase + string.digits
    return {
        "openai-key": f"sk-proj-{run(24)}_{run(40)}",
        "openai-key-2": f"sk-proj-{run(24)}_{run(40)}",
        "stripe-key": f"sk_live_51{run(30)}",
        "stripe-key-2": f"sk_live_51{run(30)}",
        "aws-access-key": "AKIA" + "".join(rng.choice(upper_digits) for _ in range(16)),
        "aws-secret-key": run(40, alnum + "/+"),
        "url-password": run(18),
        "anthropic-key": f"sk-ant-api03-{run(60)}-{run(20)}AA",
        "github-token": f"ghp_{run(36)}",
        "slack-token": f"xoxb-{rng.randrange(10**11, 10**12)}-{rng.randrange(10**12, 10**13)}-{run(24)}",
        "email": "maria.gonzalez@acme-billing.io",
        "private-key": "\n".join(["-----BEGIN OPENSSH PRIVATE KEY-----", *(run(64, alnum + "+/") for _ in range(4)),
                                  "-----END OPENSSH PRIVATE KEY-----"]),
        "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhbmEiLCJzY29wZSI6Im9yZGVycyJ9." + run(43, alnum + "-_"),
        "google-api-key": "AIza" + run(35, alnum + "-_"),
        "password": run(10) + "&3x!",
    }


def _claude_line(session_id: str, parent: str, uuid: str, at: str, message: dict[str, Any], kind: str) -> str:
    return json.dumps({
        "parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/home/ana/src/checkout-api",
        "sessionId": session_id, "version": "2.0.31", "gitBranch": "main", "type": kind, "message": message,
        "uuid": uuid, "timestamp": at,
    }, ensure_ascii=False)


def _append_claude(path: Path, turns: list[tuple[str, Any]]) -> None:
    """Append turns to a Claude Code transcript: ("bash", (command, output, is_error)), ("said", (role, text))."""
    import datetime as dt

    lines = path.read_text(encoding="utf-8").splitlines()
    last = json.loads(lines[-1])
    session_id = last["sessionId"]
    at = dt.datetime.fromisoformat(last["timestamp"].replace("Z", "+00:00"))
    parent = last["uuid"]
    out = []
    for n, (what, payload) in enumerate(turns):
        at += dt.timedelta(seconds=20)
        stamp = at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        uid = f"5ec0{n:04d}-0000-4000-8000-{abs(hash((session_id, n))) % 10**12:012d}"
        if what == "bash":
            command, output, is_error = payload
            tool_id = f"toolu_01Planted{n:04d}{session_id[:8]}"
            out.append(_claude_line(session_id, parent, uid, stamp, {
                "role": "assistant", "type": "message", "model": "claude-sonnet-4-5-20250929",
                "content": [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": command}}],
            }, "assistant"))
            parent = uid
            uid = uid[:-1] + "r"
            out.append(_claude_line(session_id, parent, uid, stamp, {
                "role": "user",
                "content": [{"tool_use_id": tool_id, "type": "tool_result", "content": output, "is_error": is_error}],
            }, "user"))
        else:
            role, text = payload
            content: Any = text if role == "user" else [{"type": "text", "text": text}]
            message = {"role": role, "content": content}
            if role == "assistant":
                message |= {"type": "message", "model": "claude-sonnet-4-5-20250929"}
            out.append(_claude_line(session_id, parent, uid, stamp, message, role))
        parent = uid
    path.write_text("\n".join([*lines, *out]) + "\n", encoding="utf-8")


def _append_codex(path: Path, calls: list[tuple[str, str, int]]) -> None:
    """Append shell calls (command, output, exit code) to a Codex rollout."""
    import datetime as dt

    lines = path.read_text(encoding="utf-8").splitlines()
    at = dt.datetime.fromisoformat(json.loads(lines[-1])["timestamp"].replace("Z", "+00:00"))
    out = []
    for n, (command, output, code) in enumerate(calls):
        at += dt.timedelta(seconds=20)
        stamp = at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        call_id = f"call_Planted{n:04d}"
        args = json.dumps({"command": ["bash", "-lc", command], "workdir": "/home/ana/src/checkout-api"})
        out.append(json.dumps({"timestamp": stamp, "type": "response_item", "payload": {
            "type": "function_call", "name": "shell", "arguments": args, "call_id": call_id}}))
        result = json.dumps({"output": output, "metadata": {"exit_code": code, "duration_seconds": 0.4}})
        out.append(json.dumps({"timestamp": stamp, "type": "response_item", "payload": {
            "type": "function_call_output", "call_id": call_id, "output": result}}))
    path.write_text("\n".join([*lines, *out]) + "\n", encoding="utf-8")


def planted_samples(folder: Path, seed: int = 15) -> dict[str, str]:
    """Copy the checkout-api sessions (Claude Code and Codex) into `folder` and plant secrets in them.
    Returns the planted values by kind (a kind planted twice has a second value, `<kind>-2`)."""
    s = fake_secrets(seed)
    claude = folder / "claude" / "projects" / CHECKOUT
    shutil.copytree(SAMPLES / "claude" / "projects" / CHECKOUT, claude)
    codex_src = next((SAMPLES / "codex").rglob(f"*{CODEX_CHECKOUT}.jsonl"))
    codex = folder / "codex" / codex_src.name
    codex.parent.mkdir(parents=True)
    shutil.copyfile(codex_src, codex)

    def openai_error(key: str) -> str:
        return ("Traceback (most recent call last):\n  File \"scripts/summarise.py\", line 12, in <module>\n"
                f"openai.AuthenticationError: Error code: 401 - Incorrect API key provided: {key}. "
                "You can find your API key at https://platform.openai.com/account/api-keys.")

    def stripe_error(key: str) -> str:
        return f"Exit code 1\nstripe.error.AuthenticationError: Invalid API Key provided: {key}"

    pg_url = f"postgresql://ledger:{s['url-password']}@db.internal:5432/ledger"
    url_error = (f"sqlalchemy.exc.OperationalError: (psycopg.OperationalError) connection to {pg_url} failed: "
                 "FATAL:  password authentication failed for user \"ledger\"")
    boto_error = ("botocore.exceptions.ClientError: An error occurred (SignatureDoesNotMatch) when calling the "
                  f"ListBuckets operation: The request signature we calculated does not match. AWSAccessKeyId={s['aws-access-key']}")
    push = f"git push https://{s['github-token']}@github.com/ana/checkout-api.git main"
    push_error = f"fatal: Authentication failed for 'https://{s['github-token']}@github.com/ana/checkout-api.git/'"
    aws_cmd = (f"AWS_ACCESS_KEY_ID={s['aws-access-key']} AWS_SECRET_ACCESS_KEY={s['aws-secret-key']} "
               "aws s3 ls s3://checkout-receipts")
    sessions = sorted(p for p in claude.glob("*.jsonl") if len(p.read_text().splitlines()) > 20)
    first, second = sessions[0], sessions[1]
    _append_claude(first, [
        ("bash", ("uv run python scripts/summarise.py", openai_error(s["openai-key"]), True)),
        ("bash", ("uv run python scripts/refund.py", stripe_error(s["stripe-key"]), True)),
        ("bash", (aws_cmd, boto_error, True)),
        ("bash", (f"psql {pg_url} -c 'select 1'", url_error, True)),
        ("bash", (push, push_error, True)),
        ("bash", (f"curl -s https://api.checkout.internal/v1/orders?access_token={s['jwt']}", "[]", False)),
        ("said", ("assistant", f"I'll rotate the Slack bot token {s['slack-token']} tomorrow after the deploy.")),
    ])
    _append_claude(second, [
        ("bash", ("uv run python scripts/summarise.py", openai_error(s["openai-key-2"]), True)),
        ("bash", ("uv run python scripts/refund.py", stripe_error(s["stripe-key-2"]), True)),
        ("bash", (aws_cmd, boto_error, True)),
        ("bash", (f"psql {pg_url} -c 'select 1'", url_error, True)),
        ("bash", (push, push_error, True)),
        ("bash", (f"curl https://api.anthropic.com/v1/messages -H 'x-api-key: {s['anthropic-key']}' -d @req.json",
                  "anthropic.AuthenticationError: Error code: 401 - invalid x-api-key", True)),
        ("bash", ("cat ~/.ssh/deploy_key", s["private-key"], False)),
        ("said", ("user", f"I'll forward the failing invoice ids to {s['email']} tomorrow morning.")),
    ])
    _append_codex(codex, [
        (f"GOOGLE_MAPS_KEY={s['google-api-key']} uv run python scripts/geocode.py", "ok: 12 addresses", 0),
        ("cat .env.integration", f"DB_USER=ledger\nDB_PASSWORD={s['password']}\n", 0),
        ("uv run python scripts/summarise.py", openai_error(s["openai-key"]), 1),
    ])
    return s
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
