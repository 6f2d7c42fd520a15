"""Benchmark: `pipeline cache-report` over 10 million bulk-simulated calls (run by `make bench`).

Generates the calls once with `pipeline simulate --bulk 10000000` into bench/out/ (reused when
present), then times `pipeline cache-report --calls FILE --cutover DATE --json` in a child
process and reads that child's own peak RSS from wait4(). Prints exactly one JSON object on
stdout: {"cache_report_s", "cache_report_peak_rss_mb", "cache_report_calls"}; progress goes to
stderr, and the figures are also kept in bench/out/cache_report.json. Goal on the 2-core
reference machine: <= 30 s and <= 4096 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
OUT = ROOT / "out"
N_CALLS = 10_000_000
SEED = 1


def _calls_file(n: int) -> Path:
    return OUT / f"cache_calls_{n}.parquet"


def _summary(path: Path) -> dict | None:
    import polars as pl

    try:
        text = pl.read_parquet_metadata(path).get("trace_pipeline.simulation")
    except Exception:  # a half-written or foreign file: regenerate it
        return None
    return json.loads(text) if text else None


def ensure_calls(n: int) -> tuple[Path, dict]:
    path = _calls_file(n)
    summary = _summary(path) if path.exists() else None
    if summary and summary.get("calls") == n:
        print(f"reusing {path}", file=sys.stderr)
        return path, summary
    OUT.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial.parquet")
    print(f"generating {n:,} bulk calls into {path} ...", file=sys.stderr)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pipeline", "simulate", "--bulk", str(n), "--seed", str(SEED), "--out", str(partial), "--json"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    partial.replace(path)  # only a complete file is ever reused
    print(f"generated in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    summary = _summary(path)
    if not summary:
        raise SystemExit(f"{path} carries no simulation summary")
    return path, summary


def measure(cmd: list[str]) -> tuple[float, float, str]:
    """Wall time, the child's own peak RSS (MB) and its stdout."""
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} exited with {proc.returncode}")
        out.seek(0)
        text = out.read().decode("utf-8")
    return elapsed, usage.ru_maxrss / 1024, text  # ru_maxrss is in KB on Linux


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=N_CALLS, help="bulk calls to generate (default 10,000,000)")
    args = ap.parse_args()
    path, summary = ensure_calls(args.calls)
    cmd = [sys.executable, "-m", "pipeline", "cache-report", "--calls", str(path), "--cutover", summary["cutover"], "--json"]
    print("timing:", " ".join(cmd), file=sys.stderr)
    seconds, rss_mb, text = measure(cmd)
    report = json.loads(text)
    print(
        f"cache-report: {report['calls']:,} calls in {seconds:.1f} s, peak RSS {rss_mb:.0f} MB;"
        f" effect {report['effect']['estimate']:+.4f} (true {summary.get('true_effect')})",
        file=sys.stderr,
    )
    figures = {"cache_report_s": round(seconds, 3), "cache_report_peak_rss_mb": round(rss_mb, 1),
               "cache_report_calls": int(report["calls"])}
    # Kept beside the calls so the notebook's closing note can quote the latest figures even when
    # this script runs alone (bench/run.py also folds them into results.json).
    (OUT / "cache_report.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
