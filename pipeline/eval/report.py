"""The report of an eval run: scores next to what the engine cost, beside the artifact folders.

`pipeline eval` writes three files into its `--out` folder, next to the batches' artifact folders:

* `eval.json`: the document `pipeline eval --json` prints;
* `report.md`: the scores (memories and commitments: proposed, matched, borderline only, unmatched,
  precision, recall), then per batch and in total the model calls, prompt, cached and completion
  tokens, the cached share and the cost, then every unmatched proposal and the warnings;
* `report.html`: the same page for a browser.

Costs come from the night report's pricing (`pipeline.nightly.report`), so an eval and a night
price the same calls the same way; a model without a listed price shows no cost rather than a guess.
The rules engine makes no model call: its cost is zero.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pipeline.consolidator.batch import BatchResult

__all__ = ["BatchCost", "batch_costs", "render_markdown", "totals", "write_report"]


class Evaluation(Protocol):
    """What the report reads of an eval run (`pipeline.eval.evaluate.Evaluation`)."""

    engine: str
    out_dir: Path
    gold: Any
    batches: list[BatchResult]
    score: Any
    warnings: list[str]
    by_repository: dict[str, Any]
    sessions_of: dict[str, int]

    @property
    def failed(self) -> Sequence[BatchResult]: ...

    def to_json(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class BatchCost:
    batch_id: str
    sessions: int
    outcome: str
    model: str | None
    calls: int
    prompt: int | None
    cached: int | None
    completion: int | None
    cached_share: float | None
    cost_usd: float | None


def _calls(folder: Path) -> int:
    path = folder / "llm_calls.jsonl"
    try:
        return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    except OSError:
        return 0


def batch_costs(evaluation: Evaluation) -> list[BatchCost]:
    """Tokens and cost of each batch of the run (from its run record and model-call log)."""
    from pipeline.nightly.report import _cost  # the night report's pricing, one place for both

    out = []
    for b in evaluation.batches:
        tokens = b.run.tokens
        model = b.run.model or b.manifest.model
        out.append(BatchCost(
            batch_id=b.manifest.batch_id, sessions=len(b.manifest.sessions), outcome=b.outcome, model=model,
            calls=_calls(b.out_dir), prompt=tokens.prompt, cached=tokens.cached, completion=tokens.completion,
            cached_share=b.run.cached_share, cost_usd=_cost(model, tokens.prompt, tokens.cached, tokens.completion),
        ))
    return out


def totals(costs: list[BatchCost]) -> dict[str, Any]:
    """Token and cost totals of a run; the cached share is over the batches that reported cached tokens."""
    prompt = sum(c.prompt or 0 for c in costs)
    known = [c for c in costs if c.cached is not None and c.prompt]
    cached_prompt = sum(c.prompt or 0 for c in known)
    priced = [c.cost_usd for c in costs if c.cost_usd is not None]
    return {
        "calls": sum(c.calls for c in costs),
        "prompt": prompt,
        "cached": sum(c.cached or 0 for c in known) if known else None,
        "completion": sum(c.completion or 0 for c in costs),
        "cachedShare": round(sum(c.cached or 0 for c in known) / cached_prompt, 4) if cached_prompt else None,
        "costUsd": round(sum(priced), 6) if priced else None,
        "unpricedBatches": sum(1 for c in costs if c.cost_usd is None),
    }


def _f(x: float | None, digits: int = 2) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _n(x: int | None) -> str:
    return "–" if x is None else f"{x:,}"


def _usd(x: float | None) -> str:
    return "no price" if x is None else f"${x:.4f}"


def _one_line(text: str, n: int = 200) -> str:
    one = " ".join(str(text).split()).replace("|", "\\|")
    return one if len(one) <= n else one[: n - 1] + "…"


def render_markdown(evaluation: Evaluation, costs: list[BatchCost], *, model: str | None, base_url: str | None) -> str:
    s = evaluation.score
    total = totals(costs)
    scope = "rules-detectable clear" if evaluation.engine == "rules" else "clear"
    lines = [
        f"# Eval: engine {evaluation.engine}" + (f", model {model}" if model else ""),
        "",
        f"- gold: `{evaluation.gold.path}` ({len(evaluation.gold.reviewed)} reviewed sessions)",
        f"- batches: {len(evaluation.batches)} ({len(evaluation.failed)} without an accepted answer)",
    ]
    if base_url:
        lines.append(f"- endpoint: `{base_url}`")
    lines += [
        f"- written: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        "",
        "## Scores",
        "",
        "| | proposed | matched | borderline only | unmatched | precision | recall | found |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, f, what in (("memories", s.memories, scope), ("commitments", s.commitments, "clear")):
        lines.append(f"| {name} | {f.proposed} | {f.matched} | {f.borderline_only} | {f.unmatched} | "
                     f"{_f(f.precision)} | {_f(f.recall)} | {f.found} of {f.clear} {what} |")
    if len(evaluation.by_repository) > 1:
        lines += ["", "### By repository", "",
                  "Each repository scored on its own reviewed sessions only. Today's rules have seen most of "
                  "these repositories: the held-out figures, with the changes written against each one taken "
                  "back, are `make eval-history`'s.", "",
                  "| repository | sessions | memories P | memories R | found | commitments P | commitments R | found |",
                  "|---|---:|---:|---:|---|---:|---:|---|"]
        for repo, sc in evaluation.by_repository.items():
            m, c = sc.memories, sc.commitments
            lines.append(f"| {_one_line(repo)} | {evaluation.sessions_of.get(repo, 0)} | {_f(m.precision)} | "
                         f"{_f(m.recall)} | {m.found} of {m.clear} | {_f(c.precision)} | {_f(c.recall)} | "
                         f"{c.found} of {c.clear} |")
    lines += [
        "",
        f"Labelled non-promises proposed as commitments: {s.falseCommitments} of {s.notCommitments}.",
        "",
        "## Cost",
        "",
        f"Model calls: {total['calls']}; prompt tokens {_n(total['prompt'])} (cached {_n(total['cached'])}, "
        f"cached share {_f(total['cachedShare'], 3)}); completion tokens {_n(total['completion'])}; "
        f"cost {_usd(total['costUsd'])}"
        + (f" ({total['unpricedBatches']} batch(es) without a price)" if total["unpricedBatches"] else "") + ".",
        "",
        "| batch | sessions | outcome | model | calls | prompt | cached | completion | cached share | cost |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c in costs:
        lines.append(f"| [{c.batch_id}]({c.batch_id}/) | {c.sessions} | {c.outcome} | {c.model or '–'} | {c.calls} | "
                     f"{_n(c.prompt)} | {_n(c.cached)} | {_n(c.completion)} | {_f(c.cached_share, 3)} | {_usd(c.cost_usd)} |")
    examples = s.unmatchedExamples
    if examples["memories"] or examples["commitments"]:
        lines += ["", "## Unmatched proposals (does the gold miss something?)", ""]
        for e in examples["memories"]:
            lines.append(f"- memory: {_one_line(e['claim'])}  \n  “{_one_line(e['quote'], 160)}” ({e['sessionId']})")
        for e in examples["commitments"]:
            flag = " **[a labelled not_commitment]**" if e.get("notCommitment") else ""
            lines.append(f"- commitment ({e.get('actor')}): {_one_line(e['statement'])}{flag}  \n"
                         f"  “{_one_line(e['quote'], 160)}” ({e['sessionId']})")
    if evaluation.warnings:
        lines += ["", "## Warnings", ""] + [f"- {_one_line(w, 400)}" for w in evaluation.warnings]
    return "\n".join(lines) + "\n"


def _html(markdown: str, title: str) -> str:
    """A plain HTML page of the report (headings, lists, tables, paragraphs; text escaped)."""
    from pipeline.templates import render

    blocks: list[tuple[str, Any]] = []
    table: list[list[str]] = []

    def flush() -> None:
        if table:
            blocks.append(("table", list(table)))
            table.clear()

    for raw in markdown.splitlines():
        line = raw.rstrip()
        if line.startswith("|"):
            cells = [c.strip().replace("\\|", "|") for c in line.strip("|").split(" | ")]
            if not all(set(c) <= set("-:") for c in cells):
                table.append(cells)
            continue
        flush()
        if line.startswith("## "):
            blocks.append(("h2", line[3:]))
        elif line.startswith("# "):
            blocks.append(("h1", line[2:]))
        elif line.startswith("- ") or line.startswith("  "):
            blocks.append(("p", line.strip()))
        elif line:
            blocks.append(("p", line))
    flush()
    style = ("body{font-family:sans-serif;max-width:72em;margin:2em auto}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}")
    return render("eval_report.html.j2", title=title, style=style, blocks=blocks).rstrip("\n") + "\n"


def write_report(evaluation: Evaluation, *, model: str | None = None, base_url: str | None = None) -> Path:
    """Write eval.json, report.md and report.html into the run's folder; returns report.md's path."""
    costs = batch_costs(evaluation)
    folder = evaluation.out_dir
    folder.mkdir(parents=True, exist_ok=True)
    markdown = render_markdown(evaluation, costs, model=model, base_url=base_url)
    doc = evaluation.to_json()
    _write(folder / "eval.json", json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    _write(folder / "report.md", markdown)
    _write(folder / "report.html", _html(markdown, f"eval {evaluation.engine}"))
    return folder / "report.md"


def _write(path: Path, text: str) -> None:
    """Write whole or not at all: a reader never sees half a report."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
