"""How each provider counts tokens, mapped onto the one meaning `llm_calls` has.

`llm_calls.prompt_tokens` is every input token, cached ones included; `cached_tokens` are the
ones read from the cache (a subset); `cache_write_tokens` the ones written to it. Providers
split input differently, and reading them the same way would make one analysis disagree with
another, so every convention lives here, next to the others:

| format            | prompt_tokens                                   | cached_tokens                        | cache_write_tokens                      | completion_tokens |
|-------------------|-------------------------------------------------|--------------------------------------|-----------------------------------------|-------------------|
| openai (Chat)     | usage.prompt_tokens                             | usage.prompt_tokens_details.cached_tokens | usage.prompt_tokens_details.cache_write_tokens, else usage.cache_write_tokens | usage.completion_tokens |
| openai (Responses)| usage.input_tokens                              | usage.input_tokens_details.cached_tokens  | usage.input_tokens_details.cache_write_tokens, else usage.cache_write_tokens  | usage.output_tokens |
| anthropic         | input_tokens + cache_creation_input_tokens + cache_read_input_tokens (absent cache fields add 0, as derive does) | usage.cache_read_input_tokens | usage.cache_creation_input_tokens | usage.output_tokens |
| deepseek          | prompt_cache_hit_tokens + prompt_cache_miss_tokens (must equal usage.prompt_tokens when given; neither → usage.prompt_tokens) | usage.prompt_cache_hit_tokens | NULL (not reported) | usage.completion_tokens |
| columns           | the file's prompt_tokens (or --map)             | cached_tokens                        | cache_write_tokens                      | completion_tokens |

Chat vs Responses is told per row: `usage.prompt_tokens`/`completion_tokens` mean Chat,
`usage.input_tokens`/`output_tokens` mean Responses. A missing optional field is NULL, never 0.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

from pipeline.calls import values
from pipeline.calls.values import MISSING, lookup
from pipeline.errors import BadValue

Format = Literal["openai", "anthropic", "deepseek", "columns"]
FORMATS: Final[tuple[Format, ...]] = ("openai", "anthropic", "deepseek", "columns")

TOKEN_COLUMNS: Final = ("prompt_tokens", "cached_tokens", "cache_write_tokens", "completion_tokens")
# Columns a row can carry besides its token counts; `source`, `line_no` and `origin` are the
# importer's own, and `true_cause` belongs to simulated rows only.
CONTEXT_COLUMNS: Final = (
    "call_id", "session_id", "at", "model", "latency_ms", "changed_sections",
    "run_id", "batch_id", "system_fp", "tools_fp", "prefix_fp",
)
MAPPABLE: Final = CONTEXT_COLUMNS + TOKEN_COLUMNS

# Where each context column is looked for when --map does not say. `at`: the first of these that
# is present, ISO 8601 text or an epoch number (see values.timestamp).
CONTEXT_DEFAULTS: Final[dict[str, tuple[str, ...]]] = {
    "session_id": ("session_id", "sessionId", "conversation_id"),
    "at": ("at", "timestamp", "created_at", "created"),
    "model": ("model",),
    "latency_ms": ("latency_ms", "duration_ms"),
    "changed_sections": ("changed_sections",),
    "run_id": ("run_id",),
    "batch_id": ("batch_id",),
    "system_fp": ("system_fp",),
    "tools_fp": ("tools_fp",),
    "prefix_fp": ("prefix_fp",),
}
LATENCY_SECONDS: Final = ("latency_s", "duration_s")  # scaled to milliseconds

# Keys only one provider's usage object has. A row of another provider's shape would be misread
# (Anthropic input_tokens excludes cached tokens, OpenAI's includes them), so it is refused with
# the --format to use instead.
SIGNATURES: Final[dict[str, frozenset[str]]] = {
    "anthropic": frozenset({"cache_read_input_tokens", "cache_creation_input_tokens"}),
    "deepseek": frozenset({"prompt_cache_hit_tokens", "prompt_cache_miss_tokens"}),
    "openai": frozenset({"prompt_tokens_details", "input_tokens_details"}),
}

_PARSERS: Final[dict[str, Callable[[Any], Any]]] = {
    "call_id": values.text, "session_id": values.text, "at": values.timestamp, "model": values.text,
    "latency_ms": values.duration_ms, "changed_sections": values.sections,
    "run_id": values.text, "batch_id": values.text, "system_fp": values.text, "tools_fp": values.text,
    "prefix_fp": values.text,
    "prompt_tokens": values.count, "cached_tokens": values.count, "cache_write_tokens": values.count,
    "completion_tokens": values.count, "cache_write_1h_tokens": values.count,
}
_RESPONSE_DEPTH = 3  # wrapper → response → body (OpenAI Batch output), result → message (Anthropic batches)


@dataclass
class Where:
    """An object inside the record and the dotted path that leads to it, for messages."""

    obj: dict[str, Any]
    prefix: str = ""

    def path(self, rel: str) -> str:
        return self.prefix + rel


@dataclass
class Row:
    """One record being read: the values found so far, and every problem with it."""

    record: dict[str, Any]
    out: dict[str, Any] = field(default_factory=dict)
    fields: dict[str, str] = field(default_factory=dict)  # llm_calls column → the file's field
    problems: list[tuple[str | None, str]] = field(default_factory=list)
    raw_id: str | None = None

    def get(
        self, column: str, places: list[Where], paths: tuple[str, ...], *,
        required: bool = False, parse: Callable[[Any], Any] | None = None,
    ) -> Any:
        """The first present value among places × paths, parsed; None (and a problem if required) when absent."""
        parse = parse or _PARSERS[column]
        for where in places:
            for rel in paths:
                raw = lookup(where.obj, rel)
                if raw is MISSING:
                    continue
                self.fields[column] = where.path(rel)
                try:
                    return parse(raw)
                except BadValue as exc:
                    self.problems.append((where.path(rel), str(exc)))
                    return None
        if required:
            self.fields[column] = places[0].path(paths[0]) if places and paths else column
            self.problems.append((self.fields[column], "missing"))
        return None


def find_response(record: dict[str, Any]) -> Where | None:
    """The object holding `usage`: the record itself, or one nested in a wrapper (a logged
    `{"timestamp", "session_id", "response": {…}}`, a batch result), breadth first."""
    queue: deque[tuple[dict[str, Any], str, int]] = deque([(record, "", 0)])
    while queue:
        obj, prefix, depth = queue.popleft()
        if "usage" in obj:
            return Where(obj, prefix)
        if depth == _RESPONSE_DEPTH:
            continue
        for key, value in obj.items():
            inner = values.as_object(value)
            if inner is not None:
                queue.append((inner, f"{prefix}{key}.", depth + 1))
    return None


def extract(fmt: Format, record: dict[str, Any], mapping: dict[str, str]) -> Row:
    """Read one record under a format's convention into llm_calls columns (None = unknown)."""
    row = Row(record)
    root = Where(record)
    if fmt == "columns":
        _columns(row, root, mapping)
        response = root
    else:
        found = find_response(record)
        if found is None:
            row.problems.append(("usage", "no usage object in this row (looked up to three levels deep)"))
            return row
        response = found
        usage_obj = values.as_object(response.obj.get("usage"))
        if usage_obj is None:
            row.problems.append((response.path("usage"), "missing" if response.obj.get("usage") is None else "not an object"))
            return row
        usage = Where(usage_obj, response.path("usage."))
        if not _signature_ok(fmt, row, usage):
            return row
        {"openai": _openai, "anthropic": _anthropic, "deepseek": _deepseek}[fmt](row, usage)
    _context(fmt, row, root, response, mapping)
    _consistency(row)
    return row


