"""Shared state: JSON Patch, the state tools see and change, predictive state updates.

A wing of the engine, private: each module is imported by name (docs/architecture.md).
"""
