"""One run: the resume gate, the model step, the tool calls, answers, stops, and the policies a run asks.

A wing of the engine, private: each module is imported by name (docs/architecture.md).
"""
