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

    p = sub.add_parser(
        "memories", help="list the memories in the corpus, or take one back",
        description="`pipeline memories` lists the memories the corpus holds (--all: also those taken back, with "
        "the reason). `pipeline memories drop ID --why TEXT` takes one back: its file is removed in a `drop:` "
        "commit that records the reason, its evidence stays in the history, its sessions stay read, and later "
        "nights do not write the same claim again.",
    )
    p.add_argument("action", nargs="?", choices=("list", "drop"), default="list", help="what to do (default list)")
    p.add_argument("memory_id", nargs="?", metavar="ID", help="a memory id from the listing, e.g. error_pattern-3e32abcdb2cc")
    p.add_argument("--why", metavar="TEXT", help="drop: why the memory is taken back (required; goes in the commit)")
    p.add_argument("--all", action="store_true", help="list dropped memories too, with the reason")
    add_db(p)
    _add_corpus(p)
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
                what = f"candidate {r['candidate']}" if "candidate" in r else f"commitment {r.get('commitment')}"
                w(f"{what} not written: {'; '.join(r['problems'])}\n")
        else:
            w(f"{args.artifact}: nothing landed: {result.reason}\n")
    return result.exit_code


def cmd_memories(args: argparse.Namespace) -> int:
    if args.action == "drop":
        if not args.memory_id:
            raise UsageError("`pipeline memories drop` needs a memory ID (see `pipeline memories`)")
        if args.why is None:
            raise UsageError(f"say why with --why: pipeline memories drop {args.memory_id} --why \"…\"")
        entry = review.drop_memory(args.memory_id, args.why, db=args.db, corpus=args.corpus)
        if args.json:
            print_json(entry)
        elif entry.get("unchanged"):
            sys.stderr.write(f"{entry['id']} was already dropped (commit {entry['commit'][:12]}); nothing changed\n")
        else:
            from pipeline.console import shown

            sys.stderr.write(f"dropped {entry['id']}: {shown(entry['claim'])}\n  commit {entry['commit'][:12]} "
                             f"(drop: …); its evidence stays in the corpus history\n")
        return 0
    if args.memory_id or args.why is not None:
        raise UsageError("`pipeline memories` lists; to take a memory back: pipeline memories drop ID --why TEXT")
    entries = review.list_memories(db=args.db, include_dropped=args.all)
    if args.json:
        print_json(entries)
    else:
        from pipeline.console import (
            shown,  # a claim's control characters as escapes, never sent to the terminal
        )

        for e in entries:
            if e["status"] == "dropped":
                sys.stdout.write(f"{e['id']}  {e['kind']}  {shown(e['claim'])}  (dropped: {shown(e['why'])})\n")
            else:
                sys.stdout.write(f"{e['id']}  {e['kind']}  {shown(e['claim'])}  ({len(e['sessions'])} sessions)\n")
        kept = sum(e["status"] == "kept" for e in entries)
        gone = len(entries) - kept
        sys.stderr.write(f"{kept} memories" + (f", {gone} dropped" if args.all else "") + "\n")
    return 0


def cmd_tasks(args: argparse.Namespace) -> int:
    if args.action == "list":
        if args.task_id:
            raise UsageError(f"unexpected {args.task_id!r}: use `pipeline tasks confirm ID` or `pipeline tasks reject ID`")
        entries = review.list_tasks(db=args.db, include_closed=args.all)
        if args.json:
            print_json(entries)
        else:
            from pipeline.console import shown

            for t in entries:
                due = f" (due {t['dueHint']}{', overdue' if t['overdue'] else ''})" if t["dueHint"] else ""
                sys.stdout.write(f"{t['id']}  {t['status']:<9} {t['actor']:<5} {shown(t['statement'])}{due}\n")
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
