"""The HTTP edge: the app and its routes, the run input as read off the wire, SSE, the inspector page.

A wing of the engine, private: each module is imported by name (docs/architecture.md).
"""
