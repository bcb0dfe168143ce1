"""Loaders: one module per input format, each returning cases (or servers, skills, distractors,
vectors) or raising InputError with file and line.

May import: the foundations, results_schema, answers; a loader imports no other loader but
servers and skills."""

__all__: list[str] = []
