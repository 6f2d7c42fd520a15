"""A kernel forked by the papermill server must be what papermill's own launch would have started."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from pipeline.nightly import papermill_server, warm_kernel
from pipeline.nightly.kernels import papermill_command

pytestmark = pytest.mark.slow

# What a kernel can tell about how it was started; a cold and a warm kernel must agree on all of it
# but the process ids and the modules already imported.
PROBE = textwrap.dedent("""
    import gc, json, os, pathlib, signal, sys, warnings
    ip = get_ipython()
    app = ip.kernel.parent
    pathlib.Path(out).write_text(json.dumps({
        "pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0), "pgid": os.getpgid(0),
        "jpy_parent": os.environ.get("JPY_PARENT_PID"), "parent_handle": app.parent_handle,
        "probe": os.environ.get("PROBE"), "cwd": os.getcwd(), "path0": sys.path[0],
        "cwd_on_path": os.getcwd() in sys.path, "argv0": os.path.basename(sys.argv[0]), "argv": sys.argv[1:2],
        "signals": [str(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE)],
        "user_module": ip.user_ns.get("__name__"), "mpl": os.environ.get("MPLBACKEND"),
        "stdin": os.path.realpath("/proc/self/fd/0"), "umask": os.umask(0o22),
        "preloaded": "duckdb" in sys.modules and "pipeline.consolidator.batch" in sys.modules,
        "debugger": getattr(ip.kernel, "debugger", None) is not None, "debugpy_loaded": "debugpy" in sys.modules,
        "gc_enabled": gc.isenabled(), "gc_threshold": list(gc.get_threshold()), "frozen": gc.get_freeze_count(),
    }))
    import debugpy  # still importable by a notebook's own code
