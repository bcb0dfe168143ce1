"""Every room shows its face: a module of the package says what it offers in `__all__`, every
public top-level name it defines is in that list, and every name in the list is used by another
module, a test or the front door. A name only its own module reads is private (`_name`), so a
reader can tell a room's face from its furniture.

"Used" is read from the code, not its text: a name imported (`from room import name`), an
attribute read (`room.name`), a name loaded, or a string naming a function of a room
(`"room:name"`, the tables of `rooms.py`), in any file but the one defining the name."""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "claude_tool_evaluator"
# what else reads the package: the front door, the top-level files the design card keeps, tests
READERS = [
    ROOT / "evaluator.py",
    ROOT / "prompts.py",
    ROOT / "run_tests.py",
    ROOT / "test_constants.py",
    *sorted((ROOT / "tests").rglob("*.py")),
    *sorted((ROOT / "action").glob("*.py")),  # the GitHub Action's own programs
    *sorted((ROOT / "examples").rglob("*.py")),
]
_REFERENCE = re.compile(r"[A-Za-z_][\w.]*(:[A-Za-z_]\w*)?")


def rooms() -> list[Path]:
    """The package's modules, not the programs it starts as files of their own."""
    return [p for p in sorted(PACKAGE.rglob("*.py")) if "programs" not in p.parts]


def top_level_definitions(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name):
                        names.add(leaf.id)
    return {name for name in names if not (name.startswith("__") and name.endswith("__"))}


def imported_names(tree: ast.Module) -> set[str]:
    return {
        (alias.asname or alias.name).split(".")[0]
        for node in tree.body
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }


def declared_face(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return list(ast.literal_eval(node.value))  # type: ignore[attr-defined]
    return None


def names_read(tree: ast.AST, own: set[str]) -> set[str]:
    """Every name a file reads from elsewhere: imported, an attribute, named in a 'room:name'
    string, or loaded (unless the file defines that name itself: then it reads its own)."""
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            read.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id not in own:
                read.add(node.id)
        elif isinstance(node, ast.Attribute):
            read.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _REFERENCE.fullmatch(node.value):
                read.update(re.split(r"[.:]", node.value))
            elif "import " in node.value:  # a child program a test writes out or runs with -c
                try:
                    read |= names_read(ast.parse(textwrap.dedent(node.value)), set())
                except SyntaxError:
                    pass
    return read


def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_every_room_declares_its_face_and_keeps_its_furniture_private():
    trees = {path: parsed(path) for path in [*rooms(), *READERS]}
    definitions = {path: top_level_definitions(tree) for path, tree in trees.items()}
    reads = {path: names_read(tree, definitions[path]) for path, tree in trees.items()}
    without_face, unlisted, missing, unused = [], [], [], []
    for path in rooms():
        where = path.relative_to(ROOT)
        face = declared_face(trees[path])
        if face is None:
            without_face.append(str(where))
            continue
        defined = definitions[path]
        public = {name for name in defined if not name.startswith("_")}
        unlisted += [f"{where}: {name}" for name in sorted(public - set(face))]
        present = defined | imported_names(trees[path])
        missing += [f"{where}: {name}" for name in face if name not in present]
        for name in face:
            readers = [other for other in trees if other != path and name in reads[other]]
            if not readers:
                unused.append(f"{where}: {name}")
    assert not without_face, f"modules without __all__: {without_face}"
    assert not unlisted, f"public names missing from their module's __all__: {unlisted}"
    assert not missing, f"names in __all__ the module does not have: {missing}"
    assert not unused, f"public names no other module or test uses (make them _private): {unused}"


def test_the_face_check_fails_on_a_public_name_nobody_uses(tmp_path: Path):
    """The check above can fail: a module with a public helper no one reads is caught."""
    room = tmp_path / "room.py"
    room.write_text('__all__ = ["offered", "spare"]\n\ndef offered(): ...\n\ndef spare(): ...\n')
    reader = tmp_path / "reader.py"
    reader.write_text("from room import offered\n\noffered()\n")
    trees = {room: parsed(room), reader: parsed(reader)}
    face = declared_face(trees[room]) or []
    used = {name for name in face if name in names_read(trees[reader], set())}
    assert used == {"offered"} and set(face) - used == {"spare"}
