"""Scoring: pure functions from transcripts to verdicts and scores (no model call, no server):
tool checks (TOOL_CHECKS), statistics, skills, crowds, task evals, the literature's figures,
scan findings and attacks.

May import: everything above it (the foundations up to claude_code)."""

__all__: list[str] = []
