"""Harness workload simulator: sessions, turns and tool loops replayed through a provider prefix cache.

The simulator plays the harness of seed 001. Every model call is a REAL request built with
:class:`pipeline.anchoring.request_builder.RequestBuilder` (its history part kept per session and
extended by the builder's own steps, see :class:`_History`); the cache models of
:mod:`pipeline.cache.simulator` decide what each request reads and writes. Because the simulator knows why every request missed,
each row carries its ``true_cause``, and because it can replay the same workload in the other date
mode, it knows the true effect of anchoring (``true_effect``).

Time and modes
    Calls dated (in ``tz``) before the cutover date are built in ``rolling`` mode: the harness reads
    today's date at the start of each user turn, and every model call of that turn (tool loop and
    compaction included) shows that date. Calls from the cutover date on are built in
    ``anchored`` mode (the session's first user message date, plus ``<date-change>`` notices).
    The new wording of the date section is itself a change, so the first call of every live
    session after the deploy (local midnight of the cutover date) rewrites its cache once.

Workload (see :class:`WorkloadMix`; rates are per simulated day and multiplied by ``scale``)
    * ``interactive``: ordinary same-day sessions during the day (no new turn after 23:00), a few
      turns with tool loops, thinking pauses and the occasional long break (TTL expiry);
    * ``resumed``: long sessions picked up again on later days (always past the TTL);
    * ``scheduled``: long-lived scheduled-task sessions whose nightly run crosses midnight: a cron
      grid every 2 to 4 minutes aligned to the clock (so one task fires at 00:00), each task a
      short tool loop;
    * ``channel``: long-lived channel sessions (chat bots) with bursts of messages, evening-heavy,
      each message answered in one call (``channel_tool_p`` adds tool loops).
    A session compacts when its history grows past ``compaction_limit_tokens``: a compaction
    request (the main request plus a trailing instruction), then the history restarts from a
    hand-off summary. A project's memory section changes now and then (a nightly consolidator
    landed a memory), which is another prefix change.

The harness places two cache breakpoints: at the end of the system prompt and at the end of the
last message. Timing is fixed by the script before any request is built, so the two date modes
replay exactly the same calls at the same instants. The workload starts ``burn_in_days`` before
the logged window, so long-lived sessions enter the log with their usual history length (a log
that starts with every session fresh would show a warm-up trend the analysis would take for an
effect); the first logged call of such a session is classified ``cold_start`` by the analysis
while its true cause is what really happened.

True effect
    The calls after the cutover day that cross midnight within the TTL are known from the script's
    timing alone. The sessions that own them are replayed a second time from the deploy instant
    with rolling dates, in a fork of the cache and session state taken at that instant, so both
    replays see exactly the same calls; ``true_effect`` is the token-weighted cached share of those
    calls with anchoring minus the same share in the rolling replay.

The bulk generator (:mod:`pipeline.cache.workload_bulk`) draws N calls from the same model with
vectorised numpy for benchmarks; it imports this module, never the other way round.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import heapq
import json
import math
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, model_validator

from pipeline.anchoring.request_builder import (
    ChatRequest,
    PromptSections,
    RequestBuilder,
    changed_sections,
    derive_compaction_request,
    to_wire_message,
)
from pipeline.anchoring.rules import HANDOFF_HEADING, DateMode, apply_date_change_notices
from pipeline.anchoring.tokens import estimate_tokens
from pipeline.cache.simulator import (
    Prompt,
    PromptHasher,
    ProviderRules,
    Retention,
    first_divergence,
    make_cache,
    provider_rules,
)

__all__ = [
    "CALLS_SCHEMA",
    "DATE_SECTION",
    "DEFAULT_START",
    "PARQUET_SUMMARY_KEY",
    "TRUE_CAUSES",
    "SimulationResult",
    "SimulationSummary",
    "WorkloadConfig",
    "WorkloadMix",
    "read_summary",
    "simulate",
    "write_calls",
]

DEFAULT_START = dt.date(2026, 9, 1)
DATE_SECTION = "current-date"
TRUE_CAUSES: tuple[str, ...] = ("hit", "cold_start", "ttl_expiry", "date_change", "prefix_change", "compaction")
PARQUET_SUMMARY_KEY = "trace_pipeline.simulation"

# The llm_calls table's columns and types (migration 002), as polars types.
CALLS_SCHEMA: dict[str, Any] = {
    "call_id": pl.String,
    "source": pl.String,
    "session_id": pl.String,
    "at": pl.Datetime("us", "UTC"),
    "model": pl.String,
    "prompt_tokens": pl.Int64,
    "cached_tokens": pl.Int64,
    "cache_write_tokens": pl.Int64,
    "completion_tokens": pl.Int64,
    "latency_ms": pl.Float64,
    "run_id": pl.String,
    "batch_id": pl.String,
    "system_fp": pl.String,
    "tools_fp": pl.String,
    "prefix_fp": pl.String,
    "changed_sections": pl.List(pl.String),
    "true_cause": pl.String,
    "line_no": pl.Int64,
    "origin": pl.String,
}

Kind = Literal["interactive", "resumed", "scheduled", "channel"]
KINDS: tuple[Kind, ...] = ("interactive", "resumed", "scheduled", "channel")


# --------------------------------------------------------------------------- configuration


class WorkloadMix(BaseModel):
    """Session kinds and their sizes. Rates are sessions per day; counts are long-lived sessions."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    interactive_per_day: float = Field(8.0, ge=0)
    resumed_per_day: float = Field(1.2, ge=0)
    scheduled_sessions: int = Field(16, ge=0)
    channel_sessions: int = Field(5, ge=0)
    channel_bursts_per_day: float = Field(4.0, ge=0)
    # Chance that a channel reply needs another call (a tool) before answering. Default 0: chat
    # replies come in one call. Raised, some first-calls-after-midnight fall inside a tool loop,
    # where rolling dates still show yesterday and hit; those rare, heavy calls move the realised
    # true effect by more than a before/after comparison can see (see the issue-7 report).
    channel_tool_p: float = Field(0.0, ge=0, lt=1)
    projects: int = Field(6, ge=1)
    memory_updates_per_day: float = Field(0.15, ge=0)  # per project
    compaction_limit_tokens: int = Field(60_000, ge=10_000)


