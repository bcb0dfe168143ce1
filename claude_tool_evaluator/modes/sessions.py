"""import sessions PATH: Claude Code sessions (session logs, stream-json transcripts) listed, and
the chosen ones written as cases of Claude Code's own eval suite: `prompt.md` the user's first
message, a `tool_used` grader per skill, agent and MCP tool the session called (`min: 0, max: 0`
for those marked --should-not-use), an `llm` grader drafted from the final answer for the user to
edit, and its description saying where it came from (session id, file, date). Every byte goes
through the one redactor: the listing as it is printed, the cases as they are written.

May import: the rooms above the modes, the modes below it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import test_constants as C

from ..claude_code.sessions import RecordedSession, read_session_file, session_files
from ..errors import InputError, UsageProblem
from ..loaders.skills import PLUGIN_MANIFEST
from ..redaction import Redactor
from ..sinks import one_line, terminal_text
from .common import FolderWrites
from .plugin_cases import (
    CaseGrader,
    EvalCase,
    case_slug,
    plugin_eval_dir,
    regex_literal,
    skill_call_pattern,
    write_case,
)

__all__ = [
    "import_sessions",
]

_DRAFT_ANSWER_CHARS = 2_000  # how much of the final answer the drafted llm grader quotes
_ALL = "all"


def _nothing_usable(session: RecordedSession) -> InputError:
    """Why no session under PATH is usable, naming the first file (and its first garbled line)."""
    if session.form == "stream-json":
        return InputError(
            "this stream-json transcript does not hold the user's prompt",
            session.source,
            hint="claude -p writes it only with --input-format stream-json "
            "--replay-user-messages; the session log (~/.claude/projects) always has it",
        )
    if session.bad_lines:
        return InputError(
            f"no JSON record here, and no usable session is left ({len(session.bad_lines)} "
            "garbled line(s) skipped)",
            session.source,
            session.bad_lines[0],
            "give a session log (~/.claude/projects/<project>/<session>.jsonl) or a stream-json "
            "transcript",
        )
    return InputError(
        "holds no Claude Code session with a user's prompt",
        session.source,
        hint="give a session log (~/.claude/projects/<project>/<session>.jsonl) or a stream-json "
        "transcript",
    )


def _read_sessions(source: Path) -> tuple[list[RecordedSession], list[str]]:
    """Every session under PATH with a prompt, oldest first (the listing's numbers), and a line
    per file whose garbled lines were skipped or that holds no prompt; nothing usable left: one
    line naming file:line."""
    sessions, said, unusable = [], [], []
    for path in session_files(source):
        session = read_session_file(path)
        if session.bad_lines:
            said.append(
                f"{terminal_text(path)}: skipped {len(session.bad_lines)} garbled line(s) "
                f"(first: line {session.bad_lines[0]})"
            )
        if session.prompt:
            sessions.append(session)
        else:
            unusable.append(session)
            said.append(f"{terminal_text(path)}: skipped, no user's prompt in it")
    if not sessions:
        raise _nothing_usable(unusable[0])
    return sorted(sessions, key=lambda s: (s.started, str(s.source))), said


def _listing(sessions: Sequence[RecordedSession], redactor: Redactor) -> list[str]:
    lines = []
    for number, session in enumerate(sessions, 1):
        used = ", ".join(session.used) or "no skill, agent or MCP tool"
        lines.append(
            f"{number:>3}  {session.id[:8]}  {session.started[:16].replace('T', ' ')}  "
            f"{one_line(session.prompt, 60)!r}  ({used})"
        )
    return [terminal_text(redactor.text(line)) for line in lines]


def _chosen(sessions: Sequence[RecordedSession], picks: Sequence[str]) -> list[RecordedSession]:
    """--session N (as listed), ID (or its start) or all: each pick one session (or every one)."""
    if _ALL in picks:
        return list(sessions)
    chosen: dict[str, RecordedSession] = {}
    for pick in picks:
        if pick.isdigit():
            if not 1 <= int(pick) <= len(sessions):
                raise UsageProblem(
                    f"--session {pick}: the sessions are numbered 1 to {len(sessions)}"
                )
            found = [sessions[int(pick) - 1]]
        else:
            found = [s for s in sessions if s.id.startswith(pick)]
        if len(found) != 1:
            raise UsageProblem(
                f"--session {pick!r} names {'no' if not found else len(found)} sessions: give a "
                "number as listed, a session id (or enough of its start), or all"
            )
        chosen[str(found[0].source)] = found[0]
    return list(chosen.values())


def _target_folder(output: Path) -> Path:
    """Where the cases go: the eval dir of the plugin -o names, else -o's own evals/."""
    if output.exists() and not output.is_dir():
        raise InputError("import -o takes a folder, and this is a file", output)
    if not output.parent.is_dir():
        raise InputError(f"import -o {output}: the folder {output.parent} does not exist")
    if (output / PLUGIN_MANIFEST).is_file():
        return plugin_eval_dir(output)
    return output / "evals"


def _used_grader(kind: str, name: str, avoided: bool) -> CaseGrader:
    """A `tool_used` grader on a skill (the Skill tool, by its input), an agent (the Agent tool,
    by its subagent_type) or an MCP tool; an avoided one is never called (`min: 0, max: 0`)."""
    fields: dict[str, Any] = {"type": "tool_used"}
    if kind == "skill":
        fields.update(tool="Skill", input_match=skill_call_pattern(name))
    elif kind == "agent":
        fields.update(tool="Agent", input_match=f'"subagent_type":\\s*"{regex_literal(name)}"')
    else:
        fields["tool"] = name
    if avoided:
        fields.update(min=0, max=0)
    said = f"{'never calls' if avoided else 'calls'} the {kind} {name}"
    named = case_slug(name) if kind == "mcp tool" else f"{kind}-{case_slug(name)}"
    slug = f"{'avoids' if avoided else 'uses'}-{named}"
    return CaseGrader(slug, fields, said)


def _answer_grader(answer: str) -> CaseGrader:
    quoted = "\n".join(f"> {line}" for line in answer[:_DRAFT_ANSWER_CHARS].splitlines())
    return CaseGrader(
        "answer",
        {"type": "llm"},
        "DRAFT, drafted from the recorded session's final answer: edit it into what a good "
        "answer must do. The answer does what this one from the session did:\n\n" + quoted,
    )


def _case_of(session: RecordedSession, avoided: set[str], redactor: Redactor) -> EvalCase:
    """A session as a case; its name from its prompt's first words and its id."""
    prompt = redactor.text(session.prompt)
    kinds = [("skill", session.skills), ("agent", session.agents), ("mcp tool", session.mcp_tools)]
    graders = [_used_grader(k, n, n in avoided) for k, names in kinds for n in names]
    if session.answer:
        graders.append(_answer_grader(redactor.text(session.answer)))
    if not graders:
        raise InputError(
            "this session called no skill, agent or MCP tool and has no final answer: a case "
            "of it would have no grader",
            session.source,
            hint="choose another session",
        )
    front: dict[str, Any] = {
        "description": f"From Claude Code session {session.id} ({session.source}, "
        f"{session.started or 'undated'}); the graders are drafts: edit them",
        "max_turns": C.DEFAULT_MAX_TURNS,
    }
    if session.mcp_tools:  # an MCP tool is offered only when granted; so are the others it used
        granted = ["Skill"] * bool(session.skills) + ["Agent"] * bool(session.agents)
        front["allowed_tools"] = granted + list(session.mcp_tools)
    name = f"{case_slug(' '.join(prompt.split()[:6]))}-{case_slug(session.id)[:8]}"
    return EvalCase(name, prompt, front, graders)


def import_sessions(
    source: Path,
    picks: Sequence[str],
    should_not_use: Sequence[str],
    output: str | None,
    force: bool,
    dry_run: bool,
) -> list[str]:
    """The sessions under PATH listed (no --session), or the chosen ones planned as cases into
    -o's eval dir (an existing case folder refused unless --force replaces it) and written, or
    listed (--dry-run): the lines to print."""
    redactor = Redactor.for_run()
    sessions, said = _read_sessions(source)
    if not picks:
        return [
            *said,
            f"{len(sessions)} session(s) in {terminal_text(source)}; choose with --session N, "
            "--session ID or --session all, and -o DIR:",
            *_listing(sessions, redactor),
        ]
    if not output:
        raise UsageProblem("import sessions needs -o DIR: the plugin folder its cases go into")
    chosen = _chosen(sessions, picks)
    used = {name for s in chosen for name in s.used}
    unknown = [name for name in should_not_use if name not in used]
    if unknown:
        raise UsageProblem(
            f"--should-not-use {unknown[0]}: no chosen session called it (they called: "
            f"{', '.join(sorted(used)) or 'nothing'})"
        )
    folder = _target_folder(Path(output))
    files = FolderWrites(Path(output))
    cases = [_case_of(s, set(should_not_use), redactor) for s in chosen]
    for case in cases:
        if (folder / case.name).exists():
            if not force:
                raise InputError(
                    "exists already",
                    folder / case.name,
                    hint="pass --force to replace it, or import into another folder",
                )
            files.replace_folder(folder / case.name)
        write_case(folder, case, files)
    lines = files.write(dry_run)
    if dry_run:
        return [*said, *lines]
    return [
        *said,
        f"wrote {len(cases)} case(s) to {terminal_text(folder)}: "
        + ", ".join(terminal_text(c.name) for c in cases),
        "edit their graders, then run them: plugin PLUGIN --case NAME "
        "(or claude plugin eval PLUGIN --case NAME)",
    ]
