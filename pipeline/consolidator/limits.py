"""The bounds of the three transcript tools, in a module of their own.

`pipeline.consolidator.tools` applies them, and the prompt's tool descriptions (prompts/tools.json)
state them, so change both together. They live apart from the tools so that a command which only
names them (`pipeline read --help`, or the argument parser `pipeline ingest` builds) does not load
the secret scanner the tools need.
"""

MAX_HITS = 50
CONTEXT_CHARS = 80
MAX_READ_LINES = 200
DEFAULT_WIDTH = 400
MAX_WIDTH = 4000
MAX_RESULT_CHARS = 60_000
