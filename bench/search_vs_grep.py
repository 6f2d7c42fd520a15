"""Check `pipeline search PHRASE` against `grep -rnF PHRASE` over the same files: the same (session, line)
pairs, and as many occurrences as `grep -oF` counts. Not a test (it reads a folder of real transcripts).

    .venv/bin/python bench/search_vs_grep.py DB FOLDER [PHRASE ...]

DB is a warehouse that ingested FOLDER (e.g. `pipeline ingest FOLDER --db /tmp/x.duckdb`); it also
times both, as a whole command each.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PHRASES = ["ModuleNotFoundError", "git status", "Exit code 1", "TODO", "的", "\\n", '"', "doesn't want to proceed",
           "import pytest", "rg -n", "é", "npm run build"]


def main() -> int:
    db, folder, *phrases = sys.argv[1:]
    exe = str(ROOT / ".venv" / "bin" / "pipeline")
    paths = {str(Path(r["path"]).resolve()): r["session_id"] for r in json.loads(subprocess.run(
        [exe, "sql", "SELECT session_id, path FROM sessions", "--json", "--db", db],
        capture_output=True, text=True, check=True).stdout)}
    failures = 0
    for phrase in phrases or PHRASES:
        t0 = time.perf_counter()
        out = subprocess.run([exe, "search", "--json", "--limit", "10000000", "--context", "0", "--db", db, "--", phrase],
                             capture_output=True, text=True, check=True).stdout
        t_ours = time.perf_counter() - t0
        result = json.loads(out)
        ours = {(h["sessionId"], h["line"]) for h in result["hits"]}
        t0 = time.perf_counter()
        grep = subprocess.run(["grep", "-arnF", "--include=*.jsonl", "--", phrase, folder], capture_output=True, text=True)
        t_grep = time.perf_counter() - t0
        theirs = set()
        for line in grep.stdout.split("\n")[:-1]:
            path, rest = line.split(".jsonl:", 1)  # -a: a file grep takes for binary is still read as text
            path, number = path + ".jsonl", rest.split(":", 1)[0]
            theirs.add((paths[str(Path(path).resolve())], int(number)))
        count = subprocess.run(["bash", "-c", 'grep -aroF --include=*.jsonl -- "$1" "$2" | wc -l', "_", phrase, folder],
                               capture_output=True, text=True, check=True).stdout.strip()
        same = ours == theirs and int(count) == result["total"]
        failures += not same
        print(f"{'same' if same else 'DIFFERENT'}  {phrase!r}: {len(ours)} lines / {result['total']} occurrences here, "
              f"{len(theirs)} lines / {count} occurrences by grep; search {t_ours:.2f} s, grep -rnF {t_grep:.2f} s")
        if not same:
            print(f"    only here: {sorted(ours - theirs)[:5]}  only grep: {sorted(theirs - ours)[:5]}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
