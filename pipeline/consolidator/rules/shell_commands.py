"""What a tool call ran, read the way a person reads a shell line: the rules engine's command parser.

Every agent records its commands differently: Claude Code's `Bash` takes `{"command": "…"}`, Codex's
`shell` an argument vector (`["bash", "-lc", "…"]`, `["powershell.exe", "-Command", "…"]`,
`["apply_patch", "*** Begin Patch…"]`), `shell_command` a string, `exec_command` a `cmd`. File tools
(`Read`, `Edit`, `Write`, `apply_patch`, …) act on a path instead. `tool_command` turns any of them
into the text that ran (a substring of what the transcript stores, so it can be quoted), and
`parse` splits that text into segments (`&&`, `||`, `;`, `|` and new lines, outside quotes), each
with its environment assignments (`PYTHONPATH=. pytest`), the program (wrappers such as `sudo`,
`env`, `time`, `uv run`, `npx` or `python -m` looked through, so `uv run pytest` runs `pytest`), its
flags and its operands. Nothing here is a heuristic about meaning except the three fixed lists at
the end: which programs only look at things (`INSPECTION`), which ones check a project (`is_checker`),
and which ones search (`SEARCH`).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FILE_TOOLS",
    "INSPECTION",
    "SEARCH",
    "SYNTAX",
    "WRITE_TOOLS",
    "Command",
    "Segment",
    "describe",
    "is_checker",
    "is_inspection",
    "parse",
    "patch_targets",
    "patch_text",
    "program_name",
    "summary",
    "tool_command",
    "tool_target",
    "written_files",
]

# Tools that act on one file or folder, and the input field that names it.
FILE_TOOLS: dict[str, tuple[str, ...]] = {
    "Read": ("file_path", "path"),
    "Edit": ("file_path",),
    "MultiEdit": ("file_path",),
    "Write": ("file_path",),
    "NotebookEdit": ("notebook_path",),
    "Glob": ("path", "pattern"),
    "Grep": ("path", "pattern"),
    "LS": ("path",),
    "view_image": ("path",),
}

# Shell words that run another command: the program is what follows them (their own options skipped).
_WRAPPERS = {"sudo", "env", "time", "nohup", "exec", "command", "nice", "stdbuf", "timeout", "xargs", "caffeinate"}
# Runners whose next word (after their options) is the real program: `uv run pytest`, `npx tsc`.
_RUNNERS: dict[str, tuple[str, ...]] = {
    "uv": ("run",), "poetry": ("run",), "pipenv": ("run",), "pdm": ("run",), "hatch": ("run",), "rye": ("run",),
    "bundle": ("exec",), "pnpm": ("exec", "dlx"), "yarn": ("dlx",), "npx": (), "bunx": (), "pnpx": (),
}
_PYTHONS = re.compile(r"^(?:python|python\d(?:\.\d+)?|py|pypy3?)$")
# `bash -lc "…"`, `sh -c`, `zsh -lc`, `powershell -Command "…"`, `cmd /c …`: the command is the argument.
_SHELLS = re.compile(r"^(?:bash|sh|zsh|dash|fish|ksh|pwsh|powershell|cmd)$")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SPLIT = re.compile(r"(\|\||&&|;|\||\n)")


def program_name(word: str) -> str:
    """The program a word names: its base name, without `.exe`, lower case for Windows names."""
    base = re.split(r"[\\/]", word.strip("\"'"))[-1]
    if base.lower().endswith((".exe", ".cmd", ".bat")):
        base = base[: -4].lower()
    return base


def is_shell(name: str) -> bool:
    """Is this program a shell (`bash`, `zsh`, `powershell`, `cmd`, …)?"""
    return bool(_SHELLS.match(program_name(name).lower()))


def _shell_inner(argv: Sequence[str]) -> str | None:
    """The command string a shell invocation runs (`bash -lc X` → X, `powershell -Command X` → X)."""
    if not argv or not is_shell(argv[0]):
        return None
    for i, arg in enumerate(argv[1:], start=1):
        low = arg.lower()
        if low in ("-c", "-lc", "-ic", "-command", "/c", "/k") or (low.startswith("-") and low.endswith("c") and len(low) <= 4):
            rest = argv[i + 1 :]
            return " ".join(rest) if rest else None
    return None


# Code mode (Codex's `exec`): a JavaScript script that calls the shell tool, `tools.shell_command({command:
# "…", workdir: "…"})`. Its one command is the string literal, as the script spells it.
_SCRIPT_SHELL = re.compile(r"tools\.(?:shell_command|exec_command)\(")
_SCRIPT_COMMAND = re.compile(r'tools\.(?:shell_command|exec_command)\(\s*\{\s*"?(?:command|cmd)"?\s*:\s*"((?:[^"\\\n]|\\.)*)"')


def _script_command(code: str) -> str | None:
    """The command a code-mode script runs, when it runs exactly one (several: their results are mixed)."""
    if len(_SCRIPT_SHELL.findall(code)) != 1:
        return None
    found = _SCRIPT_COMMAND.search(code)
    return found.group(1) if found and found.group(1).strip() else None


def tool_command(name: str, tool_input: Any) -> str | None:
    """The shell command a tool call ran, as stored in the transcript (None for non-shell tools).

    The result is one string value of the call's input (or of an argument vector), so a quote of it
    is verbatim; an argument vector without a shell wrapper is joined with spaces. A code-mode script
    (`exec`) that runs one command gives that command's string literal as the script spells it (its
    backslashes still escaped), which is what a quote of it finds in the stored line.
    """
    data = _as_json(tool_input)
    if name == "exec" and isinstance(data, str):
        return _script_command(data)
    if isinstance(data, dict):
        for key in ("command", "cmd"):
            value = data.get(key)
            if isinstance(value, str) and value.strip():
                return value
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                inner = _shell_inner(value)
                if inner is not None:
                    return inner
                if program_name(value[0]) == "apply_patch":
                    return None  # a patch, not a command line: see tool_target
                return " ".join(value)
        action = data.get("action")
        if isinstance(action, dict):
            return tool_command(name, action)
    return None


def patch_targets(patch: str) -> list[tuple[str, str]]:
    """(operation, path) of every file an apply_patch body touches: `*** Update File: x` → ("Update", "x")."""
    return [(m.group(1), m.group(2).strip()) for m in re.finditer(r"\*\*\* (Add|Update|Delete) File: ([^\n]+)", patch)]


def patch_text(tool_input: Any) -> str | None:
    """The apply_patch body a call carries (decoded), if any."""
    data = _as_json(tool_input)
    if isinstance(data, str):
        return data if "*** Begin Patch" in data else None
    if isinstance(data, dict):
        for key in ("command", "input", "patch"):
            value = data.get(key)
            text = value[-1] if isinstance(value, list) and value and isinstance(value[-1], str) else value
            if isinstance(text, str) and "*** Begin Patch" in text:
                return text
    return None


# File tools that change the file they name (Read, Glob, Grep and LS only look).
WRITE_TOOLS = ("Edit", "MultiEdit", "Write", "NotebookEdit")


def written_files(name: str, tool_input: Any) -> list[str]:
    """The files a call writes or edits: a writing file tool's path, or every file a patch adds or updates."""
    patch = patch_text(tool_input)
    if patch is not None:
        return [path for op, path in patch_targets(patch) if op in ("Add", "Update")]
    if name in WRITE_TOOLS:
        target = tool_target(name, tool_input)
        return [target] if target else []
    return []


