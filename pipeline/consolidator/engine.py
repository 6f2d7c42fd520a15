"""The engine registry, as papermill's `engines.py`: `ENGINES` maps a name to an engine function.

An engine is a function `(EngineOptions) -> Prepared`. `run_batch` calls it before it writes
anything, so it is where an engine refuses what it cannot work with (the openai engine without a
model or a key raises UsageError); the `Prepared` it returns holds the runner, `(BatchContext,
Recorder) -> EngineResult` (see `pipeline.consolidator.context`), and the model name the manifest
records. Built in: `rules` (offline, deterministic) and `openai` (the tool loop over any
OpenAI-compatible endpoint). `auto` is not an engine but a choice: openai when an API key is
configured, else rules (`resolve_engine`).

To add an engine: write the function and `register("name", function)`. The name is then accepted
by `run_batch` and the consolidate notebook in the same process; to offer it to `pipeline
consolidate --engine` and to the nightly's batch notebooks (each a fresh process), register it
here beside the built-ins. Every `--engine` option takes its choices from `engine_choices()`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipeline.consolidator.context import BatchContext, EngineResult, Recorder
from pipeline.errors import UsageError

if TYPE_CHECKING:
    from openai import OpenAI

__all__ = [
    "AUTO",
    "ENGINES",
    "Engine",
    "EngineOptions",
    "Prepared",
    "Runner",
    "engine_choices",
    "get_engine",
    "register",
    "resolve_engine",
]

AUTO = "auto"

Runner = Callable[[BatchContext, Recorder], EngineResult]


@dataclass(frozen=True)
class EngineOptions:
    """What the caller of a batch configured; `model`, `base_url` and `api_key` already fall back
    to PIPELINE_MODEL, OPENAI_BASE_URL and OPENAI_API_KEY."""

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    max_retries: int = 2
    timeout: float = 120.0
    client: OpenAI | None = None  # tests hand the openai engine a client of their own
    # Sent only when set; see pipeline.consolidator.agent.AgentConfig (local servers need them).
    tool_choice: str | None = None
    parallel_tool_calls: bool | None = None
    context_tokens: int | None = None
    max_reply_tokens: int | None = None


@dataclass(frozen=True)
class Prepared:
    """An engine ready to run one batch; `model` is the model it will call, if any (the manifest
    records it)."""

    run: Runner
    model: str | None = None


Engine = Callable[[EngineOptions], Prepared]

ENGINES: dict[str, Engine] = {}


def register(name: str, engine: Engine) -> None:
    """Make `engine` available under `name` (a name registered again is replaced)."""
    if not name or name == AUTO or not name.replace("-", "_").isidentifier():
        raise ValueError(f"{name!r} cannot name an engine: use letters, digits, '-' or '_', and not {AUTO!r}")
    ENGINES[name] = engine


def engine_choices() -> tuple[str, ...]:
    """What an `--engine` option accepts: auto, then every registered engine."""
    return (AUTO, *ENGINES)


def get_engine(name: str) -> Engine:
    try:
        return ENGINES[name]
    except KeyError:
        raise UsageError(f"unknown engine {name!r}; choose one of {', '.join(engine_choices())}") from None


def resolve_engine(engine: str, *, api_key: str | None) -> tuple[str, str]:
    """(engine, why): `auto` is openai when an API key is configured, else the offline rules."""
    if engine != AUTO:
        get_engine(engine)
        return engine, f"engine {engine} (as asked)"
    if api_key:
        return "openai", "engine auto → openai (OPENAI_API_KEY is set)"
    return "rules", "engine auto → rules (OPENAI_API_KEY is not set, so the offline rules engine runs)"


# -- the built-in engines ----------------------------------------------------------------------------------
def rules_engine(options: EngineOptions) -> Prepared:
    """The offline rules: no model, no network, the same answer for the same transcripts."""
    from pipeline.consolidator.rules.engine import run_rules

    return Prepared(run_rules)


def openai_engine(options: EngineOptions) -> Prepared:
    """The tool loop over an OpenAI-compatible endpoint; needs a model, and a key or a base URL."""
    if not options.model:
        raise UsageError(
            "the openai engine needs a model: pass --model M or set PIPELINE_MODEL "
            "(or run the offline engine with --engine rules)"
        )
    if not options.api_key and not options.base_url:
        raise UsageError(
            "the openai engine needs OPENAI_API_KEY, or --base-url for a local server that "
            "takes no key (or run the offline engine with --engine rules)"
        )
    # The openai client is imported only when this engine runs: it is slow to load.
    from pydantic import SecretStr, ValidationError

    from pipeline.consolidator.agent import AgentConfig, run_agent

    try:
        config = AgentConfig(
            model=options.model, base_url=options.base_url,
            api_key=SecretStr(options.api_key) if options.api_key else None,
            max_retries=options.max_retries, timeout=options.timeout,
            tool_choice=options.tool_choice,  # checked by the model (auto | required)
            parallel_tool_calls=options.parallel_tool_calls, context_tokens=options.context_tokens,
            max_reply_tokens=options.max_reply_tokens,
        )
    except ValidationError as exc:
        problems = "; ".join(
            f"--{'.'.join(str(p) for p in e['loc']).replace('_', '-')}: {e['msg']}" for e in exc.errors())
        raise UsageError(f"bad option for the openai engine: {problems}") from None
    client = options.client

    def run(ctx: BatchContext, recorder: Recorder) -> EngineResult:
        return run_agent(ctx, recorder, config, client=client)

    return Prepared(run, model=options.model)


register("rules", rules_engine)
register("openai", openai_engine)
