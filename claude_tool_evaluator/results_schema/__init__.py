"""The results file's schema: the pydantic records one results document is made of, written and
read back by -o, the journal, --resume, compare, merge and render (document), and the sections
the modes (sections), the hostile room (security) and the plugin mode (plugin) add to it.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns)."""

__all__: list[str] = []
