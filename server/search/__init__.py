"""Keeps the memkit pipeline's index in step with the store, and keeps each user's
conversation state in the store."""

from server.search.conversations import StoredConversations
from server.search.index import SearchIndex, load_events

__all__ = ["SearchIndex", "StoredConversations", "load_events"]
