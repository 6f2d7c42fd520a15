"""What an LLM call cost: each call priced by its own provider and model, at the price in force on its date.

Prices come from `genai-prices`, the price database Pydantic maintains: its data ships inside the
package (nothing is fetched), it lists cache reads and cache writes per provider, and it keeps
historic prices with the date each took effect. A call's provider comes from its `source`
(`claude-code` → Anthropic, `codex` → OpenAI), else from its model name, which the database matches
to the provider that sells it (a Claude Code session driving `glm-5.1` through a proxy is priced as
GLM-5.1). A model the database does not know is never priced as another model: it has no price
(`None`), and reports name it. A price file adds or overrides entries::

    {"models": {"my-model": {"input": 0.5, "cache_read": 0.05, "output": 2.0},
                "claude-sonnet-4-5": {"input": 3, "cache_read": 0.3, "cache_write_5m": 3.75,
                                      "cache_write_1h": 6, "output": 15}}}

A file entry applies to its model name and to dated names that start with it
(`claude-sonnet-4-5-20250929`), whatever the provider, and wins over the database.
All prices are US dollars per million tokens.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipeline.errors import UsageError

__all__ = [
    "PROVIDER_BY_SOURCE",
    "ModelPrice",
    "PriceBook",
    "Tier",
    "by_model",
    "call_cost",
    "database_version",
    "effective",
    "load_prices",
    "provider_for",
]

# Where a call's source says who served it.
PROVIDER_BY_SOURCE = {"claude-code": "anthropic", "codex": "openai"}
# A cache TTL above this many seconds is priced at the long (1-hour) write price.
SHORT_TTL_SECONDS = 300
# A TTL that is priced at the 1-hour write price (where the provider has one).
LONG_TTL_SECONDS = 3600


class Tier(BaseModel):
    """Prices that replace the base ones for a call whose prompt is above `above_input_tokens`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    above_input_tokens: int = Field(ge=0)
    input: float = Field(ge=0)
    cache_read: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_write_5m: float | None = Field(None, ge=0)
    cache_write_1h: float | None = Field(None, ge=0)


class ModelPrice(BaseModel):
    """One model's prices in US dollars per million tokens.

    `cache_read` is the price of a token read from the cache (the input price where the provider
    gives no discount); `cache_write_5m` / `cache_write_1h` are set only where the provider charges
    for writing the cache (Anthropic), and are None where writing costs nothing extra (OpenAI).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0)
    cache_read: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_write_5m: float | None = Field(None, ge=0)
    cache_write_1h: float | None = Field(None, ge=0)
    tiers: tuple[Tier, ...] = ()
    provider: str | None = Field(None, description="who sells the model (the database's provider id)")
    model: str | None = Field(None, description="the model as the database (or the price file) names it")
    source: str = Field("genai-prices", description="genai-prices, or the price file")

    def write_price(self, ttl_seconds: int) -> float:
        """What writing a token to the cache costs with this TTL (the input price where writes cost nothing extra)."""
        if ttl_seconds > SHORT_TTL_SECONDS and self.cache_write_1h is not None:
            return self.cache_write_1h
        return self.cache_write_5m if self.cache_write_5m is not None else self.input

    def listed(self) -> dict[str, Any]:
        """The figures a report shows: input, cache_read, output, and the cache-write fields where charged."""
        out: dict[str, Any] = {"input": self.input, "cache_read": self.cache_read, "output": self.output}
        if self.cache_write_5m is not None:
            out["cache_write_5m"] = self.cache_write_5m
        if self.cache_write_1h is not None:
            out["cache_write_1h"] = self.cache_write_1h
        if self.tiers:
            out["tiers"] = [t.model_dump(exclude_none=True) for t in self.tiers]
        out.update({"provider": self.provider, "model": self.model, "source": self.source})
        return out


class PriceFile(BaseModel):
    """The shape of `--prices FILE`."""

    model_config = ConfigDict(extra="forbid")

    models: dict[str, ModelPrice] = Field(default_factory=dict)


_T = TypeVar("_T")


def by_model(entries: Mapping[str, _T], model: str | None) -> _T | None:
    """The entry listed for `model`: its exact name, else the longest listed name that prefixes it
    (dated snapshots such as claude-sonnet-4-5-20250929 fall under claude-sonnet-4-5)."""
    if not model:
        return None
    if model in entries:
        return entries[model]
    matches = [name for name in entries if model.startswith(name)]
    return entries[max(matches, key=len)] if matches else None


def provider_for(source: str | None) -> str | None:
    """The provider a call's source names, or None when only its model name can tell."""
    return PROVIDER_BY_SOURCE.get(source or "")


def database_version() -> str:
    """The version of the genai-prices package whose data prices the calls."""
    from importlib.metadata import version

    return version("genai-prices")


def _f(value: Any) -> float | None:
    return None if value is None else float(value)


