"""Token estimate, prices and the provider prefix-cache models (rules and their invariants)."""

from __future__ import annotations

import datetime as dt
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.anchoring.request_builder import PromptSections, RequestBuilder
from pipeline.anchoring.tokens import BLOCK_OVERHEAD_TOKENS, block_tokens, estimate_tokens
from pipeline.cache.simulator import (
    ANTHROPIC_LOOKBACK_BLOCKS,
    OPENAI_EXTENDED_TTL_SECONDS,
    OPENAI_IN_MEMORY_TTL_SECONDS,
    AnthropicCache,
    OpenAICache,
    Prompt,
    PromptHasher,
    first_divergence,
    make_cache,
    provider_rules,
)
from pipeline.calls.prices import call_cost, load_prices

SECTIONS = PromptSections(
    persona="## Persona\n\n" + "careful agent " * 300,
    experience="## Experience\n\n" + "small diffs " * 200,
    memory="## Memory\n\n" + "likes tests " * 200,
    environment="## Environment\n\nLinux",
    tool_guidance="## Tools\n\n" + "use the shell " * 300,
)
TOOLS = [{"type": "function", "function": {"name": "shell", "description": "run " * 400, "parameters": {}}}]
BUILDER = RequestBuilder(TOOLS)


def _history(n: int, ymd: str = "2026-10-12") -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "words " * 60, "sender_ymd": ymd}
        for i in range(n)
    ]


def _prompt(history: list[dict[str, Any]], *, today: str = "2026-10-12", mode: str = "rolling", hasher: PromptHasher | None = None) -> Prompt:
    request = BUILDER.build_request(history, SECTIONS, mode=mode, today=today, base_ymd="2026-10-12")  # type: ignore[arg-type]
    plain = (hasher or PromptHasher()).prompt(request)
    system_end = len(TOOLS) + 6 - 1
    return plain.with_breakpoints((system_end, len(plain.keys) - 1))


# --------------------------------------------------------------------------- tokens and prices


def test_token_estimate_rule() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2  # ceil(5 / 4)
    assert estimate_tokens("日期") == 2  # one token per non-ASCII code point
    assert estimate_tokens("ab日期") == 3
    assert block_tokens("abcd") == 1 + BLOCK_OVERHEAD_TOKENS
    assert block_tokens({"role": "user", "content": "hi"}) > BLOCK_OVERHEAD_TOKENS


@given(st.text(max_size=200), st.text(max_size=200))
def test_token_estimate_is_monotone_and_subadditive_within_rounding(a: str, b: str) -> None:
    assert estimate_tokens(a + b) >= max(estimate_tokens(a), estimate_tokens(b))
    assert estimate_tokens(a + b) <= estimate_tokens(a) + estimate_tokens(b) + 1


def test_anthropic_prices_keep_their_cache_multipliers() -> None:
    book = load_prices()
    p = book.price("claude-sonnet-4-5-20250929", source="claude-code", when=dt.date(2026, 10, 1))  # dated snapshot → its family
    assert p is not None and p.model == "claude-sonnet-4-5" and p.provider == "anthropic"
    assert p.cache_write_5m is not None and p.cache_write_1h is not None
    assert math.isclose(p.cache_write_5m, 1.25 * p.input) and math.isclose(p.cache_write_1h, 2 * p.input)
    assert math.isclose(p.cache_read, 0.1 * p.input)
    assert p.write_price(300) == p.cache_write_5m and p.write_price(3600) == p.cache_write_1h
    assert book.price("unknown-model", source="claude-code") is None  # never priced as another model
    assert book.price(None) is None
    gpt = book.price("gpt-5", source="codex")
    assert gpt is not None and gpt.cache_write_5m is None and gpt.write_price(300) == gpt.input  # OpenAI: no write premium


