"""--record-mocks for plugin runs: the real MCP servers of every plugin a suite's cases load,
started once for the whole suite (confined as the plugin's other code is: bubblewrap, the user's
home hidden, --allow-read to open a part of it, writes only in a folder of their own), each put
behind a recording server (hub/recorder.py) served on loopback, which every run's Claude Code
reaches under the plugin's own server name; afterwards, the mocks written into the suite.

May import: the rooms above the runners."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..claude_code import RunFolder, confined_command
from ..hub.recorder import RecordedServer, write_recorded_mocks
from ..hub.served import served_over_http
from ..loaders.plugin_evals import plugin_name_of
from ..loaders.servers import load_mcp_config, plugin_server_names
from ..redaction import Redactor
from ..run_types import ServerSpec

__all__ = [
    "MockRecording",
]


def _served_name(plugin: str, server: str) -> str:
    """The name Claude Code gives a plugin's server (`plugin_P_S`: its tools `mcp__plugin_P_S__T`)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"plugin_{plugin}_{server}")


def _confined(spec: ServerSpec, root: Path, allow_read: Sequence[str], plugin: Path) -> ServerSpec:
    """A stdio server's command inside bubblewrap (the plugin's folder readable in place); a
    remote server is reached as it is."""
    if spec.kind != "stdio":
        return spec
    command = confined_command([spec.command, *spec.args], root, allow_read, [str(plugin)])
    return replace(spec, command=command[0], args=command[1:])


@dataclass
class MockRecording:
    """The suite's real servers behind recorders, by plugin folder (see the module's docstring)."""

    plugins: Sequence[Path]
    confine: bool = True
    allow_read: tuple[str, ...] = ()
    recorded: dict[Path, list[RecordedServer]] = field(default_factory=dict)
    reachable: dict[Path, dict[str, ServerSpec]] = field(default_factory=dict)

    def servers_of(self, plugin: Path) -> dict[str, ServerSpec]:
        """A plugin's servers at their loopback URLs, by the plugin's own server name."""
        return self.reachable.get(plugin, {})

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[None]:
        """Every plugin's real servers started (a server that fails to start: each call of it an
        error, the suite goes on) and served for as long as the block lasts."""
        folder = RunFolder.make()
        try:
            async with contextlib.AsyncExitStack() as stack:
                in_process = []
                for plugin in dict.fromkeys(self.plugins):
                    name = plugin_name_of(plugin)
                    specs = load_mcp_config(plugin) if plugin_server_names(plugin) else []
                    recorders = []
                    for spec in specs:
                        if self.confine:
                            spec = _confined(spec, folder.root, self.allow_read, plugin)
                        recorder = RecordedServer(plugin, spec.name, spec)
                        await stack.enter_async_context(recorder.running())
                        recorders.append(recorder)
                        in_process.append(
                            (plugin, spec.name, recorder.in_process(_served_name(name, spec.name)))
                        )
                    self.recorded[plugin] = recorders
                served = await stack.enter_async_context(
                    served_over_http([spec for _, _, spec in in_process])
                )
                for (plugin, server, _), spec in zip(in_process, served):
                    self.reachable.setdefault(plugin, {})[server] = spec
                yield
        finally:
            self.reachable = {}
            folder.remove()

    def write(self, mocks_dir: Path) -> list[str]:
        """The recorded mocks, written into the suite's `mocks/` (see write_recorded_mocks)."""
        servers = [s for recorders in self.recorded.values() for s in recorders]
        specs = [s.spec for s in servers]
        return write_recorded_mocks(servers, mocks_dir, Redactor.for_run(specs))
