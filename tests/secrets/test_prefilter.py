"""The pre-filter in front of the detect-secrets plugins (`_Hint.needles`) never turns a text down
that the plugin would flag: it only saves searching a pattern with no literal start.

Two properties, on texts hypothesis writes around strings drawn from the regular expressions
themselves (so the matches are there to be missed), and on arbitrary text:

* a hint with needles holds exactly when its pattern matches (the needles change nothing but speed);
* whenever a plugin flags a text, its hint holds (so `detect` runs the plugin on it).
"""

from __future__ import annotations

import re
import sys

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pipeline.secrets import scan

GATED = [(kind, hint) for kind, _, hint in scan._PLUGINS if hint.needles]
# Prose, code and JSON-ish characters, a few non-ASCII letters that a case-insensitive regex pairs
# with ASCII ones (ſ and s, the Kelvin sign and k, ı and İ and i), and any other character now and then.
AROUND = st.text(
    st.one_of(
        st.sampled_from([*"abcklpstuyACKNOPSGMT0123456789 _-.:=\"'[]{}/\\\n\t@", "\u017f", "\u212a", "\u0131", "\u0130", "\u00e9"]),
        st.characters(),
    ),
    max_size=40,
)


def _holds(hint: scan._Hint, text: str) -> bool:
    return hint.holds(text, scan._fold(text))


def _exact(hint: scan._Hint, text: str) -> bool:
    """The hint's pattern alone, without its needles."""
    assert hint.pattern is not None
    return hint.pattern.search(scan._fold(text) if hint.folded else text) is not None


def test_every_gated_hint_is_a_pattern_and_each_needle_is_a_literal_of_it() -> None:
    assert GATED, "the slow patterns have needles"
    for kind, hint in GATED:
        assert hint.pattern is not None, kind
        source = hint.pattern.pattern.lower() if hint.folded else hint.pattern.pattern
        for needle in hint.needles:
            assert re.escape(needle).replace("\\", "") in source.replace("\\", ""), (kind, needle)


@pytest.mark.parametrize(("kind", "hint"), GATED, ids=[k for k, _ in GATED])
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_needle_never_turns_down_a_match(kind: str, hint: scan._Hint, data: st.DataObject) -> None:
    assert hint.pattern is not None
    inner = data.draw(st.from_regex(hint.pattern, fullmatch=True), label="match")
    text = data.draw(AROUND, label="before") + inner + data.draw(AROUND, label="after")
    if hint.folded:
        assume(inner == scan._fold(inner))  # a folded pattern is met in folded text
    assert _exact(hint, text)
    assert _holds(hint, text), (kind, text)


@pytest.mark.parametrize(("kind", "hint"), GATED, ids=[k for k, _ in GATED])
@settings(max_examples=300, deadline=None)
@given(text=AROUND)
def test_with_needles_a_hint_holds_exactly_when_its_pattern_matches(kind: str, hint: scan._Hint, text: str) -> None:
    assert _holds(hint, text) == _exact(hint, text), (kind, text)


def test_the_fold_covers_every_letter_a_case_insensitive_regex_pairs_with_an_ascii_one() -> None:
    ascii_letter = re.compile(r"(?i)[a-z]")
    paired = {chr(c) for c in range(128, sys.maxunicode + 1) if ascii_letter.fullmatch(chr(c))}
    assert paired == {"\u0130", "\u0131", "\u017f", "\u212a"}
    for ch in paired:
        folded = scan._fold(ch)
        assert len(folded) == 1 and folded.isascii() and re.fullmatch("(?i)" + folded, ch)


def test_folded_needles_find_the_non_ascii_partners() -> None:
    softlayer = dict(GATED)["softlayer-key"]
    assert _exact(softlayer, "\u017fl_key") and _holds(softlayer, "\u017fl_key")  # ſ pairs with s
    cos = next(hint for kind, _, hint in scan._PLUGINS if kind == "ibm-cos-key")
    assert _holds(cos, "SECRET_ACCESS_\u212aEY")  # the Kelvin sign pairs with k
    aws = next(hint for kind, _, hint in scan._PLUGINS if kind == "aws-access-key")
    assert _holds(aws, "AW\u017f_key = ")  # the word hint reads the folded text too


@settings(max_examples=300, deadline=None)
@given(before=AROUND, word=st.sampled_from(["password", "api_key", "secret", "passwd", "pwd", "contrase\u00f1a"]),
       value=st.text(st.sampled_from(list("aZ09!#%_-")), min_size=6, max_size=20), after=AROUND)
def test_what_the_keyword_plugin_flags_holds_a_keyword_word(before: str, word: str, value: str, after: str) -> None:
    for text in (f'{before}{word} = "{value}"{after}', f"{before}{word.upper()}={value}{after}"):
        for group in scan._KEYWORD_GROUPS:
            if any(scan._KEYWORD.analyze_string(text, denylist_regex_to_group=group)):
                assert any(w in scan._fold(text) for w in scan._KEYWORD_WORDS), text


PLUGINS = [(kind, plugin, hint) for kind, plugin, hint in scan._PLUGINS]


@pytest.mark.parametrize(("kind", "plugin", "hint"), PLUGINS, ids=[k for k, _, _ in PLUGINS])
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_what_a_plugin_flags_always_holds_its_hint(kind: str, plugin: object, hint: scan._Hint, data: st.DataObject) -> None:
    denylist = list(getattr(plugin, "denylist", ()))
    assert denylist, kind
    pattern = data.draw(st.sampled_from(denylist), label="plugin pattern")
    try:
        inner = data.draw(st.from_regex(pattern), label="plugin match")
    except Exception:  # a construct hypothesis cannot write strings for (a lookbehind): arbitrary text
        inner = data.draw(AROUND, label="text")
    text = data.draw(AROUND, label="before") + inner + data.draw(AROUND, label="after")
    if any(plugin.analyze_string(text)):  # type: ignore[attr-defined]
        assert _holds(hint, text), (kind, text)
