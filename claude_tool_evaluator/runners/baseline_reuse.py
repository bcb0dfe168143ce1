"""Reusing the arm without the plugin: its runs depend on the case, its graders, the model,
Claude Code's version, the judge, the grants, the mocks and the scaffold, never on the plugin;
a pull request that changes only the plugin need not pay for them again. Each run of that arm is
kept under a key of everything that reaches it (baseline_key), and a later run whose key is the
same takes it from an earlier results file (--baseline-from) or from the --cache folder instead
of running it (--fresh-baseline: run it anyway). A reused run says where it was made.

May import: the rooms above the runners."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from ..cache import ResponseCache, is_recording
from ..errors import InputError
from ..files import folder_digest
from ..results_schema.document import (
    PluginRunResult,
    ReusedRunRecord,
    dump_record,
    read_results_document,
)

if TYPE_CHECKING:
    from ..claude_code import ClaudeCliSettings
    from ..loaders.plugin_evals import PluginCase
    from ..pipeline import Job

__all__ = [
    "BaselineReuse",
]


class _Plan(Protocol):
    """What the key reads of a plugin run's configuration (runners.plugin.PluginRunPlan, a room
    above this one)."""

    model: str
    label: str
    version: str | None
    ablation: bool
    scaffold: bool
    confine: bool
    allow_read: tuple[str, ...]
    mocks: str
    allow_real_servers: bool
    others: tuple[Path, ...]

    def settings(self, case: PluginCase) -> ClaudeCliSettings: ...
    def digest(self, folder: Path) -> str: ...
    def fingerprint(self, case: PluginCase, arm: str) -> str: ...


_BASELINE_ARM = "without"
_KEY_FORMAT = 1  # bumped when what the key covers changes: older kept runs are then not reused
_JUDGED = ("llm", "baseline")


def _plain(value: Any) -> Any:
    """A grader's field as plain data (a tool_order step is a dataclass)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _file_digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except OSError:
        return "missing"


