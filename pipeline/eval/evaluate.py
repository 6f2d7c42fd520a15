"""Consolidation quality, measured: run an engine over labelled sessions and score what it proposes.

A gold file (JSONL, one object a line; other tools write these files, so the names are fixed) holds:

* `{"type": "reviewed", "sessionId"}`: a session the labeller read in full. Only these count.
* `{"type": "memory", "kind", "claim", "certainty": "clear"|"borderline", "rulesDetectable", "evidence"}`
* `{"type": "commitment", "actor": "user"|"agent"|"other", "resolved", "certainty", "evidence"}`
* `{"type": "not_commitment", "evidence"}`: a tempting sentence that is not a promise.

Every `evidence` item is `{"sessionId", "line", "quote"}` with the warehouse's 1-based line number.

`evaluate` plans the reviewed sessions into batches exactly as the nightly planner does, runs each
batch with `pipeline.consolidator.batch.run_batch` (artifact folders under `out_dir`, the warehouse
opened read-only; nothing is applied, so the corpus, tasks and watermarks are never touched) and
scores the accepted answers with `score`, then writes `eval.json`, `report.md` and `report.html` next to
the artifact folders (`pipeline.eval.report`: the scores beside each batch's model calls,
tokens, cached share and cost):

* a proposed evidence item matches a gold one when it is in the same session and either its quote
  lies on the gold line or a line next to it (raw line text or its JSON-decoded strings), or the two
  quotes overlap (one contains the other, or they share 20 consecutive characters);
* a proposal matches a gold item when any of its evidence items matches any of the item's;
* precision = proposals matching a clear item / (proposals − those matching only borderline items);
* memory recall is over clear items with `rulesDetectable` true when the engine is `rules`, over all
  clear items otherwise; commitment recall is over clear items;
* `resolved` agreement: a commitment proposal matching gold commitments (clear or borderline, any
  actor) that all carry the same `resolved` is scored; `resolvedAgreed` of `resolvedScored` say the same;
* proposals whose evidence lies wholly outside the reviewed sessions are not scored; `actor: other`
  commitments are not scored (a proposal by `other` is left out, and a gold `other` item counts as
  borderline: matching it neither rewards nor penalises).

A figure whose denominator is zero is None (shown as "–"), never a division by zero.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, TypeAdapter, ValidationError

from pipeline.consolidator import tools
from pipeline.consolidator.batch import BatchResult, run_batch
from pipeline.consolidator.context import Event, EventSink
from pipeline.consolidator.contract import Answer, Kind
from pipeline.consolidator.engine import resolve_engine
from pipeline.consolidator.quotes import quote_in_line
from pipeline.errors import UsageError
from pipeline.eval.report import batch_costs, totals, write_report
from pipeline.nightly import planner
from pipeline.warehouse import db as warehouse

__all__ = [
    "OVERLAP_CHARS",
    "CommitmentFigures",
    "Evaluation",
    "Figures",
    "GoldCommitment",
    "GoldEvidence",
    "GoldMemory",
    "GoldNotCommitment",
    "GoldReviewed",
    "GoldSet",
    "Proposal",
    "Score",
    "evaluate",
    "load_gold",
    "parse_gold",
    "proposals_from",
    "render_table",
    "score",
]

# Two quotes that share this many consecutive characters are the same evidence.
OVERLAP_CHARS = 20
# How much of a claim or quote the table shows for an unmatched proposal.
_SHOW_CHARS = 160


# -- the gold file ---------------------------------------------------------------------------------------
class _Gold(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GoldEvidence(_Gold):
    sessionId: Annotated[str, Field(min_length=1)]
    line: Annotated[StrictInt, Field(ge=1)]
    quote: Annotated[str, Field(min_length=1)]


Certainty = Literal["clear", "borderline"]


class GoldReviewed(_Gold):
    type: Literal["reviewed"]
    sessionId: Annotated[str, Field(min_length=1)]


class GoldMemory(_Gold):
    type: Literal["memory"]
    kind: Kind
    claim: Annotated[str, Field(min_length=1)]
    certainty: Certainty
    rulesDetectable: StrictBool
    evidence: Annotated[list[GoldEvidence], Field(min_length=1)]


class GoldCommitment(_Gold):
    type: Literal["commitment"]
    actor: Literal["user", "agent", "other"]
    resolved: StrictBool
    certainty: Certainty
    evidence: Annotated[list[GoldEvidence], Field(min_length=1)]


class GoldNotCommitment(_Gold):
    type: Literal["not_commitment"]
    evidence: Annotated[list[GoldEvidence], Field(min_length=1)]


GoldRecord = Annotated[GoldReviewed | GoldMemory | GoldCommitment | GoldNotCommitment, Field(discriminator="type")]
_RECORD: TypeAdapter[GoldRecord] = TypeAdapter(GoldRecord)


@dataclass
class GoldSet:
    """A parsed gold file: the reviewed sessions and the labelled items, each with its file line."""

    path: str
    reviewed: list[str] = field(default_factory=list)
    reviewed_at: dict[str, int] = field(default_factory=dict)  # session → gold-file line
    memories: list[tuple[int, GoldMemory]] = field(default_factory=list)
    commitments: list[tuple[int, GoldCommitment]] = field(default_factory=list)
    not_commitments: list[tuple[int, GoldNotCommitment]] = field(default_factory=list)

    def evidence(self) -> Iterable[GoldEvidence]:
        for _, m in self.memories:
            yield from m.evidence
        for _, c in self.commitments:
            yield from c.evidence
        for _, n in self.not_commitments:
            yield from n.evidence


def _where(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "type"


def _problems(source: str, line_no: int, exc: ValidationError) -> list[str]:
    found = []
    for err in exc.errors():
        loc = list(err["loc"])
        if err["type"] in ("union_tag_not_found", "union_tag_invalid"):
            where, msg = "type", "must be one of reviewed, memory, commitment, not_commitment"
        else:
            # The first element names the union member (the record's type); the field follows.
            where, msg = _where(loc[1:]), err["msg"]
        found.append(f"{source}:{line_no}:{where}: {msg}")
    return found


def parse_gold(lines: Iterable[str], source: str = "<gold>") -> GoldSet:
    """Parse gold JSONL; every problem is reported at once as `file:line:field: message` (UsageError)."""
    gold = GoldSet(path=source)
    problems: list[str] = []
    for line_no, raw in enumerate(lines, start=1):
        text = raw.strip()
        if not text:
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            problems.append(f"{source}:{line_no}:-: not JSON ({exc.msg} at column {exc.colno})")
            continue
        if not isinstance(data, dict):
            problems.append(f"{source}:{line_no}:-: a gold record is a JSON object, got {type(data).__name__}")
            continue
        try:
            record = _RECORD.validate_python(data)
        except ValidationError as exc:
            problems.extend(_problems(source, line_no, exc))
            continue
        if isinstance(record, GoldReviewed):
            if record.sessionId not in gold.reviewed_at:
                gold.reviewed.append(record.sessionId)
                gold.reviewed_at[record.sessionId] = line_no
        elif isinstance(record, GoldMemory):
            gold.memories.append((line_no, record))
        elif isinstance(record, GoldCommitment):
            gold.commitments.append((line_no, record))
        else:
            gold.not_commitments.append((line_no, record))
    if problems:
        shown = problems[:50]
        more = f"\n… and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
        raise UsageError(f"malformed gold file ({len(problems)} problem(s)):\n" + "\n".join(shown) + more)
    if not gold.reviewed:
        raise UsageError(
            f"{source}: no reviewed session: add {{\"type\": \"reviewed\", \"sessionId\": …}} lines for the "
            "sessions read in full (only those are scored)"
        )
    return gold


def load_gold(path: str | Path) -> GoldSet:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{p}: no such gold file") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except IsADirectoryError:
        raise UsageError(f"{p}: is a folder; --gold takes a JSONL file") from None
    return parse_gold(text.splitlines(), str(p))


# -- proposals -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Proposal:
    """One memory candidate or commitment an engine proposed, reduced to what scoring needs."""

    type: Literal["memory", "commitment"]
    text: str  # the claim or the statement
    evidence: tuple[tuple[str, str], ...]  # (sessionId, quote)
    actor: str | None = None
    batch_id: str | None = None
    resolved: bool | None = None  # a commitment's `resolved`


def proposals_from(answer: Answer, batch_id: str | None = None) -> list[Proposal]:
    out = [
        Proposal("memory", c.claim, tuple((e.sessionId, e.quote) for e in c.evidence), batch_id=batch_id)
        for c in answer.candidates
    ]
    out += [
        Proposal("commitment", c.statement, tuple((e.sessionId, e.quote) for e in c.evidence),
                 actor=c.actor, batch_id=batch_id, resolved=c.resolved)
        for c in answer.commitments
    ]
    return out


# -- scoring ---------------------------------------------------------------------------------------------
class Figures(BaseModel):
    """One row of the table. `clear` is the recall denominator, `found` how many of those were found."""

    proposed: int
    matched: int
    borderline_only: int
    unmatched: int
    precision: float | None
    recall: float | None
    clear: int
    found: int


class CommitmentFigures(Figures):
    """The commitments row, and how often the engine's `resolved` agrees with the gold item's:
    `resolvedScored` scored proposals match a gold commitment (clear or borderline, any actor) whose
    matched items agree on `resolved`; `resolvedAgreed` of them say the same."""

    resolvedAgreed: int = 0
    resolvedScored: int = 0


class Score(BaseModel):
    memories: Figures
    commitments: CommitmentFigures
    falseCommitments: int
    notCommitments: int
    unmatchedExamples: dict[str, list[dict[str, Any]]]


def _overlap(a: str, b: str, n: int = OVERLAP_CHARS) -> bool:
    if a in b or b in a:
        return True
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    return any(short[i:i + n] in long_ for i in range(len(short) - n + 1))


LineText = Callable[[str, int], str | None]


def _evidence_matches(sid: str, quote: str, gold: GoldEvidence, line_text: LineText) -> bool:
    if sid != gold.sessionId:
        return False
    if _overlap(quote, gold.quote):
        return True
    for n in (gold.line - 1, gold.line, gold.line + 1):
        text = line_text(sid, n) if n >= 1 else None
        if text is not None and quote_in_line(quote, text):
            return True
    return False


def _matches(p: Proposal, evidence: Sequence[GoldEvidence], reviewed: set[str], line_text: LineText) -> bool:
    return any(
        _evidence_matches(sid, quote, g, line_text)
        for sid, quote in p.evidence if sid in reviewed
        for g in evidence
    )


def _ratio(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def _in_review(evidence: Sequence[GoldEvidence], reviewed: set[str]) -> list[GoldEvidence]:
    return [e for e in evidence if e.sessionId in reviewed]


def _figures(
    props: Sequence[Proposal],
    clear: Sequence[list[GoldEvidence]],
    other: Sequence[list[GoldEvidence]],
    recall_scope: Sequence[bool],
    reviewed: set[str],
    line_text: LineText,
) -> tuple[Figures, list[Proposal]]:
    """`clear` items (evidence in review), `other` items a match with which is neither reward nor
    penalty (borderline, actor other), `recall_scope[i]`: whether clear item i counts for recall."""
    matched = borderline_only = 0
    found = [False] * len(clear)
    unmatched: list[Proposal] = []
    for p in props:
        hits = [i for i, ev in enumerate(clear) if _matches(p, ev, reviewed, line_text)]
        for i in hits:
            found[i] = True
        if hits:
            matched += 1
        elif any(_matches(p, ev, reviewed, line_text) for ev in other):
            borderline_only += 1
        else:
            unmatched.append(p)
    in_scope = [i for i, s in enumerate(recall_scope) if s]
    hit = sum(1 for i in in_scope if found[i])
    figures = Figures(
        proposed=len(props), matched=matched, borderline_only=borderline_only, unmatched=len(unmatched),
        precision=_ratio(matched, len(props) - borderline_only), recall=_ratio(hit, len(in_scope)),
        clear=len(in_scope), found=hit,
    )
    return figures, unmatched


def _example(p: Proposal, negatives: Sequence[list[GoldEvidence]], reviewed: set[str], line_text: LineText) -> dict[str, Any]:
    sid, quote = p.evidence[0] if p.evidence else ("", "")
    out: dict[str, Any] = {("claim" if p.type == "memory" else "statement"): p.text, "sessionId": sid, "quote": quote}
    if p.type == "commitment":
        out["actor"] = p.actor
        out["notCommitment"] = any(_matches(p, ev, reviewed, line_text) for ev in negatives)
    if p.batch_id:
        out["batchId"] = p.batch_id
    return out


def _resolved_agreement(
    coms: Sequence[Proposal], gold: GoldSet, reviewed: set[str], line_text: LineText
) -> tuple[int, int]:
    """(agreed, scored): of the commitment proposals that match gold commitments all labelled alike
    on `resolved` (a proposal matching items that disagree is left out), how many say the same."""
    items = [(c.resolved, ev) for _, c in gold.commitments if (ev := _in_review(c.evidence, reviewed))]
    agreed = judged = 0
    for p in coms:
        labels = {resolved for resolved, ev in items if _matches(p, ev, reviewed, line_text)}
        if len(labels) != 1 or p.resolved is None:
            continue
        judged += 1
        agreed += p.resolved in labels
    return agreed, judged


@dataclass(frozen=True)
class Labelled:
    """A gold file's items as scoring sees them, with evidence in the reviewed sessions only. `clear`:
    id ("m12", "c40": the item's gold-file line) → (memory|commitment, evidence, rules-detectable);
    `other`: per type, the evidence of items a match with which is neither reward nor penalty
    (borderline items, commitments by `other`)."""

    clear: dict[str, tuple[str, list[GoldEvidence], bool]]
    other: dict[str, list[list[GoldEvidence]]]


def labelled(gold: GoldSet) -> Labelled:
    reviewed = set(gold.reviewed)
    clear: dict[str, tuple[str, list[GoldEvidence], bool]] = {}
    other: dict[str, list[list[GoldEvidence]]] = {"memory": [], "commitment": []}
    for n, m in gold.memories:
        if ev := _in_review(m.evidence, reviewed):
            if m.certainty == "clear":
                clear[f"m{n}"] = ("memory", ev, m.rulesDetectable)
            else:
                other["memory"].append(ev)
    for n, c in gold.commitments:
        if ev := _in_review(c.evidence, reviewed):
            if c.certainty == "clear" and c.actor != "other":
                clear[f"c{n}"] = ("commitment", ev, True)
            else:
                other["commitment"].append(ev)
    return Labelled(clear, other)


def is_scored(p: Proposal, reviewed: set[str]) -> bool:
    """A proposal is scored when some of its evidence lies in a reviewed session and it is not a
    commitment of `other`."""
    return any(sid in reviewed for sid, _ in p.evidence) and not (p.type == "commitment" and p.actor == "other")


def score(gold: GoldSet, proposals: Sequence[Proposal], line_text: LineText, *, engine: str) -> Score:
    """Score `proposals` against `gold`; `line_text(session, line)` is a warehouse line (None if absent)."""
    reviewed = set(gold.reviewed)
    mems = [p for p in proposals if p.type == "memory" and is_scored(p, reviewed)]
    coms = [p for p in proposals if p.type == "commitment" and is_scored(p, reviewed)]
    items = labelled(gold)

    mem_clear = [(ev, detectable) for kind, ev, detectable in items.clear.values() if kind == "memory"]
    scope = [detectable or engine != "rules" for _, detectable in mem_clear]
    mem_fig, mem_unmatched = _figures(mems, [ev for ev, _ in mem_clear], items.other["memory"], scope, reviewed, line_text)

    com_clear = [ev for kind, ev, _ in items.clear.values() if kind == "commitment"]
    com_fig, com_unmatched = _figures(coms, com_clear, items.other["commitment"], [True] * len(com_clear), reviewed, line_text)

    agreed, judged = _resolved_agreement(coms, gold, reviewed, line_text)
    com_fig = CommitmentFigures(**com_fig.model_dump(), resolvedAgreed=agreed, resolvedScored=judged)

    negatives = [ev for ev in (_in_review(n.evidence, reviewed) for _, n in gold.not_commitments) if ev]
    false_commitments = sum(1 for ev in negatives if any(_matches(p, ev, reviewed, line_text) for p in coms))
    return Score(
        memories=mem_fig,
        commitments=com_fig,
        falseCommitments=false_commitments,
        notCommitments=len(negatives),
        unmatchedExamples={
            "memories": [_example(p, negatives, reviewed, line_text) for p in mem_unmatched],
            "commitments": [_example(p, negatives, reviewed, line_text) for p in com_unmatched],
        },
    )


# -- by repository ---------------------------------------------------------------------------------------
def repository_of(paths: dict[str, str]) -> dict[str, str]:
    """{session: repository}: the first folder under the folder all the sessions' files share (the
    `<owner>__<repo>` folders of a labelled set), or the file's own folder when they share no more."""
    if not paths:
        return {}
    folders = [os.path.dirname(p) for p in paths.values()]
    root = os.path.commonpath(folders) if len(set(folders)) > 1 else os.path.dirname(folders[0])
    out = {}
    for sid, p in paths.items():
        rel = os.path.relpath(p, root)
        out[sid] = rel.split(os.sep)[0] if os.sep in rel else os.path.basename(root)
    return out