def tool_target(name: str, tool_input: Any) -> str | None:
    """The file or folder a file tool (or a patch) acts on; None when there is none."""
    data = _as_json(tool_input)
    if isinstance(data, dict):
        for key in FILE_TOOLS.get(name, ()):
            value = data.get(key)
            if isinstance(value, str) and value:
                return value
    patch = patch_text(tool_input)
    if patch is not None:
        targets = patch_targets(patch)
        return targets[0][1] if targets else None
    return None


def _as_json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


@dataclass
class Segment:
    """One simple command of a command line."""

    text: str
    env: list[str] = field(default_factory=list)  # VAR=value assignments before the program
    words: list[str] = field(default_factory=list)  # the program's words, program first
    piped: bool = False  # its output goes into a `|`

    @property
    def program(self) -> str:
        return program_name(self.words[0]) if self.words else ""

    @property
    def program_word(self) -> str:
        return self.words[0] if self.words else ""

    @property
    def flags(self) -> list[str]:
        """Words that are options (`--` ends them; what follows it is operands)."""
        out = []
        for w in self.words[1:]:
            if w == "--":
                break
            if w.startswith("-") and len(w) > 1:
                out.append(w)
        return out

    @property
    def operands(self) -> list[str]:
        words = self.words[1:]
        if "--" in words:
            cut = words.index("--")
            return [w for w in words[:cut] if not w.startswith("-")] + words[cut + 1 :]
        return [w for w in words if not w.startswith("-")]

    def key(self) -> str:
        """The segment without its operands: env, program (and subcommand), flags. Two runs of the
        same check on different files share it."""
        sub = self.words[1] if len(self.words) > 1 and re.fullmatch(r"[a-z][a-z0-9:_-]*", self.words[1]) else ""
        parts = [*sorted(self.env), program_name(self.program_word), sub, *self.flags]
        return " ".join(p for p in parts if p)