class WorkloadConfig(BaseModel):
    """One simulated workload. Deterministic for a given configuration (the seed included)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    start: dt.date = DEFAULT_START
    days: int = Field(42, ge=1, le=3660)
    cutover: dt.date | None = None
    seed: int = 1
    provider: Literal["anthropic", "openai"] = "anthropic"
    tz: str = "UTC"
    retention: Retention = "short"
    scale: float = Field(1.0, gt=0, le=1000)
    burn_in_days: int = Field(7, ge=0, le=60)
    mix: WorkloadMix = WorkloadMix()

    @model_validator(mode="after")
    def _check(self) -> WorkloadConfig:
        try:
            ZoneInfo(self.tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {self.tz!r}; use an IANA name such as UTC or Asia/Shanghai") from None
        cut = self.cutover_date
        if not self.start <= cut < self.end:
            raise ValueError(
                f"the cutover {cut} must fall inside the simulated days {self.start} .. {self.end - dt.timedelta(days=1)}"
            )
        return self

    @property
    def end(self) -> dt.date:
        """First day after the simulated window."""
        return self.start + dt.timedelta(days=self.days)

    @property
    def cutover_date(self) -> dt.date:
        """The given cutover, else day 22 (or the middle day of a shorter window)."""
        if self.cutover is not None:
            return self.cutover
        return self.start + dt.timedelta(days=21 if self.days >= 22 else self.days // 2)

    @property
    def rules(self) -> ProviderRules:
        return provider_rules(self.provider, self.retention)


class TrueEffect(BaseModel):
    model_config = ConfigDict(frozen=True)

    effect: float | None
    calls: int
    sessions: int
    anchored_share: float | None
    rolling_share: float | None


class SimulationSummary(BaseModel):
    """What ``pipeline simulate --json`` prints."""

    model_config = ConfigDict(extra="forbid")

    out: str | None = None
    calls: int
    sessions: int
    seed: int
    start: dt.date
    days: int
    cutover: dt.date
    provider: str
    tz: str
    retention: str
    ttl_seconds: int
    bulk: bool = False
    causes: dict[str, int]
    true_effect: float | None = Field(
        description="token-weighted cached share of post-cutover-day date-crossing calls within the TTL,"
        " anchored minus rolling (replayed); positive = anchoring helped"
    )
    true_effect_detail: TrueEffect | None = None
    elapsed_s: float = 0.0

    @classmethod
    def for_config(cls, cfg: WorkloadConfig, **figures: Any) -> SimulationSummary:
        """The summary of a run of `cfg`: its settings, plus the figures the run measured."""
        return cls(
            seed=cfg.seed, start=cfg.start, days=cfg.days, cutover=cfg.cutover_date, provider=cfg.provider,
            tz=cfg.tz, retention=cfg.retention, ttl_seconds=cfg.rules.ttl_seconds, **figures,
        )


@dataclass(slots=True)
class SimulationResult:
    frame: pl.DataFrame
    summary: SimulationSummary


# --------------------------------------------------------------------------- shapes
# The workload model's distributions, shared with the bulk generator (pipeline.cache.workload_bulk).


class Shape(NamedTuple):
    """A clipped log-normal: median, sigma of the log, lower and upper clip."""

    median: float
    sigma: float
    lo: float
    hi: float


USER_TOKENS = {
    "interactive": Shape(60, 0.8, 5, 1500),
    "resumed": Shape(60, 0.8, 5, 1500),
    "scheduled": Shape(80, 0.3, 30, 300),
    "channel": Shape(40, 0.8, 5, 600),
}
REPLY_TOKENS = Shape(180, 0.7, 20, 1500)
TOOL_ARGS_TOKENS = Shape(40, 0.6, 5, 400)
TOOL_RESULT_TOKENS = Shape(450, 1.0, 10, 6000)
SUMMARY_TOKENS = Shape(1200, 0.3, 400, 3000)
MESSAGE_TOKENS_OVERHEAD = 8  # framing the history estimate adds per message
TOOL_CALL_TOKENS_OVERHEAD = 20
# Calls per turn: 1 + a geometric number of further calls, with this chance of another, capped.
MORE_CALLS = {"interactive": (0.6, 12), "resumed": (0.6, 12), "scheduled": (0.35, 4)}
CHANNEL_MAX_CALLS = 3
# Seconds between calls of a tool loop (median); interactive loops sometimes run a long build.
TOOL_GAP_MEDIAN = {"interactive": 14.0, "resumed": 14.0, "scheduled": 6.0, "channel": 5.0}
TOOL_GAP_SIGMA, TOOL_GAP_CLIP = 0.7, (3.0, 240.0)
LONG_TOOL_P, LONG_TOOL_RANGE = 0.02, (360.0, 900.0)
# Pause between interactive turns: usually thinking, sometimes a break past the TTL.
THINK = Shape(75, 0.6, 8, 290)
BREAK_P, BREAK_RANGE = 0.15, (8 * 60.0, 90 * 60.0)
INTERACTIVE_TURNS, RESUMED_TURNS = 6.0, 4.0  # 3 + Poisson(mean)
RESUME_BLOCKS, RESUME_DAYS = (1, 3), (1, 5)
LAST_TURN_HOUR = 23  # ordinary sessions start no turn after 23:00: they stay same-day
CRON_INTERVALS = (120, 180, 240)
CRON_BEFORE_MIN, CRON_AFTER_MIN = (15, 25), (10, 30)
CRON_DISPATCH = (0.5, 3.0)
CHANNEL_MESSAGES = 4.0  # 2 + Poisson(mean) per burst
CHANNEL_GAP = Shape(60, 0.7, 10, 280)
CHANNEL_BURST_SPACING = 600.0
HEAVY_MODEL_P = 0.2
# Interactive start hours: working day, a thinner evening, almost nothing at night.
DAY_HOURS = (0.05,) * 7 + (0.6, 1.0, 1.0, 1.0, 0.9, 0.6, 0.9, 1.0, 1.0, 1.0, 0.8, 0.5, 0.4, 0.35, 0.3, 0.15, 0.08)
# Channel bursts: evening-heavy, some after midnight.
CHANNEL_HOURS = (0.6, 0.4, 0.2, 0.1, 0.1, 0.1, 0.2, 0.4) + (0.8,) * 10 + (1.5, 1.8, 2.0, 2.0, 1.8, 1.4)
MEMORY_UPDATE_HOURS = (9, 18)


def models_for(provider: str) -> dict[str, str]:
    """Model by role: main (interactive), heavy (some interactive), light (scheduled, channel)."""
    if provider == "anthropic":
        return {"main": "claude-sonnet-4-5", "heavy": "claude-opus-4-5", "light": "claude-haiku-4-5"}
    return {"main": "gpt-5", "heavy": "gpt-5", "light": "gpt-5-mini"}


# --------------------------------------------------------------------------- time helpers


class Clock:
    """Local dates and instants in the harness's time zone, with a fast path for UTC."""

    def __init__(self, tz: str) -> None:
        self.zone = ZoneInfo(tz)
        self.utc = tz in ("UTC", "Etc/UTC")
        self._ymd_cache: dict[int, str] = {}

    def at(self, day: dt.date, seconds: float) -> float:
        """Epoch seconds of ``seconds`` after local midnight of ``day`` (wall clock, DST-aware)."""
        whole = int(seconds)
        local = dt.datetime.combine(day, dt.time()) + dt.timedelta(seconds=whole)
        return local.replace(tzinfo=self.zone).timestamp() + (seconds - whole)

    def ymd(self, ts: float) -> str:
        if self.utc:
            day = int(ts // 86400)
            text = self._ymd_cache.get(day)
            if text is None:
                text = (dt.date(1970, 1, 1) + dt.timedelta(days=day)).isoformat()
                self._ymd_cache[day] = text
            return text
        return dt.datetime.fromtimestamp(ts, self.zone).date().isoformat()


# --------------------------------------------------------------------------- text material

_WORDS = (
    "the build fails because the fixture port is taken retry with a fresh cache parser handler config deploy "
    "module import error warning value request response session token prompt user agent tool result file path "
    "line column schema migration index query table commit branch merge review docker compose timeout queue "
    "report metric latency budget owner ticket release note check status summary follow up plan step done"
).split()
_POOL_CHARS = 400_000


def _pool() -> str:
    rng = random.Random(0)
    words: list[str] = []
    total = 0
    while total < _POOL_CHARS:
        word = rng.choice(_WORDS)
        words.append(word)
        total += len(word) + 1
    return " ".join(words)


_POOL = _pool()


def _filler(rng: random.Random, chars: int) -> str:
    chars = max(1, min(chars, _POOL_CHARS - 1))
    start = rng.randrange(0, _POOL_CHARS - chars)
    return _POOL[start : start + chars]


def _chars(rng: random.Random, shape: Shape) -> int:
    """Characters of a text whose estimated size is drawn from ``shape`` (in tokens)."""
    tokens = min(shape.hi, max(shape.lo, rng.lognormvariate(math.log(shape.median), shape.sigma)))
    return int(tokens * 4)


def _tools() -> list[dict[str, Any]]:
    rng = random.Random(1)
    names = ("shell", "read_file", "write_file", "edit_file", "search", "list_dir", "web_fetch", "todo")
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": f"{name}: " + _filler(rng, 1100),
                "parameters": {
                    "type": "object",
                    "properties": {"arg": {"type": "string", "description": _filler(rng, 120)}},
                    "required": ["arg"],
                },
            },
        }
        for name in names
    ]


