"""Fixtures the corpus tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.corpus import apply
from pipeline.warehouse import db
from tests import helpers as A

PG = A.occurrences("pg-connection-refused")
MOD = A.occurrences("module-not-found")
SESSIONS = sorted({o["sessionId"] for o in PG + MOD})
PG_CLAIM = "Postgres on the dev box refuses connections until the container is restarted."


@pytest.fixture
def landed(tmp_path: Path, samples_copy: Path) -> tuple[Path, Path, str]:
    """A warehouse and corpus holding two memories; returns (warehouse, corpus, id of the Postgres memory)."""
    corpus = tmp_path / "corpus"
    with db.reading(samples_copy) as con:
        art = A.write_artifact(tmp_path / "a1", con, SESSIONS, candidates=[
            A.candidate("pg-connection-refused", PG_CLAIM),
            A.candidate("module-not-found", "Test-only dependencies are missing from the lock file, so imports fail."),
        ])
    r = apply.apply(art, db=samples_copy, corpus=corpus)
    assert r.status == "applied" and len(r.memories_written) == 2
    return samples_copy, corpus, r.memories_written[0]
