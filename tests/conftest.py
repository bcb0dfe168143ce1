"""Shared fixtures: the scripted Anthropic-compatible server, the example server, a clean env, and
`cli`, the one way a test runs the evaluator (in this process, or as a child process)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
for path in (str(ROOT), str(TESTS)):
    if path not in sys.path:
        sys.path.insert(0, path)

from fake_anthropic import ScriptedAnthropic

import evaluator
from claude_tool_evaluator.claude_code import find_claude_bin

EXAMPLE_SERVER = ROOT / "examples" / "profiles_server.py"
TEST_API_KEY = "sk-ant-test-key-0123456789"


def locate_claude() -> str | None:
    """The real Claude Code CLI: $CLAUDE_BIN, else what `npm install` put in node_modules or PATH."""
    try:
        return find_claude_bin(os.environ.get("CLAUDE_BIN"))
    except evaluator.InputError:
        return None


CLAUDE = locate_claude()
if CLAUDE is None and os.environ.get("CI"):
    raise RuntimeError(
        "the Claude Code CLI is required in CI: run `npm install` at the repository root"
    )
needs_claude = pytest.mark.skipif(
    CLAUDE is None,
    reason="the Claude Code CLI (claude) is not installed: "
    "run `npm install` at the repository root",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`--dist loadgroup` (pyproject's addopts): the tests marked `xdist_group(NAME)` run on one
    worker, in order. pytest-xdist tags their ids for its scheduler by assigning `_nodeid`, which
    pytest 9 no longer reads (the id is `_id`): we tag them here so the README's commands run once
    on one worker, instead of once on every worker that draws one of them."""
    if not config.getoption("loadgroup", False):
        return
    for item in items:
        mark = item.get_closest_marker("xdist_group")
        if mark is not None and "@" not in item.nodeid:
            group = mark.args[0] if mark.args else mark.kwargs.get("name", "default")
            item._id = f"{item.nodeid}@{group}"  # type: ignore[attr-defined]


# ============================================================================ what a test costs
# Opt-in (TEST_CPU_LOG=FILE): one JSON line per test with the CPU seconds it took, this process's
# and its reaped children's (setup, call and teardown: a module fixture's run is charged to the
# test that built it), and the processes it started here, by kind. `python tests/cpu_table.py
# FILE` sums them by file. CPU, not wall time: the machine may be shared.
CPU_LOG = os.environ.get("TEST_CPU_LOG")
STARTED: dict[str, int] = {}


def process_kind(argv: Any) -> str:
    words = [str(word) for word in argv] if isinstance(argv, (list, tuple)) else [str(argv)]
    text = " ".join(words)
    if any(Path(word).name == "claude" for word in words[:2]) or "claude-code" in text:
        return "claude"
    if "evaluator.py" in text or Path(words[0]).name == "claude-tool-evaluator":
        return "evaluator"
    if "server" in text or "mcp_server" in text:
        return "server"
    return "other"


if CPU_LOG:
    import json
    import resource

    _execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def counted_execute_child(self: subprocess.Popen, args: Any, *rest: Any) -> Any:
        kind = process_kind(args)
        STARTED[kind] = STARTED.get(kind, 0) + 1
        return _execute_child(self, args, *rest)

    subprocess.Popen._execute_child = counted_execute_child  # type: ignore[attr-defined]

    def cpu_seconds() -> tuple[float, float]:
        own = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        STARTED.clear()
        own, children = cpu_seconds()
        yield
        own_after, children_after = cpu_seconds()
        line = {
            "test": item.nodeid,
            "cpu": round(own_after - own + children_after - children, 3),
            "own": round(own_after - own, 3),
            "children": round(children_after - children, 3),
            "started": dict(STARTED),
        }
        with open(CPU_LOG, "a", encoding="utf-8") as log:
            log.write(json.dumps(line) + "\n")


