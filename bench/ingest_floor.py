"""How far a different store for `lines` could take the ingest: the full ingest of the bench corpus
beside the same ingest with the lines not stored at all, with them stored as cheaply as bytes can be
(verbatim), and beside reading and splitting the files alone, against `cp -r` + `sync`.

Not part of `make bench`: it writes warehouses no one should use (the `no-lines` one has no lines).
It answers one question for issue 23's first goal (ingest <= 4x the copy): how much of the ingest is
storing the lines, and is the rest under the goal? Run it after `make bench` has built the corpus:

    .venv/bin/python bench/ingest_floor.py [--rounds 3]

Modes, each in a fresh process, as the CLI runs:
  full         the ingest as shipped, publish included
  no-lines     the same, with every statement that writes `lines` skipped (projection, fold,
               sessions, usage rows, commit and publish unchanged)
  raw-segment  a prototype of the cheapest store there is: the lines' bytes appended verbatim to one
               segment file beside the warehouse by a writer thread (fsynced before the publish),
               and a row of (session_id, line_no, offset, length) per line in a `line_offsets`
               table, instead of the text in `lines`; 200 lines are then read back from it
  lines-only   the ingest as shipped with no JSON parsed: the projection returns no rows, so nothing
               is folded into sessions or usage rows; the lines are stored, committed and published
               as in `full` (what storing the text in the warehouse costs with nothing else to do)
  read-only    discover, read in chunks and split into Arrow lines; nothing parsed, nothing stored
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from run import CORPUS, OUT, copy_reference  # bench/run.py: the corpus and the copy it is measured against

SCRATCH = OUT / "floor"
MODES = ("full", "no-lines", "lines-only", "raw-segment", "read-only")


class _WithoutLines:
    """A connection that passes everything through except the statements that write `lines`."""

    def __init__(self, con: Any) -> None:
        self._con = con

    def execute(self, sql: str, *args: Any, **kw: Any) -> Any:
        if sql.lstrip().upper().startswith("INSERT INTO LINES"):
            return self._con
        return self._con.execute(sql, *args, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


class _RawSegment(_WithoutLines):
    """A connection whose `lines` writes go to a segment file of verbatim bytes and an offsets table."""

    def __init__(self, con: Any, segment: Path) -> None:
        super().__init__(con)
        self._registered: dict[str, Any] = {}
        self._fd = os.open(segment, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._at = 0
        # A writer thread: a write() that waits on the disk must not stall the parsing (4 batches of
        # 64 MB queued at most, a bound on memory).
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=4)
        self._writer = threading.Thread(target=self._write_all, name="segment-writer")
        self._writer.start()
        con.execute("CREATE TABLE line_offsets (session_id VARCHAR, line_no BIGINT, off BIGINT, len INTEGER)")

    def register(self, name: str, table: Any) -> Any:
        self._registered[name] = table
        return self._con.register(name, table)

    def execute(self, sql: str, *args: Any, **kw: Any) -> Any:
        if sql.lstrip().upper().startswith("INSERT INTO LINES"):
            self._store(self._registered["_ingest_batch"])
            return self._con
        return self._con.execute(sql, *args, **kw)

    def _store(self, batch: Any) -> None:
        import numpy as np
        import pyarrow as pa

        offsets = []
        for chunk in batch.column("text").chunks:
            n = len(chunk)
            if chunk.type == pa.string_view():  # a view per line into the chunk's bytes, lines contiguous
                lengths = np.frombuffer(chunk.buffers()[1], dtype=np.int32).reshape(-1, 4)[chunk.offset:chunk.offset + n, 0]
                end = int(lengths.sum()) + n
                self._queue.put(memoryview(chunk.buffers()[2])[:end])
            else:  # lines the split decoded with replacement characters: their text, not the file's bytes
                encoded = [t.encode() for t in chunk.to_pylist()]
                raw = b"\n".join(encoded) + b"\n"
                lengths = np.array([len(e) for e in encoded], dtype=np.int32)
                self._queue.put(raw)
                end = len(raw)
            starts = np.empty(n, dtype=np.int64)
            starts[0] = self._at
            np.cumsum(lengths[:-1].astype(np.int64) + 1, out=starts[1:])
            starts[1:] += self._at
            offsets.append((starts, lengths))
            self._at += end
        table = pa.table({
            "session_id": batch.column("session_id").cast(pa.string()), "line_no": batch.column("line_no"),
            "off": pa.array(np.concatenate([o for o, _ in offsets])),
            "len": pa.array(np.concatenate([n for _, n in offsets])),
        })
        self._con.register("_offsets", table)
        self._con.execute("INSERT INTO line_offsets SELECT * FROM _offsets")
        self._con.unregister("_offsets")

    def _write_all(self) -> None:
        while (data := self._queue.get()) is not None:
            while data:
                data = data[os.write(self._fd, data):]

    def seal(self) -> None:
        self._queue.put(None)
        self._writer.join()
        os.fsync(self._fd)
        os.close(self._fd)


def read_back(db: Path, segment: Path, rounds: int = 200) -> float:
    """Median ms to read 200 lines of the largest session from the raw segment (as `pipeline read`)."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    sid, most = con.execute(
        "SELECT session_id, max(line_no) FROM line_offsets GROUP BY ALL ORDER BY 2 DESC LIMIT 1").fetchall()[0]
    took = []
    with open(segment, "rb") as fh:
        for i in range(rounds):
            first = 1 + (i * 997) % max(1, most - 200)
            start = time.perf_counter()
            lo, hi = con.execute(
                "SELECT min(off), max(off + len) FROM line_offsets WHERE session_id = ? AND line_no BETWEEN ? AND ?",
                [sid, first, first + 199]).fetchall()[0]
            texts = os.pread(fh.fileno(), hi - lo, lo).split(b"\n")
            assert len(texts) == 200
            took.append((time.perf_counter() - start) * 1000)
    return statistics.median(took)


