from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from pipeline import db

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "data" / "samples"

# Tests never talk to a real model endpoint, whatever the developer's shell has configured.
for _var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "PIPELINE_DB", "PIPELINE_CORPUS", "PIPELINE_RUNS", "PIPELINE_MODEL"):
    os.environ.pop(_var, None)


def write_jsonl(path: Path, records: list, *, trailing_newline: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records)
    path.write_text(text + ("\n" if trailing_newline else ""), encoding="utf-8")
    return path


@pytest.fixture
def warehouse(tmp_path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    con = db.connect(tmp_path / "w.duckdb")
    yield con
    con.close()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "w.duckdb"


@pytest.fixture(scope="session")
def samples_warehouse(tmp_path_factory) -> Path:
    """The sample corpus ingested once per test process; tests that write must copy it first."""
    from pipeline import ingest

    path = tmp_path_factory.mktemp("samples") / "w.duckdb"
    with db.writing(path) as con:
        assert not ingest.ingest(con, [SAMPLES]).errors
    return path


def copy_samples(samples_warehouse: Path, folder: Path) -> Path:
    """A private, writable copy of the sample warehouse: copying the file beats ingesting again."""
    path = folder / "w.duckdb"
    shutil.copyfile(samples_warehouse, path)
    return path


@pytest.fixture
def samples_copy(samples_warehouse: Path, tmp_path: Path) -> Path:
    return copy_samples(samples_warehouse, tmp_path)


@pytest.fixture(scope="module")
def wh(samples_warehouse: Path) -> Path:
    """The sample warehouse, for tests that only read it (consolidation never writes it)."""
    return samples_warehouse


@pytest.fixture(scope="module")
def all_ids(wh: Path) -> list[str]:
    from pipeline import tools

    with db.reading(wh) as con:
        return [e["sessionId"] for e in tools.list_sessions(con)]


def execute_notebook(*args: object, **kwargs: object) -> object:
    """papermill.execute_notebook, run again when the kernel died before running anything (Jupyter
    sometimes loses a kernel while the two test workers start theirs at once)."""
    import papermill as pm

    from pipeline.kernels import KERNEL_START_RETRIES, kernel_did_not_start

    for attempt in range(KERNEL_START_RETRIES + 1):
        try:
            return pm.execute_notebook(*args, **kwargs)
        except RuntimeError as exc:
            if attempt == KERNEL_START_RETRIES or not kernel_did_not_start(str(exc)):
                raise
    raise AssertionError("unreachable")
