"""Held-out figures for rules written by hand: which change moved which labelled item, and every
repository scored with the changes written against it taken back.

A rule written after reading a repository's sessions has seen that repository: its gain there says
nothing about the next one. Hand-written rules cannot be retrained without a repository, so the
history stands in for it. Each labelled batch is scored with the rules of every commit that changed
them since the batch was first seen (`bench/eval_history.py` runs them), and `bench/eval/provenance.json`
says which repositories each change that moved a figure was written against. For a repository R:

* **first seen**: the rules of the commit that first scored R's batch, on the reading of that day
  (its ingest and batch planner): nothing had been written against R yet;
* **held out**: starting from first seen, every later change's effect on R's items and proposals,
  except the changes written against R. An item or proposal a change added is added, one it removed
  is removed, one at a time (a change's effects are taken as independent of the others: what the
  rules do is re-measured at every commit, only the bookkeeping of who found what is per item);
* **now**: today's rules on today's reading, as `pipeline eval` measures them.

The first step after first seen is the reading of today (ingest, views, planner) under the
first-seen rules; it is attributed to the reading commits the provenance names for it.

What is tracked is each scored proposal (by what it matched and its first quote); an item is found
where a proposal present matches it, so a repository's items and proposals never disagree. A match
the project's own commits called chance (a noise memory whose evidence happened to lie on a labelled
line: `chance` in the provenance file) finds nothing, in every column.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipeline.errors import UsageError
from pipeline.eval.evaluate import GoldSet, LineText, Proposal, _matches, is_scored, labelled

# A scored proposal, whose presence a change can flip: (type, outcome, ids matched, (session, first quote)),
# outcome matched | borderline | unmatched, ids the clear items in scope or not it matched ("m12", "c40").
Key = tuple[Any, ...]


class Written(BaseModel):
    """One change that moved a labelled figure: the repositories it was written against, and why we say so."""

    model_config = ConfigDict(extra="forbid")
    repositories: list[str]
    why: Annotated[str, Field(min_length=1)]


class FirstSeen(BaseModel):
    model_config = ConfigDict(extra="forbid")
    commit: Annotated[str, Field(min_length=7)]
    why: Annotated[str, Field(min_length=1)]


class Provenance(BaseModel):
    """`bench/eval/provenance.json`: per gold file the commit that first scored it, and per commit
    (abbreviated hash, as `git log --format=%h` prints it) the repositories it was written against."""

    model_config = ConfigDict(extra="forbid")
    firstSeen: dict[str, FirstSeen]
    reading: Written  # today's reading under the first-seen rules (ingest, views, planner since then)
    commits: dict[str, Written]
    chance: dict[str, dict[str, str]] = {}  # gold file → {item id: the commit that called its match chance, and why}

    def against(self, step: str) -> set[str]:
        written = self.reading if step == READING else self.commits.get(step)
        return set(written.repositories) if written is not None else set()

    def knows(self, step: str) -> bool:
        return step == READING or step in self.commits


READING = "reading"  # the step from the first-seen reading to today's, under the first-seen rules
FIRST_SEEN = "first-seen"


def load_provenance(path: str | Path) -> Provenance:
    try:
        return Provenance.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read the provenance file {path}: {exc.strerror or exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UsageError(f"{path}: {where}: {first['msg']}") from None


@dataclass(frozen=True)
class ItemState:
    """What one engine run found of one gold file: every clear item in scope (found or not, its repository)
    and every scored proposal keyed by what it matched."""

    items: dict[str, tuple[str, str]]  # id of a clear item in recall's scope → (memory|commitment, repository)
    proposals: dict[Key, str]  # key → repository

    def present(self) -> dict[Key, str]:
        """The scored proposals, with their repositories."""
        return dict(self.proposals)


def item_state(gold: GoldSet, proposals: Sequence[Proposal], line_text: LineText, repository: Mapping[str, str],
               chance: Iterable[str] = ()) -> ItemState:
    """Score `proposals` item by item, as `evaluate.score` does in sum: memories in scope are clear and
    rules-detectable, commitments clear and not by `other`; proposals whose evidence lies outside the
    reviewed sessions, and `other`'s commitments, are not scored. A match with an item in `chance`
    does not count."""
    reviewed = set(gold.reviewed)
    items = labelled(gold)
    # A clear memory no rule could find still makes a proposal that matches it right (as `score` counts it);
    # a chance match is no match: the item stays in recall's scope, missed unless a proposal finds it for real.
    skip = set(chance)
    matchable = {i: (t, ev) for i, (t, ev, _) in items.clear.items() if i not in skip}
    props: dict[Key, str] = {}
    for p in proposals:
        if not is_scored(p, reviewed):
            continue
        sid = next(s for s, _ in p.evidence if s in reviewed)
        hits = tuple(sorted(i for i, (t, ev) in matchable.items() if t == p.type and _matches(p, ev, reviewed, line_text)))
        if hits:
            kind = "matched"
        else:
            kind = "borderline" if any(_matches(p, ev, reviewed, line_text) for ev in items.other[p.type]) else "unmatched"
        # the first quote tells apart two proposals that match the same items (both count, as in `score`)
        props[(p.type, kind, hits, (sid, p.evidence[0][1][:100]))] = repository.get(sid, "")
    scope = {i: (t, repository.get(ev[0].sessionId, "")) for i, (t, ev, detectable) in items.clear.items() if detectable}
    return ItemState(scope, props)


@dataclass(frozen=True)
class Flip:
    step: str  # the commit (or READING) whose change it is
    key: Key
    repository: str
    present: bool  # after the change


def flips(steps: Sequence[tuple[str, ItemState]]) -> list[Flip]:
    """Every entity a step added or removed, in order (steps[0] is first seen)."""
    out: list[Flip] = []
    for (_, before), (name, after) in pairwise(steps):
        a, b = before.present(), after.present()
        for key in sorted(set(a) ^ set(b), key=repr):
            out.append(Flip(name, key, b.get(key) or a[key], key in b))
    return out


def held_out(steps: Sequence[tuple[str, ItemState]], provenance: Provenance, repository: str,
             changes: Sequence[Flip] | None = None) -> set[Key]:
    """The proposals of `repository` present when every change since first seen is applied but those
    written against it (`changes`: the steps' flips, when already computed)."""
    present = {k for k, repo in steps[0][1].present().items() if repo == repository}
    for flip in flips(steps) if changes is None else changes:
        if flip.repository != repository or repository in provenance.against(flip.step):
            continue
        (present.add if flip.present else present.discard)(flip.key)
    return present


def unexplained(steps: Sequence[tuple[str, ItemState]], provenance: Provenance) -> dict[str, set[str]]:
    """{commit: repositories}: changes that moved a labelled figure with no provenance entry."""
    out: dict[str, set[str]] = {}
    for flip in flips(steps):
        if not provenance.knows(flip.step):
            out.setdefault(flip.step, set()).add(flip.repository)
    return out


class Figures(BaseModel):
    """One repository (or batch) at one point: found and in-scope counts, and proposals by outcome."""

    memoriesFound: int = 0
    memoriesClear: int = 0
    memoriesMatched: int = 0
    memoriesUnmatched: int = 0
    commitmentsFound: int = 0
    commitmentsClear: int = 0
    commitmentsMatched: int = 0
    commitmentsUnmatched: int = 0

    def __add__(self, other: Figures) -> Figures:
        return Figures(**{k: getattr(self, k) + getattr(other, k) for k in Figures.model_fields})

    @staticmethod
    def _ratio(num: int, den: int) -> float | None:
        return round(num / den, 4) if den else None

    def precision(self, kind: Literal["memories", "commitments"]) -> float | None:
        matched, unmatched = getattr(self, f"{kind}Matched"), getattr(self, f"{kind}Unmatched")
        return self._ratio(matched, matched + unmatched)

    def recall(self, kind: Literal["memories", "commitments"]) -> float | None:
        return self._ratio(getattr(self, f"{kind}Found"), getattr(self, f"{kind}Clear"))


def figures(present: Iterable[Key], scope: ItemState, repository: str) -> Figures:
    """Counts for `repository` from the proposals present; the items in scope come from `scope`."""
    keys = set(present)
    found = {i for _kind, _outcome, hits, _first in keys for i in hits}
    counts: dict[str, int] = {}
    for i, (kind, repo) in scope.items.items():
        if repo == repository:
            name = "memories" if kind == "memory" else "commitments"
            counts[f"{name}Clear"] = counts.get(f"{name}Clear", 0) + 1
            counts[f"{name}Found"] = counts.get(f"{name}Found", 0) + (i in found)
    for kind, outcome, _hits, _first in keys:
        if outcome != "borderline":
            field = ("memories" if kind == "memory" else "commitments") + ("Matched" if outcome == "matched" else "Unmatched")
            counts[field] = counts.get(field, 0) + 1
    return Figures(**counts)


def of_repository(state: ItemState, repository: str) -> set[Key]:
    return {k for k, repo in state.present().items() if repo == repository}


class RepositoryFigures(BaseModel):
    firstSeen: Figures
    heldOut: Figures
    now: Figures


def score_history(steps: Sequence[tuple[str, ItemState]], provenance: Provenance,
                  repositories: Sequence[str]) -> dict[str, RepositoryFigures]:
    """Per repository: first seen, held out and now (steps run from first seen to today's rules)."""
    now = steps[-1][1]
    changes = flips(steps)
    out: dict[str, RepositoryFigures] = {}
    for repo in repositories:
        out[repo] = RepositoryFigures(
            firstSeen=figures(of_repository(steps[0][1], repo), now, repo),
            heldOut=figures(held_out(steps, provenance, repo, changes), now, repo),
            now=figures(of_repository(now, repo), now, repo),
        )
    return out
