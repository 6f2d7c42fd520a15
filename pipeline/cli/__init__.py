"""The `pipeline` command: one module per group of verbs, each verb a thin function over the library.

`main` parses the command line and imports only the module of the verb asked for, so `search` or
`sql` does not pay for polars or papermill. It may import any stage; no stage imports it.
"""

from pipeline.cli.main import main

__all__ = ["main"]
