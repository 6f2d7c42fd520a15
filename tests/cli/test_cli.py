"""CLI conventions: --db anywhere before --, one JSON document on stdout, exit codes 0/1/2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli.main import main
from tests.helpers import write_jsonl


@pytest.fixture
def ingested(tmp_path: Path) -> Path:
    write_jsonl(tmp_path / "t" / "s.jsonl", [
        {"type": "user", "sessionId": "S1", "cwd": "/w", "timestamp": "2026-10-01T10:00:00Z", "message": {"role": "user", "content": "run -m pytest please"}},
        "garbage line",
    ])
    db = tmp_path / "w.duckdb"
    assert main(["ingest", str(tmp_path / "t"), "--db", str(db)]) == 0
    return db


def run_json(capsys, argv: list[str]) -> tuple[int, object]:
    capsys.readouterr()
    code = main(argv)
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_options_before_arguments_and_double_dash(ingested: Path, capsys) -> None:
    code, doc = run_json(capsys, ["search", "--json", "--db", str(ingested), "--", "S1", "-m pytest"])
    assert code == 0 and doc["total"] == 1 and doc["hits"][0]["line"] == 1
    code, doc = run_json(capsys, ["search", "S1", "please", "--db", str(ingested), "--json"])
    assert code == 0 and doc["total"] == 1


def test_read_and_sessions_json(ingested: Path, capsys) -> None:
    code, doc = run_json(capsys, ["read", "--db", str(ingested), "--json", "S1", "1", "2", "--width", "5"])
    assert code == 0 and doc["lines"] == [{"line": 1, "text": '{"typ', "cut": True}, {"line": 2, "text": "garba", "cut": True}]
    code, doc = run_json(capsys, ["sessions", "--json", "--db", str(ingested)])
    assert code == 0 and [e["sessionId"] for e in doc] == ["S1"]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["search", "nope", "x"], "unknown session"),
        (["search", "S1", ""], "non-empty"),
        (["read", "S1", "3", "1"], "bad range"),
        (["read", "S1", "1", "x"], "invalid int"),
        (["search"], "required"),
        (["search", "--regex", "("], "not a valid regular expression"),
        (["search", "a", "b", "c"], "SESSION_ID PHRASE"),
        (["sql", "select 1", "--json", "--format", "csv"], "give one of them"),
    ],
)
def test_usage_errors_exit_2_without_traceback(ingested: Path, capsys, argv: list[str], needle: str) -> None:
    try:
        code = main([*argv, "--db", str(ingested)])
    except SystemExit as exc:  # argparse's own errors exit from inside parse_args
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_missing_warehouse_is_a_usage_error(tmp_path: Path, capsys) -> None:
    assert main(["sessions", "--db", str(tmp_path / "none.duckdb")]) == 2
    assert "run `pipeline ingest" in capsys.readouterr().err


def test_sql_formats(ingested: Path, capsys) -> None:
    code, doc = run_json(capsys, ["sql", "SELECT session_id, line_count FROM sessions", "--format", "json", "--db", str(ingested)])
    assert code == 0 and doc == [{"session_id": "S1", "line_count": 2}]
    assert main(["sql", "SELECT nonsense FROM nowhere", "--db", str(ingested)]) == 2
    assert "the query failed" in capsys.readouterr().err
    assert main(["sql", "SELECT 1 AS a", "--format", "csv", "--db", str(ingested)]) == 0
    assert capsys.readouterr().out == "a\n1\n"  # plain newlines: the output feeds shell pipelines


def test_a_failed_query_names_the_warehouse_tables_and_the_columns_to_quote(ingested: Path, capsys) -> None:
    assert main(["sql", "SELECT * FROM nowhere", "--db", str(ingested)]) == 2
    err = capsys.readouterr().err
    assert "the warehouse's tables and views:" in err and "sessions" in err and "tool_results" in err
    assert main(["sql", "SELECT at FROM messages", "--db", str(ingested)]) == 2
    assert '`at` is a SQL keyword: write the column as "at"' in capsys.readouterr().err
    assert main(["sql", 'SELECT "at" FROM messages', "--db", str(ingested)]) == 0
    assert main(["sql", "SELEC 1", "--db", str(ingested)]) == 2
    assert "SQL keyword" not in capsys.readouterr().err


def test_an_unknown_flag_is_reported_by_its_verb_with_the_verbs_usage(ingested: Path, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["sessions", "--bogus", "--db", str(ingested)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "usage: pipeline sessions" in err and "pipeline sessions: error: unrecognized arguments: --bogus" in err


def test_an_empty_listing_says_so_in_words(tmp_path: Path, capsys) -> None:
    (tmp_path / "empty").mkdir()
    wh = str(tmp_path / "w.duckdb")
    assert main(["ingest", str(tmp_path / "empty"), "--db", wh]) == 0
    capsys.readouterr()
    assert main(["sessions", "--pending", "--db", wh]) == 0
    assert capsys.readouterr().out.startswith("nothing pending")
    assert main(["sessions", "--db", wh]) == 0
    assert "run `pipeline ingest PATH` first" in capsys.readouterr().out


def test_ingest_json_report_and_exit_code_for_unreadable(tmp_path: Path, capsys) -> None:
    write_jsonl(tmp_path / "t" / "ok.jsonl", [{"type": "user", "sessionId": "S"}])
    (tmp_path / "t" / "broken.jsonl").symlink_to(tmp_path / "missing")
    code, doc = run_json(capsys, ["ingest", "--json", str(tmp_path / "t"), "--db", str(tmp_path / "w.duckdb")])
    assert code == 1 and doc["newLines"] == 1 and doc["errors"][0]["path"].endswith("broken.jsonl")


def test_env_var_names_the_warehouse(ingested: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIPELINE_DB", str(ingested))
    code, doc = run_json(capsys, ["sessions", "--json"])
    assert code == 0 and doc[0]["sessionId"] == "S1"


def test_python_dash_m_entry_point(ingested: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pipeline", "search", "--json", "--db", str(ingested), "--", "S1", "-m pytest"],
        capture_output=True, text=True, check=False,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["total"] == 1


def test_a_warehouse_held_by_another_process_is_named(ingested: Path, capsys) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('ready', flush=True); time.sleep(30)",
         str(ingested)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        for argv in (["sessions"], ["ingest", str(ingested.parent / "t")]):
            code = main([*argv, "--db", str(ingested)])
            err = capsys.readouterr().err
            assert code == 1, err
            assert f"PID {holder.pid}" in err and "is in use by" in err and "Traceback" not in err
    finally:
        holder.kill()
        holder.wait()


def test_command_table_matches_what_modules_register() -> None:
    import argparse
    import importlib

    from pipeline.cli.main import COMMANDS

    for module, verbs in COMMANDS.items():
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).register(sub)
        assert tuple(sub.choices) == verbs, module


def test_a_verb_imports_only_its_own_module() -> None:
    probe = (
        "import sys; from pipeline.cli.main import build_parser; "
        "build_parser(['--db', 'x.duckdb', 'search', 'S1', 'x']); "
        "print(sorted(m for m in sys.modules if m.startswith('pipeline.cli.') and m != 'pipeline.cli.main'))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['pipeline.cli.search']"


def test_version_and_sql_load_no_heavy_library(ingested: Path) -> None:
    # what start-up costs is measured by `make bench`; here, that the libraries that made it slow stay out
    probe = (
        "import sys; from pipeline.cli.main import main; main({argv!r}); "
        "print(sorted(m for m in ('polars', 'pyarrow', 'pydantic', 'detect_secrets', 'numpy', 'rich') if m in sys.modules))"
    )
    for argv, allowed in ((["--version"], "[]"), (["sql", "select 1", "--format", "csv", "--db", str(ingested)], "[]")):
        out = subprocess.run([sys.executable, "-c", probe.format(argv=argv)], capture_output=True, text=True, check=True).stdout
        assert out.strip().splitlines()[-1] == allowed, argv


def test_help_lists_every_verb(capsys) -> None:
    from pipeline.cli.main import COMMANDS

    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    listing = capsys.readouterr().out
    for verbs in COMMANDS.values():
        for verb in verbs:
            assert verb in listing


def test_unknown_verb_is_a_usage_error_naming_the_choices(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["ingset"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'ingset'" in err and "ingest" in err


def test_a_parsing_error_with_json_is_still_one_json_document(ingested: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["read", "S1", "a", "b", "--json", "--db", str(ingested)])
    assert exc.value.code == 2
    assert json.loads(capsys.readouterr().out) == {"error": "argument START: invalid int value: 'a'", "exitCode": 2}


def test_dash_hint_only_when_a_dash_value_is_the_likely_cause(ingested: Path, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["search", "S1", "-m", "--db", str(ingested)])
    assert "goes after '--'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["read", "S1", "3", "--db", str(ingested)])
    assert "goes after '--'" not in capsys.readouterr().err
    with pytest.raises(SystemExit):  # `-m pytest` unquoted: pytest became the phrase and -m is left over
        main(["search", "S1", "-m", "pytest", "--db", str(ingested)])
    assert "goes after '--'" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["ingest", "somewhere", "--bogus"],            # a mistyped flag, no phrase involved
    ["search", "S1", "please", "--colour"],        # the phrase is there; the flag is just unknown
    ["memories", "--bogus"],
    ["check-answer", "a.json", "--sessions", "S1", "--jsn"],
])
def test_no_dash_hint_for_a_mistyped_flag(ingested: Path, capsys, argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--db", str(ingested)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments" in err and "goes after '--'" not in err


def test_every_verb_takes_json(capsys) -> None:
    from pipeline.cli.main import COMMANDS, build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.choices and "ingest" in a.choices)
    verbs = [v for verbs in COMMANDS.values() for v in verbs]
    for verb in verbs:
        assert "--json" in sub.choices[verb]._option_string_actions, verb


def test_sql_json_is_format_json_and_errors_follow_it(ingested: Path, capsys) -> None:
    code, doc = run_json(capsys, ["sql", "SELECT 1 AS a", "--json", "--db", str(ingested)])
    assert code == 0 and doc == [{"a": 1}]
    code, doc = run_json(capsys, ["sql", "SELECT nonsense FROM nowhere", "--json", "--db", str(ingested)])
    assert code == 2 and doc["exitCode"] == 2 and "the query failed" in doc["error"]


def test_read_says_which_limit_cut_the_listing_and_where_to_go_on(tmp_path: Path, capsys) -> None:
    write_jsonl(tmp_path / "t" / "big.jsonl", [{"type": "user", "sessionId": "B", "n": i, "pad": "x" * 900} for i in range(300)])
    db_file = str(tmp_path / "w.duckdb")
    assert main(["ingest", str(tmp_path / "t"), "--db", db_file]) == 0
    capsys.readouterr()
    assert main(["read", "B", "1", "300", "--width", "4000", "--db", db_file]) == 0
    out, err = capsys.readouterr()
    shown = len(out.splitlines())
    assert shown < 200 and "60,000 characters" in err and f"pipeline read B {shown + 1} 300" in err
    assert main(["read", "B", "1", "300", "--width", "10", "--db", db_file]) == 0
    assert "(at most 200 lines per read); continue with: pipeline read B 201 300" in capsys.readouterr().err
    assert main(["read", "B", "290", "400", "--db", db_file]) == 0
    assert "session B has 300 lines; shown 290..300" in capsys.readouterr().err


def test_times_look_the_same_in_every_output(ingested: Path, capsys) -> None:
    code, doc = run_json(capsys, ["sql", "SELECT first_at FROM sessions", "--json", "--db", str(ingested)])
    assert code == 0 and doc == [{"first_at": "2026-10-01T10:00:00Z"}]
    code, doc = run_json(capsys, ["sessions", "--json", "--db", str(ingested)])
    assert doc[0]["firstAt"].startswith("2026-10-01T10:00:00") and doc[0]["firstAt"].endswith("Z")
    assert main(["sql", "SELECT first_at FROM sessions", "--format", "csv", "--db", str(ingested)]) == 0
    assert capsys.readouterr().out == "first_at\n2026-10-01T10:00:00Z\n"


def test_version(capsys) -> None:
    assert main(["--version"]) == 0 and capsys.readouterr().out.startswith("pipeline ")


# Documents whose snake_case names INTERFACES.md fixes, so they stay as they are: the cache report and the
# simulation summary (`effect`, `true_effect`, and the llm_calls column names inside), and eval's scores
# (`borderline_only`). Every other JSON document the CLI prints uses camelCase keys.
FIXED_NAMES = ("simulate", "cache-report", "cache-eval", "eval")


def test_every_json_document_uses_camel_case_keys(samples_copy: Path, tmp_path: Path, capsys) -> None:
    from tests.helpers import not_camel_case

    wh, corpus, out = str(samples_copy), str(tmp_path / "corpus"), tmp_path / "b"
    docs: dict[str, object] = {}

    def run(name: str, argv: list[str]) -> object:
        capsys.readouterr()
        main(argv)
        docs[name] = json.loads(capsys.readouterr().out)
        return docs[name]

    sessions = run("sessions", ["sessions", "--json", "--db", wh])
    sid = sessions[0]["sessionId"]
    run("sessions --pending", ["sessions", "--pending", "--json", "--db", wh])
    run("search", ["search", sid, "Error", "--json", "--db", wh])
    run("read", ["read", sid, "1", "3", "--json", "--db", wh])
    run("consolidate", ["consolidate", "--pending", "--engine", "rules", "--out", str(out), "--json", "--db", wh])
    ids = ",".join(s["sessionId"] for s in json.loads((out / "manifest.json").read_text())["sessions"])
    run("check-answer", ["check-answer", str(out / "answer.json"), "--sessions", ids, "--json", "--db", wh])
    applied = run("apply", ["apply", str(out), "--json", "--db", wh, "--corpus", corpus])
    run("memories", ["memories", "--all", "--json", "--db", wh])
    mid = applied["memoriesWritten"][0]
    run("memories drop", ["memories", "drop", mid, "--why", "checking keys", "--json", "--db", wh, "--corpus", corpus])
    tasks = run("tasks", ["tasks", "--all", "--json", "--db", wh])
    run("tasks confirm", ["tasks", "confirm", tasks[0]["id"], "--json", "--db", wh, "--corpus", corpus])
    data = Path(__file__).resolve().parents[1] / "data" / "importers" / "anthropic_bad.jsonl"
    run("import-calls", ["import-calls", str(data), "--format", "anthropic", "--json", "--db", wh])
    run("ingest", ["ingest", str(tmp_path / "none"), "--json", "--db", wh])  # an error document
    assert docs["ingest"]["exitCode"] == 2
    assert {name: not_camel_case(doc) for name, doc in docs.items() if not_camel_case(doc)} == {}


def test_cache_report_of_claude_code_transcripts_without_cutover(tmp_path: Path, capsys) -> None:
    """Ingest to report: no cutover needed, and each cache write priced at its TTL's price."""

    def response(n: int, at: str, write: int, write_1h: int) -> dict:
        usage = {"input_tokens": 10, "cache_creation_input_tokens": write, "cache_read_input_tokens": 0, "output_tokens": 5,
                 "cache_creation": {"ephemeral_5m_input_tokens": write - write_1h, "ephemeral_1h_input_tokens": write_1h}}
        return {"type": "assistant", "sessionId": "S1", "cwd": "/w", "timestamp": at, "requestId": f"r{n}",
                "message": {"id": f"m{n}", "role": "assistant", "model": "claude-sonnet-4-5",
                            "content": [{"type": "text", "text": "ok"}], "usage": usage}}

    write_jsonl(tmp_path / "t" / "s.jsonl", [
        {"type": "user", "sessionId": "S1", "cwd": "/w", "timestamp": "2026-10-01T10:00:00Z", "message": {"role": "user", "content": "go"}},
        response(1, "2026-10-01T10:00:01Z", 100_000, 100_000),
        response(2, "2026-10-01T12:00:00Z", 100_000, 0),  # two hours later: the cache has expired
    ])
    db = tmp_path / "w.duckdb"
    assert main(["ingest", str(tmp_path / "t"), "--db", str(db)]) == 0
    code, doc = run_json(capsys, ["cache-report", "--db", str(db), "--json", "--bootstrap", "0"])
    assert code == 0 and isinstance(doc, dict)
    assert doc["effect"]["estimate"] is None and doc["inputs"]["cutover"] is None
    cost = doc["cost"]
    # Sonnet 4.5: 1-hour write $6 / MTok, 5-minute write $3.75, input $3, output $15; spend is at list
    # price, output included
    assert cost["by_cause"]["cold_start"]["spend_usd"] == pytest.approx((100_000 * 6 + 10 * 3 + 5 * 15) / 1e6)
    assert cost["by_cause"]["cold_start"]["cache_write_1h_usd"] == pytest.approx(100_000 * 6 / 1e6)
    assert cost["by_cause"]["ttl_expiry"]["spend_usd"] == pytest.approx((100_000 * 3.75 + 10 * 3 + 5 * 15) / 1e6)
    assert cost["by_cause"]["ttl_expiry"]["cache_write_5m_usd"] == pytest.approx(100_000 * 3.75 / 1e6)
    assert cost["write_split"]["write_1h_tokens"] == 100_000 and cost["write_split"]["calls_unsplit"] == 0
    # two hours after a 1-hour write: beyond the TTL in force
    assert doc["causes"]["ttl_expiry"]["calls"] == 1
    assert any(n.startswith("no cutover given") for n in doc["notes"])


def test_the_nightly_summary_is_the_commands_output_on_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from pipeline.cli import nightly as nightly_cli
    from pipeline.nightly.driver import NightResult

    result = NightResult(run_id="r1", day="2026-12-01", engine="rules", engine_note="engine rules (as asked)",
                         run_dir=tmp_path / "runs" / "r1", pending_after=2, report=tmp_path / "report.html")
    args = argparse.Namespace(executor="local", db=str(tmp_path / "w.duckdb"), corpus=str(tmp_path / "corpus"))
    nightly_cli._summary(result, args)
    out, err = capsys.readouterr()
    assert "run r1" in out and "sessions still pending: 2" in out and "report:    " in out
    assert err == ""
