"""Provider prefix-cache models: what a request reads from the cache, what it writes, what it pays.

A request is seen by a cache as a sequence of *blocks* in the provider's order: tool definitions,
then the system prompt section by section, then the messages. :class:`PromptHasher` turns a built
request into a :class:`Prompt`: for each block, a key for the whole prefix ending there and the
running token count (:mod:`pipeline.anchoring.tokens`). Two prompts share a cached prefix exactly when they
share a key.

Anthropic-style (:class:`AnthropicCache`)
    Explicit breakpoints. An entry is written for the prefix ending at each breakpoint whose
    prefix is at least the model's minimum cacheable length. A lookup takes the longest live
    entry found at a breakpoint or at any of the :data:`ANTHROPIC_LOOKBACK_BLOCKS` block
    boundaries before one. Entries live for the TTL (300 s, or 3600 s for the 1-hour cache); a
    hit refreshes the entry it read and the request's breakpoints inside the content it read.
    Written tokens are the ones between the cached prefix and the last breakpoint; tokens after
    the last breakpoint are plain input.

OpenAI-style (:class:`OpenAICache`)
    Automatic: every request leaves its prefixes in the cache; a lookup takes the longest live one
    and counts it in 1024 + 128·k token steps (nothing below 1024). The in-memory lifetime is
    :data:`OPENAI_IN_MEMORY_TTL_SECONDS` of inactivity (the provider states 5 to 10 minutes; we
    take the low end so that ``cache-report``'s default ``--ttl 300`` fits both providers), or
    24 h with extended retention. OpenAI does not report written tokens: ``cache_write_tokens`` is
    ``None``.

Both models are deterministic and keep no capacity limit: only the TTL evicts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from pipeline.anchoring.request_builder import ChatRequest, serialize
from pipeline.anchoring.tokens import BLOCK_OVERHEAD_TOKENS, block_tokens, estimate_tokens
from pipeline.calls.prices import by_model

__all__ = [
    "ANTHROPIC_LOOKBACK_BLOCKS",
    "ANTHROPIC_MIN_TOKENS",
    "DEFAULT_MODELS",
    "OPENAI_EXTENDED_TTL_SECONDS",
    "OPENAI_IN_MEMORY_TTL_SECONDS",
    "OPENAI_MIN_TOKENS",
    "OPENAI_STEP_TOKENS",
    "AnthropicCache",
    "CacheModel",
    "CacheResult",
    "OpenAICache",
    "Prompt",
    "PromptHasher",
    "ProviderRules",
    "Retention",
    "first_divergence",
    "make_cache",
    "provider_rules",
]

Retention = Literal["short", "long"]

# Minimum cacheable prompt length per Anthropic model (tokens); shorter prefixes are never cached.
ANTHROPIC_MIN_TOKENS: dict[str, int] = {
    "claude-opus-4-5": 4096,
    "claude-opus-4-1": 1024,
    "claude-sonnet-4-5": 1024,
    "claude-sonnet-4": 1024,
    "claude-haiku-4-5": 4096,
    "claude-3-5-haiku": 2048,
}
ANTHROPIC_DEFAULT_MIN_TOKENS = 1024
ANTHROPIC_TTL_SECONDS = {"short": 300, "long": 3600}
# How many block boundaries before a breakpoint Anthropic checks for an earlier entry.
ANTHROPIC_LOOKBACK_BLOCKS = 20

OPENAI_MIN_TOKENS = 1024
OPENAI_STEP_TOKENS = 128
OPENAI_IN_MEMORY_TTL_SECONDS = 300
OPENAI_EXTENDED_TTL_SECONDS = 24 * 3600

DEFAULT_MODELS: dict[str, str] = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-5"}

# Prune expired entries after this many requests, so long simulations keep a small dict.
_PRUNE_EVERY = 4096


class ProviderRules(BaseModel):
    """The cache rules of one provider at one retention setting."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: Literal["anthropic", "openai"]
    retention: Retention = "short"
    ttl_seconds: int
    min_tokens: dict[str, int]
    default_min_tokens: int
    step_tokens: int
    lookback_blocks: int

    def min_tokens_for(self, model: str | None) -> int:
        found = by_model(self.min_tokens, model)
        return self.default_min_tokens if found is None else found


