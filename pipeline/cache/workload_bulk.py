"""Bulk workload: millions of llm_calls rows in seconds, for benchmarks (``pipeline simulate --bulk N``).

It draws from the same workload model as :mod:`pipeline.cache.workload` (session kinds, rates, the
shapes of gaps and message sizes, the cron grid, the burn-in, the two date modes and the cutover)
but replaces per-request work with array arithmetic:

* system-prompt sizes come from real requests built once per kind, project and date mode, so
  the sizes match the detailed simulator's;
* history grows by the drawn message sizes; compaction is folded arithmetically (the history
  restarts from a summary each time it passes the limit; the compaction request itself is not
  emitted);
* the cache follows the same provider rules in closed form: Anthropic reads back the previous
  prompt on a continuation and only the tools + system prompt after a compaction, nothing after a
  change inside the system prompt; OpenAI reads the longest unchanged prefix in 1024 + 128·k
  steps. Cross-session prefix sharing is not modelled.

``true_effect`` is computed the same way as in the detailed simulator, with the rolling
counterfactual of a crossing call taken in closed form (a turn that starts on a new date misses,
a call inside a turn that began before midnight hits).
"""

from __future__ import annotations

import datetime as dt
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from pipeline.anchoring.request_builder import PromptSections, RequestBuilder
from pipeline.anchoring.rules import date_change_notice
from pipeline.anchoring.tokens import BLOCK_OVERHEAD_TOKENS, estimate_tokens
from pipeline.cache.simulator import PromptHasher
from pipeline.cache.workload import (
    BREAK_P,
    BREAK_RANGE,
    CALLS_SCHEMA,
    CHANNEL_GAP,
    CHANNEL_HOURS,
    CHANNEL_MAX_CALLS,
    CHANNEL_MESSAGES,
    CRON_AFTER_MIN,
    CRON_BEFORE_MIN,
    CRON_DISPATCH,
    CRON_INTERVALS,
    DAY_HOURS,
    HEAVY_MODEL_P,
    INTERACTIVE_TURNS,
    KINDS,
    LAST_TURN_HOUR,
    LONG_TOOL_P,
    LONG_TOOL_RANGE,
    MEMORY_UPDATE_HOURS,
    MESSAGE_TOKENS_OVERHEAD,
    MORE_CALLS,
    PERSONAS,
    REPLY_TOKENS,
    RESUME_BLOCKS,
    RESUME_DAYS,
    RESUMED_TURNS,
    SUMMARY_TOKENS,
    THINK,
    TOOL_ARGS_TOKENS,
    TOOL_CALL_TOKENS_OVERHEAD,
    TOOL_GAP_CLIP,
    TOOL_GAP_MEDIAN,
    TOOL_GAP_SIGMA,
    TOOL_GUIDANCE,
    TOOL_RESULT_TOKENS,
    TOOLS,
    TRUE_CAUSES,
    USER_TOKENS,
    Clock,
    Projects,
    Shape,
    SimulationResult,
    SimulationSummary,
    TrueEffect,
    WorkloadConfig,
    models_for,
)

__all__ = ["CALLS_PER_DAY_AT_SCALE_1", "simulate_bulk"]

# Calls per simulated day that the default mix produces at scale 1 (measured on the detailed
# simulator); the bulk generator sizes its population from it and trims to exactly N calls.
CALLS_PER_DAY_AT_SCALE_1 = 725.0
DAY = 86400.0

# Codes of the changed_sections column.
_CHANGED = [None, [], ["current-date"], ["memory"], ["memory", "current-date"]]
_KIND_CODE: dict[str, int] = {kind: i for i, kind in enumerate(KINDS)}


@dataclass(frozen=True, slots=True)
class _Sizes:
    """Token offsets of the prompt prefix for one kind, project and date mode."""

    before_memory: int
    before_date: int
    system_end: int