def _convert(model_price: Any, provider: str, model: str) -> ModelPrice:
    """A genai-prices ModelPrice (base prices, possibly tiered by prompt length) as ours."""
    from genai_prices.types import TieredPrices

    def base(key: str) -> float | None:
        value = getattr(model_price, key, None)
        return _f(value.base if isinstance(value, TieredPrices) else value)

    def at(key: str, start: int) -> float | None:
        value = getattr(model_price, key, None)
        if not isinstance(value, TieredPrices):
            return _f(value)
        price = value.base
        for tier in value.tiers:
            if start >= tier.start:
                price = tier.price
        return _f(price)

    keys = {"input": "input_mtok", "cache_read": "cache_read_mtok", "output": "output_mtok"}
    write_5m = ("cache_write_5m_mtok", "cache_write_mtok")
    starts = sorted({
        t.start for key in (*keys.values(), *write_5m, "cache_write_1h_mtok")
        if isinstance(value := getattr(model_price, key, None), TieredPrices) for t in value.tiers
    })
    inp = base("input_mtok") or 0.0
    tiers = []
    for start in starts:
        t_in = at("input_mtok", start) or 0.0
        tiers.append(Tier(
            above_input_tokens=start, input=t_in, cache_read=at("cache_read_mtok", start) or t_in,
            output=at("output_mtok", start) or 0.0,
            cache_write_5m=next((v for k in write_5m if (v := at(k, start)) is not None), None),
            cache_write_1h=at("cache_write_1h_mtok", start),
        ))
    return ModelPrice(
        input=inp,
        cache_read=base("cache_read_mtok") if base("cache_read_mtok") is not None else inp,
        output=base("output_mtok") or 0.0,
        cache_write_5m=next((v for k in write_5m if (v := base(k)) is not None), None),
        cache_write_1h=base("cache_write_1h_mtok"),
        tiers=tuple(tiers),
        provider=provider,
        model=model,
    )


@lru_cache(maxsize=4096)
def _database_price(provider: str | None, model: str, day: dt.date | None) -> ModelPrice | None:
    from genai_prices import data_snapshot

    snapshot = data_snapshot.get_snapshot()
    try:
        found_provider, info = snapshot.find_provider_model(model, None, provider, None)
    except LookupError:
        return None
    when = dt.datetime.combine(day, dt.time(12), tzinfo=dt.UTC) if day else dt.datetime.now(dt.UTC)
    return _convert(info.get_prices(when), found_provider.id, info.id)


class PriceBook:
    """Prices per call: the database, with a price file's entries over it.

    `fallback_provider` is tried for a call whose source names no provider and whose model name
    the database matches to none (the provider a simulated workload was simulated for).
    """

    def __init__(self, overrides: Mapping[str, ModelPrice] | None = None, *, fallback_provider: str | None = None) -> None:
        self.overrides = {name: p.model_copy(update={"model": p.model or name, "source": "price file"})
                          for name, p in (overrides or {}).items()}
        self.fallback_provider = fallback_provider

    def price(self, model: str | None, *, source: str | None = None, when: dt.date | dt.datetime | None = None) -> ModelPrice | None:
        """The price of a call to `model` from `source` on the day `when` (today when unknown), or None."""
        if not model:
            return None
        listed = by_model(self.overrides, model)
        if listed is not None:
            return listed
        day = when.date() if isinstance(when, dt.datetime) else when
        hint = provider_for(source)
        for provider in dict.fromkeys((hint, None, self.fallback_provider)):
            found = _database_price(provider, model, day)
            if found is not None:
                return found
        return None


def load_prices(path: str | Path | None = None, *, fallback_provider: str | None = None) -> PriceBook:
    """The price database, with the entries of the JSON file at `path` (if any) over it."""
    if path is None:
        return PriceBook(fallback_provider=fallback_provider)
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"no price file at {file}; pass a JSON file shaped like {{\"models\": {{\"MODEL\": {{\"input\": …}}}}}}")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        parsed = PriceFile.model_validate(data)
    except (ValueError, ValidationError) as exc:
        raise UsageError(
            f"the price file {file} is not valid: {exc}. Each entry needs input, cache_read and output "
            "(US dollars per million tokens), and may add cache_write_5m and cache_write_1h"
        ) from exc
    return PriceBook(parsed.models, fallback_provider=fallback_provider)


def effective(price: ModelPrice, prompt: int | None) -> ModelPrice:
    """The prices a call with a prompt of `prompt` tokens pays: the base ones, with each tier it is
    above applied in order."""
    p = price
    for tier in p.tiers:
        if (prompt or 0) > tier.above_input_tokens:
            p = p.model_copy(update={k: getattr(tier, k) for k in ("input", "cache_read", "output", "cache_write_5m", "cache_write_1h")
                                     if getattr(tier, k) is not None})
    return p


def call_cost(price: ModelPrice | None, prompt: int | None, cached: int | None, written: int | None,
              completion: int | None, *, ttl_seconds: int = SHORT_TTL_SECONDS,
              written_1h: int | None = None) -> float | None:
    """One call's cost in US dollars (None without a price): uncached input, cache reads, cache
    writes and output, each at its price, the prompt-length tier applied. With `written_1h` (of the
    written tokens, those written for 1 hour) the writes are priced by TTL, the rest at the
    5-minute price; without it all writes pay the `ttl_seconds` price."""
    if price is None:
        return None
    p = effective(price, prompt)
    cached, written = cached or 0, written or 0
    uncached = max(0, (prompt or 0) - cached - written)
    if written_1h is None:
        writes = written * p.write_price(ttl_seconds)
    else:
        long = min(written_1h, written)
        writes = (written - long) * p.write_price(SHORT_TTL_SECONDS) + long * p.write_price(LONG_TTL_SECONDS)
    return (uncached * p.input + cached * p.cache_read + writes + (completion or 0) * p.output) / 1e6
