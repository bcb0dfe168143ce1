"""A run's temporary folder and what it leaves: the folder (its project, HOME and TMPDIR; stale
ones of a dead evaluator removed), the project prepared (skills installed, a task's input files
copied), the files it created or changed read within a budget and kept (masked copies), and the
watch on writes outside it (OutsideWriteGuard).

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers, loaders, hub, session, batches, engine; claude_code.skills,
claude_code.stream, claude_code.binary."""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import test_constants as C

from ..files import write_json_atomic
from ..loaders.skills import RESERVED_PROJECT_NAMES
from ..redaction import Redactor
from ..results_schema.document import ArtifactRecord, dump_record
from ..stopping import STOPPING
from .skills import install_distractors, install_skills

__all__ = [
    "OutsideWriteGuard",
    "RUN_FOLDER_PREFIX",
    "RunFolder",
    "TaskSetup",
    "collect_artifacts",
    "file_sha256",
    "keep_run_files",
    "prepare_project",
    "process_start_time",
    "project_files",
    "remove_stale_run_folders",
]

if TYPE_CHECKING:
    from ..run_types import Distractor, SkillInfo


# ---------------------------------------------------------------------------- a run's temporary folder, and what it leaves
RUN_FOLDER_PREFIX = "skill-eval-"


_RUN_OWNER_FILE = (
    "owner"  # in every run folder: the pid and start time of the evaluator that made it
)


