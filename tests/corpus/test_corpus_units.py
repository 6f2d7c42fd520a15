"""Units of the corpus: redaction patterns, duplicate threshold, path algebra, the render gate."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.corpus import dedupe, memory_file
from pipeline.secrets.redact import find_secrets, redact

SECRETS = {
    "openai-key": "use sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34 for the call",
    "anthropic-key": "ANTHROPIC_API_KEY=sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3",
    "aws-access-key": "id AKIAIOSFODNN7EXAMPLE in the env",
    "aws-secret-key": "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "github-token": "token ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5",
    "slack-token": "SLACK_BOT_TOKEN=xoxb-123456789012-abcdefghijkl",
    "google-api-key": "key=AIzaSyD-1234567890abcdefghijklmnopqrstu",
    "bearer-token": "curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig'",
    "private-key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
    "url-password": "DATABASE_URL=postgres://app:hunter2hunter2@db.internal:5432/app",
    "email": "ping ana.lopez@northwind-traders.io about the billing tables",
}


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_each_secret_kind_is_redacted(kind: str) -> None:
    text = SECRETS[kind]
    r = redact(text)
    assert kind in r.kinds and f"[REDACTED:{kind}]" in r.text
    assert find_secrets(r.text) == []
    secret_part = {"url-password": "hunter2hunter2", "bearer-token": "eyJhbGci", "aws-secret-key": "wJalrXUtn",
                   "email": "ana.lopez"}.get(kind)
    if secret_part:
        assert secret_part not in r.text


def test_ordinary_text_is_left_alone() -> None:
    text = "Run pytest -q; the sk-learn docs at https://example.com/a:b and task-1234 are fine."
    assert redact(text).text == text and not redact(text).changed
    for text in ("git clone git@github.com:org/app.git", "mail from noreply@github.com", "npm i react@18.2.0", "ana@laptop:~$",
                 "write to user@example.com (a reserved example domain)", "the icon@2x.png asset"):
        assert not redact(text).changed, text


@pytest.mark.parametrize(("a", "b"), [
    ("pytest fails with ModuleNotFoundError when the venv is not activated",
     "Pytest fails with a ModuleNotFoundError when the virtualenv is not activated"),
    ("Postgres on the dev box refuses connections until restarted.",
     "The Postgres on the dev box refuses connections until it is restarted"),
    ("Port 3000 is often already in use by a stale dev server.", "Port 8080 is often already in use by a stale dev server"),
])
def test_rewordings_are_duplicates(a: str, b: str) -> None:
    assert dedupe.is_duplicate(a, b)


@pytest.mark.parametrize(("a", "b"), [
    ("Tests fail", "Tests fail when the cache directory is stale and pytest is run twice"),
    ("Use uv instead of pip for installs in this repo", "EADDRINUSE on the dev server port recurs after restarts"),
    ("Postgres refuses connections on port 5433", "Redis refuses connections when the password is missing"),
])
def test_different_claims_are_not_duplicates(a: str, b: str) -> None:
    assert not dedupe.is_duplicate(a, b)


@given(st.text(max_size=400))
def test_slug_is_always_a_safe_file_name(claim: str) -> None:
    slug = memory_file.slugify(claim)
    assert slug and len(slug) <= memory_file.SLUG_MAX
    assert set(slug) <= set("abcdefghijklmnopqrstuvwxyz0123456789-") and ".." not in slug and "/" not in slug


@given(st.text(max_size=300))
def test_path_never_leaves_the_corpus(claim: str) -> None:
    root = Path("/corpus")
    p = memory_file.path_for(root, "semantic", claim, {}, "x")
    assert p.parent == root / "semantic" and p.suffix == ".md"


def test_path_collision_gets_a_number() -> None:
    root = Path("/c")
    first = memory_file.path_for(root, "semantic", "Same words here", {}, "id-1")
    second = memory_file.path_for(root, "semantic", "Same words, here!", {first: "id-1"}, "id-2")
    assert (first.name, second.name) == ("same-words-here.md", "same-words-here-2.md")


def doc(**kw) -> memory_file.MemoryDoc:
    base = dict(id="semantic-1", kind="semantic", claim="A claim: with colons # and 'quotes'", entities=["file:a.py"],
                sessions=["s1"], created="2026-11-30", run="r", batch="b", gist="Line one.\n\n---\nLine after a rule.")
    base.update(kw)
    return memory_file.MemoryDoc(**base)


@given(st.text(min_size=1, max_size=300).filter(lambda s: s.split()), st.text(max_size=500), st.text(max_size=40))
def test_render_parses_back(claim: str, gist: str, entity: str) -> None:
    d = doc(claim=memory_file.one_line(claim), gist=memory_file.clean_block(gist),
            entities=[memory_file.one_line(f"unknown:{entity}")])
    assert memory_file.parse(memory_file.render(d)) == d


def test_gate_refuses_quote_in_file_and_secrets() -> None:
    quote = "psycopg.OperationalError: connection refused on 5433"
    assert memory_file.gate(doc(gist=f"see {quote}"), [quote])
    assert memory_file.gate(doc(gist="fine"), [quote]) == []
    assert any("secrets" in p for p in memory_file.gate(doc(gist="sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34"), []))
    assert memory_file.gate(doc(gist="uv"), ["uv"]) == []  # a short common phrase is not a leaked quote
