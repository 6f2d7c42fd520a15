"""How often a call's cause agrees with a label a person gave it from the raw lines.

Gold files are JSONL, one labelled call a line: ``{"sessionId", "line", "cause"}`` (``line`` is the
usage record's line, as ``cache_calls.line_no``; any other field, such as a ``note``, is kept for
the reader). Each file is scored on its own (a development set and one the rules were not written
against are different claims), with agreement overall and per cause in both directions (of the
calls labelled X, how many the classifier calls X; of those it calls X, how many are labelled X),
the confusion table, every disagreement, and the labels that match no call.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipeline.cache import causes
from pipeline.errors import UsageError

__all__ = ["CauseLabel", "CauseScore", "load_gold", "score", "score_text"]


class CauseLabel(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    session_id: str = Field(alias="sessionId")
    line: int = Field(ge=1)
    cause: str


class CauseScore(BaseModel):
    gold: str
    labelled: int
    matched: int
    agree: int
    rate: float | None
    by_cause: dict[str, dict[str, Any]]
    confusion: dict[str, dict[str, int]]
    disagreements: list[dict[str, Any]]
    unmatched: list[dict[str, Any]]
    hits_with_miss_cause: int


def load_gold(path: str | Path) -> list[CauseLabel]:
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"no gold file at {file}")
    out: list[CauseLabel] = []
    for n, raw in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip():
            continue
        try:
            label = CauseLabel.model_validate(json.loads(raw))
        except (ValueError, ValidationError) as exc:
            raise UsageError(f"{file}:{n}: not a cause label ({str(exc).splitlines()[0]})") from None
        if label.cause not in causes.CAUSES:
            raise UsageError(f"{file}:{n}: cause {label.cause!r} is not one of {', '.join(causes.CAUSES)}")
        out.append(label)
    return out


def score(gold_path: str | Path, classified: pl.DataFrame) -> CauseScore:
    labels = load_gold(gold_path)
    gold = pl.DataFrame(
        [{"session_id": g.session_id, "line_no": g.line, "gold": g.cause, "note": (g.model_extra or {}).get("note")}
         for g in labels],
        schema={"session_id": pl.String, "line_no": pl.Int64, "gold": pl.String, "note": pl.String},
    )
    calls = classified.select(
        "session_id", "line_no", pl.col("cause").cast(pl.String).alias("predicted"), "evidence_line_no",
        "cached_tokens", "prev_prompt",
    )
    joined = gold.join(calls, on=["session_id", "line_no"], how="left")
    matched = joined.filter(pl.col("predicted").is_not_null())
    agree = matched.filter(pl.col("gold") == pl.col("predicted"))
    by_cause: dict[str, dict[str, Any]] = {}
    for cause in causes.CAUSES:
        labelled = matched.filter(pl.col("gold") == cause).height
        predicted = matched.filter(pl.col("predicted") == cause).height
        both = agree.filter(pl.col("gold") == cause).height
        if labelled or predicted:
            by_cause[cause] = {"labelled": labelled, "predicted": predicted, "agree": both,
                               "recall": both / labelled if labelled else None,
                               "precision": both / predicted if predicted else None}
    confusion: dict[str, dict[str, int]] = {}
    for g, p, n in matched.group_by(["gold", "predicted"]).len().sort(["gold", "predicted"]).iter_rows():
        confusion.setdefault(g, {})[p] = int(n)
    wrong = matched.filter(pl.col("gold") != pl.col("predicted")).sort(["session_id", "line_no"])
    hit_share = causes.cache_calls.HIT_SHARE
    read_most = matched.filter(
        pl.col("prev_prompt").is_not_null() & (pl.col("cached_tokens").fill_null(0) >= hit_share * pl.col("prev_prompt"))
        & pl.col("predicted").is_in(list(causes.MISS_CAUSES))
    )
    return CauseScore(
        gold=str(gold_path), labelled=gold.height, matched=matched.height, agree=agree.height,
        rate=agree.height / matched.height if matched.height else None, by_cause=by_cause, confusion=confusion,
        disagreements=[{"sessionId": r["session_id"], "line": r["line_no"], "gold": r["gold"], "predicted": r["predicted"],
                        "evidenceLine": r["evidence_line_no"], "note": r["note"]} for r in wrong.iter_rows(named=True)],
        unmatched=[{"sessionId": r["session_id"], "line": r["line_no"], "gold": r["gold"]}
                   for r in joined.filter(pl.col("predicted").is_null()).iter_rows(named=True)],
        hits_with_miss_cause=read_most.height,
    )


def score_text(result: CauseScore, *, examples: int = 15) -> str:
    def pct(v: float | None) -> str:
        return "—" if v is None else f"{100 * v:.1f} %"

    lines = [
        f"cache causes against {result.gold}: {result.agree}/{result.matched} labelled calls agree ({pct(result.rate)})"
        + (f"; {len(result.unmatched)} labels match no call" if result.unmatched else ""),
        f"calls that read ≥ {causes.cache_calls.HIT_SHARE:.0%} of their previous prompt and got a miss cause: "
        f"{result.hits_with_miss_cause}",
        f"{'cause':<19}{'labelled':>9}{'predicted':>10}{'agree':>7}{'recall':>9}{'precision':>11}",
    ]
    for cause, row in result.by_cause.items():
        lines.append(f"{cause:<19}{row['labelled']:>9}{row['predicted']:>10}{row['agree']:>7}"
                     f"{pct(row['recall']):>9}{pct(row['precision']):>11}")
    for d in result.disagreements[:examples]:
        lines.append(f"  {d['sessionId']} line {d['line']}: labelled {d['gold']}, classified {d['predicted']}"
                     + (f" — {d['note']}" if d.get("note") else ""))
    if len(result.disagreements) > examples:
        lines.append(f"  … {len(result.disagreements) - examples} more (--json lists them all)")
    return "\n".join(lines)
