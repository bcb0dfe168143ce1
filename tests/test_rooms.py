"""The house: the program is a package of rooms (claude_tool_evaluator/) behind its front door
(evaluator.py). Each room opens with a docstring saying what it holds and what it may import,
reads top to bottom (nothing at its top level names a later definition of its own) and stays
small; the imports between rooms flow one way (import-linter's contracts in pyproject.toml,
checked by test_code_quality.py); the front door is short, offers every name of its __all__ and
never re-executes the program."""

from __future__ import annotations

import ast
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import EXAMPLE_SERVER, ROOT, TEST_API_KEY
from fake_anthropic import reply, text, tool_use

import claude_tool_evaluator as package
import evaluator as E

PACKAGE = ROOT / "claude_tool_evaluator"
ROOMS = sorted(PACKAGE.rglob("*.py"))


def rooms() -> list[Path]:
    """Every module of the package, not the programs a room writes out for a suite to run
    (package data in a `programs` folder)."""
    return [path for path in ROOMS if "programs" not in path.relative_to(PACKAGE).parts]


def lines_of(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


# ============================================================================ the rooms
def test_there_are_rooms_and_none_is_too_big():
    sizes = {path.relative_to(ROOT): lines_of(path) for path in rooms()}
    modules = [size for path, size in sizes.items() if path.name != "__init__.py"]
    assert len(modules) >= 8
    assert max(sizes.values()) <= 1200, max(sizes.items(), key=lambda item: item[1])
    assert statistics.median(modules) <= 1500


def test_every_room_says_what_it_holds_and_what_it_may_import():
    for path in rooms():
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        assert doc, f"{path.relative_to(ROOT)} has no docstring"
        if path != PACKAGE / "__init__.py":  # the package's own docstring draws every room
            assert "May import:" in doc, f"{path.relative_to(ROOT)} does not say what it may import"


# ============================================================================ the top to bottom rule
def module_names(tree: ast.Module) -> dict[str, int]:
    defined: dict[str, int] = {}
    for node in tree.body:
        names: list[str] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [(a.asname or a.name).split(".")[0] for a in node.names]
        for name in names:
            defined.setdefault(name, node.lineno)
    return defined


class RuntimeNames(ast.NodeVisitor):
    """Module-level names a statement loads at run time: annotations are left out (they are
    strings here), and so are the names a function binds itself."""

    def __init__(self) -> None:
        self.found: set[str] = set()
        self.local: list[set[str]] = []

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and not any(node.id in s for s in self.local):
            self.found.add(node.id)

    def function(self, node: Any) -> None:
        for d in [*node.decorator_list, *node.args.defaults, *filter(None, node.args.kw_defaults)]:
            self.visit(d)
        bound = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        for child in ast.walk(node):
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                bound.add(child.id)
            elif child is not node and isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            ):
                bound.add(child.name)
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                bound |= {(a.asname or a.name).split(".")[0] for a in child.names}
            elif isinstance(child, ast.arg):
                bound.add(child.arg)
        self.local.append(bound)
        for statement in node.body:
            self.visit(statement)
        self.local.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = function

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for d in node.args.defaults:
            self.visit(d)
        self.local.append({a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)})
        self.visit(node.body)
        self.local.pop()

    def comprehension(self, node: Any) -> None:
        self.local.append(
            {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        )
        self.generic_visit(node)
        self.local.pop()

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = comprehension

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)

    def visit_arg(self, node: ast.arg) -> None:
        pass


def test_each_room_reads_top_to_bottom():
    """Every top-level statement of a room uses only what stands above it (its imports
    included). A later room reaches an earlier one's code only through a table the earlier one
    declares (WRITERS, SECTIONS, OPTIONS, MODES, TOOL_CHECKS) and the later one fills."""
    later = []
    for path in rooms():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined = module_names(tree)
        for node in tree.body:
            visitor = RuntimeNames()
            visitor.visit(node)
            own = set(module_names(ast.Module(body=[node], type_ignores=[])))
            later += [
                f"{path.relative_to(ROOT)}:{node.lineno} uses {name} (defined on line "
                f"{defined[name]})"
                for name in sorted(visitor.found - own)
                if name in defined and defined[name] > node.lineno
            ]
    assert later == []


