"""What a recurring error says is true, claimed plainly (`pipeline.consolidator.rules.error_claims`)."""

from __future__ import annotations

import pytest

from pipeline.consolidator.contract import QUOTE_LEAK_MIN
from pipeline.consolidator.rules.engine import build_answer
from pipeline.consolidator.rules.tool_runs import ToolResult


def failed(session: str, line: int, command: str, output: str, workdir: str | None = None, code: int = 1) -> ToolResult:
    tool_input: dict[str, object] = {"command": command, **({"workdir": workdir} if workdir else {})}
    return ToolResult(session, line, output, is_error=True, exit_code=code, name="shell_command", tool_input=tool_input,
                      call_id=f"{session}-{line}", call_line=line - 1)


def claim_of(runs: list[ToolResult], cwds: dict[str, str] | None = None) -> str:
    sessions = sorted({r.session_id for r in runs})
    [candidate] = build_answer(runs, [], sessions, slugs=dict.fromkeys(sessions, "p"), cwds=cwds)["candidates"]
    assert not any(len(e["quote"]) >= QUOTE_LEAK_MIN and e["quote"] in candidate["claim"] for e in candidate["evidence"])
    return str(candidate["claim"])


NOT_A_REPO = "fatal: not a git repository (or any of the parent directories): .git"


def test_folders_that_are_not_repositories_are_named() -> None:
    runs = [failed("a", 5, "git status --short", NOT_A_REPO, "C:\\Games\\Test_Mons"),
            failed("b", 7, "git diff", NOT_A_REPO, "C:\\Games\\HunHuan")]
    assert claim_of(runs) == ("In p, `Test_Mons` and `HunHuan` in C:\\Games are not git repositories: `git diff` "
                              "and `git status` failed there for want of one (across sessions).")
    # without a workdir, the session's own folder
    runs = [failed(s, 5, "git status", NOT_A_REPO) for s in ("a", "b")]
    assert claim_of(runs, {"a": "/w/site", "b": "/w/site"}).startswith("In w/site, `/w/site` is not a git repository:")


def test_a_folder_that_became_a_repository_later_is_no_finding() -> None:
    runs = [failed("a", 5, "git status", NOT_A_REPO, "/w/site"), failed("b", 5, "git status", NOT_A_REPO, "/w/site/app")]
    ok = ToolResult("c", 9, "## main", is_error=False, exit_code=0, name="shell_command",
                    tool_input={"command": "git status -sb", "workdir": "/w/site"}, call_id="c-9", call_line=8)
    answer = build_answer([*runs, ok], [], ["a", "b", "c"], slugs=dict.fromkeys("abc", "p"))
    assert answer["candidates"] == []
    # a repository made in a folder below is no repository above it
    below = ToolResult("c", 9, "## main", is_error=False, exit_code=0, name="shell_command",
                       tool_input={"command": "git status -sb", "workdir": "/w/site/app"}, call_id="c-9", call_line=8)
    assert len(build_answer([*runs, below], [], ["a", "b", "c"], slugs=dict.fromkeys("abc", "p"))["candidates"]) == 1


def test_modules_named_by_the_error_are_named_by_the_claim() -> None:
    runs = [failed(s, 3, "python3 tools/gen.py", f"Traceback (most recent call last):\nModuleNotFoundError: No module named '{m}'")
            for s, m in (("a", "yaml"), ("b", "yaml"))]
    assert claim_of(runs).startswith("In p, the Python module `yaml` is not installed for the Python that ran `python3`")
    # a module installed by a later call that worked is no finding
    later = ToolResult("b", 9, "Successfully installed PyYAML-6.0", is_error=False, exit_code=0, name="shell_command",
                       tool_input={"command": "pip install pyyaml"}, call_id="b-9", call_line=8)
    assert build_answer([*runs, later], [], ["a", "b"], slugs={"a": "p", "b": "p"})["candidates"] == []
    # and a command of another program in the same call is not "the Python that ran"
    both = [failed(s, 3, "identify x.png; python3 -c 'import PIL'", "ModuleNotFoundError: No module named 'PIL'")
            for s in ("a", "b")]
    assert "ran `python3`" in claim_of(both) and "identify" not in claim_of(both)


@pytest.mark.parametrize(("output", "start"), [
    ("Cannot open netlink socket: Operation not permitted", "In p, `ip addr` is not permitted where the agent runs"),
    ("Command timed out after 2m 0.0s", "In p, `ip addr` ran into the tool call's time limit"),
])
def test_a_refusal_or_a_time_limit_is_said_of_the_commands(output: str, start: str) -> None:
    assert claim_of([failed(s, 3, "ip addr show eth0", output) for s in ("a", "b")]).startswith(start)


def test_other_errors_keep_their_plain_form() -> None:
    runs = [failed(s, 3, "npm install", "npm ERR! code ENOTEMPTY") for s in ("a", "b")]
    assert claim_of(runs) == "ENOTEMPTY recurs in failed `npm` across sessions."
    # a fingerprint reader's "Verification timed out" is no tool time limit
    runs = [failed(s, 3, "sudo true", "Verification timed out") for s in ("a", "b")]
    assert "time limit" not in claim_of(runs)


