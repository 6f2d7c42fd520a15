"""The night's warm papermill: a child it forks must be what `Popen(..., start_new_session=True)` gave."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from pipeline.nightly import lock, papermill_server
from pipeline.nightly.kernels import papermill_command, run_papermill

RUN_ID = "20261201T000000Z-abcdef"


@pytest.fixture(scope="module")
def server() -> Iterator[papermill_server.PapermillServer]:
    with papermill_server.serving({"PIPELINE_RUN_ID": RUN_ID}):
        srv = papermill_server.active()
        assert srv is not None
        yield srv


def _notebook(path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell('out = "unset"', metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(
            "import os, pathlib\n"
            "pathlib.Path(out).write_text(f\"{os.getcwd()}|{os.environ.get('PROBE')}|{type(n).__name__}\")"
        ),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def test_the_server_is_single_threaded_and_ready(server: papermill_server.PapermillServer) -> None:
    child = server.spawn([sys.executable, "-c", "pass"], cwd=Path.cwd(), env=dict(os.environ), stdout=None)
    assert server.usable, server.why_not
    assert child is not None and child.wait(timeout=30) == 0


def test_a_papermill_run_gets_its_parameters_folder_and_environment(
        server: papermill_server.PapermillServer, tmp_path: Path) -> None:
    nb = _notebook(tmp_path / "probe.ipynb")
    cwd = tmp_path / "work"
    cwd.mkdir()
    out = tmp_path / "out.txt"
    cmd = papermill_command(nb, tmp_path / "executed.ipynb", {"out": str(out), "n": 3}, cwd=cwd)
    log = tmp_path / "papermill.log"
    child = papermill_server.spawn(cmd, cwd=cwd, env={**os.environ, "PROBE": "seen"}, stdout=log)
    assert isinstance(child, papermill_server.Forked)
    assert child.wait(timeout=120) == 0, log.read_text()
    # The kernel ran in the folder papermill was given, with the child's environment and typed parameters.
    assert out.read_text() == f"{cwd}|seen|int"
    assert "Executing" in log.read_text()  # papermill's own log went to the file
    assert (tmp_path / "executed.ipynb").exists()


def test_a_failing_notebook_exits_non_zero_with_its_error_in_the_output(
        server: papermill_server.PapermillServer, tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("raise ValueError('broken on purpose')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "bad.ipynb")
    proc = run_papermill(papermill_command(tmp_path / "bad.ipynb", tmp_path / "bad.out.ipynb", {}, cwd=tmp_path),
                         cwd=tmp_path)
    assert proc.returncode == 1
    assert "broken on purpose" in proc.stderr + proc.stdout


def test_any_other_command_is_executed_with_its_exit_code_and_output(
        server: papermill_server.PapermillServer, tmp_path: Path) -> None:
    out, err = tmp_path / "out", tmp_path / "err"
    child = server.spawn([sys.executable, "-c", "import os, sys; print(os.getcwd()); print('e', file=sys.stderr); sys.exit(3)"],
                         cwd=tmp_path, env=dict(os.environ), stdout=out, stderr=err)
    assert child is not None and child.wait(timeout=30) == 3
    assert out.read_text().strip() == str(tmp_path)
    assert err.read_text().strip() == "e"


def test_a_child_has_its_own_group_a_time_limit_ends_it_and_the_next_night_recognises_it(
        server: papermill_server.PapermillServer, tmp_path: Path) -> None:
    child = server.spawn([sys.executable, "-m", "papermill", "--help"], cwd=tmp_path, env=dict(os.environ),
                         stdout=tmp_path / "help.txt")
    assert child is not None and child.wait(timeout=30) == 0
    assert "Usage" in (tmp_path / "help.txt").read_text()

    sleeper = server.spawn([sys.executable, "-c", "import time; time.sleep(60)"], cwd=tmp_path,
                           env=dict(os.environ), stdout=None)
    assert sleeper is not None
    try:
        assert os.getpgid(sleeper.pid) == sleeper.pid  # a session of its own: killpg ends it and its kernel
        with pytest.raises(subprocess.TimeoutExpired):
            sleeper.wait(timeout=0.2)
    finally:
        os.killpg(sleeper.pid, signal.SIGKILL)
    assert sleeper.wait(timeout=30) == -signal.SIGKILL


def test_a_forked_batch_is_one_the_next_night_may_end(server: papermill_server.PapermillServer, tmp_path: Path) -> None:
    # A forked child shows the server's cmdline and environment in /proc: the run id must be there.
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import time; time.sleep(60)")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "slow.ipynb")
    child = server.spawn(papermill_command(tmp_path / "slow.ipynb", tmp_path / "x.ipynb", {}, cwd=tmp_path),
                         cwd=tmp_path, env=dict(os.environ), stdout=tmp_path / "log")
    assert child is not None
    try:
        assert lock._group_belongs_to(child.pid, RUN_ID)
        assert not lock._group_belongs_to(child.pid, "20261201T000000Z-other0")
        assert lock.end_groups([child.pid], RUN_ID) == [child.pid]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
    assert child.wait(timeout=30) == -signal.SIGKILL


def test_without_a_server_spawn_starts_a_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIPELINE_PAPERMILL_SERVER", "0")
    monkeypatch.setattr(papermill_server, "_active", None)  # this module's own server is still running
    with papermill_server.serving():
        assert papermill_server.active() is None
        proc = papermill_server.spawn([sys.executable, "-c", "print('plain')"], cwd=tmp_path, env=dict(os.environ),
                                      stdout=tmp_path / "o")
        assert isinstance(proc, subprocess.Popen)
        assert proc.wait(timeout=30) == 0
    assert (tmp_path / "o").read_text().strip() == "plain"


def test_a_server_started_ahead_and_never_used_is_killed_when_the_block_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(papermill_server, "_active", None)  # this module's own server is still running
    with papermill_server.serving(convert=False):
        papermill_server.warm_up()
        srv = papermill_server.active()
        assert srv is not None and not srv.used
    # It had no child to wait for: killed, not left to finish its imports first.
    assert srv._proc.returncode == -signal.SIGKILL


def test_a_server_without_nbconvert_still_runs_an_nbconvert_command(tmp_path: Path) -> None:
    srv = papermill_server.PapermillServer(convert=False)
    try:
        child = srv.spawn([sys.executable, "-m", "jupyter", "nbconvert", "--version"], cwd=tmp_path,
                          env=dict(os.environ), stdout=tmp_path / "v")
        assert child is not None and child.wait(timeout=60) == 0
        assert (tmp_path / "v").read_text().strip()[:1].isdigit()
    finally:
        srv.close()
    assert srv._proc.returncode == 0  # used: it ended when its input closed


def test_a_server_that_cannot_serve_is_said_once_and_notebooks_start_as_processes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    dead = papermill_server.PapermillServer()
    dead._proc.kill()
    dead._proc.wait()
    dead._reader.join(timeout=30)
    monkeypatch.setattr(papermill_server, "active", lambda: dead)
    try:
        for n in range(2):
            proc = papermill_server.spawn([sys.executable, "-c", f"print({n})"], cwd=tmp_path, env=dict(os.environ),
                                          stdout=tmp_path / f"o{n}")
            assert isinstance(proc, subprocess.Popen) and proc.wait(timeout=30) == 0
            assert (tmp_path / f"o{n}").read_text().strip() == str(n)
    finally:
        dead.close()
    err = capsys.readouterr().err
    assert err.count("papermill server not used (the papermill server ended)") == 1, err


def test_a_dask_workers_batches_share_one_server_per_night(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    monkeypatch.setattr(papermill_server, "_active", None)  # this module's own server is still running
    monkeypatch.setattr(papermill_server, "_for_runs", {})
    seen: dict[str, object] = {}

    def batch(run_id: str, name: str) -> None:
        with papermill_server.serving_run(run_id):
            srv = papermill_server.active()
            child = papermill_server.spawn([sys.executable, "-m", "papermill", "--help"], cwd=tmp_path,
                                           env=dict(os.environ), stdout=tmp_path / f"{name}.txt")
            seen[name] = (srv, type(child).__name__, child.wait(timeout=60))

    for name in ("a", "b"):  # two batches of one night, in two of the worker's threads
        t = threading.Thread(target=batch, args=("20261201T000000Z-night1", name))
        t.start()
        t.join()
    assert papermill_server.active() is None  # outside a batch, this thread has none
    first = seen["a"][0]
    assert seen["a"] == (first, "Forked", 0) and seen["b"] == (first, "Forked", 0)
    assert isinstance(first, papermill_server.PapermillServer)
    assert lock._group_belongs_to(first._proc.pid, "20261201T000000Z-night1")  # its environment names the night
    batch("20261202T000000Z-night2", "c")  # the next night: its own server, and the idle old one ends
    assert seen["c"][0] is not first and seen["c"][1:] == ("Forked", 0)
    assert first._proc.wait(timeout=30) is not None
    assert list(papermill_server._for_runs) == ["20261202T000000Z-night2"]
    papermill_server._for_runs["20261202T000000Z-night2"].close()


def test_cell_boundaries_write_the_notebook_at_most_every_second_and_a_failure_at_once(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import datetime as dt

    from papermill import engines

    monkeypatch.setattr(engines, "NotebookExecutionManager", engines.NotebookExecutionManager)  # restored after
    writes: list[list[str]] = []
    monkeypatch.setattr(engines, "write_ipynb",
                        lambda nb, path: writes.append([c.metadata.papermill["status"] for c in nb.cells]))
    papermill_server._save_cells_at_most_every(1.0)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(str(i)) for i in range(4)])
    nb.metadata["papermill"] = {}
    manager = engines.NotebookExecutionManager(nb, output_path=str(tmp_path / "out.ipynb"), progress_bar=False)
    clock = [dt.datetime(2026, 12, 3, tzinfo=dt.UTC)]
    monkeypatch.setattr(manager, "now", lambda: clock[0])

    manager.notebook_start()
    assert writes == [["pending"] * 4]  # the start is written at once
    for i in (0, 1):  # quick cells: nothing written between them
        manager.cell_start(nb.cells[i], i)
        manager.cell_complete(nb.cells[i], i)
    assert len(writes) == 1
    clock[0] += dt.timedelta(seconds=1.5)
    manager.cell_start(nb.cells[2], 2)  # a second has passed: written
    assert writes[-1] == ["completed", "completed", "running", "pending"]
    manager.cell_complete(nb.cells[2], 2)
    manager.cell_start(nb.cells[3], 3)
    assert len(writes) == 2
    manager.cell_exception(nb.cells[3], 3)
    manager.cell_complete(nb.cells[3], 3)  # a failed cell is written at once
    assert writes[-1] == ["completed", "completed", "completed", "failed"]
    manager.notebook_complete()  # and so is the end
    assert len(writes) == 4 and writes[-1] == writes[-2]
