"""The Parquet lake: the warehouse as hive-partitioned Parquet files that any engine can read.

Owns: `export` (what changed since the last export, and the COPY statements that write it),
`manifest` (the lake's `_manifest.json`: which files make up each table, and how far each session
was exported), `store` (where the files go: a local folder, with atomic renames, or any fsspec
URL, with unique names and the manifest switched last).

May import: `warehouse` and the cross-cutting top-level modules.
"""
