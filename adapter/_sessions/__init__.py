"""What outlives a request: a run's journal, reattaching, following on another replica, threads as a resource.

A wing of the engine, private: each module is imported by name (docs/architecture.md).
"""