def score_by_repository(gold: GoldSet, proposals: Sequence[Proposal], line_text: LineText, *, engine: str,
                        repository: dict[str, str]) -> dict[str, Score]:
    """Each repository scored on its own reviewed sessions only, by today's rules. Those rules were
    written against many of the repositories they are scored on; the held-out figures (each
    repository with the changes written against it taken back) are pipeline.eval.held_out's."""
    out: dict[str, Score] = {}
    for repo in sorted(set(repository[s] for s in gold.reviewed if s in repository)):
        sub = GoldSet(path=gold.path, reviewed=[s for s in gold.reviewed if repository.get(s) == repo],
                      memories=gold.memories, commitments=gold.commitments, not_commitments=gold.not_commitments)
        out[repo] = score(sub, proposals, line_text, engine=engine)
    return out


# -- one evaluation run ----------------------------------------------------------------------------------
@dataclass
class Evaluation:
    """What `evaluate` did: the engine that ran, each batch's outcome, the score, and warnings."""

    engine: str
    out_dir: Path
    gold: GoldSet
    batches: list[BatchResult]
    score: Score
    warnings: list[str]
    model: str | None = None
    base_url: str | None = None
    by_repository: dict[str, Score] = field(default_factory=dict)
    sessions_of: dict[str, int] = field(default_factory=dict)  # reviewed sessions per repository

    @property
    def failed(self) -> list[BatchResult]:
        return [b for b in self.batches if not b.accepted]

    @property
    def exit_code(self) -> int:
        """0 when every batch ended with an accepted answer, 1 when one did not (the scores then
        cover only what the accepted batches proposed)."""
        return 1 if self.failed else 0

    @property
    def report_path(self) -> Path:
        return self.out_dir / "report.md"

    def to_json(self) -> dict[str, Any]:
        s = self.score
        costs = {c.batch_id: c for c in batch_costs(self)}
        return {
            "memories": s.memories.model_dump(),
            "commitments": s.commitments.model_dump(),
            "falseCommitments": s.falseCommitments,
            "unmatchedExamples": s.unmatchedExamples,
            "notCommitments": s.notCommitments,
            "engine": self.engine,
            "gold": self.gold.path,
            "reviewedSessions": len(self.gold.reviewed),
            "outDir": str(self.out_dir),
            "batches": [
                {"batchId": b.manifest.batch_id, "sessionIds": b.manifest.session_ids, "outcome": b.outcome,
                 "reason": b.reason, "outDir": str(b.out_dir), "tokens": b.run.tokens.model_dump(mode="json"),
                 "cachedShare": b.run.cached_share, "model": costs[b.manifest.batch_id].model,
                 "modelCalls": costs[b.manifest.batch_id].calls, "costUsd": costs[b.manifest.batch_id].cost_usd}
                for b in self.batches
            ],
            "model": self.model,
            "totals": totals(list(costs.values())),
            "report": str(self.report_path),
            "warnings": self.warnings,
            "byRepository": {
                repo: {"sessions": self.sessions_of.get(repo, 0), "memories": sc.memories.model_dump(),
                       "commitments": sc.commitments.model_dump(), "falseCommitments": sc.falseCommitments}
                for repo, sc in self.by_repository.items()
            },
        }


