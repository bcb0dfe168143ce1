"""A user's environment, not the tests': the README's first command alone (`python3 -m venv .venv
&& . .venv/bin/activate && pip install -e .`, verbatim, in a fresh copy of the repository), then
the README's main jobs in it, each with `--cache` (the path that once needed an undeclared
`httpx`): a CSV suite, a skill trigger run and a plugin run through the real Claude Code, against
the scripted server that plays the README's models. Every product module must import there too.

The install is slow (minutes of pip resolving against the index), so pip is pointed at a local
folder of wheels (PIP_NO_INDEX, PIP_FIND_LINKS): the wheels of [project.dependencies] and of the
build backend, made once per machine and Python by `pip wheel` (which resolves them as the
index would) and kept under ~/.cache, keyed by the dependencies' text. A changed declaration
makes a new folder; the command that runs is the README's, unchanged."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import CLAUDE, ROOT, TEST_API_KEY
from fake_anthropic import ScriptedAnthropic
from test_readme import INSTALL_PREFIX, SKILL_COMMAND, fresh_copy, responder

pytestmark = [
    pytest.mark.xdist_group("fresh-install"),
    pytest.mark.skipif(CLAUDE is None, reason="needs the Claude Code CLI: run `npm install`"),
]

INSTALL_TIMEOUT = 1200  # a cold wheel folder: every dependency downloaded and built once
JOB_TIMEOUT = 600
WHEELS_HOME = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def base_wheels() -> Path:
    """The folder of wheels of the base install's dependencies (made on first use)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    wanted = [*project["build-system"]["requires"], *project["project"]["dependencies"]]
    key = hashlib.sha256(f"{sys.version_info[:2]}\n{wanted}".encode()).hexdigest()[:16]
    folder = WHEELS_HOME / "claude-tool-evaluator" / f"base-wheels-{key}"
    if not (folder / ".complete").exists():
        folder.mkdir(parents=True, exist_ok=True)
        made = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--wheel-dir", str(folder), *wanted],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
        )
        if made.returncode != 0:
            if os.environ.get("CI"):
                raise AssertionError(made.stderr[-3000:])
            pytest.skip(f"could not fetch the base install's wheels: {made.stderr[-500:]}")
        (folder / ".complete").write_text("")
    return folder


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A fresh copy with the README's first command run in it, and the environment its jobs run
    in (the fresh .venv first on PATH, a scripted server, a temporary HOME)."""
    base = tmp_path_factory.mktemp("fresh-install")
    folder = fresh_copy(base / "clone")
    (base / "home").mkdir()
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(base / "home"),
        "LANG": "C.UTF-8",
        "COLUMNS": "200",
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(base_wheels()),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    python3 = Path(sys.base_prefix) / "bin" / "python3"
    env["PATH"] = f"{python3.parent}:{env['PATH']}"
    install = INSTALL_PREFIX.removesuffix(" && ")
    done = subprocess.run(
        ["bash", "-c", install],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
    )
    assert done.returncode == 0, f"{install}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    env["PATH"] = f"{folder / '.venv' / 'bin'}:{env['PATH']}"
    for name in ("PIP_NO_INDEX", "PIP_FIND_LINKS"):
        env.pop(name)
    with ScriptedAnthropic(responder=responder) as api:
        env.update(ANTHROPIC_API_KEY=TEST_API_KEY, ANTHROPIC_BASE_URL=api.url)
        yield {"folder": folder, "env": env, "api": api}


def run_in(fresh: dict, command: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", command],
        cwd=fresh["folder"],
        env=fresh["env"],
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT,
    )


def test_the_first_command_installs_only_the_base(fresh):
    """The environment is the user's: no extra's package is there, the README's main jobs'
    modules all import."""
    listed = run_in(fresh, "python -m pip list --format freeze").stdout.lower()
    for extra_only in ("pytest", "deptry", "bfcl-eval", "mcp-server-time"):
        assert f"\n{extra_only}==" not in f"\n{listed}", extra_only
    imported = run_in(
        fresh,
        "python -c 'import importlib, pkgutil, claude_tool_evaluator as p; "
        '[importlib.import_module(m.name) for m in pkgutil.walk_packages(p.__path__, p.__name__ + ".") '
        'if ".programs." not in m.name]; print("imported")\'',
    )
    assert imported.returncode == 0 and "imported" in imported.stdout, imported.stderr[-3000:]


def cache_counts(output: str) -> str:
    return " ".join(re.findall(r"cache[^\n]*", output))


@pytest.mark.parametrize(
    "job",
    [
        "python evaluator.py --csv examples/test_queries.csv -o csv.json --report csv.md",
        SKILL_COMMAND.replace("results.json", "skill.json").replace("report.md", "skill.md")
        + " --runs 1",
        "python evaluator.py plugin examples/plugins/shop --runs 1 --trust-plugin -o plugin.json",
    ],
    ids=["csv", "skill-trigger", "plugin"],
)
def test_a_main_job_runs_with_the_cache_in_the_base_install(fresh, job):
    """Each job twice with --cache: the first fills the folder, the second is answered from it
    (fewer model requests reach the server)."""
    cache = f"--cache cache-{job.split()[2].strip('-').replace('/', '_')}"
    before = len(fresh["api"].message_requests)
    first = run_in(fresh, f"{job} {cache}")
    assert first.returncode in (0, 1), first.stdout[-2000:] + first.stderr[-3000:]
    assert "Traceback" not in first.stderr and "ModuleNotFoundError" not in first.stderr
    sent = len(fresh["api"].message_requests) - before
    second = run_in(fresh, f"{job} {cache}")
    assert second.returncode == first.returncode, second.stdout[-2000:] + second.stderr[-3000:]
    resent = len(fresh["api"].message_requests) - before - sent
    assert sent > 0 and resent < sent, (sent, resent, cache_counts(second.stdout + second.stderr))
