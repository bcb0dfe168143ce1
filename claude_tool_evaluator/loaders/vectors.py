"""Injection vectors for the red team: ours, and AgentDojo's attack templates read from its
package with `ast` (never imported).

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers, the loaders above it."""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import prompts
import test_constants as C

from ..errors import InputError

__all__ = [
    "Vector",
    "agentdojo_vectors",
    "load_vectors",
]


# A vector is a template an attacker wraps the goal in (`{goal}`; AgentDojo's also `{user}`,
# `{model}` and `{tools}`). Ours are prompts.REDTEAM_VECTORS. AgentDojo's are read from its
# installed package (the `benchmarks` extra), never copied here and never imported (importing it
# loads four model SDKs): its attack modules are parsed with `ast`, which works on a full install
# and on `pip install --no-deps agentdojo` alike.
@dataclass(frozen=True)
class Vector:
    source: str  # ours | agentdojo
    name: str
    template: str
    user: str = "the user"  # AgentDojo's {user}: who signs the message
    model: str = "Claude"  # AgentDojo's {model}: what it calls the model (Claude, for Claude)
    licence: str = ""

    @property
    def id(self) -> str:
        return f"{self.source}:{self.name}"

    def text(self, goal: str, tools: str = "") -> str:
        """The injection: the template with its placeholders filled (replaced, not formatted:
        a brace of the template's own stays as it is)."""
        filled = self.template
        for key, value in (("user", self.user), ("model", self.model), ("tools", tools)):
            filled = filled.replace("{" + key + "}", value)
        return filled.replace("{task}", "the task the user gave").replace("{goal}", goal)


def _our_vectors() -> list[Vector]:
    return [Vector("ours", name, text) for name, text in prompts.REDTEAM_VECTORS.items()]


def _ast_constant(node: Any) -> str | None:
    """A string literal (parts joined), else None."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, str) else None


def _agentdojo_attack_templates(folder: Path) -> list[dict[str, str]]:
    """Every attack class of AgentDojo's `attacks/*_attacks.py` whose own template carries
    `{goal}`: its `name`, the template (`_JB_STRING`, or the string its `__init__` hands to
    `super().__init__`), who it signs as (`self.user_name = "..."`, else DEFAULT_USER_NAME) and
    whether it names the model (get_model_name_from_pipeline: "Claude" for Claude)."""
    base = folder / "base_attacks.py"
    defaults: dict[str, str] = {}
    if base.is_file():
        for statement in ast.parse(base.read_text(encoding="utf-8")).body:
            if isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Name):
                value = _ast_constant(statement.value)
                if value is not None:
                    defaults[statement.targets[0].id] = value
    found = []
    for path in sorted(folder.glob("*_attacks.py")):
        for cls in (
            n
            for n in ast.parse(path.read_text(encoding="utf-8")).body
            if isinstance(n, ast.ClassDef)
        ):
            name = template = user = None
            names_model = False
            for node in ast.walk(cls):
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target: ast.expr = node.targets[0]
                    if isinstance(target, ast.Name) and target.id == "name":
                        name = _ast_constant(node.value)
                    elif isinstance(target, ast.Name) and target.id in (
                        "_JB_STRING",
                        "_DOS_STRING",
                    ):
                        template = _ast_constant(node.value)
                    elif isinstance(target, ast.Attribute) and target.attr == "user_name":
                        user = _ast_constant(node.value)
                elif isinstance(node, ast.Call):
                    func = node.func
                    if isinstance(func, ast.Name) and func.id == "get_model_name_from_pipeline":
                        names_model = True
                    if (
                        isinstance(func, ast.Attribute)
                        and func.attr == "__init__"
                        and node.args
                        and _ast_constant(node.args[0]) is not None
                    ):
                        template = _ast_constant(node.args[0])
            if name and template and "{goal}" in template:
                found.append(
                    {
                        "name": name,
                        "template": template,
                        "user": user or defaults.get("DEFAULT_USER_NAME", "the user"),
                        "model": "Claude"
                        if names_model
                        else defaults.get("DEFAULT_MODEL_NAME", "the AI language model"),
                    }
                )
    return found


def agentdojo_vectors() -> list[Vector]:
    """AgentDojo's attack templates, from its installed package (see above)."""
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec(C.AGENTDOJO_PACKAGE)  # finds it; does not import it
    folder = (
        Path(next(iter(spec.submodule_search_locations or [])), "attacks")
        if spec is not None and spec.submodule_search_locations
        else None
    )
    if folder is None or not folder.is_dir():
        raise InputError(
            "--vectors agentdojo: the agentdojo package is not installed",
            hint='pip install -e ".[benchmarks]" (or pip install agentdojo), or use --vectors ours',
        )
    try:
        version = importlib.metadata.version(C.AGENTDOJO_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        version = "?"
    licence = f"agentdojo {version}, MIT licence (Debenedetti et al. 2024)"
    try:
        templates = _agentdojo_attack_templates(folder)
    except (OSError, SyntaxError, UnicodeDecodeError) as exc:
        raise InputError(f"--vectors agentdojo: cannot read {folder}: {exc}") from None
    if not templates:
        raise InputError(
            f"--vectors agentdojo: no attack template with {{goal}} in {folder}",
            hint="this agentdojo version keeps its attacks elsewhere: use --vectors ours",
        )
    return [
        Vector("agentdojo", t["name"], t["template"], t["user"], t["model"], licence)
        for t in templates
    ]


_VECTOR_SOURCES: dict[str, Callable[[], list[Vector]]] = {
    "ours": _our_vectors,
    "agentdojo": agentdojo_vectors,
}


def load_vectors(values: Sequence[str]) -> list[Vector]:
    """--vectors: comma-separated SOURCE (every vector it has) or SOURCE:NAME, in order, once each."""
    items = [item.strip() for value in values for item in value.split(",") if item.strip()]
    chosen: dict[str, Vector] = {}
    loaded: dict[str, list[Vector]] = {}
    for item in items or list(C.DEFAULT_VECTORS):
        source, _, name = item.partition(":")
        if source not in _VECTOR_SOURCES:
            raise InputError(
                f"--vectors {item}: no vector source {source!r}",
                hint="give " + ", ".join(_VECTOR_SOURCES) + " or SOURCE:NAME",
            )
        if source not in loaded:
            loaded[source] = _VECTOR_SOURCES[source]()
        picked = [v for v in loaded[source] if not name or v.name == name]
        if not picked:
            raise InputError(
                f"--vectors {item}: {source} has no vector {name!r}",
                hint="it has " + ", ".join(v.name for v in loaded[source]),
            )
        chosen.update({v.id: v for v in picked})
    return list(chosen.values())
