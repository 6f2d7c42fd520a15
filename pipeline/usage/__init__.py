"""Usage and list-price cost reports over the warehouse's `llm_calls`, in ccusage's JSON names
(`pipeline usage daily|weekly|monthly|session|blocks`).

Owns: `report` (the reports), `periods` (days, weeks, months and 5-hour blocks), `session_table`
(`pipeline sessions` with each session's models, tokens and cost).

May import: `pipeline.calls` (prices), `pipeline.warehouse` and the cross-cutting top-level modules.
"""

from pipeline.usage.report import KINDS, UsageFilter, usage_report

__all__ = ["KINDS", "UsageFilter", "usage_report"]