@dataclass
class Command:
    """A parsed command line: its segments in order."""

    text: str
    segments: list[Segment]

    @property
    def main(self) -> Segment | None:
        """The segment that does the work: the first that is not `cd`/`Set-Location`/`export`/`source`
        (nor a `mkdir` that prepares for a later one) or shell syntax."""
        working = [s for s in self.segments if s.words and s.program.lower() not in SYNTAX]
        for i, seg in enumerate(working):
            prog = seg.program.lower()
            if prog in ("cd", "pushd", "set-location", "export", "source", ".", "set"):
                continue
            if prog in ("mkdir", "md") and i + 1 < len(working):
                continue  # making the folder the real command writes to
            return seg
        return working[0] if working else (self.segments[0] if self.segments else None)

    @property
    def programs(self) -> list[str]:
        return [s.program for s in self.segments if s.words]

    @property
    def pipes_stderr(self) -> bool:
        """True when a segment merges its errors into a pipe (`cmd 2>&1 | head`): the shell then
        reports the status of the last stage, so a failure of the first one reads as success."""
        return any(s.piped and ("2>&1" in s.text or "|&" in s.text) for s in self.segments)


def _tokens(text: str) -> list[str]:
    """Words of a simple command, outer quotes removed; backslashes stay (Windows paths keep theirs)."""
    try:
        lexer = shlex.shlex(text, posix=False)
        lexer.whitespace_split = True
        lexer.commenters = ""
        words = list(lexer)
    except ValueError:  # unbalanced quotes: fall back to plain words
        words = text.split()
    return [w[1:-1] if len(w) >= 2 and w[0] == w[-1] and w[0] in "'\"" else w for w in words]


def _split_outside_quotes(text: str) -> list[tuple[str, str]]:
    """(segment text, operator that ends it) for a command line, splitting only outside quotes."""
    out: list[tuple[str, str]] = []
    buf: list[str] = []
    quote = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            buf.append(ch)
            if ch == quote:
                quote = ""
            elif ch == "\\" and quote == '"' and i + 1 < len(text):
                buf.append(text[i + 1])
                i += 1
            i += 1
            continue
        if ch in ("'", '"'):
            quote = ch
            buf.append(ch)
            i += 1
            continue
        match = _SPLIT.match(text, i)
        if match and not (ch == "|" and i > 0 and text[i - 1] == ">"):
            op = match.group(1)
            out.append(("".join(buf), op))
            buf = []
            i += len(op)
            continue
        buf.append(ch)
        i += 1
    out.append(("".join(buf), ""))
    return out


_REDIRECT = re.compile(r"^\d*(?:>>?|<<?|&>)(?:&\d+|&-)?(?P<target>.*)$")


