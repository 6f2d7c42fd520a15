"""Seed 001 on a real prefix cache: one session across a local midnight, sent twice to llama.cpp.

The session is a harness's: a long system prompt assembled by `pipeline.anchoring`'s request
builder (persona, experience, memory, environment, the current-date section, tool guidance, in the
builder's order, which is where seed 001's harness puts the date), then twelve user turns over two
days, six before local midnight and six after, a few minutes apart. It is replayed twice:

* without anchoring (`mode="rolling"`): the date section shows the day of the turn, so the first
  request after midnight rewrites the system prompt from the date on;
* with anchoring (`mode="anchored"`): the date section shows the day of the first user message, and
  the first user message of the new day carries a `<date-change>` notice.

Each request goes to the server in order (one slot: it reuses the longest prefix it shares with the
previous request) with a one-token reply, since only the prompt is measured; the assistant turns
of the history are the harness's own, fixed. One `llm_calls` row is kept per request with what the
server reported (prompt tokens, cached tokens, its prompt time). The same requests go through the
project's cache simulator (`pipeline.cache.simulator`), with the rules of a llama.cpp slot, for the
predicted cached share of the first call after midnight. The rows are written as JSONL for
`pipeline cache-report --calls`.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from pipeline.anchoring import PromptSections, RequestBuilder, changed_sections, request_fingerprints
from pipeline.anchoring.request_builder import ChatRequest
from pipeline.anchoring.rules import DateMode
from pipeline.cache.simulator import PromptHasher, ProviderRules, make_cache

__all__ = ["LLAMA_SLOT_RULES", "TZ", "run_anchoring"]

TZ = "Europe/Paris"
# Wall-clock times of the twelve user turns: six before local midnight, six after, 4 minutes apart.
TURNS = [("2026-12-06", f"23:{m:02d}:00") for m in (37, 41, 45, 49, 53, 57)] + [
    ("2026-12-07", f"00:{m:02d}:00") for m in (1, 5, 9, 13, 17, 21)]
FIRST_AFTER_MIDNIGHT = 6  # index of the first turn of the new day

# A llama.cpp slot as the simulator's automatic-prefix cache: any prefix, to the token, no minimum,
# and kept until another request replaces it (a day is longer than this session).
LLAMA_SLOT_RULES = ProviderRules(
    provider="openai", retention="short", ttl_seconds=24 * 3600, min_tokens={}, default_min_tokens=1,
    step_tokens=1, lookback_blocks=0,
)

_AREAS = ["billing", "search", "ingest", "exports", "auth", "scheduler", "reports", "notifications"]
_HABITS = [
    "run the focused tests of the module first, then the whole suite before handing back",
    "read the migration history before touching a table, since old rows still hold the legacy shape",
    "keep log lines structured, one event per line, with the request id first",
    "prefer a small reversible change over a broad refactor when a fix is urgent",
    "write down why a workaround exists next to it, with the ticket that removes it",
    "check the feature flag defaults in staging before assuming a code path is live",
]


def _sections() -> PromptSections:
    """A harness's system prompt, long and stable: only the date section ever changes."""
    persona = (
        "# Who you are\n\nYou are a coding assistant working in a developer's terminal on a mid-sized web "
        "service. You read code before changing it, explain what you are about to do in a sentence, make the "
        "change, and run the checks that prove it. You ask before deleting data or rewriting history."
    )
    experience = "# What earlier sessions taught\n\n" + "\n".join(
        f"- In the {area} area, {habit}." for area in _AREAS for habit in _HABITS[: 3 + len(area) % 3]
    )
    memory = "# Project notes\n\n" + "\n".join(
        f"- Note {i}: the {_AREAS[i % len(_AREAS)]} service owns its tables; other services read them only "
        f"through its API (version {1 + i % 4}), and its nightly job starts at 0{i % 6}:30 UTC with a "
        f"{15 + 5 * (i % 5)}-minute window." for i in range(1, 25)
    )
    environment = (
        "# Environment\n\nWorking directory: /home/dev/src/shop-api (a git repository, branch main). Platform: "
        "Linux. Shell: bash. Python 3.11 in .venv; Postgres 16 through docker compose on port 5433; the test "
        "command is `make test`; the linter is `make lint`."
    )
    tool_guidance = "# Using the tools\n\n" + "\n".join(
        f"- {text}" for text in [
            "Read a file before editing it, and edit with the smallest change that does the job.",
            "Run shell commands one at a time and read their output before the next one.",
            "Search the code with the search tool rather than listing directories by hand.",
            "When a command fails, quote its error and say what you will try next.",
            "Never print secrets from .env files or the environment; refer to them by name.",
            "Long outputs: ask for the part you need (a range of lines, a filtered log).",
        ] * 4
    )
    return PromptSections(persona=persona, experience=experience, memory=memory, environment=environment,
                          tool_guidance=tool_guidance)


def _history() -> list[dict[str, Any]]:
    """The session: twelve user turns (with their wall-clock date) and the assistant's replies."""
    out: list[dict[str, Any]] = []
    for i, (day, clock) in enumerate(TURNS):
        area = _AREAS[i % len(_AREAS)]
        out.append({
            "role": "user", "sender_ymd": day, "at": f"{day} {clock}",
            "content": f"Step {i + 1}: in the {area} service, the retry counter is off by one after a timeout. Look at "
                       f"how {area} handles the retry budget, find where the counter is incremented, and make "
                       "the count match what the log says. Keep the change small and tell me which test covers it.",
        })
        if i < len(TURNS) - 1:
            out.append({
                "role": "assistant",
                "content": f"I read the {area} retry code. The counter is incremented before the request is sent "
                           "and again in the timeout handler, so one timeout counts twice. I moved the increment "
                           "into the send path only and added a test that forces one timeout and checks the count "
                           f"is one. The focused tests of {area} pass; the whole suite passes as well.",
            })
    return out


