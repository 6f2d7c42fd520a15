"""Corpus verbs: apply, memories, tasks."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipeline import config
from pipeline.cli.main import add_db, add_json, add_wait, print_json
from pipeline.corpus import apply as apply_mod
from pipeline.corpus import review
from pipeline.delivery import agent_files
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
        "memories", help="list memories by review state, keep one, take one back, or export them for agents",
        description="`pipeline memories` lists the memories the corpus holds, new ones (landed by a night, not yet "
        "reviewed) first, then kept ones (--status to pick one state, --all: also those taken back, with the "
        "reason). `pipeline memories keep ID [--why TEXT]` vouches for one: its file says `status: kept` from a "
        "`keep:` commit, and exports and agents see it as reviewed. `pipeline memories drop ID --why TEXT` takes "
        "one back: its file is removed in a `drop:` commit that records the reason, its evidence stays in the "
        "history, its sessions stay read, and later nights do not write the same claim again. "
        "`pipeline memories export --format agents-md|claude-md` prints (or, with --out FILE, writes into FILE "
        "between two marker lines, the rest of the file untouched) the kept memories as one line each, for "
        "an agent to load at the start of a session.",
    )
    p.add_argument("action", nargs="?", choices=("list", "keep", "drop", "export"), default="list",
                   help="what to do (default list)")
    p.add_argument("memory_id", nargs="?", metavar="ID", help="a memory id from the listing, e.g. error_pattern-3e32abcdb2cc")
    p.add_argument("--why", metavar="TEXT", help="drop: why the memory is taken back (required); keep: why it is worth "
                   "keeping (optional); goes in the commit")
    p.add_argument("--status", choices=("new", "kept", "dropped"), help="list only memories in this review state")
    p.add_argument("--all", action="store_true", help="list dropped memories too, with the reason")
    g = p.add_argument_group("export")
    g.add_argument("--format", choices=agent_files.FORMATS, dest="fmt",
                   help="agents-md: a section for AGENTS.md; claude-md: a file to import from CLAUDE.md with @path")
    g.add_argument("--project", metavar="P", help="only memories with a session in this project (slug, or the cwd)")
    g.add_argument("--out", metavar="FILE", help="write the section into FILE (created if missing; the rest of it "
                   "is kept byte for byte); without it the section goes to stdout and nothing is written")
    g.add_argument("--max-bytes", type=int, default=agent_files.DEFAULT_MAX_BYTES, metavar="N",
                   help="the section's size limit in bytes (default %(default)s): past it the least recently kept "
                   "memories are left out, and the section says how many")
    g.add_argument("--include-new", action="store_true", help="export memories not yet reviewed too, marked as such")
    add_db(p)
    add_wait(p)
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


EXPORT_FLAGS = (("fmt", "--format"), ("project", "--project"), ("out", "--out"), ("include_new", "--include-new"))


def cmd_memories(args: argparse.Namespace) -> int:
    from pipeline.console import shown  # a claim's control characters as escapes, never sent to the terminal

    if args.action != "export":
        stray = [flag for name, flag in EXPORT_FLAGS if getattr(args, name)]
        if args.max_bytes != agent_files.DEFAULT_MAX_BYTES:
            stray.append("--max-bytes")
        if stray:
            raise UsageError(f"{', '.join(stray)} belong to `pipeline memories export`")
    if args.action == "export":
        return _export(args)
    if args.action in ("keep", "drop"):
        if not args.memory_id:
            raise UsageError(f"`pipeline memories {args.action}` needs a memory ID (see `pipeline memories`)")
        if args.action == "drop" and args.why is None:
            raise UsageError(f"say why with --why: pipeline memories drop {args.memory_id} --why \"…\"")
        # a reviewer's one-row write: in place, rather than a copy of the whole warehouse (seconds at 5 GB)
        with db.write_session(args.db, wait=args.wait, in_place=True):
            if args.action == "keep":
                entry = review.keep_memory(args.memory_id, args.why, db=args.db, corpus=args.corpus)
            else:
                entry = review.drop_memory(args.memory_id, args.why, db=args.db, corpus=args.corpus)
        if args.json:
            print_json(entry)
        elif entry.get("unchanged"):
            state = "kept" if args.action == "keep" else "dropped"
            since = f" (commit {entry['commit'][:12]})" if entry.get("commit") else ""
            sys.stderr.write(f"{entry['id']} was already {state}{since}; nothing changed\n")
        elif args.action == "keep":
            sys.stderr.write(f"kept {entry['id']}: {shown(entry['claim'])}\n  commit {entry['commit'][:12]} (keep: …); "
                             "`pipeline memories export` now includes it\n")
        else:
            sys.stderr.write(f"dropped {entry['id']}: {shown(entry['claim'])}\n  commit {entry['commit'][:12]} "
                             f"(drop: …); its evidence stays in the corpus history\n")
        return 0
    if args.memory_id or args.why is not None:
        raise UsageError("`pipeline memories` lists; to review one: pipeline memories keep ID, or "
                         "pipeline memories drop ID --why TEXT")
    entries = review.list_memories(db=args.db, include_dropped=args.all, status=args.status)
    if args.json:
        print_json(entries)
        return 0
    for e in entries:
        if e["status"] == "dropped":
            sys.stdout.write(f"{e['id']}  dropped  {e['kind']}  {shown(e['claim'])}  (dropped: {shown(e['why'])})\n")
        else:
            sys.stdout.write(f"{e['id']}  {e['status']:<7}  {e['kind']}  {shown(e['claim'])}  "
                             f"({len(e['sessions'])} sessions)\n")
    counts = {s: sum(e["status"] == s for e in entries) for s in ("new", "kept", "dropped")}
    said = [f"{n} {s}" for s, n in counts.items() if n or s != "dropped"]
    hint = "; review: pipeline memories keep ID | drop ID --why TEXT" if counts["new"] else ""
    sys.stderr.write(f"{len(entries)} memories ({', '.join(said)}){hint}\n")
    return 0


def _export(args: argparse.Namespace) -> int:
    if args.memory_id or args.why is not None or args.status or args.all:
        raise UsageError("`pipeline memories export` takes --format, --project, --out, --max-bytes and --include-new")
    if not args.fmt:
        raise UsageError("say which file with --format agents-md (a section of AGENTS.md) or --format claude-md "
                         "(a file CLAUDE.md imports with @path)")
    result = agent_files.export(fmt=args.fmt, db=args.db, corpus=args.corpus, project=args.project, out=args.out,
                                max_bytes=args.max_bytes, include_new=args.include_new)
    if args.json:
        print_json({"format": args.fmt, "out": str(result.path) if result.path else None, "changed": result.changed,
                    "shown": result.shown, "leftOut": result.left_out,
                    "bytes": len(result.section.encode("utf-8")), "section": result.section})
        return 0
    if result.path is None:
        sys.stdout.write(result.section)
        return 0
    what = f"{result.shown} memories" + (f" ({result.left_out} left out by --max-bytes)" if result.left_out else "")
    verb = "wrote" if result.changed else "unchanged:"
    # Which corpus: a command not told where it is reads the demo's (data/corpus), and a section with no
    # memories from the wrong corpus would look like a right answer.
    sys.stderr.write(f"{verb} {result.path}: {what} from the corpus {config.corpus_path(args.corpus)}, "
                     f"{len(result.section.encode('utf-8'))} bytes between the markers\n")
    if args.fmt == "claude-md":
        sys.stderr.write(f"  Claude Code loads it when a CLAUDE.md has a line @{_import_path(Path(args.out))} "
                         "(written relative to the folder of that CLAUDE.md)\n")
    return 0


def _import_path(out: Path) -> str:
    """How a CLAUDE.md beside the `.claude` folder the file is in (else in the current folder) names it."""
    resolved = out.resolve()
    for parent in resolved.parents:
        if parent.name == ".claude":
            return resolved.relative_to(parent.parent).as_posix()
    try:
        return resolved.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return resolved.as_posix()


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
                where = f"  [{shown(t['project'])}]" if t.get("project") else ""
                sys.stdout.write(f"{t['id']}  {t['status']:<9} {t['actor']:<5} {shown(t['statement'])}{due}{where}\n")
            sys.stderr.write(f"{len(entries)} tasks\n")
        return 0
    if not args.task_id:
        raise UsageError(f"`pipeline tasks {args.action}` needs a task ID (see `pipeline tasks`)")
    with db.write_session(args.db, wait=args.wait, in_place=True):  # one row, as `memories keep`
        entry = review.set_status(args.task_id, {"confirm": "confirmed", "reject": "rejected", "done": "done"}[args.action],
                                  db=args.db, corpus=args.corpus)
    if args.json:
        print_json(entry)
    elif entry.get("unchanged"):
        sys.stderr.write(f"{entry['id']} was already {entry['status']}; nothing changed\n")
    else:
        sys.stderr.write(f"{entry['id']} is now {entry['status']}: {entry['statement']}\n")
    return 0
