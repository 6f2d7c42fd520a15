"""trace-pipeline: agent transcripts into a DuckDB warehouse, a reviewed memory corpus, and cache analytics."""

__version__ = "0.1.0"
