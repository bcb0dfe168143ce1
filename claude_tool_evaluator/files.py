"""Files read checked (size, depth, line numbers) and written atomically; records spooled to disk
and streamed back; the files kept beside a results file (journal, results lines, lock).

May import: errors, stopping, sinks."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import BaseModel

import contextlib
import hashlib
import itertools
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import test_constants as C

from .errors import InputError, OutputError
from .sinks import json_text
from .stopping import pending_outputs

__all__ = [
    "create_output_file",
    "JsonStream",
    "MappedRecords",
    "OUTPUT_FILE_MODE",
    "SpooledRecords",
    "batch_ledger_path",
    "check_json_depth",
    "check_writable_folder",
    "dump_json",
    "dump_streamed",
    "file_key",
    "folder_digest",
    "folder_files",
    "journal_path",
    "json_lines",
    "line_at",
    "lock_path",
    "materialized",
    "open_output_file",
    "output_error",
    "parse_json_text",
    "read_text_file",
    "resolves_inside",
    "results_lines_path",
    "spooled_into",
    "write_atomic",
    "write_json_atomic",
    "write_text_atomic",
]


def _read_at_most(handle: Any, limit: int) -> bytes:
    """Up to `limit` bytes, a megabyte at a time: read(limit) would reserve all of them first
    (10 MB for every input file, a transient the run's memory peak keeps)."""
    chunks, total = [], 0
    while total < limit and (chunk := handle.read(min(1 << 20, limit - total))):
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def resolves_inside(path: str | Path, root: str | Path) -> bool:
    """Whether `path`, every link on the way followed, is `root` or lies inside it (`root`'s
    own links followed too): the one test of "inside" for a file someone else wrote (a suite
    file, an eval folder a manifest names) and for every file a verb writes into its folder.
    A loop of links is outside."""
    try:
        return Path(path).resolve().is_relative_to(Path(root).resolve())
    except (OSError, RuntimeError):
        return False


def read_text_file(path: str | Path, what: str) -> str:
    """A UTF-8 text file (a BOM is fine); bad bytes are reported with their line."""
    path = Path(path)
    limit = C.MAX_INPUT_FILE_BYTES
    try:
        with open(path, "rb") as handle:  # a pipe works too; at most limit + 1 bytes are read
            raw = _read_at_most(handle, limit + 1)
    except OSError as exc:
        hint = "give a file, not a folder" if isinstance(exc, IsADirectoryError) else None
        raise InputError(f"cannot read {what}: {exc.strerror or exc}", path, None, hint) from None
    if len(raw) > limit:
        raise InputError(
            f"{what} is larger than {limit // (1024 * 1024)} MiB",
            path,
            None,
            "split it into smaller files",
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(
            f"{what} is not valid UTF-8 (byte 0x{raw[exc.start]:02x})",
            path,
            line,
            "save the file as UTF-8",
        ) from None
    if "\0" in text:  # a binary file; a NUL would also break the command lines built from it
        raise InputError(
            f"{what} contains a NUL byte (is it a binary file?)",
            path,
            text.count("\n", 0, text.index("\0")) + 1,
            "save it as plain UTF-8 text",
        )
    return text


def check_json_depth(value: Any, what: str, path: str | Path | None, line: int | None) -> None:
    """Any JSON the user gives is refused at load time when nested deeper than C.MAX_JSON_DEPTH:
    far below the recursion limit of everything that walks it later (the case hash, scoring,
    redaction, the results schema), so it cannot crash a run after the model calls were paid."""
    stack = [(value, 1)]
    while stack:  # iterative: measuring a deep value must not recurse either
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > C.MAX_JSON_DEPTH:
                raise InputError(
                    f"{what} is nested more than {C.MAX_JSON_DEPTH} levels deep",
                    path,
                    line,
                    "flatten it",
                )
            stack.extend(
                (child, depth + 1) for child in (item.values() if isinstance(item, dict) else item)
            )


def parse_json_text(raw: str, path: Path) -> Any:
    """json.loads whose every failure is an InputError: bad syntax (with its line), nesting too
    deep for the parser, a number too long to convert."""
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"invalid JSON: {exc.msg}", path, exc.lineno, "fix the JSON syntax"
        ) from None
    except (ValueError, RecursionError) as exc:
        problem = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).split(";")[0]
        raise InputError(f"invalid JSON: {problem}", path, 1, "fix the JSON") from None
    check_json_depth(value, "JSON", path, 1)
    return value


