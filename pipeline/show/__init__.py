"""`pipeline show`: a session as a person reads it, in the terminal (rich), as Markdown or as an HTML page."""

from pipeline.show.conversation import Conversation, Item, conversation

__all__ = ["Conversation", "Item", "conversation"]