def _requests(mode: DateMode) -> list[tuple[ChatRequest, dt.datetime]]:
    """The twelve requests of the session in `mode`, with the time each is sent (UTC)."""
    builder = RequestBuilder(allow_shell_clock=True)
    sections = _sections()
    history = _history()
    base = TURNS[0][0]
    zone = ZoneInfo(TZ)
    out = []
    user_at = [i for i, m in enumerate(history) if m["role"] == "user"]
    for turn, index in enumerate(user_at):
        window = [{k: v for k, v in m.items() if k != "at"} for m in history[: index + 1]]
        day, clock = TURNS[turn]
        if mode == "rolling":
            request = builder.build_request(window, sections, mode="rolling", today=day)
        else:
            request = builder.build_request(window, sections, mode="anchored", base_ymd=base)
        local = dt.datetime.fromisoformat(f"{day}T{clock}").replace(tzinfo=zone)
        out.append((request, local.astimezone(dt.UTC)))
    return out


def _predicted(requests: list[tuple[ChatRequest, dt.datetime]]) -> list[dict[str, int]]:
    """What the project's simulator predicts for each request on a llama.cpp slot."""
    hasher, cache = PromptHasher(), make_cache(LLAMA_SLOT_RULES)
    out = []
    for request, at in requests:
        result = cache.request(hasher.prompt(request), at.timestamp())
        out.append({"promptTokens": result.prompt_tokens, "cachedTokens": result.cached_tokens})
    return out


def _send(client: Any, model: str, request: ChatRequest) -> tuple[Any, float]:
    began = time.perf_counter()
    response = client.chat.completions.create(
        model=model, messages=request["messages"], max_tokens=1, temperature=0.0,
    )
    return response, (time.perf_counter() - began) * 1000.0


def _row(mode: str, turn: int, request: ChatRequest, previous: ChatRequest | None, at: dt.datetime,
         response: Any, latency_ms: float, model: str) -> dict[str, Any]:
    usage = response.usage
    details = getattr(usage, "prompt_tokens_details", None)
    timings = (response.model_extra or {}).get("timings") or {}
    cached = getattr(details, "cached_tokens", None)
    if cached is None and "cache_n" in timings:
        cached = int(timings["cache_n"])
    system = request["messages"][0]["content"]
    fps = request_fingerprints(system, [], request["messages"])
    return {
        "call_id": f"bench-model:{mode}:{turn + 1}", "source": "import:bench-model", "session_id": f"seed001-{mode}",
        "at": at.isoformat().replace("+00:00", "Z"), "model": model,
        "prompt_tokens": getattr(usage, "prompt_tokens", None), "cached_tokens": cached, "cache_write_tokens": None,
        "completion_tokens": getattr(usage, "completion_tokens", None), "latency_ms": round(latency_ms, 3),
        "run_id": None, "batch_id": None, **fps,
        "changed_sections": changed_sections(previous, request) if previous is not None else None,
        "prompt_ms": timings.get("prompt_ms"), "turn": turn + 1, "mode": mode,
    }


def run_anchoring(client: Any, model: str, out_dir: Path) -> dict[str, Any]:
    """Send both sessions, predict them, write the rows; returns the `anchoring` part of model.json."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {"session": {"turns": len(TURNS), "tz": TZ, "firstUserAt": " ".join(TURNS[0]),
                                           "firstAfterMidnightAt": " ".join(TURNS[FIRST_AFTER_MIDNIGHT])}}
    predicted: dict[str, float] = {}
    for key, mode in (("withoutAnchoring", "rolling"), ("withAnchoring", "anchored")):
        requests = _requests(mode)  # type: ignore[arg-type]
        expected = _predicted(requests)
        previous: ChatRequest | None = None
        mode_rows = []
        for turn, (request, at) in enumerate(requests):
            response, latency = _send(client, model, request)
            mode_rows.append(_row(mode, turn, request, previous, at, response, latency, model))
            previous = request
        rows.extend(mode_rows)
        first = mode_rows[FIRST_AFTER_MIDNIGHT]
        sim = expected[FIRST_AFTER_MIDNIGHT]
        share = first["cached_tokens"] / first["prompt_tokens"] if first["prompt_tokens"] else None
        predicted[key] = round(sim["cachedTokens"] / sim["promptTokens"], 4)
        summary[key] = {
            "firstCallAfterMidnight": {
                "promptTokens": first["prompt_tokens"], "cachedTokens": first["cached_tokens"],
                "promptMs": first["prompt_ms"], "cachedShare": None if share is None else round(share, 4),
                "changedSections": first["changed_sections"],
            },
            "lastCallBeforeMidnight": {
                k: mode_rows[FIRST_AFTER_MIDNIGHT - 1][v] for k, v in
                (("promptTokens", "prompt_tokens"), ("cachedTokens", "cached_tokens"), ("promptMs", "prompt_ms"))},
            "session": {"promptTokens": sum(r["prompt_tokens"] or 0 for r in mode_rows),
                        "cachedTokens": sum(r["cached_tokens"] or 0 for r in mode_rows),
                        "promptMs": round(sum(r["prompt_ms"] or 0.0 for r in mode_rows), 1)},
            "simulator": sim,
        }
    summary["simulator"] = {**predicted, "rules": "llama.cpp slot: any prefix to the token, no minimum, one session"}
    calls = out_dir / "anchoring_calls.jsonl"
    calls.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    summary["calls"] = str(calls)
    return summary