def _prefix_sizes(cfg: WorkloadConfig) -> dict[tuple[int, int, str], _Sizes]:
    """Sizes measured on real requests built with the same sections as the detailed simulator."""
    projects = Projects(cfg, Clock(cfg.tz))
    builder = RequestBuilder(TOOLS)
    out: dict[tuple[int, int, str], _Sizes] = {}
    for kind in KINDS:
        for project in range(cfg.mix.projects):
            environment = (
                f"## Environment\n\nWorking directory: /home/dev/src/project{project}\nPlatform: linux\n"
                f"Session: bulk{cfg.seed}-{kind[:3]}-0000000\nChannel: {kind}"
            )
            sections = PromptSections(
                persona=PERSONAS[kind],
                experience=projects.experience[project],
                memory=projects.memory(project, 0),
                environment=environment,
                tool_guidance=TOOL_GUIDANCE,
            )
            for mode in ("rolling", "anchored"):
                request = builder.build_request([], sections, mode=mode, today="2026-09-01", base_ymd="2026-09-01")
                prompt = PromptHasher().prompt(request)
                ends = dict(zip(prompt.labels, prompt.ends, strict=False))
                labels = list(prompt.labels)
                out[(_KIND_CODE[kind], project, mode)] = _Sizes(
                    before_memory=prompt.ends[labels.index("memory") - 1],
                    before_date=prompt.ends[labels.index("current-date") - 1],
                    system_end=ends["tool-guidance"],
                )
    return out


# --------------------------------------------------------------------------- draws


def _draw(rng: np.random.Generator, shape: Shape, n: int) -> np.ndarray:
    return np.clip(rng.lognormal(math.log(shape.median), shape.sigma, n), shape.lo, shape.hi)


def _more_calls(rng: np.random.Generator, p_more: float | np.ndarray, cap: int | np.ndarray, n: int) -> np.ndarray:
    """1 + a geometric number of further calls (chance ``p_more`` each), capped."""
    p = np.broadcast_to(np.asarray(p_more, dtype=float), (n,))
    calls = np.ones(n, dtype=np.int64)
    active = p > 0
    if active.any():
        calls[active] = rng.geometric(1.0 - p[active])
    return np.minimum(calls, np.broadcast_to(cap, (n,)))


def _hours(rng: np.random.Generator, weights: tuple[float, ...], n: int) -> np.ndarray:
    w = np.asarray(weights) / sum(weights)
    return rng.choice(24, size=n, p=w) * 3600.0 + rng.uniform(0, 3600, n)


def _segment_offsets(lengths: np.ndarray) -> np.ndarray:
    """Index of the first element of each segment (segments are consecutive runs of ``lengths``)."""
    return (np.cumsum(lengths) - lengths).astype(np.int64)


def _segment_cumsum(values: np.ndarray, lengths: np.ndarray, exclusive: bool = False) -> np.ndarray:
    """Cumulative sums restarting at each segment; empty segments are allowed."""
    lengths = lengths[lengths > 0]
    if values.size == 0:
        return values.copy()
    total = np.cumsum(values)
    starts = _segment_offsets(lengths)
    base = np.repeat(total[starts] - values[starts], lengths)
    out = total - base
    return out - values if exclusive else out


# --------------------------------------------------------------------------- population


@dataclass(slots=True)
class _Turns:
    session: np.ndarray  # int64
    start: np.ndarray  # local seconds since local midnight of the first generated day
    calls: np.ndarray  # int64
    kind: np.ndarray  # int8 code