def _signature_ok(fmt: Format, row: Row, usage: Where) -> bool:
    keys = set(usage.obj)
    if keys & SIGNATURES[fmt]:
        return True
    for other, signature in SIGNATURES.items():
        hit = sorted(keys & signature)
        if other != fmt and hit:
            row.problems.append((
                usage.path(hit[0]),
                f"this is {other} usage, which counts tokens differently: import the file with --format {other}",
            ))
            return False
    return True


def _openai(row: Row, usage: Where) -> None:
    if "input_tokens" in usage.obj or "output_tokens" in usage.obj:
        # Responses API: input_tokens already includes the cached ones.
        prompt, details, completion = "input_tokens", "input_tokens_details", "output_tokens"
    else:
        prompt, details, completion = "prompt_tokens", "prompt_tokens_details", "completion_tokens"
    u = [usage]
    row.out["prompt_tokens"] = row.get("prompt_tokens", u, (prompt,), required=True)
    row.out["cached_tokens"] = row.get("cached_tokens", u, (f"{details}.cached_tokens",))
    row.out["cache_write_tokens"] = row.get(
        "cache_write_tokens", u, (f"{details}.cache_write_tokens", "cache_write_tokens")
    )
    row.out["completion_tokens"] = row.get("completion_tokens", u, (completion,), required=True)


