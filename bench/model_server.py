"""Start and stop the llama.cpp server of `make bench-model` (`bench/llama_server.py`) in its own process.

The server runs in a process group of its own, bound to 127.0.0.1 on a free port, and `stop()` ends
it whatever happened: SIGTERM to the group, then SIGKILL if it has not exited after a grace period.
Its standard input is a pipe from this process, so if the bench dies before `stop()` the server sees
the pipe close and exits by itself. Its log goes to a file beside the bench's output.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from model_cache import BenchError

__all__ = ["LlamaServer"]

SCRIPT = Path(__file__).resolve().parent / "llama_server.py"


class LlamaServer:
    """`with LlamaServer(...) as server:` starts it and waits until healthy; leaving stops it."""

    def __init__(self, python: Path, model: Path, *, ctx: int, threads: int, log: Path, ready_timeout: float = 300.0) -> None:
        self.cmd = [str(python), str(SCRIPT), "--model", str(model), "--ctx", str(ctx), "--threads", str(threads)]
        self.log = log
        self.ready_timeout = ready_timeout
        self.proc: subprocess.Popen[str] | None = None
        self.info: dict[str, Any] = {}

    @property
    def base_url(self) -> str:
        return f"{self.info['listening']}/v1"

    def __enter__(self) -> LlamaServer:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        log = self.log.open("w", encoding="utf-8")
        try:
            self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                                         start_new_session=True)
        finally:
            log.close()
        try:
            self.info = self._first_line()
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def _first_line(self) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline() if self.proc and self.proc.stdout else ""),
                                  daemon=True)
        reader.start()
        reader.join(self.ready_timeout)
        line = box[0] if box else ""
        if not line.strip():
            raise BenchError(f"the llama.cpp server did not start within {self.ready_timeout:.0f} s "
                             f"(exit code {self.proc.poll()}); its log: {self.log}")
        return dict(json.loads(line))

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        url = f"{self.info['listening']}/health"
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise BenchError(f"the llama.cpp server exited with code {self.proc.returncode}; its log: {self.log}")
            try:
                with urllib.request.urlopen(url, timeout=5) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        raise BenchError(f"the llama.cpp server at {url} was not healthy within {self.ready_timeout:.0f} s; its log: {self.log}")

    def stop(self, grace: float = 15.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=grace)
        except (ProcessLookupError, subprocess.TimeoutExpired, OSError):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=grace)
