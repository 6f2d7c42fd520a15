"""Procedures and constraints read from how commands are run (`pipeline.consolidator.rules.routines`)."""

from __future__ import annotations

from pipeline.consolidator.rules.routines import find_routines, project_name, routine_candidate
from pipeline.consolidator.rules.tool_runs import ToolResult


def ran(session: str, line: int, command: str, output: str = "ok") -> ToolResult:
    return ToolResult(session, line + 1, output, is_error=False, exit_code=0, name="Bash",
                      tool_input={"command": command}, call_id=f"{session}-{line}", call_line=line)


def kinds(routines) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return [(r.kind, r.key) for r in routines]


SLUGS = {s: "proj" for s in ("a", "b", "c", "d")}


def test_an_environment_prefix_on_commands_of_two_sessions() -> None:
    runs = [ran("a", 3, "PYTHONPATH=. pytest -q"), ran("b", 5, "PYTHONPATH=. python -m tool build")]
    assert kinds(find_routines(runs, ["a", "b"], SLUGS)) == [("env", "PYTHONPATH=.")]
    # once in one session is nothing; three times is a routine
    assert find_routines(runs[:1], ["a"], SLUGS) == []
    solo = [ran("a", n, f"LANG=C sort f{n}.txt") for n in (1, 3, 5)]
    assert kinds(find_routines(solo, ["a"], SLUGS)) == [("env", "LANG=C")]


def test_a_program_called_by_its_full_path() -> None:
    runs = [ran("a", n, f"/opt/tools/bin/snmpq -v2c 10.0.0.{n}") for n in (1, 3, 5)]
    [routine] = find_routines(runs, ["a"], SLUGS)
    assert (routine.kind, routine.key) == ("path", "/opt/tools/bin/snmpq")
    candidate = routine_candidate(routine, {"proj": "lab"})
    assert candidate["kind"] == "procedural" and "`snmpq`" in candidate["claim"] and "lab" in candidate["claim"]
    assert len({e["quote"] for e in candidate["evidence"]}) == len(candidate["evidence"]) >= 2


def test_a_check_run_in_most_sessions() -> None:
    runs = [ran("a", 2, "npm test -- a.spec.ts"), ran("b", 2, "npm test"), ran("c", 9, "npm run build")]
    assert kinds(find_routines(runs, ["a", "b", "c"], SLUGS)) == [("check", "npm test")]
    # in one session of four it is not the project's routine
    assert find_routines([*runs[:1], ran("b", 2, "ls")], ["a", "b", "c", "d"], SLUGS) == []


def test_a_project_s_only_session_needs_repeated_checks() -> None:
    runs = [ran("a", n, "cargo test --all", "test result: ok. 12 passed") for n in (2, 4, 6)]
    assert find_routines(runs, ["a"], SLUGS) == []
    runs.append(ran("a", 8, "cargo test --all", "test result: ok. 13 passed"))
    [routine] = find_routines(runs, ["a"], SLUGS)
    assert routine.kind == "check"
    quotes = [e["quote"] for e in routine_candidate(routine, {})["evidence"]]
    assert "cargo test --all" in quotes and any("passed" in q for q in quotes)


def test_a_step_needs_three_sessions_and_most_of_them() -> None:
    step = "rm -rf .pytest_cache"
    two = [ran("a", 2, step), ran("b", 2, step)]
    assert find_routines(two, ["a", "b", "c"], SLUGS) == []
    three = [*two, ran("c", 2, step)]
    assert kinds(find_routines(three, ["a", "b", "c"], SLUGS)) == [("step", step)]
    assert find_routines(three, ["a", "b", "c", "d", "e", "f", "g"], {**SLUGS, "e": "proj", "f": "proj", "g": "proj"}) == []


def test_a_subagent_is_part_of_its_parent_s_session() -> None:
    runs = [ran("a", 2, "FOO=1 make"), ran("agent-x", 2, "FOO=1 make")]
    slugs = {"a": "proj", "agent-x": "proj"}
    assert find_routines(runs, ["a", "agent-x"], slugs, roots={"agent-x": "a"}) == []
    assert kinds(find_routines(runs, ["a", "agent-x"], slugs)) == [("env", "FOO=1")]


def test_one_command_feeds_one_routine() -> None:
    runs = [ran(s, 2, "PYTHONPATH=. pytest -q") for s in ("a", "b", "c")]
    assert kinds(find_routines(runs, ["a", "b", "c"], SLUGS)) == [("env", "PYTHONPATH=.")]