def test_prices_are_configurable(tmp_path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"models": {
        "house-model": {"input": 2.0, "cache_read": 0.2, "output": 8.0},
        "claude-sonnet-4-5": {"input": 1.0, "cache_read": 0.1, "cache_write_5m": 1.25, "output": 5.0},
    }}))
    book = load_prices(path)
    house = book.price("house-model-2026", source="import:harness")
    assert house is not None and (house.input, house.source) == (2.0, "price file")
    override = book.price("claude-sonnet-4-5-20250929", source="claude-code")
    assert override is not None and override.input == 1.0
    from pipeline.errors import UsageError

    with pytest.raises(UsageError, match="no price file"):
        load_prices(tmp_path / "missing.json")
    path.write_text(json.dumps({"models": {"m": {"input": 1}}}))
    with pytest.raises(UsageError, match="input, cache_read and output"):
        load_prices(path)


def test_each_price_is_the_one_in_force_on_the_call_day() -> None:
    book = load_prices()
    # Claude Sonnet 4.6 had a long-context price until 2026-03-13, and none after.
    before = book.price("claude-sonnet-4-6", source="claude-code", when=dt.date(2026, 3, 1))
    after = book.price("claude-sonnet-4-6", source="claude-code", when=dt.date(2026, 4, 1))
    assert before is not None and after is not None
    assert before.tiers and before.tiers[0].above_input_tokens == 200_000 and not after.tiers
    assert call_cost(before, 300_000, 0, 0, 0) == pytest.approx(2 * call_cost(after, 300_000, 0, 0, 0))


@pytest.mark.parametrize(("model", "source", "provider", "input_", "cache_read", "output"), [
    ("claude-opus-4-1-20250805", "claude-code", "anthropic", 15.0, 1.5, 75.0),
    ("claude-opus-4-20250514", "claude-code", "anthropic", 15.0, 1.5, 75.0),
    ("claude-opus-4-5-20251101", "claude-code", "anthropic", 5.0, 0.5, 25.0),
    ("claude-sonnet-4-20250514", "claude-code", "anthropic", 3.0, 0.3, 15.0),
    ("claude-sonnet-4-5-20250929", "claude-code", "anthropic", 3.0, 0.3, 15.0),
    ("claude-haiku-4-5-20251001", "claude-code", "anthropic", 1.0, 0.1, 5.0),
    ("gpt-5", "codex", "openai", 1.25, 0.125, 10.0),
    ("gpt-5-codex", "codex", "openai", 1.25, 0.125, 10.0),
    ("gpt-5-mini", "codex", "openai", 0.25, 0.025, 2.0),
    ("gpt-5.1-codex-mini", "codex", "openai", 0.25, 0.025, 2.0),
    ("gpt-5.2-codex", "codex", "openai", 1.75, 0.175, 14.0),
    ("gpt-5.4", "codex", "openai", 2.5, 0.25, 15.0),
    ("gpt-5.4-mini", "codex", "openai", 0.75, 0.075, 4.5),
])
def test_list_prices_of_the_claude_4_and_gpt_5_families(model, source, provider, input_, cache_read, output) -> None:
    p = load_prices().price(model, source=source, when=dt.date(2026, 4, 1))
    assert p is not None and p.provider == provider
    assert (p.input, p.cache_read, p.output) == pytest.approx((input_, cache_read, output))


def test_provider_rules_document_the_lifetimes() -> None:
    assert provider_rules("anthropic").ttl_seconds == 300
    assert provider_rules("anthropic", "long").ttl_seconds == 3600
    assert 300 <= OPENAI_IN_MEMORY_TTL_SECONDS <= 600
    assert provider_rules("openai").ttl_seconds == OPENAI_IN_MEMORY_TTL_SECONDS
    assert provider_rules("openai", "long").ttl_seconds == OPENAI_EXTENDED_TTL_SECONDS == 24 * 3600
    assert provider_rules("anthropic").min_tokens_for("claude-haiku-4-5") == 4096
    assert provider_rules("anthropic").min_tokens_for("claude-sonnet-4-5-20250929") == 1024
    with pytest.raises(ValueError):
        provider_rules("other")


# --------------------------------------------------------------------------- Anthropic


