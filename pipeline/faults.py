"""Deterministic fault injection, so tests can prove that a kill at any step loses nothing.

`PIPELINE_CRASH_AT=<step>` makes the process exit abruptly (no cleanup, no flush, as `kill -9`
would) the first time it reaches `crash_point("<step>")`; `<step>:<n>` waits for the n-th time.
Unset, it costs one dictionary lookup.
"""

from __future__ import annotations

import os
import sys

CRASH_EXIT_CODE = 86
_seen: dict[str, int] = {}


def crash_point(step: str) -> None:
    wanted = os.environ.get("PIPELINE_CRASH_AT")
    if not wanted:
        return
    name, _, nth = wanted.rpartition(":")
    if not nth.isdigit():  # no count given: the step name itself may contain colons
        name, nth = wanted, "1"
    if name != step:
        return
    _seen[step] = _seen.get(step, 0) + 1
    if _seen[step] >= int(nth):
        sys.stderr.write(f"PIPELINE_CRASH_AT={wanted}: exiting abruptly at {step}\n")
        sys.stderr.flush()
        os._exit(CRASH_EXIT_CODE)