def test_project_names() -> None:
    assert project_name("-home-ana-src-shop", "/home/ana/src/shop") == "shop"
    assert project_name("C--Users-x-Vault", "C:\\Users\\x\\Vault") == "Vault"
    assert project_name("slug-only", None) == "slug-only"
    # Two buildroot checkouts whose last folder is `dl` keep apart; a home folder reads as one.
    assert project_name("x", "/home/moxa/sdc1/home/moxa/SNMP_PLAN_E/buildroot/dl") == "SNMP_PLAN_E/buildroot/dl"
    assert project_name("x", "/home/moxa/sdc1/home/moxa/mds4xgl3/buildroot/dl") == "mds4xgl3/buildroot/dl"
    assert project_name("x", "/Users/liza") == "~liza"
    assert project_name("x", "C:\\Users\\loganf") == "~loganf"
    assert project_name("x", "/srv/src") == "srv/src"


def test_reading_a_file_in_every_session_is_not_a_routine() -> None:
    """`cat package.json`, `rg --files -g AGENTS.md`, `sed -n` on a file in most sessions: how an agent
    finds its way around, the noise a reviewer of the real sessions read most often."""
    for step in ("cat package.json", "rg --files -g 'AGENTS.md'", "sed -n '1,80p' docs/setup.md", "ls -la src/app"):
        runs = [ran(s, 2, step) for s in ("a", "b", "c")]
        assert find_routines(runs, ["a", "b", "c"], SLUGS) == [], step


def test_a_check_run_through_a_package_manager_names_its_script() -> None:
    runs = [ran("a", 2, "npm run lint"), ran("b", 2, "npm run build"), ran("c", 2, "npm run test")]
    assert find_routines(runs, ["a", "b", "c"], SLUGS) == []  # three scripts: no one check
    runs = [ran("a", 2, "npm run lint"), ran("b", 2, "npm run lint"), ran("c", 2, "npm run build")]
    [routine] = find_routines(runs, ["a", "b", "c"], SLUGS)
    assert routine.key == "npm run lint" and "`npm run lint`" in routine_candidate(routine, {})["claim"]


def test_not_on_path_only_when_the_bare_name_failed() -> None:
    runs = [ran("a", n, f"/usr/bin/snmpwalk -v2c -c public 10.0.0.{n}") for n in (1, 3, 5)]
    [routine] = find_routines(runs, ["a"], SLUGS)
    assert "not on PATH" not in routine_candidate(routine, {})["gist"]  # the bare name was never tried
    bare = ToolResult("a", 8, "Exit code 127\nbash: snmpwalk: command not found", is_error=True, exit_code=127, name="Bash",
                      tool_input={"command": "snmpwalk -v2c -c public 10.0.0.9"}, call_id="a-7", call_line=7)
    [routine] = find_routines([*runs, bare], ["a"], SLUGS)
    assert routine.bare_name_failed and "not on PATH" in routine_candidate(routine, {})["gist"]


def test_the_harness_s_own_variables_set_by_hand_are_not_a_setting() -> None:
    runs = [ran("a", n, f'CLAUDE_PROJECT_DIR="/Users/x/app" terminal-notifier -message t{n}') for n in (1, 3, 5)]
    assert find_routines(runs, ["a"], SLUGS) == []


def test_the_project_named_is_that_of_the_sessions_cited() -> None:
    runs = [ran(s, 3, "PYTHONPATH=. pytest -q") for s in ("a", "b")]
    [routine] = find_routines(runs, ["a", "b"], SLUGS)
    assert routine_candidate(routine, {"a": "ledger", "b": "ledger", "proj": "elsewhere"})["claim"].startswith("In ledger,")


def test_settings_that_come_together_and_kept_working_are_one_routine() -> None:
    # lms-go: the build cache moved into the checkout (a value built on the working folder is steady),
    # always beside GOPROXY=off; two other caches tried and failing are the agent searching
    both = "GOCACHE=$(pwd)/.gobuild-cache GOPROXY=off go test ./..."
    tries = [ToolResult("a", n + 1, "permission denied", is_error=True, exit_code=1, name="Bash",
                        tool_input={"command": "GOCACHE=$(pwd)/.cache go test ./..."}, call_id=f"x{n}", call_line=n)
             for n in (1, 3)]
    runs = [*tries, ran("a", 5, "GOCACHE=$(pwd)/.cache go vet ./..."), *(ran("a", n, both) for n in (7, 9, 11))]
    assert kinds(find_routines(runs, ["a"], SLUGS)) == [("env", "GOCACHE=$(pwd)/.gobuild-cache GOPROXY=off")]
    # the same three tries as the session's last word are its setting
    assert ("env", "GOCACHE=$(pwd)/.cache") in kinds(find_routines(runs[:3], ["a"], SLUGS))
    # a value the shell computes from something else is not a setting to remember
    computed = [ran("a", n, "STAMP=$(date +%s) make build") for n in (1, 3, 5)]
    assert find_routines(computed, ["a"], SLUGS) == []
