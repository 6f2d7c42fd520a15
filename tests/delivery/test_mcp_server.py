"""`pipeline mcp` through the SDK's own client over stdio, against a real server subprocess: the tools and
their bounds, results equal to the CLI's and the consolidator's, evidence at its cited line, errors an agent
reads while the server keeps serving, hostile values through every tool, and a night beside it."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from pipeline.cli.main import main
from pipeline.consolidator import tools
from pipeline.consolidator.contract import KINDS
from pipeline.consolidator.quotes import quote_in_line
from pipeline.corpus import review
from pipeline.corpus.git_corpus import Corpus
from pipeline.delivery import mcp_server
from pipeline.delivery.memory_reads import memories_at_head
from pipeline.warehouse import db
from pipeline.warehouse.search_all import search_all
from tests.helpers import REPO, SAMPLES, _claude_line
from tests.strategies import HOSTILE, value

HOSTILE_SESSION = "5e55f1de-0000-4000-8000-00000000d00d"


class Client:
    """The SDK's client session on a thread of its own, so that plain (and hypothesis) tests call it."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self._loop = asyncio.new_event_loop()
        self._requests: asyncio.Queue[tuple[str, Any, Future[Any]] | None] | None = None
        self._ready: Future[Any] = Future()
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(self._main(args, env),), daemon=True)
        self._thread.start()
        self.init = self._ready.result(timeout=60)

    async def _main(self, args: list[str], env: dict[str, str]) -> None:
        self._requests = asyncio.Queue()
        params = StdioServerParameters(command=sys.executable, args=["-m", "pipeline", "mcp", *args], env=env, cwd=str(REPO))
        try:
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                self._ready.set_result(await session.initialize())
                while (request := await self._requests.get()) is not None:
                    what, payload, done = request
                    try:
                        if what == "list":
                            done.set_result(await session.list_tools())
                        else:
                            done.set_result(await session.call_tool(what, payload))
                    except Exception as exc:  # a protocol failure goes back to the test that asked
                        done.set_exception(exc)
        except Exception as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            raise

    def _ask(self, what: str, payload: Any = None) -> Any:
        done: Future[Any] = Future()
        assert self._requests is not None
        self._loop.call_soon_threadsafe(self._requests.put_nowait, (what, payload, done))
        return done.result(timeout=120)

    def tools(self) -> Any:
        return self._ask("list").tools

    def call(self, name: str, **arguments: Any) -> tuple[bool, str]:
        result = self._ask(name, arguments)
        return bool(result.is_error), result.content[0].text

    def ok(self, name: str, **arguments: Any) -> Any:
        is_error, text = self.call(name, **arguments)
        assert not is_error, text
        return json.loads(text)

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._requests.put_nowait, None)  # type: ignore[union-attr]
        self._thread.join(timeout=30)


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if k not in ("PIPELINE_CRASH_AT", "OPENAI_API_KEY", "PIPELINE_DB", "PIPELINE_CORPUS")}


def hostile_transcript(folder: Path) -> Path:
    """One Claude Code session whose messages are every hostile piece, alone and run together."""
    path = folder / "hostile" / f"{HOSTILE_SESSION}.jsonl"
    path.parent.mkdir(parents=True)
    texts = [*HOSTILE, "".join(HOSTILE), "key AKIAIOSFODNN7EXAMPLE and [bold]x[/bold] <script>alert(1)</script>"]
    parent = None
    lines = []
    for n, text in enumerate(texts):
        uid = f"5e55f1de-{n:04d}-4000-8000-000000000000"
        role = "user" if n % 2 == 0 else "assistant"
        content: Any = text if role == "user" else [{"type": "text", "text": text}]
        message = {"role": role, "content": content} | ({"model": "claude-sonnet-4-5-20250929"} if role == "assistant" else {})
        lines.append(_claude_line(HOSTILE_SESSION, parent, uid, f"2026-11-20T10:{n // 60:02d}:{n % 60:02d}.000Z", message, role))
        parent = uid
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path.parent


@pytest.fixture(scope="module")
def served(samples_night, tmp_path_factory) -> Iterator[tuple[Client, Path, Path]]:
    """A server over the samples' night (one memory kept) plus a session of hostile values."""
    folder = tmp_path_factory.mktemp("mcp")
    src = Path(samples_night["dir"])
    wh, corpus = folder / "w.duckdb", folder / "corpus"
    shutil.copy(src / "w.duckdb", wh)
    shutil.copytree(src / "corpus", corpus)
    assert main(["ingest", str(hostile_transcript(folder)), "--db", str(wh)]) == 0
    review.keep_memory(memories_at_head(Corpus(corpus))[0].doc.id, db=wh, corpus=corpus)
    client = Client(["--db", str(wh), "--corpus", str(corpus)], clean_env())
    yield client, wh, corpus
    client.close()


