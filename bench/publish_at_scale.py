"""What a small write's publish costs on a 5 GB warehouse, and on a prototype of the design that
would make it proportional to the change. Called by `bench/run.py` (prints one JSON object).

    .venv/bin/python bench/publish_at_scale.py BENCH_DB [--gb 5]

The 5 GB warehouse is grown from the bench warehouse (its sessions, lines and usage rows repeated
under new session ids) once, and reused while bench/out/ keeps it.

Today's design copies the whole working file at every publish (pipeline/warehouse/publish.py). The
prototype splits the warehouse in two: the `lines` of earlier ingests stay in a sealed file that
is never written again (here: the grown warehouse itself, attached read-only), and everything a
writing command changes (sessions, usage, runs, memories, watermarks, tasks) lives in a small head
file with the same working-file-and-rename publish as today. A small write then copies the head
only; an ingest would add a new sealed file of its new lines (a copy the size of the change) and name
it in the head. The prototype measures that publish, and that a read of 200 lines through the head
costs what it costs today.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import duckdb
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "out"
sys.path.insert(0, str(ROOT.parent))

from pipeline.warehouse import db as warehouse  # noqa: E402
from pipeline.warehouse import publish  # noqa: E402

GROWN_TABLES = ("sessions", "lines", "llm_calls")


def grow(source: Path, target: Path, gb: float) -> int:
    """A copy of `source` repeated until its file is at least `gb` GB; returns the rounds added."""
    marker = target.with_name(target.name + ".complete")
    if marker.exists() and target.exists() and target.stat().st_size >= gb * 1e9:
        return int(marker.read_text())
    for p in target.parent.glob(target.name + "*"):
        if p.is_file():
            p.unlink()
    shutil.copyfile(source, target)
    rounds = 0
    with warehouse.write_session(target), warehouse.writing(target) as con:
        con.execute("SET preserve_insertion_order = false")
        originals = con.execute("SELECT count(*) FROM sessions").fetchall()[0][0]
        while publish.Files(target).work.stat().st_size < gb * 1e9:
            rounds += 1
            suffix = f"~grown{rounds}"
            con.execute("BEGIN")
            con.execute("INSERT INTO sessions SELECT * REPLACE (session_id || ? AS session_id, path || ? AS path) "
                        "FROM sessions WHERE NOT contains(session_id, '~grown')", [suffix, suffix])
            con.execute("INSERT INTO lines SELECT session_id || ?, line_no, text FROM lines "
                        "WHERE NOT contains(session_id, '~grown')", [suffix])
            con.execute("INSERT INTO llm_calls SELECT * REPLACE (call_id || ? AS call_id, session_id || ? AS session_id) "
                        "FROM llm_calls WHERE NOT contains(session_id, '~grown')", [suffix, suffix])
            con.execute("COMMIT")
            con.execute("CHECKPOINT")
            print(f"grown: {rounds} rounds of {originals} sessions, "
                  f"{publish.Files(target).work.stat().st_size / 1e9:.2f} GB", file=sys.stderr)
    marker.write_text(str(rounds))
    return rounds


def small_write(db: Path) -> dict[str, float | str]:
    """The smallest writing command that changes something, timed: lock, check, copy the published file
    into a working file, write, publish (a rename). Timed after a write that published, as every write
    after one is (the first of the two may find a working file left by an older version)."""
    for _ in range(2):
        t0 = time.perf_counter()
        with warehouse.write_session(db) as session, warehouse.writing(db) as con:
            con.execute("INSERT INTO runs (run_id, status) VALUES (?, 'bench')", [f"bench-{time.time_ns()}"])
            work_bytes = publish.Files(db).work.stat().st_size
    return {"small_write_s": time.perf_counter() - t0, "publish_s": session.concurrency_seconds,
            "copy_s": session.copy_seconds, "rename_s": session.publish_seconds,
            "copy_method": session.copy_method, "work_bytes": work_bytes}


def prototype(big: Path) -> dict[str, float | int]:
    """The split design on the same data: a head file holding every table but `lines`, the 5 GB file
    as the sealed segment. A small write to the head, then its publish (copy, fsync, rename), timed."""
    head = OUT / "proto-head.duckdb"
    for p in OUT.glob("proto-head.duckdb*"):
        p.unlink()
    con = duckdb.connect()
    con.execute("ATTACH ? AS big (READ_ONLY)", [str(big)])
    con.execute("ATTACH ? AS head", [str(head)])
    tables = [r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = 'big' AND table_name <> 'lines'").fetchall()]
    for name in tables:  # the package's own table names, never user input
        con.execute(f'CREATE TABLE head."{name}" AS SELECT * FROM big."{name}"')
    con.close()

    files = publish.Files(head)
    shutil.copyfile(head, files.work)
    samples = []
    for i in range(5):
        t0 = time.perf_counter()
        w = duckdb.connect(str(files.work))
        w.execute("INSERT INTO runs (run_id, status) VALUES (?, 'bench')", [f"proto-{i}"])
        w.execute("CHECKPOINT")
        w.close()
        publish._copy(files.work, files.publishing)
        os.replace(files.publishing, head)
        publish.fsync_dir(head.parent, strict=True)
        samples.append(time.perf_counter() - t0)

    # An ingest in that design seals its new lines in a file of their own: here 1 % of the lines (the
    # sessions, drawn by a hash of their ids), written, checkpointed, fsynced, renamed, then the head published.
    seg2 = OUT / "proto-seg2.duckdb"
    for p in OUT.glob("proto-seg2.duckdb*"):
        p.unlink()
    w = duckdb.connect()
    w.execute("ATTACH ? AS big (READ_ONLY)", [str(big)])
    # The new lines as an ingest holds them (in memory, parsed); fetching them is not timed.
    new = w.sql("SELECT * FROM big.lines WHERE session_id IN (SELECT session_id FROM big.sessions "
                    "ORDER BY hash(session_id) LIMIT (SELECT count(*) // 100 FROM big.sessions))").to_arrow_table()
    w.close()
    t0 = time.perf_counter()
    w = duckdb.connect()
    w.execute("ATTACH ? AS seg (ROW_GROUP_SIZE 2048)", [str(seg2) + ".tmp"])
    w.register("new_lines", new)
    w.execute("CREATE TABLE seg.lines AS SELECT * FROM new_lines")
    w.execute("CHECKPOINT seg")
    new_lines = (new.num_rows, pc.sum(pc.binary_length(new.column("text"))).as_py())
    w.close()
    with open(str(seg2) + ".tmp", "rb+") as fh:
        os.fsync(fh.fileno())
    os.replace(str(seg2) + ".tmp", seg2)
    publish._copy(head, files.publishing)
    os.replace(files.publishing, head)
    publish.fsync_dir(head.parent, strict=True)
    ingest_publish_s = time.perf_counter() - t0
    seg2_bytes = seg2.stat().st_size
    seg2.unlink()

    # A reader opens the head and the sealed segment; a read of 200 lines goes to the segment.
    reader = duckdb.connect()
    reader.execute("ATTACH ? AS head (READ_ONLY)", [str(head)])
    reader.execute("ATTACH ? AS seg1 (READ_ONLY)", [str(big)])
    sid, n = reader.execute("SELECT session_id, line_count FROM head.sessions ORDER BY size_bytes DESC LIMIT 1").fetchall()[0]
    sql = ("SELECT line_no, text FROM seg1.lines WHERE session_id = ? AND line_no BETWEEN ? AND ? ORDER BY line_no")
    reads = []
    for _ in range(21):
        t0 = time.perf_counter()
        reader.execute(sql, [sid, n // 2, n // 2 + 199]).fetchall()
        reads.append(time.perf_counter() - t0)
    reader.close()
    out = {"proto_head_bytes": head.stat().st_size, "proto_segment_bytes": big.stat().st_size,
           "proto_small_write_publish_s": statistics.median(samples),
           "proto_read_200_ms": statistics.median(reads) * 1000,
           "proto_ingest_1pct_s": ingest_publish_s, "proto_ingest_1pct_bytes": seg2_bytes,
           "proto_ingest_1pct_text_bytes": int(new_lines[1] or 0)}
    for p in OUT.glob("proto-head.duckdb*"):
        p.unlink()
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("bench_db", type=Path)
    ap.add_argument("--gb", type=float, default=5.0)
    args = ap.parse_args()
    big = OUT / "big.duckdb"
    t0 = time.perf_counter()
    rounds = grow(args.bench_db, big, args.gb)
    grown_s = time.perf_counter() - t0
    results: dict[str, object] = {"big_bytes": big.stat().st_size, "big_rounds": rounds, "big_built_s": grown_s}
    results.update(small_write(big))
    # While a writer runs, its working file is a second copy; the publish renames it, adding none.
    results["big_work_bytes"] = results.pop("work_bytes")
    results["big_extra_disk_peak_bytes"] = results["big_work_bytes"]
    results.update(prototype(big))
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
