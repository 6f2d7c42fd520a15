"""Programs the machine does not have (`pipeline.consolidator.rules.missing_programs`)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.consolidator.contract import QUOTE_LEAK_MIN
from pipeline.consolidator.rules.engine import build_answer
from pipeline.consolidator.rules.missing_programs import absences, find_missing_programs, missing_candidate
from pipeline.consolidator.rules.tool_runs import ToolResult
from pipeline.corpus.about import about, same_thing


def call(session: str, line: int, command: str, output: str = "", code: int = 0, name: str = "Bash") -> ToolResult:
    return ToolResult(session, line + 1, output, is_error=code != 0, exit_code=code, name=name,
                      tool_input={"command": command}, call_id=f"{session}-{line}", call_line=line)


@pytest.mark.parametrize(("command", "output", "missing"), [
    ("python - <<'PY'\nprint(1)\nPY", "bash: line 1: python: command not found", "python"),
    ("pytest -q", "/opt/homebrew/shellenv.sh: line 18: /bin/ps: Operation not permitted\nzsh:1: command not found: pytest",
     "pytest"),
    ("pnpm install", "sh: 1: pnpm: not found", "pnpm"),
    ("lua -v", "lua : The term 'lua' is not recognized as the name of a cmdlet, function, script file, or operable program.",
     "lua"),
    ("luac -p a.lua", "'luac' is not recognized as an internal or external command,", "luac"),
    ("where.exe lua", "INFO: Could not find files for the given pattern(s).", "lua"),
    ("Get-Command lua -ErrorAction SilentlyContinue | Select-Object -ExpandProperty Source", "", "lua"),
    ("which fcitx5", "", "fcitx5"),
    ("command -v rg", "", "rg"),
])
def test_what_says_a_program_is_missing(command: str, output: str, missing: str) -> None:
    [absence] = absences(call("a", 1, command, output, code=1))
    assert absence.program == missing
    assert absence.quote in output or absence.quote == command


@pytest.mark.parametrize(("command", "output", "code"), [
    # a here-document's end word run as a command is a quoting slip
    ("cat <<EOF\nx\nEOF\nPY", "bash: line 4: PY: command not found", 127),
    # a missing script is a missing file, not a missing program
    ("./build.sh", "bash: ./build.sh: No such file or directory", 127),
    # the name the shell gives must be a program of the command line
    ("make test", "make: *** [Makefile:3: test] Error 127\nsh: 1: jest: not found", 2),
    # a lookup that found it, or that printed something else, or that worked
    ("which node", "/usr/local/bin/node", 1),
    ("where lua", "Where-Object : Cannot bind argument to parameter", 1),
    ("where.exe lua", "C:\\tools\\lua.exe", 0),
    # a lookup followed by real work is not a lookup-only call
    ("which node && node build.js", "", 1),
])
def test_what_does_not_say_a_program_is_missing(command: str, output: str, code: int) -> None:
    assert absences(call("a", 1, command, output, code=code)) == []


def test_missing_in_two_sessions_is_a_finding_and_once_is_not() -> None:
    runs = [call("a", 3, "where.exe lua", "INFO: Could not find files for the given pattern(s).", 1),
            call("b", 9, "Get-Command lua -ErrorAction SilentlyContinue", "", 1)]
    [item] = find_missing_programs(runs, ["a", "b"])
    assert item.program == "lua" and set(item.sightings) == {"a", "b"} and item.instead is None
    assert find_missing_programs(runs[:1], ["a"]) == []
    # a subagent is part of its parent's session, not a second one
    assert find_missing_programs(runs, ["a", "b"], roots={"b": "a"}) == []


def test_once_with_a_program_that_ran_the_same_command_in_its_place() -> None:
    script = "python - <<'PY'\nfrom pathlib import Path\nprint(Path('spec.md').read_text()[:10])\nPY"
    runs = [call("a", 60, script, "bash: line 1: python: command not found", 127),
            call("a", 66, script.replace("python -", "python3 -", 1), "# Spec")]
    [item] = find_missing_programs(runs, ["a"])
    assert (item.program, item.instead) == ("python", "python3")
    candidate = missing_candidate(item, {"a": "lms-go"})
    assert "`python3`" in candidate["claim"] and "`python`" in candidate["claim"]
    assert {e["quote"] for e in candidate["evidence"]} >= {"bash: line 1: python: command not found"}
    # a different command that happened to work next is no substitute
    other = [runs[0], call("a", 66, "ls -la specs/", "spec.md")]
    assert find_missing_programs(other, ["a"]) == []


def test_once_with_the_failed_command_run_through_another_program() -> None:
    runs = [call("a", 529, "cargo check --manifest-path kernel/Cargo.toml", "bash: line 1: cargo: command not found", 127),
            call("a", 539, "nix-shell -p cargo rustc --run 'cargo check --manifest-path kernel/Cargo.toml'", "Checking")]
    [item] = find_missing_programs(runs, ["a"])
    assert (item.program, item.instead, item.wrapped) == ("cargo", "nix-shell", True)
    assert "run it through `nix-shell`" in missing_candidate(item, {})["claim"]
    # another command through the same program is no way round this one
    other = [runs[0], call("a", 539, "nix-shell -p jq --run 'jq . a.json'", "{}")]
    assert find_missing_programs(other, ["a"]) == []


def test_a_program_that_worked_later_was_installed_meanwhile() -> None:
    runs = [call("a", 1, "pytest -q", "zsh:1: command not found: pytest", 127),
            call("b", 1, "pytest -q", "zsh:1: command not found: pytest", 127),
            call("b", 5, "pip install pytest", "Successfully installed pytest"),
            call("b", 7, "pytest -q", "3 passed")]
    assert find_missing_programs(runs, ["a", "b"]) == []
    assert [m.program for m in find_missing_programs(runs[:2], ["a", "b"])] == ["pytest"]


def test_a_toolchain_missing_together_is_one_finding() -> None:
    nothing = "INFO: Could not find files for the given pattern(s)."
    runs = [call("a", 1, "where.exe lua", nothing, 1), call("a", 2, "where.exe luac", nothing, 1),
            call("b", 1, "Get-Command lua -ErrorAction SilentlyContinue", "", 1), call("b", 2, "git status", "clean"),
            call("b", 3, "git diff", ""), call("b", 4, "ls", "a"), call("b", 5, "dir", "a"),
            call("b", 9, "Get-Command luac -ErrorAction SilentlyContinue", "", 1)]
    [item] = find_missing_programs(runs, ["a", "b"])
    assert (item.program, item.also) == ("lua", ["luac"])
    claim = missing_candidate(item, {}).get("claim", "")
    assert "`lua` and `luac` are not" in claim and "them" in claim


def test_a_pinned_program_is_left_to_the_routine() -> None:
    runs = [call(s, 1, "snmpwalk -v2c host", "zsh:1: command not found: snmpwalk", 127) for s in ("a", "b")]
    assert find_missing_programs(runs, ["a", "b"], pinned=frozenset({"snmpwalk"})) == []


def test_the_engine_writes_one_memory_not_a_second_pattern_of_the_same_errors() -> None:
    runs = [call(s, n, "python manage.py check", "bash: line 1: python: command not found", 127)
            for s in ("a", "b") for n in (3, 9)]
    answer = build_answer(runs, [], ["a", "b"], slugs={"a": "p", "b": "p"})
    [candidate] = answer["candidates"]
    # said of the project it ran in: another machine's sighting is not linked to it (corpus.about)
    assert candidate["claim"].startswith("In p, `python` is not on this machine's PATH")
    assert not any(len(e["quote"]) >= QUOTE_LEAK_MIN and e["quote"] in candidate["claim"] for e in candidate["evidence"])


def test_the_same_program_missing_on_two_nights_is_the_same_memory() -> None:
    """Whatever the wording (a substitute seen one night, not the other), corpus dedupe links them."""
    first = [call("a", 1, "python x.py", "bash: python: command not found", 127), call("a", 2, "python3 x.py", "ok")]
    second = [call(s, 1, "python y.py", "zsh:1: command not found: python", 127) for s in ("b", "c")]
    one = missing_candidate(find_missing_programs(first, ["a"])[0], {})
    two = missing_candidate(find_missing_programs(second, ["b", "c"])[0], {})
    assert one["claim"] != two["claim"]

    def about_of(c: dict) -> object:  # type: ignore[type-arg]
        return about(c["kind"], c["claim"], [f"{e['type']}:{e['name']}" for e in c["entities"]], ["p"])

    assert same_thing(about_of(one), about_of(two))  # type: ignore[arg-type]
    other = missing_candidate(find_missing_programs(
        [call(s, 1, "node y.js", "zsh:1: command not found: node", 127) for s in ("b", "c")], ["b", "c"])[0], {})
    assert not same_thing(about_of(one), about_of(other))  # type: ignore[arg-type]
    # named by project, the same program missing in another project's sessions is a memory of its own
    here = missing_candidate(find_missing_programs(second, ["b", "c"])[0], {"b": "site", "c": "site"})
    there = missing_candidate(find_missing_programs(second, ["b", "c"])[0], {"b": "lab", "c": "lab"})
    assert here["claim"].startswith("In site, `python`")
    assert not same_thing(about(here["kind"], here["claim"], ["tool:python", "error:command not found"], ["site"]),
                          about(there["kind"], there["claim"], ["tool:python", "error:command not found"], ["lab"]))


_PROGRAM = st.from_regex(r"[a-z][a-z0-9_-]{1,12}", fullmatch=True)


@given(program=_PROGRAM, other=_PROGRAM, shell=st.sampled_from(["bash: line 1: {}: command not found",
                                                                 "zsh:1: command not found: {}", "sh: 1: {}: not found"]))
def test_a_not_found_line_names_the_program_only_when_the_command_ran_it(program: str, other: str, shell: str) -> None:
    line = shell.format(program)
    found = absences(call("a", 1, f"{program} --version", line, 127))
    assert [a.program for a in found] == [program]
    if other != program:
        assert absences(call("a", 1, f"{other} --version", line, 127)) == []