def _interactive(rng: np.random.Generator, cfg: WorkloadConfig, kind: str, rate: float, first_session: int,
                 n_days: int) -> tuple[_Turns, np.ndarray, int]:
    """Same-day blocks of turns; ``resumed`` sessions get 1-3 more blocks on later days."""
    per_day = rng.poisson(rate * cfg.scale, n_days)
    n_sessions = int(per_day.sum())
    day = np.repeat(np.arange(n_days), per_day)
    session = np.arange(first_session, first_session + n_sessions)
    blocks_day = [day]
    blocks_session = [session]
    blocks_turns = [3 + rng.poisson(INTERACTIVE_TURNS, n_sessions)]
    if kind == "resumed":
        extra = rng.integers(RESUME_BLOCKS[0], RESUME_BLOCKS[1] + 1, n_sessions)
        owner = np.repeat(np.arange(n_sessions), extra)
        step = rng.integers(RESUME_DAYS[0], RESUME_DAYS[1] + 1, owner.size)
        later = day[owner] + _segment_cumsum(step, extra)
        keep = later < n_days
        blocks_day.append(later[keep])
        blocks_session.append(session[owner][keep])
        blocks_turns.append(3 + rng.poisson(RESUMED_TURNS, int(keep.sum())))
    b_day = np.concatenate(blocks_day)
    b_session = np.concatenate(blocks_session)
    b_turns = np.concatenate(blocks_turns)
    b_start = b_day * DAY + _hours(rng, DAY_HOURS, b_day.size)
    # Turns: durations from their tool loops, then starts by a running sum within each block.
    n_turns = int(b_turns.sum())
    t_block = np.repeat(np.arange(b_day.size), b_turns)
    p_more, cap = MORE_CALLS[kind]
    calls = _more_calls(rng, p_more, cap, n_turns)
    gaps = _tool_gaps(rng, kind, LONG_TOOL_P, int(calls.sum()))
    first_of_turn = _segment_offsets(calls)
    gaps[first_of_turn] = 0.0
    duration = np.add.reduceat(gaps, first_of_turn) if gaps.size else np.zeros(0)
    think = np.where(rng.random(n_turns) < BREAK_P, rng.uniform(*BREAK_RANGE, n_turns), _draw(rng, THINK, n_turns))
    start = b_start[t_block] + _segment_cumsum(duration + think, b_turns, exclusive=True)
    keep = start < (b_day[t_block] * DAY + LAST_TURN_HOUR * 3600.0)
    turns = _Turns(b_session[t_block][keep], start[keep], calls[keep], np.full(int(keep.sum()), _KIND_CODE[kind], np.int8))
    call_gaps = gaps[np.repeat(keep, calls)]
    return turns, call_gaps, first_session + n_sessions


def _tool_gaps(rng: np.random.Generator, kind: str, long_p: float, n: int) -> np.ndarray:
    gaps = np.clip(rng.lognormal(math.log(TOOL_GAP_MEDIAN[kind]), TOOL_GAP_SIGMA, n), *TOOL_GAP_CLIP)
    if long_p:
        long = rng.random(n) < long_p
        gaps[long] = rng.uniform(*LONG_TOOL_RANGE, int(long.sum()))
    return gaps


def _scheduled(rng: np.random.Generator, cfg: WorkloadConfig, first_session: int, n_days: int) -> tuple[_Turns, np.ndarray, int]:
    """A clock-aligned cron grid around every midnight, from night i % 3 on."""
    n = round(cfg.mix.scheduled_sessions * cfg.scale)
    interval = rng.choice(CRON_INTERVALS, n)
    before = rng.integers(CRON_BEFORE_MIN[0], CRON_BEFORE_MIN[1] + 1, n) * 60 // interval
    after = rng.integers(CRON_AFTER_MIN[0], CRON_AFTER_MIN[1] + 1, n) * 60 // interval
    nights = np.maximum(0, n_days - np.arange(n) % 3)
    per_session = nights * (before + after + 1)
    owner = np.repeat(np.arange(n), per_session)
    k = _segment_cumsum(np.ones(owner.size, dtype=np.int64), per_session, exclusive=True)
    slots = (before + after + 1)[owner]
    night = (np.arange(n) % 3)[owner] + k // slots
    slot = k % slots - before[owner]
    start = (night + 1) * DAY + slot * interval[owner] + rng.uniform(*CRON_DISPATCH, owner.size)
    p_more, cap = MORE_CALLS["scheduled"]
    calls = _more_calls(rng, p_more, cap, owner.size)
    gaps = _tool_gaps(rng, "scheduled", 0.0, int(calls.sum()))
    gaps[_segment_offsets(calls)] = 0.0
    turns = _Turns(first_session + owner, start, calls, np.full(owner.size, _KIND_CODE["scheduled"], np.int8))
    return turns, gaps, first_session + n


