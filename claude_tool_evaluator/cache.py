"""--cache DIR: a model answer kept once per exact request, and the folder read as untrusted input
(every entry sealed and checked on read; `cache verify` and `cache prune`).

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns)."""

from __future__ import annotations

import contextvars
import hashlib
import hmac
import json
import os
import secrets
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

import test_constants as C

from .errors import InputError
from .files import parse_json_text, write_json_atomic
from .redaction import Redactor
from .sinks import terminal_text

__all__ = [
    "CACHE_SAMPLE",
    "ResponseCache",
    "ShippedRecording",
    "is_recording",
    "seal_recording",
    "prune_cache",
    "seal_of",
    "verify_cache",
]

# Iterating on a suite repeats every model call, even for the cases that did not change. With
# --cache DIR each answer is kept under the SHA-256 of the exact request (model, system, tools,
# messages, every parameter) and the sample: the run's iteration, so -i 5 still draws five
# answers. A request seen before is answered from the folder and costs nothing. Entries are
# redacted like every other output; a folder is shared by every run that names it.
#
# A cache folder is shared between CI jobs and restored from artifacts: it is input, not memory.
# Each entry names the request it answers and carries a seal (an HMAC of everything else in it),
# so an edited answer, an entry copied under another request's name, an unreadable, oversized or
# too deeply nested file is a miss with one warning line, never a run error and never an answer.
# The seal's key is CLAUDE_TOOL_EVAL_CACHE_SECRET when set (a cache shared between machines, as
# CI's, uses it), else a random key of this install's, made once (mode 0600) in the user's config
# folder: whoever can write the folder but not read the key cannot forge an entry. The fixed key
# earlier versions sealed with stood in the source for anyone to read: an entry sealed with it is
# refused (by name, so `cache prune` clears them).
CACHE_SAMPLE: contextvars.ContextVar[str] = contextvars.ContextVar("cache_sample", default="1")
_CACHE_SECRET_VARIABLE = "CLAUDE_TOOL_EVAL_CACHE_SECRET"
_OLD_FIXED_KEY = b"claude-tool-eval cache seal"  # earlier versions' key, public: never accepted
_INSTALL_KEY_FILE = Path("claude-tool-evaluator") / "cache-key"
_INSTALL_KEY_BYTES = 32
_install_keys: dict[Path, bytes] = {}  # read or made once per config folder (tests move HOME)
_install_key_lock = threading.Lock()

# Who sealed an entry, as `cache verify` says it.
_ENVIRONMENT_KEY, _INSTALL_KEY, _OLD_KEY, _UNKNOWN_KEY = (
    f"the environment's {_CACHE_SECRET_VARIABLE}",
    "this install's key",
    "the old fixed key (in the source, anyone's)",
    "an unknown key",
)


def _install_key_path() -> Path:
    """`$XDG_CONFIG_HOME/claude-tool-evaluator/cache-key`, else under `~/.config`."""
    config = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(config) if config and os.path.isabs(config) else Path.home() / ".config"
    return base / _INSTALL_KEY_FILE


def _read_install_key(path: Path) -> bytes | None:
    """The key in `path`, when it is a regular file (not a link) holding one."""
    try:
        status = path.lstat()
        if not stat.S_ISREG(status.st_mode) or status.st_size > 4 * _INSTALL_KEY_BYTES:
            return None
        text = path.read_text("ascii").strip()
    except (OSError, ValueError):
        return None
    return text.encode("ascii") if len(text) >= _INSTALL_KEY_BYTES else None


def _install_key() -> bytes:
    """This install's random key, made the first time it is needed: written whole into a private
    temporary file, then linked into place (two processes making it at once: one wins, the other
    reads the winner's). A config folder that cannot be written: a key for this process alone
    (its entries are misses for the next run, never forgeable)."""
    path = _install_key_path()
    with _install_key_lock:
        if path in _install_keys:
            return _install_keys[path]
        key = _read_install_key(path)
        if key is None:
            made = secrets.token_hex(_INSTALL_KEY_BYTES)
            try:
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".cache-key.")
                try:
                    os.fchmod(handle, 0o600)
                    os.write(handle, (made + "\n").encode("ascii"))
                    os.fsync(handle)
                finally:
                    os.close(handle)
                try:
                    os.link(temporary, path)
                except FileExistsError:
                    pass
                finally:
                    os.unlink(temporary)
                key = _read_install_key(path)
            except OSError:
                key = None
            key = key or made.encode("ascii")
        _install_keys[path] = key
        return key


