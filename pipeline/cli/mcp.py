"""`pipeline mcp`: the MCP server an agent (Claude Code, Codex, any MCP client) starts on stdio."""

from __future__ import annotations

import argparse

from pipeline.cli.main import add_db, add_json, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "mcp", help="serve transcripts and memories to agents over MCP (stdio, read-only)",
        description="An MCP server on stdin/stdout for an agent to start: tools list_sessions, search, read_lines, "
        "search_memories and get_memory, each result bounded and masked. It only reads the published warehouse "
        "and the corpus's last commit, so a night can run beside it. Register it with Claude Code: "
        "claude mcp add trace-pipeline -- pipeline mcp --db /abs/path/warehouse.duckdb --corpus /abs/path/corpus",
    )
    add_db(p)
    p.add_argument("--corpus", metavar="DIR", help="memory corpus (default data/corpus, env PIPELINE_CORPUS)")
    p.add_argument("--list-tools", action="store_true",
                   help="print the tools as an agent receives them (name, description, input schema, estimated "
                   "tokens) and exit, instead of serving")
    add_json(p)
    p.set_defaults(func=cmd_mcp)


def cmd_mcp(args: argparse.Namespace) -> int:
    from pipeline.delivery import mcp_server

    if not args.list_tools:
        mcp_server.serve(args.db, args.corpus)
        return 0
    tools = mcp_server.tool_list(args.db, args.corpus)
    if args.json:
        print_json(tools)
        return 0
    import sys

    for t in tools:
        sys.stdout.write(f"{t['name']:<16} ~{t['estimatedTokens']:>4} tokens  {t['description']}\n")
    total = sum(t["estimatedTokens"] for t in tools)
    sys.stderr.write(f"{len(tools)} tools, about {total} tokens of context for their names, descriptions and "
                     "schemas (4 characters a token)\n")
    return 0
