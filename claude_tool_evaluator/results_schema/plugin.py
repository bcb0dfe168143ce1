"""The plugin mode's section of the results document (`plugin`): the plugin and its suite as
read (each case with its graders), every configuration it ran on, each case's with/without
delta (Newcombe's interval, Fisher's p), what the plugin's parts did per case and arm, and the
suite's warnings. Its runs are the document's `results` (PluginRunResult, in results_schema).

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema."""

from __future__ import annotations

from typing import Any

from .document import Record

__all__ = [
    "ArmDeltaRecord",
    "PluginCaseRecord",
    "PluginConfigurationRecord",
    "PluginEffectRecord",
    "PluginGraderRecord",
    "PluginPartsRecord",
    "PluginRecord",
    "ReusedArmRecord",
]


class PluginGraderRecord(Record):
    """A grader as its case declares it (Claude Code's defaults filled in)."""

    name: str
    type: str
    weight: float = 1.0
    arm: str | None = None  # with-only | both | None (unset)
    config: dict[str, Any] = {}  # its other fields as the case gives them (`pattern`, `tool`, ...)


class ReusedArmRecord(Record):
    """A case's arm whose runs were reused, not run (the arm without the plugin, its key
    unchanged): how many of its runs, and from which earlier run (file or cache, id, date)."""

    arm: str  # without
    label: str = ""
    runs: int = 0  # runs reused
    of: int = 0  # runs of the arm in all
    source: str = ""  # file | cache
    place: str = ""  # the results file or the cache folder
    run_id: str = ""
    date: str = ""


class PluginCaseRecord(Record):
    """A case of the plugin's suite as it was read."""

    name: str
    prompt: str = ""
    source: str = ""  # the file its prompt came from
    runs_per_arm: int = 0
    tags: list[str] = []
    graders: list[PluginGraderRecord] = []
    # claude plugin eval's aggregates of its runs (the first configuration's): the mean run score
    # and the share of perfect runs of each arm, and the delta of mean scores (None: no arm
    # without the plugin, or a run of either arm ended on an error)
    score: float = 0.0
    pass_rate: float = 0.0
    score_without: float | None = None
    pass_rate_without: float | None = None
    delta: float | None = None

    plugins: list[str] = []  # what the arm with the plugin loads: the case's plugins (folders)
    reused: list[ReusedArmRecord] = []  # the arms whose runs an earlier run gave (not run again)


class PluginEffectRecord(Record):
    """The plugin's effect as `claude plugin eval` reports it (its JSON's suite aggregates and
    its report's headline), for one configuration: the suite score (the mean of the cases' mean
    run scores with the plugin), the baseline (the same without it), the mean of the cases'
    deltas, and the cases improved (delta > 0), flat (0) and regressed (< 0)."""

    label: str = ""  # a configuration of a matrix (`model @ version`), else ""
    title: str  # `greeter v1.0.0`
    threshold: float = 1.0
    cases_total: int = 0
    cases_passed: int = 0  # cases whose score with the plugin is at least the threshold
    overall_score: float = 0.0
    overall_pass_rate: float = 0.0  # the mean share of perfect runs with the plugin
    mean_delta: float | None = None
    baseline_score: float | None = None
    improved: int = 0
    flat: int = 0
    regressed: int = 0
    headline: str = ""  # `Plugin effect: ↑ +33.3 pts vs baseline — improved 2 · flat 2 · ...`


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
    version: str | None = None  # its manifest's
    path: str
    eval_dir: str
    ablation: str  # with-without | none
    configurations: list[PluginConfigurationRecord] = []
    cases: list[PluginCaseRecord] = []
    deltas: list[ArmDeltaRecord] = []
    effects: list[PluginEffectRecord] = []  # one per configuration
    parts: list[PluginPartsRecord] = []
    warnings: list[str] = []
    others: list[str] = []  # --distractors installed: the other plugins loaded in both arms
