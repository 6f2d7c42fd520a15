"""`make bench SCALE_FROM=DIR`: the ingest and the answers on real-shaped homes of 1 GB and 5 GB.

A folder of real transcripts (default ../shared/real-transcripts; without one, the bundled samples,
and the output says so) is replicated with fresh ids into corpora of the sizes asked: every UUID,
message, request, tool-call and subagent id is remapped per copy and every other byte is kept, so
subagents, copied prompts, compactions and resumed sessions keep their real shapes. For each size:

* `cp -r` + `sync` of the corpus (the reference), twice;
* the full ingest: wall time, peak RSS, and its sessions, lines and usage rows against N x one copy;
* (1 GB) the same ingest killed with SIGKILL at 20 %, 50 % and 80 % of its time, then run again: the
  warehouse must equal the uninterrupted one (sessions, lines and usage rows, by row hashes);
* the no-op re-ingest, then re-ingests after the corpus grows by 5 % and by 10 % (more copies);
* `usage daily`, `sessions`, `search` over every session and `cache-report`: wall time and peak RSS;
* ccusage on the same files when `ccusage` is on the PATH (`npm install -g ccusage@20.0.24`).

Then the night (`--night-sessions`, default 2,000): `pipeline nightly --engine rules` over one copy of
the source, then over enough copies for that many sessions, each into a fresh warehouse and corpus.
For each: the night's wall time and its phases (ingest, plan, batches, apply, report, as the night
itself reports them), each batch's notebook time, and the peak RSS of every process of the night
(sampled from /proc every 0.2 s: the driver, the warm papermill server, each notebook it forks, git),
with the peak of the whole process tree at once. The report step is compared with the night's own
work (its batches and applies) at both sizes.

Results go to bench/out/real_scale.json. The corpora and warehouses are made in a scratch folder
(`--work`, default a temporary one) and removed at the end unless `--keep`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent
REPO = ROOT.parent
OUT = ROOT / "out"
DEFAULT_SOURCE = REPO.parent / "shared" / "real-transcripts"
SAMPLES = REPO / "data" / "samples"
PIPELINE = [sys.executable, "-m", "pipeline"]

_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_OPAQUE = re.compile(rb"\b((?:msg|req|toolu|call)_[A-Za-z0-9]{6,})")
# A Claude Code subagent's id (`agent-a47cb…`, `agent-acompact-…`, "agentId":"a47cb…"): unique per copy too.
_AGENT = re.compile(rb'((?:agent-(?:[a-z_]+-)?)|(?:"agentId":\s?"))(a?[0-9a-f]{16})')
_SPACE = uuid.UUID("3f0b9a52-8c1e-4d7a-9b61-2e5c7d4f8a90")


def _remap(data: bytes, k: int) -> bytes:
    data = _UUID.sub(lambda m: str(uuid.uuid5(_SPACE, f"{m.group(0).decode()}/{k}")).encode(), data)
    data = _OPAQUE.sub(lambda m: m.group(1) + b"c" + str(k).encode(), data)
    return _AGENT.sub(lambda m: m.group(1) + uuid.uuid5(_SPACE, f"{m.group(2).decode()}/{k}").hex[: len(m.group(2))].encode(), data)


def replicate(source: Path, out: Path, first: int, last: int) -> int:
    """Copies `first`..`last - 1` of every transcript under `source`, each copy in folders of its own
    (`<copy>/<path>`, names remapped as the contents are). Returns the bytes written."""
    files = sorted(p for p in source.rglob("*.jsonl") if p.is_file() and p.stat().st_size)
    written = 0
    for k in range(first, last):
        for path in files:
            rel = path.relative_to(source)
            dest = out / f"copy-{k:03d}" / _remap(str(rel).encode(), k).decode()
            dest.parent.mkdir(parents=True, exist_ok=True)
            data = _remap(path.read_bytes(), k)
            dest.write_bytes(data)
            written += len(data)
    return written


def measured(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, object]:
    """Wall seconds and peak RSS (MB) of one command, in a process of its own (GNU time); its
    output is dropped, its last error line kept when it fails."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as rss:
        start = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name, *cmd], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)
        seconds = time.perf_counter() - start
        peak = int((rss.read().strip().splitlines() or ["0"])[-1] or 0) / 1024
    return {"seconds": round(seconds, 2), "peakRssMb": round(peak), "exit": proc.returncode,
            "stderrTail": proc.stderr.strip().splitlines()[-1:] if proc.returncode else []}