# What GitHub Actions sets in a step: with it, the evaluator annotates, appends a step summary and
# sets outputs. The tests run as if outside GitHub Actions (their CI may be inside it); the tests
# of those sinks (tests/test_github_action.py) set each one themselves.
GITHUB_STEP_VARIABLES = (
    "GITHUB_ACTIONS",
    "GITHUB_STEP_SUMMARY",
    "GITHUB_OUTPUT",
    "GITHUB_EVENT_PATH",
    "GITHUB_EVENT_NAME",
    "GITHUB_WORKSPACE",
    "GITHUB_SERVER_URL",
    "GITHUB_REPOSITORY",
    "GITHUB_RUN_ID",
)


@pytest.fixture(autouse=True, scope="session")
def outside_github_actions():
    with pytest.MonkeyPatch.context() as patch:
        for name in GITHUB_STEP_VARIABLES:
            patch.delenv(name, raising=False)
        yield


def default_interrupts(when: str, nodeid: str) -> None:
    """Ctrl-C reaches every process a test starts. A test run started as a background job (`pytest
    &` in a script) has SIGINT ignored, its workers inherit that, and so would every process they
    start (Python leaves an ignored SIGINT ignored): the tests that press Ctrl-C would see it do
    nothing. A worker found so is put right, and $TMPDIR/sigint-left-by.txt says where."""
    handler = signal.getsignal(signal.SIGINT)
    blocked = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    if handler is not signal.default_int_handler or blocked:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
        with open(Path(tempfile.gettempdir()) / "sigint-left-by.txt", "a") as record:
            record.write(f"{when} {nodeid}: handler {handler!r}, blocked {blocked}\n")


@pytest.fixture(autouse=True)
def interrupts_as_they_should_be(request: pytest.FixtureRequest):
    default_interrupts("before", request.node.nodeid)
    yield
    default_interrupts("after", request.node.nodeid)


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch):
    """A scripted Anthropic API on 127.0.0.1; the environment points the SDK at it."""
    with ScriptedAnthropic() as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_API_KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        yield server


@pytest.fixture
def no_api_key(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)


def example_server_command() -> str:
    return f"{sys.executable} {EXAMPLE_SERVER}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen | None = None, timeout: float = 30) -> None:
    """Until something listens on 127.0.0.1:port; a server process that exits first is an error
    quoting its stderr (when it was piped)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if process is not None and process.poll() is not None:
                stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
                raise RuntimeError(
                    f"the server exited before listening on port {port}: {stderr}"
                ) from None
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


@pytest.fixture(scope="session")
def example_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """examples/profiles_server.py over streamable HTTP, one for the whole session (one per xdist
    worker), for the tests whose subject is not how a server is started, stopped or spoken to over
    stdio: its URL (`--server-url`, or an mcpServers entry `{"type": "http", "url": ...}`). Its
    one stateful tool, save_note, writes to the session's own notes database."""
    folder = tmp_path_factory.mktemp("example-server")
    port = free_port()
    with open(folder / "stderr.txt", "wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(EXAMPLE_SERVER), "--http", "--port", str(port)],
            env={**os.environ, "PROFILES_NOTES_DB": str(folder / "notes.sqlite")},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        try:
            wait_for_port(port, process, timeout=60)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}: {(folder / 'stderr.txt').read_text()}") from None
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, example_server_url: str) -> Iterator[Any]:
    """The mode × option walk's lab (mode_lab.py), one per test module that asks for it."""
    from mode_lab import open_lab  # the walk's bench: only its files load it

    yield from open_lab(tmp_path_factory, example_server_url)


def suite(path: Path, names: list[str], expected: str = "") -> Path:
    """A CSV suite with one case per name, each expecting `expected` (a tool, or none)."""
    path.write_text(
        "test_name,user_prompt,expected_tools\n"
        + "".join(f"{n},prompt {n},{expected}\n" for n in names)
    )
    return path


def first_prompt(body: dict) -> str:
    return body["messages"][0]["content"]


# ============================================================================ running the evaluator
# One policy for every test that runs the evaluator: a run gives its exit code, stdout and stderr
# (`Ran`); an exception the CLI did not turn into an exit code is raised in the test as itself
# (the test fails naming it, with its traceback), and a traceback printed on either stream fails
# the test too. A test that means to see one (a server's crash quoted back) says
# `traceback_ok=True`.
EVALUATOR = ROOT / "evaluator.py"
TRACEBACK = "Traceback"