def json_lines(path: Path) -> list[Any]:
    """The values of a JSON-lines file the evaluator appends to (journal, batch ledger, optimizer
    journal); a line torn by a kill, or too deep, is skipped: that step happens again."""
    values = []
    for line in path.read_text(encoding="utf-8", errors="replace").split("\n"):
        if line.strip():
            with contextlib.suppress(ValueError, RecursionError):
                values.append(json.loads(line))
    return values


class JsonStream:
    """A list in a results document that is written item by item, never built whole: the
    per-run entries of a 10,000-case suite."""

    def __init__(self, items: Callable[[], Any], length: int) -> None:
        self.items = items  # called once per write, so the document can be written twice
        self.length = length

    def __iter__(self) -> Any:
        return iter(self.items())

    def __len__(self) -> int:
        return self.length


def _holds_stream(value: Any) -> bool:
    """Whether a JsonStream is in this value, or in a dict inside it (a section's record)."""
    return isinstance(value, JsonStream) or (
        isinstance(value, dict) and any(_holds_stream(v) for v in value.values())
    )


def dump_json(document: dict, handle: Any, depth: int = 0) -> None:
    """`json.dump(document, indent=2)`, except that JsonStream values, at any depth of dicts,
    are streamed."""
    pad = "\n" + "  " * depth

    def indented(text: str, spaces: int) -> str:
        return text.replace("\n", "\n" + " " * spaces)

    handle.write("{")
    for position, (key, value) in enumerate(document.items()):
        handle.write(("," if position else "") + f"{pad}  {json.dumps(key)}: ")
        if isinstance(value, JsonStream):
            handle.write("[")
            for index, item in enumerate(value):
                text = indented(json_text(item), 2 * depth + 4)
                handle.write(("," if index else "") + f"{pad}    " + text)
            handle.write(f"{pad}  ]" if len(value) else "]")
        elif _holds_stream(value):
            dump_json(value, handle, depth + 1)
        else:
            handle.write(indented(json_text(value), 2 * depth + 2))
    handle.write(f"{pad}}}")


def materialized(value: Any) -> Any:
    """A value with its JsonStreams read into lists (a page that embeds them whole)."""
    if isinstance(value, JsonStream):
        return [materialized(item) for item in value]
    if isinstance(value, dict):
        return {key: materialized(item) for key, item in value.items()}
    return value


def _file_lines(fd: int, offset: int = 0) -> Iterator[bytes]:
    """The lines of an open file from `offset`, read with pread: whoever else reads or writes
    the same file keeps its own position."""
    rest = b""
    while chunk := os.pread(fd, 1 << 16, offset):
        offset += len(chunk)
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        yield from lines
    if rest:
        yield rest


def line_at(fd: int, offset: int) -> bytes:
    """The line of an open file that starts at `offset` (pread: no shared position moves)."""
    line, size = b"", 4096
    while True:
        part = os.pread(fd, size, offset + len(line))
        line += part
        end = line.find(b"\n")
        if end >= 0:
            return line[:end]
        if not part:
            return line
        size *= 2


