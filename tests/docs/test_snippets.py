"""Every shell and SQL example of the documentation runs, against the bundled samples.

How a page's examples run (the convention is in docs/contributing.md, "Examples that run"):

- A scratch project folder is laid out as a user's checkout after `make demo`: `data/samples` (a copy
  of the samples), `notebooks/`, `bench/`, and `.venv/bin/` with `pipeline`, `python`, `papermill` and
  `activate` standing for the project's virtual environment (they run this interpreter on this
  worktree's package). The samples are ingested and one night (rules engine, no report) runs there,
  once for the whole test.
- Each page (README.md and every page of docs/) then starts from a copy of that state, put at the
  same path (stored transcript paths stay the same, so a page that ingests `data/samples` again finds
  nothing new), and its blocks run in order: `sh` with `bash -e` in the project folder, every command
  exiting 0; `sql` in DuckDB, read-only, on the page's warehouse, with relative file names resolved in
  the project folder.
- A block titled "needs …" is not run; neither is any block in another language.

The environment has no OPENAI_API_KEY and no PIPELINE_* variables, so `--engine auto` is the rules
engine and the default paths apply. Nothing here reads ../shared/ or reaches the network.

The night is built once for the whole run (all xdist workers: `built_once`). As stored transcript
paths name the project folder, the pages' copies must all be put at one path, one page at a time: so
the pages are one test, run by one worker, rather than a test each that the other workers would sit
waiting on (they ran other tests meanwhile). The failure lists every block that failed on every
page, with its line, command output included.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.docs.snippets import RUN_LANGUAGES, Block, blocks
from tests.helpers import REPO, SAMPLES, built_once

DOCS = REPO / "docs"
PAGES = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]
RUN_PAGES = [page for page in PAGES if any(b.runs for b in blocks(page))]
KNOWN_LANGUAGES = {*RUN_LANGUAGES, "text", "python", "toml", "json", "markdown", ""}

SHIMS = {
    "pipeline": '#!/bin/sh\nexec "{python}" -m pipeline "$@"\n',
    "papermill": '#!/bin/sh\nexec "{python}" -m papermill "$@"\n',
    "python": '#!/bin/sh\nexec "{python}" "$@"\n',
}


def _environment(project: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIPELINE_", "OPENAI_")) and k not in ("COLUMNS", "PYTHONPATH")}
    env["PATH"] = f"{project / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(REPO)
    return env


def _lay_out(project: Path) -> None:
    bin_dir = project / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, text in SHIMS.items():
        (bin_dir / name).write_text(text.format(python=sys.executable), encoding="utf-8")
        (bin_dir / name).chmod(0o755)
    (bin_dir / "activate").write_text(f'PATH="{bin_dir}:$PATH"\nexport PATH\n', encoding="utf-8")
    (project / "data").mkdir()
    shutil.copytree(SAMPLES, project / "data" / "samples")
    for name in ("notebooks", "bench"):
        (project / name).symlink_to(REPO / name)


def _run_sh(block: Block, project: Path) -> str | None:
    """None when every command of the block exited 0, else what went wrong."""
    out = subprocess.run(["bash", "-e", "-c", block.text], cwd=project, env=_environment(project),
                         capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    if out.returncode == 0:
        return None
    return f"exit {out.returncode}\n--- stdout\n{out.stdout[-2000:]}\n--- stderr\n{out.stderr[-3000:]}"


def _run_sql(block: Block, project: Path) -> str | None:
    con = duckdb.connect(str(project / "data" / "warehouse.duckdb"), read_only=True)
    try:
        con.execute(f"SET file_search_path = '{project}'")
        for statement in (s.strip() for s in block.text.split(";")):
            if statement and not all(line.strip().startswith("--") for line in statement.splitlines()):
                con.execute(statement).fetchall()
    except duckdb.Error as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        con.close()
    return None


def test_every_block_is_in_a_known_language_and_every_skip_says_why() -> None:
    odd = [f"{b.where} ({b.language!r})" for page in PAGES for b in blocks(page) if b.language not in KNOWN_LANGUAGES]
    assert not odd, f"blocks in a language the snippet test does not know: {odd}"
    vague = [b.where for page in PAGES for b in blocks(page)
             if b.language in RUN_LANGUAGES and b.title is not None and not b.title.startswith("needs ")]
    assert not vague, f"a title on a sh/sql block must start with 'needs …' (what the samples cannot give): {vague}"
    counted = sum(b.runs for page in PAGES for b in blocks(page))
    assert counted >= 40, f"only {counted} blocks run: did the fence parser break?"


@pytest.fixture(scope="session")
def night_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding `template`, the project after its night, built once for the whole test run;
    pages run in `project` beside it."""

    def build(folder: Path) -> dict[str, str]:
        project = folder / "project"
        _lay_out(project)
        night = subprocess.run(["pipeline", "nightly", "--source", "data/samples", "--engine", "rules", "--no-report"],
                               cwd=project, env=_environment(project), capture_output=True, text=True, timeout=600)
        assert night.returncode == 0, night.stderr[-3000:]
        project.rename(folder / "template")
        return {"dir": str(folder)}

    return Path(built_once(tmp_path_factory, "snippets-night", build)["dir"])


@pytest.mark.slow
@pytest.mark.first
def test_every_guide_snippet_runs(night_template: Path) -> None:
    template, project = night_template / "template", night_template / "project"
    failures: list[str] = []
    for page in RUN_PAGES:
        shutil.rmtree(project, ignore_errors=True)  # a run that was killed half-way
        shutil.copytree(template, project, symlinks=True)
        try:
            for block in (b for b in blocks(page) if b.runs):
                problem = _run_sh(block, project) if block.language == "sh" else _run_sql(block, project)
                if problem:
                    failures.append(f"{block.where} ({block.language}):\n{block.text}\n{problem}")
        finally:
            shutil.rmtree(project)
    assert not failures, f"{len(failures)} documentation example(s) failed:\n\n" + "\n\n".join(failures)
