"""Every papermill command line the pipeline writes, read back by papermill's own command-line parser
(as papermill's CLI tests do: its `execute_notebook` replaced by a mock), and checked against the
parameters each notebook declares."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any
from unittest.mock import patch

import nbformat
import papermill
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from papermill import cli as papermill_cli

from pipeline.errors import PipelineError
from pipeline.nightly import driver, report
from pipeline.nightly.kernels import Parameter, notebook_failure, papermill_command, run_papermill
from tests.helpers import raising_notebook


def parsed(cmd: list[str]) -> dict[str, Any]:
    """What papermill's CLI would hand to execute_notebook for this command line."""
    assert cmd[:3] == [sys.executable, "-m", "papermill"]
    with patch.object(papermill_cli, "execute_notebook") as execute:
        result = CliRunner().invoke(papermill_cli.papermill, cmd[3:], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    execute.assert_called_once()
    return dict(execute.call_args.kwargs)


def same_values(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert got == want
    assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in want.items()}


def commands(tmp: Path) -> list[tuple[Path, list[str], dict[str, Parameter]]]:
    """(notebook, command, the parameters meant) for each papermill run: a batch whose only session
    id is all digits and whose model name reads as a bool, the cache notebook, the night report
    with a note that reads as a bool and a run id that reads as a number."""
    wh = tmp / "w.duckdb"
    batch = driver.BatchOutcome("b-1", ["20261001"], tmp / "b-1")
    opts = driver.NightlyOptions(model="True", base_url="http://127.0.0.1:9/v1",
                                 budgets={"max_tool_calls": 12, "max_submits": 2, "max_tokens": 50_000,
                                          "max_seconds": 0.5})
    batch_params = driver.batch_parameters(batch, "rules", wh, opts)
    cache_dir = tmp / "cache"
    return [
        (driver.CONSOLIDATE_NOTEBOOK, driver._papermill_cmd(batch, "rules", wh, opts), batch_params),
        (driver.CACHE_NOTEBOOK, driver.cache_command(cache_dir, wh, "2026-10-20"),
         {"db": str(wh), "out_dir": str(cache_dir), "cutover": "2026-10-20"}),
        (report.NOTEBOOK, report.report_command("12345", tmp, wh, note="True", corpus=tmp / "corpus"),
         {"db": str(wh), "run_id": "12345", "run_dir": str(tmp), "note": "True", "corpus": str(tmp / "corpus")}),
        (driver.CACHE_NOTEBOOK, driver.cache_command(cache_dir, wh, None),  # no cutover configured
         {"db": str(wh), "out_dir": str(cache_dir), "cutover": None}),
        (driver.CACHE_NOTEBOOK, driver.cache_command(cache_dir, wh, None, "America/Denver"),  # nightly --tz
         {"db": str(wh), "out_dir": str(cache_dir), "cutover": None, "tz": "America/Denver"}),
        (driver.CACHE_NOTEBOOK, driver.cache_command(cache_dir, wh, None, None, "claude-code@2.1.0"),  # --cutover-version
         {"db": str(wh), "out_dir": str(cache_dir), "cutover": None, "cutover_version": "claude-code@2.1.0"}),
    ]


def test_every_parameter_the_pipeline_passes_is_one_its_notebook_declares(tmp_path: Path) -> None:
    for notebook, cmd, meant in commands(tmp_path):
        declared = set(papermill.inspect_notebook(str(notebook)))
        given_params = parsed(cmd)["parameters"]
        assert set(given_params) <= declared, (notebook.name, set(given_params) - declared)
        assert set(meant) == set(given_params)


def test_parameters_arrive_with_their_own_types(tmp_path: Path) -> None:
    batch_notebook, batch_cmd, batch_meant = commands(tmp_path)[0]
    kwargs = parsed(batch_cmd)
    assert kwargs["input_path"] == str(batch_notebook)
    assert kwargs["output_path"] == str(tmp_path / "b-1" / "notebook.ipynb")
    same_values(kwargs["parameters"], batch_meant)
    assert kwargs["parameters"]["session_ids"] == "20261001"  # not the int 20261001
    assert kwargs["parameters"]["model"] == "True"  # not the bool True
    assert kwargs["parameters"]["max_seconds"] == 0.5 and kwargs["parameters"]["max_tool_calls"] == 12
    for _, cmd, meant in commands(tmp_path)[1:]:
        same_values(parsed(cmd)["parameters"], meant)


names = st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True)
values = st.one_of(st.text(), st.from_regex(r"-?\d{1,12}", fullmatch=True), st.sampled_from(["True", "False", "None", "1e3"]),
                   st.integers(), st.floats(allow_nan=False), st.booleans(), st.none())


