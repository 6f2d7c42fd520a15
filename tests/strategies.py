"""Hypothesis strategies the output-fidelity tests share: values a transcript really holds that a
renderer (a terminal, HTML, Markdown, an MCP client) could take for its own syntax."""

from __future__ import annotations

from hypothesis import strategies as st

# Pieces a transcript really holds that a renderer could take for its own syntax.
HOSTILE = [
    "[bold]", "[/bold]", "[/]", "[dir]", "tree[dir]", "[trimmed for fixture]", "[link=http://x]", ":smile:", ":warning:",
    "<b>", "</code>", "&amp;", "&lt;", "<script>", "*a*", "_b_", "`c`", "# h", "| x |", "\\", "\x1b[31m", "\x1b]8;;x\x07",
    "\x00", "\x07", "\x08", "\r", "\x0b", "\x7f", "\x9b", "\u202e", "\u200b", "\u2066", "\ufeff", "\u2028", "é", "終わり", "🎉",
    "ana@example.com", "-Users-ana-uw-", "sk-", "AKIA",
]
value = st.lists(st.one_of(st.sampled_from(HOSTILE), st.text(st.characters(exclude_categories=("Cs",),
                                                                             exclude_characters="\t\n"), max_size=6)),
                 max_size=8).map("".join)
