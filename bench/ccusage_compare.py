"""Compare `pipeline usage daily|session --json` with ccusage 20.0.24 on a folder of real transcripts.

Not a test: it needs ccusage (`npm install -g ccusage@20.0.24`, from the npm registry) and real
transcripts. ccusage finds logs by layout (`$CLAUDE_CONFIG_DIR/projects/<project>/<session>.jsonl`,
`$CODEX_HOME/sessions/**/*.jsonl`) and does not follow symbolic links, so the files are copied into that
layout in a scratch folder (removed afterwards); the pipeline ingests the same copies into a scratch
warehouse. Both run offline, in UTC. For each of Claude Code and Codex, per day and per session, it
prints every row whose tokens differ, the cost difference where both priced the row, and a summary;
`--json` prints the whole comparison.

    .venv/bin/python bench/ccusage_compare.py [../shared/real-transcripts] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CCUSAGE_VERSION = "20.0.24"
KINDS = ("inputTokens", "cacheCreationTokens", "cacheReadTokens", "outputTokens")


def lay_out(real: Path, scratch: Path) -> dict[str, int]:
    """Copy every transcript under `real` into ccusage's layout; returns the files per harness."""
    counts = {"claude": 0, "codex": 0}
    for f in sorted(real.rglob("*.jsonl")):
        rel = f.relative_to(real)
        owner, rest = rel.parts[0], "/".join(rel.parts[1:])
        if "claude/projects/" in rest:
            target = scratch / "claude" / "projects" / f"{owner}__{rest.split('claude/projects/', 1)[1]}"
            counts["claude"] += 1
        elif "codex/" in rest:
            target = scratch / "codex" / "sessions" / owner / f.name
            counts["codex"] += 1
        else:
            print(f"skipped (neither a Claude Code nor a Codex folder): {rel}", file=sys.stderr)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, target)
    return counts


def ccusage(harness: str, report: str, scratch: Path) -> dict[str, Any]:
    env = {**os.environ, "TZ": "UTC", "CLAUDE_CONFIG_DIR": str(scratch / "claude"), "CODEX_HOME": str(scratch / "codex")}
    cmd = ["ccusage", harness, report, "--json", "--offline", "--timezone", "UTC"]
    if harness == "claude":
        cmd.append("--breakdown")
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def pipeline_report(report: str, source: str, db: Path) -> dict[str, Any]:
    exe = ROOT / ".venv" / "bin" / "pipeline"
    cmd = [str(exe), "usage", report, "--source", source, "--tz", "UTC", "--json", "--db", str(db)]
    return json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)


def _theirs(row: dict[str, Any], key: str) -> tuple[str, dict[str, int], float | None, list[str]]:
    """A ccusage row as (key, tokens, cost, models); Claude and Codex reports name things differently."""
    tokens = {k: int(row.get(k, 0)) for k in KINDS}
    cost = row.get("totalCost", row.get("costUSD"))
    models = row.get("modelsUsed") or sorted(row.get("models") or {})
    if key == "sessionId" and "sessionFile" in row:  # Codex: the rollout's file name, whose tail is its id
        ident = row["sessionFile"].rsplit("-", 5)
        ident_s = "-".join(ident[1:]) if len(ident) == 6 else row["sessionFile"]
        return ident_s, tokens, cost, models
    return str(row.get(key) or row.get("date")), tokens, cost, models


def file_names(db: Path) -> dict[str, str]:
    """Each session's file name without `.jsonl`: how ccusage names a Claude Code session (the warehouse
    names it by the id its records carry, which a resumed file may not share with its name)."""
    exe = ROOT / ".venv" / "bin" / "pipeline"
    out = subprocess.run([str(exe), "sql", "SELECT session_id, path FROM sessions", "--json", "--db", str(db)],
                         capture_output=True, text=True, check=True).stdout
    return {r["session_id"]: Path(r["path"]).stem for r in json.loads(out)}


