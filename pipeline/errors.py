"""Errors meant for people: each says what was wrong, where, and what to do next.

The CLI maps UsageError to exit code 2 and OutcomeError to exit code 1 and prints only the message.
"""

from __future__ import annotations


class PipelineError(Exception):
    """Base class; the message is shown to the user as is."""

    exit_code = 1


class UsageError(PipelineError):
    """The invocation is wrong: bad flag, unknown session, bad range, missing file."""

    exit_code = 2


class OutcomeError(PipelineError):
    """The command ran and the outcome is negative."""

    exit_code = 1


class WarehouseBusyError(PipelineError):
    """Another process holds the warehouse file."""

    exit_code = 1
