"""The command line is documented (as sqlite-utils' test_docs.py): every verb is in README.md, and
every verb and argument says what it is for in `--help`."""

from __future__ import annotations

import argparse
import re

import pytest

from pipeline.cli.main import COMMANDS, build_parser
from tests.helpers import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
VERBS = [verb for verbs in COMMANDS.values() for verb in verbs]


def verb_parsers() -> tuple[dict[str, argparse.ArgumentParser], dict[str, str | None]]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices), {a.dest: a.help for a in sub._choices_actions}


def test_the_verb_list_is_the_parsers() -> None:
    parsers, _ = verb_parsers()
    assert sorted(parsers) == sorted(VERBS)


@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_is_in_the_readme(verb: str) -> None:
    # in a command line of a code block, or named in the text as `pipeline VERB`
    assert re.search(rf"(^|\s|`)pipeline {re.escape(verb)}(\s|`|$)", README, re.M), f"README.md never shows `pipeline {verb}`"


@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_and_argument_has_a_description(verb: str) -> None:
    parsers, helps = verb_parsers()
    parser = parsers[verb]
    assert (helps.get(verb) or "").strip(), f"`pipeline --help` shows no line for {verb}"
    assert (parser.description or "").strip(), f"`pipeline {verb} --help` has no description"
    silent = [a.option_strings[0] if a.option_strings else a.dest for a in parser._actions
              if a.dest != "help" and not (a.help or "").strip()]
    assert not silent, f"`pipeline {verb} --help` says nothing about {silent}"
