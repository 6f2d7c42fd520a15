"""A warm papermill for one night: a process that has imported papermill and nbconvert once and forks
a child for every notebook the night runs (each batch, the cache notebook, the night report and its
HTML conversion).

Every notebook used to start a new interpreter that imported papermill again: about 0.65 s of CPU
each before its kernel even started, and nbconvert's conversion paid the same twice over (the
`jupyter` launcher, then nbconvert). A fork of a process that has done those imports starts at once.
The server has also imported what a consolidate notebook's kernel needs, and every papermill child
forks its kernel-to-be before it starts (`warm_kernel`): still one new kernel process per notebook,
but one that does not start an interpreter and import ipykernel, DuckDB and the pipeline again.
PIPELINE_WARM_KERNEL=0 makes papermill start its kernels as new processes again.

What a child gets is what a `subprocess.Popen(argv, cwd=..., env=..., start_new_session=True)`
would have given it: its own session and process group (a timeout or the next night's clean-up
still ends it with `killpg`), its working folder, exactly the environment it was handed (the
kernel it launches inherits it), and its output in the files it was given. Only two command lines
are run in the child itself, `python -m papermill ...` and `python -m jupyter nbconvert ...`; any
other is exec'd, so a caller never needs to know which path ran.

A fork is only safe from a single-threaded process. The server's imports start two threads of
their own unless told not to (OpenBLAS's pool, and the background thread of the jemalloc that
pyarrow bundles); it is started with both turned off, and checks that it has one thread before it
says it is ready. When it is not (or it cannot start at all), `spawn` returns None and the caller
starts a process as before.

The night's run id is in the server's own environment because the next night recognises a batch
process group it may end by its leader's /proc cmdline ("papermill", which this module's name
carries) and /proc environ (`PIPELINE_RUN_ID`), and a forked child shows its parent's.

Protocol, one JSON document per line. Driver → server: `{"id", "argv", "cwd", "env", "stdout",
"stderr"}` (paths; `stderr` may be "stdout"). Server → driver: `{"ready": true}` once, then
`{"id", "pid"}` when a child is forked and `{"id", "exit"}` when it has ended (a negative exit is
the signal that ended it, as `Popen.returncode`). The server ends when its input closes; children
still running then go on alone, as a `Popen` child of a driver that died would.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from pipeline import config
from pipeline.nightly import warm_kernel

__all__ = ["Forked", "PapermillServer", "active", "serving", "serving_now", "serving_run", "spawn", "warm_up"]

# Start-up settings that keep the server's imports from starting threads (see the docstring).
_SINGLE_THREADED = {"OPENBLAS_NUM_THREADS": "1", "JE_ARROW_MALLOC_CONF": "background_thread:false"}
_NO_NBCONVERT = "PIPELINE_SERVER_NO_NBCONVERT"
READY_TIMEOUT = 60.0


class Forked:
    """A child of the server, with the part of `subprocess.Popen`'s interface the night uses."""

    def __init__(self, argv: Sequence[str]) -> None:
        self.args = list(argv)
        self.pid = 0
        self.returncode: int | None = None
        self._forked = threading.Event()
        self._ended = threading.Event()

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def _exited(self, code: int) -> None:
        self.returncode = code
        self._ended.set()


