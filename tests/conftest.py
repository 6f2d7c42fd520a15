"""Fixtures only; the functions tests share live in tests/helpers.py."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import duckdb
import pytest

from pipeline.warehouse import db
from tests.fakes.openai_server import fake_openai  # noqa: F401  (the `fake` fixture, for every test)
from tests.helpers import REPO, SAMPLES, built_once, copy_samples


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A test marked `first` runs for a minute or more on its own: at the front of the list, the worker
    # that starts with it is done with it while the others still have their share to run. Left in
    # its place, it once started four and a half minutes in and ran alone for the last two.
    items.sort(key=lambda item: item.get_closest_marker("first") is None)  # stable: the rest keep their order


def pytest_collection_finish(session: pytest.Session) -> None:
    # Once the test modules and what they import are loaded, they live for the whole run: frozen,
    # the collector's full passes (which walk every tracked object) skip them. A worker spent 2-7 %
    # of its time in those passes, most of it walking these.
    gc.collect()
    gc.freeze()

# Tests never talk to a real model endpoint, whatever the developer's shell has configured, and run
# with the package's own memory caps.
for _var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "PIPELINE_DB", "PIPELINE_CORPUS", "PIPELINE_RUNS", "PIPELINE_MODEL",
             "PIPELINE_MEMORY_LIMIT", "PIPELINE_INGEST_MEMORY_LIMIT"):
    os.environ.pop(_var, None)


@pytest.fixture
def warehouse(tmp_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    with db.opened(tmp_path / "w.duckdb") as con:
        yield con


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "w.duckdb"


@pytest.fixture(scope="session")
def samples_warehouse(tmp_path_factory) -> Path:
    """The sample corpus ingested once per test process; tests that write must copy it first."""
    from pipeline.calls import rates
    from pipeline.warehouse import ingest

    path = tmp_path_factory.mktemp("samples") / "w.duckdb"
    with db.writing(path) as con:  # as `pipeline ingest` does it
        report = ingest.ingest(con, [SAMPLES])
        assert not report.errors
        rates.store_after_ingest(con, report.warnings)
    return path


@pytest.fixture
def samples_copy(samples_warehouse: Path, tmp_path: Path) -> Path:
    return copy_samples(samples_warehouse, tmp_path)


@pytest.fixture(scope="session")
def samples_night(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The samples' whole night (`pipeline nightly`, rules engine, report included), run once for the
    whole test run, all xdist workers: {"result": its --json summary, "dir": the folder holding its
    w.duckdb, corpus and runs}. Tests only read it; one that runs another night copies the folder."""

    def build(folder: Path) -> dict[str, Any]:
        env = {k: v for k, v in os.environ.items()
               if k not in ("PIPELINE_CRASH_AT", "OPENAI_API_KEY", "PIPELINE_CUTOVER", "PIPELINE_CUTOVER_VERSION")}
        out = subprocess.run([sys.executable, "-m", "pipeline", "nightly", "--source", str(SAMPLES), "--engine", "rules",
                              "--json", "--db", str(folder / "w.duckdb"), "--corpus", str(folder / "corpus"),
                              "--runs", str(folder / "runs")], cwd=REPO, env=env, capture_output=True, text=True,
                             timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        return {"result": json.loads(out.stdout), "dir": str(folder)}

    return built_once(tmp_path_factory, "samples-night", build)


@pytest.fixture(scope="module")
def wh(samples_warehouse: Path) -> Path:
    """The sample warehouse, for tests that only read it (consolidation never writes it)."""
    return samples_warehouse


@pytest.fixture(scope="module")
def all_ids(wh: Path) -> list[str]:
    from pipeline.consolidator import tools

    with db.reading(wh) as con:
        return [e["sessionId"] for e in tools.list_sessions(con)]


@pytest.fixture
def engines(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The engine registry (`pipeline.consolidator.engine`), restored after the test, so a test may
    `register` engines of its own."""
    from pipeline.consolidator import engine

    monkeypatch.setattr(engine, "ENGINES", dict(engine.ENGINES))
    return engine
