"""One thread in the store: the handle on what was read, the records beside its messages, the cache, the conversation.

A wing of the engine, private: each module is imported by name (docs/architecture.md).
"""