class _Lines:
    """Warehouse lines fetched once for every gold evidence line and its two neighbours."""

    def __init__(self, con: Any, gold: GoldSet) -> None:
        wanted = sorted({(e.sessionId, n) for e in gold.evidence() for n in (e.line - 1, e.line, e.line + 1) if n >= 1})
        self.text: dict[tuple[str, int], str] = {}
        if wanted:
            rows = con.execute(
                "SELECT l.session_id, l.line_no, l.text FROM lines l "
                "JOIN (SELECT unnest(?::VARCHAR[]) AS session_id, unnest(?::BIGINT[]) AS line_no) w "
                "USING (session_id, line_no)",
                [[s for s, _ in wanted], [n for _, n in wanted]],
            ).fetchall()
            self.text = {(sid, int(n)): text for sid, n, text in rows}

    def __call__(self, session_id: str, line_no: int) -> str | None:
        return self.text.get((session_id, line_no))


def _check_gold_against(con: Any, gold: GoldSet, line_text: _Lines) -> list[str]:
    """Reviewed sessions unknown to the warehouse are an error; gold quotes not on their line a warning."""
    known = {r[0] for r in con.execute(
        "SELECT session_id FROM sessions WHERE session_id IN (SELECT unnest(?::VARCHAR[]))", [gold.reviewed]).fetchall()}
    missing = [s for s in gold.reviewed if s not in known]
    if missing:
        where = "; ".join(f"{gold.path}:{gold.reviewed_at[s]}: {s}" for s in missing[:10])
        raise UsageError(
            f"{len(missing)} reviewed session(s) are not in this warehouse ({where}); ingest the transcripts "
            "they come from first (`pipeline ingest DIR --db FILE`), or check the ids with `pipeline sessions`"
        )
    warnings = []
    reviewed = set(gold.reviewed)
    items: list[tuple[int, list[GoldEvidence]]] = [
        *((n, m.evidence) for n, m in gold.memories),
        *((n, c.evidence) for n, c in gold.commitments),
        *((n, x.evidence) for n, x in gold.not_commitments),
    ]
    for file_line, evidence in items:
        for i, e in enumerate(evidence):
            if e.sessionId not in reviewed:
                continue
            text = line_text(e.sessionId, e.line)
            if text is None:
                warnings.append(f"{gold.path}:{file_line}:evidence[{i}]: line {e.line} does not exist in {e.sessionId}")
            elif not quote_in_line(e.quote, text):
                warnings.append(f"{gold.path}:{file_line}:evidence[{i}]: quote not found on line {e.line} of {e.sessionId}")
        if not _in_review(evidence, reviewed):
            warnings.append(f"{gold.path}:{file_line}: no evidence in a reviewed session; the item is not scored")
    return warnings


