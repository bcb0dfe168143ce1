"""Modes: one module per family; each holds the functions a row of MODES runs.

May import: everything above them (up to the writers)."""

__all__: list[str] = []
