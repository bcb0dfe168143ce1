"""The plugin mode's section of the results document (`plugin`): the plugin and its suite as
read (each case with its graders), every configuration it ran on, each case's with/without
delta (Newcombe's interval, Fisher's p), what the plugin's parts did per case and arm, and the
suite's warnings. Its runs are the document's `results` (PluginRunResult, in results_schema).

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema."""

from __future__ import annotations

from .document import Record

__all__ = [
    "ArmDeltaRecord",
    "PluginCaseRecord",
    "PluginConfigurationRecord",
    "PluginGraderRecord",
    "PluginPartsRecord",
    "PluginRecord",
]


class PluginGraderRecord(Record):
    """A grader as its case declares it (Claude Code's defaults filled in)."""

    name: str
    type: str
    weight: float = 1.0
    arm: str | None = None  # with-only | both | None (unset)


class PluginCaseRecord(Record):
    """A case of the plugin's suite as it was read."""

    name: str
    prompt: str = ""
    source: str = ""  # the file its prompt came from
    runs_per_arm: int = 0
    tags: list[str] = []
    graders: list[PluginGraderRecord] = []
    plugins: list[str] = []  # what the arm with the plugin loads: the case's plugins (folders)


class PluginConfigurationRecord(Record):
    """A model and Claude Code the suite ran on (several: a matrix, each with its label)."""

    label: str = ""  # `model @ version` in a matrix, else ""
    model: str
    claude_version: str | None = None


class ArmDeltaRecord(Record):
    """A case's (or the whole suite's) runs with the plugin against its runs without: the pass
    counts and mean scores of each arm, the difference of pass rates with Newcombe's interval,
    Fisher's exact p, and (within noise) the runs per arm that would decide it."""

    name: str  # the case, or "(all cases)"; `name (label)` in a matrix
    case: str = ""  # "" for the whole suite
    label: str = ""
    with_passed: int = 0
    with_runs: int = 0
    score_with: float = 0.0
    without_passed: int = 0
    without_runs: int = 0
    score_without: float = 0.0
    delta: float = 0.0
    interval: tuple[float, float] = (0.0, 0.0)
    p_value: float = 1.0
    significant: bool = False
    runs_to_decide: int | None = None
    verdict: str = ""  # `significant: delta +1.00 [+0.39, +1.00], p = 0.0079`, `within noise: ...`


class PluginPartsRecord(Record):
    """What the plugin's parts did in one case's runs in one arm, each with the runs it
    happened in: `delegated to shop:invoice-auditor (3/3)`, `hook UserPromptSubmit added context:
    ... (3/3)`, `MCP call mcp__plugin_shop_stock__count (2/3)`."""

    case: str
    arm: str
    label: str = ""
    parts: list[str] = []


class PluginRecord(Record):
    """`plugin`: the plugin, its suite, the configurations, the deltas, its parts' doings."""

    name: str
    path: str
    eval_dir: str
    ablation: str  # with-without | none
    configurations: list[PluginConfigurationRecord] = []
    cases: list[PluginCaseRecord] = []
    deltas: list[ArmDeltaRecord] = []
    parts: list[PluginPartsRecord] = []
    warnings: list[str] = []
    others: list[str] = []  # --distractors installed: the other plugins loaded in both arms