def evaluate(
    gold_path: str | Path,
    *,
    db: str | Path | None = None,
    engine: str = "auto",
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    out_dir: str | Path | None = None,
    on_event: EventSink | None = None,
    client: Any | None = None,
    batch_options: Mapping[str, Any] | None = None,
) -> Evaluation:
    """Run `engine` over the gold file's reviewed sessions, batch by batch as the nightly planner
    forms them, and score the accepted answers. Writes only artifact folders under `out_dir` (a new
    temporary folder by default); the warehouse is opened read-only and nothing is applied.
    `batch_options` are passed on to each `run_batch` (budgets, max_retries, timeout, tool_choice,
    parallel_tool_calls, context_tokens)."""
    gold = load_gold(gold_path)
    key = api_key or os.environ.get("OPENAI_API_KEY") or None
    chosen, _why = resolve_engine(engine, api_key=key)
    with warehouse.reading(db) as con:
        lines = _Lines(con, gold)
        warnings = _check_gold_against(con, gold, lines)
        entries = tools.list_sessions(con, gold.reviewed)
        paths = dict(con.execute("SELECT session_id, path FROM sessions WHERE session_id IN (SELECT unnest(?::VARCHAR[]))",
                                 [gold.reviewed]).fetchall())
    repository = repository_of(paths)
    consolidated = [e["sessionId"] for e in entries if e["newFromLine"] > 1]
    if consolidated:
        warnings.append(
            f"{len(consolidated)} reviewed session(s) were consolidated before in this warehouse; engines look only "
            "at lines after a session's watermark, so these scores undercount (evaluate on a scratch warehouse)"
        )
    folder = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="pipeline-eval-"))
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--out {folder} is a file; name a folder for the artifact folders")
    folder.mkdir(parents=True, exist_ok=True)
    batches = planner.plan(entries)
    results: list[BatchResult] = []
    proposals: list[Proposal] = []
    for b in batches:
        if on_event is not None:
            on_event(Event("engine", f"batch {b.batch_id}: {len(b.session_ids)} session(s) of {b.slug or '(no project)'}"))
        result = run_batch(
            b.session_ids, db=db, engine=chosen, model=model, base_url=base_url, api_key=key,
            out_dir=folder / b.batch_id, batch_id=b.batch_id, on_event=on_event, client=client,
            **dict(batch_options or {}),
        )
        results.append(result)
        if result.answer is not None:
            proposals.extend(proposals_from(result.answer, b.batch_id))
    models = [b.run.model or b.manifest.model for b in results if (b.run.model or b.manifest.model)]
    evaluation = Evaluation(
        engine=chosen, out_dir=folder, gold=gold, batches=results,
        score=score(gold, proposals, lines, engine=chosen), warnings=warnings,
        model=model or (models[0] if models else None),
        base_url=base_url or (os.environ.get("OPENAI_BASE_URL") or None if chosen == "openai" else None),
        by_repository=score_by_repository(gold, proposals, lines, engine=chosen, repository=repository),
        sessions_of={r: sum(1 for s in gold.reviewed if repository.get(s) == r) for r in set(repository.values())},
    )
    write_report(evaluation, model=evaluation.model, base_url=evaluation.base_url)
    return evaluation


