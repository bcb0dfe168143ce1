"""A case of Claude Code's own eval suite as files: `evals/<case>/prompt.md` (frontmatter and the
prompt) and `graders/NAME.md` (frontmatter `type` and the kind's fields; the body an llm grader's
criteria), planned into a FolderWrites; what export and import sessions both write.

Graders are written as Claude Code scores them: `tool_used` counts the calls of `tool` whose
input (as JSON text) matches the JavaScript regex `input_match`, between `min` (default 1) and
`max`; so a "must not" grader always says `min: 0` (with `max: 0` alone it could never pass).

May import: the rooms above the modes, modes.common."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..loaders.plugin_evals import eval_dir_of, plugin_name_of
from ..loaders.servers import read_plugin_manifest
from .common import FolderWrites

__all__ = [
    "CaseGrader",
    "EvalCase",
    "case_slug",
    "plugin_eval_dir",
    "regex_literal",
    "skill_call_pattern",
    "write_case",
]


def _frontmatter_text(fields: dict[str, Any]) -> str:
    return (
        "---\n"
        + yaml.safe_dump(fields, sort_keys=False, allow_unicode=True, width=1_000_000)
        + "---\n"
    )


@dataclass
class CaseGrader:
    """One `graders/NAME.md`: its frontmatter (`type` and the kind's fields) and its body (an llm
    grader's criteria; a description otherwise)."""

    name: str
    fields: dict[str, Any]
    body: str = ""

    def text(self) -> str:
        return _frontmatter_text(self.fields) + (f"\n{self.body.strip()}\n" if self.body else "")


@dataclass
class EvalCase:
    """One `evals/<name>/`: its prompt.md (frontmatter and the prompt) and graders."""

    name: str
    prompt: str
    front: dict[str, Any]
    graders: list[CaseGrader] = field(default_factory=list)


def case_slug(text: str) -> str:
    """A case folder's name from a test's name: lowercase letters, digits and hyphens."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:48].strip("-") or "case"


# What a JavaScript regex (no flags) reads as syntax: escaped in a name matched literally.
_JS_REGEX_SPECIAL = re.compile(r"([.^$*+?()\[\]{}|\\/])")


def regex_literal(text: str) -> str:
    """`text` as a JavaScript regex (no flags) that matches it literally."""
    return _JS_REGEX_SPECIAL.sub(lambda m: "\\" + m.group(1), text)


def skill_call_pattern(name: str) -> str:
    """`input_match` for a Skill call of `name` (its input as JSON text): a bare name also
    matches a plugin's `PLUGIN:NAME`, as Claude Code calls a plugin's skill."""
    prefix = "" if ":" in name else '(?:[^":]+:)?'
    return f'"skill":\\s*"{prefix}{regex_literal(name)}"'


def plugin_eval_dir(plugin: Path) -> Path:
    """A plugin's eval dir, as Claude Code finds it (its manifest's `experimental.evals`, else
    `evals`), refused as every verb refuses it when it leads out of the plugin; so is a manifest
    whose name is a path."""
    manifest, _ = read_plugin_manifest(plugin)
    plugin_name_of(plugin, manifest)
    return eval_dir_of(plugin, manifest)


def write_case(folder: Path, case: EvalCase, files: FolderWrites) -> None:
    files.text(
        folder / case.name / "prompt.md",
        _frontmatter_text(case.front) + "\n" + case.prompt.strip() + "\n",
    )
    for grader in case.graders:
        files.text(folder / case.name / "graders" / f"{grader.name}.md", grader.text())