class SpooledRecords:
    """A list of records kept in a temporary file, one JSON line each, and read back (validated
    as `record`) each time it is iterated: the per-case lists of a 100,000-case suite stay on disk,
    not in memory. It reads as a list does (iterate, len, bool); its place in memory is a count."""

    def __init__(self, record: Any) -> None:
        self.record = record  # the pydantic model of its items
        self.count = 0
        self.file = tempfile.TemporaryFile(mode="w+b")  # gone when closed, or when the process is

    def append(self, item: Any) -> None:
        self.file.seek(0, os.SEEK_END)
        self.file.write(item.model_dump_json(by_alias=True).encode() + b"\n")
        self.count += 1

    def extend(self, items: Iterable[Any]) -> None:
        for item in items:
            self.append(item)

    def __iter__(self) -> Iterator[Any]:
        self.file.flush()
        for _, line in zip(range(self.count), _file_lines(self.file.fileno())):
            yield self.record.model_validate_json(line)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> Any:
        if not 0 <= index < self.count:
            raise IndexError(index)
        return next(itertools.islice(self, index, None))


class MappedRecords(SpooledRecords):
    """A spooled list read through a function (a redacted view), still from its file: it reads
    as its spool does."""

    def __init__(self, spool: SpooledRecords, function: Callable[[Any], Any]) -> None:
        self.spool, self.function, self.record = spool, function, spool.record

    def append(self, item: Any) -> None:
        raise TypeError("a view of a spool is read, not written")

    def __iter__(self) -> Iterator[Any]:
        return map(self.function, self.spool)

    def __len__(self) -> int:
        return len(self.spool)

    def __getitem__(self, index: int) -> Any:
        return self.function(self.spool[index])


def spooled_into(record: BaseModel, name: str, items: SpooledRecords) -> None:
    """A record's list field that stays in its spool: pydantic checks nothing on assignment, and
    dump_streamed writes the items one by one."""
    setattr(record, name, items)


def dump_streamed(value: Any) -> Any:
    """A results document's part as JSON, its spooled lists (and spooled list fields of its
    records) as JsonStreams, written item by item."""
    if isinstance(value, SpooledRecords):
        return JsonStream(lambda: map(dump_streamed, value), len(value))
    if isinstance(value, list):
        return [dump_streamed(item) for item in value]
    spooled = {k: v for k, v in vars(value).items() if isinstance(v, SpooledRecords)}
    if not spooled:
        return value.model_dump(mode="json", by_alias=True)
    data = value.model_dump(mode="json", by_alias=True, exclude=set(spooled))
    dumped = {}
    for name, info in type(value).model_fields.items():  # in the fields' order
        key = info.serialization_alias or info.alias or name
        if name in spooled:
            dumped[key] = dump_streamed(spooled[name])
        elif key in data:
            dumped[key] = data[key]
    return dumped


def _file_mode_for_outputs() -> int:
    """0666 less the umask: what `>` in the shell or open() would give a new file. One mode for
    every file the evaluator writes (results, journal, reports, drafts)."""
    try:
        status = Path("/proc/self/status").read_text()
        found = re.search(r"^Umask:\s*([0-7]+)", status, re.MULTILINE)
        if found is None:
            raise ValueError("no Umask line")
        umask = int(found.group(1), 8)
    except (OSError, ValueError):
        umask = os.umask(0o022)  # no /proc: read it the only other way there is, and put it back
        os.umask(umask)
    return 0o666 & ~umask


OUTPUT_FILE_MODE = _file_mode_for_outputs()


def output_error(path: str | Path, exc: OSError) -> OutputError:
    full = exc.errno in (28, 122)  # ENOSPC, EDQUOT
    return OutputError(
        f"cannot write {path}: {'the disk is full' if full else exc.strerror or exc}"
    )


def create_output_file(path: str | Path) -> tuple[int, str]:
    """A new, empty file beside `path` under a random name (O_EXCL: a link planted there is never
    followed), with the one output mode: (descriptor, its path)."""
    path = Path(path)
    try:
        path.parent.mkdir(
            parents=True, exist_ok=True
        )  # --generate-tests -o DIR: the folder is made
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise output_error(path, exc) from None
    with contextlib.suppress(OSError):  # a filesystem without modes keeps its own
        os.fchmod(fd, OUTPUT_FILE_MODE)
    pending_outputs.add(tmp)  # until it is renamed or removed: an exit at once removes it
    return fd, tmp


