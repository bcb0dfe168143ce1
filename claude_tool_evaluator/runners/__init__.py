"""Runners: the engines behind the pipeline's one interface (`run(job) -> record`): tool use,
Claude Code, test generation, the crowded room and the red team.

May import: everything above them (up to the pipeline)."""

__all__: list[str] = []