# ============================================================================ names and programs
def room_functions() -> list[tuple[str, int, str, str]]:
    """Every `RoomFunction("room", "name")` a room writes (MODES, WRITERS, any later table): where,
    and the room and function it names."""
    found = []
    for path in rooms():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", "")) == "RoomFunction"
                and len(node.args) == 2
                and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args)
            ):
                room, name = (a.value for a in node.args)
                found.append((str(path.relative_to(ROOT)), node.lineno, room, name))
    return found


def test_every_function_a_table_names_by_string_is_there():
    """A row names its function by room and name, so nothing imports it until it runs: a rename
    or a move that forgets the row fails here, not at a user's command. (The front door's
    API_ROOMS are checked by test_the_front_door_is_short_and_offers_the_supported_api.)"""
    from claude_tool_evaluator.rooms import RoomFunction

    named = room_functions()
    assert len(named) >= 28  # every mode's run and every writer's functions
    missing = []
    for where, line, room, name in named:
        try:
            found = RoomFunction(room, name).function()
        except (ImportError, AttributeError) as exc:
            missing.append(f"{where}:{line} RoomFunction({room!r}, {name!r}): {exc}")
            continue
        if not callable(found):
            missing.append(f"{where}:{line} RoomFunction({room!r}, {name!r}) is not callable")
    assert missing == []


def is_program(text: str) -> bool:
    """Whether a string is Python code: it parses, and holds an import or a definition, or three
    statements or more. Prose, markup and help text do not parse (or are one expression)."""
    if "\n" not in text.strip() and ";" not in text and "import " not in text:
        return False
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    definitions = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return any(isinstance(n, definitions) for n in ast.walk(tree)) or len(tree.body) >= 3


def programs_in_strings(path: Path) -> list[str]:
    """A string that is a program (is_program), and what follows a `-c` in an argument list
    (the program an interpreter is given to run) unless it is another option."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and is_program(node.value)
        ):
            found.append(f"{path.name}:{node.lineno} holds a program: {node.value[:40]!r}")
        items = node.args if isinstance(node, ast.Call) else getattr(node, "elts", [])
        for flag, given in zip(items, items[1:]):
            option = isinstance(given, ast.Constant) and str(given.value).startswith("-")
            if isinstance(flag, ast.Constant) and flag.value == "-c" and not option:
                found.append(f"{path.name}:{flag.lineno} runs `-c {ast.unparse(given)[:40]}`")
    return found


# What the check must catch (the launchers that lived in strings) and what it must let be
PROGRAM_SHAPES = {
    "import os, sys; os.chdir(sys.argv[1]); os.execvp(sys.argv[2], sys.argv[2:])": True,
    "import json, re, sys\nfor line in sys.stdin:\n    print(json.dumps(re.search(*line)))\n": True,
    "x = 1\ny = 2\nprint(x + y)\n": True,
    "Use this tool to import a CSV; then run it.": False,
    "<script>\nconst rows = [];\n</script>": False,
    "Compare two result files.\n\nExamples:\n  evaluator compare a.json b.json": False,
    "name": False,
    "a.b": False,
}


def test_no_program_lives_in_a_string(tmp_path: Path):
    """A program the evaluator starts is a module (package data, beside the rooms: editors,
    linters and type checkers read it), never a string handed to `python -c`."""
    assert {text: is_program(text) for text in PROGRAM_SHAPES} == PROGRAM_SHAPES
    sample = tmp_path / "sample.py"
    sample.write_text('W = "print(1)"\nrun([sys.executable, "-I", "-c", W])\nopt("-c", "--conf")\n')
    assert programs_in_strings(sample) == ["sample.py:2 runs `-c W`"]
    front = [
        ROOT / name for name in ("evaluator.py", "prompts.py", "test_constants.py", "run_tests.py")
    ]
    assert [found for path in [*rooms(), *front] for found in programs_in_strings(path)] == []


def test_the_programs_the_evaluator_starts_are_files_of_the_package():
    """What patterns.py, hub/processes.py and the Claude Code harness start (a pattern worker, the
    die-with-parent trampoline, the two MCP server launchers) are package data, and each one that
    must die with the evaluator shares the one die_with_parent helper."""
    programs = {path.name for path in (PACKAGE / "programs").glob("*.py")}
    assert programs == {
        "die_with_parent.py",
        "pattern_worker.py",
        "in_folder.py",
        "serve_module.py",
    }
    worker = (PACKAGE / "programs" / "pattern_worker.py").read_text(encoding="utf-8")
    assert "from die_with_parent import die_with_parent" in worker
    assert "prctl" not in worker  # asked in one place: die_with_parent.py


# ============================================================================ settings by concern
# The rooms that take the whole settings: the modes and what chooses and feeds them. Every room
# below them takes the groups of Settings it reads (or a small view of them, like RunSettings).
SETTINGS_TAKERS = ("modes", "dispatch.py", "project.py", "cli.py", "mode_table.py", "settings.py")
MOST_SETTINGS_FIELDS = 30


def names_settings(annotation: ast.expr) -> bool:
    """Whether an annotation names Settings (alone, in a union or a subscript, quoted, dotted)."""
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and node.id == "Settings":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "Settings":
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                quoted = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                continue
            if names_settings(quoted):
                return True
    return False


def settings_takers(path: Path) -> list[str]:
    """Each function or method of a room that takes a parameter annotated with Settings."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno} {node.name}({arg.arg})"
                for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
                if arg is not None and arg.annotation is not None and names_settings(arg.annotation)
            ]
    return found