def _environment_key() -> bytes | None:
    return os.environ.get(_CACHE_SECRET_VARIABLE, "").encode() or None


def _seal_key() -> bytes:
    """The key this invocation seals with and accepts: the environment's secret, else this
    install's."""
    return _environment_key() or _install_key()


def _seal_with(key: bytes, entry: dict) -> str:
    body = {k: v for k, v in entry.items() if k != "seal"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def seal_of(entry: dict) -> str:
    """The HMAC-SHA256 of an entry without its seal, over its canonical JSON, with the key this
    invocation seals with."""
    return _seal_with(_seal_key(), entry)


def _sealed_by(entry: dict) -> str:
    """Which key sealed an entry: the environment's secret, this install's, the old fixed one,
    or one we do not know."""
    seal = entry.get("seal")
    if not isinstance(seal, str):
        return _UNKNOWN_KEY
    environment = _environment_key()
    for key, name in (
        (environment, _ENVIRONMENT_KEY),
        (_install_key(), _INSTALL_KEY),
        (_OLD_FIXED_KEY, _OLD_KEY),
    ):
        if key is not None and hmac.compare_digest(seal, _seal_with(key, entry)):
            return name
    return _UNKNOWN_KEY


@dataclass(frozen=True)
class _EntryCheck:
    """One cache file read as untrusted input: its entry when it may answer, else why not."""

    entry: dict | None
    problem: str = ""
    sealed_by: str = ""  # which key sealed it (see _sealed_by), when it was read that far


def _check_entry(path: Path, key: str | None = None, sealed: bool = True) -> _EntryCheck:
    """Whether the file at path is a sound entry (for the request `key`, by default the one its
    name says): a bounded size, parseable, bounded nesting, this format, naming that request,
    sealed with this folder's key (a shipped recording's entries are checked by their hashes
    instead: `sealed` False)."""
    key = key or path.stem
    try:
        status = path.lstat()
        if not stat.S_ISREG(status.st_mode):  # a link or a pipe could point anywhere, or block
            return _EntryCheck(None, "not a regular file")
        size = status.st_size
        if size > C.CACHE_ENTRY_MAX_BYTES:
            return _EntryCheck(
                None, f"{size:,} bytes, over the bound of {C.CACHE_ENTRY_MAX_BYTES:,}"
            )
        # the same bounds as any JSON the user gives (syntax, the parser's depth, MAX_JSON_DEPTH)
        entry = parse_json_text(path.read_bytes().decode("utf-8"), path)
    except FileNotFoundError:
        return _EntryCheck(None)  # a plain miss: nothing to warn about
    except InputError as exc:
        return _EntryCheck(None, exc.message)
    except (OSError, ValueError) as exc:
        return _EntryCheck(None, f"unreadable ({type(exc).__name__})")
    if not isinstance(entry, dict):
        return _EntryCheck(None, "not a JSON object")
    if entry.get("format") != C.CACHE_FORMAT:
        return _EntryCheck(
            None, f"not a {C.CACHE_FORMAT!r} entry (an older version's, or another file)"
        )
    if entry.get("request") != key:
        return _EntryCheck(None, "it answers another request (copied or renamed)")
    if sealed and (
        not isinstance(entry.get("seal"), str)
        or not hmac.compare_digest(entry["seal"], seal_of(entry))
    ):
        by = _sealed_by(entry)
        if by == _OLD_KEY:
            return _EntryCheck(None, f"sealed with {_OLD_KEY}, which anyone can forge", by)
        if by != _UNKNOWN_KEY:  # this install's key while the environment's secret is set
            return _EntryCheck(None, f"sealed with {by}, not {_ENVIRONMENT_KEY}", by)
        return _EntryCheck(
            None,
            f"its seal does not match (edited, or sealed with another {_CACHE_SECRET_VARIABLE} "
            "or another install's key)",
            by,
        )
    return _EntryCheck(entry, sealed_by=_ENVIRONMENT_KEY if _environment_key() else _INSTALL_KEY)


_RECORDING_MANIFEST = "recording.json"
_RECORDING_FORMAT = "claude-tool-eval recording 1"


def is_recording(folder: str | Path | None) -> bool:
    return bool(folder) and (Path(str(folder)).expanduser() / _RECORDING_MANIFEST).is_file()


class ResponseCache:
    """One --cache folder: entries `DIR/ab/abcd....json`, and what this invocation found there
    (hits, misses, and what the hits would have cost)."""

    opened: dict[str, ResponseCache] = {}  # one per folder, shared by every runner of a run
    after_refusal = "the request is made again and the entry rewritten"
    shipped: type[ResponseCache] | None = None  # ShippedRecording, registered below

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.hits = self.misses = self.refused = self.not_kept = 0
        self.saved_usd = 0.0
        self.lock = threading.Lock()
        self.warned: set[Path] = set()

    @classmethod
    def open(cls, folder: str | Path) -> ResponseCache:
        """The folder's cache (made if missing); a shipped recording when it holds one."""
        path = Path(folder).expanduser().absolute()
        if path.exists() and not path.is_dir():
            raise InputError(
                f"--cache {folder}: not a folder", hint="give a folder (made if missing)"
            )
        key = str(path)
        if key not in cls.opened:
            if is_recording(path) and cls.shipped is not None:
                cls.opened[key] = cls.shipped(path)
            else:
                path.mkdir(parents=True, exist_ok=True)
                cls.opened[key] = cls(path)
        return cls.opened[key]

    @classmethod
    def forget(cls) -> None:
        cls.opened.clear()

    @staticmethod
    def key(request: Any, sample: str) -> str:
        text = json.dumps({"request": request, "sample": sample}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        """The entry answering this request, or None: missing, or refused with one warning."""
        path = self.path(key)
        checked = _check_entry(path, key)
        if checked.problem:
            self.refuse(path, checked.problem)
        if checked.entry is None:
            return None
        try:
            os.utime(path)  # last used: what `cache prune --unused-for` reads
        except OSError:
            pass
        return {k: v for k, v in checked.entry.items() if k not in ("format", "request", "seal")}

    def refuse(self, path: Path, problem: str) -> None:
        with self.lock:
            self.refused += 1
            if path in self.warned:
                return
            self.warned.add(path)
        click.echo(
            f"warning: --cache entry {terminal_text(path)} ignored: {terminal_text(problem)}; "
            f"{self.after_refusal}",
            err=True,
        )

    def put(self, key: str, entry: dict) -> None:
        """Keeps an answer, redacted like every output; an answer that held a secret is not
        kept: replayed, its `[REDACTED]` would reach a live tool where the value did, and the
        rerun would not be the run it repeats."""
        redacted = Redactor.for_run().deep(entry)
        if redacted != entry:
            with self.lock:
                self.not_kept += 1
            return
        path = self.path(key)
        path.parent.mkdir(exist_ok=True)
        sealed = {"format": C.CACHE_FORMAT, "request": key, **redacted}
        write_json_atomic(path, {**sealed, "seal": seal_of(sealed)})

    def counted(self, hit: bool, cost: float = 0.0) -> None:
        with self.lock:
            if hit:
                self.hits += 1
                self.saved_usd += cost
            else:
                self.misses += 1

    def record(self) -> dict[str, Any]:
        return {
            "folder": str(self.folder),
            "hits": self.hits,
            "misses": self.misses,
            "refused": self.refused,
            "not_kept": self.not_kept,
            "saved_usd": round(self.saved_usd, 6),
        }


# ---------------------------------------------------------------------------- a shipped recording
# A first run needs no key: examples/recording is a --cache folder of the quick start's model
# answers that ships with the repository. Its entries are not sealed (the seal's key is this
# install's, which a recording made elsewhere cannot know); instead its manifest,
# recording.json, lists the SHA-256 of every entry file, and an entry is an answer only when its
# bytes have that hash. The folder is read-only: nothing is added to it, and a request it has no
# answer for is an error of that case (no model is called, and none can be: there may be no key).
class _RecordingMiss(Exception):
    """A request a shipped recording has no answer for (an error of the case)."""


def _read_recording_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"unreadable ({type(exc).__name__})", path) from None


class ShippedRecording(ResponseCache):
    """A --cache folder that is a shipped recording (see above): answers, never keeps."""

    after_refusal = "its case is an error (a recording answers only from sound entries)"

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        manifest_path = folder / _RECORDING_MANIFEST
        manifest = parse_json_text(_read_recording_text(manifest_path), manifest_path)
        entries = manifest.get("entries") if isinstance(manifest, dict) else None
        if manifest.get("format") != _RECORDING_FORMAT or not isinstance(entries, dict):
            raise InputError(
                f"not a {_RECORDING_FORMAT!r} manifest",
                manifest_path,
                hint="remake it with seal_recording, or remove it to use the folder as a cache",
            )
        self.hashes = {str(k): str(v) for k, v in entries.items()}
        self.about = str(manifest.get("about", ""))

    def get(self, key: str) -> dict | None:
        path = self.path(key)
        try:
            found = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            return None
        if not hmac.compare_digest(found, self.hashes.get(key, "")):
            self.refuse(path, "not the file the recording's manifest lists")
            return None
        checked = _check_entry(path, key, sealed=False)
        if checked.entry is None:
            self.refuse(path, checked.problem or "unreadable")
            return None
        return {k: v for k, v in checked.entry.items() if k not in ("format", "request", "seal")}

    def put(self, key: str, entry: dict) -> None:
        with self.lock:
            self.not_kept += 1  # read-only: the session asks no model for a recording's miss

    def missing(self) -> _RecordingMiss:
        return _RecordingMiss(
            f"the recording {self.folder.name}/ has no answer for this request (it answers only "
            "the requests it was made from: set ANTHROPIC_API_KEY and drop --cache to run live)"
        )


ResponseCache.shipped = ShippedRecording


# ---------------------------------------------------------------------------- cache verify / prune
def _cache_files(folder: Path) -> Iterator[Path]:
    """Every file of a cache folder's entry layout (`ab/abcd....json`), sorted, and the
    leftovers of interrupted atomic writes beside them."""
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()):
        yield from sorted(p for p in sub.iterdir() if p.is_file() or p.is_symlink())


