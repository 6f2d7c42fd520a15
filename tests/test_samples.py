"""The committed sample corpus under data/samples/: reproducible, well-formed, and true to expected.json.

Everything here re-derives its facts from the transcript files with small, independent code, so a
mistake in the generator's own bookkeeping shows up as a mismatch. No network, nothing outside the repo.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples"
GENERATOR = SAMPLES / "generate.py"
MAX_BYTES = 5_000_000
INJECTED = ("<environment_context>", "<user_instructions>")
# What the harnesses write as user lines, by the warehouse's definition of a prompt (prompt_rules).
CLAUDE_HARNESS = ("<local-command-stdout>", "<bash-stdout>", "<bash-stderr>", "<task-notification>", "[Request interrupted",
                  "<ide_opened_file>")
CODEX_HARNESS = (*INJECTED, "<permissions", "# AGENTS.md", "<turn_aborted>", "<user_action>", "<user_shell_command>")
CODEX_FAILED = ("apply_patch verification failed", "failed in sandbox", "error: Failed to find expected lines")
FIRST_PERSON_FUTURE = re.compile(r"\b(?:I'll|I will|I'm going to|I am going to|we'll|we will)\b", re.IGNORECASE)

Json = dict[str, Any]


# --------------------------------------------------------------------------- helpers


def transcript_paths() -> list[Path]:
    return sorted(SAMPLES.glob("claude/projects/**/*.jsonl")) + sorted(SAMPLES.glob("codex/sessions/**/*.jsonl"))


def rel(path: Path) -> str:
    return path.relative_to(SAMPLES).as_posix()


def generated_files(base: Path) -> dict[str, bytes]:
    """What the generator owns under base: the two transcript trees, expected.json and manifest.json."""
    out = {}
    for path in sorted(base.rglob("*")):
        if not path.is_file():
            continue
        name = path.relative_to(base).as_posix()
        if name.startswith(("claude/", "codex/")) or name in ("expected.json", "manifest.json"):
            out[name] = path.read_bytes()
    return out


def read_records(path: Path) -> list[Json]:
    data = path.read_bytes()
    if not data:
        return []
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data[:-1].split(b"\n")]


def strings_in(value: Any, depth: int = 1) -> Iterator[str]:
    """Every string at any depth; a string that holds a JSON document is opened `depth` levels deep."""
    if isinstance(value, str):
        yield value
        if depth and value[:1] in "{[":
            try:
                inner = json.loads(value)
            except ValueError:
                return
            yield from strings_in(inner, depth - 1)
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_in(item, depth)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item, depth)


def slugify(cwd: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


def all_refs(node: Any) -> Iterator[Json]:
    """Every {sessionId, line, quote} object anywhere in expected.json."""
    if isinstance(node, dict):
        if {"sessionId", "line", "quote"} <= node.keys():
            yield node
        for value in node.values():
            yield from all_refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from all_refs(value)


def is_codex(path: Path) -> bool:
    return rel(path).startswith("codex/")


def codex_item(rec: Json) -> Json | None:
    """A Codex line's item: a response_item's payload, or a bare item of the 2025 format."""
    if rec.get("type") == "response_item":
        return rec["payload"]
    if "payload" not in rec and rec.get("type") in ("message", "function_call", "function_call_output", "reasoning"):
        return rec
    return None


def codex_status(output: str) -> tuple[int | None, str]:
    """The exit status a Codex output records, whatever the CLI's version, and its text."""
    try:
        inner = json.loads(output)
    except ValueError:
        inner = None
    if isinstance(inner, dict):
        return inner["metadata"]["exit_code"], inner["output"]
    head = output.split("\nOutput:\n")[0]
    m = re.search(r"^(?:Exit code:|Process exited with code) (\d+)$", head, re.MULTILINE)
    if m is None and output.startswith("failed in sandbox"):
        m = re.search(r"exit code: (\d+)", output)
    return (int(m.group(1)) if m else None), output


def session_id(path: Path, records: list[Json]) -> str:
    if is_codex(path):
        return records[0].get("payload", records[0])["id"]
    for rec in records:
        if rec.get("isSidechain") and rec.get("agentId"):
            return f"agent-{rec['agentId']}"
    for rec in records:
        if rec.get("sessionId"):
            return rec["sessionId"]
    return path.stem