TOOLS = _tools()
PERSONAS: dict[str, str] = {
    kind: f"## Persona\n\nYou are the {kind} agent of this workspace. " + _filler(random.Random(10 + i), 1600)
    for i, kind in enumerate(KINDS)
}
TOOL_GUIDANCE = "## Tool guidance\n\n" + _filler(random.Random(20), 8000)


class Projects:
    """Per-project experience and memory sections; memory changes at scheduled instants."""

    def __init__(self, cfg: WorkloadConfig, clock: Clock) -> None:
        mix = cfg.mix
        self.experience = [
            f"## Experience\n\nProject {p}: " + _filler(random.Random(f"exp:{p}"), 2400) for p in range(mix.projects)
        ]
        self._memory_base = [
            f"## Memory\n\nProject {p} notes: " + _filler(random.Random(f"mem:{p}"), 3200) for p in range(mix.projects)
        ]
        self.updates: list[list[float]] = []
        for p in range(mix.projects):
            rng = random.Random(f"{cfg.seed}:memory:{p}")
            times = []
            for d in range(-cfg.burn_in_days, cfg.days):
                if rng.random() < mix.memory_updates_per_day:
                    day = cfg.start + dt.timedelta(days=d)
                    lo, hi = MEMORY_UPDATE_HOURS
                    times.append(clock.at(day, rng.uniform(lo * 3600, hi * 3600)))
            self.updates.append(times)
        self._memory_cache: dict[tuple[int, int], str] = {}
        self._sections_cache: dict[tuple[str, int, int, str], PromptSections] = {}

    def memory(self, project: int, version: int) -> str:
        key = (project, version)
        text = self._memory_cache.get(key)
        if text is None:
            rng = random.Random(f"memupd:{project}")
            extra = "".join(f"\n- learned {k}: {_filler(rng, 160)}" for k in range(version))
            text = self._memory_base[project] + extra
            self._memory_cache[key] = text
        return text

    def sections(self, kind: str, project: int, environment: str, at: float) -> PromptSections:
        version = sum(1 for t in self.updates[project] if t <= at)
        key = (kind, project, version, environment)
        sections = self._sections_cache.get(key)
        if sections is None:
            sections = PromptSections(
                persona=PERSONAS[kind],
                experience=self.experience[project],
                memory=self.memory(project, version),
                environment=environment,
                tool_guidance=TOOL_GUIDANCE,
            )
            self._sections_cache[key] = sections
        return sections