def provider_rules(provider: str = "anthropic", retention: Retention = "short") -> ProviderRules:
    """Documented rules for ``provider`` (``anthropic`` | ``openai``) and ``retention`` (``short`` | ``long``)."""
    if retention not in ("short", "long"):
        raise ValueError(f"unknown retention {retention!r}; expected short or long")
    if provider == "anthropic":
        return ProviderRules(
            provider="anthropic",
            retention=retention,
            ttl_seconds=ANTHROPIC_TTL_SECONDS[retention],
            min_tokens=dict(ANTHROPIC_MIN_TOKENS),
            default_min_tokens=ANTHROPIC_DEFAULT_MIN_TOKENS,
            step_tokens=1,
            lookback_blocks=ANTHROPIC_LOOKBACK_BLOCKS,
        )
    if provider == "openai":
        return ProviderRules(
            provider="openai",
            retention=retention,
            ttl_seconds=OPENAI_IN_MEMORY_TTL_SECONDS if retention == "short" else OPENAI_EXTENDED_TTL_SECONDS,
            min_tokens={},
            default_min_tokens=OPENAI_MIN_TOKENS,
            step_tokens=OPENAI_STEP_TOKENS,
            lookback_blocks=0,
        )
    raise ValueError(f"unknown provider {provider!r}; expected anthropic or openai")


# --------------------------------------------------------------------------- prompts


@dataclass(frozen=True, slots=True)
class Prompt:
    """A request as a cache sees it.

    ``keys[i]`` identifies the prefix made of blocks ``0..i``; ``ends[i]`` is its token count;
    ``labels[i]`` names block ``i`` (``tool``, a system section name, or ``message``);
    ``breakpoints`` are ascending block indices carrying a cache breakpoint (Anthropic only).
    """

    keys: tuple[bytes, ...]
    ends: tuple[int, ...]
    labels: tuple[str, ...]
    breakpoints: tuple[int, ...] = ()

    @property
    def tokens(self) -> int:
        return self.ends[-1] if self.ends else 0

    def with_breakpoints(self, breakpoints: Iterable[int]) -> Prompt:
        marks = tuple(sorted({b for b in breakpoints if 0 <= b < len(self.keys)}))
        return Prompt(self.keys, self.ends, self.labels, marks)


def first_divergence(a: Prompt, b: Prompt) -> int:
    """Index of the first block whose prefix differs between ``a`` and ``b`` (the shorter length if none)."""
    n = min(len(a.keys), len(b.keys))
    # Keys are cumulative, so "same prefix up to i" is monotone in i: binary search.
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if a.keys[mid] == b.keys[mid]:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


class PromptHasher:
    """Turns built requests into :class:`Prompt`, remembering the previous request's blocks.

    One hasher per session: a new request usually repeats the previous one's blocks as the same
    objects (or equal ones), so their digests and token counts are reused and the cumulative keys
    are recomputed only from the first changed block on.
    """

    __slots__ = ("_blocks", "_digests", "_ends", "_keys", "_tokens")

    def __init__(self) -> None:
        self._blocks: list[Any] = []
        self._digests: list[bytes] = []
        self._tokens: list[int] = []
        self._keys: list[bytes] = []
        self._ends: list[int] = []

    def copy(self) -> PromptHasher:
        twin = PromptHasher()
        twin._blocks, twin._digests, twin._tokens = list(self._blocks), list(self._digests), list(self._tokens)
        twin._keys, twin._ends = list(self._keys), list(self._ends)
        return twin

    @staticmethod
    def blocks_of(request: ChatRequest) -> tuple[list[Any], list[str]]:
        """The request's blocks in provider order, with their labels."""
        tools = list(request.get("tools") or [])
        sections = [(name, text) for name, text in request.sections if text]
        messages = list(request["messages"][1:])  # messages[0] is the joined system text
        blocks: list[Any] = [*tools, *(text for _, text in sections), *messages]
        labels = ["tool"] * len(tools) + [name for name, _ in sections] + ["message"] * len(messages)
        return blocks, labels

    def prompt(self, request: ChatRequest) -> Prompt:
        blocks, labels = self.blocks_of(request)
        old = self._blocks
        n_old, n_new = len(old), len(blocks)
        if n_old and n_new >= n_old and blocks[:n_old] == old:
            keep = n_old  # the usual case, an append: one C-level list comparison, no Python loop
        else:
            keep = 0
            limit = min(n_old, n_new)
            while keep < limit and (old[keep] is blocks[keep] or old[keep] == blocks[keep]):
                keep += 1
        old_digests, old_tokens = self._digests, self._tokens
        if keep == n_old:
            # Nothing of the old lists is read again: extend them in place (copy() never shares them).
            digests, tokens, keys, ends = old_digests, old_tokens, self._keys, self._ends
        else:
            digests, tokens = old_digests[:keep], old_tokens[:keep]
            keys, ends = self._keys[:keep], self._ends[:keep]
        key, end = (keys[-1], ends[-1]) if keep else (b"", 0)
        for i in range(keep, n_new):
            block = blocks[i]
            if i < n_old and (old[i] is block or old[i] == block):
                # Same block after a change: its digest and size still hold, its prefix key does not.
                digest, count = old_digests[i], old_tokens[i]
            else:
                digest, count = _measure(block)
            key = _digest(key + digest)
            end += count
            digests.append(digest)
            tokens.append(count)
            keys.append(key)
            ends.append(end)
        self._blocks, self._digests, self._tokens, self._keys, self._ends = blocks, digests, tokens, keys, ends
        return Prompt(tuple(keys), tuple(ends), tuple(labels))


