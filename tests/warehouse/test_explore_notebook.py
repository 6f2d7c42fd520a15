"""The explore notebook runs end to end through papermill on the sample warehouse."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from tests.helpers import REPO, execute_notebook


@pytest.mark.slow
def test_explore_notebook_runs_on_samples(tmp_path: Path, wh: Path) -> None:
    out = tmp_path / "explore.ipynb"
    execute_notebook(str(REPO / "notebooks" / "explore.ipynb"), str(out), parameters={"db": str(wh)},
                        cwd=str(REPO), progress_bar=False, kernel_name="python3")
    nb = nbformat.read(out, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "\n".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "claude-code" in text and "shape:" in text
    # the explorer's helpers: hits of a corpus-wide search, the daily usage report, a conversation page
    assert "match" in text and "totalCost" in text
    html = "\n".join(str(o.get("data", {}).get("text/html", "")) for o in outputs)
    assert 'class="context"' in html and "<mark>Error</mark>" in html
    # The daily cached share is a real fraction (a 128-bit sum once made polars divide decimals to 1).
    usage = next(t for t in (str(o.get("data", {}).get("text/plain", "")) for o in outputs) if "cached_share" in t)
    assert "f64" in usage and "decimal" not in usage
