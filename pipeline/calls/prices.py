"""Provider prices for costing cache misses: input, cache write (5 min / 1 h), cache read, output.

The figures below are EXAMPLES (list prices in US dollars per million tokens as published by the
providers in late 2025); they are not fetched and will drift. Pass your own table with
``pipeline cache-report --prices FILE`` (JSON, the shape of :class:`PriceBook`) or
:func:`load_prices` to cost a log at the prices you actually pay.

Multipliers the cache models rely on:

* Anthropic: a cache write costs 1.25x the input price with the 5-minute TTL and 2x with the
  1-hour TTL; a cache read costs 0.1x.
* OpenAI: caching is automatic; writing costs nothing extra (written tokens are ordinary input)
  and a read is discounted per model (0.1x for the GPT-5 family, 0.25x for GPT-4.1).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipeline.errors import UsageError

__all__ = [
    "ANTHROPIC_READ_MULTIPLIER",
    "ANTHROPIC_WRITE_1H_MULTIPLIER",
    "ANTHROPIC_WRITE_5M_MULTIPLIER",
    "DEFAULT_PRICES",
    "PROVIDERS",
    "ModelPrice",
    "PriceBook",
    "PriceTable",
    "Provider",
    "load_prices",
    "price_for",
]

Provider = Literal["anthropic", "openai"]
PROVIDERS: tuple[str, ...] = ("anthropic", "openai")

ANTHROPIC_WRITE_5M_MULTIPLIER = 1.25
ANTHROPIC_WRITE_1H_MULTIPLIER = 2.0
ANTHROPIC_READ_MULTIPLIER = 0.1


class ModelPrice(BaseModel):
    """US dollars per million tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0)
    cache_write_5m: float = Field(ge=0)
    cache_write_1h: float = Field(ge=0)
    cache_read: float = Field(ge=0)
    output: float = Field(ge=0)

    def write_price(self, ttl_seconds: int) -> float:
        """The write price for a cache whose TTL is ``ttl_seconds`` (over 5 minutes = the long TTL)."""
        return self.cache_write_1h if ttl_seconds > 300 else self.cache_write_5m

    @classmethod
    def anthropic(cls, input_price: float, output_price: float) -> ModelPrice:
        return cls(
            input=input_price,
            cache_write_5m=input_price * ANTHROPIC_WRITE_5M_MULTIPLIER,
            cache_write_1h=input_price * ANTHROPIC_WRITE_1H_MULTIPLIER,
            cache_read=input_price * ANTHROPIC_READ_MULTIPLIER,
            output=output_price,
        )

    @classmethod
    def openai(cls, input_price: float, read_multiplier: float, output_price: float) -> ModelPrice:
        return cls(
            input=input_price,
            cache_write_5m=input_price,
            cache_write_1h=input_price,
            cache_read=input_price * read_multiplier,
            output=output_price,
        )


class PriceTable(BaseModel):
    """One provider's prices; a model not listed falls back to the longest listed prefix, then the default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    default_model: str
    models: dict[str, ModelPrice]


class PriceBook(BaseModel):
    """Price tables by provider name."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    providers: dict[str, PriceTable]

    def table(self, provider: str) -> PriceTable:
        try:
            return self.providers[provider]
        except KeyError:
            raise UsageError(
                f"no prices for provider {provider!r}; known: {', '.join(sorted(self.providers))}"
            ) from None


DEFAULT_PRICES = PriceBook(
    providers={
        "anthropic": PriceTable(
            default_model="claude-sonnet-4-5",
            models={
                "claude-opus-4-5": ModelPrice.anthropic(5.0, 25.0),
                "claude-opus-4-1": ModelPrice.anthropic(15.0, 75.0),
                "claude-sonnet-4-5": ModelPrice.anthropic(3.0, 15.0),
                "claude-sonnet-4": ModelPrice.anthropic(3.0, 15.0),
                "claude-haiku-4-5": ModelPrice.anthropic(1.0, 5.0),
                "claude-3-5-haiku": ModelPrice.anthropic(0.8, 4.0),
            },
        ),
        "openai": PriceTable(
            default_model="gpt-5",
            models={
                "gpt-5": ModelPrice.openai(1.25, 0.1, 10.0),
                "gpt-5-mini": ModelPrice.openai(0.25, 0.1, 2.0),
                "gpt-4.1": ModelPrice.openai(2.0, 0.25, 8.0),
            },
        ),
    }
)


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


def price_for(table: PriceTable, model: str | None) -> ModelPrice:
    """The price listed for the model (see `by_model`), else the table's default."""
    found = by_model(table.models, model)
    return table.models[table.default_model] if found is None else found


def load_prices(path: str | Path | None = None) -> PriceBook:
    """The example prices, or a JSON price book from ``path`` (``{"providers": {...}}``)."""
    if path is None:
        return DEFAULT_PRICES
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"no price file at {file}; pass a JSON file shaped like {{\"providers\": {{...}}}}")
    try:
        return PriceBook.model_validate(json.loads(file.read_text(encoding="utf-8")))
    except (ValueError, ValidationError) as exc:
        raise UsageError(f"the price file {file} is not a valid price book: {exc}") from exc