def process_start_time(pid: int) -> str | None:
    """When a process started (clock ticks after boot, /proc/PID/stat): a pid reused by another
    process has another start time."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _owner_alive(line: str) -> bool:
    pid, _, started = line.strip().partition(" ")
    if not pid.isdigit():
        return True  # not ours to judge
    now = process_start_time(int(pid))
    return now is not None and (not started or now == started)


def _make_run_folder(parent: str | Path | None = None) -> Path:
    """A new temporary folder (mode 0700) named skill-eval-*, holding its owner file."""
    root = Path(tempfile.mkdtemp(prefix=RUN_FOLDER_PREFIX, dir=parent))
    owner = f"{os.getpid()} {process_start_time(os.getpid()) or ''}\n"
    (root / _RUN_OWNER_FILE).write_text(owner, encoding="ascii")
    return root


def remove_stale_run_folders() -> list[Path]:
    """The skill-eval-* folders of runs whose evaluator died (`kill -9` leaves them, with Claude
    Code's session files and the prompts): removed when the next evaluation starts. A folder
    whose owner is alive, or that names none, is left alone."""
    removed = []
    for base in dict.fromkeys([tempfile.gettempdir(), "/tmp"]):
        try:
            folders = [p for p in Path(base).glob(RUN_FOLDER_PREFIX + "*") if p.is_dir()]
        except OSError:
            continue
        for folder in folders:
            try:
                owner = (folder / _RUN_OWNER_FILE).read_text(encoding="ascii", errors="replace")
            except OSError:
                continue
            if not _owner_alive(owner):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
    return removed


@dataclass
class RunFolder:
    """One run's temporary folder: its project (where `claude` starts), its HOME, and its TMPDIR,
    which is kept short (Claude Code's sandbox makes its sockets there, and a socket path holds at
    most 107 bytes: a deep TMPDIR gets one of its own in /tmp). Removed after the run."""

    root: Path
    tmp: Path

    @classmethod
    def make(cls) -> RunFolder:
        root = _make_run_folder()
        try:
            for name in ("project", "home", "tmp"):
                (root / name).mkdir()
            tmp = root / "tmp"
            if len(str(tmp)) > C.CLAUDE_TMPDIR_MAX_CHARS and Path("/tmp").is_dir():
                tmp = _make_run_folder("/tmp")
        except OSError:
            shutil.rmtree(root, ignore_errors=True)
            raise
        return cls(root, tmp)

    @property
    def project(self) -> Path:
        return self.root / "project"

    def remove(self) -> None:
        for folder in (self.tmp, self.root):
            shutil.rmtree(folder, ignore_errors=True)


class _ReadBudget:
    """What reading a run's files may cost in one phase (the input files it starts with, what it
    leaves): a sparse file is never read, nor a file over C.ARTIFACT_MAX_HASH_BYTES, nor past
    C.ARTIFACT_MAX_READ_BYTES in all or C.ARTIFACT_READ_SECONDS; nor once the evaluator is
    stopping (a stop signal, or `stop`). Such a file is listed by its size and why."""

    def __init__(self) -> None:
        self.left = C.ARTIFACT_MAX_READ_BYTES
        self.deadline = time.monotonic() + C.ARTIFACT_READ_SECONDS
        self.stop = threading.Event()

    def spent(self) -> str | None:
        """Why nothing more is read now (None: reading goes on)."""
        if self.stop.is_set() or STOPPING.is_set():
            return "the evaluator was stopping"
        if time.monotonic() > self.deadline:
            return f"the phase's time budget is spent: {C.ARTIFACT_READ_SECONDS:g} s"
        return None

    def refusal(self, status: os.stat_result) -> str | None:
        """Why a file is not read at all (None: it is)."""
        size, on_disk = status.st_size, status.st_blocks * 512
        if size >= C.ARTIFACT_SPARSE_MIN_BYTES and on_disk * 2 < size:
            return f"sparse: {size:,} bytes, {on_disk:,} of them on disk"
        if size > C.ARTIFACT_MAX_HASH_BYTES:
            return f"over the per-file limit: {size:,} bytes > {C.ARTIFACT_MAX_HASH_BYTES:,}"
        if size > self.left:
            return (
                f"over the run's read budget: {size:,} bytes > {max(self.left, 0):,} left of "
                f"{C.ARTIFACT_MAX_READ_BYTES:,}"
            )
        return self.spent()


@dataclass
class _FileRead:
    """A file of a run's project as read within a budget: its stat, and its sha256 and bytes (to
    copy: up to C.ARTIFACT_MAX_COPY_BYTES), or why it was not read."""

    size: int
    mtime_ns: int
    sha256: str | None = None
    data: bytes | None = None
    not_read: str | None = None

    def same_as(self, before: _FileRead) -> bool:
        """Unchanged: the same sha256, or (one of them not read) the same size and mtime."""
        if self.sha256 is not None and before.sha256 is not None:
            return self.sha256 == before.sha256
        return (self.size, self.mtime_ns) == (before.size, before.mtime_ns)


def _read_within(path: Path, budget: _ReadBudget, keep: bool = False) -> _FileRead:
    """A regular file read within the budget, never through a link (the evaluator reads what a
    run left, and writes nothing there); its bytes kept with `keep` when small enough to copy."""
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise OSError(f"{path.name} is not a regular file")
        found = _FileRead(status.st_size, status.st_mtime_ns)
        found.not_read = budget.refusal(status)
        if found.not_read:
            return found
        digest = hashlib.sha256()
        kept = bytearray() if keep and status.st_size <= C.ARTIFACT_MAX_COPY_BYTES else None
        while chunk := handle.read(1 << 20):
            budget.left -= len(chunk)
            found.not_read = budget.spent() or (
                "it grew past the run's read budget" if budget.left < 0 else None
            )
            if found.not_read:
                return found
            digest.update(chunk)
            if kept is not None:
                kept += chunk
        found.sha256 = digest.hexdigest()
        found.data = bytes(kept) if kept is not None else None
        return found


def file_sha256(path: Path) -> str:
    import stat

    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path.name} is not a regular file")
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def project_files(project: Path) -> Iterable[tuple[str, Path]]:
    """The regular files of a run's project, by relative path: links are not followed, and
    Claude Code's own `.claude/` folder (the installed skills, its settings) is not the run's work."""
    count = 0
    for folder, dirs, files in os.walk(project, followlinks=False):
        here = Path(folder)
        if here == project:
            dirs[:] = [d for d in dirs if d != ".claude"]
        dirs.sort()
        for name in sorted(files):
            path = here / name
            if path.is_symlink() or not path.is_file():
                continue
            count += 1
            if count > C.ARTIFACT_MAX_FILES:
                return
            yield path.relative_to(project).as_posix(), path


# Where Claude Code's sandbox mounts over a project's protected files: a run killed mid-command
# (a timeout) leaves each as an empty file, which is the sandbox's, not the run's work.
_SANDBOX_MOUNT_POINTS = frozenset(
    {
        ".bash_profile",
        ".bashrc",
        ".gitconfig",
        ".gitmodules",
        ".idea",
        ".mcp.json",
        ".profile",
        ".ripgreprc",
        ".vscode",
        ".zprofile",
        ".zshrc",
    }
)


def _copy_task_files(project: Path, files: Sequence[Path]) -> dict[str, _FileRead]:
    """An eval's input files, each by its name into the project's top folder (a folder with its
    contents; links copied as links); returns every project file as read (its sha256, within a
    phase's budget: else its size and mtime), to tell what the run changed."""
    for source in files:
        if source.name in RESERVED_PROJECT_NAMES:
            raise OSError(f"an input file may not be named {source.name}")
        target = project / source.name
        if source.is_dir():
            shutil.copytree(source, target, symlinks=True)
        else:
            shutil.copy2(source, target, follow_symlinks=False)
    budget = _ReadBudget()
    return {relative: _read_within(path, budget) for relative, path in project_files(project)}


def _check_project_settings(project: Path) -> None:
    """Right before claude starts: no settings file but ours in the project. Claude Code merges a
    project's `permissions.allow` and `sandbox` lists into those of --settings."""
    for name in ("settings.json", "settings.local.json"):
        if os.path.lexists(project / ".claude" / name):
            raise OSError(f"the project holds .claude/{name}, which would add to its settings")


def prepare_project(
    project: Path,
    skills: Sequence[SkillInfo],
    task: TaskSetup | None,
    home: Path | None = None,
    distractors: Sequence[Distractor] = (),
) -> dict[str, _FileRead]:
    """The skills installed (and the crowd beside them, --distractors, which need the run's
    HOME), a task's input files copied; every file it starts with, as read (copy_task_files)."""
    install_skills(project, skills)
    if distractors:
        assert home is not None, "distractor skills are installed beside the run's HOME"
        install_distractors(project, home, distractors)
    before = _copy_task_files(project, task.files) if task else {}
    _check_project_settings(project)
    return before


def _artifact_text(data: bytes) -> str | None:
    """A small UTF-8 text file's content (what the judge reads inline); None for anything else."""
    if len(data) > C.ARTIFACT_TEXT_BYTES or b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _artifact_record(
    relative: str,
    path: Path,
    before: dict[str, _FileRead],
    redactor: Redactor,
    budget: _ReadBudget,
) -> tuple[ArtifactRecord, bytes | None] | None:
    """A file the run created or changed, as recorded (its copy's size and sha256: secrets in it
    masked), with the bytes to keep (None: too large to copy, or not read within the budget: then
    it is listed by its size and why); None when the run did not make it (unchanged, or an empty
    mount point the sandbox left)."""
    if path.lstat().st_size == 0 and relative in _SANDBOX_MOUNT_POINTS and relative not in before:
        return None
    found = _read_within(path, budget, keep=True)
    if relative in before and found.same_as(before[relative]):
        return None
    status = "changed" if relative in before else "new"
    if found.not_read:
        return ArtifactRecord(
            path=relative, size=found.size, status=status, not_read=found.not_read
        ), None
    data = found.data
    kept = redactor.masked_bytes(data) if data is not None else None
    record = ArtifactRecord(
        path=relative,
        size=len(kept) if kept is not None else found.size,
        sha256=hashlib.sha256(kept).hexdigest() if kept is not None else found.sha256,
        status=status,
        text=_artifact_text(data) if data is not None else None,  # the judge reads it as it was
        redacted=kept != data,
    )
    return record, kept


def collect_artifacts(
    project: Path,
    before: dict[str, _FileRead],
    target: Path | None,
    redactor: Redactor | None = None,
    budget: _ReadBudget | None = None,
) -> list[ArtifactRecord]:
    """Every file the run created or changed in its project; with a target folder, each copied
    there (up to the size limit) and listed in its manifest.json (path, size, sha256). A secret
    the run wrote into a file (`env > out.txt`) is masked in the copy, like in every other output;
    the manifest then describes the copy (`redacted`). The project itself is only read, never
    through a link: a hard link to a file of the user's is read like any file, and left alone.
    Files are read within a budget (ReadBudget): a sparse or huge file, or one past the phase's
    bytes or time, is listed by its size and why (`not_read`), neither hashed nor copied."""
    redactor = redactor or Redactor()
    budget = budget or _ReadBudget()
    records = []
    if target is not None:
        shutil.rmtree(target, ignore_errors=True)  # this eval, configuration and run's own folder
        target.mkdir(parents=True, exist_ok=True)
    for relative, path in project_files(project):
        found = _artifact_record(relative, path, before, redactor, budget)
        if found is None:
            continue
        record, kept = found
        if target is not None and kept is not None:
            copy = target / relative
            copy.parent.mkdir(parents=True, exist_ok=True)
            with open(copy, "xb") as handle:  # a new file in our own fresh folder
                handle.write(kept)
            record.copied = True
        records.append(record)
    if target is not None:
        write_json_atomic(target / "manifest.json", {"files": [dump_record(r) for r in records]})
    return records


@dataclass
class TaskSetup:
    """What a task run adds to a `claude -p` run: its input files, where what it leaves is copied
    (--artifacts DIR/<eval>/<config>/run-<n>/, with manifest.json), and, for a run that is not
    confined (--unconfined Bash), the outside-write check taken around it (a guard made just
    before it starts)."""

    files: list[Path] = field(default_factory=list)
    artifacts: Path | None = None
    guard: Callable[[], OutsideWriteGuard] | None = None


async def keep_run_files(
    project: Path, before: dict[str, _FileRead], target: Path | None
) -> list[ArtifactRecord]:
    """collect_artifacts in a thread, so the loop (the other runs, the stop signals) goes on while
    files are read. Cancelled (a stop signal), the reading is told to stop and awaited (it ends
    within a chunk), so the run's folder is removed after it, never under it."""
    budget = _ReadBudget()
    work = asyncio.ensure_future(
        asyncio.to_thread(collect_artifacts, project, before, target, Redactor.for_run(), budget)
    )
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        budget.stop.set()
        await asyncio.wait([work])
        raise


# Where a command run as the user (--unconfined Bash) writes unasked, besides what is always
# watched: folders of the real home that hold keys, credentials and programs on PATH.
_UNCONFINED_WATCHED_TREES = (".ssh", ".aws", ".gnupg", ".docker", ".kube", ".local/bin")


class OutsideWriteGuard:
    """Checks that runs wrote nothing outside their temporary projects: the skills' own folders,
    the real HOME's Claude Code folders and settings (skills, agents, commands, settings,
    CLAUDE.md), and the top level of the working folder are fingerprinted before and compared
    after; when runs' Bash runs as the user (`unconfined`), also the top level of the real HOME
    (its dotfiles: .bashrc, .profile, .netrc, .gitconfig) and of ~/.config, the folders of
    UNCONFINED_WATCHED_TREES, and the top level of the temporary folder (the runs' own folders
    there excepted). The run's own outputs and the --ignore-path globs are not watched."""

    def __init__(
        self,
        skills: Sequence[SkillInfo],
        ignore: Sequence[str | Path] = (),
        ignore_globs: Sequence[str] = (),
        unconfined: bool = False,
    ) -> None:
        home = Path.home() / ".claude"
        # a plugin's agents: its whole folder, where its hooks' commands could write
        self.trees = list(dict.fromkeys(s.plugin or s.folder for s in skills)) + [
            home / "skills",
            home / "agents",
            home / "commands",
        ]
        self.files = [home / "settings.json", home / "settings.local.json", home / "CLAUDE.md"]
        self.top_level = [Path.cwd()]
        if unconfined:
            self.trees += [Path.home() / name for name in _UNCONFINED_WATCHED_TREES]
            self.top_level += [Path.home(), Path.home() / ".config", Path(tempfile.gettempdir())]
        self.top_level = list(dict.fromkeys(self.top_level))
        self.ignore = {str(Path(p).resolve()) for p in ignore}
        self.ignore_globs = tuple(ignore_globs)
        self.before = self.fingerprint()

    @property
    def watched(self) -> list[str]:
        return [str(p) for p in self.trees + self.files + self.top_level]

    def ignored(self, path: Path) -> bool:
        """The run's own outputs, journal, and the temporary files they are written through, and
        what --ignore-path names (a glob matched against the name, the path relative to the
        working folder, and the full path)."""
        resolved = str(path.resolve())
        if (
            resolved in self.ignore
            or self.matches_glob(path)
            or any(o.startswith(resolved + os.sep) for o in self.ignore)
        ):
            return True  # an output, a folder an output is written into, or --ignore-path
        name = path.name
        return (
            name.startswith(".")
            and name.endswith(".tmp")
            and any(
                resolved.startswith(str(Path(p).parent / ("." + Path(p).name + ".")))
                for p in self.ignore
            )
        )

    def matches_glob(self, path: Path) -> bool:
        if not self.ignore_globs:
            return False
        names = {path.name, str(path), os.path.relpath(path, self.top_level[0])}
        return any(fnmatch.fnmatch(n, g) for n in names for g in self.ignore_globs)

    def fingerprint(self) -> dict[str, tuple[int, int]]:
        seen: dict[str, tuple[int, int]] = {}

        def note(path: Path) -> None:
            if self.ignored(path):
                return
            try:
                stat = path.lstat()
                seen[str(path)] = (stat.st_mtime_ns, stat.st_size)
            except OSError:
                pass

        for tree in self.trees:
            if tree.is_dir():
                for index, path in enumerate(tree.rglob("*")):
                    if index > C.WRITE_GUARD_MAX_ENTRIES:
                        break
                    note(path)
        for path in self.files:
            note(path)
        for folder in self.top_level:
            if folder.is_dir():
                for path in folder.iterdir():
                    if not path.name.startswith(RUN_FOLDER_PREFIX):  # a run's own folder
                        note(path)
        return seen

    def changes(self) -> list[str]:
        after = self.fingerprint()
        changed = [p for p in after if self.before.get(p) != after[p]]
        removed = [p for p in self.before if p not in after]
        return sorted(changed) + [f"{p} (removed)" for p in sorted(removed)]