def test_anthropic_continuation_reads_the_previous_prompt_and_writes_the_rest() -> None:
    cache = AnthropicCache(provider_rules("anthropic"))
    first = _prompt(_history(3))
    r1 = cache.request(first, 0.0, "claude-sonnet-4-5")
    assert (r1.cached_tokens, r1.cache_write_tokens) == (0, first.tokens)
    second = _prompt(_history(5))
    r2 = cache.request(second, 30.0, "claude-sonnet-4-5")
    assert r2.cached_tokens == first.tokens
    assert r2.cache_write_tokens == second.tokens - first.tokens
    assert r2.uncached_tokens == 0


def test_anthropic_ttl_refreshed_on_hit_then_expires() -> None:
    cache = AnthropicCache(provider_rules("anthropic"))
    p = _prompt(_history(3))
    cache.request(p, 0.0)
    assert cache.request(p, 290.0).cached_tokens == p.tokens  # within 5 minutes
    assert cache.request(p, 580.0).cached_tokens == p.tokens  # refreshed at 290
    assert cache.request(p, 881.0).cached_tokens == 0  # 301 s after the last use


def test_anthropic_one_hour_ttl() -> None:
    cache = AnthropicCache(provider_rules("anthropic", "long"))
    p = _prompt(_history(3))
    cache.request(p, 0.0)
    assert cache.request(p, 3000.0).cached_tokens == p.tokens
    assert cache.request(p, 6601.0).cached_tokens == 0


def test_anthropic_minimum_cacheable_length() -> None:
    cache = AnthropicCache(provider_rules("anthropic"))
    short = Prompt((b"a", b"b"), (500, 900), ("persona", "message"), (1,))
    assert cache.request(short, 0.0, "claude-sonnet-4-5").cache_write_tokens == 0  # below 1024: nothing written
    assert cache.request(short, 1.0, "claude-sonnet-4-5").cached_tokens == 0
    long = Prompt((b"a", b"c"), (500, 3000), ("persona", "message"), (1,))
    assert cache.request(long, 2.0, "claude-haiku-4-5").cache_write_tokens == 0  # haiku 4.5 needs 4096
    assert cache.request(long, 3.0, "claude-sonnet-4-5").cache_write_tokens == 3000


def test_anthropic_date_change_rewrites_from_the_system_prompt() -> None:
    cache = AnthropicCache(provider_rules("anthropic"))
    history = _history(6)
    before = _prompt(history, today="2026-10-12")
    cache.request(before, 0.0)
    after = _prompt([*history, {"role": "user", "content": "next", "sender_ymd": "2026-10-13"}], today="2026-10-13")
    result = cache.request(after, 60.0)
    date_block = after.labels.index("current-date")
    assert first_divergence(before, after) == date_block
    assert result.cached_tokens == 0  # the only breakpoint before it is the end of the system prompt
    assert result.cache_write_tokens == after.tokens


def test_anthropic_compaction_keeps_the_system_entry_alive() -> None:
    cache = AnthropicCache(provider_rules("anthropic"))
    for i, t in enumerate(range(0, 1200, 200)):  # a long session: entries refreshed for 20 minutes
        cache.request(_prompt(_history(3 + 2 * i)), float(t))
    compacted = _prompt([{"role": "user", "content": "## Session hand-off\n\nsummary"}])
    result = cache.request(compacted, 1300.0)
    assert result.cached_tokens == compacted.ends[compacted.breakpoints[0]]  # tools + system read back


def test_anthropic_lookback_is_limited_to_twenty_blocks() -> None:
    cache = AnthropicCache(provider_rules("anthropic"))
    cache.request(_prompt(_history(2)), 0.0)
    near = _prompt(_history(2 + ANTHROPIC_LOOKBACK_BLOCKS))
    assert cache.request(near, 1.0).cached_tokens == _prompt(_history(2)).tokens
    cache2 = AnthropicCache(provider_rules("anthropic"))
    cache2.request(_prompt(_history(2)), 0.0)
    far = _prompt(_history(3 + ANTHROPIC_LOOKBACK_BLOCKS))
    result = cache2.request(far, 1.0)
    assert result.cached_tokens == far.ends[far.breakpoints[0]]  # only the system-prompt entry is found