# --------------------------------------------------------------------------- scripts


@dataclass(slots=True)
class _Call:
    at: float
    turn_ymd: str
    append: tuple[dict[str, Any], ...]
    sections: PromptSections
    completion_tokens: int
    compaction: bool = False
    reset_to: tuple[dict[str, Any], ...] | None = None
    previous_user_ymd_after_reset: str | None = None


@dataclass(slots=True)
class _Script:
    index: int
    session_id: str
    kind: str
    model: str
    base_ymd: str = ""
    calls: list[_Call] = field(default_factory=list)


class _ScriptWriter:
    """Writes one session's calls: turns, tool loops, compaction. Timing never depends on the cache."""

    def __init__(
        self,
        script: _Script,
        rng: random.Random,
        cfg: WorkloadConfig,
        clock: Clock,
        projects: Projects,
        project: int,
    ) -> None:
        self.s = script
        self.rng = rng
        self.cfg = cfg
        self.clock = clock
        self.projects = projects
        self.project = project
        self.environment = (
            f"## Environment\n\nWorking directory: /home/dev/src/project{project}\nPlatform: linux\n"
            f"Session: {script.session_id}\nChannel: {script.kind}"
        )
        self.history_tokens = 0
        self.pending_final: dict[str, Any] | None = None
        self.last_user_ymd: str | None = None
        self.n = 0
        self.last_at = -math.inf
        self.end_ts = clock.at(cfg.end, 0)

    def _message_tokens(self, message: dict[str, Any]) -> int:
        content = message.get("content")
        size = estimate_tokens(content) if isinstance(content, str) else 0
        if "tool_calls" in message:
            size += estimate_tokens(message["tool_calls"][0]["function"]["arguments"]) + TOOL_CALL_TOKENS_OVERHEAD
        return size + MESSAGE_TOKENS_OVERHEAD

    def turn(self, at: float, user_text_chars: int, calls: int, tool_gap: Callable[[], float]) -> float:
        """Append one user turn starting at ``at``; returns the time of its last call (or ``at``)."""
        # A session's calls are strictly ordered: a turn waits for the previous one to finish.
        at = max(at, self.last_at + 5.0)
        if at >= self.end_ts:
            return at
        rng = self.rng
        ymd = self.clock.ymd(at)
        sections = self.projects.sections(self.s.kind, self.project, self.environment, at)
        tag = f"[{self.s.session_id} #{self.n}]"
        user = {"role": "user", "content": f"{tag} " + _filler(rng, user_text_chars), "sender_ymd": ymd}
        if not self.s.base_ymd:
            self.s.base_ymd = ymd
        lead: list[dict[str, Any]] = [self.pending_final] if self.pending_final else []
        self.pending_final = None
        if self.history_tokens + sum(self._message_tokens(m) for m in lead) > self.cfg.mix.compaction_limit_tokens:
            summary_chars = _chars(rng, SUMMARY_TOKENS)
            summary = {"role": "user", "content": f"{HANDOFF_HEADING}\n\n{tag} " + _filler(rng, summary_chars)}
            self.s.calls.append(
                _Call(at, ymd, tuple(lead), sections, summary_chars // 4, compaction=True, reset_to=(summary,),
                      previous_user_ymd_after_reset=self.last_user_ymd)
            )
            self.n += 1
            lead = []
            self.history_tokens = self._message_tokens(summary)
            at += rng.uniform(15, 45)  # the summary takes a while to write
        append = (*lead, user)
        self.history_tokens += sum(self._message_tokens(m) for m in append)
        self.last_user_ymd = ymd
        last = at
        for k in range(calls):
            final = k == calls - 1
            if final:
                reply: dict[str, Any] = {"role": "assistant", "content": f"{tag}.{k} " + _filler(rng, _chars(rng, REPLY_TOKENS))}
                completion = self._message_tokens(reply)
                self.pending_final = reply
            else:
                call_id = f"c{self.n}_{k}"
                reply = {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {
                                "name": TOOLS[rng.randrange(len(TOOLS))]["function"]["name"],
                                "arguments": json.dumps({"arg": f"{tag}.{k} " + _filler(rng, _chars(rng, TOOL_ARGS_TOKENS))}),
                            },
                        }
                    ],
                }
                completion = self._message_tokens(reply)
            self.s.calls.append(_Call(last, ymd, append, sections, completion))
            self.n += 1
            if final:
                break
            result = {"role": "tool", "tool_call_id": call_id, "content": f"{tag}.{k} " + _filler(rng, _chars(rng, TOOL_RESULT_TOKENS))}
            append = (reply, result)
            self.history_tokens += self._message_tokens(reply) + self._message_tokens(result)
            last += tool_gap()
            if last >= self.end_ts:
                break
        self.last_at = last
        return last