def _channel(rng: np.random.Generator, cfg: WorkloadConfig, first_session: int, n_days: int) -> tuple[_Turns, np.ndarray, int]:
    """Evening-heavy bursts of messages, each message one turn."""
    n = round(cfg.mix.channel_sessions * cfg.scale)
    bursts = rng.poisson(cfg.mix.channel_bursts_per_day, (n, n_days))
    per_session = bursts.sum(axis=1)
    owner = np.repeat(np.arange(n), per_session)
    b_day = np.repeat(np.tile(np.arange(n_days), n), bursts.ravel())
    b_start = b_day * DAY + _hours(rng, CHANNEL_HOURS, owner.size)
    order = np.lexsort((b_start, owner))
    owner, b_start = owner[order], b_start[order]
    messages = 2 + rng.poisson(CHANNEL_MESSAGES, owner.size)
    t_burst = np.repeat(np.arange(owner.size), messages)
    n_turns = t_burst.size
    calls = _more_calls(rng, cfg.mix.channel_tool_p, CHANNEL_MAX_CALLS, n_turns)
    gaps = _tool_gaps(rng, "channel", 0.0, int(calls.sum()))
    first = _segment_offsets(calls)
    gaps[first] = 0.0
    duration = np.add.reduceat(gaps, first) if gaps.size else np.zeros(0)
    pause = _draw(rng, CHANNEL_GAP, n_turns)
    start = b_start[t_burst] + _segment_cumsum(duration + pause, messages, exclusive=True)
    turns = _Turns(first_session + owner[t_burst], start, calls, np.full(n_turns, _KIND_CODE["channel"], np.int8))
    # Bursts that would overlap are pushed apart by the strict per-session ordering of calls.
    return turns, gaps, first_session + n


def _memory_versions(cfg: WorkloadConfig, n_days: int, project: np.ndarray, at: np.ndarray) -> np.ndarray:
    """How many memory updates each project had received by ``at`` (as in the detailed model)."""
    rng = np.random.default_rng([cfg.seed, 31])
    lo, hi = MEMORY_UPDATE_HOURS
    updates = rng.random((cfg.mix.projects, n_days)) < cfg.mix.memory_updates_per_day
    p_idx, d_idx = np.nonzero(updates)
    times = d_idx * DAY + rng.uniform(lo * 3600, hi * 3600, p_idx.size)
    span = (n_days + 2) * DAY
    keys = np.sort(p_idx * span + times)
    query = project * span + at
    return np.searchsorted(keys, query, side="right") - np.searchsorted(keys, project * span, side="left")


