"""The nightly job: ingest, plan, run batches through papermill, apply, report.

Owns: `driver` (one night end to end), `executors` (where batches run: beside the driver or on
a Dask cluster; the driver stays the only writer), `planner` (batches of pending sessions), `lock` (one night
at a time per warehouse), `progress` (where the batches are, kept in the run folder), `kernels`
(every papermill command line, running it with the kernel-start retry, the failing cell of an
executed notebook), `report` (the night's HTML report), `evidence` (the review page's quotes in their
transcript context). Measuring an engine on labelled sessions is `pipeline.eval`.

May import: every stage below the CLI (`corpus`, `consolidator`, `warehouse`, `cache`, `calls`,
`anchoring`, `secrets`) and the cross-cutting top-level modules.
"""
