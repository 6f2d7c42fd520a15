"""The secrets of a batch: detected once on the raw lines of its sessions, then masked everywhere.

`scan_sessions` reads every stored line of the batch's sessions (the lines a batch can touch) and
returns a `SecretSet`. The batch's tools mask them in what the model reads, the rules engine masks
them before it normalises, the artifact writer masks them in every file, and `apply` and the night
report compute them again (never trusting an artifact) for their last gate.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
from pydantic import ValidationError

from pipeline.consolidator.contract import MAX_CLAIM_CHARS, MAX_GIST_CHARS, Answer
from pipeline.secret_gate import SecretSet
from pipeline.secrets_scan import Secret, line_secrets

__all__ = ["redact_answer", "scan_sessions"]

_FETCH = 512


def scan_sessions(con: duckdb.DuckDBPyConnection, session_ids: Sequence[str]) -> SecretSet:
    """Every secret detected on the stored lines of these sessions (ids are bound, never formatted)."""
    if not session_ids:
        return SecretSet()
    cur = con.execute(
        "SELECT text FROM lines WHERE session_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY session_id, line_no",
        [list(dict.fromkeys(session_ids))],
    )
    found: set[Secret] = set()
    while batch := cur.fetchmany(_FETCH):
        for (text,) in batch:
            found |= line_secrets(text)
    return SecretSet(found)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def redact_answer(answer: Answer, secrets: SecretSet) -> Answer:
    """The answer as it may be written to answer.json: claims, gists, entities and statements
    scrubbed (masked, and any rewritten secret cut out); quotes masked by known value only, so that
    the mask rule still finds them in the stored lines."""
    if not secrets:
        return answer
    data = answer.model_dump(mode="json")
    for cand in data["candidates"]:
        cand["claim"] = _clip(secrets.scrub(cand["claim"]), MAX_CLAIM_CHARS)
        cand["gist"] = _clip(secrets.scrub(cand["gist"]), MAX_GIST_CHARS)
        for entity in cand["entities"]:
            entity["name"] = secrets.scrub(entity["name"])
        for ev in cand["evidence"]:
            ev["quote"] = secrets.mask_known(ev["quote"])
    for com in data["commitments"]:
        com["statement"] = secrets.scrub(com["statement"])
        for ev in com["evidence"]:
            ev["quote"] = secrets.mask_known(ev["quote"])
    try:
        return Answer.model_validate(data)
    except ValidationError:
        # Masking made a field invalid (a quote past its length limit): written as is, so that
        # apply refuses it with the reason rather than the secret being written unmasked.
        return Answer.model_construct(**data)
