"""The Claude Code CLI itself: finding the binary (--claude-bin, PATH, node_modules), asking its
version, the environment a run may see of ours, and Claude Code's own sandbox (its settings for a
run that may use Bash, what it may read of the user's home, whether it can start here).

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers, loaders, hub, session, batches, engine."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from .. import HERE
from ..errors import InputError, note_if_the_run_goes_ahead
from ..redaction import API_CREDENTIALS
from ..sinks import one_line, tail

__all__ = [
    "allow_read_problem",
    "check_confinement",
    "check_sandbox",
    "confined_command",
    "confinement_hidden",
    "claude_env_base",
    "claude_version",
    "find_claude_bin",
    "node_version_note",
    "read_permission_rules",
    "sandbox_problem",
    "sandbox_settings",
]

_CLAUDE_INSTALL_HINT = (
    "install it with `npm install` in the evaluator's folder (package.json) or "
    "`npm install -g @anthropic-ai/claude-code`, or pass --claude-bin PATH"
)


# What a run may see of our environment: the API credentials and what the network needs.
_CLAUDE_ENV_PASSTHROUGH = (
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
                f"--claude-bin {explicit}: not an executable file", hint=_CLAUDE_INSTALL_HINT
            )
        return str(path)
    for candidate in (
        shutil.which("claude"),
        HERE / "node_modules" / ".bin" / "claude",
        Path.cwd() / "node_modules" / ".bin" / "claude",
    ):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    raise InputError("the Claude Code CLI (claude) was not found", hint=_CLAUDE_INSTALL_HINT)


def claude_env_base(home: Path, credentials: bool = True) -> dict[str, str]:
    env = {
        key: os.environ[key]
        for key in _CLAUDE_ENV_PASSTHROUGH
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


# Node.js and Claude Code: the npm package declares `engines.node` (">=22.0.0" for 2.1.332), but
# since 2.1.2xx its `claude` is a native program that does not run on Node; Node runs its npm
# install's postinstall (`node install.cjs`, which copies that program over a placeholder). On an
# older Node, npm warns EBADENGINE. So an older Node is one note (once a process), not an error:
# the runs say whether Claude Code works, and a --version that fails names Node in its hint.
_NATIVE_MAGIC = (b"\x7fELF", b"MZ", b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"\xca\xfe\xba\xbe")
_node_note_said = False


def _claude_package(binary: str) -> dict | None:
    """The package.json of the npm package that holds this claude (None: not an npm install)."""
    real = Path(binary if os.sep in binary else shutil.which(binary) or binary).resolve()
    for folder in list(real.parents)[:3]:
        try:
            data = json.loads((folder / "package.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and str(data.get("name", "")).endswith("/claude-code"):
            return data
    return None


def _version_numbers(text: str) -> tuple[int, ...]:
    numbers = re.findall(r"\d+", text.split("-")[0])
    return tuple(int(n) for n in numbers[:3])


@functools.lru_cache(maxsize=4)
def node_version_note(binary: str) -> str | None:
    """One line when the Node.js on PATH is older than the one this Claude Code declares (its
    package.json's engines.node, a `>=` bound), saying which was found, which is needed and what
    for; None when it is new enough, when there is no Node here, or no npm package to read."""
    package = _claude_package(binary)
    wanted = str(((package or {}).get("engines") or {}).get("node") or "")
    if not wanted.startswith(">="):
        return None
    node = shutil.which("node")
    if node is None:
        return None
    try:
        found = subprocess.run(
            [node, "--version"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    needed = _version_numbers(wanted[2:])
    if not found or _version_numbers(found) >= needed:
        return None
    try:
        native = Path(binary).resolve().open("rb").read(4).startswith(_NATIVE_MAGIC)
    except OSError:
        native = False
    version = package.get("version", "") if package else ""
    head = f"Node.js {found} is older than the node {wanted} Claude Code {version} declares"
    if native:
        return (
            f"{head}: its claude is a native program and does not run on Node, but its npm "
            "install does (`node install.cjs` puts that program in place); install Node "
            f"{needed[0]} or later before you reinstall or upgrade it"
        )
    return f"{head}, and its claude runs on Node: if its runs fail, install a newer Node"


def _say_node_version_once(binary: str) -> None:
    """node_version_note on stderr, once a process (not once a run)."""
    global _node_note_said
    note = None if _node_note_said else node_version_note(binary)
    if note:
        _node_note_said = True
        note_if_the_run_goes_ahead(f"note: {note}")


def _install_hint(binary: str) -> str:
    """How to install Claude Code, led by the Node.js note when Node is too old for it."""
    note = node_version_note(binary)
    return f"{note}; then {_CLAUDE_INSTALL_HINT}" if note else _CLAUDE_INSTALL_HINT


def claude_version(binary: str) -> str:
    """`claude --version`, so a broken install is one clear line before any money is spent; an
    older Node.js than Claude Code declares is a note (once), and the hint when it fails."""

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
            f"{binary} --version failed: {exc.__class__.__name__}: {exc}",
            hint=_install_hint(binary),
        ) from None
    if done.returncode != 0:
        raise InputError(
            f"{binary} --version exited with {done.returncode}: {tail(done.stderr, 300)}",
            hint=_install_hint(binary),
        )
    _say_node_version_once(binary)
    return done.stdout.strip()


# Claude Code's own sandbox (2.1.197; on Linux bubblewrap and socat) for task runs that may use
# Bash: its commands write only inside the project and the run's temporary folder ("Read-only file
# system" elsewhere, "Invalid cross-device link" for a hard link out), reach no host, never see
# the API credentials, and end with their call (a pid namespace); a command may not ask to run
# outside it (allowUnsandboxedCommands), and a missing bwrap or socat stops claude instead of
# running unconfined. Given with --settings, which wins over any project or user setting of these
# switches (see check_project_settings for the lists a project could add to). What its commands
# may not read (the user's home) is added per run: see sandbox_settings.
_CLAUDE_SANDBOX_SETTINGS = {
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


def _real_homes() -> list[Path]:
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


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _sandbox_path(path: Path | str) -> str:
    """An absolute path as Claude Code's settings name one (`//` + the path: absolute whatever
    the settings file's folder)."""
    return "/" + str(path)


def _read_rules(allow_read: Sequence[str], run_home: Path | None) -> tuple[list[Path], list[Path]]:
    """What Bash in the sandbox may not read (the real homes as a whole: keys, clouds' and
    tools' credentials, keychains, shell history), and what it may read again inside them: the
    run's own HOME (when the temporary folder is in the home) and the --allow-read paths. An
    --allow-read path that holds a home lifts that home's denial. The project and the run's
    TMPDIR are write paths, which Claude Code binds back itself."""
    allowed = [Path(p).resolve() for p in allow_read]
    denied = [h for h in _real_homes() if not any(_within(h, a) for a in allowed)]
    reopened = [*([run_home.resolve()] if run_home is not None else []), *allowed]
    return denied, [p for p in reopened if any(_within(p, d) for d in denied)]


def sandbox_settings(allow_read: Sequence[str] = (), run_home: Path | None = None) -> dict:
    """CLAUDE_SANDBOX_SETTINGS with the reads a run may not make (read_rules): Claude Code lays an
    empty folder over a denied one in the sandbox ("No such file or directory" for `cat
    ~/.ssh/id_rsa`) and binds back what is allowed inside it, read-only."""
    denied, allowed = _read_rules(allow_read, run_home)
    settings = json.loads(json.dumps(_CLAUDE_SANDBOX_SETTINGS))
    filesystem = settings["sandbox"]["filesystem"]
    filesystem["denyRead"] = [_sandbox_path(p) for p in denied]
    if allowed:
        filesystem["allowRead"] = [_sandbox_path(p) for p in allowed]
    return settings


def allow_read_problem(allow_read: Sequence[str]) -> str | None:
    """Why an --allow-read path cannot be given (None: it can): one that holds the runs'
    temporary folder inside a hidden home would be bound back read-only over the run's project."""
    denied, allowed = _read_rules(allow_read, None)
    runs = Path(tempfile.gettempdir()).resolve()
    for path in allowed:
        if _within(runs, path):
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
        rules.append(f"Read({_sandbox_path(path)})")
        if Path(path).is_dir():
            rules.append(f"Read({_sandbox_path(path)}/**)")
    return rules


def _bwrap_probe_problem(command: list[str]) -> str | None:
    """None when the bwrap probe `command` exits 0, else why it could not, in a few words."""
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not run: {exc}"
    if done.returncode != 0:
        return f"bwrap cannot make a sandbox here: {one_line(done.stderr, 200)}"
    return None


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
    return _bwrap_probe_problem(command)


def check_sandbox(path: str | None) -> None:
    """Before a suite whose task runs may use Bash: one line when the sandbox cannot start."""
    problem = sandbox_problem(path)
    if problem:
        raise InputError(
            f"--allow-tools Bash runs in Claude Code's sandbox, which cannot start here: {problem}",
            hint="install bubblewrap and socat (apt-get install bubblewrap socat), or pass "
            "--unconfined to let Bash run as you, outside any sandbox",
        )


# The confinement of a plugin run (beyond Claude Code, which runs a plugin's hooks and MCP servers
# as the user): the whole `claude -p` process in bubblewrap. The system read-only, the user's
# homes and the temporary folder (other runs, other tools' files) replaced by empty read-only
# folders, what the run needs bound back (its own folder writable; Claude Code's install, the
# interpreters on PATH, the --allow-read paths and the plugins read in place, read-only), the
# network shared (the model API may be local or remote).
def _hidden_folders() -> list[Path]:
    """What a confined run does not see: the real homes and the temporary folder."""
    runs = Path(tempfile.gettempdir()).resolve()
    found = sorted({*_real_homes(), *([runs] if runs != Path("/") else [])}, key=lambda p: p.parts)
    return [p for p in found if not any(o != p and _within(p, o) for o in found)]  # outermost


def _install_root(binary: str) -> list[Path]:
    """Claude Code's install as a run needs it: the command's folder, and where it really lives
    (node_modules holds the launcher, its package and the native binary)."""
    binary = binary if os.sep in binary else shutil.which(binary) or binary  # `bash`: PATH's
    real = Path(binary).resolve()
    found = [Path(binary).absolute().parent, real.parent]
    for path in (Path(binary).absolute(), real):
        if "node_modules" in path.parts:
            found.append(Path(*path.parts[: path.parts.index("node_modules") + 1]))
    return found


def _interpreters() -> list[Path]:
    """The interpreters a plugin's commands need (python, node, what PATH holds): this Python's
    prefixes, node's, and every PATH folder."""

    found = [Path(sys.prefix), Path(sys.base_prefix)]
    node = shutil.which("node")
    if node:
        found.append(Path(node).resolve().parent.parent)
    found += [Path(p) for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    return found


def confined_command(
    command: Sequence[str],
    run_root: Path,
    allow_read: Sequence[str] = (),
    read_in_place: Sequence[str] = (),
    writable: Sequence[Path] = (),
) -> list[str]:
    """`command` inside bubblewrap: what a plugin's hooks and servers may see (see above).
    `writable`: the run's other folders, bound writable as its root is (its TMPDIR, when a long
    temporary path moved it to /tmp: RunFolder)."""
    bwrap = shutil.which("bwrap") or "bwrap"
    hidden = _hidden_folders()
    args = [bwrap, "--die-with-parent", "--unshare-pid", "--ro-bind", "/", "/"]
    args += ["--dev", "/dev", "--proc", "/proc"]
    for folder in hidden:
        args += ["--tmpfs", str(folder)]
    wanted = [
        *_install_root(command[0]),
        *_interpreters(),
        *(Path(p) for p in allow_read),
        *(Path(p) for p in read_in_place),
    ]
    for path in dict.fromkeys(p.absolute() for p in wanted):
        if any(_within(path, h) or _within(path.resolve(), h) for h in hidden):
            args += ["--ro-bind-try", str(path), str(path)]
    root = run_root.resolve()
    args += ["--bind", str(root), str(root)]
    for folder in dict.fromkeys(p.resolve() for p in writable):
        if not _within(folder, root):
            args += ["--bind", str(folder), str(folder)]
    for folder in hidden:
        args += ["--remount-ro", str(folder)]
    return [*args, "--", *command]


def confinement_hidden() -> list[Path]:
    """The folders a confined run cannot see (what a hook's failed read of them is reported by)."""
    return _hidden_folders()


@functools.lru_cache(maxsize=2)
def _confinement_problem() -> str | None:
    """None when bubblewrap can confine a run here, else why not, in a few words: bwrap is tried
    once with the namespaces and mounts a confined run uses."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bwrap (bubblewrap) not found on PATH"
    probe = confined_command([shutil.which("true") or "/bin/true"], Path(tempfile.gettempdir()))
    return _bwrap_probe_problem(probe)


def check_confinement(unconfined: bool) -> None:
    """Before a run that would start a plugin's code: one line when it cannot be confined."""
    problem = None if unconfined else _confinement_problem()
    if problem:
        raise InputError(
            f"a plugin's hooks and MCP servers run confined in bubblewrap, which cannot start "
            f"here: {problem}",
            hint="install bubblewrap (apt-get install bubblewrap), or pass --unconfined to let "
            "them run as you, with your home in reach",
        )
