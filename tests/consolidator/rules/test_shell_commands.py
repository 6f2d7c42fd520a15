"""The rules engine's command parser: what a tool call ran, split the way a person reads a shell line."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.consolidator.rules.shell_commands import (
    describe,
    is_checker,
    is_inspection,
    parse,
    patch_targets,
    program_name,
    tool_command,
    tool_target,
)


def words(command: str) -> list[list[str]]:
    return [s.words for s in parse(command).segments]


def test_segments_env_wrappers_runners_and_redirections() -> None:
    cmd = parse("cd app && PYTHONPATH=. uv run pytest -q tests/ 2>&1 | tail -5")
    assert [s.program for s in cmd.segments] == ["cd", "pytest", "tail"]
    main = cmd.main
    assert main is not None and main.env == ["PYTHONPATH=."] and main.words == ["pytest", "-q", "tests/"]
    assert main.flags == ["-q"] and main.operands == ["tests/"] and main.key() == "PYTHONPATH=. pytest -q"
    assert cmd.pipes_stderr
    assert words("sudo -E env FOO=1 timeout 30 python3 -m mypy src") == [["mypy", "src"]]
    assert words("ls missing 2>/dev/null > out.txt") == [["ls", "missing"]]


def test_separators_inside_quotes_do_not_split() -> None:
    assert words("echo 'a && b; c | d' && rg \"x|y\" src") == [["echo", "a && b; c | d"], ["rg", "x|y", "src"]]


def test_windows_paths_keep_their_backslashes() -> None:
    assert words('rg -n "" .crewai\\README.md') == [["rg", "-n", "", ".crewai\\README.md"]]
    assert program_name("C:\\Tools\\rg.exe") == "rg"


def test_here_documents_are_input_not_commands() -> None:
    cmd = "python3 - <<'EOF'\nimport os\nX=1 os.system('rm -rf /')\nEOF\necho done"
    assert [s.program for s in parse(cmd).segments] == ["python3", "echo"]
    assert [s.program for s in parse("$x = @'\nrm -rf everything\n'@; Write-Output $x").segments][-1] == "Write-Output"


def test_shell_loops_and_conditionals_are_looked_through() -> None:
    main = parse("for i in 1 2; do uv run pytest -q tests/t.py || break; done").main
    assert main is not None and main.program == "pytest"


def test_what_a_tool_call_ran_in_each_format() -> None:
    assert tool_command("Bash", {"command": "npm test"}) == "npm test"
    assert tool_command("shell", {"command": ["bash", "-lc", "make check"]}) == "make check"
    assert tool_command("shell", json.dumps({"command": ["powershell.exe", "-NoProfile", "-Command", "Get-ChildItem -Force"]})) == "Get-ChildItem -Force"
    assert tool_command("shell_command", {"command": "git status"}) == "git status"
    assert tool_command("exec_command", {"cmd": "rg -n foo"}) == "rg -n foo"
    assert tool_command("shell", {"command": ["ls", "-la"]}) == "ls -la"
    assert tool_command("shell", {"command": ["apply_patch", "*** Begin Patch\n*** Update File: a.py\n"]}) is None
    assert tool_command("Read", {"file_path": "/x/a.py"}) is None


def test_what_a_file_tool_or_a_patch_acts_on() -> None:
    assert tool_target("Edit", {"file_path": "/x/a.py", "old_string": "a"}) == "/x/a.py"
    patch = "*** Begin Patch\n*** Delete File: docs/a.md\n*** Add File: docs/a.md\n+x\n*** End Patch"
    assert tool_target("shell", {"command": ["apply_patch", patch]}) == "docs/a.md"
    assert tool_target("apply_patch", json.dumps(patch)) == "docs/a.md"
    assert patch_targets(patch) == [("Delete", "docs/a.md"), ("Add", "docs/a.md")]
    assert describe("shell", {"command": ["apply_patch", patch]}) == "apply_patch (Delete File, Add File) docs/a.md"


@pytest.mark.parametrize(
    ("command", "checker"),
    [
        ("pytest -q", True), ("uv run mypy pipeline", True), ("npm test", True), ("npm run lint:fix", True),
        ("cargo clippy --all", True), ("make check", True), ("yarn test_web --grep x", False),
        ("npm run dev", False), ("npm install", False), ("git status", False), ("cat README.md", False),
    ],
)
def test_checks(command: str, checker: bool) -> None:
    main = parse(command).main
    assert main is not None and is_checker(main) is checker


def test_inspection() -> None:
    for command in ("ls -la", "git log -5", "Get-ChildItem -Force", "cat a.txt", "rg -n x"):
        main = parse(command).main
        assert main is not None and is_inspection(main), command
    for command in ("git add a.txt", "rm -rf build", "npm install", "node -e 'x'"):
        main = parse(command).main
        assert main is not None and not is_inspection(main), command


@given(st.lists(st.text(alphabet="abcdefgh-./=_ ", min_size=1, max_size=12), min_size=1, max_size=4),
       st.sampled_from([" && ", " || ", "; ", " | ", "\n"]))
def test_every_segment_is_a_piece_of_the_command(parts: list[str], separator: str) -> None:
    command = separator.join(parts)
    for segment in parse(command).segments:
        assert segment.text in command


def test_a_code_mode_script_s_one_command_as_the_script_spells_it() -> None:
    script = ('const r = await tools.shell_command({command:"Get-Content -Raw -Encoding UTF8 \'D:\\\\Docs\\\\a.md\'",'
              '"workdir":"C:\\\\W"});\ntext(r);\n')
    assert tool_command("exec", script) == "Get-Content -Raw -Encoding UTF8 'D:\\\\Docs\\\\a.md'"
    assert tool_command("exec", 'await tools.shell_command({\n  "command": "where.exe lua",\n  timeout_ms: 1});') == "where.exe lua"
    # several commands in one script: their results are mixed, so none is the call's command
    assert tool_command("exec", 'await tools.shell_command({command:"a b"}); await tools.shell_command({command:"c d"})') is None
    assert tool_command("exec", "const p = await tools.update_plan({plan: []});") is None
