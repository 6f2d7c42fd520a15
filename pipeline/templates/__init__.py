"""HTML is written by Jinja templates with autoescaping, never by joining strings: every value a page
shows is escaped by the engine (and masked, where the page says `| masked`, by the one function every
output masks with). The templates are the `*.html.j2` files beside this module.

May import: `secrets` (the masking function) and the top-level modules."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

HERE = Path(__file__).parent


def _masked(value: Any) -> str:
    from pipeline.secrets.redact import redacted

    return redacted("" if value is None else str(value))


@cache
def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["masked"] = _masked
    env.filters["basename"] = lambda path: Path(str(path)).name
    return env


def render(name: str, **values: Any) -> str:
    """The template `name` (a file of this folder) with `values`."""
    return environment().get_template(name).render(**values)


def macro(name: str, macro_name: str, *args: Any, **kwargs: Any) -> str:
    """One macro of the template `name`, called with these values."""
    return str(getattr(environment().get_template(name).module, macro_name)(*args, **kwargs))


def markup(html: str) -> Any:
    """HTML another template has already written (escaped there), passed on without escaping it again."""
    from markupsafe import Markup

    return Markup(html)


__all__ = ["environment", "macro", "markup", "render"]