class PapermillServer:
    """The driver's side: starts the server, hands it command lines, and learns how each child ended."""

    def __init__(self, env: Mapping[str, str] | None = None, *, convert: bool = True) -> None:
        server_env = {**os.environ, **(env or {}), **_SINGLE_THREADED}
        if not convert:  # nbconvert's import (half a second) only pays when a report is converted
            server_env[_NO_NBCONVERT] = "1"
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "pipeline.nightly.papermill_server"], cwd=config.REPO, env=server_env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True,
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._in: IO[bytes] = self._proc.stdin
        self._write = threading.Lock()
        self._children: dict[int, Forked] = {}
        self._next = 0
        self.used = False
        self._said = False
        self._ready = threading.Event()
        self.usable = False
        self.why_not: str | None = None
        self._reader = threading.Thread(target=self._read, args=(self._proc.stdout,), name="papermill-server",
                                        daemon=True)
        self._reader.start()

    def _read(self, out: IO[bytes]) -> None:
        for raw in out:
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            if "ready" in msg:
                self.usable = bool(msg["ready"])
                self.why_not = msg.get("why")
                self._ready.set()
                continue
            child = self._children.get(int(msg.get("id", -1)))
            if child is None:
                continue
            if "pid" in msg:
                child.pid = int(msg["pid"])
                child._forked.set()
            elif "exit" in msg:
                self._children.pop(int(msg["id"]), None)
                child._exited(int(msg["exit"]))
        # The server is gone: nobody will report on the children still listed. They may still be
        # running; their callers hear an exit they cannot trust, and say the batch was lost.
        self.usable = False
        self.why_not = self.why_not or "the papermill server ended"
        self._ready.set()
        for child in list(self._children.values()):
            child._forked.set()
            child._exited(-signal.SIGKILL)
        self._children.clear()

    def spawn(self, argv: Sequence[str], *, cwd: str | Path, env: Mapping[str, str], stdout: Path | None,
              stderr: Path | str | None = "stdout") -> Forked | None:
        """Start `argv` as a child of the server; None when the server cannot (the caller starts a process)."""
        if not self._ready.wait(READY_TIMEOUT) or not self.usable:
            return None
        child = Forked(argv)
        with self._write:
            self.used = True
            self._next += 1
            ident = self._next
            self._children[ident] = child
            request = {"id": ident, "argv": list(argv), "cwd": str(cwd), "env": dict(env),
                       "stdout": None if stdout is None else str(stdout),
                       "stderr": None if stderr is None else str(stderr)}
            try:
                self._in.write(json.dumps(request).encode() + b"\n")
                self._in.flush()
            except (BrokenPipeError, ValueError, OSError):
                self._children.pop(ident, None)
                self.usable = False
                return None
        child._forked.wait()
        if not child.pid:  # the server ended before it forked
            return None
        return child

    def idle(self) -> bool:
        """No child of it is running (nothing would be lost by ending it)."""
        with self._write:
            return not self._children

    def say_unusable(self) -> None:
        """Say once, on stderr, that notebooks start as processes of their own (slower, same result)."""
        with self._write:
            if self._said:
                return
            self._said = True
        why = self.why_not or "it did not answer in time"
        sys.stderr.write(f"papermill server not used ({why}); each notebook starts as a process of its own\n")
        sys.stderr.flush()

    def close(self) -> None:
        if not self.used:  # started ahead and never needed: it has no child, so nothing to wait for
            with contextlib.suppress(OSError):
                self._proc.kill()
        with self._write, contextlib.suppress(OSError, ValueError):
            self._in.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._reader.join(timeout=5)


class _Lazy:
    """The night's server, started by the first notebook that needs it (a night whose batches run
    elsewhere, with no report, never pays for its imports), or ahead of it by `warm_up`."""

    def __init__(self, env: Mapping[str, str] | None, convert: bool) -> None:
        self._env = env
        self._convert = convert
        self._server: PapermillServer | None = None
        self._lock = threading.Lock()

    def get(self) -> PapermillServer:
        with self._lock:
            if self._server is None:
                self._server = PapermillServer(self._env, convert=self._convert)
            return self._server

    def idle(self) -> bool:
        with self._lock:
            return self._server is None or self._server.idle()

    def close(self) -> None:
        with self._lock:
            if self._server is not None:
                self._server.close()


_active: _Lazy | None = None
# On a Dask worker: one server per night's run id, kept between its batches (the worker process
# outlives the night), and the server the current thread's batch uses.
_for_runs: dict[str, _Lazy] = {}
_for_runs_lock = threading.Lock()
_thread = threading.local()


def serving_now() -> bool:
    return _active is not None or getattr(_thread, "lazy", None) is not None


def active() -> PapermillServer | None:
    """The running night's server (started now if it was not yet), or None outside `serving` and
    `serving_run`."""
    lazy = getattr(_thread, "lazy", None) or _active
    return lazy.get() if lazy is not None else None


