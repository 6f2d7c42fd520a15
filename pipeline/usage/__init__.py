"""Usage and list-price cost reports over the warehouse's `llm_calls`, in ccusage's JSON names
(`pipeline usage daily|weekly|monthly|session|blocks`)."""

from pipeline.usage.report import KINDS, UsageFilter, usage_report

__all__ = ["KINDS", "UsageFilter", "usage_report"]