def _calls_per_turn(rng: random.Random, p_more: float, cap: int) -> int:
    n = 1
    while n < cap and rng.random() < p_more:
        n += 1
    return n


def _tool_gap(rng: random.Random, kind: str, long_p: float) -> Callable[[], float]:
    median = TOOL_GAP_MEDIAN[kind]

    def gap() -> float:
        if rng.random() < long_p:
            return rng.uniform(*LONG_TOOL_RANGE)  # a long test run or build: past the 5-minute TTL
        return min(TOOL_GAP_CLIP[1], max(TOOL_GAP_CLIP[0], rng.lognormvariate(math.log(median), TOOL_GAP_SIGMA)))

    return gap


def _draw(rng: random.Random, shape: Shape) -> float:
    return min(shape.hi, max(shape.lo, rng.lognormvariate(math.log(shape.median), shape.sigma)))


def _think(rng: random.Random) -> float:
    if rng.random() < BREAK_P:
        return rng.uniform(*BREAK_RANGE)
    return _draw(rng, THINK)


def _poisson(rng: random.Random, lam: float) -> int:
    if lam <= 0:
        return 0
    if lam > 50:
        return max(0, round(rng.gauss(lam, math.sqrt(lam))))
    threshold, k, p = math.exp(-lam), 0, 1.0
    while True:
        p *= rng.random()
        if p <= threshold:
            return k
        k += 1


def _hour(rng: random.Random, weights: Sequence[float]) -> float:
    hour = rng.choices(range(24), weights=weights)[0]
    return hour * 3600 + rng.uniform(0, 3600)


def _write_scripts(cfg: WorkloadConfig, clock: Clock) -> list[_Script]:
    mix = cfg.mix
    projects = Projects(cfg, clock)
    scripts: list[_Script] = []
    models = models_for(cfg.provider)

    def new(kind: str, key: str, model: str) -> tuple[_Script, random.Random]:
        rng = random.Random(f"{cfg.seed}:{key}")
        sid = f"sim{cfg.seed}-{kind[:3]}-" + hashlib.blake2b(f"{cfg.seed}:{key}".encode(), digest_size=6).hexdigest()
        script = _Script(len(scripts), sid, kind, model)
        scripts.append(script)
        return script, rng

    def interactive_turns(w: _ScriptWriter, day: dt.date, turns: int) -> None:
        """A block of turns on one day; people stop starting turns at 23:00, so it stays same-day."""
        rng, kind = w.rng, w.s.kind
        gap = _tool_gap(rng, kind, LONG_TOOL_P)
        at = clock.at(day, _hour(rng, DAY_HOURS))
        stop = clock.at(day, LAST_TURN_HOUR * 3600)
        for _ in range(turns):
            if at >= stop:
                break
            last = w.turn(at, _chars(rng, USER_TOKENS[kind]), _calls_per_turn(rng, *MORE_CALLS[kind]), gap)
            at = last + _think(rng)

    # The workload starts burn_in_days before the logged window, so long-lived sessions enter it
    # with histories and caches in their usual state rather than all starting fresh on day one.
    days = [cfg.start + dt.timedelta(days=d) for d in range(-cfg.burn_in_days, cfg.days)]
    for d, day in enumerate(days):
        day_rng = random.Random(f"{cfg.seed}:day:{d}")
        for kind, rate in (("interactive", mix.interactive_per_day), ("resumed", mix.resumed_per_day)):
            for i in range(_poisson(day_rng, rate * cfg.scale)):
                pick = day_rng.random()
                model = models["heavy"] if pick < HEAVY_MODEL_P else models["main"]
                script, rng = new(kind, f"{kind}:{d}:{i}", model)
                w = _ScriptWriter(script, rng, cfg, clock, projects, rng.randrange(mix.projects))
                interactive_turns(w, day, 3 + _poisson(rng, INTERACTIVE_TURNS))
                if kind == "resumed":
                    later = d
                    for _ in range(rng.randint(*RESUME_BLOCKS)):
                        later += rng.randint(*RESUME_DAYS)
                        if later >= len(days):
                            break
                        interactive_turns(w, days[later], 3 + _poisson(rng, RESUMED_TURNS))

    for i in range(round(mix.scheduled_sessions * cfg.scale)):
        script, rng = new("scheduled", f"scheduled:{i}", models["light"])
        w = _ScriptWriter(script, rng, cfg, clock, projects, i % mix.projects)
        # A cron grid (every 2, 3 or 4 minutes, within the TTL) aligned to the clock, as cron
        # schedules are: one task fires at 00:00 and a few seconds of dispatch delay follow.
        interval = rng.choice(CRON_INTERVALS)
        before = rng.randint(*CRON_BEFORE_MIN) * 60 // interval
        after = rng.randint(*CRON_AFTER_MIN) * 60 // interval
        gap = _tool_gap(rng, "scheduled", 0.0)
        for day in days[i % 3 :]:
            midnight = day + dt.timedelta(days=1)
            for slot in range(-before, after + 1):
                at = clock.at(midnight, slot * interval) + rng.uniform(*CRON_DISPATCH)
                w.turn(at, _chars(rng, USER_TOKENS["scheduled"]), _calls_per_turn(rng, *MORE_CALLS["scheduled"]), gap)

    for i in range(round(mix.channel_sessions * cfg.scale)):
        script, rng = new("channel", f"channel:{i}", models["light"])
        w = _ScriptWriter(script, rng, cfg, clock, projects, (i + 3) % mix.projects)
        gap = _tool_gap(rng, "channel", 0.0)
        starts = sorted(
            clock.at(day, _hour(rng, CHANNEL_HOURS))
            for day in days
            for _ in range(_poisson(rng, mix.channel_bursts_per_day))
        )
        busy_until = 0.0
        for at in starts:
            at = max(at, busy_until + CHANNEL_BURST_SPACING)
            for _ in range(2 + _poisson(rng, CHANNEL_MESSAGES)):
                tokens = _chars(rng, USER_TOKENS["channel"])
                last = w.turn(at, tokens, _calls_per_turn(rng, mix.channel_tool_p, CHANNEL_MAX_CALLS), gap)
                at = last + _draw(rng, CHANNEL_GAP)
            busy_until = at
    return [s for s in scripts if s.calls]