""")


def _probe_notebook(path: Path, body: str = PROBE) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell('out = "unset"', metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(body)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, papermill_server.PapermillServer]]:
    warm = papermill_server.PapermillServer({})
    cold = papermill_server.PapermillServer({"PIPELINE_WARM_KERNEL": "0"})
    try:
        yield {"warm": warm, "cold": cold}
    finally:
        warm.close()
        cold.close()


def _run(server: papermill_server.PapermillServer, tmp: Path, name: str, body: str = PROBE,
         timeout: float = 120) -> tuple[int, Path, Path]:
    nb = _probe_notebook(tmp / f"{name}.ipynb", body)
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    out = tmp / f"{name}.json"
    log = tmp / f"{name}.log"
    cmd = papermill_command(nb, tmp / f"{name}.out.ipynb", {"out": str(out)}, cwd=work)
    child = server.spawn(cmd, cwd=work, env={**os.environ, "PROBE": name}, stdout=log)
    assert child is not None, server.why_not
    return child.wait(timeout=timeout), out, log


def test_a_warm_kernel_is_started_as_papermill_would_have_started_it(
        servers: dict[str, papermill_server.PapermillServer], tmp_path: Path) -> None:
    seen = {}
    for kind, server in servers.items():
        code, out, log = _run(server, tmp_path, kind)
        assert code == 0, log.read_text()
        seen[kind] = json.loads(out.read_text())
    warm, cold = seen["warm"], seen["cold"]
    assert warm["preloaded"] and not cold["preloaded"]
    # A forked kernel starts without a debugger (nothing in a papermill run can attach one) and so
    # never imports debugpy as it starts; one started cold has it.
    assert (warm["debugger"], warm["debugpy_loaded"]) == (False, False)
    assert (cold["debugger"], cold["debugpy_loaded"]) == (True, True)
    # The server's imports are frozen out of the collector (a warm kernel's collections skip them),
    # and the collector runs in the kernel as in a cold one.
    assert warm["frozen"] > 10_000 and cold["frozen"] == 0 and warm["gc_enabled"]
    for probe in (warm, cold):
        # its parent is the papermill process, which is what it watches; it leads a session of its own
        assert probe["jpy_parent"] == str(probe["ppid"]) and probe["parent_handle"] == probe["ppid"]
        assert probe["sid"] == probe["pid"] == probe["pgid"]
        assert probe["cwd"] == str(tmp_path / "work")
    assert warm["probe"] == "warm" and cold["probe"] == "cold"
    same = ("cwd", "path0", "cwd_on_path", "argv0", "argv", "signals", "user_module", "mpl", "umask", "gc_enabled",
            "gc_threshold")
    assert {k: warm[k] for k in same} == {k: cold[k] for k in same}
    # The waiting child does not outlive its papermill process.
    with pytest.raises(ProcessLookupError):
        os.kill(warm["pid"], 0)


def test_a_warm_kernel_that_dies_fails_the_notebook_as_a_cold_one_does(
        servers: dict[str, papermill_server.PapermillServer], tmp_path: Path) -> None:
    codes = {}
    for kind, server in servers.items():
        codes[kind], _, log = _run(server, tmp_path, kind, body="import os\nos._exit(3)")
        assert "DeadKernelError: Kernel died" in log.read_text(), log.read_text()
    assert codes["warm"] == codes["cold"] != 0  # papermill's own exit for a dead kernel (138)


@pytest.mark.parametrize("cmd, options", [
    ([sys.executable, "-m", "ipykernel_launcher", "-f", "/c.json"], ["-f", "/c.json"]),
    ([sys.executable, "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f", "/c.json", "--X=1"],
     ["-f", "/c.json", "--X=1"]),
    (["/another/python", "-m", "ipykernel_launcher", "-f", "/c.json"], None),
    ([sys.executable, "-X", "dev", "-m", "ipykernel_launcher", "-f", "/c.json"], None),
    ([sys.executable, "-m", "other_kernel", "-f", "/c.json"], None),
    ([sys.executable, "-m", "ipykernel_launcher"], None),
])
def test_only_this_interpreters_standard_kernel_command_is_taken(cmd: list[str], options: list[str] | None) -> None:
    assert warm_kernel._kernel_options(cmd) == options


def test_a_kernel_papermill_launches_otherwise_leaves_no_waiting_child(tmp_path: Path) -> None:
    # In a process of its own: `prepare` wraps jupyter_client's launcher for the rest of the process.
    script = textwrap.dedent("""
        import os, sys
        from pipeline.nightly import warm_kernel
        waiting = warm_kernel.prepare()
        assert waiting is not None
        from jupyter_client.provisioning import local_provisioner
        proc = local_provisioner.launch_kernel([sys.executable, "-c", "print('cold')"])  # not a kernel it takes
        proc.wait()
        try:
            os.kill(waiting.pid, 0)
            print("alive")
        except ProcessLookupError:
            print("gone")
        waiting.discard()  # a second time: nothing to do
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["cold", "gone"]


def test_a_warm_kernel_ends_when_its_papermill_process_is_killed(
        servers: dict[str, papermill_server.PapermillServer], tmp_path: Path) -> None:
    # As a batch past its time limit: its process group is killed while a cell runs. The kernel leads
    # a session of its own, so it is not in that group; it must notice that its parent is gone.
    body = "import os, pathlib, time\npathlib.Path(out).write_text(str(os.getpid()))\ntime.sleep(120)"
    nb = _probe_notebook(tmp_path / "sleep.ipynb", body)
    out = tmp_path / "kernel.pid"
    cmd = papermill_command(nb, tmp_path / "sleep.out.ipynb", {"out": str(out)}, cwd=tmp_path)
    child = servers["warm"].spawn(cmd, cwd=tmp_path, env=dict(os.environ), stdout=tmp_path / "sleep.log")
    assert child is not None
    deadline = time.monotonic() + 60
    while not out.exists() or not out.read_text():
        assert time.monotonic() < deadline, (tmp_path / "sleep.log").read_text()
        time.sleep(0.05)
    kernel = int(out.read_text())
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    deadline = time.monotonic() + 20
    while Path(f"/proc/{kernel}").exists() and "zombie" not in _state(kernel):
        assert time.monotonic() < deadline, f"kernel {kernel} outlived its papermill process"
        time.sleep(0.1)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0].lower()
    except (OSError, IndexError):
        return "zombie"
