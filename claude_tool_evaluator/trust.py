"""The trust gate: may a plugin's own code (its hooks, its MCP servers, a case's scaffold_script)
run on this machine? As `claude plugin eval` 2.1.332 decides it: a folder the user has trusted
runs; a terminal asks once per folder and remembers the answer; a run that cannot ask (no
terminal, or CI) needs --trust-plugin. The answer is kept in the user's config folder
(trusted-plugins.json, mode 0600), keyed by the folder's real path and the digest of what it
holds, so a changed plugin is asked about again. A plugin with no hooks, no servers and no
scaffold runs none of its own code and needs no trust.

May import: loaders, answers, results_schema, patterns, redaction, run_types, files, sinks,
stopping, errors."""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import InputError
from .files import folder_digest
from .loaders.servers import plugin_server_commands, read_plugin_manifest
from .sinks import one_line

__all__ = [
    "plugin_code",
    "require_trust",
    "trusted",
]

_TRUST_FLAG = "--trust-plugin"
_STORE_NAME = "trusted-plugins.json"
_SHOWN_CHARS = 160  # a command as the question lists it: its start, on one line


@dataclass(frozen=True)
class _PluginCode:
    """What of a plugin folder runs as code if it is loaded: one line each (`hook
    UserPromptSubmit: echo ...`, `MCP server stock: python3 server.py`, `scaffold 06-staged: bash
    setup.sh`), the folder's real path, and the digest that names this content of it."""

    folder: Path
    runs: tuple[str, ...]
    digest: str


def _json_file(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def _hook_lines(hooks: Any, where: str) -> list[str]:
    """A hooks config's commands (`{"hooks": {EVENT: [{"hooks": [{"command": ...}]}]}}`, or the
    events bare), one line each; what cannot be read is listed as such: it may still run."""
    if isinstance(hooks, dict) and isinstance(hooks.get("hooks"), dict):
        hooks = hooks["hooks"]
    if not isinstance(hooks, dict):
        return [f"hooks in {where} (not readable here: they may still run)"]
    lines = []
    for event, groups in hooks.items():
        for group in groups if isinstance(groups, list) else [groups]:
            entries = group.get("hooks") if isinstance(group, dict) else None
            for entry in entries if isinstance(entries, list) else [group]:
                command = entry.get("command") if isinstance(entry, dict) else None
                kind = entry.get("type") if isinstance(entry, dict) else None
                shown = command if isinstance(command, str) else f"a {kind or 'hook'} entry"
                lines.append(f"hook {event}: {one_line(shown, _SHOWN_CHARS)}")
    return lines


def _declared_files(value: Any, folder: Path) -> list[Path]:
    values = value if isinstance(value, list) else [value]
    return [folder / v for v in values if isinstance(v, str)]


def _hooks_of(folder: Path, manifest: dict[str, Any]) -> list[str]:
    """The plugin's hook commands: hooks/hooks.json, and what the manifest's `hooks` names (a
    file, several, or the hooks themselves)."""
    lines: list[str] = []
    declared = manifest.get("hooks")
    files = [folder / "hooks" / "hooks.json"] + _declared_files(declared, folder)
    for path in dict.fromkeys(p.resolve() for p in files):
        if path.is_file():
            lines += _hook_lines(_json_file(path), str(path.relative_to(folder.resolve())))
    if isinstance(declared, dict):
        lines += _hook_lines(declared, "the manifest")
    return lines


def _lsp_servers_of(folder: Path, manifest: dict[str, Any]) -> list[str]:
    """The language servers a plugin starts (`.lsp.json` or the manifest's `lspServers`)."""
    declared = manifest.get("lspServers")
    servers = declared if isinstance(declared, dict) else None
    if servers is None:
        path = folder / (declared if isinstance(declared, str) else ".lsp.json")
        servers = _json_file(path) if path.is_file() else None
    if not isinstance(servers, dict):
        return []
    return [
        f"language server {name}: {one_line(str(entry.get('command', '')), _SHOWN_CHARS)}"
        for name, entry in servers.items()
        if isinstance(entry, dict)
    ]


def _file_digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"


def plugin_code(folder: Path, scaffolds: Sequence[tuple[str, Path]] = ()) -> _PluginCode:
    """What of the plugin in `folder` would run (its hooks and servers, and the scaffold scripts
    given: `(case, script)`), and the digest of the folder, the scripts and that list. A manifest
    that cannot be read counts as code (the folder may still hold hooks)."""
    real = folder.resolve()
    try:
        manifest, _ = read_plugin_manifest(real)
    except InputError:
        manifest = {}
    runs = _hooks_of(real, manifest)
    runs += [
        f"MCP server {name}: {one_line(command, _SHOWN_CHARS)}"
        for name, command in plugin_server_commands(real)
    ]
    runs += _lsp_servers_of(real, manifest)
    runs += [f"scaffold {case}: bash {script.name}" for case, script in scaffolds]
    outside = sorted(
        {str(s.resolve()) for _, s in scaffolds if not s.resolve().is_relative_to(real)}
    )
    parts = [folder_digest(real), runs, [_file_digest(Path(p)) for p in outside]]
    digest = hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]
    return _PluginCode(real, tuple(runs), digest)


