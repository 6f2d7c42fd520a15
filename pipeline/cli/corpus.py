"""Corpus verbs: apply, memories, tasks."""

from __future__ import annotations

import argparse
import sys

from pipeline import config
from pipeline.cli.main import add_db, add_json, add_wait, print_json
from pipeline.corpus import apply as apply_mod
from pipeline.corpus import review
from pipeline.errors import UsageError
from pipeline.warehouse import db


def _add_corpus(p: argparse.ArgumentParser) -> None:
    p.add_argument("--corpus", metavar="DIR", help="memory corpus (default data/corpus, env PIPELINE_CORPUS)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "apply", help="land a batch's artifact folder in the corpus and the warehouse",
        description="Checks the artifact's answer against the warehouse again, commits each accepted memory "
        "and task to the corpus, and watermarks the sessions the batch read. Applying the same folder "
        "twice does nothing the second time (exit 0).",
    )
    p.add_argument("artifact", metavar="ARTIFACT_DIR", help="the batch folder `pipeline consolidate` (or a night) wrote")
    p.add_argument("--confidence-floor", type=float, default=apply_mod.tasks.CONFIDENCE_FLOOR, metavar="X",
                   help="commitments below this confidence are dropped (default %(default)s)")
    add_db(p)
    add_wait(p)
    _add_corpus(p)
    add_json(p)
    p.set_defaults(func=cmd_apply)

    p = sub.add_parser("memories", help="list the memories in the corpus",
                       description="One line per memory, as the warehouse mirrors the corpus: id, kind, claim and "
                       "how many sessions back it (--json: also its path, commit and sessions).")
    add_db(p)
    add_json(p)
    p.set_defaults(func=cmd_memories)

    p = sub.add_parser(
        "tasks", help="list open tasks, or confirm / reject / close one",
        description="Tasks come from commitments in transcripts and wait in the corpus for review. "
        "`confirm` accepts a proposed task (or reopens a closed one), `reject` drops it, `done` closes it.",
    )
    p.add_argument("action", nargs="?", choices=("list", "confirm", "reject", "done"), default="list",
                   help="what to do (default list)")
    p.add_argument("task_id", nargs="?", metavar="ID", help="a task id from the listing, e.g. task-3ed08e4328")
    p.add_argument("--all", action="store_true", help="list tasks in every status, not only open ones")
    add_db(p)
    add_wait(p)
    _add_corpus(p)
    add_json(p)
    p.set_defaults(func=cmd_tasks)


def cmd_apply(args: argparse.Namespace) -> int:
    with db.write_session(args.db, wait=args.wait):
        result = apply_mod.apply(args.artifact, db=args.db, corpus=args.corpus, confidence_floor=args.confidence_floor)
    if args.json:
        print_json(result.to_json())
    else:
        w = sys.stderr.write
        if result.status == "already-applied":
            w(f"{args.artifact}: already applied ({result.artifact_id}); nothing to do\n")
        elif result.status == "applied":
            t = result.tasks
            w(f"applied {result.batch_id}: {len(result.memories_written)} memories written, "
              f"{len(result.memories_linked)} linked; tasks: {t.get('proposed', 0)} proposed, "
              f"{t.get('closed', 0) + t.get('doneAtOnce', 0)} done, "
              f"{t.get('droppedOther', 0) + t.get('droppedLowConfidence', 0)} dropped; "
              f"{len(result.watermarked)} sessions watermarked; corpus {config.corpus_path(args.corpus)}\n")
            if result.named_not_touched:
                w(f"not watermarked (named in readSessionIds but never searched or read): "
                  f"{', '.join(result.named_not_touched)}\n")
            for r in result.candidates_refused:
                w(f"candidate {r['candidate']} not written: {'; '.join(r['problems'])}\n")
        else:
            w(f"{args.artifact}: nothing landed: {result.reason}\n")
    return result.exit_code


def cmd_memories(args: argparse.Namespace) -> int:
    with db.reading(args.db) as con:
        rows = db.frame(con, 'SELECT m.memory_id, m.kind, m.claim, m.path, m."commit", '
                             "list(l.session_id ORDER BY l.session_id) AS sessions "
                             "FROM memories m LEFT JOIN memory_links l USING (memory_id) GROUP BY ALL ORDER BY m.path")
    entries = [{"id": r["memory_id"], "kind": r["kind"], "claim": r["claim"], "path": r["path"],
                "commit": r["commit"], "sessions": [s for s in r["sessions"] if s]} for r in rows.iter_rows(named=True)]
    if args.json:
        print_json(entries)
    else:
        for e in entries:
            sys.stdout.write(f"{e['id']}  [{e['kind']}] {e['claim']}  ({len(e['sessions'])} sessions)\n")
        sys.stderr.write(f"{len(entries)} memories\n")
    return 0


def cmd_tasks(args: argparse.Namespace) -> int:
    if args.action == "list":
        if args.task_id:
            raise UsageError(f"unexpected {args.task_id!r}: use `pipeline tasks confirm ID` or `pipeline tasks reject ID`")
        entries = review.list_tasks(db=args.db, include_closed=args.all)
        if args.json:
            print_json(entries)
        else:
            for t in entries:
                due = f" (due {t['dueHint']}{', overdue' if t['overdue'] else ''})" if t["dueHint"] else ""
                sys.stdout.write(f"{t['id']}  {t['status']:<9} {t['actor']:<5} {t['statement']}{due}\n")
            sys.stderr.write(f"{len(entries)} tasks\n")
        return 0
    if not args.task_id:
        raise UsageError(f"`pipeline tasks {args.action}` needs a task ID (see `pipeline tasks`)")
    with db.write_session(args.db, wait=args.wait):
        entry = review.set_status(args.task_id, {"confirm": "confirmed", "reject": "rejected", "done": "done"}[args.action],
                                  db=args.db, corpus=args.corpus)
    if args.json:
        print_json(entry)
    elif entry.get("unchanged"):
        sys.stderr.write(f"{entry['id']} was already {entry['status']}; nothing changed\n")
    else:
        sys.stderr.write(f"{entry['id']} is now {entry['status']}: {entry['statement']}\n")
    return 0