def test_the_server_lists_five_short_tools_that_state_their_bounds(served) -> None:
    client, _, _ = served
    assert client.init.server_info.name == "trace-pipeline"
    listed = {t.name: t for t in client.tools()}
    assert sorted(listed) == ["get_memory", "list_sessions", "read_lines", "search", "search_memories"]
    assert "At most 100" in listed["list_sessions"].description
    assert "up to 50 hits" in listed["search"].description
    assert "at most 200 lines and 60,000 characters" in listed["read_lines"].description
    assert "At most 50" in listed["search_memories"].description
    assert "up to 20 evidence" in listed["get_memory"].description
    assert listed["search_memories"].input_schema["properties"]["kind"]["enum"] == list(KINDS)
    assert all(t.annotations.read_only_hint for t in listed.values())
    # every agent pays for these in context: names, descriptions and schemas stay small
    sizes = mcp_server.tool_list()
    assert sum(t["estimatedTokens"] for t in sizes) <= 700, sizes
    assert "title" not in json.dumps([t.input_schema for t in listed.values()])


@pytest.mark.parametrize("phrase", ["EADDRINUSE", "pytest", "ModuleNotFoundError", "error", "the"])
def test_search_is_the_json_of_pipeline_search(served, phrase: str, capsys) -> None:
    client, wh, _ = served
    through_mcp = client.ok("search", phrase=phrase, limit=50)
    assert main(["search", phrase, "--json", "--redact", "--limit", "50", "--db", str(wh)]) == 0
    assert through_mcp == json.loads(capsys.readouterr().out)
    assert through_mcp["total"] > 0 or phrase == "EADDRINUSE"
    one = through_mcp["hits"][0]["sessionId"] if through_mcp["hits"] else None
    if one:
        only = client.ok("search", phrase=phrase, session_id=one, ignore_case=True, limit=5)
        assert {h["sessionId"] for h in only["hits"]} == {one} and len(only["hits"]) <= 5


def test_list_sessions_newest_first_with_filters(served) -> None:
    client, wh, _ = served
    listed = client.ok("list_sessions", limit=100)
    with db.reading(wh) as con:
        count = con.execute("SELECT count(*) FROM sessions").fetchone()[0]
    assert len(listed) == min(count, 100)
    ends = [e["lastAt"] for e in listed if e["lastAt"]]
    assert ends == sorted(ends, reverse=True)
    assert {"sessionId", "slug", "firstAt", "lastAt", "prompts", "turns", "models", "toolCalls"} <= set(listed[0])
    slug = next(e["slug"] for e in listed if e["slug"])
    assert {e["slug"] for e in client.ok("list_sessions", project=slug)} == {slug}
    assert client.ok("list_sessions", since="2999-01-01") == []
    assert len(client.ok("list_sessions", limit=2)) == 2


def test_read_lines_is_the_consolidators(served) -> None:
    client, wh, _ = served
    with db.reading(wh) as con:
        expected = tools.read_lines(con, HOSTILE_SESSION, 1, 400, 4000, redact=True)
    assert client.ok("read_lines", session_id=HOSTILE_SESSION, start=1, end=400, width=4000) == expected
    assert "AKIAIOSFODNN7EXAMPLE" not in json.dumps(expected) and "[REDACTED:" in json.dumps(expected)


def test_every_evidence_quote_is_at_its_cited_line(served) -> None:
    client, wh, _ = served
    found = client.ok("search_memories", limit=50)
    assert found["total"] == len(found["memories"]) > 0
    assert [m["status"] for m in found["memories"]].count("kept") == 1 and found["memories"][0]["status"] == "kept"
    checked = 0
    with db.reading(wh) as con:
        for m in found["memories"]:
            got = client.ok("get_memory", memory_id=m["memoryId"])
            assert got["claim"] == m["claim"] and got["commit"] and got["evidence"]
            for e in got["evidence"]:
                text = con.execute("SELECT text FROM lines WHERE session_id = ? AND line_no = ?",
                                   [e["sessionId"], e["line"]]).fetchone()[0]
                assert quote_in_line(e["quote"], text), (m["memoryId"], e)
                checked += 1
    assert checked >= 2 * len(found["memories"])
    assert client.ok("search_memories", query="EADDRINUSE npm")["memories"][0]["claim"].startswith("EADDRINUSE")
    assert client.ok("search_memories", status="new")["total"] == found["total"] - 1