@contextlib.contextmanager
def serving_run(run_id: str) -> Iterator[None]:
    """On a Dask worker, for one batch of the night `run_id`: its notebook is forked from that
    night's server in this process (started by the night's first batch here). A server of an
    earlier night is ended once it has no child left."""
    if os.environ.get("PIPELINE_PAPERMILL_SERVER", "1") == "0":
        yield
        return
    with _for_runs_lock:
        lazy = _for_runs.get(run_id)
        if lazy is None:
            lazy = _for_runs[run_id] = _Lazy({"PIPELINE_RUN_ID": run_id}, convert=False)
        for other, old in list(_for_runs.items()):
            if other != run_id and old.idle():
                old.close()
                del _for_runs[other]
    _thread.lazy = lazy
    try:
        yield
    finally:
        _thread.lazy = None


def warm_up() -> None:
    """Start the server now, so that its imports run while the caller does other work (the night's
    ingest and planning) rather than in front of the first notebook. Unused, it is killed at the end."""
    if _active is not None:
        _active.get()


@contextlib.contextmanager
def serving(env: Mapping[str, str] | None = None, *, convert: bool = True) -> Iterator[None]:
    """Fork the notebooks started in this process during the block from one server (started by the
    first of them, or by `warm_up`); `convert=False` when no nbconvert command will be run. Set
    PIPELINE_PAPERMILL_SERVER=0 to start every notebook as a process of its own."""
    global _active
    if os.environ.get("PIPELINE_PAPERMILL_SERVER", "1") == "0" or _active is not None:
        yield
        return
    lazy = _Lazy(env, convert)
    _active = lazy
    try:
        yield
    finally:
        _active = None
        lazy.close()


def spawn(argv: Sequence[str], *, cwd: str | Path, env: Mapping[str, str], stdout: IO[Any] | Path | None,
          stderr: Path | str | None = "stdout") -> subprocess.Popen[bytes] | Forked:
    """Start `argv` in a session of its own: through the night's server when one is running (output to
    the `stdout` file, and `stderr` to it too unless given its own), else as a process."""
    server = active()
    if server is not None and (stdout is None or isinstance(stdout, Path)):
        child = server.spawn(argv, cwd=cwd, env=env, stdout=stdout, stderr=stderr)
        if child is not None:
            return child
        server.say_unusable()
    out: Any = subprocess.DEVNULL if stdout is None else stdout
    opened = None
    if isinstance(stdout, Path):
        opened = out = stdout.open("wb")
    err: Any = subprocess.STDOUT if stderr == "stdout" else (subprocess.DEVNULL if stderr is None else None)
    err_file = None
    if err is None:
        err_file = err = Path(str(stderr)).open("wb")
    try:
        return subprocess.Popen(list(argv), cwd=cwd, env=dict(env), stdout=out, stderr=err, start_new_session=True)
    finally:
        for f in (opened, err_file):
            if f is not None:
                f.close()


# -- the server -----------------------------------------------------------------------------------------------


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # no /proc: the thread count cannot be checked, so do not fork
        return -1


def _say(msg: dict[str, Any]) -> None:
    # Straight to the descriptor: a buffered sys.stdout would be copied into every child's output.
    data = (json.dumps(msg) + "\n").encode()
    while data:
        data = data[os.write(1, data):]