def error_result_text(path: Path, rec: Json) -> str | None:
    """The text of a failed tool call on this line, or None if the line is not one."""
    if is_codex(path):
        item = codex_item(rec)
        if item and item["type"] in ("function_call_output", "custom_tool_call_output"):
            code, text = codex_status(item["output"])
            if (code or 0) != 0 or text.startswith(CODEX_FAILED):
                return text
        return None
    content = rec.get("message", {}).get("content") if rec.get("type") == "user" else None
    if isinstance(content, list):
        for block in content:
            if block.get("type") == "tool_result" and block.get("is_error"):
                inner = block["content"]
                return inner if isinstance(inner, str) else "\n".join(b.get("text", "") for b in inner)
    return None


def shape_regex(shape: str) -> re.Pattern[str]:
    parts = re.split(r"(<[a-z]+>)", shape)
    return re.compile("".join(r"[^\s\"']+" if re.fullmatch(r"<[a-z]+>", p) else re.escape(p) for p in parts))


# --------------------------------------------------------------------------- independent recounts


def claude_prompt(rec: Json) -> bool:
    if rec.get("type") != "user" or rec.get("isMeta") or rec.get("isCompactSummary"):
        return False
    if str(rec.get("agentId", "")).startswith("acompact-"):  # a compaction: the harness's order, never typed
        return False
    content = rec["message"]["content"]
    if isinstance(content, str):
        return not content.startswith(CLAUDE_HARNESS)
    if any(b.get("type") == "tool_result" for b in content):
        return False
    return any(b["type"] == "image" or (b["type"] == "text" and not b["text"].startswith(CLAUDE_HARNESS)) for b in content)


def claude_responses(records: list[Json]) -> dict[tuple[str, str | None], Json]:
    """Each response's usage: the line with the largest total per message id + request id."""
    best: dict[tuple[str, str | None], Json] = {}
    size = lambda u: u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"] + u["output_tokens"]  # noqa: E731
    for rec in records:
        if rec.get("type") == "assistant" and rec["message"].get("model") != "<synthetic>":
            key = (rec["message"]["id"], rec.get("requestId"))
            if key not in best or size(rec["message"]["usage"]) >= size(best[key]):
                best[key] = rec["message"]["usage"]
    return best


def claude_counts(records: list[Json], parent: list[Json] | None = None) -> Json:
    """Prompts and usage of a Claude Code file; a subagent's copies of its parent's responses and
    prompts (user lines with a uuid of the parent's) are the parent's."""
    copied = set(claude_responses(parent)) if parent else set()
    theirs = {r["uuid"] for r in parent or [] if r.get("type") == "user"}
    groups = {k: u for k, u in claude_responses(records).items() if k not in copied}
    usage = {"prompt_tokens": 0, "cached_tokens": 0, "cache_write_tokens": 0, "completion_tokens": 0, "calls": len(groups)}
    for u in groups.values():
        usage["prompt_tokens"] += u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"]
        usage["cached_tokens"] += u["cache_read_input_tokens"]
        usage["cache_write_tokens"] += u["cache_creation_input_tokens"]
        usage["completion_tokens"] += u["output_tokens"]
    prompts = sum(claude_prompt(r) for r in records if r.get("uuid") not in theirs)
    return {"prompts": prompts, "turns": len(groups), "usage": usage}