# --------------------------------------------------------------------------- replay


@dataclass(slots=True)
class _Row:
    script: int
    index: int
    at: float
    prompt_tokens: int
    cached_tokens: int
    cache_write_tokens: int | None
    completion_tokens: int
    cause: str
    changed: list[str] | None
    system_fp: str
    prefix_fp: str


# The simulated harness may let the model read the shell clock; its builder has no quick commands.
ALLOW_SHELL_CLOCK = True


class _History:
    """A session's history and its messages as a request carries them, kept in step as it grows.

    ``RequestBuilder.build_request`` runs its message steps over the whole history on every call,
    which made a replay quadratic in history length. Those steps are a left fold: quick-command
    expansion (none in this harness) and wire projection look at one message at a time, and date
    notices carry one running reference date, which is the last ``sender_ymd`` of a user message seen
    so far (or the starting reference). A history only grows at its end until a compaction replaces
    it, so the projection of its prefix is kept and only appended messages are projected, by the
    same public functions, from the reference the prefix left. Requests share the projected dicts;
    nothing mutates a built request.
    """

    __slots__ = ("_done", "_key", "_reference", "_wire", "items")

    def __init__(self, items: Sequence[dict[str, Any]] = ()) -> None:
        self.items: list[dict[str, Any]] = list(items)
        self._wire: list[dict[str, Any]] = []
        self._done = 0  # items already projected into _wire
        self._key: tuple[str, str, str | None] | None = None
        self._reference: str | None = None

    def copy(self) -> _History:
        twin = _History(self.items)
        twin._wire, twin._done, twin._key, twin._reference = list(self._wire), self._done, self._key, self._reference
        return twin

    def extend(self, messages: Sequence[dict[str, Any]]) -> None:
        self.items.extend(messages)

    def wire(self, mode: DateMode, base_ymd: str, previous_user_ymd: str | None) -> list[dict[str, Any]]:
        """The wire messages ``build_request(items, mode=mode, base_ymd=…, previous_user_ymd_before=…)`` sends
        after its system message. The list is this history's own: copy it, never modify it."""
        key = (mode, base_ymd, previous_user_ymd)
        if key != self._key:
            self._key, self._wire, self._done = key, [], 0
            self._reference = previous_user_ymd if previous_user_ymd is not None else base_ymd
        new = self.items[self._done :]
        if not new:
            return self._wire
        if mode == "anchored":
            projected = apply_date_change_notices(new, base_ymd, self._reference, allow_shell_clock=ALLOW_SHELL_CLOCK)
            for message in new:
                ymd = message.get("sender_ymd")
                if message.get("role") == "user" and ymd:
                    self._reference = ymd
        else:
            projected = new
        self._wire.extend(to_wire_message(message) for message in projected)
        self._done = len(self.items)
        return self._wire


@dataclass(slots=True)
class _State:
    history: _History = field(default_factory=_History)
    previous_user_ymd: str | None = None
    hasher: PromptHasher = field(default_factory=PromptHasher)
    prompt: Prompt | None = None
    request: ChatRequest | None = None
    mode: str | None = None
    at: float = 0.0
    # The previous call compacted the history: the next request starts from its summary.
    compacted: bool = False

    def copy(self) -> _State:
        # Messages and prompts are never mutated once built, so sharing them is safe.
        return _State(self.history.copy(), self.previous_user_ymd, self.hasher.copy(), self.prompt,
                      self.request, self.mode, self.at, self.compacted)