def copy_seconds(corpus: Path, scratch: Path) -> float:
    target = scratch / "cp-reference"
    shutil.rmtree(target, ignore_errors=True)
    subprocess.run(["sync"], check=True)
    start = time.perf_counter()
    subprocess.run(["bash", "-c", f"cp -r '{corpus}' '{target}' && sync"], check=True)
    seconds = time.perf_counter() - start
    shutil.rmtree(target, ignore_errors=True)
    return round(seconds, 2)


def counts(db: Path) -> dict[str, int]:
    query = ("SELECT (SELECT count(*) FROM sessions) AS sessions, (SELECT count(*) FROM lines) AS lines, "
             "(SELECT count(*) FROM llm_calls WHERE source IN ('claude-code', 'codex')) AS usage")
    out = subprocess.run([*PIPELINE, "sql", query, "--json", "--db", str(db)], capture_output=True, text=True, cwd=REPO,
                         check=True)
    return {k: int(v) for k, v in json.loads(out.stdout)[0].items()}


# What an ingest stores, as sums of row hashes (order-free): two warehouses with the same sums hold the
# same sessions, lines and usage rows. Times of the ingest itself (ingested_at, rewritten_at) are left out.
FINGERPRINT = """
SELECT (SELECT count(*) FROM sessions), (SELECT sum(hash(session_id, path, format, parent_session_id, slug, cwd, prompts,
        turns, size_bytes, line_count, problems, first_at, last_at, tool_calls, harness_versions)) FROM sessions),
       (SELECT count(*) FROM lines), (SELECT sum(hash(session_id, line_no, text)) FROM lines),
       (SELECT count(*) FROM llm_calls), (SELECT sum(hash(call_id, source, session_id, "at", model, prompt_tokens,
        cached_tokens, cache_write_tokens, completion_tokens, cache_write_1h_tokens, line_no)) FROM llm_calls)
"""


def fingerprint(db: Path) -> list[str]:
    out = subprocess.run([*PIPELINE, "sql", FINGERPRINT, "--format", "csv", "--db", str(db)], capture_output=True, text=True,
                         cwd=REPO, check=True)
    return out.stdout.strip().splitlines()[-1].split(",")


