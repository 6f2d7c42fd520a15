"""Landing a batch's results: the memory corpus in git, tasks, and watermarks.

Owns: `apply` (the one writer of a batch's results), `git_corpus` (where a memory is committed),
`memory_file` (paths and the render gate), `dedupe` (same claim, same task), `tasks` (task files),
`review` (what a person does with memories and tasks afterwards).

May import: `pipeline.consolidator`, `pipeline.warehouse` and the cross-cutting top-level modules.
"""
