"""Rooms by name: a table's row (a mode's run, a writer's function) names a function of a later
room without importing it, and the room loads when the function is first called. So a start
loads only the rooms its command uses (`--help` loads no mode, writer or SDK).

May import: nothing of the package (the first room)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "RoomFunction",
]


@dataclass(frozen=True)
class RoomFunction:
    """`RoomFunction("modes.tool_suites", "csv_mode")`: that function, called through this."""

    room: str  # its module, under this package
    name: str

    def function(self) -> Callable[..., Any]:
        return getattr(importlib.import_module(f"{__package__}.{self.room}"), self.name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function()(*args, **kwargs)