def killed_ingests(corpus: Path, scratch: Path, reference: Path, full_seconds: float) -> list[dict[str, object]]:
    """kill -9 of an ingest at 20 %, 50 % and 80 % of an uninterrupted one's time, then the same ingest
    again to the end: the warehouse must equal the uninterrupted one (`reference`)."""
    want = fingerprint(reference)
    runs = []
    for share in (0.2, 0.5, 0.8):
        db = scratch / f"killed-{int(share * 100)}.duckdb"
        for leftover in scratch.glob(f"{db.name}*"):
            leftover.unlink()
        proc = subprocess.Popen([*PIPELINE, "ingest", str(corpus), "--db", str(db)], cwd=REPO, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(share * full_seconds)
        alive = proc.poll() is None
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        again = measured([*PIPELINE, "ingest", str(corpus), "--db", str(db)])
        runs.append({"killedAt": share, "wasRunning": alive, "rerun": again, "equalsUninterrupted": fingerprint(db) == want})
        for leftover in scratch.glob(f"{db.name}*"):
            leftover.unlink()
    return runs


def claude_home(corpus: Path, home: Path) -> Path:
    """A Claude config folder ccusage reads (`projects/<project>/…`) holding every Claude Code project of
    the corpus (each copy's `…/claude/projects/<project>`), hard-linked: no byte is copied."""
    shutil.rmtree(home, ignore_errors=True)
    for projects in corpus.glob("**/claude/projects"):
        tag = "__".join(projects.relative_to(corpus).parts[:-2])
        for path in projects.rglob("*.jsonl"):
            dest = home / "projects" / f"{tag}__{path.relative_to(projects)}"
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.link(path, dest)
    return home


def one_size(source: Path, gigabytes: float, scratch: Path, per_copy: int) -> dict[str, object]:
    copies = max(1, math.ceil(gigabytes * 1e9 / per_copy))
    corpus, db = scratch / f"corpus-{gigabytes:g}gb", scratch / f"w-{gigabytes:g}gb.duckdb"
    shutil.rmtree(corpus, ignore_errors=True)
    size = replicate(source, corpus, 0, copies)
    result: dict[str, object] = {"gigabytes": round(size / 1e9, 2), "copies": copies}
    result["cp"] = [copy_seconds(corpus, scratch) for _ in range(2)]
    ingest = measured([*PIPELINE, "ingest", str(corpus), "--db", str(db)])
    result["ingest"] = ingest
    one = scratch / "one.duckdb"
    if not one.exists():
        single = scratch / "one-copy"
        replicate(source, single, 0, 1)
        subprocess.run([*PIPELINE, "ingest", str(single), "--db", str(one)], capture_output=True, cwd=REPO)
    got, each = counts(db), counts(one)
    result["counts"] = got
    result["countsAreNTimesOneCopy"] = all(got[k] == copies * each[k] for k in got)
    if gigabytes <= 1.5:  # the interrupted ingests: at the first size only (each is a full ingest again)
        result["killed"] = killed_ingests(corpus, scratch, db, float(ingest["seconds"]))  # type: ignore[arg-type]
    result["noopReingest"] = measured([*PIPELINE, "ingest", str(corpus), "--db", str(db)])
    grown = copies
    for percent in (5, 10):
        more = max(1, math.ceil(copies * percent / 100))
        replicate(source, corpus, grown, grown + more)
        grown += more
        run = measured([*PIPELINE, "ingest", str(corpus), "--db", str(db)])
        run["addedCopies"] = more
        run["grownBy"] = round(more / (grown - more), 3)  # copies are whole: the growth actually made
        run["shareOfFullIngest"] = round(float(run["seconds"]) / float(ingest["seconds"]), 3)  # type: ignore[arg-type]
        # the goal: at most 1.5 x the growth's share of the full ingest, plus a second
        run["goalSeconds"] = round(1.5 * float(run["grownBy"]) * float(ingest["seconds"]) + 1, 2)  # type: ignore[arg-type]
        result[f"reingestPlus{percent}"] = run
    answers = {}
    for name, args in (("usage daily", ["usage", "daily", "--json"]), ("sessions", ["sessions", "--json"]),
                       ("search", ["search", "ModuleNotFoundError", "--json"]), ("cache-report", ["cache-report", "--json"])):
        answers[name] = [measured([*PIPELINE, *args, "--db", str(db)]) for _ in range(2)]
    result["answers"] = answers
    ccusage = shutil.which("ccusage")
    if ccusage:
        home = claude_home(corpus, scratch / "ccusage-home")
        env = {**os.environ, "CLAUDE_CONFIG_DIR": str(home)}
        result["ccusageDaily"] = {**measured([ccusage, "daily", "--json", "--offline"], env=env),
                                  "reads": "the Claude Code files of the same corpus (ccusage reads no Codex rollout)"}
        shutil.rmtree(home, ignore_errors=True)
    else:
        result["ccusageDaily"] = "ccusage is not on the PATH (npm install -g ccusage@20.0.24)"
    shutil.rmtree(corpus, ignore_errors=True)
    db.unlink(missing_ok=True)
    return result


def _role(proc: psutil.Process, root: int) -> str:
    """What a process of the night is: the driver, the warm papermill server it starts, a notebook the
    server forked (a batch's, the cache analysis', the report's: same command line, another parent),
    git, or what its command names."""
    if proc.pid == root:
        return "driver"
    try:
        cmd, parent = " ".join(proc.cmdline()), proc.ppid()
    except psutil.Error:
        return "other"
    if "papermill_server" in cmd:
        return "papermill server" if parent == root else "notebook"
    for marker, role in (("ipykernel", "notebook"), ("dask", "dask"), ("git", "git")):
        if marker in cmd:
            return role
    return Path(cmd.split()[0]).name if cmd else "other"


def night(corpus: Path, scratch: Path, name: str) -> dict[str, object]:
    """One `pipeline nightly --engine rules` over `corpus` into a fresh warehouse, corpus and runs
    folder, with the peak RSS of each of its processes sampled from /proc."""
    where = scratch / f"night-{name}"
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    cmd = [*PIPELINE, "nightly", "--source", str(corpus), "--engine", "rules", "--db", str(where / "w.duckdb"),
           "--corpus", str(where / "corpus"), "--runs", str(where / "runs"), "--json"]
    start = time.perf_counter()
    # Its output and progress go to files: a pipe nobody reads while it runs would fill and stop the night.
    out_file = (where / "night.json").open("w+", encoding="utf-8")
    log = (where / "night.err").open("w+", encoding="utf-8")
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=out_file, stderr=log, text=True)
    peaks: dict[int, tuple[str, int]] = {}
    tree_peak = 0
    root = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            members = [root, *root.children(recursive=True)]
        except psutil.Error:
            break
        total = 0
        for member in members:
            try:
                rss = member.memory_info().rss
                role = peaks[member.pid][0] if member.pid in peaks else _role(member, proc.pid)
            except psutil.Error:
                continue
            total += rss
            peaks[member.pid] = (role, max(rss, peaks.get(member.pid, ("", 0))[1]))
        tree_peak = max(tree_peak, total)
        time.sleep(0.2)
    proc.wait()
    seconds = time.perf_counter() - start
    out_file.seek(0)
    log.seek(0)
    out, err = out_file.read(), log.read()
    out_file.close()
    log.close()
    if proc.returncode not in (0, 1) or not out.strip():
        raise SystemExit(f"bench/real_scale.py: the night over {corpus} failed (exit {proc.returncode}): "
                         f"{err.strip().splitlines()[-1:] }")
    result = json.loads(out)
    batch_seconds = sorted(float(b["seconds"] or 0) for b in result["batches"])
    roles: dict[str, dict[str, int]] = {}
    for role, rss in peaks.values():
        entry = roles.setdefault(role, {"processes": 0, "peakRssMb": 0})
        entry["processes"] += 1
        entry["peakRssMb"] = max(entry["peakRssMb"], round(rss / 2**20))
    sessions = counts(where / "w.duckdb")["sessions"]
    shutil.rmtree(where, ignore_errors=True)
    return {
        "sessions": sessions, "exit": proc.returncode, "seconds": round(seconds, 1),
        "phaseSeconds": result.get("phaseSeconds", {}), "batches": len(batch_seconds),
        "applied": sum(1 for b in result["batches"] if b["status"] == "applied"),
        "memories": sum(int(b.get("memories") or 0) for b in result["batches"]),
        "batchSeconds": {"median": round(batch_seconds[len(batch_seconds) // 2], 2) if batch_seconds else None,
                         "p90": round(batch_seconds[int(len(batch_seconds) * 0.9)], 2) if batch_seconds else None,
                         "max": round(batch_seconds[-1], 2) if batch_seconds else None},
        "pendingAfter": result.get("pendingAfter"), "peakByRole": roles, "treePeakMb": round(tree_peak / 2**20),
    }


def nights(source: Path, scratch: Path, target: int) -> dict[str, object]:
    """The night over one copy of the source, then over enough copies for `target` sessions."""
    one = scratch / "night-source-one-copy"
    shutil.rmtree(one, ignore_errors=True)
    replicate(source, one, 0, 1)
    small = night(one, scratch, "one-copy")
    per_copy = int(small["sessions"])  # type: ignore[call-overload]
    if not per_copy:
        raise SystemExit(f"bench/real_scale.py: the night over one copy of {source} found no session")
    copies = max(1, math.ceil(target / per_copy))
    corpus = scratch / "night-source-at-scale"
    shutil.rmtree(corpus, ignore_errors=True)
    replicate(source, corpus, 0, copies)
    large = night(corpus, scratch, "at-scale")
    shutil.rmtree(corpus, ignore_errors=True)
    shutil.rmtree(one, ignore_errors=True)

    def share(n: dict[str, object]) -> float | None:
        # the night's own work: its batches and their applies
        phases = n["phaseSeconds"]
        work = float(phases.get("batches", 0)) + float(phases.get("apply", 0))  # type: ignore[attr-defined]
        return round(float(phases.get("report", 0)) / work, 3) if work else None  # type: ignore[attr-defined]

    return {"oneCopy": small, "atScale": {**large, "copies": copies},
            "reportShareOfWork": {"oneCopy": share(small), "atScale": share(large)}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", type=Path, default=None, help=f"real transcripts (default {DEFAULT_SOURCE})")
    ap.add_argument("--sizes", default="1,5", help="corpus sizes in GB, comma-separated (default 1,5; empty: the nights only)")
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("--night-sessions", type=int, default=2000,
                    help="sessions of the night at scale (default 2000; 0 skips the nights)")
    args = ap.parse_args()
    source = args.source or DEFAULT_SOURCE
    if not source.is_dir():
        print(f"bench/real_scale.py: no folder of real transcripts at {source}; the bundled samples are replicated "
              "instead (pass SCALE_FROM=DIR for real shapes)", file=sys.stderr)
        source = SAMPLES
    per_copy = sum(p.stat().st_size for p in source.rglob("*.jsonl") if p.is_file())
    scratch = args.work or Path(tempfile.mkdtemp(prefix="real-scale-"))
    scratch.mkdir(parents=True, exist_ok=True)
    report: dict[str, object] = {"source": str(source), "bytesPerCopy": per_copy, "sizes": []}
    try:
        for gigabytes in (float(x) for x in args.sizes.split(",") if x.strip()):
            row = one_size(source, gigabytes, scratch, per_copy)
            report["sizes"].append(row)  # type: ignore[attr-defined]
            ingest, cp = row["ingest"], min(row["cp"])  # type: ignore[type-var]
            print(f"{row['gigabytes']} GB ({row['copies']} copies): ingest {ingest['seconds']} s "  # type: ignore[index]
                  f"= {float(ingest['seconds']) / cp:.1f}x cp ({cp} s), peak {ingest['peakRssMb']} MB, "  # type: ignore[index]
                  f"counts = N x one copy: {row['countsAreNTimesOneCopy']}; no-op {row['noopReingest']['seconds']} s; "  # type: ignore[index]
                  + ", ".join(f"+{row[k]['grownBy']:.0%} {row[k]['seconds']} s (goal {row[k]['goalSeconds']} s)"  # type: ignore[index]
                              for k in ("reingestPlus5", "reingestPlus10")))
            for k in row.get("killed", []):  # type: ignore[attr-defined]
                print(f"    kill -9 at {k['killedAt']:.0%} (running: {k['wasRunning']}), run again in "
                      f"{k['rerun']['seconds']} s: equals the uninterrupted warehouse: {k['equalsUninterrupted']}")
            for name, runs in row["answers"].items():  # type: ignore[attr-defined]
                print(f"    {name}: " + ", ".join(f"{r['seconds']} s / {r['peakRssMb']} MB" for r in runs))
        if args.night_sessions:
            report["night"] = nights(source, scratch, args.night_sessions)
            for label, key in (("one copy", "oneCopy"), ("at scale", "atScale")):
                n = report["night"][key]  # type: ignore[index]
                phases = ", ".join(f"{k} {v} s" for k, v in n["phaseSeconds"].items())
                roles = ", ".join(f"{k} {v['peakRssMb']} MB (x{v['processes']})" for k, v in n["peakByRole"].items())
                print(f"night, {label}: {n['sessions']} sessions, {n['batches']} batches ({n['applied']} applied), "
                      f"{n['seconds']} s ({phases}); batch median {n['batchSeconds']['median']} s, p90 "
                      f"{n['batchSeconds']['p90']} s, max {n['batchSeconds']['max']} s; peak RSS {roles}; "
                      f"the whole tree {n['treePeakMb']} MB")
            print(f"    report / (batches + apply): {report['night']['reportShareOfWork']}")  # type: ignore[index]
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    OUT.mkdir(exist_ok=True)
    (OUT / "real_scale.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"written: {OUT / 'real_scale.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