# --------------------------------------------------------------------------- OpenAI


def test_openai_steps_minimum_and_no_write_figure() -> None:
    cache = OpenAICache(provider_rules("openai"))
    p = _prompt(_history(3))
    r1 = cache.request(p, 0.0)
    assert r1.cached_tokens == 0 and r1.cache_write_tokens is None
    r2 = cache.request(_prompt(_history(5)), 10.0)
    assert r2.cached_tokens <= p.tokens < r2.cached_tokens + 128
    assert (r2.cached_tokens - 1024) % 128 == 0
    small = Prompt((b"x",), (1000,), ("message",))
    cache.request(small, 20.0)
    assert cache.request(small, 21.0).cached_tokens == 0  # under 1024 tokens: never cached


def test_openai_date_change_keeps_the_sections_before_it() -> None:
    cache = OpenAICache(provider_rules("openai"))
    history = _history(6)
    before = _prompt(history, today="2026-10-12")
    cache.request(before, 0.0)
    after = _prompt(history, today="2026-10-13")
    result = cache.request(after, 60.0)
    kept = after.ends[after.labels.index("current-date") - 1]
    assert kept - 128 < result.cached_tokens <= kept


def test_openai_lifetime_refreshed_by_use() -> None:
    cache = OpenAICache(provider_rules("openai"))
    p = _prompt(_history(3))
    cache.request(p, 0.0)
    assert cache.request(p, 299.0).cached_tokens > 0
    assert cache.request(p, 598.0).cached_tokens > 0
    assert cache.request(p, 1000.0).cached_tokens == 0


# --------------------------------------------------------------------------- invariants

_messages = st.lists(st.text(alphabet="abc日 ", min_size=1, max_size=400), min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(_messages, st.sampled_from(["2026-10-12", "2026-10-13"]), st.integers(0, 400)), min_size=1, max_size=6),
    st.sampled_from(["anthropic", "openai"]),
)
def test_property_cache_accounting(steps: list[tuple[list[str], str, int]], provider: str) -> None:
    """cached + written never exceed the prompt; a repeat right away reads everything cacheable;
    the cached prefix never goes past the first block that differs from every live entry."""
    cache = make_cache(provider_rules(provider))
    hasher = PromptHasher()
    at = 0.0
    for texts, today, gap in steps:
        at += gap
        history = [{"role": "user", "content": t, "sender_ymd": today} for t in texts]
        p = _prompt(history, today=today, hasher=hasher)
        fresh = _prompt(history, today=today)
        assert p == fresh  # the incremental hasher agrees with a fresh one
        result = cache.request(p, at, "claude-sonnet-4-5")
        assert 0 <= result.cached_tokens <= result.prompt_tokens == p.tokens
        assert result.cached_tokens + (result.cache_write_tokens or 0) <= result.prompt_tokens
        again = cache.request(p, at + 1, "claude-sonnet-4-5")
        assert again.cached_tokens >= result.cached_tokens  # monotone: a repeat never reads less
        if provider == "anthropic":
            assert again.cached_tokens == p.ends[p.breakpoints[-1]]
            assert again.cache_write_tokens == 0
        else:
            assert p.tokens - 128 < again.cached_tokens <= p.tokens or p.tokens < 1024


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 30), st.integers(0, 1000))
def test_property_extension_never_reads_less_within_ttl(n: int, gap: int) -> None:
    cache = AnthropicCache(provider_rules("anthropic"))
    base = _prompt(_history(n))
    cache.request(base, 0.0)
    extended = _prompt(_history(n + 2))
    result = cache.request(extended, float(gap))
    if gap <= 300:
        assert result.cached_tokens == base.tokens
    else:
        assert result.cached_tokens == 0