def _openai_steps(tokens: np.ndarray) -> np.ndarray:
    from pipeline.cache.simulator import OPENAI_MIN_TOKENS, OPENAI_STEP_TOKENS

    stepped = OPENAI_MIN_TOKENS + OPENAI_STEP_TOKENS * ((tokens - OPENAI_MIN_TOKENS) // OPENAI_STEP_TOKENS)
    return np.where(tokens < OPENAI_MIN_TOKENS, 0, stepped)


def _generate(n_calls: int, cfg: WorkloadConfig, scale: float) -> tuple[pl.DataFrame, dict[str, Any]] | None:
    """One draw of the population at ``scale``; None when it holds fewer than ``n_calls`` logged calls.

    Arrays are released as soon as they are used and kept in small dtypes: at 10 M calls every
    per-call float64 array weighs ~100 MB.
    """
    work = cfg.model_copy(update={"scale": scale})
    rng = np.random.default_rng([cfg.seed, 20260])
    n_days = cfg.burn_in_days + cfg.days
    parts: list[tuple[_Turns, np.ndarray]] = []
    next_session = 0
    for kind_name, rate in (("interactive", cfg.mix.interactive_per_day), ("resumed", cfg.mix.resumed_per_day)):
        turns, gaps, next_session = _interactive(rng, work, kind_name, rate, next_session, n_days)
        parts.append((turns, gaps))
    sched_first = next_session
    turns, gaps, chan_first = _scheduled(rng, work, sched_first, n_days)
    parts.append((turns, gaps))
    turns, gaps, n_sessions = _channel(rng, work, chan_first, n_days)
    parts.append((turns, gaps))

    t_session = np.concatenate([p[0].session for p in parts]).astype(np.int32)
    t_start = np.concatenate([p[0].start for p in parts])
    t_calls = np.concatenate([p[0].calls for p in parts])
    t_kind = np.concatenate([p[0].kind for p in parts])
    c_gap = np.concatenate([p[1] for p in parts])
    del parts, turns, gaps

    # Per session: kind, project, model.
    s_kind = np.zeros(n_sessions, np.int8)
    s_kind[t_session] = t_kind
    s_project = rng.integers(0, cfg.mix.projects, n_sessions).astype(np.int8)
    sched = np.arange(sched_first, chan_first)
    s_project[sched] = (sched - sched_first) % cfg.mix.projects
    chan = np.arange(chan_first, n_sessions)
    s_project[chan] = (chan - chan_first + 3) % cfg.mix.projects
    models = models_for(cfg.provider)
    model_names = [models["main"], models["heavy"], models["light"]]
    s_model = np.where(rng.random(n_sessions) < HEAVY_MODEL_P, 1, 0)
    s_model[sched_first:] = 2

    # Calls: each turn's calls follow its start by the tool-loop gaps.
    c_turn = np.repeat(np.arange(t_start.size, dtype=np.int32), t_calls)
    t = t_start[c_turn] + _segment_cumsum(c_gap, t_calls)
    pos = _segment_cumsum(np.ones(c_turn.size, np.int32), t_calls, exclusive=True)
    del c_gap
    session = t_session[c_turn]
    order = np.lexsort((t, session))
    session, t, c_turn, pos = session[order], t[order], c_turn[order], pos[order]
    del order
    # A session's calls are strictly ordered (a turn waits for the previous one): running maximum.
    idx = np.arange(t.size, dtype=np.float64)
    big = (n_days + 2) * DAY + float(t.size)
    offset = session * big
    t = idx + np.maximum.accumulate(t - idx + offset) - offset
    del idx, offset
    inside = t < n_days * DAY
    session, t, c_turn, pos = session[inside], t[inside], c_turn[inside], pos[inside]
    del inside

    # Choose the logged rows now (whole sessions, the last one cut short), and keep only the calls
    # of the chosen sessions (their burn-in included) for the arithmetic below.
    day = (np.floor(t / DAY) - cfg.burn_in_days).astype(np.int16)  # window day index; < 0 = burn-in
    rows = _trim(day >= 0, session, n_calls, np.random.default_rng([cfg.seed, 5]))
    if rows is None:
        return None
    chosen = np.zeros(t.size, bool)
    chosen[rows] = True
    last_row = rows[-1]
    member = np.isin(session, np.unique(session[rows]))
    member[last_row + 1 :] &= session[last_row + 1 :] != session[last_row]  # the cut session's tail
    session, t, c_turn, pos, day, chosen = (a[member] for a in (session, t, c_turn, pos, day, chosen))
    del member, rows
    n = t.size

    kind = s_kind[session]
    project = s_project[session]
    turn_start = pos == 0
    del pos
    final = np.ones(n, bool)
    final[:-1] = c_turn[1:] != c_turn[:-1]
    same = np.zeros(n, bool)
    same[1:] = session[1:] == session[:-1]
    turn_at = t_start[c_turn]
    turn_day = (np.floor(turn_at / DAY) - cfg.burn_in_days).astype(np.int16)
    del c_turn
    cut = (cfg.cutover_date - cfg.start).days
    anchored = day >= cut

    def prev(a: np.ndarray) -> np.ndarray:
        out = np.empty_like(a)
        out[1:] = a[:-1]
        out[:1] = a[:1]
        return out

    # Message sizes (tokens, with the history estimate's framing).
    framing = MESSAGE_TOKENS_OVERHEAD + BLOCK_OVERHEAD_TOKENS + 8  # + the message tag
    completion = np.where(final, _draw(rng, REPLY_TOKENS, n), _draw(rng, TOOL_ARGS_TOKENS, n) + TOOL_CALL_TOKENS_OVERHEAD)
    completion = (completion + framing).astype(np.float32)
    del final
    added = _draw(rng, TOOL_RESULT_TOKENS, n).astype(np.float32)  # a tool result, or the user message:
    for name, code in _KIND_CODE.items():
        mask = turn_start & (kind == code)
        added[mask] = _draw(rng, USER_TOKENS[name], int(mask.sum()))
    del mask
    notice = estimate_tokens(date_change_notice(cfg.start.isoformat())) + 1
    new_day_turn = same & turn_start & (turn_day != prev(turn_day))
    del turn_start
    increment = np.where(same, prev(completion), 0.0) + added + framing
    increment += np.where(anchored & new_day_turn, notice, 0)
    del added
    counts = np.bincount(session, minlength=n_sessions)
    history = _segment_cumsum(increment, counts[counts > 0])
    del increment, counts
    summary = SUMMARY_TOKENS.median + framing
    period = cfg.mix.compaction_limit_tokens - summary
    k = np.floor(history / period)
    compacted = same & (k != prev(k))
    history -= k * period
    history[k > 0] += summary
    del k

    version = _memory_versions(cfg, n_days, project.astype(np.int64), turn_at)
    mem_changed = same & (version != prev(version))
    del version, turn_at
    mode_switch = same & (anchored != prev(anchored))
    date_changed = same & (mode_switch | (~anchored & (turn_day != prev(turn_day))))
    del turn_day

    sizes = _prefix_sizes(cfg)
    lookup = np.zeros((len(KINDS), cfg.mix.projects, 2, 3), np.int64)
    for (k_code, p, mode), size in sizes.items():
        lookup[k_code, p, int(mode == "anchored")] = (size.before_memory, size.before_date, size.system_end)
    system_end = lookup[kind, project, anchored.astype(np.int64), 2]
    prompt = (system_end + history).astype(np.int64)
    del history
    gap = t - prev(t)
    ttl = cfg.rules.ttl_seconds
    first = ~same
    expired = same & (gap > ttl)
    # Causes in TRUE_CAUSES order (hit 0, cold_start 1, ttl_expiry 2, date_change 3, prefix_change 4,
    # compaction 5); the earliest change in the prompt decides: memory, then the cutover's wording,
    # then the date, then a history restarted from its summary.
    cause = np.select(
        [first, expired, mem_changed | mode_switch, date_changed, compacted], [1, 2, 4, 3, 5], default=0
    ).astype(np.int8)
    changed = np.where(first, 0, 1 + date_changed.astype(np.int8) + 2 * mem_changed.astype(np.int8)).astype(np.int8)

    prev_prompt = prev(prompt)
    write: np.ndarray | None
    if cfg.provider == "anthropic":
        # Breakpoints at the end of the system prompt and of the last message.
        cached = np.select([first | expired, mem_changed | date_changed, compacted], [0, 0, system_end], default=prev_prompt)
        write = prompt - cached
        miss_rolling = np.zeros(n, np.int64)
    else:
        before_memory = lookup[kind, project, anchored.astype(np.int64), 0]
        before_date = lookup[kind, project, anchored.astype(np.int64), 1]
        matched = np.select(
            [first | expired, mem_changed, date_changed, compacted],
            [0, before_memory, before_date, system_end],
            default=prev_prompt,
        )
        cached = _openai_steps(matched)
        write = None
        miss_rolling = _openai_steps(lookup[kind, project, 0, 1])
    cached = np.minimum(cached, prompt)
    del prev_prompt, system_end, first, expired, mem_changed, mode_switch, date_changed, compacted

    # True effect: post-cutover-day calls crossing midnight within the TTL; their rolling
    # counterfactual misses when the call opens a turn on a new date and hits otherwise.
    crossing = chosen & same & (gap <= ttl) & (day != prev(day)) & (day > cut)
    prompt_x = prompt[crossing].sum()
    effect_detail: dict[str, Any] = {"calls": int(crossing.sum()), "sessions": int(np.unique(session[crossing]).size)}
    if prompt_x:
        a_share = float(cached[crossing].sum() / prompt_x)
        r_share = float(np.where(new_day_turn, miss_rolling, cached)[crossing].sum() / prompt_x)
        effect_detail.update(effect=a_share - r_share, anchored_share=a_share, rolling_share=r_share)
    else:
        effect_detail.update(effect=None, anchored_share=None, rolling_share=None)

    rows = np.nonzero(chosen)[0]
    frame = _frame(cfg, rows, session, t, kind, s_model, model_names, prompt, cached, write, completion,
                   changed, cause)
    return frame, effect_detail


def _trim(keep: np.ndarray, session: np.ndarray, n_calls: int, rng: np.random.Generator) -> np.ndarray | None:
    """Indices of exactly ``n_calls`` kept rows: whole sessions in random order, the last one cut short."""
    idx = np.nonzero(keep)[0]
    if idx.size < n_calls:
        return None
    sessions, counts = np.unique(session[idx], return_counts=True)
    order = rng.permutation(sessions.size)
    total = np.cumsum(counts[order])
    last = int(np.searchsorted(total, n_calls))
    chosen = np.zeros(sessions.size, bool)
    chosen[order[: last + 1]] = True
    take = np.repeat(chosen, counts)
    rows = idx[take]
    if rows.size > n_calls:
        # Cut the last chosen session short: drop its final calls.
        cut_session = sessions[order[last]]
        extra = rows.size - n_calls
        of_cut = np.nonzero(session[rows] == cut_session)[0]
        rows = np.delete(rows, of_cut[-extra:])
    return rows


def _frame(cfg: WorkloadConfig, rows: np.ndarray, session: np.ndarray, t: np.ndarray, kind: np.ndarray,
           s_model: np.ndarray, model_names: list[str], prompt: np.ndarray, cached: np.ndarray,
           write: np.ndarray | None, completion: np.ndarray, changed: np.ndarray, cause: np.ndarray) -> pl.DataFrame:
    n = rows.size
    sess = session[rows]
    local_origin = dt.datetime.combine(cfg.start - dt.timedelta(days=cfg.burn_in_days), dt.time())
    local_us = (t[rows] * 1e6).astype(np.int64)
    if cfg.tz in ("UTC", "Etc/UTC"):
        origin = int(local_origin.replace(tzinfo=dt.UTC).timestamp() * 1_000_000)
        at = pl.Series("at", local_us + origin).cast(pl.Datetime("us", "UTC"))
    else:
        naive = pl.Series("at", local_us + int((local_origin - dt.datetime(1970, 1, 1)).total_seconds() * 1_000_000))
        naive = naive.cast(pl.Datetime("us"))
        # Wall-clock times skipped by a DST change are moved on by an hour, as clocks do.
        local = naive.dt.replace_time_zone(cfg.tz, ambiguous="earliest", non_existent="null")
        shifted = (naive + dt.timedelta(hours=1)).dt.replace_time_zone(cfg.tz, ambiguous="earliest", non_existent="null")
        at = local.fill_null(shifted).dt.convert_time_zone("UTC")
    kinds = pl.Series([k[:3] for k in KINDS]).gather(kind[rows].astype(np.int64))
    cached_rows = cached[rows].astype(np.int64)
    prompt_rows = prompt[rows]
    completion_rows = completion[rows].astype(np.int64)
    latency = 300.0 + 0.02 * (prompt_rows - cached_rows) + 0.002 * cached_rows + 14.0 * completion_rows
    frame = pl.DataFrame(
        {
            "session_no": sess,
            "kind3": kinds,
            "at": at,
            "model": pl.Series(model_names).gather(s_model[sess]),
            "prompt_tokens": prompt_rows,
            "cached_tokens": cached_rows,
            "cache_write_tokens": pl.Series(write[rows].astype(np.int64)) if write is not None else pl.Series([None] * n, dtype=pl.Int64),
            "completion_tokens": completion_rows,
            "latency_ms": np.round(latency, 1),
            "changed_sections": pl.Series(_CHANGED, dtype=pl.List(pl.String)).gather(changed[rows].astype(np.int64)),
            "true_cause": pl.Series(TRUE_CAUSES).gather(cause[rows].astype(np.int64)),
        }
    )
    tools_fp = "bulk"
    frame = frame.with_columns(
        pl.concat_str([pl.lit(f"bulk{cfg.seed}-"), pl.int_range(n).cast(pl.String).str.zfill(9)]).alias("call_id"),
        pl.lit("simulated").alias("source"),
        pl.concat_str([pl.lit(f"bulk{cfg.seed}-"), pl.col("kind3"), pl.lit("-"),
                       pl.col("session_no").cast(pl.String).str.zfill(7)]).alias("session_id"),
        pl.lit(f"simulate-bulk-seed{cfg.seed}").alias("run_id"),
        pl.lit(None, pl.String).alias("batch_id"),
        pl.lit(None, pl.String).alias("system_fp"),
        pl.lit(tools_fp).alias("tools_fp"),
        pl.lit(None, pl.String).alias("prefix_fp"),
        pl.lit(None, pl.Int64).alias("line_no"),
        pl.lit(None, pl.String).alias("origin"),
    )
    return frame.select([pl.col(name).cast(dtype) for name, dtype in CALLS_SCHEMA.items()])


def simulate_bulk(n_calls: int, cfg: WorkloadConfig | None = None) -> SimulationResult:
    """Exactly ``n_calls`` llm_calls rows drawn from the workload model of ``cfg``, vectorised."""
    cfg = cfg or WorkloadConfig()
    if n_calls < 1:
        raise ValueError("the bulk size must be at least 1 call")
    began = time.perf_counter()
    scale = n_calls / (CALLS_PER_DAY_AT_SCALE_1 * cfg.days) * 1.1
    for _ in range(8):
        out = _generate(n_calls, cfg, scale)
        if out is not None:
            break
        scale *= 1.4  # short of calls (small N, or a short window): draw a larger population
    else:
        raise ValueError(f"could not draw {n_calls} calls from this workload; lengthen --days")
    frame, effect = out
    counts = frame.group_by("true_cause").len()
    causes = {c: 0 for c in TRUE_CAUSES}
    causes.update({row[0]: int(row[1]) for row in counts.iter_rows()})
    summary = SimulationSummary.for_config(
        cfg,
        calls=frame.height,
        sessions=frame["session_id"].n_unique(),
        bulk=True,
        causes=causes,
        true_effect=effect["effect"],
        true_effect_detail=TrueEffect(**effect),
        elapsed_s=round(time.perf_counter() - began, 3),
    )
    return SimulationResult(frame, summary)