def codex_counts(records: list[Json]) -> Json:
    """Prompts, responses and usage of a Codex rollout, by the rules a reader of real rollouts needs:
    a response's tokens are its own last_token_usage; a running total seen before (written twice,
    or replayed after review) is no new response; a fork's copy of its parent comes before its own
    first task_started; a rollout without token counts (2025 format) has responses = runs of items
    the model wrote."""
    usage: Json = {"prompt_tokens": 0, "cached_tokens": 0, "cache_write_tokens": None, "completion_tokens": 0, "calls": 0}
    seen: list[Json] = []
    created = None
    own = True
    prompts = responses = 0
    in_run = False
    for n, rec in enumerate(records, 1):
        payload = rec.get("payload", {})
        if n == 1 and payload.get("forked_from_id"):
            own, created = False, datetime.fromisoformat(payload["timestamp"].replace("Z", "+00:00")).timestamp()
        if not own and payload.get("type") == "task_started" and payload["started_at"] >= int(created or 0):
            own = True
        item = codex_item(rec)
        if item is not None:
            output = item["type"] in ("reasoning", "function_call", "custom_tool_call") or item.get("role") == "assistant"
            responses += output and not in_run
            in_run = output
            if own and item["type"] == "message" and item["role"] == "user" and any(
                not b["text"].lstrip().startswith(CODEX_HARNESS) for b in item["content"]
            ):
                prompts += 1
        if rec.get("type") == "event_msg" and payload.get("type") == "token_count" and payload.get("info"):
            total = payload["info"]["total_token_usage"]
            if total in seen:
                continue
            seen.append(total)
            if own:
                last = payload["info"]["last_token_usage"]
                usage["prompt_tokens"] += last["input_tokens"]
                usage["cached_tokens"] += last["cached_input_tokens"]
                usage["completion_tokens"] += last["output_tokens"]
                usage["calls"] += 1
    turns = usage["calls"] or responses
    return {"prompts": prompts, "turns": turns, "usage": usage}


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def expected() -> Json:
    return json.loads((SAMPLES / "expected.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def by_id(expected: Json) -> dict[str, Json]:
    return {s["sessionId"]: s for s in expected["sessions"]}


@pytest.fixture(scope="module")
def records() -> dict[str, list[Json]]:
    return {rel(p): read_records(p) for p in transcript_paths()}


def line_record(by_id: dict[str, Json], records: dict[str, list[Json]], sid: str, line: int) -> Json:
    return records[by_id[sid]["path"]][line - 1]


# --------------------------------------------------------------------------- reproducibility and form


def test_regenerating_gives_byte_identical_files(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(GENERATOR), "--out", str(tmp_path)], check=True, capture_output=True, timeout=300)
    fresh = generated_files(tmp_path)
    committed = generated_files(SAMPLES)
    assert sorted(fresh) == sorted(committed), "committed files differ from what the generator writes (stale or missing)"
    for name, data in fresh.items():
        assert committed[name] == data, f"{name} differs from a fresh generation"


def test_regenerating_removes_files_it_no_longer_writes(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(GENERATOR), "--out", str(tmp_path)], check=True, capture_output=True, timeout=300)
    stale = tmp_path / "claude" / "projects" / "-gone" / "old.jsonl"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}\n", encoding="utf-8")
    manifest = json.loads((tmp_path / "manifest.json").read_text(encoding="utf-8"))
    manifest["files"].append({"path": "claude/projects/-gone/old.jsonl", "bytes": 3, "sha256": ""})
    (tmp_path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    subprocess.run([sys.executable, str(GENERATOR), "--out", str(tmp_path)], check=True, capture_output=True, timeout=300)
    assert not stale.exists() and not stale.parent.exists()


def test_every_line_is_json_and_ends_with_newline() -> None:
    paths = transcript_paths()
    assert paths
    for path in paths:
        data = path.read_bytes()
        if not data:
            continue
        assert data.endswith(b"\n"), path
        for n, line in enumerate(data[:-1].split(b"\n"), 1):
            assert isinstance(json.loads(line.decode("utf-8")), dict), f"{rel(path)}:{n}"


def test_total_size_is_at_most_5_mb() -> None:
    total = sum(p.stat().st_size for p in SAMPLES.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    assert total <= MAX_BYTES


def test_layout_matches_both_tools() -> None:
    names = [rel(p) for p in transcript_paths()]
    claude = [n for n in names if n.startswith("claude/")]
    codex = [n for n in names if n.startswith("codex/")]
    uuid = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    assert any(re.fullmatch(r"claude/projects/[^/]+/agent-[0-9a-f]+\.jsonl", n) for n in claude)
    assert any(re.fullmatch(rf"claude/projects/[^/]+/{uuid}/subagents/agent-[0-9a-f]+\.jsonl", n) for n in claude)
    for name in claude:
        assert re.fullmatch(rf"claude/projects/-[A-Za-z0-9-]+/({uuid}|agent-[0-9a-f]+|{uuid}/subagents/agent-(?:acompact-)?[0-9a-f]+)\.jsonl", name), name
    assert len(codex) >= 2
    for name in codex:
        m = re.fullmatch(rf"codex/sessions/(\d{{4}})/(\d\d)/(\d\d)/rollout-(\d{{4}})-(\d\d)-(\d\d)T\d\d-\d\d-\d\d-({uuid})\.jsonl", name)
        assert m and m.group(1, 2, 3) == m.group(4, 5, 6), name
    sizes = [(SAMPLES / n).stat().st_size for n in claude]
    assert 0 in sizes, "a 0-byte Claude Code file"


# --------------------------------------------------------------------------- expected.json vs the files


def test_sessions_cover_every_file(expected: Json) -> None:
    listed = sorted(s["path"] for s in expected["sessions"])
    assert listed == sorted(rel(p) for p in transcript_paths())
    ids = [s["sessionId"] for s in expected["sessions"]]
    assert len(ids) == len(set(ids))
    assert 12 <= len(ids) <= 24


def test_session_facts_match_a_recount(expected: Json, records: dict[str, list[Json]]) -> None:
    by_path = {s["sessionId"]: s["path"] for s in expected["sessions"]}
    for sess in expected["sessions"]:
        path = SAMPLES / sess["path"]
        recs = records[sess["path"]]
        assert sess["sessionId"] == session_id(path, recs), sess["path"]
        assert sess["lines"] == len(recs)
        assert sess["format"] == ("jsonl" if not recs else "codex" if is_codex(path) else "claude-code")
        parent = by_path.get(sess["parent_session_id"] or "")
        counts = codex_counts(recs) if is_codex(path) else claude_counts(recs, records[parent] if parent else None)
        assert (sess["prompts"], sess["turns"]) == (counts["prompts"], counts["turns"]), sess["path"]
        assert sess["usage"] == counts["usage"], sess["path"]
        stamps = [r["timestamp"] for r in recs if isinstance(r.get("timestamp"), str)]
        assert sess["first_at"] == (min(stamps) if stamps else None)
        assert sess["last_at"] == (max(stamps) if stamps else None)
        if is_codex(path):
            if "payload" in recs[0]:
                cwd = recs[0]["payload"]["cwd"]
            else:  # the 2025 format: the working directory is in the injected environment context
                env = next(b["text"] for r in recs if r.get("type") == "message" for b in r["content"] if "<cwd>" in b["text"])
                cwd = env.split("<cwd>")[1].split("</cwd>")[0]
            assert sess["slug"] == slugify(cwd)
        else:
            cwd = next((r["cwd"] for r in recs if "cwd" in r), None)
            assert sess["slug"] == Path(sess["path"]).parts[2]
            if cwd:
                assert sess["slug"] == slugify(cwd)
        assert sess["cwd"] == cwd
        sidechain = [r for r in recs if r.get("isSidechain")]
        forked_from = recs[0].get("payload", {}).get("forked_from_id") if recs else None
        if forked_from:  # a Codex rollout forked from another names it in its session_meta
            assert sess["parent_session_id"] == forked_from
            assert forked_from in {s["sessionId"] for s in expected["sessions"]}
        elif sidechain:
            assert all(r.get("isSidechain") and r.get("agentId") == sidechain[0]["agentId"] for r in recs if "sessionId" in r)
            assert sess["parent_session_id"] == sidechain[0]["sessionId"]
            assert sess["parent_session_id"] in {s["sessionId"] for s in expected["sessions"]}
        else:
            assert sess["parent_session_id"] is None
        if not is_codex(path) and not sidechain:
            assert all(r.get("sessionId") in (None, path.stem) for r in recs), "main file: sessionId is the file stem"


def test_every_quote_occurs_in_the_line_it_names(expected: Json, by_id: dict[str, Json], records: dict[str, list[Json]]) -> None:
    refs = list(all_refs(expected))
    assert len(refs) > 40
    for ref in refs:
        for line in [ref["line"], *ref.get("also_at_lines", [])]:
            rec = line_record(by_id, records, ref["sessionId"], line)
            assert any(ref["quote"] in s for s in strings_in(rec)), ref


def test_planted_patterns(expected: Json, by_id: dict[str, Json], records: dict[str, list[Json]]) -> None:
    assert len(expected["patterns"]) >= 3
    formats_spanned = []
    errors = {}
    for path in transcript_paths():
        sid = session_id(path, records[rel(path)])
        for n, rec in enumerate(records[rel(path)], 1):
            text = error_result_text(path, rec)
            if text is not None:
                errors[(sid, n)] = text
    for pattern in expected["patterns"]:
        regex = shape_regex(pattern["shape"])
        occ = pattern["occurrences"]
        assert len({o["sessionId"] for o in occ}) >= 2, pattern["id"]
        assert len({o["quote"] for o in occ}) == len(occ), "surface text must differ between occurrences"
        for o in occ:
            assert regex.fullmatch(o["quote"]), (pattern["id"], o["quote"])
            assert o["quote"] in errors[(o["sessionId"], o["line"])]
        found = {key for key, text in errors.items() if regex.search(text)}
        assert found == {(o["sessionId"], o["line"]) for o in occ}, f"{pattern['id']}: occurrences incomplete"
        formats_spanned.append({by_id[o["sessionId"]]["format"] for o in occ})
    assert any(f == {"claude-code", "codex"} for f in formats_spanned)
    for decoy in expected["decoys"]:
        regex = shape_regex(decoy["shape"])
        hits = {key for key, text in errors.items() if regex.search(text)}
        assert hits and len({sid for sid, _ in hits}) == 1, decoy["id"]
        assert hits == {(o["sessionId"], o["line"]) for o in decoy["occurrences"]}
    listed = {(e["sessionId"], e["line"]) for e in expected["tool_errors"]}
    assert listed == set(errors), "tool_errors must list every failed tool call"


def test_commitments_and_lookalikes(expected: Json, by_id: dict[str, Json], records: dict[str, list[Json]]) -> None:
    commitments = expected["commitments"]
    assert {c["actor"] for c in commitments} == {"agent", "user"}
    assert any(c["resolved"] for c in commitments) and any(not c["resolved"] for c in commitments)
    assert any(c["dueHint"] == "2026-11-20" for c in commitments)
    for c in commitments:
        if c["resolved"]:
            at = c["resolvedAt"]
            assert (at["sessionId"], at["line"]) > (c["sessionId"], c["line"]) or at["sessionId"] != c["sessionId"]
    whys = {n["why"] for n in expected["non_commitments"]}
    assert whys == {"question", "hypothetical", "other-person", "finished-work", "instruction-carried-out",
                    "prompt-announcement", "contingency-offer"}
    assert all(n["actor"] == "other" for n in expected["non_commitments"] if n["why"] == "other-person")
    # Commitments live in what people and the model said, never in tool output.
    for item in commitments + expected["non_commitments"]:
        rec = line_record(by_id, records, item["sessionId"], item["line"])
        assert rec["type"] in ("user", "assistant", "response_item")
        if rec["type"] == "user":
            assert isinstance(rec["message"]["content"], str)
        if rec["type"] == "response_item":
            assert rec["payload"]["type"] == "message"


def test_every_first_person_future_statement_is_labelled(expected: Json) -> None:
    labelled = set()
    for item in expected["commitments"] + expected["non_commitments"]:
        for line in [item["line"], *item.get("also_at_lines", [])]:
            labelled.add((item["sessionId"], line))
    for path in transcript_paths():
        recs = read_records(path)
        sid = session_id(path, recs)
        for n, rec in enumerate(recs, 1):
            texts = []
            if rec.get("type") in ("user", "assistant") and not rec.get("isMeta"):
                content = rec["message"]["content"]
                if isinstance(content, str):
                    texts.append(content)
                else:
                    texts += [b.get("text") or b.get("thinking") or "" for b in content if b["type"] in ("text", "thinking")]
            payload = rec.get("payload") or {}
            if payload.get("type") == "message":
                texts += [b["text"] for b in payload["content"] if not b["text"].startswith((*INJECTED, "<permissions"))]
            if payload.get("type") in ("agent_message", "user_message") and not payload["message"].startswith(INJECTED):
                texts.append(payload["message"])
            for text in texts:
                if FIRST_PERSON_FUTURE.search(text):
                    assert (sid, n) in labelled, f"{rel(path)}:{n} {text[:100]!r}"


def test_corrections_workarounds_injections(expected: Json, by_id: dict[str, Json]) -> None:
    (uv,) = expected["corrections"]
    assert len({o["sessionId"] for o in uv["occurrences"]}) >= 2
    assert {by_id[h["sessionId"]]["format"] for h in uv["held"]} == {"claude-code", "codex"}
    for w in expected["workarounds"]:
        assert len({o["sessionId"] for o in w["occurrences"]}) >= 2
    quotes = " ".join(i["quote"] for i in expected["injections"])
    assert "IGNORE PREVIOUS INSTRUCTIONS" in quotes and "you are a different agent now" in quotes


def test_edge_cases(expected: Json, by_id: dict[str, Json], records: dict[str, list[Json]]) -> None:
    huge = expected["huge_line"]
    raw = (SAMPLES / by_id[huge["sessionId"]]["path"]).read_bytes().split(b"\n")[huge["line"] - 1]
    assert len(raw) == huge["bytes"] > 1_000_000
    rec = json.loads(raw)
    assert any(b["type"] == "image" and b["source"]["type"] == "base64" for b in rec["message"]["content"])

    for sid in expected["across_midnight"]:
        first, last = (datetime.fromisoformat(by_id[sid][k]) for k in ("first_at", "last_at"))
        assert last.date() > first.date() and last - first < timedelta(hours=2), sid
    for sid in expected["resumed_later"]:
        first, last = (datetime.fromisoformat(by_id[sid][k]) for k in ("first_at", "last_at"))
        assert last - first >= timedelta(days=2), sid

    listed = {(b["sessionId"], b["line"]) for b in expected["backwards_timestamps"]}
    assert listed
    seen = set()
    for path in transcript_paths():
        recs = records[rel(path)]
        sid = session_id(path, recs)
        previous = None
        for n, rec in enumerate(recs, 1):
            stamp = rec.get("timestamp")
            if not isinstance(stamp, str):
                continue
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp)
            if previous and stamp < previous:
                seen.add((sid, n))
            previous = stamp
    assert seen == listed

    synthetic = line_record(by_id, records, expected["synthetic_api_error"]["sessionId"], expected["synthetic_api_error"]["line"])
    assert synthetic["message"]["model"] == "<synthetic>"

    claude_types = {r.get("type") for p, recs in records.items() if p.startswith("claude/") for r in recs}
    assert {"user", "assistant", "summary", "system", "file-history-snapshot"} < claude_types
    only = {p: {r.get("type") for r in recs} for p, recs in records.items() if p.startswith("claude/")}
    assert {"summary"} in only.values() and {"file-history-snapshot"} in only.values()
    text = "".join(path.read_text(encoding="utf-8") for path in transcript_paths())
    for needle in ('"isMeta":true', "<command-name>/clear</command-name>", "<local-command-stdout>",
                   "[Request interrupted by user]", "C:\\\\Users\\\\ana", "請求書", "🎉", "José"):
        assert needle in text, needle


def test_claude_responses_are_split_one_block_per_line(records: dict[str, list[Json]]) -> None:
    groups: dict[str, list[Json]] = {}
    for name, recs in records.items():
        for rec in recs:
            if rec.get("type") == "assistant" and rec["message"]["model"] != "<synthetic>":
                assert len(rec["message"]["content"]) == 1
                groups.setdefault(f"{name}:{rec['message']['id']}", []).append(rec)
    assert any(len(g) >= 3 for g in groups.values())
    for group in groups.values():
        assert len({r["requestId"] for r in group}) == 1
        outs = [r["message"]["usage"]["output_tokens"] for r in group]
        assert all(o < outs[-1] for o in outs[:-1])
        u = group[0]["message"]["usage"]
        assert 1 <= u["input_tokens"] <= 10