# -- the table -------------------------------------------------------------------------------------------
def _fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def _short(text: str, n: int = _SHOW_CHARS) -> str:
    one = " ".join(text.split())
    return one if len(one) <= n else one[: n - 1] + "…"


def render_table(evaluation: Evaluation) -> str:
    """The scores as a plain-text table, followed by every unmatched proposal."""
    s = evaluation.score
    scope = "rules-detectable clear" if evaluation.engine == "rules" else "clear"
    head = f"{'':12} {'proposed':>8} {'matched':>8} {'borderline only':>15} {'unmatched':>9} {'precision':>9} {'recall':>7}"
    rows = [
        f"engine {evaluation.engine} on {len(evaluation.gold.reviewed)} reviewed session(s), "
        f"{len(evaluation.batches)} batch(es); artifacts in {evaluation.out_dir}",
        "",
        head,
    ]
    for name, f, what in (("memories", s.memories, scope), ("commitments", s.commitments, "clear")):
        rows.append(
            f"{name:12} {f.proposed:>8} {f.matched:>8} {f.borderline_only:>15} {f.unmatched:>9} "
            f"{_fmt(f.precision):>9} {_fmt(f.recall):>7}   ({f.found} of {f.clear} {what} items found)"
        )
    if len(evaluation.by_repository) > 1:
        rows += ["", "by repository, each scored on its own sessions (memories P/R found, commitments P/R found):"]
        width = max(len(r) for r in evaluation.by_repository)
        for repo, sc in evaluation.by_repository.items():
            m, c = sc.memories, sc.commitments
            rows.append(f"  {repo:<{width}} {evaluation.sessions_of.get(repo, 0):>3} sessions   "
                        f"memories {_fmt(m.precision):>4}/{_fmt(m.recall):>4} {m.found}/{m.clear} of {m.proposed:<3}  "
                        f"commitments {_fmt(c.precision):>4}/{_fmt(c.recall):>4} {c.found}/{c.clear} of {c.proposed}")
    rows.append("")
    c = s.commitments
    rows.append(f"commitments whose `resolved` agrees with the gold item: {c.resolvedAgreed} of {c.resolvedScored}")
    rows.append(f"not_commitment items proposed as commitments: {s.falseCommitments} of {s.notCommitments}")
    t = totals(batch_costs(evaluation))
    cost = "no price" if t["costUsd"] is None else f"${t['costUsd']:.4f}"
    share = "–" if t["cachedShare"] is None else f"{t['cachedShare']:.3f}"
    rows.append(f"model calls {t['calls']}, prompt tokens {t['prompt']:,} (cached share {share}), "
                f"completion tokens {t['completion']:,}, cost {cost}; report: {evaluation.report_path}")
    for b in evaluation.failed:
        rows.append(f"batch {b.manifest.batch_id} ended {b.outcome}: {b.reason} (its sessions proposed nothing)")
    examples = s.unmatchedExamples
    if examples["memories"] or examples["commitments"]:
        rows += ["", "unmatched proposals (does the gold miss something?):"]
        for e in examples["memories"]:
            rows.append(f"  memory      {_short(e['claim'])}")
            rows.append(f"              “{_short(e['quote'], 120)}” ({e['sessionId']})")
        for e in examples["commitments"]:
            flag = " [a labelled not_commitment]" if e.get("notCommitment") else ""
            rows.append(f"  commitment  {_short(e['statement'])} ({e['actor']}){flag}")
            rows.append(f"              “{_short(e['quote'], 120)}” ({e['sessionId']})")
    return "\n".join(rows) + "\n"