def _trust_store_path() -> Path:
    """Where the answers are kept: $XDG_CONFIG_HOME (else ~/.config) /claude-tool-evaluator/."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "claude-tool-evaluator" / _STORE_NAME


def _read_store() -> dict[str, Any]:
    data = _json_file(_trust_store_path())
    folders = data.get("folders") if isinstance(data, dict) else None
    return folders if isinstance(folders, dict) else {}


def _remember(code: _PluginCode) -> None:
    """The folder trusted in this content, written 0600 (its folder 0700) and replaced whole, so
    a reader never sees half a file. A store that cannot be written costs only the memory."""
    path = _trust_store_path()
    folders = _read_store()
    folders[str(code.folder)] = {
        "digest": code.digest,
        "trusted_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "runs": list(code.runs),
    }
    text = json.dumps({"version": 1, "folders": folders}, indent=2, sort_keys=True) + "\n"
    with contextlib.suppress(OSError):
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)


def trusted(code: _PluginCode) -> bool:
    """Whether the user trusted this folder as it is now (a changed folder is not trusted)."""
    entry = _read_store().get(str(code.folder))
    return isinstance(entry, dict) and entry.get("digest") == code.digest


def _can_ask() -> bool:
    """Whether a person can be asked: a terminal on both ends, and not CI."""
    if os.environ.get("CI"):
        return False
    try:
        return sys.stdin.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _ask(code: _PluginCode) -> bool:
    import click

    click.echo(f"The plugin in {code.folder} runs code of its own on this machine:", err=True)
    for line in code.runs:
        click.echo(f"  {line}", err=True)
    click.echo(
        "It runs confined (your home hidden, writes only in the run's folders), as you.", err=True
    )
    try:
        return click.confirm("Trust this folder?", default=False, err=True)
    except click.Abort:
        return False


def _kinds(code: _PluginCode) -> str:
    kinds = dict.fromkeys(
        "hooks"
        if r.startswith("hook")
        else "scaffold scripts"
        if r.startswith("scaffold")
        else "servers"
        for r in code.runs
    )
    return ", ".join(kinds)


def require_trust(
    code: _PluginCode,
    trust_flag: bool,
    ask: Callable[[_PluginCode], bool] | None = None,
    interactive: bool | None = None,
) -> None:
    """The gate, before anything of the plugin starts: nothing to run, --trust-plugin, or a
    folder trusted as it is now, pass; a terminal asks (`ask`) and remembers a yes; otherwise one
    line naming the folder and the flag (InputError: exit 2)."""
    if not code.runs or trust_flag or trusted(code):
        return
    if interactive if interactive is not None else _can_ask():
        if (ask or _ask)(code):
            _remember(code)
            return
        raise InputError(
            "not trusted: nothing of the plugin ran",
            code.folder,
            hint=f"answer y to trust it, or pass {_TRUST_FLAG}",
        )
    raise InputError(
        "not a trusted plugin folder, and this run cannot stop to ask you about it (no "
        f"terminal, or CI): its {_kinds(code)} would run on this machine",
        code.folder,
        hint=f"run it once in a terminal to trust this folder, or pass {_TRUST_FLAG} to assert "
        "that you trust this plugin's code (e.g. in CI)",
    )
