"""What worked after a failure (`pipeline.consolidator.rules.workarounds`)."""

from __future__ import annotations

from pipeline.consolidator.rules.tool_runs import ToolResult, outcomes
from pipeline.consolidator.rules.workarounds import find_workaround


def run(command: str, text: str = "", *, code: int = 0, line: int = 2, name: str = "Bash", tool_input: object = None) -> ToolResult:
    return ToolResult("s1", line, text, is_error=code != 0, exit_code=code, name=name,
                      tool_input=tool_input if tool_input is not None else {"command": command}, call_line=line - 1)


def after(failed: ToolResult, *later: ToolResult):  # type: ignore[no-untyped-def]
    states = outcomes(list(later))
    return find_workaround(failed, list(zip(later, states, strict=True)))


def test_the_same_command_with_a_setting_added() -> None:
    failed = run("dl --client web https://example.test/v", "ERROR: HTTP Error 403: Forbidden", code=1)
    worked = run("dl --client android https://example.test/v", "done", line=6)
    found = after(failed, run("ls -la", "x", line=4), worked)
    assert found is not None and found.strong and found.how == "added" and found.added == ["--client android"]
    assert found.run is worked


def test_another_program_on_the_same_target() -> None:
    failed = run("rm -rf node_modules/pkg", "# Un-recognized argument -rf at index 1", code=1)
    looked = run("ls -la node_modules/pkg", "total 0", line=4)  # only looks: never a workaround
    worked = run("node -e \"require('fs').rmSync('node_modules/pkg', {recursive: true})\"", "", line=6)
    found = after(failed, looked, worked)
    assert found is not None and found.strong and found.how == "same target" and found.run is worked


def test_a_patch_that_does_other_operations_on_the_same_file() -> None:
    update = "*** Begin Patch\n*** Update File: notes.md\n@@\n-a\n+b\n*** End Patch"
    replace = "*** Begin Patch\n*** Delete File: notes.md\n*** Add File: notes.md\n+b\n*** End Patch"
    failed = run("", "error: Failed to find expected lines", code=1, name="shell", tool_input={"command": ["apply_patch", update]})
    worked = run("", "Done", line=6, name="shell", tool_input={"command": ["apply_patch", replace]})
    found = after(failed, worked)
    assert found is not None and found.strong and found.how == "other operations"


def test_a_flag_whose_value_is_a_path_names_another_target() -> None:
    failed = run("tool export --input data/a.csv", "Traceback…\nKeyError: 'x'", code=1)
    worked = run("tool export --input data/b.csv", "ok", line=4)
    found = after(failed, worked)
    assert found is not None and not found.strong and found.how == "same program"


def test_nothing_worked() -> None:
    failed = run("make deploy", "make: *** [deploy] Error 2", code=2)
    assert after(failed, run("make deploy", "make: *** [deploy] Error 2", code=2, line=4), run("git status", "clean", line=6)) is None


def test_a_flag_of_a_command_that_only_looks_is_no_fix() -> None:
    failed = run("git remote set-url origin https://example.test/r.git && git push 2>&1",
                 "fatal: could not read Username for 'https://example.test': No such device or address", code=128)
    looked = run("git remote -v && gh auth status 2>&1", "origin https://example.test/r.git (fetch)", line=4)
    found = after(failed, looked)
    assert found is None or found.how != "added"