def run_mode(mode: str, db: Path) -> dict[str, float]:
    """One mode, in this process; returns its wall and CPU seconds and peak RSS."""
    start = time.perf_counter()
    from pipeline.warehouse import db as warehouse
    from pipeline.warehouse import ingest

    if mode == "read-only":
        n = 0
        for path in ingest.discover([CORPUS]):
            for data, end, _held in ingest._chunks(path, 0):
                if end:
                    n += len(ingest._split(data, end)[0])
    elif mode == "raw-segment":
        from pipeline.warehouse.writeback import background_writeback

        with warehouse.writing(db) as con:
            store = _RawSegment(con, db.with_suffix(".segment"))
            # Its pages written while the ingest goes on, as the warehouse file's are.
            with background_writeback(db.with_suffix(".segment")):
                report = ingest.ingest(store, [CORPUS])  # type: ignore[arg-type]
            store.seal()
        n = report.new_lines
    else:
        if mode == "lines-only":
            import polars as pl

            from pipeline.warehouse import derive

            # An empty projection: `fold` returns at once, and nothing but the lines is derived.
            derive.project = lambda *_a, **_k: pl.DataFrame({"session_id": pl.Series([], dtype=pl.String)})
        with warehouse.writing(db) as con:
            report = ingest.ingest(_WithoutLines(con) if mode == "no-lines" else con, [CORPUS])  # type: ignore[arg-type]
        n = report.new_lines
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"wall_s": time.perf_counter() - start, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_mb": usage.ru_maxrss / 1024, "lines": n}


def _child(mode: str) -> dict[str, float]:
    db = SCRATCH / f"{mode}.duckdb"
    for old in SCRATCH.glob(f"{mode}.duckdb*"):
        shutil.rmtree(old) if old.is_dir() else old.unlink()
    subprocess.run(["sync"], check=True)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--mode", mode, "--db", str(db)],
                          check=True, capture_output=True, text=True)
    figures = json.loads(done.stdout)
    figures["process_s"] = time.perf_counter() - start  # imports and interpreter start included, as the CLI
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(run_mode(args.mode, args.db)))
        return 0
    if not (CORPUS / ".complete").exists():
        print(f"ingest_floor: no bench corpus at {CORPUS}; run `make bench` first, which builds it", file=sys.stderr)
        return 2
    SCRATCH.mkdir(parents=True, exist_ok=True)
    # The copy as `make bench` measures it (three in a row before any ingest, the median), and again
    # before each round: the rounds' own writes can slow the disk the copy is then measured on.
    upfront = statistics.median(copy_reference(SCRATCH / "copy"))
    print(f"cp -r + sync as make bench measures it: {upfront:.2f} s")
    rounds: list[dict[str, Any]] = []
    for i in range(args.rounds):
        row: dict[str, Any] = {"cp_sync_s": copy_reference(SCRATCH / "copy", runs=1)[0]}
        for mode in MODES:  # interleaved, so a slow minute of the machine hits every mode alike
            row[mode] = _child(mode)
        rounds.append(row)
        print(f"round {i + 1}: cp -r + sync {row['cp_sync_s']:.2f} s; " + "; ".join(
            f"{m} {row[m]['process_s']:.2f} s (cpu {row[m]['cpu_s']:.2f} s, peak {row[m]['peak_mb']:.0f} MB)"
            for m in MODES))
    read_ms = read_back(SCRATCH / "raw-segment.duckdb", SCRATCH / "raw-segment.segment")
    between = statistics.median(r["cp_sync_s"] for r in rounds)
    print(f"\nmedians over {len(rounds)} rounds; the ratios are to the copy measured as make bench does, "
          f"{upfront:.2f} s (goal <= 4x: {4 * upfront:.2f} s); the copies between rounds took {between:.2f} s")
    summary: dict[str, Any] = {"cp_sync_s": upfront, "cp_sync_between_rounds_s": between, "rounds": rounds,
                               "raw_segment_read_200_ms": read_ms}
    for mode in MODES:
        wall = statistics.median(r[mode]["process_s"] for r in rounds)
        cpu = statistics.median(r[mode]["cpu_s"] for r in rounds)
        peak = max(r[mode]["peak_mb"] for r in rounds)
        summary[mode] = {"process_s": wall, "cpu_s": cpu, "peak_mb": peak, "ratio": wall / upfront}
        print(f"  {mode:11s} {wall:6.2f} s  {wall / upfront:5.2f}x the copy  cpu {cpu:5.2f} s  peak {peak:4.0f} MB")
    print(f"  raw-segment: 200 lines of the largest session read back in {read_ms:.2f} ms (median)")
    shutil.rmtree(SCRATCH, ignore_errors=True)
    (OUT / "ingest_floor.json").write_text(json.dumps(summary, indent=2))
    print(f"\nwritten to {OUT / 'ingest_floor.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