def _anthropic(row: Row, usage: Where) -> None:
    u = [usage]
    fresh = row.get("prompt_tokens", u, ("input_tokens",), required=True)
    write = row.get("cache_write_tokens", u, ("cache_creation_input_tokens",))
    read = row.get("cached_tokens", u, ("cache_read_input_tokens",))
    # Anthropic's input_tokens are only the uncached tail; the prompt is all three parts.
    # Absent cache fields mean nothing was cached or written (older API versions), as derive reads them.
    row.out["prompt_tokens"] = None if fresh is None else fresh + (write or 0) + (read or 0)
    row.out["cached_tokens"] = read
    row.out["cache_write_tokens"] = write
    # Writes split by TTL (usage.cache_creation), as transcripts carry them: the 1-hour part, never
    # more than the total; unknown (None) when the response does not say.
    one_hour = row.get("cache_write_1h_tokens", u, ("cache_creation.ephemeral_1h_input_tokens", "cache_write_1h_tokens"))
    five = lookup(usage.obj, "cache_creation.ephemeral_5m_input_tokens")
    if one_hour is None and five is not MISSING and write is not None:
        one_hour = 0
    row.out["cache_write_1h_tokens"] = None if one_hour is None or write is None else min(one_hour, write)
    row.out["completion_tokens"] = row.get("completion_tokens", u, ("output_tokens",), required=True)


def _deepseek(row: Row, usage: Where) -> None:
    u = [usage]
    hit = row.get("cached_tokens", u, ("prompt_cache_hit_tokens",))
    miss = row.get("prompt_tokens", u, ("prompt_cache_miss_tokens",))
    has_hit, has_miss = lookup(usage.obj, "prompt_cache_hit_tokens"), lookup(usage.obj, "prompt_cache_miss_tokens")
    total = row.get("prompt_tokens", u, ("prompt_tokens",), required=has_hit is MISSING and has_miss is MISSING)
    if has_hit is MISSING and has_miss is MISSING:
        prompt, cached = total, None  # a response without cache accounting: prompt known, cached unknown
    elif has_hit is MISSING or has_miss is MISSING:
        absent = "prompt_cache_hit_tokens" if has_hit is MISSING else "prompt_cache_miss_tokens"
        row.problems.append((usage.path(absent), "missing (DeepSeek reports hit and miss together)"))
        prompt, cached = None, None
    elif hit is None or miss is None:
        prompt, cached = None, None  # already reported as a bad value
    else:
        prompt, cached = hit + miss, hit
        if total is not None and total != prompt:
            row.problems.append((
                usage.path("prompt_tokens"),
                f"{total} ≠ prompt_cache_hit_tokens {hit} + prompt_cache_miss_tokens {miss}",
            ))
    row.fields["prompt_tokens"] = usage.path("prompt_tokens")
    row.out["prompt_tokens"] = prompt
    row.out["cached_tokens"] = cached
    row.out["cache_write_tokens"] = None
    row.out["completion_tokens"] = row.get("completion_tokens", u, ("completion_tokens",), required=True)


def _columns(row: Row, root: Where, mapping: dict[str, str]) -> None:
    for column in TOKEN_COLUMNS:
        path = mapping.get(column, column)
        row.out[column] = row.get(column, [root], (path,), required=column in ("prompt_tokens", "completion_tokens"))


def _context(fmt: Format, row: Row, root: Where, response: Where, mapping: dict[str, str]) -> None:
    # The wrapper is the harness's own log (its time, session, latency); the response object is
    # the provider's and knows the call's id and the model that actually answered.
    wrapper_first = [root] if response is root else [root, response]
    response_first = [root] if response is root else [response, root]
    for column in CONTEXT_COLUMNS:
        if column in mapping:
            # An explicit --map names a path from the top of the record, and only that path.
            row.out[column] = row.get(column, [root], (mapping[column],))
        elif column == "call_id":
            if fmt == "columns":
                row.out[column] = row.get(column, [root], ("call_id",))
            else:
                found = row.get(column, [response], ("id",))
                row.out[column] = found if found is not None else row.get(column, [root], ("call_id", "id"))
        elif column == "model":
            row.out[column] = row.get(column, response_first, ("model",))
        elif column == "latency_ms":
            value = row.get(column, wrapper_first, CONTEXT_DEFAULTS[column])
            if value is None and column not in row.fields:
                value = row.get(column, wrapper_first, LATENCY_SECONDS, parse=lambda v: values.duration_ms(v, 1000.0))
            row.out[column] = value
        else:
            row.out[column] = row.get(column, wrapper_first, CONTEXT_DEFAULTS[column])
    row.raw_id = row.out.pop("call_id")
    at = row.out.get("at")
    if isinstance(at, datetime):
        row.out["at"] = at.astimezone(UTC)  # one zone in the column; TIMESTAMPTZ keeps the instant


def _consistency(row: Row) -> None:
    prompt, cached, write = (row.out.get(c) for c in ("prompt_tokens", "cached_tokens", "cache_write_tokens"))
    if prompt is None:
        return
    if cached is not None and cached > prompt:
        row.problems.append((
            row.fields.get("cached_tokens", "cached_tokens"),
            f"cached tokens {cached} exceed prompt tokens {prompt} (prompt counts every input token)",
        ))
    elif write is not None and (cached or 0) + write > prompt:
        row.problems.append((
            row.fields.get("cache_write_tokens", "cache_write_tokens"),
            f"cache-write tokens {write} plus cached {cached or 0} exceed prompt tokens {prompt}",
        ))
