"""Installing what a run is given into its temporary project and HOME: the skills (their whole
folders, a --skill-description edit on the copy only), a plugin's agents, the crowd beside them
(--distractors: folders, decoys, the user's own skills).

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers, loaders, hub, session, batches, engine; claude_code.stream,
claude_code.binary."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

import prompts

from ..loaders.skills import SKILL_COPY_IGNORED, load_frontmatter_yaml, skill_folder_problem

__all__ = [
    "install_distractors",
    "install_skills",
    "skill_md_with_description",
]

if TYPE_CHECKING:
    from ..run_types import Distractor, SkillInfo


def skill_md_with_description(raw: str, description: str) -> str:
    """A SKILL.md's text with its frontmatter's `description` replaced (the rest of the
    frontmatter kept, through yaml safe_load / safe_dump) and the body as it was."""
    lines = raw.splitlines(keepends=True)
    end = next(i for i in range(1, len(lines)) if lines[i].strip() in ("---", "..."))
    data = load_frontmatter_yaml("".join(lines[1:end]), Path("SKILL.md"), 2) or {}
    data["description"] = description
    front = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1_000_000)
    return "---\n" + front + "---\n" + "".join(lines[end + 1 :])


def install_skills(project: Path, skills: Sequence[SkillInfo]) -> None:
    """Each skill's whole folder (scripts, references) as `.claude/skills/<name>/`: links are
    copied as links, never followed, and the folder is checked again (it may have changed since
    it was loaded)."""
    for skill in skills:
        if skill.kind == "agent":  # a plugin's agents come with their plugin (--plugin-dir)
            if skill.plugin is None:
                agents = project / ".claude" / "agents"
                agents.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(skill.path, agents / f"{skill.name}.md")
            continue
        problem = skill_folder_problem(skill.folder)
        if problem:
            raise OSError(f"skill {skill.name}: {problem}")
        shutil.copytree(
            skill.folder,
            project / ".claude" / "skills" / skill.name,
            symlinks=True,
            ignore=shutil.ignore_patterns(*SKILL_COPY_IGNORED),
        )
        if (
            skill.description_override
        ):  # the copy says what --skill-description gave; the user's file is untouched
            copy = project / ".claude" / "skills" / skill.name / "SKILL.md"
            copy.unlink()  # a hard link or a link inside the folder must not carry the edit back
            copy.write_text(
                skill_md_with_description(
                    skill.path.read_text(encoding="utf-8"), skill.description
                ),
                encoding="utf-8",
            )


def install_distractors(project: Path, home: Path, distractors: Sequence[Distractor]) -> None:
    """The crowd beside the skills: a folder's skills and decoys as project skills
    (.claude/skills/NAME/), the user's own (`installed`) as user skills of the run's temporary HOME
    (~/.claude/skills/NAME/). Folders are copied (links as links, never followed) and read, never
    written; a decoy's SKILL.md is written from its name and description."""
    for distractor in distractors:
        target = (home if distractor.in_home else project) / ".claude" / "skills" / distractor.name
        if distractor.folder is None:
            target.mkdir(parents=True)
            front = yaml.safe_dump(
                {"name": distractor.name, "description": distractor.description},
                sort_keys=False,
                allow_unicode=True,
                width=1_000_000,
            )
            body = prompts.DECOY_SKILL_BODY.format(name=distractor.name)
            (target / "SKILL.md").write_text(f"---\n{front}---\n\n{body}\n", encoding="utf-8")
            continue
        problem = skill_folder_problem(distractor.folder)
        if problem:
            raise OSError(f"distractor {distractor.name}: {problem}")
        shutil.copytree(
            distractor.folder,
            target,
            symlinks=True,
            ignore=shutil.ignore_patterns(*SKILL_COPY_IGNORED),
        )
