"""What the consolidator reads is redacted: the tools mask secrets, positions still refer to the stored
line, quotes holding a mask verify by the mask rule, and the rules engine masks before it normalises."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.consolidator import tools
from pipeline.consolidator.batch_input import snapshot
from pipeline.consolidator.batch_secrets import scan_sessions
from pipeline.consolidator.contract import check_answer
from pipeline.consolidator.quotes import MemoryQuotes, WarehouseQuotes, quote_in_line
from pipeline.consolidator.rules.engine import BatchText, build_answer, masked
from pipeline.consolidator.rules.error_shapes import ToolResult
from pipeline.consolidator.toolbox import BatchTools
from pipeline.secrets.gate import SecretSet
from pipeline.secrets.scan import line_secrets
from pipeline.warehouse import db, ingest
from tests.helpers import write_jsonl

RNG = random.Random(11)


def rand(n: int) -> str:
    chars = string.ascii_letters + string.digits
    while True:
        out = "".join(RNG.choice(chars) for _ in range(n))
        if any(c.isdigit() for c in out) and any(c.islower() for c in out) and any(c.isupper() for c in out):
            return out


STRIPE = f"sk_live_51{rand(30)}"
STRIPE_2 = f"sk_live_51{rand(30)}"
PASSWORD = rand(9) + "#q"
ERROR = "stripe.error.AuthenticationError: Invalid API Key provided: {key}"


def line(role: str, text: str) -> dict[str, str]:
    return {"role": role, "content": text}


@pytest.fixture(scope="module")
def wh(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("redaction")
    write_jsonl(tmp / "src" / "s1.jsonl", [
        line("user", "run the refund script"),
        line("tool", ERROR.format(key=STRIPE)),
        line("tool", f"DB_PASSWORD={PASSWORD} written to .env"),
        line("tool", f"psql -W {PASSWORD} failed: {ERROR.format(key=STRIPE)}"),
    ])
    write_jsonl(tmp / "src" / "s2.jsonl", [line("tool", ERROR.format(key=STRIPE_2))])
    path = tmp / "w.duckdb"
    with db.writing(path) as con:
        assert not ingest.ingest(con, [tmp / "src"]).errors
    return path


def ids(wh: Path) -> list[str]:
    with db.reading(wh) as con:
        return [e["sessionId"] for e in tools.list_sessions(con)]


def test_read_lines_masks_unless_asked_for_raw(wh: Path) -> None:
    s1 = ids(wh)[0]
    with db.reading(wh) as con:
        shown = tools.read_lines(con, s1, 1, 4)
        raw = tools.read_lines(con, s1, 1, 4, redact=False)
        cut = tools.read_lines(con, s1, 2, 2, width=len(raw["lines"][0]["text"]) + 60)
    text = json.dumps(shown)
    assert STRIPE not in text and "[REDACTED:stripe-key]" in text
    # Without the batch's known secrets, a line masks what is detected on it (the assignment).
    assert PASSWORD not in shown["lines"][2]["text"] and "[REDACTED:password]" in shown["lines"][2]["text"]
    assert STRIPE in json.dumps(raw)
    # A line cut in the middle of the key shows the mask, not the key's first half.
    assert STRIPE[:14] not in json.dumps(cut) and cut["lines"][0]["cut"]


def test_search_masks_context_and_keeps_stored_columns(wh: Path) -> None:
    s1 = ids(wh)[0]
    with db.reading(wh) as con:
        result = tools.search_transcript(con, s1, "Invalid API Key provided: ")
        stored = {n: t for n, t in con.execute("SELECT line_no, text FROM lines WHERE session_id = ?", [s1]).fetchall()}
        on_key = tools.search_transcript(con, s1, "sk_live_51")
    assert result["total"] == 2 and STRIPE not in json.dumps(result)
    for hit in result["hits"]:
        assert hit["after"].startswith("[REDACTED:stripe-key]")
        assert stored[hit["line"]][hit["column"] - 1 :].startswith("Invalid API Key provided: ")
    # A phrase that lands on the secret is masked too: nothing of the key comes back.
    assert on_key["total"] == 2 and STRIPE[10:] not in json.dumps(on_key)


def test_a_phrase_holding_a_mask_finds_the_stored_secret(wh: Path) -> None:
    s1 = ids(wh)[0]
    phrase = "provided: [REDACTED:stripe-key]"
    with db.reading(wh) as con:
        result = tools.search_transcript(con, s1, phrase)
        stored = {n: t for n, t in con.execute("SELECT line_no, text FROM lines WHERE session_id = ?", [s1]).fetchall()}
        wrong_kind = tools.search_transcript(con, s1, "provided: [REDACTED:openai-key]")
    assert result["total"] == 2 and [h["match"] for h in result["hits"]] == [phrase, phrase]
    for hit in result["hits"]:
        assert stored[hit["line"]][hit["column"] - 1 :].startswith("provided: " + STRIPE)
    assert wrong_kind["total"] == 0


def test_the_model_tools_always_redact_and_mask_known_values_on_every_line(wh: Path, tmp_path: Path) -> None:
    batch = ids(wh)
    source = snapshot(wh, batch, tmp_path / "input")  # the batch reads its own input, as in a night
    with source.reading() as con:
        known = scan_sessions(con, batch)
    box = BatchTools(source, batch, known)
    out = box.call("read_lines", json.dumps({"sessionId": batch[0], "start": 1, "end": 4}))
    assert out.ok and STRIPE not in out.text and PASSWORD not in out.text
    # The password is detected where it is assigned (line 3) and masked where it is only used (line 4).
    assert json.loads(out.text)["lines"][3]["text"].count("[REDACTED:password]") == 1
    searched = box.call("search_transcript", json.dumps({"sessionId": batch[0], "phrase": "psql"}))
    assert PASSWORD not in searched.text and "[REDACTED:password]" in searched.text


def test_cli_read_is_raw_unless_redact(wh: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s1 = ids(wh)[0]
    assert main(["read", s1, "2", "2", "--db", str(wh)]) == 0
    assert STRIPE in capsys.readouterr().out
    assert main(["read", s1, "2", "2", "--redact", "--db", str(wh)]) == 0
    out = capsys.readouterr().out
    assert STRIPE not in out and "[REDACTED:stripe-key]" in out
    assert main(["search", s1, "Invalid", "--redact", "--json", "--db", str(wh)]) == 0
    assert STRIPE not in capsys.readouterr().out


def test_a_quote_holding_a_mask_verifies_where_the_secret_is(wh: Path) -> None:
    batch = ids(wh)
    good = "Invalid API Key provided: [REDACTED:stripe-key]"
    with db.reading(wh) as con:
        known = scan_sessions(con, batch)
        quotes = WarehouseQuotes(con, known)
        assert quotes.contains(batch[0], good) and quotes.contains(batch[1], good)
        assert not quotes.contains(batch[0], "Invalid API Key provided: [REDACTED:openai-key]")
        assert not quotes.contains(batch[0], "run the refund [REDACTED:stripe-key]")
        assert quotes.lines_with(batch[0], good) == [2, 4]
        assert quotes.contains(batch[0], "psql -W [REDACTED:password] failed")
        # The passage offered as closest to a wrong quote is masked.
        near = quotes.closest(batch[0], "Invalid API Key provided: sk_live_nope")
    assert near is not None and STRIPE not in near[1] and "[REDACTED:stripe-key]" in near[1]


def test_the_contract_accepts_masked_quotes_and_shows_no_secret_in_its_problems() -> None:
    lines = {"s1": [json.dumps(line("tool", ERROR.format(key=STRIPE)))], "s2": [json.dumps(line("tool", ERROR.format(key=STRIPE_2)))]}
    quote = "stripe.error.AuthenticationError: Invalid API Key provided: [REDACTED:stripe-key]"
    answer = {"candidates": [{"kind": "error_pattern", "claim": "Stripe rejects the configured live key.", "gist": "",
                              "entities": [], "evidence": [{"sessionId": "s1", "quote": quote},
                                                           {"sessionId": "s2", "quote": quote}]}],
              "commitments": [], "readSessionIds": ["s1", "s2"]}
    assert check_answer(answer, ["s1", "s2"], MemoryQuotes(lines)).accepted
    answer["candidates"][0]["evidence"][1]["quote"] = "stripe.error.AuthenticationError: Invalid API Key provided: sk_live_x"
    refused = check_answer(answer, ["s1", "s2"], MemoryQuotes(lines))
    assert not refused.accepted and STRIPE_2 not in refused.tool_result()


def test_quote_in_line_mask_rule_on_raw_and_decoded_text() -> None:
    raw = json.dumps({"content": f'key "{STRIPE}" rejected'})
    assert quote_in_line('key "[REDACTED:stripe-key]" rejected', raw)  # decoded
    assert quote_in_line('key \\"[REDACTED:stripe-key]\\" rejected', raw)  # as written on the line
    assert not quote_in_line('key "[REDACTED:stripe-key]" accepted', raw)
    assert line_secrets(raw)


def test_the_rules_engine_masks_before_it_normalises() -> None:
    """The shape of an error holding a key never keeps the key with its digits turned into <n>."""
    results = [
        ToolResult(s, 2, ERROR.format(key=key), name="Bash", call_line=1,
                   tool_input={"command": f"STRIPE_KEY={key} python charge.py --amount 10"})
        for s, key in (("s1", STRIPE), ("s2", STRIPE_2))
    ]
    known = SecretSet.from_lines([*(r.text for r in results), *(str(r.tool_input) for r in results)])
    text = masked(BatchText(runs=results, messages=[], lines={}, slugs={}), known)
    answer = build_answer(text.runs, [], ["s1", "s2"])
    [cand] = answer["candidates"]  # no routine: a masked secret is not a setting to remember
    dumped = json.dumps(answer)
    for key in (STRIPE, STRIPE_2):
        assert key[10:] not in dumped and not known.leaks(dumped)
    # the error lines, and the commands that carried the key, are quoted with the key masked
    quotes = [e["quote"] for e in cand["evidence"]]
    assert quotes[:2] == [ERROR.format(key="[REDACTED:stripe-key]")] * 2
    assert all(STRIPE not in q and STRIPE_2 not in q for q in quotes)


def test_summarise_counts_secrets_found_and_masked_per_kind(wh: Path) -> None:
    from pipeline.consolidator.batch_secrets import summarise

    with db.reading(wh) as con:
        whole = summarise(con)
        one = summarise(con, [ids(wh)[1]])
    assert whole.found == {"password": 1, "stripe-key": 2}
    # The password is masked where it is assigned and where it is used again.
    assert whole.masked == {"password": 2, "stripe-key": 3}
    assert whole.lines == 5 and whole.bytes > 0
    assert "stripe-key 2/3" in whole.line() and "password 1/2" in whole.line()
    assert one.found == {"stripe-key": 1} and one.masked == {"stripe-key": 1}
    assert PASSWORD not in json.dumps(whole.to_json()) and STRIPE not in whole.line()
