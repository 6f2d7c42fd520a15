"""A Jupyter kernel that is already running when papermill asks for one.

Every notebook of a night starts a kernel: a new interpreter that imports ipykernel and IPython,
then the notebook's first cells import polars, DuckDB and the pipeline, and compile the rules'
patterns. On the test data that is about 1.3 s of the 2.5 s a batch notebook takes, paid again
for every batch.

A child of the papermill server (see `papermill_server`) is a fork of a process that has already
imported all of that. Before it runs papermill, it forks once more: that second child waits, and
becomes the kernel when papermill launches one. Nothing is shared between them afterwards: the
kernel is a process of its own, its parent is the papermill process (as with `Popen`), and it
leads a session of its own, exactly as `jupyter_client.launcher.launch_kernel` starts one
(`start_new_session=True`), so interrupting or killing it by process group behaves the same.

Papermill is not told. `jupyter_client`'s local provisioner starts kernels through
`launch_kernel`; in the papermill child that function is wrapped: when the command is the
standard one for this interpreter (`python -m ipykernel_launcher -f <connection file>`, and the options papermill adds) and
nothing unusual is asked (standard streams, extra options), the waiting child is handed the
command, environment and working folder and becomes that kernel. Any other command line (another
kernel, another interpreter) goes to the original function, and the waiting child exits unused.

The waiting child only says it is ready once it has called `setsid`: the provisioner reads the
kernel's process group as soon as the launch returns, and must never get its parent's (it would
signal the papermill process itself when it shuts the kernel down).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["PRELOAD", "Waiting", "preload", "prepare"]

# What the kernel of the consolidate notebook imports, imported once by the server: ipykernel and
# IPython for the kernel itself, then the notebook's own imports and the engine it runs. Never polars:
# its import starts threads (jemalloc's, and its out-of-core cleaner), and a process with threads
# must not fork. The notebook does not need it (`notebook_views`).
PRELOAD = (
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "ipykernel.zmqshell",
    "duckdb",
    "pipeline.consolidator.batch",
    "pipeline.consolidator.notebook_views",
    "pipeline.consolidator.rules.engine",
)

_LAUNCHER = "ipykernel_launcher"


# The entry `python -m` put first on the server's sys.path (its working folder), which a kernel's
# `python -m ipykernel_launcher` would have put there and then taken off.
_server_path0: str | None = None


def preload() -> None:
    """Import what a kernel needs, in the process the kernels will be forked from."""
    global _server_path0
    if sys.path and sys.path[0] in ("", os.getcwd()):
        _server_path0 = sys.path[0]
    for name in PRELOAD:
        importlib.import_module(name)
    _without_debugger()


def _without_debugger() -> None:
    """Have the forked kernels start without a debugger.

    A kernel imports `ipykernel.debugger` as it starts, and with it debugpy: 0.6 s of CPU in every
    kernel, about a quarter of what a night of the test data spends, for a debugger that nothing can
    use (papermill sends no debug requests, and the kernel ends with its notebook). The module is
    imported here while debugpy cannot be, so it records that no debugger is available and the
    kernels built from this process start without one (their kernel_info says `debugger: false`).
    debugpy itself stays importable; a kernel started cold keeps its debugger."""
    if "ipykernel.debugger" in sys.modules or "debugpy" in sys.modules:
        return
    sys.modules["debugpy"] = None  # type: ignore[assignment]  # makes `import debugpy` raise ImportError
    try:
        importlib.import_module("ipykernel.debugger")
    finally:
        del sys.modules["debugpy"]


class _Kernel:
    """The kernel process as the provisioner sees it: the part of `subprocess.Popen` it uses."""

    def __init__(self, pid: int, args: Sequence[str]) -> None:
        self.pid = pid
        self.args = list(args)
        self.returncode: int | None = None
        self.stdin = self.stdout = self.stderr = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = 0  # reaped elsewhere: gone, its status lost
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            time.sleep(0.01)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _kernel_options(cmd: Sequence[str]) -> list[str] | None:
    """The kernel's own options (`-f <file>` and after) when `cmd` is this interpreter's standard
    ipykernel command line, else None. ipykernel's kernelspec adds `-Xfrozen_modules=off`, which only
    lets its debugger step into the standard library; the forked kernel runs without it."""
    args = list(cmd)
    if not args or args[0] != sys.executable:
        return None
    args = args[1:]
    if args[:1] == ["-Xfrozen_modules=off"]:
        args = args[1:]
    if args[:3] != ["-m", _LAUNCHER, "-f"] or len(args) < 4:
        return None
    return args[2:]


class Waiting:
    """The papermill process's side of a child forked to become its kernel."""

    def __init__(self, pid: int, go: int, ready: int) -> None:
        self.pid = pid
        self._go = go
        self._ready = ready
        self.used = False

    def accepts(self, cmd: Sequence[str], extra: Mapping[str, Any]) -> bool:
        return not self.used and not extra and _kernel_options(cmd) is not None

    def start(self, cmd: Sequence[str], env: Mapping[str, str], cwd: str | None) -> _Kernel:
        """Hand the waiting child its kernel's command line; back once it leads its own session."""
        self.used = True
        message = json.dumps({"argv": list(cmd), "env": dict(env), "cwd": cwd}).encode()
        try:
            while message:
                message = message[os.write(self._go, message):]
        finally:
            os.close(self._go)
        answer = b""
        with contextlib.suppress(OSError):
            answer = os.read(self._ready, 1)
        os.close(self._ready)
        if answer != b"1":
            os.waitpid(self.pid, 0)
            raise OSError(f"the kernel forked for {cmd[-1]} ended before it started")
        return _Kernel(self.pid, cmd)

    def discard(self) -> None:
        """Papermill is done without it: the waiting child reads an empty command and exits."""
        if self.used:
            return
        self.used = True
        for fd in (self._go, self._ready):
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def prepare() -> Waiting:
    """In the papermill child, before papermill starts: fork the kernel-to-be and have papermill's
    kernel launches use it. The caller makes sure this process is single-threaded."""
    go_r, go_w = os.pipe()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(go_w)
        os.close(ready_r)
        _become_kernel(go_r, ready_w)  # never returns
    os.close(go_r)
    os.close(ready_w)
    waiting = Waiting(pid, go_w, ready_r)
    _wrap_launcher(waiting)
    return waiting