def _events(scripts: Sequence[_Script]) -> Iterator[tuple[float, int, int]]:
    streams = [[(c.at, s.index, k) for k, c in enumerate(s.calls)] for s in scripts]
    return heapq.merge(*streams)


def _fp(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=8).hexdigest()


class _Replayer:
    """Builds each call's request and runs it through one cache; one instance per date-mode world."""

    def __init__(self, cfg: WorkloadConfig) -> None:
        self.rules = cfg.rules
        self.cache = make_cache(self.rules)
        self.builder = RequestBuilder(TOOLS, allow_shell_clock=ALLOW_SHELL_CLOCK)
        self.states: dict[int, _State] = {}
        # The system text is joined from the sections, so equal sections mean an equal text; keying by
        # the sections hashes the short date text, not the whole ~16 KB system prompt, on every call.
        self.system_fps: dict[tuple[tuple[str, str], ...], str] = {}

    def fork(self, keep: set[int]) -> _Replayer:
        """A copy of this world (cache and the sessions in ``keep``) that can run on differently."""
        twin = object.__new__(_Replayer)
        twin.rules, twin.builder, twin.system_fps = self.rules, self.builder, self.system_fps
        twin.cache = self.cache.copy()
        twin.states = {i: state.copy() for i, state in self.states.items() if i in keep}
        return twin

    def step(self, script: _Script, k: int, at: float, mode: DateMode) -> _Row:
        call = script.calls[k]
        state = self.states.get(script.index)
        if state is None:
            state = self.states[script.index] = _State()
        state.history.extend(call.append)
        kwargs: dict[str, Any] = {
            "mode": mode,
            "today": call.turn_ymd,
            "base_ymd": script.base_ymd,
            "previous_user_ymd_before": state.previous_user_ymd,
        }
        # build_request(history) is build_request(()) followed by the history's wire messages; those
        # come from the session's kept projection instead of a fresh pass over the whole history.
        request = self.builder.build_request((), call.sections, **kwargs)
        request["messages"] += state.history.wire(mode, script.base_ymd, state.previous_user_ymd)
        if call.compaction:
            request = derive_compaction_request(request)
        plain = state.hasher.prompt(request)
        # The harness's two breakpoints: end of the system prompt, end of the last message.
        system_end = len(TOOLS) + sum(1 for _, text in request.sections if text) - 1
        prompt = plain.with_breakpoints((system_end, len(plain.keys) - 1))
        result = self.cache.request(prompt, at, script.model)
        cause = _true_cause(state, prompt, result.hit_block, at, mode, self.rules)
        changed: list[str] | None = None
        if state.request is not None:
            # Most calls keep every section; equal sections can have no changed one.
            same = state.request.sections == request.sections
            changed = [] if same else changed_sections(state.request, request)
        system_fp = self.system_fps.get(request.sections)
        if system_fp is None:
            system_text = request["messages"][0]["content"]
            system_fp = self.system_fps[request.sections] = _fp(system_text.encode("utf-8"))
        state.prompt, state.request, state.mode, state.at = prompt, request, mode, at
        state.compacted = call.reset_to is not None
        if call.reset_to is not None:
            state.history = _History(call.reset_to)
            state.previous_user_ymd = call.previous_user_ymd_after_reset
        return _Row(script.index, k, at, result.prompt_tokens, result.cached_tokens, result.cache_write_tokens,
                    call.completion_tokens, cause, changed, system_fp, prompt.keys[-1].hex()[:16])


def _replay(
    scripts: Sequence[_Script], cfg: WorkloadConfig, deploy: float, shadow: set[int]
) -> tuple[list[_Row], list[_Row]]:
    """Replay every call in time order: rolling dates before ``deploy``, anchored from it on.

    The sessions in ``shadow`` are also replayed with rolling dates after the deploy, in a forked
    copy of the world taken at the deploy instant (before it, both worlds are the same). Within
    the TTL a session only reads its own cache entries, so the fork holds exactly what those
    sessions would have read had the deploy never happened. Returns (rows, shadow rows).
    """
    by_index = {s.index: s for s in scripts}
    world = _Replayer(cfg)
    twin: _Replayer | None = None
    rows: list[_Row] = []
    shadow_rows: list[_Row] = []
    for at, index, k in _events(scripts):
        script = by_index[index]
        if at < deploy:
            rows.append(world.step(script, k, at, "rolling"))
            continue
        if twin is None:
            twin = world.fork(shadow)
        rows.append(world.step(script, k, at, "anchored"))
        if index in shadow:
            shadow_rows.append(twin.step(script, k, at, "rolling"))
    return rows, shadow_rows


def _true_cause(state: _State, prompt: Prompt, hit_block: int, at: float, mode: str, rules: ProviderRules) -> str:
    """Why this call read what it read, from the simulator's knowledge of both requests."""
    previous = state.prompt
    if previous is None:
        return "cold_start"
    if at - state.at > rules.ttl_seconds:
        return "ttl_expiry"
    # The part of the previous request a cache can hand back: up to its last breakpoint
    # (Anthropic) or all of it (OpenAI).
    reusable = previous.breakpoints[-1] if rules.provider == "anthropic" else len(previous.keys) - 1
    divergence = first_divergence(previous, prompt)
    if divergence > reusable:
        return "hit" if hit_block >= reusable else "prefix_change"
    if state.compacted:
        return "compaction"
    if prompt.labels[divergence] == DATE_SECTION and state.mode == mode:
        return "date_change"
    return "prefix_change"  # a memory update, or the cutover's new date wording


