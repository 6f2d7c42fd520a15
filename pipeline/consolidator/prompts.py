"""The consolidator's system prompt and tool schemas, read from the repository's `prompts/` folder.

`prompts/consolidator.md` is the system prompt; `prompts/tools.json` is the Chat Completions `tools`
array (`list_sessions`, `search_transcript`, `read_lines`, `submit_answer`). The bounds those
descriptions promise are the constants of `pipeline.consolidator.tools`; tests hold the two together.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any, Final

from pipeline import config
from pipeline.errors import PipelineError

__all__ = ["PROMPTS_DIR", "TOOL_NAMES", "system_prompt", "tool_schemas"]

PROMPTS_DIR: Final = config.PROMPTS
SYSTEM_PROMPT_FILE: Final = "consolidator.md"
TOOLS_FILE: Final = "tools.json"
TOOL_NAMES: Final = ("list_sessions", "search_transcript", "read_lines", "submit_answer")


def _read(name: str) -> str:
    path = PROMPTS_DIR / name
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PipelineError(
            f"cannot read the consolidator prompt file {path} ({exc.strerror or exc}); run from a "
            "checkout of trace-pipeline installed in editable mode, where prompts/ sits beside pipeline/"
        ) from None


@functools.cache
def system_prompt() -> str:
    """The consolidator's system prompt, exactly as stored in prompts/consolidator.md."""
    return _read(SYSTEM_PROMPT_FILE)


@functools.cache
def _tools() -> tuple[dict[str, Any], ...]:
    path = PROMPTS_DIR / TOOLS_FILE
    try:
        data = json.loads(_read(TOOLS_FILE))
    except json.JSONDecodeError as exc:
        raise PipelineError(
            f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None
    names = [t.get("function", {}).get("name") for t in data] if isinstance(data, list) else []
    if tuple(names) != TOOL_NAMES:
        raise PipelineError(
            f"{path} must define the tools {', '.join(TOOL_NAMES)} in that order; found {names}"
        )
    return tuple(data)


def tool_schemas() -> list[dict[str, Any]]:
    """The `tools` array for chat.completions.create (a fresh copy; callers may modify it)."""
    return copy.deepcopy(list(_tools()))
