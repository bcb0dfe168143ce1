"""The Claude Code runner: one `claude -p` run in a temporary project and HOME, in its sandbox,
behind a local caching proxy for --cache, its stream parsed into activations and transcripts.

May import: the foundations (errors, stopping, sinks, files, records, redaction, patterns),
result_records, answers, loaders, hub, session, batches, engine."""

from __future__ import annotations

import asyncio
import fnmatch
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

import prompts
import test_constants as C

from . import HERE
from .errors import InputError
from .files import write_json_atomic
from .hub.processes import (
    RUN_MARKER,
    die_with_parent,
    end_descendants,
    kill_process_group,
    run_marker,
)
from .loaders.skills import (
    RESERVED_PROJECT_NAMES,
    SKILL_COPY_IGNORED,
    load_frontmatter_yaml,
    skill_folder_problem,
)
from .records import ToolCall, Usage, cost_usd
from .redaction import API_CREDENTIALS, Redactor
from .result_records import (
    SKILL_NOT_LOADED,
    ArtifactRecord,
    ClaudeRun,
    DelegationRecord,
    HookFiringRecord,
    dump_record,
)
from .sinks import cap_text, one_line, tail
from .stopping import STOPPING

if TYPE_CHECKING:
    from .cache import ResponseCache
    from .records import Distractor, SkillInfo


CLAUDE_INSTALL_HINT = (
    "install it with `npm install` in the evaluator's folder (package.json) or "
    "`npm install -g @anthropic-ai/claude-code`, or pass --claude-bin PATH"
)


# What a run may see of our environment: the API credentials and what the network needs.
CLAUDE_ENV_PASSTHROUGH = (
    "PATH",
    "LANG",
    "LC_ALL",
    "TERM",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "https_proxy",
    "http_proxy",
    "no_proxy",
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_FILE",
)


def find_claude_bin(explicit: str | None = None) -> str:
    """--claude-bin, else `claude` on PATH, else node_modules/.bin/claude next to evaluator.py
    (or in the current folder)."""
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file() or not os.access(path, os.X_OK):
            raise InputError(
                f"--claude-bin {explicit}: not an executable file", hint=CLAUDE_INSTALL_HINT
            )
        return str(path)
    for candidate in (
        shutil.which("claude"),
        HERE / "node_modules" / ".bin" / "claude",
        Path.cwd() / "node_modules" / ".bin" / "claude",
    ):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    raise InputError("the Claude Code CLI (claude) was not found", hint=CLAUDE_INSTALL_HINT)


def claude_env_base(home: Path, credentials: bool = True) -> dict[str, str]:
    env = {
        key: os.environ[key]
        for key in CLAUDE_ENV_PASSTHROUGH
        if key in os.environ and (credentials or key not in API_CREDENTIALS)
    }
    env.update(
        HOME=str(home),
        CLAUDE_CONFIG_DIR=str(home / ".claude"),
        DISABLE_TELEMETRY="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_ERROR_REPORTING="1",
    )
    return env


