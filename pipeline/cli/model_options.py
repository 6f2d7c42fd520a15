"""The options of the openai engine that a local model server needs, shared by consolidate, nightly and eval.

A hosted API needs none of them. llama.cpp, Ollama or vLLM serving a small model on a CPU does:
a reply can take minutes (`--timeout`), a retried request costs a whole reply again
(`--max-retries`), a small model keeps to tool calls only when asked to (`--tool-choice required`,
`--no-parallel-tool-calls`), and the server refuses a request longer than its context window
(`--context-tokens`, so the loop ends the batch first), and a small model may write until the
window is full (`--max-reply-tokens`). Unset options are not sent.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

__all__ = ["add_model_options", "model_options"]

_NAMES = ("max_retries", "timeout", "tool_choice", "parallel_tool_calls", "context_tokens", "max_reply_tokens")


def _tokens(minimum: int, too_few: str) -> Callable[[str], int]:
    """An argparse type: a whole number of tokens, at least `minimum` (`too_few` says why, given the number)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of tokens") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(too_few.format(value=value))
        return value

    return parse


_window = _tokens(1024, "{value} tokens is too small a context window; give the server's (1024 or more)")
_reply = _tokens(16, "{value} tokens is too short for any tool call; give 16 or more")


def add_model_options(p: argparse.ArgumentParser, *, retries_and_timeout: bool = True) -> None:
    """Add the flags; `retries_and_timeout=False` where the verb already has --max-retries and --timeout."""
    if retries_and_timeout:
        p.add_argument("--max-retries", type=int, metavar="N",
                       help="openai engine: retries of one model request on 429/5xx/timeouts (default 2)")
        p.add_argument("--timeout", type=float, metavar="S",
                       help="openai engine: seconds to wait for one model reply (default 120; a small local "
                       "model reading a long prompt on a CPU needs several minutes)")
    p.add_argument("--tool-choice", choices=("auto", "required"),
                   help="openai engine: send tool_choice (llama.cpp keeps a small model to tool calls with required)")
    p.add_argument("--parallel-tool-calls", action=argparse.BooleanOptionalAction, default=None,
                   help="openai engine: send parallel_tool_calls true or false (default: not sent)")
    p.add_argument("--context-tokens", type=_window, metavar="N",
                   help="openai engine: the server's context window; the batch ends (budget) before a request "
                   "would not fit, and tool results too big for it are refused to the model")
    p.add_argument("--max-reply-tokens", type=_reply, metavar="N",
                   help="openai engine: the most tokens one reply may hold, sent as max_tokens (default with "
                   "--context-tokens: a quarter of the window, at most 4096; else not sent)")


def model_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options given on the command line, by run_batch's names; unset ones left out."""
    out = {name: getattr(args, name, None) for name in _NAMES}
    for name in ("max_retries", "timeout"):
        value = out.get(name)
        if value is not None and (value < 0 if name == "max_retries" else value <= 0):
            from pipeline.errors import UsageError

            raise UsageError("--max-retries must be 0 or more and --timeout above 0")
    return {k: v for k, v in out.items() if v is not None}
