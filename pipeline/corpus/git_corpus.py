"""The memory corpus: a git repository we own, where a memory is committed (one commit each).

Git runs with an explicit GIT_DIR and work tree, the user's global and system configuration
ignored (no signing, no hooks, no fsmonitor), and an identity of our own, so it works on any machine
and can never touch another repository (the corpus lives inside the project's own checkout).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.errors import CorpusError

IDENTITY = ("trace-pipeline", "pipeline@localhost")
README = """# Memory corpus

Written by trace-pipeline's nightly consolidator; reviewed by people.

- `<kind>/<slug>.md` — one memory per file (kinds: episodic, semantic, procedural, agent_insight,
  error_pattern, precedent). The YAML front matter holds its id, kind, claim, entities
  (`type:name`), the sessions it cites, when and by which run it was written; the body holds the
  claim and the supporting detail.
- `tasks/proposed/`, `tasks/confirmed/`, `tasks/rejected/`, `tasks/done/` — commitments found in
  transcripts, waiting for a person to confirm or reject them (`pipeline tasks confirm ID`).

Every memory arrived in exactly one commit whose subject starts with `memory:`; the evidence quotes,
verbatim from the transcripts, are in that commit's message and nowhere else. A later finding that
says the same thing is recorded as a `link:` commit that adds its sessions to the existing memory.
A memory a reviewer took back (`pipeline memories drop ID --why TEXT`) is removed in a `drop:`
commit that gives the reason; its evidence stays in the history, and later nights do not write the
same claim again. A memory lands as `status: new`; a reviewer who vouches for it
(`pipeline memories keep ID`) sets `status: kept` in a `keep:` commit, and exports for agents
(`pipeline memories export`) show kept memories. Count memories with `git log --oneline --grep '^memory:'`; read a memory's
evidence with `git log --format=%B -1 <commit>`.
"""


@dataclass
class Commit:
    sha: str
    subject: str
    body: str
    trailers: dict[str, str] = field(default_factory=dict)


_TRAILER = re.compile(r"^([A-Za-z][A-Za-z0-9-]*): (.*)$")


def _trailers(body: str) -> dict[str, str]:
    last = body.rstrip("\n").split("\n\n")[-1]
    out: dict[str, str] = {}
    for line in last.split("\n"):
        m = _TRAILER.match(line)
        if not m:
            return {}
        out[m.group(1)] = m.group(2)
    return out


class Corpus:
    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root).absolute()
        self.git_dir = self.root / ".git"

    # -- git plumbing ------------------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update(
            GIT_DIR=str(self.git_dir), GIT_WORK_TREE=str(self.root), GIT_CONFIG_NOSYSTEM="1",
            GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0",
            GIT_AUTHOR_NAME=IDENTITY[0], GIT_AUTHOR_EMAIL=IDENTITY[1],
            GIT_COMMITTER_NAME=IDENTITY[0], GIT_COMMITTER_EMAIL=IDENTITY[1],
        )
        return env

    def git(self, *args: str, input: str | None = None, check: bool = True) -> str:
        cmd = [
            "git", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false", "-c", f"core.hooksPath={os.devnull}",
            "-c", "core.fsmonitor=false", "-c", "core.autocrlf=false", "-c", "core.quotepath=false",
            "-c", f"user.name={IDENTITY[0]}", "-c", f"user.email={IDENTITY[1]}", *args,
        ]
        proc = subprocess.run(cmd, cwd=self.root, env=self._env(), input=input, capture_output=True,
                              text=True, encoding="utf-8", check=False)
        if check and proc.returncode != 0:
            raise CorpusError(f"git {' '.join(args[:2])} failed in the corpus {self.root}: {proc.stderr.strip()}")
        return proc.stdout

    # -- lifecycle ---------------------------------------------------------------------------------
    def ensure(self) -> None:
        """Create the corpus if missing; otherwise recover from an interrupted run.

        Recovery: a stale index.lock (no git process alive for this corpus) is removed, and any
        file a killed run wrote but did not commit is discarded, so the work tree equals HEAD.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        if not (self.git_dir / "HEAD").exists():
            if any(p.name != ".git" for p in self.root.iterdir()):
                raise CorpusError(
                    f"{self.root} exists and is not a corpus (no .git inside, and it is not empty); "
                    "point --corpus at an empty or new folder"
                )
            self.git("init", "-q", "-b", "main")
            (self.root / "README.md").write_text(README, encoding="utf-8")
            self.git("add", "README.md")
            self.commit("corpus: start the memory corpus", "This repository is written by trace-pipeline.")
            return
        self._recover_lock()
        if self.head() is None:
            # created but killed before its first commit
            (self.root / "README.md").write_text(README, encoding="utf-8")
            self.git("add", "README.md")
            self.commit("corpus: start the memory corpus", "This repository is written by trace-pipeline.")
            return
        self.git("reset", "-q", "--hard", "HEAD")
        self.git("clean", "-q", "-fd")

    def head(self) -> str | None:
        out = self.git("rev-parse", "--verify", "-q", "HEAD", check=False).strip()
        return out or None

    def _recover_lock(self) -> None:
        lock = self.git_dir / "index.lock"
        if not lock.exists():
            return
        if _git_process_using(self.root):
            # a live git process owns it; give it a moment, then say who
            for _ in range(50):
                time.sleep(0.1)
                if not lock.exists():
                    return
            raise CorpusError(f"{lock} is held by a running git process; wait for it to finish")
        lock.unlink(missing_ok=True)

    # -- commits -----------------------------------------------------------------------------------
    def commit(self, subject: str, body: str = "", trailers: dict[str, str] | None = None,
               *, allow_empty: bool = False) -> str:
        """Commit what is staged with a message kept byte for byte (`--cleanup=verbatim`)."""
        message = subject.replace("\n", " ").strip() + "\n"
        if body:
            message += "\n" + body.rstrip("\n") + "\n"
        if trailers:
            message += "\n" + "".join(f"{k}: {v}\n" for k, v in trailers.items())
        args = ["commit", "-q", "--no-verify", "--cleanup=verbatim", "-F", "-"]
        if allow_empty:
            args.append("--allow-empty")
        self.git(*args, input=message)
        return self.head() or ""

    def add(self, *paths: Path) -> None:
        self.git("add", "--", *[str(p.relative_to(self.root)) for p in paths])

    def remove(self, *paths: Path) -> None:
        self.git("rm", "-q", "--", *[str(p.relative_to(self.root)) for p in paths])

    def commits(self) -> list[Commit]:
        if self.head() is None:
            return []
        out = self.git("log", "--format=%H%x1f%s%x1f%b%x1e")
        commits = []
        for record in out.split("\x1e"):
            record = record.strip("\n")
            if not record:
                continue
            sha, subject, body = ([*record.split("\x1f"), "", ""])[:3]
            commits.append(Commit(sha, subject, body, _trailers(body)))
        return commits

    def files_at_head(self, folders: Iterable[str]) -> dict[str, str]:
        """{path: text} of every file under `folders` as the last commit has it: a reader (the MCP
        server, an export) sees whole commits only, never a file a running night is writing."""
        if self.head() is None:
            return {}
        listing = self.git("ls-tree", "-r", "-z", "--name-only", "HEAD", "--", *folders)
        paths = [p for p in listing.split("\0") if p]
        if not paths:
            return {}
        request = "".join(f"HEAD:{p}\n" for p in paths).encode("utf-8")
        proc = subprocess.run(["git", "cat-file", "--batch"], cwd=self.root, env=self._env(), input=request,
                              capture_output=True, check=False)
        if proc.returncode != 0:
            raise CorpusError(f"git cat-file failed in the corpus {self.root}: {proc.stderr.decode(errors='replace').strip()}")
        out: dict[str, str] = {}
        data, at = proc.stdout, 0
        for p in paths:
            end = data.index(b"\n", at)
            header = data[at:end].split(b" ")
            at = end + 1
            if len(header) != 3:  # "<object> missing": gone between the listing and the read
                continue
            size = int(header[2])
            out[p] = data[at:at + size].decode("utf-8")
            at += size + 1
        return out

    def inside(self, path: Path) -> bool:
        try:
            path.resolve().relative_to(self.root.resolve())
        except ValueError:
            return False
        return ".git" not in path.relative_to(self.root).parts


def _git_process_using(root: Path) -> bool:
    """Is a git process alive whose working directory or GIT_DIR is this corpus?"""
    target = str(root.resolve())
    proc = Path("/proc")
    if not proc.exists():
        return False
    for pid_dir in proc.iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            cmd = (pid_dir / "cmdline").read_bytes().split(b"\0")
            if not cmd or not cmd[0].endswith(b"git"):
                continue
            cwd = os.readlink(pid_dir / "cwd")
            env = (pid_dir / "environ").read_bytes()
        except OSError:
            continue
        if cwd.startswith(target) or f"GIT_DIR={target}".encode() in env:
            return True
    return False