def test_no_room_below_the_modes_takes_the_whole_settings():
    below = [p for p in rooms() if p.relative_to(PACKAGE).parts[0] not in SETTINGS_TAKERS]
    assert [found for path in below for found in settings_takers(path)] == []
    # the check sees what it looks for: the modes take it, a method and a quoted one count
    assert settings_takers(PACKAGE / "modes" / "tool_suites.py")
    assert names_settings(ast.parse("'Settings | None'", mode="eval").body)
    assert not names_settings(ast.parse("RunSettings", mode="eval").body)


def settings_classes() -> dict[str, int]:
    """Every dataclass of settings.py, and every view of settings elsewhere (a dataclass named
    ...Settings or ...Plan), by where it is and name: its number of fields."""
    sizes = {}
    for path in rooms():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            decorated = isinstance(node, ast.ClassDef) and any(
                "dataclass" in ast.unparse(d) for d in node.decorator_list
            )
            if decorated and (
                path.name == "settings.py" or node.name.endswith(("Settings", "Plan"))
            ):
                sizes[f"{path.relative_to(PACKAGE)}:{node.name}"] = sum(
                    isinstance(item, ast.AnnAssign)
                    and "ClassVar" not in ast.unparse(item.annotation)
                    for item in node.body
                )
    return sizes


def test_no_settings_class_holds_more_than_thirty_fields():
    sizes = settings_classes()
    assert sizes["settings.py:Settings"] >= 10, "Settings holds its groups"
    assert "run_types.py:RunSettings" in sizes
    assert {n: s for n, s in sizes.items() if s > MOST_SETTINGS_FIELDS} == {}, sizes


