"""Running papermill in a child process: one way to write its command line, and a second chance
when the Jupyter kernel never started.

`papermill_command` builds every papermill command line the pipeline runs (the batches, the cache
notebook, the night report). Papermill's `-p NAME VALUE` guesses a type from the text: `"12345"`
arrives as an int and `"True"` as a bool, so a one-session batch whose id is all digits (a file
`20261001.jsonl` whose records carry no id is session `20261001`) would reach the notebook as a
number. So text goes with `-r` (raw, always a string) and every other value in one `-y` YAML
document, which keeps its type.

When a notebook stops on an exception, `notebook_failure` reads which cell raised what from the
executed notebook papermill wrote (the cell's output of type "error"), rather than guessing from
the log.

With several kernels starting at once, Jupyter sometimes loses one before it answers
(`Kernel died before replying to kernel_info`). No cell has run then, so running the same
command again is safe; any other failure is returned as it is.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import yaml

from pipeline.errors import NotebookError

KERNEL_START_RETRIES = 2
_KERNEL_START_FAILURE = re.compile(r"Kernel died before replying to kernel_info|Kernel didn't respond in \d+ seconds")

# What a notebook parameter may be: the types a papermill parameters cell can take back unchanged.
Parameter = str | bool | int | float | None


def papermill_command(notebook: Path, output: Path, parameters: Mapping[str, Parameter], *, cwd: Path,
                      kernel: str = "python3") -> list[str]:
    """The command line that executes `notebook` into `output` with `parameters`, each arriving in
    the notebook with the type it has here (text as text, numbers as numbers, None as None)."""
    cmd = [sys.executable, "-m", "papermill", str(notebook), str(output), "--cwd", str(cwd), "-k", kernel,
           "--no-progress-bar"]
    typed: dict[str, Parameter] = {}
    for name, value in parameters.items():
        if not name.isidentifier():
            raise ValueError(f"notebook parameter {name!r} is not a Python name")
        if isinstance(value, str):
            cmd += ["-r", name, value]
        elif value is None or isinstance(value, bool | int | float):
            typed[name] = value
        else:
            raise TypeError(f"notebook parameter {name}: {type(value).__name__} is not text, a number, a bool or None")
    if typed:
        # safe_dump writes floats so that YAML 1.1 reads them back as floats (1e-05 → 1.0e-05).
        cmd += ["-y", yaml.safe_dump(typed, default_flow_style=True, sort_keys=False).strip()]
    return cmd


def notebook_failure(executed: Path) -> NotebookError | None:
    """The exception an executed notebook stopped on: the first code cell with an output of type
    "error" (papermill also marks that cell `metadata.papermill.exception`). None when the file is
    missing or unreadable, or no cell raised (a kernel that died leaves no error output)."""
    import nbformat

    try:
        nb = nbformat.read(executed, as_version=4)
    except Exception:  # missing, half-written or not a notebook: the caller falls back to the log
        return None
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code":
            continue
        error = next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"), None)
        if error is not None:
            count = cell.get("execution_count")
            return NotebookError(cell=index, execution_count=count if isinstance(count, int) else None,
                                 name=str(error.get("ename") or "Exception"), message=str(error.get("evalue") or ""))
    return None


def kernel_did_not_start(output: str) -> bool:
    return bool(_KERNEL_START_FAILURE.search(output))


def log_says_kernel_did_not_start(log: Path) -> bool:
    try:
        return kernel_did_not_start(log.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return False


def run_papermill(cmd: list[str], *, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a papermill (or nbconvert) command line to the end, its output captured; again (at most
    KERNEL_START_RETRIES times) when its kernel did not start."""
    for attempt in range(KERNEL_START_RETRIES + 1):
        proc = _run_captured(cmd, cwd)
        if proc.returncode == 0 or attempt == KERNEL_START_RETRIES or not kernel_did_not_start(proc.stderr + proc.stdout):
            return proc
    return proc


def _run_captured(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    from pipeline.nightly import papermill_server

    if not papermill_server.serving_now():
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    with tempfile.TemporaryDirectory(prefix="pipeline-notebook-") as tmp:
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        child = papermill_server.spawn(cmd, cwd=cwd, env=dict(os.environ), stdout=out, stderr=err)
        try:
            code = child.wait()
        except BaseException:  # Ctrl-C: its own session would not get the terminal's signal
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            raise
        text = [p.read_text(encoding="utf-8", errors="replace") if p.exists() else "" for p in (out, err)]
    return subprocess.CompletedProcess(cmd, code, text[0], text[1])
