"""A user's environment, not the tests': the README's first command alone (`python3 -m venv .venv
&& . .venv/bin/activate && pip install -e .`, verbatim, in a fresh copy of the repository), then
the README's main jobs in it, each with `--cache` (the path that once needed an undeclared
`httpx`): a CSV suite, a skill trigger run and a plugin run through the real Claude Code, against
the scripted server that plays the README's models. Every product module must import there too.

Against the index the install is slow (minutes of pip downloading and resolving; 17 minutes once
in CI), so pip is pointed at a local folder of wheels (PIP_NO_INDEX, PIP_FIND_LINKS) holding the
closure of [project.dependencies] and of the build backend and nothing else: each distribution
of that closure packed back into a wheel from this environment, where the test extra's install
put it (its files as RECORD lists them, its own WHEEL tags; seconds, no network). pip still
resolves the README's `pip install -e .` from the declared dependencies alone, so an import the
base install does not declare still fails there. Only a distribution this environment cannot
repack (absent, or not installed from a wheel) is fetched by `pip wheel`. The command that runs
is the README's, unchanged."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from conftest import CLAUDE, ROOT, TEST_API_KEY
from fake_anthropic import ScriptedAnthropic
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from test_readme import INSTALL_PREFIX, SKILL_COMMAND, fresh_copy, responder

pytestmark = [
    pytest.mark.xdist_group("fresh-install"),
    pytest.mark.skipif(CLAUDE is None, reason="needs the Claude Code CLI: run `npm install`"),
]

INSTALL_TIMEOUT = 1200  # a distribution `pip wheel` must fetch: downloaded and built once
JOB_TIMEOUT = 600
BIN = "../../../bin/"  # a console script's place in RECORD: pip writes it again at install


def base_requirements() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return [*project["build-system"]["requires"], *project["project"]["dependencies"]]


def closure(wanted: list[str]) -> tuple[dict[str, metadata.Distribution], list[str]]:
    """The installed distributions the requirements need, transitively, each with the extras
    asked of it (markers evaluated here), and the requirements not installed here or whose
    installed version misses the specifier."""
    found: dict[str, metadata.Distribution] = {}
    missing: list[str] = []
    pending = [Requirement(text) for text in wanted]
    done: set[tuple[str, frozenset[str]]] = set()
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if (name, frozenset(requirement.extras)) in done:
            continue
        done.add((name, frozenset(requirement.extras)))
        try:
            distribution = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            missing.append(str(requirement))
            continue
        if not requirement.specifier.contains(distribution.version, prereleases=True):
            missing.append(str(requirement))
            continue
        found[name] = distribution
        for text in distribution.requires or []:
            needed = Requirement(text)
            extras = [""] + sorted(requirement.extras)
            if needed.marker is None or any(needed.marker.evaluate({"extra": e}) for e in extras):
                pending.append(needed)
    return found, missing


def wheel_name(distribution: metadata.Distribution) -> str | None:
    """NAME-VERSION-PY-ABI-PLATFORM.whl from the WHEEL file its install kept (None: not a wheel's)."""
    tags = [
        line.split(":", 1)[1].strip().split("-")
        for line in (distribution.read_text("WHEEL") or "").splitlines()
        if line.startswith("Tag:")
    ]
    if not tags:
        return None
    parts = [".".join(dict.fromkeys(tag[i] for tag in tags)) for i in range(3)]
    name = re.sub(r"[-_.]+", "_", distribution.metadata["Name"]).lower()
    return f"{name}-{distribution.version}-{'-'.join(parts)}.whl"


def record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def repack(distribution: metadata.Distribution, folder: Path) -> bool:
    """The installed distribution as the wheel it came from, in `folder` (False: it cannot be:
    not installed from a wheel, or files outside site-packages other than console scripts)."""
    name = wheel_name(distribution)
    files = distribution.files
    if name is None or files is None:
        return False
    if any(str(f).startswith("..") and not str(f).startswith(BIN) for f in files):
        return False
    dist_info = next(str(f).split("/")[0] for f in files if str(f).endswith(".dist-info/RECORD"))
    dropped = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}
    record = []
    with zipfile.ZipFile(folder / name, "w", zipfile.ZIP_STORED) as wheel:
        for file in files:
            path = str(file)
            if path.startswith("..") or "__pycache__" in path:
                continue
            if path.startswith(dist_info + "/") and path.split("/", 1)[1] in dropped:
                continue
            data = Path(file.locate()).read_bytes()
            wheel.writestr(path, data)
            record.append(record_line(path, data))
        wheel.writestr(f"{dist_info}/RECORD", "\n".join([*record, f"{dist_info}/RECORD,,"]) + "\n")
    return True


def base_wheels(folder: Path) -> Path:
    """A folder of wheels holding exactly the base install's closure: repacked from this
    environment; `pip wheel` fetches what cannot be (into the same folder, with its own
    dependencies, as the index resolves them)."""
    folder.mkdir(parents=True, exist_ok=True)
    found, missing = closure(base_requirements())
    for name, distribution in found.items():
        if not repack(distribution, folder):
            missing.append(f"{name}=={distribution.version}")
    if missing:
        made = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--wheel-dir", str(folder), *missing],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
        )
        if made.returncode != 0:
            if os.environ.get("CI"):
                raise AssertionError(made.stderr[-3000:])
            pytest.skip(f"could not fetch the base install's wheels: {made.stderr[-500:]}")
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
        "PIP_FIND_LINKS": str(base_wheels(base / "wheels")),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        # no byte-compiling of every installed module (scipy's thousands): Python compiles what
        # the jobs import when they import it
        "PIP_COMPILE": "0",
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
    for name in ("PIP_NO_INDEX", "PIP_FIND_LINKS", "PIP_COMPILE"):
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
    # the wheels it installed from are the base's closure, not this environment: a package
    # installed here (the test extra's pexpect, a neighbour's certifi) is not there
    for undeclared in ("pexpect", "certifi"):
        tried = run_in(fresh, f"python -c 'import {undeclared}'")
        assert tried.returncode != 0 and "ModuleNotFoundError" in tried.stderr, undeclared


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