# ============================================================================ the front door
def test_the_front_door_is_short_and_offers_the_supported_api():
    assert lines_of(ROOT / "evaluator.py") <= 400
    assert all(hasattr(E, name) for name in E.__all__) and len(set(E.__all__)) == len(E.__all__)
    assert E.__version__ == package.__version__  # evaluator.__version__ as before the split
    done = subprocess.run(
        [sys.executable, "-c", "from evaluator import *; print(len(MODES), len(OPTIONS))"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout.split()[0] == str(len(E.MODES)), done.stderr


# evaluator.py run as a script by a Python where the project is not installed (this one's
# editable install is taken off the import path): it finds only what sits beside it.
UNINSTALLED = (
    "import os, runpy, sys; "
    "sys.meta_path[:] = [f for f in sys.meta_path "
    "if not getattr(f, '__module__', '').startswith('__editable__')]; "
    "sys.argv = ['evaluator.py', *sys.argv[1:]]; "
    "runpy.run_path(os.path.abspath('evaluator.py'), run_name='__main__')"
)


def test_the_front_door_without_its_rooms_says_so_in_one_line(tmp_path: Path):
    for name in ("evaluator.py", "prompts.py", "test_constants.py"):
        (tmp_path / name).write_text((ROOT / name).read_text())
    done = subprocess.run(
        [sys.executable, "-c", UNINSTALLED, "--help"],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"error: claude_tool_evaluator/ is not beside {tmp_path / 'evaluator.py'}: copy it too, "
        "or install (pip install -e .)"
    ]


def calls_of(path: Path) -> set[str]:
    """Every `module.function(...)` the file calls (what strings hold is not code)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if isinstance(node.func.value, ast.Name):
                found.add(f"{node.func.value.id}.{node.func.attr}")
    return found


def test_the_program_never_re_executes_itself():
    """A package gets cached bytecode; the program starts once, in the process it was given."""
    execs = {
        f"{path.relative_to(ROOT)}: {call}"
        for path in [ROOT / "evaluator.py", *rooms()]
        for call in calls_of(path)
        if call.startswith("os.exec")
    }
    assert execs == set()


# ============================================================================ installed
def model(body: dict) -> dict:
    """Asks about profiles once, then answers."""
    done = any(
        isinstance(m.get("content"), list)
        and any(block.get("type") == "tool_result" for block in m["content"])
        for m in body["messages"]
    )
    return (
        reply(text("Profiles builds customer 360 tables."))
        if done
        else reply(tool_use("about_profiles"))
    )


def test_an_installed_copy_runs_from_anywhere(tmp_path: Path, api):
    """`pip install .` (not editable) puts the front door, its rooms and their files (the HTML
    report's page and script) where Python finds them; its `claude-tool-eval` runs a suite from
    a folder that is not the checkout and writes every report. (Into a folder of its own with
    --target: this environment has the dependencies, and its editable install stays behind
    the copy on sys.path.)"""
    target = tmp_path / "installed"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
        + ["--no-index", "--target", str(target), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    work = tmp_path / "work"
    work.mkdir()
    (work / "suite.csv").write_text(
        "test_name,user_prompt,expected_tools\nprofiles,Tell me about Profiles,about_profiles\n"
    )
    api.responder = model
    env = dict(
        os.environ,
        ANTHROPIC_API_KEY=TEST_API_KEY,
        ANTHROPIC_BASE_URL=api.url,
        PYTHONPATH=str(target),
    )
    done = subprocess.run(
        [str(target / "bin" / "claude-tool-eval"), "csv", "suite.csv"]
        + ["--server-module", str(EXAMPLE_SERVER), "-o", "out.json", "--html", "out.html"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import claude_tool_evaluator, evaluator; "
            "print(claude_tool_evaluator.__file__, evaluator.__file__)",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert all(Path(p).is_relative_to(target) for p in where), where  # the copy, not the checkout
    assert json.loads((work / "out.json").read_text())["summary"]["passed"] == 1
    # the programs it starts are the copy's package data: a backreference (RE2 cannot take it)
    # goes to the pattern worker; a command starts through the die-with-parent trampoline
    programs = subprocess.run(
        [
            sys.executable,
            "-c",
            "import subprocess; "
            "from claude_tool_evaluator.patterns import untrusted_search; "
            "from claude_tool_evaluator.hub.processes import dying_with_parent; "
            "command, args = dying_with_parent('echo', ['started'], None, None); "
            "done = subprocess.run([command, *args], capture_output=True, text=True); "
            "print(untrusted_search(r'(a)\\1', 'xaay'), args[2], done.stdout.strip())",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert programs.stdout.split()[::2] == ["True", "started"], programs.stdout + programs.stderr
    assert Path(programs.stdout.split()[1]).is_relative_to(target)
    page = (work / "out.html").read_text()
    assert "renderBlock" in page and "Content-Security-Policy" in page  # report.js, report.html
    # one version: what pip records (pip show) is what --version prints
    [metadata] = target.glob("claude_tool_evaluator-*.dist-info/METADATA")
    recorded = next(
        line.split(":", 1)[1].strip()
        for line in metadata.read_text().splitlines()
        if line.startswith("Version:")
    )
    printed = subprocess.run(
        [str(target / "bin" / "claude-tool-eval"), "--version"],
        env=env,
        capture_output=True,
        text=True,
    ).stdout
    assert recorded == package.__version__ and printed.split()[-1] == recorded, printed