def compare(ours: dict[str, Any], theirs: dict[str, Any], kind: str, names: dict[str, str] | None = None) -> dict[str, Any]:
    our_rows = ours["daily" if kind == "daily" else "sessions"]
    key = "period" if kind == "daily" else "sessionId"
    mine = {(names or {}).get(r[key], r[key]): r for r in our_rows}
    other = {}
    for r in theirs["daily" if kind == "daily" else "sessions"]:
        k, tokens, cost, models = _theirs(r, "date" if kind == "daily" else "sessionId")
        other[k] = {"tokens": tokens, "cost": cost, "models": models}
    rows = []
    for k in sorted(set(mine) | set(other)):
        a, b = mine.get(k), other.get(k)
        row: dict[str, Any] = {"key": k, "ours": None, "ccusage": None}
        if a:
            row["ours"] = {"tokens": {t: a[t] for t in KINDS}, "cost": a["totalCost"], "models": a["modelsUsed"]}
        if b:
            row["ccusage"] = b
        row["tokensEqual"] = bool(a and b and row["ours"]["tokens"] == b["tokens"])
        if a and b and b["cost"] is not None:
            row["costDiff"] = a["totalCost"] - b["cost"]
        rows.append(row)
    return {
        "rows": rows,
        "rowsOurs": len(mine), "rowsCcusage": len(other),
        "tokensEqual": sum(r["tokensEqual"] for r in rows),
        "costWithinCent": sum(1 for r in rows if abs(r.get("costDiff", 1.0)) < 0.01),
        "totalsOurs": {t: ours["totals"][t] for t in (*KINDS, "totalCost")},
        "totalsCcusage": {t: theirs["totals"].get(t, 0) for t in KINDS} | {
            "totalCost": theirs["totals"].get("totalCost", theirs["totals"].get("costUSD"))},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("real", nargs="?", default=str(ROOT.parent / "shared" / "real-transcripts"))
    ap.add_argument("--json", action="store_true", help="print the whole comparison as JSON")
    args = ap.parse_args()
    version = subprocess.run(["ccusage", "--version"], capture_output=True, text=True, check=True).stdout.split()[-1]
    if version != CCUSAGE_VERSION:
        print(f"warning: ccusage {version}, the comparison was written for {CCUSAGE_VERSION}", file=sys.stderr)
    result: dict[str, Any] = {"ccusage": version}
    with tempfile.TemporaryDirectory(prefix="ccusage-compare-") as tmp:
        scratch = Path(tmp)
        result["files"] = lay_out(Path(args.real), scratch)
        db = scratch / "w.duckdb"
        subprocess.run([str(ROOT / ".venv" / "bin" / "pipeline"), "ingest", str(scratch), "--db", str(db)],
                       check=True, capture_output=True)
        names = file_names(db)
        for harness, source in (("claude", "claude-code"), ("codex", "codex")):
            for kind in ("daily", "session"):
                theirs = ccusage(harness, kind, scratch)
                ours = pipeline_report(kind, source, db)
                result[f"{source} {kind}"] = compare(ours, theirs, kind, names if harness == "claude" else None)
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
        return 0
    for name, c in result.items():
        if not isinstance(c, dict) or "rows" not in c:
            continue
        n = max(c["rowsOurs"], c["rowsCcusage"])
        print(f"== {name}: {c['rowsOurs']} rows here, {c['rowsCcusage']} in ccusage; tokens equal in {c['tokensEqual']}/{n}, "
              f"cost within $0.01 in {c['costWithinCent']}/{n}")
        print(f"   totals here    {c['totalsOurs']}")
        print(f"   totals ccusage {c['totalsCcusage']}")
        for r in c["rows"]:
            if r["tokensEqual"] and abs(r.get("costDiff", 0.0)) < 0.01:
                continue
            ours, theirs = r["ours"], r["ccusage"]
            what = []
            if not ours or not theirs:
                what.append("only in " + ("ccusage" if theirs else "the pipeline"))
            else:
                diff = {k: ours["tokens"][k] - theirs["tokens"][k] for k in KINDS if ours["tokens"][k] != theirs["tokens"][k]}
                if diff:
                    what.append(f"tokens here minus ccusage {diff}")
                if "costDiff" in r and abs(r["costDiff"]) >= 0.01:
                    what.append(f"cost ${ours['cost']:.4f} vs ${theirs['cost']:.4f}")
                what.append(f"models {ours['models']} / {theirs['models']}")
            print(f"   {r['key']}: {'; '.join(what)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