def _without_redirections(words: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        match = _REDIRECT.match(word)
        if match and not word.startswith("<<"):
            skip = not match.group("target") and not word.endswith(("&1", "&2", "&-"))
            continue
        out.append(word)
    return out


# Shell syntax around commands: `for x in …; do CMD; done`, `if …; then CMD; fi`.
_OPENERS = frozenset({"do", "then", "else", "elif", "!", "{", "("})
SYNTAX = frozenset({"for", "while", "until", "if", "case", "done", "fi", "esac", "select", "function", "}", ")"})


def _segment(text: str, op: str) -> Segment:
    words = _without_redirections(_tokens(text))
    while words and words[0] in _OPENERS:
        words = words[1:]
    if len(words) >= 2 and re.fullmatch(r"\$[\w:]+", words[0]) and words[1].startswith("="):
        words = []  # a PowerShell variable assignment (`$x = …`): no program runs
    env: list[str] = []
    while words and _ENV.match(words[0]):
        env.append(words.pop(0))
    changed = True
    while words and changed:
        changed = False
        head = program_name(words[0]).lower()
        if head in _WRAPPERS:
            words = words[1:]
            while words and (words[0].startswith("-") or _ENV.match(words[0]) or re.fullmatch(r"\d+[smh]?", words[0])):
                if _ENV.match(words[0]):
                    env.append(words[0])
                words = words[1:]
            changed = True
        elif head in _RUNNERS and len(words) > 1:
            rest = words[1:]
            subs = _RUNNERS[head]
            if subs and rest[0] in subs:
                rest = rest[1:]
            elif subs:
                continue
            while rest and rest[0].startswith("-"):
                rest = rest[1:]
            if rest:
                words = rest
                changed = True
        elif _PYTHONS.match(head) and len(words) > 2 and words[1] == "-m":
            words = words[2:]
            changed = True
    return Segment(text=text.strip(), env=env, words=words, piped=op == "|")


_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][\w-]*)\1[^\n]*\n")
_HERESTRING = re.compile(r"@(['\"])\n.*?\n\1@", re.DOTALL)


def _without_heredocs(command: str) -> str:
    """The command line with here-document bodies (and PowerShell here-strings) taken out: they are
    a program's input, not commands."""
    text = _HERESTRING.sub("@''@", command)
    out: list[str] = []
    pos = 0
    for match in _HEREDOC.finditer(text):
        if match.start() < pos:
            continue
        out.append(text[pos : match.end()])
        end = re.compile(rf"^[ \t]*{re.escape(match.group(2))}[ \t]*$", re.MULTILINE).search(text, match.end())
        pos = end.end() if end else len(text)
    out.append(text[pos:])
    return "".join(out)


def parse(command: str) -> Command:
    """Split a command line into its simple commands (see the module docstring). Here-document
    bodies are left out."""
    segments = [
        _segment(text, op)
        for text, op in _split_outside_quotes(_without_heredocs(command))
        if text.strip() and not text.strip().startswith("#")
    ]
    return Command(text=command, segments=segments)


# Programs that only look at things: running one is not a fix for anything.
INSPECTION = frozenset({
    "ls", "dir", "cat", "type", "head", "tail", "less", "more", "bat", "grep", "egrep", "fgrep", "rg", "ag", "ack",
    "find", "fd", "stat", "file", "wc", "echo", "printf", "pwd", "which", "where", "whereis", "whoami", "env",
    "printenv", "tree", "du", "df", "ps", "lsof", "sleep", "date", "true", "test", "[", "sed", "awk", "jq", "diff",
    "nl", "cut", "sort", "uniq", "xxd", "od", "hexdump", "column", "strings", "readlink", "realpath", "basename",
    "dirname", "md5sum", "sha256sum", "shasum", "tr", "fold", "tac", "rev", "view", "whatis", "man", "get-childitem", "get-content", "get-command", "get-item", "get-itemproperty", "select-string", "test-path",
    "get-location", "get-process", "write-output", "write-host", "select-object", "format-list", "format-table",
    "measure-object", "sort-object", "where-object", "foreach-object", "out-string", "resolve-path", "get-filehash",
    "Read", "Grep", "Glob", "LS", "WebFetch", "WebSearch", "TaskOutput", "BashOutput", "update_plan", "view_image",
})
# Programs whose exit status 1 with no output means "nothing found", not "something broke".
SEARCH = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "git-grep", "select-string", "findstr", "fd", "find"})
_GIT_LOOKS = {"status", "log", "diff", "show", "branch", "remote", "rev-parse", "ls-files", "config", "grep", "blame", "describe"}