def write_atomic(path: str | Path, write: Callable[[Any], None]) -> None:
    """The one writer of every file the evaluator writes: `write(handle)` fills a new temporary
    file beside the target (see create_output_file), which is fsynced and renamed over the
    target, so a reader never sees half a file and a link at the target is replaced, never
    followed. On any failure the temporary file is removed; an OS error (a full disk, a folder
    gone read-only) is an OutputError: one line."""
    fd, tmp = create_output_file(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise output_error(path, exc) from None
        raise
    finally:
        pending_outputs.discard(tmp)


def open_output_file(path: str | Path, lines: Iterable[str] = ()) -> Any:
    """A new file at `path` holding `lines`, left open for appending more (the journal); created
    like every output, through create_output_file and a rename once the lines are in, so the
    file it replaces is never lost half-way and a planted link is never followed."""
    fd, tmp = create_output_file(path)
    handle = os.fdopen(fd, "w", encoding="utf-8")
    try:
        for line in lines:
            handle.write(line + "\n")
        handle.flush()
        os.replace(tmp, path)
    except BaseException as exc:
        handle.close()
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise output_error(path, exc) from None
        raise
    finally:
        pending_outputs.discard(tmp)
    return handle


def write_text_atomic(path: str | Path, content: str) -> None:
    write_atomic(path, lambda handle: handle.write(content))


def write_json_atomic(path: str | Path, document: Any) -> None:
    """A JSON document, its JsonStream lists streamed."""

    def write(handle: Any) -> None:
        if isinstance(document, dict):
            dump_json(document, handle)
        else:
            json.dump(document, handle, indent=2)
        handle.write("\n")

    write_atomic(path, write)


def file_key(path: Path) -> Any:
    """What makes two paths one file: the inode when it exists (links, `./x`, hard links), else
    the path with every link resolved."""
    try:
        stat = path.stat()
        return stat.st_dev, stat.st_ino
    except OSError:
        return os.path.realpath(path)


def check_writable_folder(flag: str, target: Path, folder: Path) -> None:
    """The folder exists and takes a new file (tried for real: a read-only mount, a full quota or
    missing rights all show)."""
    if not folder.is_dir():
        raise InputError(
            f"{flag} {target}: the folder {folder} does not exist", hint="create it first"
        )
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise InputError(
            f"{flag} {target}: cannot write in {folder}: {exc.strerror or exc}"
        ) from None


# ---------------------------------------------------------------------------- records from runs, runs from records
def journal_path(output: str | Path) -> Path:
    output = Path(output)
    return output.with_name(output.name + ".journal.jsonl")


def results_lines_path(output: str | Path) -> Path:
    output = Path(output)
    return output.with_name(output.name + ".results.jsonl")


def lock_path(output: str | Path) -> Path:
    output = Path(output)
    return output.with_name(output.name + ".lock")


def batch_ledger_path(output: str | Path) -> Path:
    output = Path(output)
    return output.with_name(output.name + ".batches.jsonl")


# ---------------------------------------------------------------------------- a folder by its content
_IGNORED_FOLDERS = frozenset({".git", "results", "__pycache__"})  # what a copy leaves out


def folder_files(folder: Path) -> list[Path]:
    """A plugin's (or a case's) files as its copy holds them: its results and VCS folders left
    out, links not followed."""
    found = []
    for here, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in _IGNORED_FOLDERS)
        found += [Path(here) / name for name in sorted(files)]
    return found


def _entry_digest(path: Path) -> str:
    """A file by its content (a link by where it points; one that cannot be read, as such)."""
    try:
        if path.is_symlink():
            return "link:" + os.readlink(path)
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"


def folder_digest(folder: Path) -> str:
    """What a folder holds, by relative path and content: what makes runs against it reusable."""
    parts = [[str(path.relative_to(folder)), _entry_digest(path)] for path in folder_files(folder)]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]