def _child(req: dict[str, Any], wake: tuple[int, int], grouped: int) -> None:
    """In the forked child: become what `Popen(argv, cwd, env, start_new_session=True)` would have started."""
    code = 1
    try:
        os.setsid()
        os.close(grouped)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        for fd in wake:
            os.close(fd)
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        out = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644) if req["stdout"] else devnull
        os.dup2(out, 1)
        if req["stderr"] == "stdout":
            os.dup2(out, 2)
        else:
            err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644) if req["stderr"] else devnull
            os.dup2(err, 2)
        # Line by line, as PYTHONUNBUFFERED gave the processes: a batch killed at its time limit keeps its log.
        sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)
        sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        code = _run(req["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # everything a process would have printed before dying
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _run(argv: list[str]) -> int:
    rest = argv[1:]
    if rest[:2] == ["-m", "papermill"]:
        from papermill.cli import papermill

        # Forked from a single-threaded server, the child still is; checked again, as before any fork.
        waiting = warm_kernel.prepare() if _warm_kernels and _threads() == 1 else None
        sys.argv = ["papermill", *rest[2:]]
        _save_cells_at_most_every(CELL_SAVE_SECONDS)
        try:
            papermill.main(args=rest[2:], prog_name="papermill")  # exits, as the command does
        finally:
            if waiting is not None:
                waiting.discard()
        return 0
    if rest[:3] == ["-m", "jupyter", "nbconvert"]:
        from nbconvert.nbconvertapp import main as nbconvert

        sys.argv = ["jupyter-nbconvert", *rest[3:]]
        nbconvert(argv=rest[3:])
        return 0
    os.execvpe(argv[0], argv, dict(os.environ))
    return 127  # not reached


# Papermill writes the whole executed notebook at the start and at the end of every cell: 28 writes
# for the 13 cells of the consolidate notebook, about 5 ms each (serialising and validating it), a
# seventh of a batch's papermill process. Its own start and end, and a cell that failed, are still
# written at once; between them, a cell boundary writes the notebook only when this long has passed
# since the last write, so a notebook watched while it runs is never more than this much behind.
CELL_SAVE_SECONDS = 1.0


def _save_cells_at_most_every(seconds: float) -> None:
    """Have this papermill process write the notebook at cell boundaries at most every `seconds`."""
    from papermill import engines

    manager = engines.NotebookExecutionManager

    class CellSavesThrottled(manager):  # type: ignore[misc, valid-type]
        _write_now = True  # the notebook's first write

        def notebook_start(self, **kwargs: Any) -> None:
            super().notebook_start(**kwargs)
            self._write_now = False

        def cell_exception(self, cell: Any, cell_index: int | None = None, **kwargs: Any) -> None:
            super().cell_exception(cell, cell_index=cell_index, **kwargs)
            self._write_now = True  # the failure is on disk when the cell completes

        def notebook_complete(self, **kwargs: Any) -> None:
            self._write_now = True
            super().notebook_complete(**kwargs)

        def save(self, **kwargs: Any) -> None:
            if self._write_now or (self.now() - self.last_save_time).total_seconds() >= seconds:
                super().save(**kwargs)

    # `Engine.execute_notebook` makes its manager from this module global; the child is papermill's alone.
    engines.NotebookExecutionManager = CellSavesThrottled


_warm_kernels = False


def main() -> int:
    global _warm_kernels
    gc.disable()  # until the imports are done and frozen below: they make nothing to collect
    import papermill.cli  # noqa: F401  (imported once here, for every child)

    if os.environ.get(_NO_NBCONVERT) != "1":
        import nbconvert.nbconvertapp  # noqa: F401

    if os.environ.get("PIPELINE_WARM_KERNEL", "1") != "0":
        try:
            warm_kernel.preload()
            _warm_kernels = True
        except Exception as exc:
            print(f"papermill server: kernels start cold: {exc}", file=sys.stderr)

    if _threads() != 1:
        _say({"ready": False, "why": f"the server has {_threads()} threads after its imports; forking is not safe"})
        return 0
    # What was imported above lives as long as every child: frozen, it is never traversed again by
    # a child's collections (a kernel runs a full one as it exits), nor are its pages written to,
    # and so copied, by them.
    gc.freeze()
    gc.enable()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    children: dict[int, int] = {}
    pending = b""
    _say({"ready": True})
    while True:
        try:
            readable, _, _ = select.select([0, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            ident = children.pop(pid, None)
            if ident is not None:
                _say({"id": ident, "exit": os.waitstatus_to_exitcode(status)})
        if 0 in readable:
            data = os.read(0, 65536)
            if not data:
                return 0
            pending += data
            while b"\n" in pending:
                raw, pending = pending.split(b"\n", 1)
                req = json.loads(raw)
                # The pid is only said once the child leads its own group: a caller may killpg it at once.
                grouped_r, grouped_w = os.pipe()
                pid = os.fork()
                if pid == 0:
                    os.close(grouped_r)
                    _child(req, (wake_r, wake_w), grouped_w)
                os.close(grouped_w)
                with contextlib.suppress(OSError):
                    os.read(grouped_r, 1)  # EOF when the child has called setsid (or died)
                os.close(grouped_r)
                children[pid] = req["id"]
                _say({"id": req["id"], "pid": pid})


if __name__ == "__main__":
    sys.exit(main())