def _baseline_key(plan: _Plan, case: PluginCase, judge_model: str) -> str:
    """Everything a run of the case without the plugin depends on: the case (its prompt and every
    file of its folder: prompt.md, case.yaml, graders, files, its own mocks), its graders as read,
    the suite's mocks it serves (contents), the scaffold script (contents, when --scaffold runs
    it), the model and Claude Code's version, the judge (when a grader asks one), the grants as
    the run gets them (--allow-tools, --disallow-tools, the case's allowed_tools), its turns and
    timeout, the --mocks mode, the other plugins loaded in both arms, the confinement and what it
    opens, and the ablation (which grades graders as with-only). Not the plugin."""
    settings = plan.settings(case)
    judged = any(g.kind in _JUDGED for g in case.graders)
    scaffold = (
        _file_digest(case.folder / case.scaffold_script)
        if plan.scaffold and case.scaffold_script
        else None
    )
    parts = {
        "format": _KEY_FORMAT,
        "case": case.name,
        "prompt": case.prompt,
        "files": folder_digest(case.folder),
        "graders": [[g.name, g.kind, g.weight, g.arm, _plain(g.config)] for g in case.graders],
        "mocks": {name: folder_digest(m.folder) for name, m in sorted(case.mocks.items())},
        "mocks_mode": [plan.mocks, plan.allow_real_servers],
        "scaffold": scaffold,
        "model": case.model or plan.model,
        "claude_version": plan.version or "",
        "judge": judge_model if judged else None,
        "grants": [
            settings.allow_tools,
            settings.allowed_rules,
            settings.ungated,
            settings.disallowed_rules,
            settings.sandbox,
        ],
        "turns": [settings.max_turns, settings.timeout],
        "others": [plan.digest(p) for p in plan.others],
        "confinement": [plan.confine, plan.allow_read],
        "ablation": plan.ablation,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def _baseline_runs_of(path: str) -> list[PluginRunResult]:
    """--baseline-from FILE: the runs without the plugin of an earlier `plugin` results file
    (checked against the results schema; untrusted, so anything else is one line naming it):
    those that ended without an error and carry their key."""
    document = read_results_document(path)
    if document.metadata.evaluation != "plugin":
        raise InputError(
            f"--baseline-from: a results file of `{document.metadata.evaluation}`, not of `plugin`",
            path,
            1,
            "give the -o file of an earlier `plugin` run",
        )
    place = str(Path(path).absolute())
    found = []
    for run in document.results:
        if (
            isinstance(run, PluginRunResult)
            and run.arm == _BASELINE_ARM
            and run.baseline_key
            and not run.error
        ):
            made = run.reused_from or ReusedRunRecord(
                source="file",
                place=place,
                run_id=document.metadata.suite_hash or "",
                date=document.metadata.generated_at,
            )
            found.append(run.model_copy(update={"reused_from": made}))
    return found


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


class BaselineReuse:
    """Where this invocation's runs without the plugin come from when their key is unchanged: an
    earlier results file's runs (`earlier`), then the --cache folder; and where its fresh ones
    are kept (the cache folder). `fresh`: --fresh-baseline, nothing reused (fresh runs still
    kept)."""

    def __init__(
        self,
        judge_model: str,
        baseline_from: str | None = None,
        cache: str | None = None,
        fresh: bool = False,
    ) -> None:
        self.judge_model, self.fresh = judge_model, fresh
        earlier = _baseline_runs_of(baseline_from) if baseline_from else []
        self.earlier = {(r.baseline_key, r.run): r for r in earlier}
        self.store = ResponseCache.open(cache) if cache and not is_recording(cache) else None
        self.sources = [f"--baseline-from {baseline_from}"] if baseline_from else []
        self.sources += [f"--cache {cache}"] if self.store is not None else []
        self.keys: dict[tuple[int, str], str] = {}
        self.found: dict[tuple, PluginRunResult | None] = {}
        self.invocation = uuid.uuid4().hex[:12]  # the run id the kept runs name

    def key(self, plan: _Plan, case: PluginCase) -> str:
        found = (id(plan), case.name)
        if found not in self.keys:
            self.keys[found] = _baseline_key(plan, case, self.judge_model)
        return self.keys[found]

    @staticmethod
    def _cache_key(key: str, run: int) -> str:
        return ResponseCache.key({"baseline_run": key}, str(run))

    def _from_cache(self, key: str, run: int) -> PluginRunResult | None:
        """A kept run from the cache folder (read as untrusted: a sealed entry, its run checked
        against the results schema; anything else is a miss with one warning)."""
        if self.store is None:
            return None
        name = self._cache_key(key, run)
        entry = self.store.get(name)
        if entry is None:
            return None
        try:
            record = PluginRunResult.model_validate(entry.get("run"))
            made = ReusedRunRecord.model_validate(entry.get("made"))
        except ValidationError:
            self.store.refuse(self.store.path(name), "not a kept run of the arm without the plugin")
            return None
        if record.baseline_key != key or record.run != run:
            return None
        return record.model_copy(update={"reused_from": record.reused_from or made})

    def reused(self, job: Job) -> PluginRunResult | None:
        """The run this job would make, made earlier under the same key; None: run it."""
        case, arm, _, plan = job.payload
        if arm != _BASELINE_ARM or self.fresh:
            return None
        if job.key not in self.found:
            key = self.key(plan, case)
            earlier = self.earlier.get((key, job.iteration)) or self._from_cache(key, job.iteration)
            self.found[job.key] = (
                None
                if earlier is None
                else earlier.model_copy(
                    update={  # named as this run names it (its journal key); costs nothing now
                        "label": plan.label,
                        "model": plan.model,
                        "claude_version": plan.version,
                        "fingerprint": plan.fingerprint(case, arm),
                        "cost_usd": 0.0,
                        "judge_cost_usd": 0.0,
                        "events": None,
                    }
                )
            )
        return self.found[job.key]

    def made(self, plan: _Plan, case: PluginCase, record: PluginRunResult) -> None:
        """A fresh run: the arm without the plugin gets its key, and (with --cache) is kept."""
        if record.arm != _BASELINE_ARM:
            return
        record.baseline_key = self.key(plan, case)
        if self.store is None or record.error:
            return
        kept = dump_record(record.model_copy(update={"events": None, "verdict": None}))
        made = ReusedRunRecord(
            source="cache", place=str(self.store.folder), run_id=self.invocation, date=_now()
        )
        self.store.put(
            self._cache_key(record.baseline_key, record.run),
            {"run": kept, "made": dump_record(made)},
        )