def claude_version(binary: str) -> str:
    """`claude --version`, so a broken install is one clear line before any money is spent."""

    try:
        done = subprocess.run(
            [binary, "--version"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
            env=claude_env_base(Path(tempfile.gettempdir()), credentials=False),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(
            f"{binary} --version failed: {exc.__class__.__name__}: {exc}", hint=CLAUDE_INSTALL_HINT
        ) from None
    if done.returncode != 0:
        raise InputError(
            f"{binary} --version exited with {done.returncode}: {tail(done.stderr, 300)}",
            hint=CLAUDE_INSTALL_HINT,
        )
    return done.stdout.strip()


@dataclass
class ClaudeCliSettings:
    """How to run `claude -p` for one kind of query."""

    binary: str
    model: str = C.DEFAULT_TRIGGER_MODEL
    max_turns: int = C.DEFAULT_TRIGGER_MAX_TURNS
    timeout: float = C.DEFAULT_TRIGGER_TIMEOUT
    base_url: str | None = None
    mcp_config: str | None = None
    # --allow-tools: task runs only; taken off the disallowed list, file tools kept to the project
    allow_tools: tuple[str, ...] = ()
    sandbox: bool = (
        False  # Bash confined by Claude Code's own sandbox (see CLAUDE_SANDBOX_SETTINGS)
    )
    # --allow-read: task runs only; what Bash (in the sandbox) and Read may read of the user's home
    allow_read: tuple[str, ...] = ()
    label: str = ""  # several --claude-bin: `model @ version`, what its runs are reported as
    version: str = ""  # several --claude-bin: this binary's Claude Code version
    # --skill PLUGIN: plugins loaded with --plugin-dir (read in place); their hooks are reported
    plugin_dirs: tuple[str, ...] = ()
    # --harness claude-code: the suite's live tools pre-approved (`mcp__server__tool`; a withheld
    # one is not, so don't-ask mode refuses its call), Claude Code's switches (ENABLE_TOOL_SEARCH)
    # and --prompt appended
    allowed_rules: tuple[str, ...] = ()
    environment: tuple[tuple[str, str], ...] = ()
    append_system_prompt: str = ""


# Claude Code's own sandbox (2.1.197; on Linux bubblewrap and socat) for task runs that may use
# Bash: its commands write only inside the project and the run's temporary folder ("Read-only file
# system" elsewhere, "Invalid cross-device link" for a hard link out), reach no host, never see
# the API credentials, and end with their call (a pid namespace); a command may not ask to run
# outside it (allowUnsandboxedCommands), and a missing bwrap or socat stops claude instead of
# running unconfined. Given with --settings, which wins over any project or user setting of these
# switches (see check_project_settings for the lists a project could add to). What its commands
# may not read (the user's home) is added per run: see sandbox_settings.
CLAUDE_SANDBOX_SETTINGS = {
    "sandbox": {
        "enabled": True,
        "failIfUnavailable": True,
        "autoAllowBashIfSandboxed": True,
        "allowUnsandboxedCommands": False,
        "filesystem": {"denyWrite": ["/tmp/claude", "/private/tmp/claude"]},  # writable if there
        "network": {"allowedDomains": []},
        "credentials": {"envVars": [{"name": name, "mode": "deny"} for name in API_CREDENTIALS]},
    }
}


def real_homes() -> list[Path]:
    """The user's real home folders: HOME as the evaluator sees it and the account's own (they
    differ under sudo, or a HOME set for one command); never `/`. A run has a temporary HOME of
    its own, so nothing in them is a run's."""
    import pwd

    homes = [Path.home()]
    try:
        homes.append(Path(pwd.getpwuid(os.getuid()).pw_dir))
    except (KeyError, OSError):
        pass
    found: list[Path] = []
    for home in homes:
        resolved = home.resolve()
        if resolved != Path("/") and resolved.is_dir() and resolved not in found:
            found.append(resolved)
    return found


def within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def sandbox_path(path: Path | str) -> str:
    """An absolute path as Claude Code's settings name one (`//` + the path: absolute whatever
    the settings file's folder)."""
    return "/" + str(path)


def read_rules(allow_read: Sequence[str], run_home: Path | None) -> tuple[list[Path], list[Path]]:
    """What Bash in the sandbox may not read (the real homes as a whole: keys, clouds' and
    tools' credentials, keychains, shell history), and what it may read again inside them: the
    run's own HOME (when the temporary folder is in the home) and the --allow-read paths. An
    --allow-read path that holds a home lifts that home's denial. The project and the run's
    TMPDIR are write paths, which Claude Code binds back itself."""
    allowed = [Path(p).resolve() for p in allow_read]
    denied = [h for h in real_homes() if not any(within(h, a) for a in allowed)]
    reopened = [*([run_home.resolve()] if run_home is not None else []), *allowed]
    return denied, [p for p in reopened if any(within(p, d) for d in denied)]


def sandbox_settings(allow_read: Sequence[str] = (), run_home: Path | None = None) -> dict:
    """CLAUDE_SANDBOX_SETTINGS with the reads a run may not make (read_rules): Claude Code lays an
    empty folder over a denied one in the sandbox ("No such file or directory" for `cat
    ~/.ssh/id_rsa`) and binds back what is allowed inside it, read-only."""
    denied, allowed = read_rules(allow_read, run_home)
    settings = json.loads(json.dumps(CLAUDE_SANDBOX_SETTINGS))
    filesystem = settings["sandbox"]["filesystem"]
    filesystem["denyRead"] = [sandbox_path(p) for p in denied]
    if allowed:
        filesystem["allowRead"] = [sandbox_path(p) for p in allowed]
    return settings


def allow_read_problem(allow_read: Sequence[str]) -> str | None:
    """Why an --allow-read path cannot be given (None: it can): one that holds the runs'
    temporary folder inside a hidden home would be bound back read-only over the run's project."""
    denied, allowed = read_rules(allow_read, None)
    runs = Path(tempfile.gettempdir()).resolve()
    for path in allowed:
        if within(runs, path):
            return (
                f"{path} holds the runs' temporary folder ({runs}), which the sandbox would then "
                "make read-only"
            )
    return None


def read_permission_rules(allow_read: Sequence[str]) -> list[str]:
    """What pre-approves Claude Code's Read tool for the --allow-read paths (a folder and what is
    in it); any other read outside the project is refused in don't-ask mode."""
    rules = []
    for path in allow_read:
        rules.append(f"Read({sandbox_path(path)})")
        if Path(path).is_dir():
            rules.append(f"Read({sandbox_path(path)}/**)")
    return rules


# How Claude Code says its sandbox did not start (in a Bash result, or a run's `errors`).
SANDBOX_FAILED = re.compile(
    r"^(?:Exit code \d+\n)?bwrap: |sandbox is required but|sandbox required but unavailable",
    re.IGNORECASE,
)


def claude_prompt_argument(query: str) -> str:
    """The argv sink: `-p` is a flag and the prompt a positional argument, so a query starting
    with `-` would be read as an option (`--allowedTools=Bash`); a leading space keeps it a prompt."""
    return " " + query if query.startswith("-") else query


def permission_rules(tools: Sequence[str]) -> list[str]:
    """What pre-approves the allowed tools: Bash as it is (the sandbox confines it), and the file
    tools for paths inside the project only: `Edit(./**)`, the rule Claude Code applies to every
    file-editing tool (a `Write(...)` rule is not read; seen with 2.1.197), so a Write or Edit
    outside the project is refused. Links are resolved before matching: a link in the project to
    a file outside is refused too. A file tool not allowed stays on the disallowed list."""
    rules = ["Bash"] if "Bash" in tools else []
    return rules + (["Edit(./**)"] if any(t != "Bash" for t in tools) else [])


def claude_command(
    settings: ClaudeCliSettings, query: str, run_home: Path | None = None
) -> list[str]:
    """The locked-down command line: no shell, no file edits, no web fetches, no prompts for
    permission, no MCP servers but the given config, no session saved. (`--restricted` or
    `--safe-mode` would drop the project's skills, so they are not used.) A task run's
    --allow-tools come off the disallowed list and are pre-approved (`--allowedTools`, file tools
    for the project only): in `dontAsk` mode a tool that is not pre-approved is refused. A run
    allowed Bash runs in Claude Code's sandbox (unless --unconfined), which hides the user's home
    but for the run's own HOME (`run_home`) and --allow-read."""
    command = [
        settings.binary,
        "-p",
        claude_prompt_argument(query),
        "--output-format",
        "stream-json",
        "--verbose",
        "--model",
        settings.model,
        "--max-turns",
        str(settings.max_turns),
        "--permission-mode",
        "dontAsk",
        *([] if settings.plugin_dirs else ["--strict-mcp-config"]),
        "--no-session-persistence",
        "--disallowedTools",
        *[t for t in C.CLAUDE_DISALLOWED_TOOLS if t not in settings.allow_tools],
    ]
    rules = (
        permission_rules(settings.allow_tools)
        + read_permission_rules(settings.allow_read)
        + list(settings.allowed_rules)
    )
    if rules:
        command += ["--allowedTools", *rules]
    if settings.sandbox:
        command += ["--settings", json.dumps(sandbox_settings(settings.allow_read, run_home))]
    if settings.mcp_config:
        command += ["--mcp-config", settings.mcp_config]
    # A plugin's own MCP servers load only without --strict-mcp-config (seen with 2.1.332); the
    # run's HOME and project are temporary, so no other server config is there to load.
    for folder in settings.plugin_dirs:
        command += ["--plugin-dir", folder]
    if settings.plugin_dirs:  # a plugin's hooks: what each did is read from these events
        command.append("--include-hook-events")
    if settings.append_system_prompt:
        command += ["--append-system-prompt", settings.append_system_prompt]
    return command


@functools.lru_cache(maxsize=4)
def sandbox_problem(path: str | None) -> str | None:
    """None when Claude Code's sandbox can start with this PATH, else why not, in a few words.
    Claude Code itself only checks that bwrap and socat are on PATH; where bwrap cannot make
    namespaces (a locked-down container) every Bash call would fail instead, so bwrap is tried
    once with the namespaces Claude Code asks for (about 5 ms)."""
    bwrap, socat = shutil.which("bwrap", path=path), shutil.which("socat", path=path)
    missing = [name for name, where in (("bwrap", bwrap), ("socat", socat)) if where is None]
    if bwrap is None or missing:
        return f"{' and '.join(missing)} not found on PATH"
    command = [
        bwrap,
        "--new-session",
        "--die-with-parent",
        "--unshare-pid",
        "--unshare-net",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--",
        shutil.which("true", path=path) or "/bin/true",
    ]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not run: {exc}"
    if done.returncode != 0:
        return f"bwrap cannot make a sandbox here: {one_line(done.stderr, 200)}"
    return None


def check_sandbox(path: str | None) -> None:
    """Before a suite whose task runs may use Bash: one line when the sandbox cannot start."""
    problem = sandbox_problem(path)
    if problem:
        raise InputError(
            f"--allow-tools Bash runs in Claude Code's sandbox, which cannot start here: {problem}",
            hint="install bubblewrap and socat (apt-get install bubblewrap socat), or pass "
            "--unconfined to let Bash run as you, outside any sandbox",
        )


def claude_env(
    settings: ClaudeCliSettings, root: Path, tmp: Path | None = None, marker: str = ""
) -> dict[str, str]:
    """A temporary HOME and config dir, so the user's own skills and settings neither shadow nor
    leak in, and a temporary TMPDIR; the API key and base URL pass through (the sandbox hides the
    key from Bash), and the run's marker (see end_descendants)."""
    env = claude_env_base(root / "home")
    env["TMPDIR"] = str(tmp or root / "tmp")
    if settings.base_url:
        env["ANTHROPIC_BASE_URL"] = settings.base_url
    env.update(settings.environment)
    if marker:
        env[RUN_MARKER] = marker
    return env


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


def normalize_skill_name(value: Any) -> str | None:
    """`sql-helper`, `/sql-helper args` and `plugin:sql-helper` all name the skill `sql-helper`."""
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip().lstrip("/").split()[0].split(":")[-1] or None


SKILL_MD_PATH = re.compile(r"(?:^|[\\/])([^\\/]+)[\\/]SKILL\.md$", re.IGNORECASE)


def skill_of_tool_use(block: dict) -> str | None:
    """The skill a tool_use block activates: a Skill call, or a Read of a skill's SKILL.md."""
    tool_input = block["input"] if isinstance(block.get("input"), dict) else {}
    if block.get("name") == "Skill":
        return normalize_skill_name(tool_input.get("skill") or tool_input.get("command"))
    if block.get("name") == "Read":
        match = SKILL_MD_PATH.search(
            str(tool_input.get("file_path") or tool_input.get("path") or "")
        )
        return match.group(1) if match else None
    return None


def parse_stream_json(text: str) -> tuple[list[dict], int]:
    """stream-json lines -> events, and how many lines were not JSON objects (a cut-off last line)."""
    events, bad = [], 0
    for line in text.split("\n"):  # not splitlines(): JSON leaves \x85 and U+2028 in strings raw
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):  # garbage, a number too long, nesting too deep
            bad += 1
            continue
        if isinstance(event, dict):
            events.append(event)
        else:
            bad += 1
    return events, bad


# How Claude Code says it refused a tool call: a tool it was not given ("No such tool available:
# Write. Write exists but is not enabled in this context", seen with 2.1.330), one it may not use
# ("Permission to use Write has been denied"), or what its sandbox answers a command that writes
# outside ("Read-only file system"), links a file from outside ("Invalid cross-device link") or
# that could not be sandboxed at all.
REFUSED_TOOL = re.compile(
    r"no such tool available|not enabled in this context|permission|denied|not allowed"
    r"|read-only file system|invalid cross-device link|^(?:exit code \d+\n)?bwrap: ",
    re.IGNORECASE | re.MULTILINE,
)


def tool_results_of(event: dict) -> list[dict]:
    message = event["message"] if isinstance(event.get("message"), dict) else {}
    content = message.get("content")
    return (
        [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
        if isinstance(content, list)
        else []
    )


def tool_result_content(block: dict) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return str(content or "")


def content_blocks(event: dict) -> list[dict]:
    """An assistant event's content blocks (dicts only)."""
    message = event["message"] if isinstance(event.get("message"), dict) else {}
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


# Hook events whose plain stdout Claude Code adds to the conversation as context.
CONTEXT_HOOK_EVENTS = ("UserPromptSubmit", "SessionStart")


DELEGATING_TOOLS = ("Agent", "Task")  # Task: the Agent tool's name before Claude Code 2.1


def delegation_of_tool_use(block: dict) -> DelegationRecord | None:
    """The delegation a tool_use block makes: an `Agent` call with its `subagent_type`."""
    tool_input = block["input"] if isinstance(block.get("input"), dict) else {}
    agent = tool_input.get("subagent_type")
    if block.get("name") not in DELEGATING_TOOLS or not isinstance(agent, str) or not agent.strip():
        return None
    return DelegationRecord(
        agent=agent.strip(),
        description=str(tool_input.get("description") or ""),
        prompt=cap_text(str(tool_input.get("prompt") or ""), C.CLAUDE_TOOL_RESULT_CHARS),
    )


def delegations_of(events: Iterable[dict]) -> list[DelegationRecord]:
    """Every task Claude handed to a subagent, in order: top-level `Agent` calls only (a
    subagent's own events carry a parent_tool_use_id)."""
    return [
        delegation
        for event in events
        if event.get("type") == "assistant" and not event.get("parent_tool_use_id")
        for block in content_blocks(event)
        if block.get("type") == "tool_use"
        for delegation in [delegation_of_tool_use(block)]
        if delegation is not None
    ]


def hook_json_output(stdout: str) -> dict:
    """A hook's stdout as the JSON object Claude Code reads ({} when it is plain text)."""
    text = stdout.strip()
    if not text.startswith("{"):
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def hook_firing_of(event: dict) -> HookFiringRecord | None:
    """What a `hook_response` event (--include-hook-events) says a hook did. Claude Code's hook
    contract: exit code 2 blocks (stderr the reason), as does JSON `decision: "block"` or
    `hookSpecificOutput.permissionDecision: "deny"` (its reason); a UserPromptSubmit or
    SessionStart hook's plain stdout, or any hook's `additionalContext`, is added as context."""
    if event.get("type") != "system" or event.get("subtype") != "hook_response":
        return None
    hook_event = str(event.get("hook_event") or "")
    stdout, stderr = str(event.get("stdout") or ""), str(event.get("stderr") or "")
    exit_code = event.get("exit_code") if isinstance(event.get("exit_code"), int) else None
    output = hook_json_output(stdout)
    specific = output.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    blocked = (
        exit_code == 2
        or output.get("decision") == "block"
        or specific.get("permissionDecision") == "deny"
    )
    reason = (
        stderr
        if exit_code == 2
        else str(output.get("reason") or specific.get("permissionDecisionReason") or "")
    )
    context = str(specific.get("additionalContext") or "")
    if not context and not output and exit_code == 0 and hook_event in CONTEXT_HOOK_EVENTS:
        context = stdout
    return HookFiringRecord(
        event=hook_event,
        name=str(event.get("hook_name") or hook_event),
        outcome=str(event.get("outcome") or ""),
        exit_code=exit_code,
        blocked=bool(blocked),
        reason=one_line(reason.strip(), 300) if blocked else "",
        context=cap_text(context.strip(), C.CLAUDE_TOOL_RESULT_CHARS),
    )


def hook_firings_of(events: Iterable[dict]) -> list[HookFiringRecord]:
    """Every hook that ran in a run and what it did, in order."""
    return [firing for event in events if (firing := hook_firing_of(event)) is not None]


def transcript_summary(events: list[dict], limit: int = C.TRANSCRIPT_SUMMARY_CHARS) -> str:
    """A task run's steps, one line each: Claude's text, each tool call with its arguments, and
    the start of each tool result (top-level events only). What the judge reads besides the answer."""
    lines: list[str] = []
    for event in events:
        if event.get("parent_tool_use_id"):
            continue
        if event.get("type") == "assistant":
            for block in content_blocks(event):
                if block.get("type") == "text" and str(block.get("text", "")).strip():
                    lines.append(f"assistant: {one_line(block['text'], C.JUDGE_RESULT_CHARS)}")
                elif block.get("type") == "tool_use":
                    arguments = json.dumps(block.get("input"), ensure_ascii=False, sort_keys=True)
                    lines.append(
                        f"tool call {block.get('name')}({one_line(arguments, C.JUDGE_RESULT_CHARS)})"
                    )
        elif event.get("type") == "user":
            for block in tool_results_of(event):
                lines.append(
                    f"  -> {'ERROR ' if block.get('is_error') else ''}"
                    f"{one_line(tool_result_content(block) or '(no output)', C.JUDGE_RESULT_CHARS)}"
                )
    return cap_text("\n".join(lines), limit)


def result_reason(result: dict) -> str:
    """Why a result event says the run failed: its `result` text, else its first `errors` entry
    (an `error_during_execution` has `result: null`: "Sandbox required but unavailable: ...")."""
    if isinstance(result.get("result"), str) and result["result"].strip():
        return result["result"]
    errors = result.get("errors")
    return str(errors[0]) if isinstance(errors, list) and errors else ""


def stream_error(events: list[dict], result: dict | None) -> str | None:
    """Why a run's stream says it failed (None: it finished). Hitting --max-turns is finishing:
    the skill had its chance to fire, the case its turns."""
    if not events:
        return "no stream-json output"
    if result is None:
        return "output ended without a result event (truncated)"
    if result.get("is_error") and result.get("subtype") != "error_max_turns":
        reason = tail(result_reason(result), 300)
        return f"claude reported an error ({result.get('subtype')}): {reason}".rstrip(": ")
    return None


def run_error(
    events: list[dict], result: dict | None, record: ClaudeRun, installed: Sequence[str]
) -> str | None:
    missing = [
        name
        for name in installed
        if record.skills_loaded is not None
        and name not in record.skills_loaded
        and name not in (record.agents_loaded or ())
    ]
    if missing:
        return (
            f"{SKILL_NOT_LOADED}: {', '.join(missing)} is missing from the init event's skills "
            "and agents (check its SKILL.md or agent file's frontmatter)"
        )
    broken = stream_error(events, result)
    if broken:
        return broken
    failed = next((c for c in record.tool_calls if SANDBOX_FAILED.search(c.output)), None)
    if failed is not None:  # every Bash call then fails: the run says nothing about the skill
        return f"Claude Code's sandbox did not start: {one_line(failed.output, 300)}"
    return None


def answered_calls(events: Iterable[dict]) -> tuple[Usage, float]:
    """What the calls a run's events show spent (each assistant message's usage, once per message
    id, subagents' too; its output tokens as the stream started: a floor), and their cost at each
    message's model: a run without a result event (cut by a signal or its timeout) still spent it."""
    messages: dict[str, tuple[Usage, str]] = {}
    for event in events:
        message = event.get("message") if event.get("type") == "assistant" else None
        if isinstance(message, dict) and isinstance(message.get("usage"), dict):
            key = str(message.get("id") or len(messages))
            messages[key] = (Usage.from_api(message["usage"]), str(message.get("model") or ""))
    total = Usage()
    for usage, _ in messages.values():
        total = total + usage
    return total, sum(cost_usd(usage, model) for usage, model in messages.values())


class ActivationReader:
    """Reads one run's stream-json events in order: the init event's skills, each top-level tool
    call (a forked skill's subagent reports with a parent_tool_use_id: its tools are not ours) and
    its result, the refusals, retries, and the result event."""

    def __init__(self, record: ClaudeRun) -> None:
        self.record = record
        self.result: dict | None = None
        self.last_text = ""
        self.names: dict[str, str] = {}  # tool_use id -> tool name
        self.calls: dict[str, ToolCall] = {}  # tool_use id -> its call

    def read(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "system":
            self.system(event)
        elif kind == "assistant" and not event.get("parent_tool_use_id"):
            for block in content_blocks(event):
                self.assistant_block(block)
                delegation = (
                    delegation_of_tool_use(block) if block.get("type") == "tool_use" else None
                )
                if delegation is not None:
                    self.record.delegations.append(delegation)
        elif kind == "user" and not event.get("parent_tool_use_id"):
            for block in tool_results_of(event):
                self.tool_result(block)
        elif kind == "result":
            self.result = event

    def system(self, event: dict) -> None:
        firing = hook_firing_of(event)
        if firing is not None:
            self.record.hooks.append(firing)
        if event.get("subtype") == "init" and isinstance(event.get("agents"), list):
            self.record.agents_loaded = sorted(str(a) for a in event["agents"])
        if event.get("subtype") == "api_retry":
            self.record.api_retries += 1
        elif event.get("subtype") == "init" and any(
            isinstance(event.get(key), list) for key in ("skills", "slash_commands")
        ):
            listed = [
                s
                for key in ("skills", "slash_commands")
                if isinstance(event.get(key), list)
                for s in event[key]
            ]
            self.record.skills_loaded = sorted(n for n in map(normalize_skill_name, listed) if n)

    def assistant_block(self, block: dict) -> None:
        record = self.record
        if block.get("type") == "tool_use":
            name, call_id = str(block.get("name")), str(block.get("id"))
            record.tools.append(name)
            self.names[call_id] = name
            call = ToolCall(
                name,
                block["input"] if isinstance(block.get("input"), dict) else {},
                turn=len(record.tool_calls) + 1,
                id=call_id,
            )
            record.tool_calls.append(call)
            self.calls[call_id] = call
            skill = skill_of_tool_use(block)
            if skill and skill not in record.activated_skills:
                record.activated_skills.append(skill)
        elif block.get("type") == "text" and isinstance(block.get("text"), str):
            self.last_text = block["text"].strip() or self.last_text

    def tool_result(self, block: dict) -> None:
        content = tool_result_content(block)
        call = self.calls.get(str(block.get("tool_use_id")))
        if call is not None:
            call.output = cap_text(content, C.CLAUDE_TOOL_RESULT_CHARS)
            call.is_error = bool(block.get("is_error"))
        if block.get("is_error") and REFUSED_TOOL.search(content):
            name = self.names.get(str(block.get("tool_use_id")), "tool")
            self.record.refused_tools.append(f"{name}: {one_line(content, 200)}")

    def finish(self, events: list[dict], installed: Sequence[str]) -> ClaudeRun:
        record, result = self.record, self.result
        for denial in (result or {}).get("permission_denials") or []:
            if isinstance(denial, dict) and not any(
                r.startswith(f"{denial.get('tool_name')}:") for r in record.refused_tools
            ):
                record.refused_tools.append(f"{denial.get('tool_name')}: permission denied")
        record.first_tool = record.tools[0] if record.tools else None
        record.tool_count = len(record.tools)
        record.answer = self.last_text
        if result is not None:
            record.result_subtype = result.get("subtype")
            record.is_error = result.get("is_error")
            record.num_turns = result.get("num_turns")
            record.duration_ms = result.get("duration_ms")
            record.total_cost_usd = result.get("total_cost_usd")
            record.usage = result["usage"] if isinstance(result.get("usage"), dict) else {}
            if isinstance(result.get("result"), str):
                record.answer = result["result"]
        if result is None:  # cut short: what the calls answered so far spent
            usage, cost = answered_calls(events)
            if usage.total:
                record.usage, record.total_cost_usd = asdict(usage), round(cost, 6)
        record.error = run_error(events, result, record, installed)
        return record


def detect_activation(
    events: list[dict], installed: Sequence[str], query: str = "", run: int = 1
) -> ClaudeRun:
    """What one run's events say: which skills fired (top-level Skill calls or Reads of a
    SKILL.md, in order, after any other tools too), the tools used, the result event, and why the
    run is an error when it is one (no result, an API error, the skill not loaded at all, a
    sandbox that did not start)."""
    reader = ActivationReader(ClaudeRun(query=query, run=run))
    for event in events:
        reader.read(event)
    return reader.finish(events, installed)


async def drain(stream: asyncio.StreamReader | None, sink: bytearray, limit: int) -> None:
    """Reads a pipe to its end, keeping at most `limit` bytes, so the child never blocks on it."""
    if stream is None:
        return
    while chunk := await stream.read(65536):
        if len(sink) < limit:
            sink.extend(chunk[: limit - len(sink)])


# ---------------------------------------------------------------------------- a run's temporary folder, and what it leaves
RUN_FOLDER_PREFIX = "skill-eval-"


RUN_OWNER_FILE = (
    "owner"  # in every run folder: the pid and start time of the evaluator that made it
)


def process_start_time(pid: int) -> str | None:
    """When a process started (clock ticks after boot, /proc/PID/stat): a pid reused by another
    process has another start time."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def owner_alive(line: str) -> bool:
    pid, _, started = line.strip().partition(" ")
    if not pid.isdigit():
        return True  # not ours to judge
    now = process_start_time(int(pid))
    return now is not None and (not started or now == started)


def make_run_folder(parent: str | Path | None = None) -> Path:
    """A new temporary folder (mode 0700) named skill-eval-*, holding its owner file."""
    root = Path(tempfile.mkdtemp(prefix=RUN_FOLDER_PREFIX, dir=parent))
    owner = f"{os.getpid()} {process_start_time(os.getpid()) or ''}\n"
    (root / RUN_OWNER_FILE).write_text(owner, encoding="ascii")
    return root


def remove_stale_run_folders() -> list[Path]:
    """The skill-eval-* folders of runs whose evaluator died (`kill -9` leaves them, with Claude
    Code's session files and the prompts): removed when the next evaluation starts. A folder
    whose owner is alive, or that names none, is left alone."""
    removed = []
    for base in dict.fromkeys([tempfile.gettempdir(), "/tmp"]):
        try:
            folders = [p for p in Path(base).glob(RUN_FOLDER_PREFIX + "*") if p.is_dir()]
        except OSError:
            continue
        for folder in folders:
            try:
                owner = (folder / RUN_OWNER_FILE).read_text(encoding="ascii", errors="replace")
            except OSError:
                continue
            if not owner_alive(owner):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
    return removed


@dataclass
class RunFolder:
    """One run's temporary folder: its project (where `claude` starts), its HOME, and its TMPDIR,
    which is kept short (Claude Code's sandbox makes its sockets there, and a socket path holds at
    most 107 bytes: a deep TMPDIR gets one of its own in /tmp). Removed after the run."""

    root: Path
    tmp: Path

    @classmethod
    def make(cls) -> RunFolder:
        root = make_run_folder()
        try:
            for name in ("project", "home", "tmp"):
                (root / name).mkdir()
            tmp = root / "tmp"
            if len(str(tmp)) > C.CLAUDE_TMPDIR_MAX_CHARS and Path("/tmp").is_dir():
                tmp = make_run_folder("/tmp")
        except OSError:
            shutil.rmtree(root, ignore_errors=True)
            raise
        return cls(root, tmp)

    @property
    def project(self) -> Path:
        return self.root / "project"

    def remove(self) -> None:
        for folder in (self.tmp, self.root):
            shutil.rmtree(folder, ignore_errors=True)


class ReadBudget:
    """What reading a run's files may cost in one phase (the input files it starts with, what it
    leaves): a sparse file is never read, nor a file over C.ARTIFACT_MAX_HASH_BYTES, nor past
    C.ARTIFACT_MAX_READ_BYTES in all or C.ARTIFACT_READ_SECONDS; nor once the evaluator is
    stopping (a stop signal, or `stop`). Such a file is listed by its size and why."""

    def __init__(self) -> None:
        self.left = C.ARTIFACT_MAX_READ_BYTES
        self.deadline = time.monotonic() + C.ARTIFACT_READ_SECONDS
        self.stop = threading.Event()

    def spent(self) -> str | None:
        """Why nothing more is read now (None: reading goes on)."""
        if self.stop.is_set() or STOPPING.is_set():
            return "the evaluator was stopping"
        if time.monotonic() > self.deadline:
            return f"the phase's time budget is spent: {C.ARTIFACT_READ_SECONDS:g} s"
        return None

    def refusal(self, status: os.stat_result) -> str | None:
        """Why a file is not read at all (None: it is)."""
        size, on_disk = status.st_size, status.st_blocks * 512
        if size >= C.ARTIFACT_SPARSE_MIN_BYTES and on_disk * 2 < size:
            return f"sparse: {size:,} bytes, {on_disk:,} of them on disk"
        if size > C.ARTIFACT_MAX_HASH_BYTES:
            return f"over the per-file limit: {size:,} bytes > {C.ARTIFACT_MAX_HASH_BYTES:,}"
        if size > self.left:
            return (
                f"over the run's read budget: {size:,} bytes > {max(self.left, 0):,} left of "
                f"{C.ARTIFACT_MAX_READ_BYTES:,}"
            )
        return self.spent()


@dataclass
class FileRead:
    """A file of a run's project as read within a budget: its stat, and its sha256 and bytes (to
    copy: up to C.ARTIFACT_MAX_COPY_BYTES), or why it was not read."""

    size: int
    mtime_ns: int
    sha256: str | None = None
    data: bytes | None = None
    not_read: str | None = None

    def same_as(self, before: FileRead) -> bool:
        """Unchanged: the same sha256, or (one of them not read) the same size and mtime."""
        if self.sha256 is not None and before.sha256 is not None:
            return self.sha256 == before.sha256
        return (self.size, self.mtime_ns) == (before.size, before.mtime_ns)


def read_within(path: Path, budget: ReadBudget, keep: bool = False) -> FileRead:
    """A regular file read within the budget, never through a link (the evaluator reads what a
    run left, and writes nothing there); its bytes kept with `keep` when small enough to copy."""
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise OSError(f"{path.name} is not a regular file")
        found = FileRead(status.st_size, status.st_mtime_ns)
        found.not_read = budget.refusal(status)
        if found.not_read:
            return found
        digest = hashlib.sha256()
        kept = bytearray() if keep and status.st_size <= C.ARTIFACT_MAX_COPY_BYTES else None
        while chunk := handle.read(1 << 20):
            budget.left -= len(chunk)
            found.not_read = budget.spent() or (
                "it grew past the run's read budget" if budget.left < 0 else None
            )
            if found.not_read:
                return found
            digest.update(chunk)
            if kept is not None:
                kept += chunk
        found.sha256 = digest.hexdigest()
        found.data = bytes(kept) if kept is not None else None
        return found


def file_sha256(path: Path) -> str:
    import stat

    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path.name} is not a regular file")
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def project_files(project: Path) -> Iterable[tuple[str, Path]]:
    """The regular files of a run's project, by relative path: links are not followed, and
    Claude Code's own `.claude/` folder (the installed skills, its settings) is not the run's work."""
    count = 0
    for folder, dirs, files in os.walk(project, followlinks=False):
        here = Path(folder)
        if here == project:
            dirs[:] = [d for d in dirs if d != ".claude"]
        dirs.sort()
        for name in sorted(files):
            path = here / name
            if path.is_symlink() or not path.is_file():
                continue
            count += 1
            if count > C.ARTIFACT_MAX_FILES:
                return
            yield path.relative_to(project).as_posix(), path


# Where Claude Code's sandbox mounts over a project's protected files: a run killed mid-command
# (a timeout) leaves each as an empty file, which is the sandbox's, not the run's work.
SANDBOX_MOUNT_POINTS = frozenset(
    {
        ".bash_profile",
        ".bashrc",
        ".gitconfig",
        ".gitmodules",
        ".idea",
        ".mcp.json",
        ".profile",
        ".ripgreprc",
        ".vscode",
        ".zprofile",
        ".zshrc",
    }
)


def copy_task_files(project: Path, files: Sequence[Path]) -> dict[str, FileRead]:
    """An eval's input files, each by its name into the project's top folder (a folder with its
    contents; links copied as links); returns every project file as read (its sha256, within a
    phase's budget: else its size and mtime), to tell what the run changed."""
    for source in files:
        if source.name in RESERVED_PROJECT_NAMES:
            raise OSError(f"an input file may not be named {source.name}")
        target = project / source.name
        if source.is_dir():
            shutil.copytree(source, target, symlinks=True)
        else:
            shutil.copy2(source, target, follow_symlinks=False)
    budget = ReadBudget()
    return {relative: read_within(path, budget) for relative, path in project_files(project)}


def check_project_settings(project: Path) -> None:
    """Right before claude starts: no settings file but ours in the project. Claude Code merges a
    project's `permissions.allow` and `sandbox` lists into those of --settings."""
    for name in ("settings.json", "settings.local.json"):
        if os.path.lexists(project / ".claude" / name):
            raise OSError(f"the project holds .claude/{name}, which would add to its settings")


def prepare_project(
    project: Path,
    skills: Sequence[SkillInfo],
    task: TaskSetup | None,
    home: Path | None = None,
    distractors: Sequence[Distractor] = (),
) -> dict[str, FileRead]:
    """The skills installed (and the crowd beside them, --distractors, which need the run's
    HOME), a task's input files copied; every file it starts with, as read (copy_task_files)."""
    install_skills(project, skills)
    if distractors:
        assert home is not None, "distractor skills are installed beside the run's HOME"
        install_distractors(project, home, distractors)
    before = copy_task_files(project, task.files) if task else {}
    check_project_settings(project)
    return before


def artifact_text(data: bytes) -> str | None:
    """A small UTF-8 text file's content (what the judge reads inline); None for anything else."""
    if len(data) > C.ARTIFACT_TEXT_BYTES or b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def artifact_record(
    relative: str,
    path: Path,
    before: dict[str, FileRead],
    redactor: Redactor,
    budget: ReadBudget,
) -> tuple[ArtifactRecord, bytes | None] | None:
    """A file the run created or changed, as recorded (its copy's size and sha256: secrets in it
    masked), with the bytes to keep (None: too large to copy, or not read within the budget: then
    it is listed by its size and why); None when the run did not make it (unchanged, or an empty
    mount point the sandbox left)."""
    if path.lstat().st_size == 0 and relative in SANDBOX_MOUNT_POINTS and relative not in before:
        return None
    found = read_within(path, budget, keep=True)
    if relative in before and found.same_as(before[relative]):
        return None
    status = "changed" if relative in before else "new"
    if found.not_read:
        return ArtifactRecord(
            path=relative, size=found.size, status=status, not_read=found.not_read
        ), None
    data = found.data
    kept = redactor.masked_bytes(data) if data is not None else None
    record = ArtifactRecord(
        path=relative,
        size=len(kept) if kept is not None else found.size,
        sha256=hashlib.sha256(kept).hexdigest() if kept is not None else found.sha256,
        status=status,
        text=artifact_text(data) if data is not None else None,  # the judge reads it as it was
        redacted=kept != data,
    )
    return record, kept


def collect_artifacts(
    project: Path,
    before: dict[str, FileRead],
    target: Path | None,
    redactor: Redactor | None = None,
    budget: ReadBudget | None = None,
) -> list[ArtifactRecord]:
    """Every file the run created or changed in its project; with a target folder, each copied
    there (up to the size limit) and listed in its manifest.json (path, size, sha256). A secret
    the run wrote into a file (`env > out.txt`) is masked in the copy, like in every other output;
    the manifest then describes the copy (`redacted`). The project itself is only read, never
    through a link: a hard link to a file of the user's is read like any file, and left alone.
    Files are read within a budget (ReadBudget): a sparse or huge file, or one past the phase's
    bytes or time, is listed by its size and why (`not_read`), neither hashed nor copied."""
    redactor = redactor or Redactor()
    budget = budget or ReadBudget()
    records = []
    if target is not None:
        shutil.rmtree(target, ignore_errors=True)  # this eval, configuration and run's own folder
        target.mkdir(parents=True, exist_ok=True)
    for relative, path in project_files(project):
        found = artifact_record(relative, path, before, redactor, budget)
        if found is None:
            continue
        record, kept = found
        if target is not None and kept is not None:
            copy = target / relative
            copy.parent.mkdir(parents=True, exist_ok=True)
            with open(copy, "xb") as handle:  # a new file in our own fresh folder
                handle.write(kept)
            record.copied = True
        records.append(record)
    if target is not None:
        write_json_atomic(target / "manifest.json", {"files": [dump_record(r) for r in records]})
    return records


# ---------------------------------------------------------------------------- --cache for Claude Code: a local caching proxy
# `claude` reaches the model through ANTHROPIC_BASE_URL: with --cache it is this proxy on
# 127.0.0.1, at a path naming the run's sample (`/sample/3`), so -i N still draws N answers. A
# POST /v1/messages is answered from the cache when the same request was seen (Claude Code's
# streaming answer is replayed as the SSE stream it was), else forwarded to the real API and kept.
# What differs between two runs of one query is left out of the key: the request's `metadata`
# (a session id) and the run's temporary folder (mkdtemp's 8 random characters in its paths; Claude
# Code writes its `_` as `-` where it names a project folder after the path). So is the date Claude
# Code writes into every request ("Today's date is 2026-11-26.", "The current month is November
# 2026"): with it, a cache filled one day missed every request the next (a nightly CI run's).
RUN_FOLDER_NAME = re.compile(RUN_FOLDER_PREFIX + r"[a-z0-9_-]{8}")
CLAUDE_CODE_DATES = (
    (re.compile(r"(Today's date is )\d{4}-\d{2}-\d{2}"), r"\1DATE"),
    (re.compile(r"(The current month is )[A-Z][a-z]+ \d{4}"), r"\1MONTH"),
)
PROXY_DROPPED_HEADERS = frozenset(
    {"host", "content-length", "connection", "accept-encoding", "transfer-encoding"}
)


def claude_request_key(path: str, body: bytes, beta: str) -> tuple[Any, str] | None:
    """What names a Claude Code request in the cache (None: not cacheable), and its sample."""
    match = re.fullmatch(r"/sample/(\d+)(/v1/messages)(?:\?.*)?", path)
    if not match:
        return None
    try:
        request = json.loads(body)
    except ValueError:
        return None
    if not isinstance(request, dict):
        return None
    request.pop("metadata", None)
    normalized = RUN_FOLDER_NAME.sub(RUN_FOLDER_PREFIX + "RUN", json.dumps(request, sort_keys=True))
    for date, placeholder in CLAUDE_CODE_DATES:
        normalized = date.sub(placeholder, normalized)
    return {"path": match.group(2), "beta": beta, "request": normalized}, match.group(1)


def stream_usage(body: bytes, content_type: str) -> tuple[Usage, str]:
    """The usage and model of a kept answer (JSON, or an SSE stream's message_start and
    message_delta events): what a hit saved."""
    if "json" in content_type:
        try:
            message = json.loads(body)
            return Usage.from_api(message.get("usage") or {}), str(message.get("model", ""))
        except (ValueError, AttributeError):
            return Usage(), ""
    usage, model = Usage(), ""
    for line in body.decode("utf-8", "replace").splitlines():
        if not line.startswith("data:"):
            continue
        try:
            event = json.loads(line[5:])
        except ValueError:
            continue
        if event.get("type") == "message_start":
            message = event.get("message") or {}
            usage, model = Usage.from_api(message.get("usage") or {}), str(message.get("model", ""))
        elif event.get("type") == "message_delta" and isinstance(event.get("usage"), dict):
            usage.output_tokens = int(event["usage"].get("output_tokens") or usage.output_tokens)
    return usage, model


class CachingProxy:
    """The local proxy `claude` talks to under --cache (see above); started and stopped by the
    skill runner's session."""

    def __init__(self, cache: ResponseCache, upstream: str) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        import httpx

        self.cache, self.upstream = cache, upstream.rstrip("/")
        self.client = httpx.Client(timeout=C.DEFAULT_REQUEST_TIMEOUT)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Without TCP_NODELAY each answer's body (written after its headers) waits for
            # claude's delayed ACK: 40 ms added to every cached or forwarded answer.
            disable_nagle_algorithm = True

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                proxy.handle(self)

            def do_GET(self) -> None:
                proxy.handle(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> CachingProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.client.close()

    def handle(self, handler: Any) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        named = claude_request_key(handler.path, body, handler.headers.get("anthropic-beta", ""))
        key = self.cache.key(named[0], named[1]) if named and handler.command == "POST" else None
        found = self.cache.get(key) if key else None
        if found is not None:
            data = found["body"].encode("utf-8")
            usage, model = stream_usage(data, found["content_type"])
            self.cache.counted(True, cost_usd(usage, model))
            self.reply(handler, 200, found["content_type"], data)
            return
        path = re.sub(r"^/sample/\d+", "", handler.path)
        headers = {
            k: v for k, v in handler.headers.items() if k.lower() not in PROXY_DROPPED_HEADERS
        }
        try:
            answer = self.client.request(
                handler.command, self.upstream + path, headers=headers, content=body
            )
        except Exception as exc:  # the API unreachable: claude sees a 502 and reports it
            self.reply(
                handler,
                502,
                "application/json",
                json.dumps(
                    {
                        "type": "error",
                        "error": {"type": "api_error", "message": f"--cache proxy: {exc}"},
                    }
                ).encode(),
            )
            return
        content_type = answer.headers.get("content-type", "application/json")
        if key and answer.status_code == 200:
            self.cache.counted(False)
            self.cache.put(
                key,
                {"content_type": content_type, "body": answer.content.decode("utf-8", "replace")},
            )
        self.reply(handler, answer.status_code, content_type, answer.content)

    @staticmethod
    def reply(handler: Any, status: int, content_type: str, data: bytes) -> None:
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", content_type)
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass


# ---------------------------------------------------------------------------- one `claude -p` run
@dataclass
class ClaudeProcess:
    """What one `claude -p` process gave back."""

    stdout: bytes = b""
    stderr: bytes = b""
    returncode: int | None = None
    timed_out: bool = False
    start_error: str | None = None


async def run_claude_process(
    settings: ClaudeCliSettings, query: str, folder: RunFolder, stdout: bytearray | None = None
) -> ClaudeProcess:
    """`claude -p QUERY` in the run's project, its output read as it comes (into `stdout` when
    given: what a run cut short had said); on timeout, and after it ends anyway, its process group
    is killed and every process it left (see end_descendants) is ended, so nothing outlives the run."""
    done, marker = ClaudeProcess(), run_marker()
    stdout, stderr = bytearray() if stdout is None else stdout, bytearray()
    process: asyncio.subprocess.Process | None = None
    try:
        process = await asyncio.create_subprocess_exec(
            *claude_command(settings, query, folder.root / "home"),
            cwd=folder.project,
            env=claude_env(settings, folder.root, folder.tmp, marker),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            preexec_fn=die_with_parent(),
        )
        readers = asyncio.gather(
            drain(process.stdout, stdout, C.CLAUDE_MAX_OUTPUT_BYTES),
            drain(process.stderr, stderr, C.CLAUDE_MAX_OUTPUT_BYTES),
            process.wait(),
        )
        try:
            await asyncio.wait_for(asyncio.shield(readers), settings.timeout)
        except TimeoutError:
            done.timed_out = True
            kill_process_group(process.pid)
            try:  # pipes close once the group is dead; a child that escaped the group must not hang us
                await asyncio.wait_for(readers, 5)
            except TimeoutError:
                readers.cancel()
    except OSError as exc:
        done.start_error = f"could not start claude: {exc}"
    finally:
        if process is not None:
            kill_process_group(process.pid)
            if process.returncode is None:
                try:
                    await asyncio.wait_for(process.wait(), 5)
                except (TimeoutError, asyncio.CancelledError):
                    pass
            end_descendants(process.pid, marker)
    done.stdout, done.stderr = bytes(stdout), bytes(stderr)
    done.returncode = process.returncode if process is not None else None
    return done


def finish_claude_run(record: ClaudeRun, done: ClaudeProcess, timeout: float) -> None:
    """The process's side of a run's record: exit code, stderr, and why it is an error when the
    process (not its events) says so."""
    record.exit_code = done.returncode
    record.stderr_tail = tail(done.stderr.decode("utf-8", "replace"), C.CLAUDE_STDERR_TAIL_CHARS)
    record.timed_out = done.timed_out
    stderr = f", stderr: {record.stderr_tail}" if record.stderr_tail else ""
    if done.timed_out:
        record.error = f"timed out after {timeout:g}s (process group killed)"
    elif record.error and record.exit_code not in (0, None) and record.result_subtype is None:
        record.error += f"; claude exited with {record.exit_code}{stderr}"
    elif (
        record.error is None
        and record.exit_code not in (0, None)
        and record.result_subtype != "error_max_turns"
    ):
        # A result event and then a failing exit: the run did not finish cleanly.
        record.error = f"claude exited with {record.exit_code} after its result event{stderr}"


def finish_task_run(
    record: ClaudeRun,
    events: list[dict],
    artifacts: list[ArtifactRecord],
    guard: OutsideWriteGuard | None,
) -> None:
    """A task run's own side: its steps for the judge, what it left, and what it changed outside
    its project while it ran (an unconfined run: that fails it)."""
    record.transcript_summary = transcript_summary(events)
    record.artifacts = artifacts
    if guard is None:
        return
    record.outside_writes = guard.changes()
    if record.outside_writes:
        shown = ", ".join(record.outside_writes[:3]) + (
            " ..." if len(record.outside_writes) > 3 else ""
        )
        record.error = f"wrote outside its temporary project: {shown}" + (
            f"; {record.error}" if record.error else ""
        )


async def keep_run_files(
    project: Path, before: dict[str, FileRead], target: Path | None
) -> list[ArtifactRecord]:
    """collect_artifacts in a thread, so the loop (the other runs, the stop signals) goes on while
    files are read. Cancelled (a stop signal), the reading is told to stop and awaited (it ends
    within a chunk), so the run's folder is removed after it, never under it."""
    budget = ReadBudget()
    work = asyncio.ensure_future(
        asyncio.to_thread(collect_artifacts, project, before, target, Redactor.for_run(), budget)
    )
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        budget.stop.set()
        await asyncio.wait([work])
        raise


async def run_in_folder(
    folder: RunFolder,
    query: str,
    skills: Sequence[SkillInfo],
    settings: ClaudeCliSettings,
    task: TaskSetup | None,
    distractors: Sequence[Distractor] = (),
    watch: RunWatch | None = None,
) -> tuple[ClaudeProcess, list[ArtifactRecord], str | None, OutsideWriteGuard | None]:
    """A run in its folder: the project prepared, `claude` run, what a task run left kept;
    (the process, the artifacts, why they could not be kept, the outside-write guard)."""
    try:
        before = prepare_project(folder.project, skills, task, folder.root / "home", distractors)
    except OSError as exc:
        return ClaudeProcess(start_error=f"could not start claude: {exc}"), [], None, None
    guard = task.guard() if task and task.guard else None
    done = await run_claude_process(settings, query, folder, watch.stdout if watch else None)
    if task is None or done.start_error:
        return done, [], None, guard
    try:
        artifacts = await keep_run_files(folder.project, before, task.artifacts)
    except OSError as exc:
        return done, [], f"could not keep the run's files: {exc}", guard
    return done, artifacts, None, guard


async def run_claude_query(
    query: str,
    skills: Sequence[SkillInfo],
    settings: ClaudeCliSettings,
    run: int = 1,
    task: TaskSetup | None = None,
    distractors: Sequence[Distractor] = (),
    watch: RunWatch | None = None,
) -> ClaudeRun:
    """One `claude -p QUERY` in a fresh temporary project holding the skills (and the crowd beside
    them: --distractors); never raises for a failed, hung or garbled run: that becomes `error` on
    the record. Nothing it started outlives it. A task run (`task`) gets its input files in the
    project first; what it leaves there is kept (masked copies), and an unconfined run that wrote
    outside the project fails. The record is as the run was: the sinks redact it. `watch` sees
    its output as it comes (RunWatch: the record of a run a stop signal cuts short)."""
    start = time.perf_counter()
    try:
        folder = RunFolder.make()
    except OSError as exc:
        return ClaudeRun(query=query, run=run, error=f"could not start claude: {exc}")
    try:
        done, artifacts, artifact_error, guard = await run_in_folder(
            folder, query, skills, settings, task, distractors, watch
        )
    finally:
        folder.remove()
    latency = round((time.perf_counter() - start) * 1000, 2)
    if done.start_error:
        return ClaudeRun(query=query, run=run, error=done.start_error, latency_ms=latency)
    events, _ = parse_stream_json(done.stdout.decode("utf-8", "replace"))
    record = detect_activation(events, [s.name for s in skills], query, run)
    finish_claude_run(record, done, settings.timeout)
    if task is not None:
        finish_task_run(record, events, artifacts, guard)
    if artifact_error and not record.error:
        record.error = artifact_error
    record.latency_ms = round((time.perf_counter() - start) * 1000, 2)
    return record


@dataclass
class RunWatch:
    """A `claude -p` run in flight, as its output comes: a run a stop signal cuts short is
    recorded from what it said so far (its activations, its calls, what the answered calls
    spent), as `interrupted`."""

    query: str
    run: int
    installed: list[str]
    stdout: bytearray = field(default_factory=bytearray)
    started: float = field(default_factory=time.perf_counter)

    def interrupted(self) -> ClaudeRun:
        events, _ = parse_stream_json(bytes(self.stdout).decode("utf-8", "replace"))
        record = detect_activation(events, self.installed, self.query, self.run)
        record.error = "interrupted"
        record.latency_ms = round((time.perf_counter() - self.started) * 1000, 2)
        return record


# Where a command run as the user (--unconfined Bash) writes unasked, besides what is always
# watched: folders of the real home that hold keys, credentials and programs on PATH.
UNCONFINED_WATCHED_TREES = (".ssh", ".aws", ".gnupg", ".docker", ".kube", ".local/bin")


class OutsideWriteGuard:
    """Checks that runs wrote nothing outside their temporary projects: the skills' own folders,
    the real HOME's Claude Code folders and settings (skills, agents, commands, settings,
    CLAUDE.md), and the top level of the working folder are fingerprinted before and compared
    after; when runs' Bash runs as the user (`unconfined`), also the top level of the real HOME
    (its dotfiles: .bashrc, .profile, .netrc, .gitconfig) and of ~/.config, the folders of
    UNCONFINED_WATCHED_TREES, and the top level of the temporary folder (the runs' own folders
    there excepted). The run's own outputs and the --ignore-path globs are not watched."""

    def __init__(
        self,
        skills: Sequence[SkillInfo],
        ignore: Sequence[str | Path] = (),
        ignore_globs: Sequence[str] = (),
        unconfined: bool = False,
    ) -> None:
        home = Path.home() / ".claude"
        # a plugin's agents: its whole folder, where its hooks' commands could write
        self.trees = list(dict.fromkeys(s.plugin or s.folder for s in skills)) + [
            home / "skills",
            home / "agents",
            home / "commands",
        ]
        self.files = [home / "settings.json", home / "settings.local.json", home / "CLAUDE.md"]
        self.top_level = [Path.cwd()]
        if unconfined:
            self.trees += [Path.home() / name for name in UNCONFINED_WATCHED_TREES]
            self.top_level += [Path.home(), Path.home() / ".config", Path(tempfile.gettempdir())]
        self.top_level = list(dict.fromkeys(self.top_level))
        self.ignore = {str(Path(p).resolve()) for p in ignore}
        self.ignore_globs = tuple(ignore_globs)
        self.before = self.fingerprint()

    @property
    def watched(self) -> list[str]:
        return [str(p) for p in self.trees + self.files + self.top_level]

    def ignored(self, path: Path) -> bool:
        """The run's own outputs, journal, and the temporary files they are written through, and
        what --ignore-path names (a glob matched against the name, the path relative to the
        working folder, and the full path)."""
        resolved = str(path.resolve())
        if (
            resolved in self.ignore
            or self.matches_glob(path)
            or any(o.startswith(resolved + os.sep) for o in self.ignore)
        ):
            return True  # an output, a folder an output is written into, or --ignore-path
        name = path.name
        return (
            name.startswith(".")
            and name.endswith(".tmp")
            and any(
                resolved.startswith(str(Path(p).parent / ("." + Path(p).name + ".")))
                for p in self.ignore
            )
        )

    def matches_glob(self, path: Path) -> bool:
        if not self.ignore_globs:
            return False
        names = {path.name, str(path), os.path.relpath(path, self.top_level[0])}
        return any(fnmatch.fnmatch(n, g) for n in names for g in self.ignore_globs)

    def fingerprint(self) -> dict[str, tuple[int, int]]:
        seen: dict[str, tuple[int, int]] = {}

        def note(path: Path) -> None:
            if self.ignored(path):
                return
            try:
                stat = path.lstat()
                seen[str(path)] = (stat.st_mtime_ns, stat.st_size)
            except OSError:
                pass

        for tree in self.trees:
            if tree.is_dir():
                for index, path in enumerate(tree.rglob("*")):
                    if index > C.WRITE_GUARD_MAX_ENTRIES:
                        break
                    note(path)
        for path in self.files:
            note(path)
        for folder in self.top_level:
            if folder.is_dir():
                for path in folder.iterdir():
                    if not path.name.startswith(RUN_FOLDER_PREFIX):  # a run's own folder
                        note(path)
        return seen

    def changes(self) -> list[str]:
        after = self.fingerprint()
        changed = [p for p in after if self.before.get(p) != after[p]]
        removed = [p for p in self.before if p not in after]
        return sorted(changed) + [f"{p} (removed)" for p in sorted(removed)]


@dataclass
class TaskSetup:
    """What a task run adds to a `claude -p` run: its input files, where what it leaves is copied
    (--artifacts DIR/<eval>/<config>/run-<n>/, with manifest.json), and, for a run that is not
    confined (--unconfined Bash), the outside-write check taken around it (a guard made just
    before it starts)."""

    files: list[Path] = field(default_factory=list)
    artifacts: Path | None = None
    guard: Callable[[], OutsideWriteGuard] | None = None
