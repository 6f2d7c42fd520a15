"""Held-out figures for the rules engine: every rules commit since each labelled batch was first seen,
run on the same sessions and scored by today's scorer (`make eval-history`; pipeline/eval/held_out.py
says what "first seen", "held out" and "now" mean).

For each gold file's first-seen commit the transcripts are ingested and planned with that commit's own
code (its reading), and its engine run on them: the figures of the day. Every later commit that
changed the rules (`git log FIRST..HEAD -- pipeline/consolidator/rules`) is run on today's reading,
in a subprocess whose `pipeline` package is that commit's (`git archive`). Answers are kept under
--work by commit and reading, so a second run computes only new commits. A commit that moved a
labelled figure but has no entry in bench/eval/provenance.json stops the report with its name and
the repositories it moved: say what it was written against there.

Reads ../shared/real-transcripts by default (REAL=DIR); never part of `make test`.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RULES = ["pipeline/consolidator/rules", "pipeline/consolidator/rules.py"]  # the engine's home, before and after the layout move
GOLD = [ROOT / "bench/eval/real-dev.gold.jsonl", ROOT / "bench/eval/real-dev-2.gold.jsonl", ROOT / "bench/eval/real-dev-3.gold.jsonl"]


# -- worker side: runs with a commit's own `pipeline` package first on sys.path ----------------------------
def _worker_engine(db: str, plan_path: str, out: str) -> None:
    """That commit's rules engine over the planned batches (answers only: nothing applied)."""
    import duckdb

    try:
        from pipeline.consolidator.rules import engine
    except ImportError:  # before the layout move (2026-12-01) the engine was one module
        import pipeline.consolidator.rules as engine  # type: ignore[no-redef]
    plan = json.loads(Path(plan_path).read_text(encoding="utf-8"))
    con = duckdb.connect(db, read_only=True)
    params = inspect.signature(engine.build_answer).parameters
    answers: dict[str, Any] = {}
    errors: dict[str, str] = {}
    started = time.monotonic()
    for batch in plan["batches"]:
        ids = batch["sessions"]
        try:
            text = engine.read_batch(con, ids)
            # the engine's inputs grew over time (folders, parents); each commit gets what it asks for
            extra = {k: getattr(text, k) for k in ("slugs", "cwds", "parents") if k in params and hasattr(text, k)}
            runs = text.runs if hasattr(text, "runs") else text.failed_calls  # type: ignore[attr-defined]
            answers[batch["batch"]] = engine.build_answer(runs, text.messages, ids, **extra)
        except Exception as exc:  # an old engine that cannot read this warehouse: recorded per batch
            errors[batch["batch"]] = f"{type(exc).__name__}: {exc}"
    Path(out).write_text(json.dumps({"answers": answers, "errors": errors,
                                     "seconds": round(time.monotonic() - started, 1)}), encoding="utf-8")


def _worker_plan(db: str, golds: list[str], out: str) -> None:
    """That commit's batch planner over the labelled sessions its ingest knows."""
    import duckdb

    from pipeline.consolidator import tools
    from pipeline.nightly import planner

    con = duckdb.connect(db, read_only=True)
    have = {row[0] for row in con.execute("SELECT session_id FROM sessions").fetchall()}
    batches = []
    for gold in golds:
        reviewed = [r["sessionId"] for r in map(json.loads, Path(gold).read_text(encoding="utf-8").splitlines())
                    if r.get("type") == "reviewed"]
        # an early ingest named some files differently (2025 Codex rollouts): those sessions it could not score
        for b in planner.plan(tools.list_sessions(con, [s for s in reviewed if s in have])):
            batches.append({"gold": Path(gold).name, "batch": b.batch_id, "sessions": list(b.session_ids)})
    Path(out).write_text(json.dumps({"batches": batches}), encoding="utf-8")


