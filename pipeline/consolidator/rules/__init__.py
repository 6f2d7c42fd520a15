"""The offline rules engine: the consolidator's second engine, beside the LLM agent (`agent`).

Owns: `engine` (reading a batch, building the answer, checking it with the contract: `run_rules`),
`tool_runs` (which calls failed), `shell_commands` (what a command ran), `error_shapes` and
`workarounds` (recurring failures, what worked next), `routines` (prefixes, pinned paths, routine
checks and steps), `commitments` and `promise_phrases` (promises, eight languages), `statements`
(a task statement tidied, which task files use too).

May import: the rest of `pipeline.consolidator` (context, contract, quotes), `pipeline.warehouse`,
`pipeline.anchoring`, `pipeline.secrets` and the cross-cutting top-level modules.
"""