# --------------------------------------------------------------------------- public API


def _frame(scripts: Sequence[_Script], rows: Sequence[_Row], cfg: WorkloadConfig) -> pl.DataFrame:
    by_index = {s.index: s for s in scripts}
    tools_fp = _fp(json.dumps(TOOLS, separators=(",", ":")).encode("utf-8"))
    run_id = f"simulate-seed{cfg.seed}"
    n = len(rows)
    data = {
        "call_id": [f"sim{cfg.seed}-{i:08d}" for i in range(n)],
        "source": ["simulated"] * n,
        "session_id": [by_index[r.script].session_id for r in rows],
        "at": [round(r.at * 1_000_000) for r in rows],
        "model": [by_index[r.script].model for r in rows],
        "prompt_tokens": [r.prompt_tokens for r in rows],
        "cached_tokens": [r.cached_tokens for r in rows],
        "cache_write_tokens": [r.cache_write_tokens for r in rows],
        "completion_tokens": [r.completion_tokens for r in rows],
        "latency_ms": [_latency(r) for r in rows],
        "run_id": [run_id] * n,
        "batch_id": [None] * n,
        "system_fp": [r.system_fp for r in rows],
        "tools_fp": [tools_fp] * n,
        "prefix_fp": [r.prefix_fp for r in rows],
        "changed_sections": [r.changed for r in rows],
        "true_cause": [r.cause for r in rows],
        "line_no": [None] * n,
        "origin": [None] * n,
    }
    schema = dict(CALLS_SCHEMA)
    schema["at"] = pl.Int64
    frame = pl.DataFrame(data, schema=schema)
    return frame.with_columns(pl.col("at").cast(pl.Datetime("us", "UTC")))


def _latency(row: _Row) -> float:
    # Time to first token grows with the tokens the provider has to process; reading is cheap.
    fresh = row.prompt_tokens - row.cached_tokens
    return round(300.0 + 0.02 * fresh + 0.002 * row.cached_tokens + 14.0 * row.completion_tokens, 1)


def _crossing_keys(scripts: Sequence[_Script], cfg: WorkloadConfig, clock: Clock) -> set[tuple[int, int]]:
    """Calls after the cutover day whose session's previous call is within the TTL on an earlier date."""
    after = clock.at(cfg.cutover_date + dt.timedelta(days=1), 0)
    ttl = cfg.rules.ttl_seconds
    keys: set[tuple[int, int]] = set()
    for script in scripts:
        calls = script.calls
        for k in range(1, len(calls)):
            at, before = calls[k].at, calls[k - 1].at
            if at >= after and at - before <= ttl and clock.ymd(at) != clock.ymd(before):
                keys.add((script.index, k))
    return keys


def _share(rows: Sequence[_Row]) -> float | None:
    prompt = sum(r.prompt_tokens for r in rows)
    return sum(r.cached_tokens for r in rows) / prompt if prompt else None


def simulate(cfg: WorkloadConfig | None = None) -> SimulationResult:
    """Run the harness workload of ``cfg`` in both date modes; llm_calls rows plus a summary."""
    cfg = cfg or WorkloadConfig()
    began = time.perf_counter()
    clock = Clock(cfg.tz)
    scripts = _write_scripts(cfg, clock)
    deploy = clock.at(cfg.cutover_date, 0)
    window = clock.at(cfg.start, 0)
    # Crossing calls depend on timing only, which the scripts fix before anything is built.
    crossing = _crossing_keys(scripts, cfg, clock)
    owners = {s for s, _ in crossing}
    all_rows, replayed = _replay(scripts, cfg, deploy, owners)
    rows = [r for r in all_rows if r.at >= window]
    anchored = [r for r in rows if (r.script, r.index) in crossing]
    rolling = [r for r in replayed if (r.script, r.index) in crossing]
    a_share, r_share = _share(anchored), _share(rolling)
    effect = None if a_share is None or r_share is None else a_share - r_share
    frame = _frame(scripts, rows, cfg)
    causes = {c: 0 for c in TRUE_CAUSES}
    for row in rows:
        causes[row.cause] += 1
    summary = SimulationSummary.for_config(
        cfg,
        calls=len(rows),
        sessions=len({r.script for r in rows}),
        causes=causes,
        true_effect=effect,
        true_effect_detail=TrueEffect(
            effect=effect, calls=len(anchored), sessions=len(owners), anchored_share=a_share, rolling_share=r_share
        ),
        elapsed_s=round(time.perf_counter() - began, 3),
    )
    return SimulationResult(frame, summary)


def write_calls(frame: pl.DataFrame, path: str | Path, summary: SimulationSummary | None = None) -> Path:
    """Write llm_calls rows to Parquet; the summary travels in the file's key-value metadata."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    metadata = {PARQUET_SUMMARY_KEY: summary.model_dump_json()} if summary is not None else None
    frame.write_parquet(out, metadata=metadata, row_group_size=1_000_000)
    return out


def read_summary(path: str | Path) -> SimulationSummary | None:
    """The simulation summary stored in a Parquet written by :func:`write_calls`, if any."""
    try:
        meta = pl.read_parquet_metadata(Path(path))
    except Exception:  # not a Parquet file, or unreadable: no summary to offer
        return None
    text = meta.get(PARQUET_SUMMARY_KEY)
    return SimulationSummary.model_validate_json(text) if text else None

