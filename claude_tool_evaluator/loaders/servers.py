"""Servers and prompts: --server, --server-module, --server-url and mcpServers files (with
${VAR} expansion) to ServerSpecs, a Claude Code plugin folder's manifest and servers; the system
prompt.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import prompts

from .. import EXAMPLE_SERVER
from ..errors import InputError
from ..files import parse_json_text, read_text_file
from ..redaction import Redactor
from ..run_types import ServerSpec
from ..sinks import line_of, safe_name

__all__ = [
    "PLUGIN_MANIFEST",
    "SERVER_TRANSPORTS",
    "config_server_spec",
    "load_mcp_config",
    "load_system_prompt",
    "plugin_server_commands",
    "plugin_server_names",
    "read_plugin_manifest",
    "resolve_servers",
    "wrong_file",
]


def _file_kind(text: str, path: Path) -> tuple[str, str]:
    """What an input file is by its content (and name), and the option that takes it: so the
    wrong file given to an option is named for what it is ("a QA evaluation (XML): give it to
    --qa"), not reported as a parse error of the wrong format."""
    head = text.lstrip("\ufeff \t\r\n")[:4000]
    first_line = head.split("\n", 1)[0].lower()
    if head.startswith("<"):
        return "a QA evaluation (XML)", "--qa"
    if head.startswith(("{", "[")):
        if '"schema_version"' in head:
            return "an evaluator results file", "compare or render"
        if '"mcpServers"' in head:
            return "an mcpServers config", "--mcp-config"
        if '"should_trigger"' in head or '"evals"' in head:
            return "a skill-creator eval set (JSON)", "--trigger or --tests with --skill"
        return "a JSON file", "an option that takes JSON"
    if head.startswith(("---", "#")) or path.suffix.lower() in (".md", ".markdown"):
        frontmatter = head.split("\n---", 1)[0]
        if path.name.lower() == "skill.md" or (
            re.search(r"^name\s*:", frontmatter, re.MULTILINE)
            and re.search(r"^description\s*:", frontmatter, re.MULTILINE)
            and not re.search(r"^type\s*:", frontmatter, re.MULTILINE)
        ):
            return "a skill (SKILL.md)", "--skill"
        return "a markdown test", "--tests (or --trigger)"
    if "test_name" in first_line or path.suffix.lower() == ".csv":
        return "a CSV suite", "--csv"
    return "", ""


def wrong_file(text: str, path: Path, expected: str, what: str) -> InputError | None:
    """An InputError when the file is recognisably another kind than `expected` (a flag)."""
    kind, flag = _file_kind(text, path)
    if not kind or flag.startswith(expected):
        return None
    return InputError(f"this is {kind}, not {what}", path, 1, f"give it to {flag}")


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _expand_env_refs(value: str, where: str, path: Path, line: int | None) -> str:
    """`${VAR}` and `${VAR:-default}` as Claude Code expands them in an mcpServers config."""

    def sub(match: re.Match) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        raise InputError(
            f"{where} refers to ${{{name}}}, which is not set",
            path,
            line,
            f"export {name}=... or give a default as ${{{name}:-value}}",
        )

    return _ENV_REF.sub(sub, value)


def _parse_server_env(items: Sequence[str]) -> dict[str, str]:
    """`--server-env KEY` passes our value of KEY; `--server-env KEY=VALUE` sets it."""
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not key or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise InputError(f"--server-env {item!r} is not KEY or KEY=VALUE")
        if not sep:
            if key not in os.environ:
                raise InputError(
                    f"--server-env {key}: {key} is not set in this environment",
                    hint=f"export {key}=... or pass --server-env {key}=VALUE",
                )
            value = os.environ[key]
        env[key] = value
    return env


def _server_name_from_argv(argv: list[str]) -> str:
    """A short name for a server command: its script, its `-m` module, or its program."""
    for i, arg in enumerate(argv[1:], 1):
        if arg.endswith((".py", ".js", ".mjs", ".ts")):
            return Path(arg).stem
        if arg == "-m" and i + 1 < len(argv):
            return argv[i + 1].split(".")[-1]
    return Path(argv[0]).name


def _parse_server_command(command: str, env: dict[str, str], index: int = 0) -> ServerSpec:
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise InputError(f"--server {command!r}: {exc}") from None
    if not argv:
        raise InputError(
            "--server is empty", hint='give a command, e.g. --server "python my_server.py"'
        )
    return ServerSpec(
        name=safe_name(_server_name_from_argv(argv)) or f"server{index + 1}",
        kind="stdio",
        command=argv[0],
        args=argv[1:],
        env=dict(env),
    )


def _parse_server_module(target: str) -> ServerSpec:
    module, _, attr = target.partition(":")
    if module.endswith(".py") or "/" in module:
        if not Path(module).is_file():
            raise InputError(
                f"--server-module {target}: no such file", hint="give path/to/server.py[:attr]"
            )
        if not module.endswith(".py"):
            raise InputError(
                f"--server-module {target}: not a Python file", hint="give path/to/server.py[:attr]"
            )
    elif not re.fullmatch(r"[A-Za-z_][\w.]*", module):
        raise InputError(f"--server-module {target!r} is neither a file nor a module name")
    return ServerSpec(
        name=safe_name(Path(module).stem.split(".")[-1]),
        kind="module",
        module=module,
        attr=attr or None,
    )


SERVER_TRANSPORTS = (
    "http",
    "sse",
)  # --transport: streamable HTTP, or the legacy HTTP+SSE transport


def _parse_server_url(url: str, transport: str) -> ServerSpec:
    """`--server-url URL` (with `--transport sse|http`): a remote server, named after its host."""
    from urllib.parse import urlsplit

    try:
        host = urlsplit(url).hostname if re.match(r"https?://", url) else None
    except ValueError:
        host = None
    if not host:
        raise InputError(
            f"--server-url {url!r} is not an http:// or https:// URL",
            hint="e.g. --server-url http://127.0.0.1:3001/sse --transport sse",
        )
    return ServerSpec(name=safe_name(host) or "remote", kind=transport, url=url)


def config_server_spec(name: str, entry: Any, path: Path, raw: str) -> ServerSpec:
    line = line_of(raw, json.dumps(name))
    if not isinstance(entry, dict):
        raise InputError(
            f"server {name!r} must be an object",
            path,
            line,
            'e.g. "name": {"command": "python", "args": ["server.py"]}',
        )
    kind = entry.get("type") or (
        "stdio" if "command" in entry else "http" if "url" in entry else None
    )
    where = f"server {name!r}"

    def expand_map(key: str) -> dict[str, str]:
        value = entry.get(key) or {}
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise InputError(
                f"{where}: {key!r} must be an object of strings",
                path,
                line,
                'quote every value, e.g. {"PORT": "8080"}',
            )
        return {k: _expand_env_refs(v, f"{where} {key} {k}", path, line) for k, v in value.items()}

    if kind == "stdio":
        command, args = entry.get("command"), entry.get("args") or []
        if not isinstance(command, str) or not command.strip():
            raise InputError(
                f'{where}: stdio server needs a "command" string',
                path,
                line,
                'e.g. "command": "python", "args": ["server.py"]',
            )
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise InputError(
                f'{where}: "args" must be a list of strings',
                path,
                line,
                'e.g. "args": ["server.py", "--port", "8080"]',
            )
        cwd = entry.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise InputError(f'{where}: "cwd" must be a string (a folder path)', path, line)
        return ServerSpec(
            name=safe_name(name) or "server",
            kind="stdio",
            command=_expand_env_refs(command, where, path, line),
            args=[_expand_env_refs(a, f"{where} args", path, line) for a in args],
            env=expand_map("env"),
            cwd=str((path.parent / cwd).resolve()) if cwd else None,
        )
    if kind in ("http", "streamable-http", "streamable_http", "sse"):
        url = entry.get("url")
        transport = "sse" if kind == "sse" else "http"
        if not isinstance(url, str) or not re.match(r"https?://", url):
            raise InputError(
                f'{where}: {transport} server needs a "url" starting with http:// or https://',
                path,
                line,
            )
        return ServerSpec(
            name=safe_name(name) or "server",
            kind=transport,
            url=_expand_env_refs(url, f"{where} url", path, line),
            headers=expand_map("headers"),
        )
    raise InputError(
        f"{where}: unknown server type {kind!r}",
        path,
        line,
        'use "type": "stdio" (with "command"), "http" or "sse" (with "url")',
    )


def _expanded_env_values(value: Any) -> dict[str, str]:
    """The variables of our environment that the ${VAR} references in a config entry take, by
    name: wherever they land (command, args, url, env, headers), a credential-named one
    (`${GITHUB_TOKEN}`) or one that looks random is a secret to the redactor."""
    if isinstance(value, dict):
        return {k: v for item in value.values() for k, v in _expanded_env_values(item).items()}
    if isinstance(value, list):
        return {k: v for item in value for k, v in _expanded_env_values(item).items()}
    if isinstance(value, str):
        names = [m.group(1) for m in _ENV_REF.finditer(value)]
        return {name: os.environ[name] for name in names if name in os.environ}
    return {}


_PLUGIN_ROOT_REFERENCE = "${CLAUDE_PLUGIN_ROOT}"
PLUGIN_MANIFEST = Path(".claude-plugin") / "plugin.json"


def read_plugin_manifest(folder: Path) -> tuple[dict[str, Any], str]:
    """A Claude Code plugin folder's manifest (`.claude-plugin/plugin.json`) and its text;
    ({}, "") when it has none. Not a JSON object: one line naming the file."""
    path = folder / PLUGIN_MANIFEST
    if not path.is_file():
        return {}, ""
    raw = read_text_file(path, "plugin manifest")
    data = parse_json_text(raw, path)
    if not isinstance(data, dict):
        raise InputError("the manifest must be a JSON object", path, 1, 'e.g. {"name": "x"}')
    return data, raw


def _plugin_servers_source(folder: Path) -> tuple[Path, str, Any]:
    """Where a Claude Code plugin keeps its MCP servers, as Claude Code reads them: the manifest's
    `mcpServers` (an object, or the path of a file of them), else `.mcp.json` at the plugin's
    root; either file may wrap the servers in `mcpServers` or list them bare. Returns the file,
    its text and the servers."""
    manifest, raw = read_plugin_manifest(folder)
    declared = manifest.get("mcpServers")
    if isinstance(declared, dict):
        return folder / PLUGIN_MANIFEST, raw, declared
    source = folder / declared if isinstance(declared, str) else folder / ".mcp.json"
    if not source.is_file():
        raise InputError(
            "this plugin ships no MCP servers",
            folder,
            None,
            "a plugin's servers live in its .mcp.json or its manifest's mcpServers",
        )
    raw = read_text_file(source, "MCP config")
    data = parse_json_text(raw, source)
    return source, raw, data.get("mcpServers", data) if isinstance(data, dict) else data


def _with_plugin_root(value: Any, root: str) -> Any:
    """A config entry with `${CLAUDE_PLUGIN_ROOT}` replaced by the plugin's folder, as Claude Code
    does for a plugin's servers (the user's own ${VAR}s are expanded after)."""
    if isinstance(value, dict):
        return {k: _with_plugin_root(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_plugin_root(v, root) for v in value]
    return value.replace(_PLUGIN_ROOT_REFERENCE, root) if isinstance(value, str) else value


def plugin_server_names(folder: Path) -> list[str]:
    """The names of the MCP servers a plugin ships ([] when none), unstarted."""
    try:
        _, _, servers = _plugin_servers_source(folder)
    except InputError:
        return []
    return [str(name) for name in servers] if isinstance(servers, dict) else []


def plugin_server_commands(folder: Path) -> list[tuple[str, str]]:
    """Each MCP server a plugin ships and the command line that starts it (its URL for a remote
    one), as written in its config, unstarted: what the trust question lists."""
    try:
        _, _, servers = _plugin_servers_source(folder)
    except InputError:
        return []
    if not isinstance(servers, dict):
        return []
    found = []
    for name, entry in servers.items():
        entry = entry if isinstance(entry, dict) else {}
        args = entry.get("args")
        parts = [entry.get("command") or "", *(args if isinstance(args, list) else [])]
        command = " ".join(str(part) for part in parts if part)
        found.append((str(name), command or str(entry.get("url") or "")))
    return found


def _load_plugin_servers(folder: Path) -> list[ServerSpec]:
    """A plugin folder's MCP servers: `--mcp-config my-plugin/` evaluates the servers a plugin
    ships exactly as its users start them."""
    source, raw, servers = _plugin_servers_source(folder)
    if not isinstance(servers, dict) or not servers:
        raise InputError(
            "no MCP server in this plugin's server list",
            source,
            1,
            'expected {"name": {"command": ...}} or {"mcpServers": {...}}',
        )
    entries = _with_plugin_root(servers, str(folder.resolve()))
    specs = [config_server_spec(name, entry, source, raw) for name, entry in entries.items()]
    for spec, entry in zip(specs, entries.values()):
        spec.secrets = _expanded_env_values(entry)
    return specs


def load_mcp_config(path: str | Path) -> list[ServerSpec]:
    """Claude Desktop / Claude Code `mcpServers` JSON, as is; a plugin folder: its servers."""
    path = Path(path)
    if path.is_dir() and ((path / PLUGIN_MANIFEST).is_file() or (path / ".mcp.json").is_file()):
        return _load_plugin_servers(path)  # any other folder: "give a file, not a folder"
    raw = read_text_file(path, "MCP config")
    data = parse_json_text(raw, path)
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict) or not servers:
        raise InputError(
            'no "mcpServers" object with at least one server',
            path,
            1,
            'expected {"mcpServers": {"name": {"command": ...}}}',
        )
    specs = [config_server_spec(name, entry, path, raw) for name, entry in servers.items()]
    for spec, entry in zip(specs, servers.values()):
        spec.secrets = _expanded_env_values(entry)
    return specs


def resolve_servers(
    servers: Sequence[str],
    server_env: Sequence[str],
    mcp_config: str | None,
    server_modules: Sequence[str],
    server_urls: Sequence[str] = (),
    transport: str = "http",
) -> list[ServerSpec]:
    """All servers the user named; the bundled example server when none is named."""
    env = _parse_server_env(server_env)
    specs = [_parse_server_command(cmd, env, i) for i, cmd in enumerate(servers)]
    if mcp_config:
        specs += load_mcp_config(mcp_config)
    specs += [_parse_server_module(target) for target in server_modules]
    specs += [_parse_server_url(url, transport) for url in server_urls]
    if not specs:
        if not EXAMPLE_SERVER.is_file():  # installed without the repository's examples/
            raise InputError(
                "no MCP server given",
                hint="name one with --server, --mcp-config or --server-module",
            )
        specs = [
            ServerSpec(
                name="profiles",
                kind="stdio",
                command=sys.executable,
                args=[str(EXAMPLE_SERVER)],
                env=env,
            )
        ]
    seen: dict[str, int] = {}
    for spec in specs:  # two servers of one name would make tool names ambiguous
        seen[spec.name] = seen.get(spec.name, 0) + 1
        if seen[spec.name] > 1:
            spec.name = f"{spec.name}{seen[spec.name]}"
    Redactor.learn(specs)  # before any server starts: a fatal line quoting one is redacted too
    return specs


def load_system_prompt(choice: str) -> str:
    """A prompt name from prompts.py, or a path to a text file."""
    if choice in prompts.SYSTEM_PROMPTS:
        return prompts.SYSTEM_PROMPTS[choice]
    path = Path(choice)
    if path.is_file():
        value = read_text_file(path, "prompt file").strip()
        if not value:
            raise InputError("prompt file is empty", path, 1)
        return value
    raise InputError(
        f"--prompt {choice!r} is neither a prompt name nor a file",
        hint="choose one of " + ", ".join(prompts.SYSTEM_PROMPTS) + " or give a path",
    )
