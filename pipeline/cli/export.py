"""The export verb: the warehouse as a hive-partitioned Parquet lake (pipeline/lake/)."""

from __future__ import annotations

import argparse
import sys

from pipeline.cli.main import add_db, add_json, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export", help="write the warehouse as a hive-partitioned Parquet lake (incremental)",
        description="Write every table as Parquet under DIR or URL, partitioned by source and day "
        "(lines/source=…/day=YYYY-MM-DD/…), for DuckDB, polars, pyarrow, Spark or Trino. A second export "
        "writes only what changed; _manifest.json in the lake lists the files of the last finished export.",
    )
    p.add_argument("--to", required=True, metavar="DIR|URL",
                   help="a folder (created if missing) or an fsspec URL such as s3://bucket/lake")
    p.add_argument("--since", metavar="YYYY-MM-DD",
                   help="only day partitions from this day on; older partitions in the lake stay as they are")
    add_db(p)
    add_json(p)
    p.set_defaults(func=cmd_export)

    h = sub.add_parser(
        "html", help="convert an executed notebook to one HTML page that opens offline",
        description="Write NOTEBOOK (an executed .ipynb: a batch's notebook.ipynb, the night's night_report.ipynb, "
        "a cache_anchoring or explore run) as one HTML page with nbconvert and the project's offline template: no "
        "script, font or style from the network, and every plot with its figures as alt text.",
    )
    h.add_argument("notebook", metavar="NOTEBOOK", help="the executed notebook (.ipynb)")
    h.add_argument("--out", metavar="FILE", help="the page to write (default: beside the notebook, .html)")
    h.add_argument("--no-input", action="store_true", help="leave the code cells out (as the night report does)")
    add_json(h)
    h.set_defaults(func=cmd_html)


def cmd_export(args: argparse.Namespace) -> int:
    from pipeline.lake import export

    since = export.parse_since(args.since)
    def say(msg: str) -> None:
        if not args.json:
            sys.stderr.write(msg + "\n")

    report = export.export_lake(args.db, args.to, since=since, say=say)
    if args.json:
        print_json(report.to_json())
    else:
        sys.stderr.write(report.summary() + "\n")
    return 0


def cmd_html(args: argparse.Namespace) -> int:
    from pipeline.nightly.notebook_html import to_html

    page = to_html(args.notebook, args.out, no_input=args.no_input)
    if args.json:
        print_json({"page": str(page)})
    else:
        sys.stderr.write(f"wrote {page}\n")
    return 0


__all__ = ["register"]
