"""Prompt-cache analytics: simulate a harness and a provider's cache, classify real calls, report.

Owns: `simulator` (the prefix-cache model of each provider), `workload` and `workload_bulk` (a
harness workload with a known true effect, detailed and bulk), `analysis` (each call's cause,
shares, difference-in-differences, bootstrap), `report` (`cache-report`), `plots`.

May import: `pipeline.calls`, `pipeline.anchoring`, `pipeline.warehouse` and the cross-cutting
top-level modules.
"""