def _measure(block: Any) -> tuple[bytes, int]:
    """Digest and token count of one block; a dict block is serialized once for both."""
    if isinstance(block, str):
        return _digest(block.encode("utf-8")), block_tokens(block)
    data = serialize(block)
    return _digest(data), estimate_tokens(data.decode("utf-8")) + BLOCK_OVERHEAD_TOKENS


# --------------------------------------------------------------------------- caches


@dataclass(frozen=True, slots=True)
class CacheResult:
    """Token accounting of one request. ``prompt_tokens`` includes cached and written tokens."""

    prompt_tokens: int
    cached_tokens: int
    cache_write_tokens: int | None
    hit_block: int  # index of the last block read from cache, -1 when nothing was read

    @property
    def uncached_tokens(self) -> int:
        return self.prompt_tokens - self.cached_tokens - (self.cache_write_tokens or 0)


class CacheModel(Protocol):
    rules: ProviderRules

    def request(self, prompt: Prompt, at: float, model: str | None = None) -> CacheResult: ...

    def copy(self) -> CacheModel: ...

    def alive(self, key: bytes, at: float) -> bool: ...


class _BaseCache:
    def __init__(self, rules: ProviderRules) -> None:
        self.rules = rules
        self._entries: dict[bytes, float] = {}  # prefix key -> expiry (epoch seconds)
        self._requests = 0

    def copy(self) -> Any:
        twin = object.__new__(type(self))
        twin.rules, twin._entries, twin._requests = self.rules, dict(self._entries), self._requests
        return twin

    def alive(self, key: bytes, at: float) -> bool:
        expiry = self._entries.get(key)
        return expiry is not None and expiry >= at

    def _maybe_prune(self, at: float) -> None:
        self._requests += 1
        if self._requests % _PRUNE_EVERY == 0:
            self._entries = {k: e for k, e in self._entries.items() if e >= at}

    def __len__(self) -> int:
        return len(self._entries)


class AnthropicCache(_BaseCache):
    """Explicit breakpoints, TTL refreshed on hit, minimum cacheable length per model."""

    def request(self, prompt: Prompt, at: float, model: str | None = None) -> CacheResult:
        self._maybe_prune(at)
        ttl = self.rules.ttl_seconds
        min_tokens = self.rules.min_tokens_for(model)
        candidates: set[int] = set()
        for bp in prompt.breakpoints:
            candidates.update(range(max(0, bp - self.rules.lookback_blocks), bp + 1))
        hit = -1
        entries, keys = self._entries, prompt.keys
        for position in sorted(candidates, reverse=True):
            expiry = entries.get(keys[position])  # alive(), inlined: this loop runs ~40 times a request
            if expiry is not None and expiry >= at:
                hit = position
                break
        cached = prompt.ends[hit] if hit >= 0 else 0
        if hit >= 0:
            # A read refreshes the entry it used, and the breakpoints inside the content it read
            # (their prefixes were just used too) are kept alive for free.
            self._entries[prompt.keys[hit]] = at + ttl
            for bp in prompt.breakpoints:
                if bp < hit and prompt.ends[bp] >= min_tokens:
                    self._entries[prompt.keys[bp]] = at + ttl
        written_to = -1
        for bp in prompt.breakpoints:
            if bp > hit and prompt.ends[bp] >= min_tokens:
                self._entries[prompt.keys[bp]] = at + ttl
                written_to = bp
        write = prompt.ends[written_to] - cached if written_to >= 0 else 0
        return CacheResult(prompt.tokens, cached, write, hit)


class OpenAICache(_BaseCache):
    """Automatic prefix caching in 128-token steps from 1024 tokens, lifetime refreshed by use."""

    def request(self, prompt: Prompt, at: float, model: str | None = None) -> CacheResult:
        self._maybe_prune(at)
        hit = -1
        # Every request stores all its prefixes, so live entries are prefix-closed: scan from the end.
        for position in range(len(prompt.keys) - 1, -1, -1):
            if self.alive(prompt.keys[position], at):
                hit = position
                break
        matched = prompt.ends[hit] if hit >= 0 else 0
        cached = _openai_cached(matched, self.rules.min_tokens_for(model), self.rules.step_tokens)
        expiry = at + self.rules.ttl_seconds
        for key in prompt.keys:
            self._entries[key] = expiry
        return CacheResult(prompt.tokens, cached, None, hit)


def _openai_cached(matched: int, min_tokens: int, step: int) -> int:
    if matched < min_tokens:
        return 0
    return min_tokens + step * ((matched - min_tokens) // step)


def make_cache(rules: ProviderRules) -> AnthropicCache | OpenAICache:
    return AnthropicCache(rules) if rules.provider == "anthropic" else OpenAICache(rules)
