"""`pipeline show`: a session as a person reads it, in the terminal (rich), as Markdown or as an HTML page.

Owns: `conversation` (the lines of a session as items a person reads), `terminal`, `markdown`, `page`.

May import: `pipeline.warehouse` and the cross-cutting top-level modules.
"""

from pipeline.show.conversation import Conversation, Item, conversation

__all__ = ["Conversation", "Item", "conversation"]