# -- driver side ---------------------------------------------------------------------------------------
def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def _source(commit: str, work: Path) -> Path:
    """The commit's `pipeline` package, extracted once under work/src/COMMIT."""
    dest = work / "src" / commit
    if (dest / "pipeline").is_dir():
        return dest
    tmp = Path(tempfile.mkdtemp(dir=work, prefix=".src-"))
    archive = subprocess.run(["git", "archive", "--format=tar", commit, "pipeline"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tmp, filter="data")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(dest)
    return dest


def _in_commit(commit_src: Path, *args: str) -> None:
    """Run this script (or `-m pipeline`) with the commit's package first on the path."""
    env = {**os.environ, "PYTHONPATH": str(commit_src), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, *args], cwd=commit_src, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        last = ((done.stderr or done.stdout).strip().splitlines() or ["no output"])[-1]
        what = "its ingest" if args[:2] == ("-m", "pipeline") else "its engine"
        raise RuntimeError(f"{what} at {commit_src.name} failed: {last.strip()}")


def _fingerprint(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]


def _real_fingerprint(real: Path) -> str:
    files = sorted(str(p.relative_to(real)) + f":{p.stat().st_size}" for p in real.rglob("*.jsonl"))
    return _fingerprint(*files)


def _answers(commit: str, db: Path, plan: Path, reading: str, work: Path) -> Path:
    out = work / "answers" / f"{commit}-{reading}.json"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        src = _source(commit, work)
        tmp = out.with_suffix(".part")
        _in_commit(src, str(Path(__file__).resolve()), "--worker-engine", str(db), str(plan), str(tmp))
        tmp.rename(out)
    return out


def _first_seen_reading(commit: str, real: Path, golds: list[Path], work: Path) -> tuple[Path, Path, str]:
    """The transcripts as the first-seen commit read them: its own ingest and planner."""
    key = f"{commit}-{_real_fingerprint(real)}"
    db, plan = work / "readings" / f"{key}.duckdb", work / "readings" / f"{key}.plan.json"
    if not plan.exists():
        db.parent.mkdir(parents=True, exist_ok=True)
        db.unlink(missing_ok=True)
        src = _source(commit, work)
        _in_commit(src, "-m", "pipeline", "ingest", str(real), "--db", str(db))
        _in_commit(src, str(Path(__file__).resolve()), "--worker-plan", str(db), str(plan) + ".part", *map(str, golds))
        Path(str(plan) + ".part").rename(plan)
    return db, plan, key


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real", default=str(ROOT.parent / "shared" / "real-transcripts"))
    parser.add_argument("--gold", nargs="+", default=[str(g) for g in GOLD])
    parser.add_argument("--provenance", default=str(ROOT / "bench/eval/provenance.json"))
    parser.add_argument("--work", default=str(ROOT / "bench/out/eval-history"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", dest="json_out", default=str(ROOT / "bench/out/eval-history.json"))
    parser.add_argument("--show", metavar="JSON", help="print the figures a run wrote, and whether the rules changed since")
    parser.add_argument("--worker-engine", nargs=3, metavar=("DB", "PLAN", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--worker-plan", nargs="+", metavar="ARG", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker_engine:
        _worker_engine(*args.worker_engine)
        return 0
    if args.worker_plan:
        db, out, *golds = args.worker_plan
        _worker_plan(db, golds, out)
        return 0
    if args.show:
        return _show(Path(args.show))
    real = Path(args.real).resolve()  # the commits' own ingests run from their own folders
    if not real.is_dir():
        print(f"eval-history: no transcripts at {real}; pass REAL=DIR, the folder the gold files label "
              "(bench/eval/README.md)", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    from pipeline.errors import UsageError

    try:
        return _report(real, [Path(g) for g in args.gold], Path(args.provenance), Path(args.work).resolve(), args.jobs, Path(args.json_out))
    except (UsageError, RuntimeError, subprocess.CalledProcessError) as exc:
        print(f"eval-history: {exc}", file=sys.stderr)
        return 1


def _state_of(answers_path: Path, plan: dict[str, Any], gold_name: str, gold: Any, lines: Any, repository: dict[str, str],
              chance: Any = ()) -> Any:
    from pipeline.eval.evaluate import Proposal
    from pipeline.eval.held_out import item_state

    data = json.loads(answers_path.read_text(encoding="utf-8"))
    if data["errors"]:
        first = next(iter(data["errors"].items()))
        raise RuntimeError(f"{answers_path.name}: {len(data['errors'])} batch(es) failed, first {first[0]}: {first[1]}")
    batch_gold = {b["batch"]: b["gold"] for b in plan["batches"]}
    props = []
    for batch, answer in data["answers"].items():
        if batch_gold.get(batch) != gold_name:
            continue
        props += [Proposal("memory", c["claim"], tuple((e["sessionId"], e["quote"]) for e in c["evidence"]), batch_id=batch)
                  for c in answer.get("candidates", [])]
        props += [Proposal("commitment", c["statement"], tuple((e["sessionId"], e["quote"]) for e in c["evidence"]),
                           actor=c.get("actor"), batch_id=batch, resolved=c.get("resolved"))
                  for c in answer.get("commitments", [])]
    return item_state(gold, props, lines, repository, chance)


def _report(real: Path, golds: list[Path], provenance_path: Path, work: Path, jobs: int, json_out: Path) -> int:
    from pipeline.consolidator import tools
    from pipeline.eval.evaluate import _Lines, load_gold, repository_of
    from pipeline.eval.held_out import (
        FIRST_SEEN,
        READING,
        load_provenance,
        score_history,
        unexplained,
    )
    from pipeline.nightly import planner
    from pipeline.warehouse import db as warehouse

    provenance = load_provenance(provenance_path)
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    # Today's reading: this checkout's ingest and planner, once.
    today = work / "readings" / f"today-{_real_fingerprint(real)}.duckdb"
    today.parent.mkdir(parents=True, exist_ok=True)
    today.unlink(missing_ok=True)
    subprocess.run([sys.executable, "-m", "pipeline", "ingest", str(real), "--db", str(today)], cwd=ROOT, check=True,
                   capture_output=True)
    parsed = {g.name: load_gold(g) for g in golds}
    plan: dict[str, Any] = {"batches": []}
    with warehouse.reading(today) as con:
        lines = {name: _Lines(con, gold) for name, gold in parsed.items()}
        reviewed = sorted({s for gold in parsed.values() for s in gold.reviewed})
        paths = dict(con.execute("SELECT session_id, path FROM sessions WHERE session_id IN (SELECT unnest(?::VARCHAR[]))",
                                 [reviewed]).fetchall())
        for name, gold in parsed.items():
            for b in planner.plan(tools.list_sessions(con, gold.reviewed)):
                plan["batches"].append({"gold": name, "batch": b.batch_id, "sessions": list(b.session_ids)})
    repository = repository_of(paths)
    plan_path = work / "readings" / "today.plan.json"
    plan_path.write_text(json.dumps(plan), encoding="utf-8")
    reading = _fingerprint(plan_path.read_text(encoding="utf-8"), _real_fingerprint(real))

    head = _git("rev-parse", "--short", "HEAD").strip()
    chains: dict[str, list[str]] = {}
    for name in parsed:
        seen = provenance.firstSeen.get(name)
        if seen is None:
            raise RuntimeError(f"{provenance_path}: no firstSeen entry for {name}")
        later = _git("log", "--reverse", "--format=%h", f"{seen.commit}..HEAD", "--", *RULES).split()
        chains[name] = [seen.commit, *later]  # the last rules commit's rules are today's
    every = list(dict.fromkeys(c for chain in chains.values() for c in chain))
    print(f"eval-history: {len(every)} commits' rules on today's reading of {real} (answers kept in {work})", file=sys.stderr)
    def run(commit: str) -> Path | str:
        try:
            return _answers(commit, today, plan_path, reading, work)
        except RuntimeError as exc:
            return str(exc)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        done = dict(zip(every, pool.map(run, every), strict=True))
        runs = {c: p for c, p in done.items() if isinstance(p, Path)}
        for commit, why in done.items():
            if not isinstance(why, Path):
                # A commit whose engine does not even import (a rename whose imports the next commit fixed):
                # its changes are counted with the next commit that runs.
                print(f"eval-history: {commit} skipped, {why}", file=sys.stderr)
        chains = {name: [c for c in chain if c in runs or c == chain[0]] for name, chain in chains.items()}
        firsts = {name: pool.submit(_first_seen_reading, provenance.firstSeen[name].commit, real, golds, work) for name in parsed}
        first_answers = {}
        for name, fut in firsts.items():
            db, fplan, key = fut.result()
            first_answers[name] = (_answers(provenance.firstSeen[name].commit, db, fplan, key, work), fplan)

    report: dict[str, Any] = {"head": head, "rules": _git("log", "-1", "--format=%h", "--", *RULES).strip(),
                              "provenance": _fingerprint(provenance_path.read_text(encoding="utf-8")),
                              "real": str(real), "batches": {}}
    missing: dict[str, set[str]] = {}
    for name, gold in parsed.items():
        fpath, fplan = first_answers[name]
        first_plan = json.loads(fplan.read_text(encoding="utf-8"))
        repos = sorted({r for s in gold.reviewed if (r := repository.get(s))})
        chance = provenance.chance.get(name, {})

        def history(chance: Any, name: str = name, gold: Any = gold, first: tuple[Path, Any] = (fpath, first_plan),
                    repos: list[str] = repos) -> dict[str, Any]:
            """The batch's steps scored, first seen to today's rules (called at once, in this iteration)."""
            steps = [(FIRST_SEEN, _state_of(first[0], first[1], name, gold, lines[name], repository, chance))]
            for i, commit in enumerate(chains[name]):
                steps.append((READING if i == 0 else commit,
                              _state_of(runs[commit], plan, name, gold, lines[name], repository, chance)))
            for commit, moved in unexplained(steps, provenance).items():
                missing.setdefault(commit, set()).update(moved)
            return score_history(steps, provenance, repos)

        rows = history(chance)  # matches the project's commits called chance left out: the figures
        report["batches"][name] = {"firstSeen": provenance.firstSeen[name].commit, "commits": chains[name][1:],
                                   "chance": sorted(chance), "total": _total(rows),
                                   # the same with them counted, as `pipeline eval` counts them
                                   "totalChanceCounted": _total(history(())) if chance else _total(rows),
                                   "repositories": {r: v.model_dump() for r, v in rows.items()}}
    if missing:
        for commit, moved in sorted(missing.items()):
            subject = _git("show", "-s", "--format=%s", commit).strip()[:100]
            print(f"eval-history: {commit} ({subject}) moved labelled figures of {', '.join(sorted(moved))}, and "
                  f"{provenance_path} does not say what it was written against", file=sys.stderr)
        return 1
    json_out.parent.mkdir(parents=True, exist_ok=True)
    json_out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(render(report))
    print(f"\n{len(every)} commits in {time.monotonic() - started:.0f} s; figures in {json_out}")
    return 0


def _show(path: Path) -> int:
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"eval-history: cannot read {path}: {exc}", file=sys.stderr)
        return 1
    print(render(report))
    rules = _git("log", "-1", "--format=%h", "--", *RULES).strip()
    if rules != report.get("rules"):
        print(f"\nmeasured with the rules of {report.get('rules')}; they changed since ({rules}): make eval-history "
              "brings these figures up to date")
    provenance = ROOT / "bench/eval/provenance.json"
    if provenance.exists() and _fingerprint(provenance.read_text(encoding="utf-8")) != report.get("provenance"):
        print(f"\n{provenance.relative_to(ROOT)} changed since these figures were measured: make eval-history "
              "brings them up to date")
    return 0


def _total(rows: dict[str, Any]) -> dict[str, Any]:
    from pipeline.eval.held_out import Figures

    return {k: sum((getattr(r, k) for r in rows.values()), Figures()).model_dump() for k in ("firstSeen", "heldOut", "now")}


def _cell(f: dict[str, int], kind: str) -> str:
    matched, unmatched = f[f"{kind}Matched"], f[f"{kind}Unmatched"]
    found, clear = f[f"{kind}Found"], f[f"{kind}Clear"]
    p = f"{matched / (matched + unmatched):.2f}" if matched + unmatched else "–"
    r = f"{found / clear:.2f}" if clear else "–"
    return f"{p:>4}/{r:<4} {found:>2}/{clear:<2}"


def render(report: dict[str, Any]) -> str:
    """One block per batch: each repository's first-seen, held-out and now figures (P/R found/clear)."""
    out = []
    for name, batch in report["batches"].items():
        chance = (f"; {len(batch['chance'])} matches the project's commits called chance find nothing"
                  if batch.get("chance") else "")
        out += ["", f"== {name}: first seen at {batch['firstSeen']}, {len(batch['commits'])} rules commits since{chance}",
                f"{'':44} {'memories P/R (found)':^50}   {'commitments P/R (found)':^50}",
                f"{'':44} {'first seen':>15} {'held out':>15} {'now':>15}   {'first seen':>15} {'held out':>15} {'now':>15}"]
        rows = [*batch["repositories"].items(), ("all repositories", batch["total"])]
        if batch.get("chance"):
            rows.append((f"all, {len(batch['chance'])} chance matches counted", batch["totalChanceCounted"]))
        for repo, figs in rows:
            mem = " ".join(f"{_cell(figs[k], 'memories'):>15}" for k in ("firstSeen", "heldOut", "now"))
            com = " ".join(f"{_cell(figs[k], 'commitments'):>15}" for k in ("firstSeen", "heldOut", "now"))
            out.append(f"{repo[:44]:44} {mem}   {com}")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
