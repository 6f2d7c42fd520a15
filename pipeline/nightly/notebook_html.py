"""An executed notebook as one HTML page that opens with no network: the one nbconvert command.

nbconvert's own templates load require.js and MathJax from a CDN and write "No description has been
provided for this image" on every plot; `notebooks/templates/offline` leaves every script out and keeps
each plot's alt text (its figures). The night report and `pipeline html` both convert through here.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pipeline import config
from pipeline.errors import OutcomeError, UsageError

TEMPLATES = config.NOTEBOOKS / "templates"
TEMPLATE = "offline"


def command(notebook: Path, out: Path, *, no_input: bool = False) -> list[str]:
    """The nbconvert command line that writes `out` (an .html file) from `notebook`."""
    return [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", *(["--no-input"] if no_input else []),
            f"--TemplateExporter.extra_template_basedirs={TEMPLATES}", "--template", TEMPLATE, str(notebook),
            "--output", out.with_suffix("").name, "--output-dir", str(out.parent)]


def to_html(notebook: str | Path, out: str | Path | None = None, *, no_input: bool = False) -> Path:
    """Convert an executed notebook to an offline HTML page (beside it, same name, unless `out`)."""
    from pipeline.nightly.kernels import run_papermill

    src = Path(notebook).absolute()
    if not src.is_file():
        raise UsageError(f"{notebook}: no such notebook")
    if src.suffix != ".ipynb":
        raise UsageError(f"{notebook}: not a notebook (.ipynb)")
    dest = Path(out).absolute() if out is not None else src.with_suffix(".html")
    if dest.suffix != ".html":
        raise UsageError(f"{out}: the page's name must end in .html")
    dest.parent.mkdir(parents=True, exist_ok=True)
    proc = run_papermill(command(src, dest, no_input=no_input), cwd=config.REPO)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["nbconvert failed"])[-1]
        raise OutcomeError(f"{src.name} could not be converted to HTML: {last}")
    return dest


__all__ = ["TEMPLATE", "TEMPLATES", "command", "to_html"]