@dataclass(frozen=True)
class Ran:
    """What one evaluator command did: its exit code, what it wrote to stdout and to stderr, and
    `output`, both as the user saw them (in the order written, for a run in this process).
    Unpacks, and indexes, as `code, stdout, stderr`."""

    exit_code: int
    stdout: str
    stderr: str
    output: str

    def __iter__(self) -> Iterator[Any]:
        return iter((self.exit_code, self.stdout, self.stderr))

    def __getitem__(self, index: int | slice) -> Any:
        return (self.exit_code, self.stdout, self.stderr)[index]


def checked(ran: Ran, args: tuple[Any, ...], traceback_ok: bool) -> Ran:
    if not traceback_ok:
        command = " ".join(map(str, args))
        assert TRACEBACK not in ran.output, f"`{command}` printed a traceback:\n{ran.output}"
    return ran


def invoke(
    *args: Any,
    env: Mapping[str, str | None] | None = None,
    input: str | None = None,
    command: click.Command | None = None,
    traceback_ok: bool = False,
) -> Ran:
    """The evaluator in this process (click's runner), as a user calls it: `command` is another
    build of the CLI when a test made one."""
    result = CliRunner().invoke(
        command or evaluator.main, [str(a) for a in args], env=env, input=input
    )
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    ran = Ran(result.exit_code, result.stdout, result.stderr, result.output)
    return checked(ran, args, traceback_ok)


def spawn(
    *args: Any,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    input: str | None = None,
    timeout: float = 300,
    traceback_ok: bool = False,
    encoding: str | None = None,
    program: list[str] | None = None,
) -> Ran:
    """`python evaluator.py ARGS` as a child process (for what only a process shows: its stdio,
    its environment, its exit); `program` runs another command line the same way (an installed
    entry point). stdin is empty unless `input` is given."""
    done = subprocess.run(
        [*(program or [sys.executable, str(EVALUATOR)]), *map(str, args)],
        env=None if env is None else dict(env),
        cwd=cwd,
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        encoding=encoding,
        errors="strict" if encoding else None,
        timeout=timeout,
    )
    ran = Ran(done.returncode, done.stdout, done.stderr, done.stdout + done.stderr)
    return checked(ran, args, traceback_ok)


def api_env(api: ScriptedAnthropic, **more: str) -> dict[str, str]:
    """The variables that point the evaluator (and Claude Code) at a scripted API."""
    return {"ANTHROPIC_API_KEY": TEST_API_KEY, "ANTHROPIC_BASE_URL": api.url, **more}


class Cli:
    """The `cli` fixture: `cli(*args)` runs the evaluator in this process, `cli.process(*args)` as
    a child. `api=` points the run at a scripted API the test made itself."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._monkeypatch = monkeypatch

    def point_at(self, api: ScriptedAnthropic) -> None:
        for name, value in api_env(api).items():
            self._monkeypatch.setenv(name, value)

    def __call__(self, *args: Any, api: ScriptedAnthropic | None = None, **options: Any) -> Ran:
        if api is not None:
            self.point_at(api)
        return invoke(*args, **options)

    def process(self, *args: Any, **options: Any) -> Ran:
        return spawn(*args, **options)


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Cli:
    return Cli(monkeypatch)


@pytest.fixture(scope="session")
def greeter_side_by_side(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """tests/plugins/greeter run once by `plugin` (every report) and once by `claude plugin eval`
    on one scripted server (tests/plugin_side_by_side.py); skipped without Claude Code."""
    if CLAUDE is None:
        pytest.skip("Claude Code 2.1.332 is not installed (npm ci)")
    from plugin_side_by_side import run_side_by_side

    return run_side_by_side(
        tmp_path_factory.mktemp("greeter-side-by-side"),
        EVALUATOR,
        CLAUDE,
        TEST_API_KEY,
        sys.executable,
    )