@given(st.dictionaries(names, values, max_size=6))
def test_any_parameters_survive_papermills_parser(params: dict[str, Parameter]) -> None:
    cmd = papermill_command(Path("in.ipynb"), Path("out.ipynb"), params, cwd=Path("/"))
    same_values(parsed(cmd)["parameters"], params)


def test_a_value_papermill_cannot_carry_is_refused() -> None:
    with pytest.raises(TypeError, match="session_ids: list"):
        papermill_command(Path("a"), Path("b"), {"session_ids": ["x"]}, cwd=Path("/"))  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="not a Python name"):
        papermill_command(Path("a"), Path("b"), {"out-dir": "x"}, cwd=Path("/"))


def test_the_failing_cell_is_read_from_the_executed_notebook(tmp_path: Path) -> None:
    executed = tmp_path / "out.ipynb"
    cmd = papermill_command(raising_notebook(tmp_path / "in.ipynb"), executed, {"session_ids": "20261001"},
                            cwd=tmp_path)
    proc = run_papermill(cmd, cwd=tmp_path)
    assert proc.returncode != 0
    failure = notebook_failure(executed)
    assert failure is not None
    cells = nbformat.read(executed, as_version=4).cells
    # papermill adds the injected-parameters cell and red marker cells: the index is the file's own
    assert "int(session_ids)" in cells[failure.cell].source
    assert (failure.name, failure.message) == ("TypeError", "'int' object is not iterable")
    assert failure.execution_count == 4  # parameters, injected parameters, print, then this one
    assert str(failure) == f"cell {failure.cell} (In [4]) raised TypeError: 'int' object is not iterable"
    assert isinstance(failure, PipelineError)


def test_no_failure_is_read_from_a_notebook_that_ran_or_was_never_written(tmp_path: Path) -> None:
    assert notebook_failure(tmp_path / "missing.ipynb") is None
    (tmp_path / "half.ipynb").write_text('{"cells": [')
    assert notebook_failure(tmp_path / "half.ipynb") is None
    assert notebook_failure(raising_notebook(tmp_path / "unrun.ipynb")) is None  # no cell has an error output


@pytest.mark.parametrize(("options", "env", "needle"), [
    ({"cutover": "2026-01-01", "cutover_version": "claude-code@2.1.0"}, {}, "not both"),
    ({"cutover_version": "claude-code"}, {}, "HARNESS@VERSION"),
    ({}, {"PIPELINE_CUTOVER": "last tuesday"}, "is not a date"),
])
def test_a_cutover_the_report_could_not_read_stops_the_night_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: dict[str, str], env: dict[str, str], needle: str
) -> None:
    from pipeline.errors import UsageError

    for name in ("PIPELINE_CUTOVER", "PIPELINE_CUTOVER_VERSION"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    opts = driver.NightlyOptions(db=str(tmp_path / "w.duckdb"), corpus=str(tmp_path / "c"), runs=str(tmp_path / "r"),
                                 engine="rules", **options)
    with pytest.raises(UsageError, match=needle):
        driver.run_nightly(opts)
    assert not (tmp_path / "w.duckdb").exists() and not (tmp_path / "r").exists()
