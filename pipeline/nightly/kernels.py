"""Running papermill in a child process, with a second chance when the Jupyter kernel never started.

With several kernels starting at once, Jupyter sometimes loses one before it answers
(`Kernel died before replying to kernel_info`). No cell has run then, so running the same
command again is safe; any other failure is returned as it is.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

KERNEL_START_RETRIES = 2
_KERNEL_START_FAILURE = re.compile(r"Kernel died before replying to kernel_info|Kernel didn't respond in \d+ seconds")


def kernel_did_not_start(output: str) -> bool:
    return bool(_KERNEL_START_FAILURE.search(output))


def log_says_kernel_did_not_start(log: Path) -> bool:
    try:
        return kernel_did_not_start(log.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return False


def run_papermill(cmd: list[str], *, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a papermill command line to the end; again (at most KERNEL_START_RETRIES times) when its
    kernel did not start."""
    for attempt in range(KERNEL_START_RETRIES + 1):
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
        if proc.returncode == 0 or attempt == KERNEL_START_RETRIES or not kernel_did_not_start(proc.stderr + proc.stdout):
            return proc
    return proc