def _cache_folder(folder: str) -> Path:
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise InputError(f"{folder}: no such cache folder", hint="give the folder --cache named")
    return path


def verify_cache(folder: str) -> tuple[list[str], int, dict[str, int]]:
    """One line per entry that would be refused (its path and why, which names the key that
    sealed it when it is one we know), how many are sound, and how many each key sealed."""
    bad, sound = [], 0
    sealed: dict[str, int] = {}
    for path in _cache_files(_cache_folder(folder)):
        checked = _check_entry(path)
        if checked.sealed_by:
            sealed[checked.sealed_by] = sealed.get(checked.sealed_by, 0) + 1
        if checked.entry is not None:
            sound += 1
        else:
            bad.append(f"{terminal_text(path)}: {terminal_text(checked.problem or 'unreadable')}")
    order = [_ENVIRONMENT_KEY, _INSTALL_KEY, _OLD_KEY, _UNKNOWN_KEY]
    return bad, sound, {name: sealed[name] for name in order if name in sealed}


def prune_cache(folder: str, unused_days: float | None, dry_run: bool) -> list[str]:
    """Removes every entry verify refuses, and with unused_days every sound one not used for
    that long; says what it removed (or, with dry_run, would remove)."""
    cutoff = time.time() - unused_days * 86400 if unused_days is not None else None
    removed, kept, freed = 0, 0, 0
    for path in _cache_files(_cache_folder(folder)):
        status = path.lstat()
        sound = _check_entry(path).entry is not None
        if sound and (cutoff is None or status.st_mtime >= cutoff):
            kept += 1
            continue
        removed += 1
        freed += status.st_size
        if not dry_run:
            path.unlink(missing_ok=True)
    verb = "would remove" if dry_run else "removed"
    return [
        f"{verb} {removed} entr{'y' if removed == 1 else 'ies'} ({freed / 1e6:.1f} MB), kept {kept}"
    ]


def seal_recording(folder: Path, about: str) -> int:
    """Turns a --cache folder into a shipped recording: its entries' seals dropped (the key is
    this install's) and a manifest of their hashes written. Returns how many entries it holds."""
    hashes = {}
    for path in _cache_files(folder):
        checked = _check_entry(path)
        if checked.entry is None:
            path.unlink()
            continue
        entry = {k: v for k, v in checked.entry.items() if k != "seal"}
        write_json_atomic(path, entry)
        hashes[path.stem] = hashlib.sha256(path.read_bytes()).hexdigest()
    manifest = {
        "format": _RECORDING_FORMAT,
        "about": about,
        "entries": dict(sorted(hashes.items())),
    }
    write_json_atomic(folder / _RECORDING_MANIFEST, manifest)
    return len(hashes)
