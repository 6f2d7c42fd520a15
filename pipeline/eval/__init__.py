"""Quality measured: an engine run over labelled sessions and scored against a gold file (`pipeline eval`).

Owns: `evaluate` (the gold format, batching the labelled sessions as a night would, matching
proposals to gold items, the scores), `report` (that run's report: scores beside tokens, cached
share and cost).

May import: `pipeline.nightly` (the planner), `pipeline.consolidator`, `pipeline.warehouse`,
`pipeline.secrets` and the cross-cutting top-level modules.
"""