@pytest.mark.parametrize(("tool", "arguments", "says"), [
    ("read_lines", {"session_id": "no-such-session", "start": 1, "end": 2}, "unknown session 'no-such-session'"),
    ("read_lines", {"session_id": HOSTILE_SESSION, "start": 5, "end": 2}, "end"),
    ("read_lines", {"session_id": HOSTILE_SESSION, "start": "one", "end": 2}, "start"),
    ("get_memory", {"memory_id": "semantic-000000000000"}, "unknown memory"),
    ("search", {"phrase": "x", "session_id": "nope"}, "unknown session(s): nope"),
    ("search", {"phrase": ""}, "phrase"),
    ("search_memories", {"kind": "gossip"}, "kind"),
    ("search_memories", {"limit": 500}, "limit"),
    ("list_sessions", {"since": "yesterday"}, "since must be a day as YYYY-MM-DD"),
])
def test_a_bad_argument_is_a_tool_error_and_the_server_keeps_serving(served, tool: str, arguments: dict, says: str) -> None:
    client, _, _ = served
    is_error, text = client.call(tool, **arguments)
    assert is_error and says in text, text
    assert client.ok("list_sessions", limit=1)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(v=value, flag=st.booleans())
def test_hostile_values_through_every_tool(served, v: str, flag: bool) -> None:
    client, wh, _ = served
    if v:
        is_error, text = client.call("search", phrase=v, ignore_case=flag, limit=10)
        assert not is_error, text
        with db.reading(wh) as con:
            assert json.loads(text) == json.loads(json.dumps(search_all(con, v, ignore_case=flag, limit=10, redact=True)))
    memories = client.ok("search_memories", query=v)
    assert memories["total"] >= 0
    for tool, arguments in (("get_memory", {"memory_id": v}), ("read_lines", {"session_id": v, "start": 1, "end": 3})):
        is_error, text = client.call(tool, **arguments)
        assert is_error and text  # a refusal the agent can read, never a crash
    assert client.ok("list_sessions", project=v) == [] or v in ("", )


def test_a_missing_warehouse_is_a_tool_error(tmp_path: Path) -> None:
    client = Client(["--db", str(tmp_path / "none.duckdb"), "--corpus", str(tmp_path / "corpus")], clean_env())
    try:
        is_error, text = client.call("list_sessions")
        assert is_error and "no warehouse at" in text and "pipeline ingest" in text
    finally:
        client.close()


@pytest.mark.slow
def test_a_night_applies_while_the_server_answers(tmp_path: Path) -> None:
    wh, corpus = tmp_path / "w.duckdb", tmp_path / "corpus"
    assert main(["ingest", str(SAMPLES), "--db", str(wh)]) == 0
    client = Client(["--db", str(wh), "--corpus", str(corpus)], clean_env())
    night = subprocess.Popen([sys.executable, "-m", "pipeline", "nightly", "--source", str(SAMPLES), "--engine", "rules",
                              "--no-report", "--json", "--db", str(wh), "--corpus", str(corpus), "--runs",
                              str(tmp_path / "runs")], cwd=REPO, env=clean_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    calls, failed, seen_memories = 0, [], 0
    try:
        while night.poll() is None or calls < 20:
            for tool, arguments in (("list_sessions", {"limit": 5}), ("search", {"phrase": "pytest", "limit": 3}),
                                    ("search_memories", {})):
                is_error, text = client.call(tool, **arguments)
                calls += 1
                if is_error:
                    failed.append((tool, text))
                elif tool == "search_memories":
                    found = json.loads(text)["memories"]
                    seen_memories = max(seen_memories, len(found))
                    for m in found[:1]:
                        is_error, text = client.call("get_memory", memory_id=m["memoryId"])
                        calls += 1
                        if is_error:
                            failed.append(("get_memory", text))
            # a round every quarter second still reaches the server before, during and after each
            # publish of the night; a tighter loop only spent CPU the other tests wait for
            time.sleep(0.25)
        out, err = night.communicate(timeout=300)
    finally:
        client.close()
        if night.poll() is None:
            night.kill()
    assert night.returncode == 0, err[-2000:]
    assert failed == [] and calls >= 20
    assert json.loads(out)["batches"]
    # once the night is published, the server serves what it wrote
    after = Client(["--db", str(wh), "--corpus", str(corpus)], clean_env())
    try:
        assert after.ok("search_memories")["total"] == len(memories_at_head(Corpus(corpus))) > 0
    finally:
        after.close()