def test_two_findings_that_read_the_same_are_one_candidate() -> None:
    from pipeline.consolidator.rules.engine import _one_per_claim

    def cand(claim: str, *quotes: tuple[str, str]) -> dict:  # type: ignore[type-arg]
        return {"kind": "error_pattern", "claim": claim, "gist": "g", "entities": [],
                "evidence": [{"sessionId": s, "quote": q} for s, q in quotes]}

    same = "no matches found recurs in failed `zsh` across sessions."
    merged = _one_per_claim([cand(same, ("a", "zsh:1: no matches found: src/[id]/x.ts")),
                             cand(same.upper(), ("b", "zsh:1: no matches found: (site)/y.ts"),
                                  ("a", "zsh:1: no matches found: src/[id]/x.ts")),
                             cand("ENOTEMPTY recurs in failed `npm` across sessions.", ("a", "npm ERR! code ENOTEMPTY"))])
    assert [c["claim"] for c in merged] == [same, "ENOTEMPTY recurs in failed `npm` across sessions."]
    assert [e["sessionId"] for e in merged[0]["evidence"]] == ["a", "b"]


def test_a_sandbox_refusal_that_escalation_got_round_says_so() -> None:
    refused = "Cannot open netlink socket: Operation not permitted"
    escalated = ToolResult("b", 9, "1: lo: <LOOPBACK,UP>", is_error=False, exit_code=0, name="exec_command",
                           tool_input={"cmd": "bash -lc 'ip addr && ip route'", "sandbox_permissions": "require_escalated"},
                           call_id="b-9", call_line=8)
    claim = claim_of([failed("a", 3, "ip addr", refused), failed("b", 3, "ip addr", refused), escalated])
    assert claim.startswith("In p, `ip addr` is not permitted in the agent's sandbox, and worked with escalated permissions (b line 8)")


def test_refusals_of_unrelated_hosts_are_no_pattern_but_one_host_refusing_again_is() -> None:
    from pipeline.consolidator.rules.error_shapes import find_error_patterns

    def fetch(session: str, line: int, url: str) -> ToolResult:
        return ToolResult(session, line, "Request failed with status code 403", is_error=True, name="WebFetch",
                          tool_input={"url": url, "prompt": "read it"}, call_id=f"{session}-{line}", call_line=line - 1)

    hosts = [fetch("a", 3, "https://archive.stsci.edu/x"), fetch("a", 5, "https://images.nasa.gov/y"),
             fetch("b", 4, "https://api.nasa.gov/planetary/apod")]
    assert find_error_patterns(hosts, ["a", "b"]) == []
    again = [fetch("a", 3, "https://api.example.org/v1/a"), fetch("b", 4, "https://api.example.org/v1/b")]
    [found] = find_error_patterns(again, ["a", "b"])
    assert found.missing == "host:api.example.org"


def test_a_word_zsh_read_as_a_pattern_is_to_be_quoted() -> None:
    runs = [failed(s, 3, f"sed -n '1,80p' src/app/(admin)/{page}/page.tsx",
                   f"zsh:1: no matches found: src/app/(admin)/{page}/page.tsx") for s, page in (("a", "users"), ("b", "teams"))]
    claim = claim_of(runs)
    assert claim.startswith("In p, quote words that hold `(` `)` in shell commands: `zsh` reads them as a file pattern")
    assert "`src/app/(admin)/users/page.tsx`" in claim and claim.endswith("(across sessions).")
    # the same command with the word quoted, working next, is named
    quoted = ToolResult("b", 5, "export default function Page() {}", is_error=False, exit_code=0, name="shell_command",
                        tool_input={"command": "sed -n '1,80p' \"src/app/(admin)/teams/page.tsx\""}, call_id="b-5", call_line=4)
    assert claim_of([*runs, quoted]).endswith("(across sessions); quoted, the same command worked.")
    # brackets and a yt-dlp output template
    runs = [failed(s, 3, "yt-dlp -o %(title)s.%(ext)s URL", "zsh:1: no matches found: %(title)s.%(ext)s") for s in "ab"]
    assert "`(` `)`" in claim_of(runs)
    runs = [failed(s, 3, "cat app/[id]/page.tsx", "zsh:1: no matches found: app/[id]/page.tsx") for s in "ab"]
    assert "`[` `]`" in claim_of(runs)


def test_a_path_git_bash_rewrote_is_to_start_with_dot_slash() -> None:
    mangled = "fatal: pathspec '!C:/Users/ana/AppData/Local/Programs/Git/!{}.md' did not match any files"
    runs = [failed(s, 3, f"git add \"!/!{name}.md\"", "Exit code 128\n" + mangled.format(name)) for s, name in (("a", "README"), ("b", "NOTES"))]
    claim = claim_of(runs)
    assert claim == ("In p, Git Bash rewrote path arguments into paths under Git's own folder "
                     "(`C:/Users/ana/AppData/Local/Programs/Git/`), so `git add` found no such files (across sessions): "
                     "start such paths with `./`.")
    fixed = ToolResult("b", 5, "", is_error=False, exit_code=0, name="shell_command",
                       tool_input={"command": "git add -- './!/!NOTES.md'"}, call_id="b-5", call_line=4)
    assert claim_of([*runs, fixed]).endswith("start such paths with `./`; with `./` in front, the same command worked.")
    # a plain missing path names no folder of Git's and keeps its plain form
    plain = [failed(s, 3, "git add docs/x.md", "fatal: pathspec 'docs/x.md' did not match any files") for s in "ab"]
    assert "Git Bash" not in claim_of(plain)


def test_a_folder_named_git_is_not_git_bash_s_own() -> None:
    runs = [failed(s, 3, "git add src/x.ts", "fatal: pathspec 'D:/Git/shop/src/x.ts' did not match any files") for s in "ab"]
    assert "Git Bash" not in claim_of(runs)
