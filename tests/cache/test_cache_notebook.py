"""notebooks/cache_anchoring.ipynb runs through papermill with the real kernel, on simulated data
by default and on a warehouse's llm_calls, and writes its plots and metrics."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from pipeline.warehouse import db
from tests.helpers import REPO, execute_notebook

NOTEBOOK = REPO / "notebooks" / "cache_anchoring.ipynb"
PLOTS = ("daily_cached_rate.png", "crossing_vs_other.png", "lost_by_cause.png", "cache_cliffs.png")
PARAMETERS = (
    "db", "calls", "source", "cutover", "cutover_version", "tz", "ttl_seconds", "min_sessions", "min_calls", "provider",
    "out_dir",
)


def _run(tmp_path: Path, **parameters: object) -> nbformat.NotebookNode:
    out = tmp_path / "executed.ipynb"
    execute_notebook(str(NOTEBOOK), str(out), parameters=parameters, cwd=str(tmp_path),
                        progress_bar=False, kernel_name="python3")
    nb = nbformat.read(out, as_version=4)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    return nb


def _outputs(nb: nbformat.NotebookNode) -> list[dict]:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]


def test_parameters_cell_names_exactly_the_interface() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    names = [line.split("=")[0].strip() for line in tagged[0].source.splitlines() if "=" in line]
    assert tuple(names) == PARAMETERS


@pytest.mark.slow
def test_notebook_simulates_by_default_and_writes_plots(tmp_path: Path) -> None:
    out_dir = tmp_path / "report"
    # The default simulation is sized so that each crossing cell holds the default floor of 5
    # sessions (--min-sessions): the known effect is checked against its interval.
    nb = _run(tmp_path, out_dir=str(out_dir))
    for name in PLOTS:
        assert (out_dir / name).stat().st_size > 5_000
    assert (out_dir / "simulated_calls.parquet").exists()
    metrics = json.loads((out_dir / "metrics.json").read_text())
    effect, true_effect = metrics["effect"], metrics["simulation"]["true_effect"]
    assert effect["reason"] is None and effect["min_sessions"] == 5
    assert min(effect["cell_sessions"].values()) >= 5
    assert effect["ci_low"] <= true_effect <= effect["ci_high"]
    assert metrics["agreement"]["rate"] >= 0.95
    assert sorted(Path(p).name for p in metrics["plots"]) == sorted(PLOTS)
    outputs = _outputs(nb)
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 3  # plots shown inline
    note = "\n".join(o.get("data", {}).get("text/markdown", "") for o in outputs)
    assert "True effect known to the simulator" in note and "Classification agrees" in note and "Benchmark" in note


@pytest.mark.slow
def test_notebook_runs_on_a_warehouse(tmp_path: Path, samples_copy: Path) -> None:
    warehouse = samples_copy
    out_dir = tmp_path / "real"
    _run(tmp_path, db=str(warehouse), source="claude-code", cutover="2026-10-25", out_dir=str(out_dir))
    metrics = json.loads((out_dir / "metrics.json").read_text())
    assert metrics["inputs"]["source"] == "claude-code" and metrics["calls"] > 0
    assert metrics["simulation"] is None and metrics["agreement"] is None
    for name in PLOTS:
        assert (out_dir / name).exists()
    with db.writing(warehouse):  # the notebook let go of the warehouse
        pass
