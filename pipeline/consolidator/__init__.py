"""One batch of sessions in, one artifact folder out: the consolidator and its contract.

Owns: `tools` (list_sessions, search_transcript, read_lines), `toolbox` (those tools as a model
sees them), `contract` and `quotes` (the answer contract; where a quote is verified), `engine`
(the engine registry), `context` (what an engine is given and hands back), the two engines side by
side: `agent` (the LLM engine) and the package `rules` (the offline engine and each of its rules),
`artifact` (the batch folder's files),
`batch_input` (a batch's input, the files a running batch reads instead of the warehouse),
`batch` (one batch end to end), `prompts` (loading the system prompt), `pending` (which sessions a
night offers), `notebook_views` (the consolidate notebook's tables), `batch_secrets` (the secrets
of a batch's sessions, masked in everything the batch reads and writes).

May import: `pipeline.warehouse`, `pipeline.anchoring`, `pipeline.secrets` and the cross-cutting top-level modules.
It never writes the warehouse, and a running batch does not read it either: only its input folder.
"""