# Commands that check a project: tests, type checkers, linters, builds.
_CHECKERS = frozenset({
    "pytest", "py.test", "tox", "nox", "mypy", "pyright", "ruff", "flake8", "pylint", "black", "isort", "unittest",
    "tsc", "eslint", "jest", "vitest", "mocha", "prettier", "rspec", "phpunit", "shellcheck", "ctest", "bats",
})
_CHECKER_SUBS: dict[str, frozenset[str]] = {
    "npm": frozenset({"test", "t", "run"}), "yarn": frozenset({"test", "run", "lint", "build", "typecheck"}),
    "pnpm": frozenset({"test", "run", "lint", "build"}), "bun": frozenset({"test", "run"}),
    "cargo": frozenset({"test", "check", "clippy", "build", "nextest"}), "go": frozenset({"test", "vet", "build"}),
    "make": frozenset({"test", "check", "lint", "build", "ci"}), "gradle": frozenset({"test", "check", "build"}),
    "gradlew": frozenset({"test", "check", "build"}), "mvn": frozenset({"test", "verify", "package"}),
    "dotnet": frozenset({"test", "build"}), "swift": frozenset({"test", "build"}), "deno": frozenset({"test", "check", "lint"}),
}
_CHECK_WORDS = re.compile(r"(?:^|[:_-])(?:test|tests|lint|check|typecheck|type-check|build|ci|verify)(?:$|[:_-])")


def is_inspection(segment: Segment) -> bool:
    prog = segment.program
    if prog.lower() == "git":
        sub = segment.words[1] if len(segment.words) > 1 else ""
        return sub in _GIT_LOOKS
    return prog in INSPECTION or prog.lower() in INSPECTION


def is_checker(segment: Segment) -> bool:
    """True for a test, type-check, lint or build run (`pytest -q`, `npm run lint`, `cargo test`)."""
    prog = segment.program.lower()
    if prog in _CHECKERS:
        return True
    subs = _CHECKER_SUBS.get(prog)
    if subs is None or len(segment.words) < 2:
        return False
    sub = segment.words[1]
    if sub not in subs:
        return False
    if sub == "run":
        return len(segment.words) > 2 and bool(_CHECK_WORDS.search(segment.words[2]))
    return True


def describe(name: str, tool_input: Any, limit: int = 120) -> str:
    """A short name for what a tool call did: the command (cut), or `Tool path` for file tools."""
    command = tool_command(name, tool_input)
    if command is not None:
        one = " ".join(command.split())
        return one if len(one) <= limit else one[: limit - 1] + "…"
    target = tool_target(name, tool_input)
    patch = patch_text(tool_input)
    ops = ", ".join(f"{op} File" for op, _ in patch_targets(patch)[:3]) if patch else ""
    label = "apply_patch" if ops else name
    out = f"{label} ({ops}) {target}" if ops else (f"{label} {target}" if target else label)
    return out if len(out) <= limit else out[: limit - 1] + "…"


def summary(name: str, tool_input: Any) -> str:
    """What kind of thing a call did, without its arguments: `npm install`, `Edit syncData.ts`,
    `apply_patch (Update File) notes.md`."""
    command = tool_command(name, tool_input)
    if command is not None:
        main = parse(command).main
        if main is None or not main.words:
            return "a command"
        sub = main.words[1] if len(main.words) > 1 and re.fullmatch(r"[a-z][a-z0-9:_-]*", main.words[1]) else ""
        return f"{main.program} {sub}".strip()
    target = tool_target(name, tool_input)
    base = re.split(r"[\\/]", target)[-1] if target else ""
    patch = patch_text(tool_input)
    if patch:
        ops = ", ".join(dict.fromkeys(f"{op} File" for op, _ in patch_targets(patch)))
        return f"apply_patch ({ops}) {base}".strip()
    return f"{name} {base}".strip()
