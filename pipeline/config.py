"""Default locations, resolved the same way by the CLI, the notebooks and the library."""

from __future__ import annotations

import os
from pathlib import Path

# The project checkout: notebooks and prompts ship beside the package, not inside it.
REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
PROMPTS = REPO / "prompts"

DEFAULT_DB = Path("data/warehouse.duckdb")
DEFAULT_CORPUS = Path("data/corpus")
DEFAULT_RUNS = Path("data/runs")


def db_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """`--db` wins, then PIPELINE_DB, then data/warehouse.duckdb."""
    return Path(explicit or os.environ.get("PIPELINE_DB") or DEFAULT_DB)


def corpus_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    return Path(explicit or os.environ.get("PIPELINE_CORPUS") or DEFAULT_CORPUS)


def runs_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    return Path(explicit or os.environ.get("PIPELINE_RUNS") or DEFAULT_RUNS)


def model_name(explicit: str | None = None) -> str | None:
    return explicit or os.environ.get("PIPELINE_MODEL") or None


def base_url(explicit: str | None = None) -> str | None:
    return explicit or os.environ.get("OPENAI_BASE_URL") or None