def _wrap_launcher(waiting: Waiting) -> None:
    from jupyter_client.provisioning import local_provisioner

    original = local_provisioner.launch_kernel

    def launch_kernel(cmd: list[str], stdin: int | None = None, stdout: int | None = None,
                      stderr: int | None = None, env: dict[str, str] | None = None, independent: bool = False,
                      cwd: str | None = None, **kw: Any) -> Any:
        extra = {k: v for k, v in {"stdin": stdin, "stdout": stdout, "stderr": stderr, **kw}.items()
                 if v is not None}
        if independent or not waiting.accepts(cmd, extra):
            waiting.discard()
            return original(cmd, stdin=stdin, stdout=stdout, stderr=stderr, env=env, independent=independent,
                            cwd=cwd, **kw)
        kernel_env = dict(os.environ if env is None else env)
        kernel_env["JPY_PARENT_PID"] = str(os.getpid())  # as launch_kernel sets it: the kernel's parent is us
        return waiting.start(cmd, kernel_env, cwd)

    local_provisioner.launch_kernel = launch_kernel


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _become_kernel(go: int, ready: int) -> None:
    code = 1
    try:
        request = _read_all(go)
        os.close(go)
        if not request:
            os._exit(0)
        spec = json.loads(request)
        os.setsid()  # as launch_kernel's start_new_session=True
        os.write(ready, b"1")
        os.close(ready)
        # What a new interpreter starts with (the papermill process set SIGINT to the default action).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for sig in (signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        # The kernel's stdin is a closed pipe under launch_kernel; here it stays the papermill
        # process's /dev/null, which reads the same (nothing).
        cwd = spec.get("cwd")
        if cwd:
            os.chdir(cwd)
        os.environ.clear()
        os.environ.update(spec["env"])
        if sys.path and _server_path0 is not None and sys.path[0] == _server_path0:
            del sys.path[0]
        from ipykernel import kernelapp

        launcher = os.path.join(os.path.dirname(os.path.dirname(kernelapp.__file__)), _LAUNCHER + ".py")
        sys.argv = [launcher, *(_kernel_options(spec["argv"]) or [])]
        try:
            # Two of IPKernelApp's defaults are read from the environment when it is imported, which
            # happened in the server: they are given from the kernel's (the parent whose end ends
            # the kernel, and the interrupt event, which only Windows uses).
            kernelapp.IPKernelApp.launch_instance(parent_handle=int(os.environ.get("JPY_PARENT_PID") or 0),
                                                  interrupt=int(os.environ.get("JPY_INTERRUPT_EVENT") or 0))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        # An interpreter's exit would run these (IPython saves its history in one); os._exit below
        # must not skip them, and must not return into the papermill process's frames either.
        import atexit

        atexit._run_exitfuncs()
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
