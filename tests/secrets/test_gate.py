"""The last gate (pipeline.secrets.gate): a secret is found again however an engine rewrote it."""

from __future__ import annotations

import random
import re
import string

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.secrets.gate import OVERLAP, SecretSet
from pipeline.secrets.scan import Secret, detect

RNG = random.Random(3)
ALNUM = string.ascii_letters + string.digits


def rand(n: int) -> str:
    while True:
        out = "".join(RNG.choice(ALNUM) for _ in range(n))
        if any(c.isdigit() for c in out) and any(c.islower() for c in out) and any(c.isupper() for c in out):
            return out


KEY = f"sk-proj-{rand(40)}"
KNOWN = SecretSet([Secret("openai-key", KEY), Secret("email", "maria.gonzalez@acme-billing.io")])


def test_rewritten_secrets_are_leaks() -> None:
    digits_masked = re.sub(r"\d+", "<n>", KEY)
    digits_removed = re.sub(r"\d", "", KEY)
    separated = "-".join(KEY[i : i + 4] for i in range(0, len(KEY), 4))
    for text in (f"claim with {KEY} inside", f"as {digits_masked}.", digits_removed.upper(), separated,
                 f"error shape: Incorrect API key provided: {digits_masked.lower()}"):
        leaks = KNOWN.leaks(text)
        assert leaks and leaks[0].kind == "openai-key", text
        assert KNOWN.check(text)
        scrubbed = KNOWN.scrub(text)
        assert not KNOWN.leaks(scrubbed) and "[REDACTED:openai-key]" in scrubbed


def test_reasons_name_the_kind_never_the_secret() -> None:
    reasons = KNOWN.check(f"x {KEY} y")
    assert reasons and all(KEY[8:20] not in r for r in reasons)
    assert any("openai-key" in r for r in reasons)


def test_short_overlaps_and_an_address_domain_are_not_leaks() -> None:
    assert KNOWN.leaks(KEY[8 : 8 + OVERLAP - 1]) == []
    assert KNOWN.leaks("billing mail goes through acme-billing.io") == []
    assert KNOWN.leaks("write to maria.gonzalez at acme") != []
    assert KNOWN.leaks("[REDACTED:openai-key] and [REDACTED:email]") == []


def test_a_set_from_lines_masks_known_values_anywhere() -> None:
    password = rand(9) + "!x"
    found = SecretSet.from_lines([f"export DB_PASSWORD={password}", "nothing here"])
    assert found.counts() == {"password": 1}
    # Detected where it is assigned; masked also where it is only used.
    assert found.mask(f"psql -W {password}") == "psql -W [REDACTED:password]"
    assert found.mask_known(f"psql -W {password}") == "psql -W [REDACTED:password]"
    assert found.scrub_json({"a": [f"x {password}"], "n": 3}) == {"a": ["x [REDACTED:password]"], "n": 3}


def test_an_empty_set_changes_nothing() -> None:
    empty = SecretSet()
    assert not empty and empty.leaks("anything") == [] and empty.mask_known("a b") == "a b"


@settings(max_examples=80, deadline=None)
@given(
    tail=st.text(alphabet=ALNUM, min_size=24, max_size=48).filter(
        lambda t: sum(c.isalpha() for c in t) >= 16 and any(c.isdigit() for c in t)
        and any(c.islower() for c in t) and any(c.isupper() for c in t)),
    how=st.sampled_from(["digits-masked", "digits-removed", "upper", "lower", "dashes", "spaces"]),
    around=st.text(alphabet=string.ascii_lowercase + " ", max_size=30),
)
def test_any_rewriting_of_a_detected_key_is_caught(tail: str, how: str, around: str) -> None:
    key = "sk-proj-" + tail
    known = SecretSet(detect(f"key {key}"))
    rewritten = {
        "digits-masked": re.sub(r"\d+", "<n>", key),
        "digits-removed": re.sub(r"\d", "", key),
        "upper": key.upper(),
        "lower": key.lower(),
        "dashes": "-".join(key),
        "spaces": " ".join(key[i : i + 3] for i in range(0, len(key), 3)),
    }[how]
    text = f"{around} {rewritten} {around}"
    assert known.leaks(text)
    assert not known.leaks(known.scrub(text))
