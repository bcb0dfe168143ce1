"""Secrets: one redactor for every byte that leaves the process (the API key, every server's
credentials, what looks like a credential), in every sink and encoding it knows, whole or in part.

May import: errors, stopping, sinks, files, run_types."""

from __future__ import annotations

import bisect
import contextlib
import functools
import json
import operator
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import fields as dataclass_fields
from dataclasses import is_dataclass, replace
from typing import TYPE_CHECKING, Any, NamedTuple

import click
from pydantic import BaseModel

import test_constants as C

from .errors import InputProblems
from .files import MappedRecords, SpooledRecords
from .sinks import (
    HIDDEN,
    on_github_actions,
    terminal_text,
    visible_escapes,
    workflow_command,
    workspace_path,
)
from .stopping import FORGOTTEN_AT_START

__all__ = [
    "API_CREDENTIALS",
    "Redactor",
    "environment_without_credentials",
    "error_line",
    "report_input_error",
    "spec_secrets",
]

if TYPE_CHECKING:
    from .errors import InputError
    from .run_types import ServerSpec


# A name that says its value is a credential: an env variable, a header, a URL query parameter or
# a command-line flag, split into its words (`GITHUB_TOKEN`, `X-Api-Key`, `--db-password`). Not a
# substring match: `AUTHOR`, `KEYSPACE` and `MONKEY` hold no credential.
_SECRET_WORD = re.compile(
    r"\w*(?:KEY|TOKEN|SECRETS?|PASSW(?:OR)?DS?)|PASS|PASSPHRASE|PWD?|CREDENTIALS?|BEARER|COOKIE"
    r"|PRIVATE|DSN|AUTH(?:ORIZATION|N|Z|TOKEN|KEY)?",
    re.IGNORECASE,
)


# The short flags whose next argument is a password (`mysql -p`, `psql`-style wrappers).
_SECRET_SHORT_FLAGS = ("-p",)


# What our own one-line sinks (error lines, the terminal) show escaped: a secret holding a line
# break or a control character is matched in that shape too.
_ESCAPED_IN_LINES = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029{HIDDEN}]")


# Where a text was cut: our own truncation marks (cap_text, one_line, tail) and an ellipsis.
_CUT_MARKS = re.compile(r"\n?\.\.\.\[truncated [^\]]*\]|…|\.\.\.")


# What a reader reads through, and so does the redactor (see READINGS): a line break with the next
# line's indentation, raw or JSON-escaped (a base64 or hex text wrapped at any width starts and
# ends mid-line: `base64` wraps at 76, `openssl base64` at 64, `xxd -p` at 60), and an escape of
# one character, of every character or only some (JSON escapes only what it must: a `\u0073` is
# someone hiding an `s`). Each starts with a character of its own (not a class, not a repeat),
# so `re` skips to those fast; UNESCAPED says what each stands for.
_LINE_BREAK = r"\r\n[ \t]*|\n[ \t]*|\\r\\n|\\n"
_LINE_BREAKS = re.compile(_LINE_BREAK)
_CHARACTER_ESCAPES = (
    r"%[0-9A-Fa-f]{2}",  # a percent-escape (`%2D` or `%2d`): a byte
    r"\\\\*(?:u[dD][89abAB][0-9A-Fa-f]{2}\\+u[dD][c-fC-F][0-9A-Fa-f]{2}"  # a surrogate pair,
    r"|u[0-9A-Fa-f]{4}|x[0-9A-Fa-f]{2})",  # `\u002d` and `\x2d`, escaped once or more
    r"&#[0-9]{1,7};?|&#[xX][0-9A-Fa-f]{1,6};?|&[A-Za-z][A-Za-z0-9]{1,31};",  # HTML entities
    r"0[xX][0-9A-Fa-f]{2}(?![0-9A-Za-z])(?:,? ?(?=0[xX]))?",  # `0x2d`, `0x73, 0x6b`: a byte
)
_READ_THROUGH = re.compile("|".join([*_CHARACTER_ESCAPES, _LINE_BREAK]))
# What CHARACTER_ESCAPES start with: a text without any has nothing READ_THROUGH reads but line
# breaks (see read_through).
_ESCAPE_HINT = r"[%\\&]|0[xX]"

# Bytes shown as hex with a separator between them (`73 6b 2d`, `73:6B:2D`, a dump of so many a
# line, two bytes a group as `xxd` groups them): four groups at least, read as the bytes they are.
_HEX_GROUP = r"[0-9A-Fa-f]{2}(?:[0-9A-Fa-f]{2})?"
_HEX_RUN = rf"{_HEX_GROUP}(?:(?:[ :-]|\r?\n){_HEX_GROUP}){{3,}}\b"
_HEX_PAIR = re.compile(r"[0-9A-Fa-f]{2}")
_HEX_SEPARATORS = str.maketrans("", "", ":-")  # bytes.fromhex reads through whitespace itself


# Credentials by their shape, whoever's they are and whether or not we were told about them: the
# well-known prefixes of API keys and tokens, each followed by as many characters as the real
# ones have at least (a prefix named in prose, a placeholder like `sk-ant-...`, a tool name like
# `hf_hub_download` or a hash is not a key). Not inside a longer word (`task-`, `disk-`): what
# comes before is checked after a shape's first character, which is a character of its own (not
# a class, not a group), so `re` skips to those fast.
_KEY_SHAPES = (
    r"sk-ant-[A-Za-z0-9_-]{20,}",  # Anthropic: sk-ant-api03-, sk-ant-admin01-, sk-ant-oat01-
    r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}",  # OpenAI project, service and admin keys
    r"sk-[A-Za-z0-9]{32,}",  # OpenAI's older keys: sk- and 48 letters and digits
    r"gh[pousr]_[A-Za-z0-9]{36,}",  # GitHub: personal, OAuth, user-to-server, server, refresh
    r"github_pat_[A-Za-z0-9_]{22,}",  # GitHub's fine-grained tokens
    r"A(?:KIA|SIA)[A-Z0-9]{16}(?![A-Za-z0-9])",  # AWS access key IDs (long-lived, temporary)
    r"xox[abeoprs]-[A-Za-z0-9-]{20,}",  # Slack bot, user, app-level and refresh tokens
    r"AIza[A-Za-z0-9_-]{35}",  # Google API keys
    r"hf_[A-Za-z0-9]{30,}",  # Hugging Face
    r"sk_(?:live|test)_[A-Za-z0-9]{20,}",  # Stripe secret keys
    r"rk_(?:live|test)_[A-Za-z0-9]{20,}",  # Stripe restricted keys
    r"glpat-[A-Za-z0-9_-]{20,}",  # GitLab personal access tokens
    r"npm_[A-Za-z0-9]{36,}",  # npm
    r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",  # PyPI API tokens
)
_KEY_SHAPED = re.compile(
    "|".join(f"{shape[0]}(?<![A-Za-z0-9].){shape[1:]}" for shape in _KEY_SHAPES)
)
# The same shapes wherever they stand (in a view of a text, what precedes one is anyone's).
_KEY_ANYWHERE = re.compile("|".join(_KEY_SHAPES))
# What each key shape starts with: a text holding none of them holds no key, and KEY_HINTED tells
# so far faster than KEY_SHAPED (most texts hold none).
_KEY_HINTS = (
    *("sk-", "sk_", "rk_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "AKIA", "ASIA"),
    *("xox", "AIza", "hf_", "glpat-", "npm_", "pypi-"),
)
# What a secret may share with anyone's: the part every key of its kind starts with, and a URL's
# scheme and host (no password in it). A run of a secret that is little more than this
# (`sk-ant-api03-` in a placeholder or someone else's key, `https://auth.example.com` of a URL
# that is a credential) gives nothing of it away.
_SHARED_PREFIX = re.compile(
    r"sk-ant-[a-z]+\d*-|sk-(?:proj|svcacct|admin)-|sk-|gh[pousr]_|github_pat_|AKIA|ASIA"
    r"|xox[abeoprs]-|AIza|hf_|[rs]k_(?:live|test)_|glpat-|npm_|pypi-AgEIcHlwaS5vcmc"
    r"|[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s]*(?=[/?#]|$)"
)
_PAST_SHARED_PREFIX = 3  # how many characters past it a run may show and still be anyone's

# The blocks the redactor cuts its secrets' forms in to look for them fast (see may_hold and
# partial_runs): half a run, so that every run holds a whole one.
_GRAM = C.PARTIAL_SECRET_CHARS // 2


class _Matcher:
    """A pattern of ours (no lookaround, no backreference: RE2 reads it as Python's `re` does),
    searched with `re` in short texts and with RE2 in long ones. `re` tries an alternation's
    branches one by one at each character (the hundred-odd forms of a few secrets: 20 ms on a
    600 KB tool output), RE2 reads a text once whatever the pattern (2 ms) but each call costs
    some microseconds more, so short texts stay with `re`. RE2 is imported when the first long
    text comes; without it, or for a text it cannot take (lone surrogates), `re` reads it."""

    LONG_TEXT = 4_000
    UNCOMPILED: Any = object()

    def __init__(self, pattern: str) -> None:
        self.pattern = re.compile(pattern)
        self.long_pattern: Any = self.UNCOMPILED

    @classmethod
    def of_strings(cls, strings: Iterable[str]) -> _Matcher:
        """A matcher of any of `strings`, the first listed first where several start at one place."""
        return cls("|".join(map(re.escape, strings)))

    def for_long_texts(self) -> Any:
        """The pattern compiled by RE2, or None when RE2 cannot take it (or is not installed)."""
        if self.long_pattern is self.UNCOMPILED:
            self.long_pattern = None
            try:
                import re2

                options = re2.Options()
                options.log_errors = False  # a pattern it cannot take is read by `re`
                options.max_mem = 64 << 20  # the forms of many secrets make one large automaton
                self.long_pattern = re2.compile(self.pattern.pattern, options)
            except Exception:  # not installed, or a pattern it cannot encode or compile
                self.long_pattern = None
        return self.long_pattern

    def spans(self, text: str) -> list[tuple[int, int]]:
        if len(text) >= self.LONG_TEXT and (pattern := self.for_long_texts()) is not None:
            try:
                return [match.span() for match in pattern.finditer(text)]
            except UnicodeEncodeError:  # a lone surrogate: not UTF-8, `re` reads it
                pass
        return [match.span() for match in self.pattern.finditer(text)]

    def found_in(self, text: str) -> bool:
        if len(text) >= self.LONG_TEXT and (pattern := self.for_long_texts()) is not None:
            try:
                return pattern.search(text) is not None
            except UnicodeEncodeError:
                pass
        return self.pattern.search(text) is not None


_HEX_RUNS = _Matcher(_HEX_RUN)
_KEY_HINTED = _Matcher.of_strings(_KEY_HINTS)
_ESCAPES_HINTED = _Matcher(_ESCAPE_HINT)
_READ_THROUGH_HINTED = _Matcher(_ESCAPE_HINT + r"|\n")


def _key_hinted(text: str) -> bool:
    return _KEY_HINTED.found_in(text)


def _percent_byte(escape: str) -> str:
    return chr(int(escape[1:3], 16))


def _html_entity(escape: str) -> str:
    import html

    return html.unescape(escape)


def _hex_literal_byte(escape: str) -> str:
    return chr(int(escape[2:4], 16))


def _backslash_escape(escape: str) -> str:
    """`\u002d` (a surrogate pair too) or `\x2d`, escaped once or more, or a JSON-escaped
    line break (nothing)."""
    body = escape.lstrip("\\")
    if body[0] == "x":
        return chr(int(body[1:3], 16))
    if body[0] != "u":
        return ""
    code = int(body[1:5], 16)
    if len(body) > 5:  # a surrogate pair: one character
        return chr(0x10000 + ((code - 0xD800) << 10) + (int(escape[-4:], 16) - 0xDC00))
    return chr(code)


# What a match of READ_THROUGH stands for, by its first character (a raw line break: nothing).
_UNESCAPED: dict[str, Callable[[str], str]] = {
    "%": _percent_byte,
    "\\": _backslash_escape,
    "&": _html_entity,
    "0": _hex_literal_byte,
}


@functools.lru_cache(maxsize=4096)  # a text has the same few many times (`&amp;`, `\n  `)
def _unescaped(escape: str) -> str:
    """What one match of READ_THROUGH stands for: a character, or nothing (a line break)."""
    decode = _UNESCAPED.get(escape[0])
    return decode(escape) if decode is not None else ""


def _read_through(text: str) -> str:
    """`text` as a reader reads it (READ_THROUGH): line breaks dropped, escapes decoded, each to
    the character it stands for (a percent-escape to the character of its byte: a secret's
    UTF-8 bytes are matched so too, see forms)."""
    if _ESCAPES_HINTED.found_in(text):
        return _READ_THROUGH.sub(lambda match: _unescaped(match.group()), text)
    return _LINE_BREAKS.sub("", text)  # the same, faster


def _read_through_changes(text: str) -> bool:
    """Whether read_through could find more in `text` than there is as it stands: it has a line
    break between two of its characters (a break at either end joins nothing, and many texts end
    with one), or an escape. What they start with first: most texts hold none."""
    inner = text.strip()
    return _READ_THROUGH_HINTED.found_in(inner) and _READ_THROUGH.search(inner) is not None


class _Origins:
    """Where each character of a reading of a text came from in that text: what the reader read
    differently (an escape, a line break, a hex byte) is kept as a span of the text each, and
    each character between those stands for itself. Kept per span read, not per character: a
    600 KB text has few of them, and a reading is mapped back only where something was found."""

    def __init__(self, read: Iterable[tuple[int, int, int, int]]) -> None:
        """`read`: in order, each span the reader read differently: where it starts, where the
        characters it reads as end (a separator after them reads as nothing), where it ends, and
        how many characters it reads as."""
        self.read = list(read)
        self.read_at: list[int] = []  # where the characters of each start in the reading
        shown = position = 0
        for start, _, end, length in self.read:
            shown += start - position
            self.read_at.append(shown)
            shown += length
            position = end

    def span(self, start: int, end: int) -> tuple[int, int]:
        """Where the characters `start` to `end` of the reading came from."""
        return self.place(start)[0], self.place(end - 1)[1]

    def place(self, index: int) -> tuple[int, int]:
        """Where the reading's character `index` starts and ends in the text."""
        at = bisect.bisect_right(self.read_at, index) - 1
        if at < 0:
            return index, index + 1
        start, characters_end, end, length = self.read[at]
        if index < self.read_at[at] + length:
            return start, characters_end
        own = end + index - self.read_at[at] - length  # a character that stands for itself
        return own, own + 1


def _read_through_origins(text: str) -> _Origins:
    """Where each character of read_through(text) came from in `text`."""
    if not _ESCAPES_HINTED.found_in(text):  # line breaks only: each reads as nothing (faster)
        return _Origins((m.start(), m.start(), m.end(), 0) for m in _LINE_BREAKS.finditer(text))
    read = []
    for match in _READ_THROUGH.finditer(text):
        escape = match.group()
        # the separator after a `0x2d` reads as nothing: the escape ends before it
        characters_end = match.start() + len(escape.rstrip(", "))
        read.append((match.start(), characters_end, match.end(), len(_unescaped(escape))))
    return _Origins(read)


def _hex_read(text: str) -> str:
    """`text` with every run of hex bytes with separators (HEX_RUN) read as its bytes, each the
    character of its byte (as a percent-escape is read)."""
    pieces, position = [], 0
    for start, end in _HEX_RUNS.spans(text):
        run = text[start:end].translate(_HEX_SEPARATORS)
        pieces += [text[position:start], bytes.fromhex(run).decode("latin-1")]
        position = end
    return "".join(pieces) + text[position:]


def _hex_read_origins(text: str) -> _Origins:
    """Where each character of hex_read(text) came from in `text`: its two hex digits (the
    separator after them reads as nothing)."""
    read = []
    for start, end in _HEX_RUNS.spans(text):
        pairs = [pair.span() for pair in _HEX_PAIR.finditer(text, start, end)]
        following = [next_start for next_start, _ in pairs[1:]] + [end]
        read += [(a, b, after, 1) for (a, b), after in zip(pairs, following)]
    return _Origins(read)


def _hex_run_inside(text: str) -> bool:
    return len(text) >= 11 and _HEX_RUNS.found_in(text)  # `ab cd ef 12`: 11 characters at least


class _Reading(NamedTuple):
    """One way a reader reads a text that the redactor reads it too: whether it changes a text,
    the text so read, and where each character of that came from."""

    changes: Callable[[str], bool]
    view: Callable[[str], str]
    origins: Callable[[str], _Origins]


_READINGS = (
    _Reading(_read_through_changes, _read_through, _read_through_origins),
    _Reading(_hex_run_inside, _hex_read, _hex_read_origins),
)


def _merged(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans in order, those that overlap or touch made one."""
    joined: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if joined and start <= joined[-1][1]:
            joined[-1] = (joined[-1][0], max(end, joined[-1][1]))
        else:
            joined.append((start, end))
    return joined


def _blanked(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with each span's characters made NULs: what is left to read, where it was."""
    if not spans:
        return text
    pieces, position = [], 0
    for start, end in _merged(spans):
        pieces += [text[position:start], "\0" * (end - start)]
        position = end
    return "".join(pieces) + text[position:]


def _secret_name(name: str) -> bool:
    return any(_SECRET_WORD.fullmatch(word) for word in re.split(r"[^A-Za-z0-9]+", name) if word)


def _entropy_bits(text: str) -> float:
    """Shannon entropy per character."""
    import math

    counts: dict[str, int] = {}
    for char in text:
        counts[char] = counts.get(char, 0) + 1
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _looks_random(value: str) -> bool:
    """A value nobody types: at least C.RANDOM_SECRET_MIN_CHARS letters and digits (separators
    aside), mixed the way random text mixes them (lower, upper and digit runs every few
    characters) and of high entropy. Words, settings (`production`, `us-east-1`), versions, dates,
    paths and URLs are not."""
    if (
        len(value) < C.RANDOM_SECRET_MIN_CHARS
        or value.startswith(("/", "./", "../", "~"))
        or "://" in value
        or any(char.isspace() for char in value)
    ):
        return False
    core = re.sub(r"[-_+/=.:]", "", value)
    if len(core) < C.RANDOM_SECRET_MIN_CHARS or not (core.isascii() and core.isalnum()):
        return False
    if not (any(c.isdigit() for c in core) and any(c.isalpha() for c in core)):
        return False
    kinds = ["d" if c.isdigit() else "u" if c.isupper() else "l" for c in core]
    changes = sum(1 for a, b in zip(kinds, kinds[1:]) if a != b)
    return changes >= len(core) // 4 and _entropy_bits(core) >= C.RANDOM_SECRET_MIN_ENTROPY


# Webhook URLs whose path is their credential: the host, and the path before the secret part.
_WEBHOOK_PATHS = (
    (re.compile(r"hooks\.slack\.com"), re.compile(r"/(?:services|workflows|triggers)/")),
    (re.compile(r"(?:[\w-]+\.)?discord(?:app)?\.com"), re.compile(r"/api(?:/v\d+)?/webhooks/")),
)
# A path segment that is an identifier rather than a credential, however random it looks.
_UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")

# `user:password@host` without a scheme: Go's MySQL DSN (`app:pw@tcp(db:3306)/shop`), Redis's
# `default:pw@cache:6379`. Not an image digest (`postgres:16@sha256:...`) nor a mail address.
_BARE_USERINFO = re.compile(r"(?<![\w/:@.+-])(?!mailto:)[\w.+-]+:([^\s:@/]+)@(?!sha\d+:)[\w.-]+")

# A connection string's `Key=Value` pairs: `;`-separated (ADO.NET, ODBC, JDBC's
# `;password=...;`), a value quoted or braced or not; or libpq's space-separated ones.
_CONNECTION_STRING_PAIR = re.compile(
    r"""(?:^|;)\s*([^=;]+?)\s*=\s*("(?:[^"]|"")*"|'(?:[^']|'')*'|\{(?:[^}]|\}\})*\}|[^;]*)"""
)
_SPACED_PAIR = re.compile(r"""(?:^|\s)([\w.-]+)\s*=\s*('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|\S+)""")


def _path_secrets(host: str, path: str) -> list[str]:
    """A webhook's secret path: Slack's `T.../B.../...` after `/services/`, Discord's `ID/TOKEN`
    after `/api/webhooks/` (and the token alone), and any other URL's random-looking path
    segments (`/hooks/incoming/3fQ...`), UUIDs aside."""
    for host_shape, path_before in _WEBHOOK_PATHS:
        before = path_before.match(path)
        if host_shape.fullmatch(host) and before:
            secret = path[before.end() :].strip("/")
            return [secret, secret.rsplit("/", 1)[-1]]
    return [part for part in path.split("/") if _looks_random(part) and not _UUID.fullmatch(part)]


def _url_secrets(value: str) -> list[str]:
    """The credentials of every URL in a value: its password (`postgresql://user:PASS@host/db`,
    any scheme), a user name that looks random (`https://TOKEN@host/...`), its query parameters
    that are credential-named (`?api_key=X`) or look random (`?sig=...`), and the secret part of
    its path (see path_secrets)."""
    import urllib.parse

    found = []
    for match in _URL.finditer(value):
        try:
            parts = urllib.parse.urlsplit(match.group())
            password, user = parts.password, parts.username
        except ValueError:
            continue
        if password:
            found += [password, urllib.parse.unquote(password)]
        if user and _looks_random(urllib.parse.unquote(user)):
            found += [user, urllib.parse.unquote(user)]
        queries = urllib.parse.parse_qsl(parts.query)
        found += [v for k, v in queries if _secret_name(k) or _looks_random(v)]
        found += _path_secrets(parts.hostname or "", parts.path)
    return found


def _unquoted(value: str) -> str:
    """A connection string's value without its quotes or braces (a doubled one is one)."""
    if len(value) >= 2 and value[0] + value[-1] in ('""', "''", "{}"):
        return value[1:-1].replace(value[-1] * 2, value[-1])
    return value


def _connection_string_secrets(value: str) -> list[str]:
    """The values of a connection string's credential-named keys (`Password=`, `Pwd=`,
    `AccountKey=`, `SharedAccessKey=`; `User Id=` is not one), quoted or not."""
    if "=" not in value:
        return []
    pairs = _CONNECTION_STRING_PAIR if ";" in value else _SPACED_PAIR
    found = []
    for match in pairs.finditer(value):
        name, secret = match.groups()
        if _secret_name(name):
            found += [secret, _unquoted(secret)]
    return found


def _bare_userinfo_secrets(value: str) -> list[str]:
    return [match.group(1) for match in _BARE_USERINFO.finditer(value)] if "@" in value else []


# What is inside a value, whatever its name: the credentials of its URLs, of its connection
# string, and of a `user:password@host` without a scheme.
_EMBEDDED_SECRETS: tuple[Callable[[str], list[str]], ...] = (
    _url_secrets,
    _connection_string_secrets,
    _bare_userinfo_secrets,
)


def _embedded_secrets(value: str) -> list[str]:
    return [secret for find in _EMBEDDED_SECRETS for secret in find(value)]


def _value_secrets(name: str, value: str) -> list[str]:
    """What a named value gives the redactor: all of it when its name says it is a credential or
    it looks random, and the credentials inside it either way (EMBEDDED_SECRETS)."""
    if _secret_name(name) or _looks_random(value):
        return [value, *_embedded_secrets(value)]
    return _embedded_secrets(value)


def _argument_secrets(args: Sequence[str]) -> list[str]:
    """The secrets of a command line: the value of a credential-named flag (`--token X`,
    `--api-key=X`, `--key X`, `-p X`), the credentials inside an argument (EMBEDDED_SECRETS),
    and arguments that look random."""
    found = []
    for index, arg in enumerate(args):
        name, sep, value = arg.partition("=")
        flag = arg.startswith("-")
        if flag and sep:
            found += _value_secrets(name, value)
            continue
        found += [arg] if _looks_random(arg) else _embedded_secrets(arg)
        following = args[index + 1] if index + 1 < len(args) else None
        if (
            flag
            and following is not None
            and not following.startswith("-")  # `--no-auth --port 8080`: no value
            and (_secret_name(arg) or arg in _SECRET_SHORT_FLAGS)
        ):
            found.append(following)
    return found


def spec_secrets(spec: ServerSpec) -> list[str]:
    """The credentials one server is given (not every value it is given: `MODE=production` is a
    setting): each env value, header and ${VAR} the config expanded whose name says it is a
    credential or that looks random (and the token of a "Bearer TOKEN" header), the credentials
    inside any of them and inside its URL and arguments (EMBEDDED_SECRETS: URL passwords,
    webhook paths, connection-string passwords), and the value of every credential flag."""
    found = []
    for name, value in [*spec.env.items(), *spec.secrets.items(), *spec.headers.items()]:
        found += _value_secrets(name, value)
        if _secret_name(name) and " " in value:
            found.append(value.split(" ", 1)[-1])
    found += _embedded_secrets(spec.url) if spec.url else []
    found += _argument_secrets([spec.command, *spec.args])
    return [s for s in found if s]


API_CREDENTIALS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


def environment_without_credentials(**extra: str) -> dict[str, str]:
    """Our environment for a child that needs no API credentials (a `verify` command): without
    the API key and token, plus `extra`."""
    env = {name: value for name, value in os.environ.items() if name not in API_CREDENTIALS}
    env.update(extra)
    return env


def _environment_secrets() -> list[str]:
    """Our own environment's credentials: the API key and token, and every variable whose name
    says it holds one (`GITHUB_TOKEN` in CI), unless its value is a path (`SSH_AUTH_SOCK`)."""
    return [
        value
        for name, value in os.environ.items()
        if name in API_CREDENTIALS or (_secret_name(name) and not os.path.isabs(value))
    ]


def _json_escaped(secret: str) -> str:
    return json.dumps(secret)[1:-1]


def _escaped_forms(secret: str) -> set[str]:
    """`secret` JSON-escaped (once, twice, with `\\/`), as Python's repr shows it, with control
    characters escaped as our one-line sinks show them, and URL-encoded."""
    import urllib.parse

    once = _json_escaped(secret)
    return {
        secret,
        once,
        json.dumps(secret, ensure_ascii=False)[1:-1],
        _json_escaped(once),
        once.replace("/", "\\/"),
        repr(secret)[1:-1],
        visible_escapes(secret, _ESCAPED_IN_LINES),
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote_plus(secret, safe=""),
        urllib.parse.quote(secret),
    }


def _base64_forms(raw: bytes) -> set[str]:
    """Base64 (standard and URL-safe) of `raw`, padded or not, and what of it shows inside a
    longer base64 text whatever comes before it."""
    import base64

    forms = set()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        forms |= {encode(raw).decode("ascii"), encode(raw).decode("ascii").rstrip("=")}
        for shift in range(3):
            # Inside a longer base64 text the secret starts at some byte offset: the characters
            # that only its own bits make up are the same whatever comes before or after.
            encoded = encode(b"\0" * shift + raw).decode("ascii")
            start, end = -(-shift * 8 // 6), (shift + len(raw)) * 8 // 6
            forms.add(encoded[start:end])
    return forms


def _base32_forms(raw: bytes) -> set[str]:
    """Base32 of `raw` (upper or lower case), and what of it shows inside a longer base32 text
    (5 bytes make 8 characters: 5 byte offsets, as base64 has 3)."""
    import base64

    whole = base64.b32encode(raw).decode("ascii")
    forms = {whole, whole.lower()}
    for shift in range(5):
        encoded = base64.b32encode(b"\0" * shift + raw).decode("ascii")
        start, end = -(-shift * 8 // 5), (shift + len(raw)) * 8 // 5
        forms |= {encoded[start:end], encoded[start:end].lower()}
    return forms


def _pieces_of(texts: Iterable[str], size: int) -> set[str]:
    """Every run of `size` characters of each of `texts`."""
    return {text[i : i + size] for text in texts for i in range(len(text) - size + 1)}


def _block_places(sources: Iterable[str], size: int) -> dict[str, list[tuple[str, int]]]:
    """Each source cut in blocks of `size` (at its multiples of `size`): where each block is."""
    places: dict[str, list[tuple[str, int]]] = {}
    for source in sources:
        for offset in range(0, len(source) - size + 1, size):
            places.setdefault(source[offset : offset + size], []).append((source, offset))
    return places


def _run_length(text: str, forms: Iterable[str], backwards: bool) -> int:
    """How much of the end (or start) of `text` is one run of one of `forms`."""
    best = 0
    for form in forms:
        longest = min(len(form), len(text))
        for length in range(longest, best, -1):
            part = text[-length:] if backwards else text[:length]
            if part in form:
                best = length
                break
    return best


def _run_around(text: str, start: int, source: str, offset: int, size: int) -> tuple[int, int]:
    """The run of `source` in `text` around the `size` characters at `start` of `text` that are
    the ones at `offset` of `source`: as far as both agree, before and after."""
    before = 0
    most = min(offset, start)
    while before < most and text[start - before - 1] == source[offset - before - 1]:
        before += 1
    after = 0
    most = min(len(source) - offset, len(text) - start) - size
    while after < most and text[start + size + after] == source[offset + size + after]:
        after += 1
    return start - before, start + size + after


# What markdown writers escape with a backslash: a secret so escaped is a form of it.
_MARKDOWN_ESCAPABLE = re.compile(r"[\\`*_{}\[\]()#+\-.!|<>~]")
_MARKDOWN_ESCAPE = re.compile(r"\\(?=[\\`*_{}\[\]()#+\-.!|<>~])")

# Credentials masked by their shape whatever they hold: a Basic authorization's value (a user
# and password, or `x-access-token:ghp_...`, in base64), and a PEM private key block (its END
# line, or where its base64 stops, ends it; raw or with JSON-escaped line breaks).
_BASIC_AUTHORIZATION = re.compile(
    r"""(?i:authorization)["']?\s*[:=]\s*["']?(?i:basic)\s+([A-Za-z0-9+/_-]{8,}={0,2})"""
    r"(?![A-Za-z0-9+/=_-])"
)
_PEM_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|(?:[A-Za-z0-9+/=:,\s-]|\\[rn])*)",
    re.DOTALL,
)

# Runs a key may hide in, encoded (see encoded_runs): base64 (standard or URL-safe, gzip or
# UTF-16 inside), hex without separators, base32. A run is decoded at every alignment it may
# start at inside a longer encoded text; one longer than ENCODED_RUN_LIMIT is not decoded.
_ENCODED_RUN = r"[A-Za-z0-9+/_-]{24,}={0,6}"  # base64 (hex and base32 are inside it too)
_ENCODED_RUN_LIMIT = 1 << 20
_GUNZIPPED_LIMIT = 4 << 20  # a gzip bomb inflates no further than this

# Characters written in a key's place: fullwidth forms (`ｇｈｐ＿`), one for one.
_FULLWIDTH = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)}
_FULLWIDTH_HINT = re.compile("[\uff01-\uff5e]")
_HIDDEN_CHARACTER = re.compile(f"[{HIDDEN}]")
# A secret cut by a concatenation: SQL's `'sk-ant-' || 'abc'`, JavaScript's and Python's `+`.
_CONCATENATION = re.compile(r"""(['"])\s*(?:\|\||\+|\.)\s*\1""")


# What a key's prefix (four bytes or more: `ghp_`, `sk-ant-`, `AKIA`, a PEM's `-----BEGIN`) looks
# like encoded, at every alignment: a text without any of these holds no encoded key, and most
# texts hold none (a run is decoded only when it holds one). Gzip's magic (`H4sI` in base64)
# stands for whatever a compressed blob may hold, a known secret too.
_ENCODED_PREFIXES = (
    *("sk-ant-", "sk-proj-", "sk-svcacct-", "sk-admin-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    *("github_pat_", "AKIA", "ASIA", "AIza", "glpat-", "npm_", "pypi-AgEI", "sk_live_"),
    *("sk_test_", "rk_live_", "rk_test_", "-----BEGIN", "asic "),
    *(f"xox{kind}-" for kind in "abeoprs"),
)


def _prefix_encodings(prefix: bytes) -> set[str]:
    forms = {prefix.hex(), prefix.hex().upper()}
    forms |= _base64_forms(prefix) | _base32_forms(prefix)
    return {form for form in forms if len(form) >= 4}


@functools.lru_cache(maxsize=1)
def _encoded_grams() -> frozenset[str]:
    """The first four characters of every encoding of every prefix: a run holding none of them
    holds no encoded key (looked up four characters at a time, far faster than any automaton
    of a thousand strings reads a base64 blob)."""
    forms = {"H4sI"}
    for prefix in _ENCODED_PREFIXES:
        for raw in (prefix.encode(), prefix.encode("utf-16-le")):
            forms |= _prefix_encodings(raw)
    return frozenset(form[:4] for form in forms)


@functools.lru_cache(maxsize=1)
def _encoded_hints() -> _Matcher:
    """The same grams as one automaton (RE2, even for short texts): most texts hold none."""
    matcher = _Matcher.of_strings(sorted(_encoded_grams()))
    matcher.LONG_TEXT = 0
    return matcher


_ENCODED_RUNS = _Matcher(_ENCODED_RUN)
_WHOLE_RUN = 1024  # a run this long is decoded whole, not looked through for prefixes first
_ENCODED_WINDOW = 256  # an encoded key is read this far past where its prefix starts
_SIGNS_READ = 64  # how many signs of a hidden key a text is read around (a blob of noise has some)


# A key's prefix written backwards: a text without any holds no key so written.
_REVERSED_HINTS = _Matcher.of_strings(hint[::-1] for hint in _KEY_HINTS)


# What stands between the characters of an interleaved key: a space, ASCII punctuation or a
# zero-width character (a class of single characters keeps RE2's automaton small on any text).
_INTERLEAVING = "[\\x20-\\x2f\\x3a-\\x40\\x5b-\\x60\\x7b-\\x7e\u200b-\u200d\u2060\ufeff]"


def _interleaved(word: str) -> str:
    return _INTERLEAVING.join(map(re.escape, word))


_INTERLEAVED_HINTS = _Matcher("|".join(_interleaved(h) for h in _KEY_HINTS if len(h) >= 3))


def _decoded_candidates(run: str) -> Iterable[bytes]:
    """What an encoded run may hold: its bytes at each alignment, read as base64, hex or base32
    (whichever it can be), and what those bytes hold gzipped."""
    import base64
    import binascii
    import zlib

    body = run.rstrip("=")
    found: list[bytes] = []
    if re.fullmatch(r"[0-9A-Fa-f]+", body):
        found += [bytes.fromhex(body[i : i + (len(body) - i) // 2 * 2]) for i in (0, 1)]
    if re.fullmatch(r"[A-Z2-7]+|[a-z2-7]+", body):
        for shift in range(8):
            piece = body[shift:].upper()
            for cut in range(8):  # the last group, cut to a length base32 can end with
                whole = piece[: len(piece) - cut]
                with contextlib.suppress(binascii.Error, ValueError):
                    found.append(base64.b32decode(whole + "=" * (-len(whole) % 8)))
                    break
    standard = body.replace("-", "+").replace("_", "/")
    for shift in range(4):
        piece = standard[shift:]
        piece = piece[:-1] if len(piece) % 4 == 1 else piece + "=" * (-len(piece) % 4)
        with contextlib.suppress(binascii.Error, ValueError):
            found.append(base64.b64decode(piece, validate=True))
    for data in list(found):
        if data[:2] == b"\x1f\x8b":
            with contextlib.suppress(zlib.error, EOFError, OSError):
                inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
                found.append(inflater.decompress(data, _GUNZIPPED_LIMIT))
    return found


def _hinted_windows(run: str, grams: frozenset[str]) -> Iterable[str]:
    """The parts of an encoded run worth decoding: a long run whole; in a short one, from just
    before each encoded key prefix a key's length on (from gzip's magic, to the run's end)."""
    if len(run) >= _WHOLE_RUN:
        yield run
        return
    for start in range(len(run) - 3):
        if run[start : start + 4] in grams:
            if run.startswith("H4sI", start):
                yield run[start:]
            else:
                yield run[max(0, start - 8) : start + _ENCODED_WINDOW]


def _as_texts(data: bytes) -> list[str]:
    """Bytes as the texts they may be: UTF-8 (or single bytes) and UTF-16LE."""
    texts = [data.decode("latin-1")]
    if len(data) >= 2 and data[1::2].count(0) * 2 >= len(data) // 2:
        texts.append(data.decode("utf-16-le", "replace"))
    return texts


class _View(NamedTuple):
    """A text read as someone hiding a key wrote it, and where each of its characters is."""

    text: str
    place: Callable[[int], int]


def _nth(start: int, index: int) -> int:
    return start + 2 * index  # every other character from start


def _without(text: str, pattern: re.Pattern[str]) -> _View:
    """`text` without what `pattern` matches, each character mapped to where it was."""
    kept: list[int] = []
    pieces, position = [], 0
    for match in pattern.finditer(text):
        pieces.append(text[position : match.start()])
        kept += range(position, match.start())
        position = match.end()
    pieces.append(text[position:])
    kept += range(position, len(text))
    return _View("".join(pieces), kept.__getitem__)


# Any sign of a key hidden in plain sight (see hidden_views), in one search: most texts have none.
_HIDING_HINTED = _Matcher(
    "|".join(
        [
            *(re.escape(hint[::-1]) for hint in _KEY_HINTS),
            *(_interleaved(h) for h in _KEY_HINTS if len(h) >= 3),
            f"[{HIDDEN}\uff01-\uff5e\\\\]",
            r"""['"]\s*(?:\|\||\+|\.)\s*['"]""",
        ]
    )
)


def _hidden_views(text: str, interleaved: _Matcher | None) -> list[_View]:
    """The ways a key hides in plain sight: reversed, interleaved (`interleaved`: the secrets'
    starts so written), between hidden characters, fullwidth, markdown-escaped or cut by a
    concatenation; each read only where the text holds a sign of it."""
    if not _HIDING_HINTED.found_in(text) and not (interleaved and interleaved.found_in(text)):
        return []
    views = []
    reach = _ENCODED_WINDOW  # no key is longer; a long text is read only around each sign
    for _, end in _REVERSED_HINTS.spans(text)[:_SIGNS_READ]:
        first = max(0, end - reach)
        views.append(_View(text[first:end][::-1], functools.partial(operator.sub, end - 1)))
    signs = _INTERLEAVED_HINTS.spans(text) + (interleaved.spans(text) if interleaved else [])
    for start, _ in signs[:_SIGNS_READ]:
        views.append(_View(text[start : start + 2 * reach : 2], functools.partial(_nth, start)))
    if _HIDDEN_CHARACTER.search(text):
        views.append(_without(text, _HIDDEN_CHARACTER))
    if _FULLWIDTH_HINT.search(text):
        views.append(_View(text.translate(_FULLWIDTH), lambda i: i))
    if "\\" in text:
        views.append(_without(text, _MARKDOWN_ESCAPE))
    if ("|" in text or "+" in text or "." in text) and _CONCATENATION.search(text):
        views.append(_without(text, _CONCATENATION))
    return views


def _shape_spans(text: str) -> list[tuple[int, int]]:
    """Where the credentials masked by shape alone are: Basic authorization values, PEM
    private key blocks."""
    spans = []
    if "asic" in text or "ASIC" in text:  # `Authorization: Basic ...`, in any case
        spans += [m.span(1) for m in _BASIC_AUTHORIZATION.finditer(text)]
    if "PRIVATE KEY" in text:
        spans += [m.span() for m in _PEM_PRIVATE_KEY.finditer(text)]
    return spans


class Redactor:
    """The one redactor for every byte that leaves the process, applied after grading: the
    scorers, the judge and `verify` see the runs as they were; the journal, every writer, the
    terminal, the HTML page, the artifacts kept, live views, notices and every fatal `error:`
    line get the redacted form of every field, labels (case names, prompts, tags) included.

    Its secrets are the credentials in our environment and what every server this invocation
    resolved is given (see spec_secrets), learned before any server starts. Each is matched raw
    and in the forms servers echo it (see forms): JSON-escaped (once or twice), URL-encoded,
    base64 and base32 (at any byte alignment), hex, reversed, and with control characters shown
    escaped; and read through line breaks and escapes (READINGS): base64 wrapped at any width,
    starting mid-line, and a secret percent-encoded, `\\u`- or `\\x`-escaped or written as HTML
    entities (of every character or only some), or as hex bytes with separators. A run of
    C.PARTIAL_SECRET_CHARS or more of one (see partial_runs), wherever it is, is masked too: a
    secret cut where a text was cut, or split across two adjacent fields (each holding a part).
    Values shorter than MIN_LENGTH are not secrets: they are settings ("8080", "true") and
    masking them would mangle every text. Keys of a well-known shape (KEY_SHAPES) are masked
    too, told about or not: a key in a case's name, a prompt or a tool's output."""

    MIN_LENGTH = 6
    MASK = "[REDACTED]"
    learned: set[str] = set()  # what this invocation has seen; main() forgets it when it starts
    made: dict[frozenset[str], Redactor] = {}  # one redactor per set of secrets, built once

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        unique = {s for s in secrets if isinstance(s, str) and len(s.strip()) >= self.MIN_LENGTH}
        forms = {form for secret in unique for form in self.forms(secret)}
        # longest first: a token inside a header value, the whole of a secret before its part
        self.secrets = sorted(forms, key=len, reverse=True)
        self.shown = _Matcher.of_strings(self.secrets) if forms else None
        size = C.PARTIAL_SECRET_CHARS
        self.pieces = _pieces_of(self.secrets, size)  # see cut_runs
        # see may_hold: the forms too short to hold a block at a multiple of GRAM are looked for
        self.grams = _pieces_of(self.secrets, _GRAM)
        short = [form for form in self.secrets if len(form) < 2 * _GRAM - 1]
        self.short_forms = _Matcher.of_strings(short) if short else None
        # what partial_runs looks for: each secret as it is and as JSON shows it, cut in blocks
        self.run_sources = sorted(
            {s for r in unique for s in (r, _json_escaped(r)) if len(s) >= size}
        )
        self.block_places = _block_places(self.run_sources, _GRAM)
        self.blocks = _Matcher.of_strings(self.block_places) if self.block_places else None
        starts = {secret[:6] for secret in unique if len(secret) >= 6}
        self.interleaved = (
            _Matcher("|".join(_interleaved(start) for start in sorted(starts))) if starts else None
        )
        self.shared_prefixes = [
            source[: prefix.end() + _PAST_SHARED_PREFIX]
            for source in self.run_sources
            if (prefix := _SHARED_PREFIX.match(source))
        ]

    @staticmethod
    def forms(secret: str) -> set[str]:
        """`secret` as servers show it: as it is, escaped, encoded and reversed."""
        raw = secret.encode("utf-8", "surrogatepass")
        forms = _escaped_forms(secret)
        forms |= {raw.hex(), raw.hex().upper()}
        forms.add(raw.decode("latin-1"))  # percent-encoded or hex bytes, as READINGS decode them
        forms |= _base64_forms(raw) | _base32_forms(raw)
        forms |= _base64_forms(secret.encode("utf-16-le", "surrogatepass"))  # -EncodedCommand
        forms |= {secret[::-1], _json_escaped(secret[::-1])}
        forms.add(_MARKDOWN_ESCAPABLE.sub(r"\\\g<0>", secret))  # `sk\-ant\-api03\-...`
        return {form for form in forms if len(form) >= Redactor.MIN_LENGTH}

    @classmethod
    def learn(cls, servers: Sequence[ServerSpec]) -> None:
        for spec in servers:
            cls.learned.update(spec_secrets(spec))

    @classmethod
    def forget(cls) -> None:
        cls.learned = set()

    @classmethod
    def of(cls, secrets: Iterable[str]) -> Redactor:
        """The redactor of these secrets, made once per set (its patterns take a while to build)."""
        key = frozenset(secrets)
        if key not in cls.made:
            cls.made[key] = cls(key)
        return cls.made[key]

    @classmethod
    def for_run(cls, servers: Sequence[ServerSpec] = ()) -> Redactor:
        """Our environment's credentials, these servers' secrets, and every secret learned before."""
        cls.learn(servers)
        return cls.of([*_environment_secrets(), *cls.learned])

    def text(self, value: str) -> str:
        if not value:
            return value
        # Everything is looked for in the text as it came, and masked at once: masking what is
        # found first (a token) would hide from a reading what it is part of (its webhook URL,
        # in base32 over lines).
        spans = self.found(value) + _shape_spans(value)
        for reading in _READINGS:  # shown over lines, escaped, as hex bytes
            if reading.changes(value):
                found = self.found(reading.view(value))
                if found:
                    origins = reading.origins(value)
                    spans += [origins.span(start, end) for start, end in found]
        if len(value) >= C.PARTIAL_SECRET_CHARS:
            spans += self.hidden_runs(value) + self.encoded_runs(value)
        return self.masked(value, spans)

    def hidden_runs(self, text: str) -> list[tuple[int, int]]:
        """Where a key or a secret is written so that no reader of escapes sees it (see
        hidden_views): each found in its view, masked where its characters are."""
        spans = []
        for view in _hidden_views(text, self.interleaved):
            found = self.found(view.text)
            if _key_hinted(view.text):  # what precedes a key's start in a view is anyone's
                found += [m.span() for m in _KEY_ANYWHERE.finditer(view.text)]
            for start, end in found:
                first, last = sorted((view.place(start), view.place(end - 1)))
                spans.append((first, last + 1))
        return spans

    def encoded_runs(self, text: str) -> list[tuple[int, int]]:
        """Every encoded run (base64, hex, base32; gzip or UTF-16 inside) whose bytes hold a
        key no one told us about, or a secret inside a compressed blob: masked whole."""
        if not _encoded_hints().found_in(text):
            return []
        grams = _encoded_grams()
        spans = []
        for start, end in _ENCODED_RUNS.spans(text):
            run = text[start:end]
            if len(run) <= _ENCODED_RUN_LIMIT and any(
                self.holds_secret(t)
                for window in _hinted_windows(run, grams)
                for data in _decoded_candidates(window)
                for t in _as_texts(data)
            ):
                spans.append((start, end))
        return spans

    def holds_secret(self, text: str) -> bool:
        """Whether `text` holds a key of a well-known shape, a secret, or a shape-masked one."""
        if _key_hinted(text) and _KEY_ANYWHERE.search(text):  # decoded: what precedes is anyone's
            return True
        return bool(_shape_spans(text)) or (
            self.shown is not None and self.may_hold(text) and self.shown.found_in(text)
        )

    def found(self, text: str) -> list[tuple[int, int]]:
        """Where the secrets, their runs and the keys are in `text`."""
        spans = [match.span() for match in _KEY_SHAPED.finditer(text)] if _key_hinted(text) else []
        if self.shown is None or not self.may_hold(text):
            return spans
        spans += self.shown.spans(text)
        rest = _blanked(text, spans)  # a whole secret found holds runs of it: not again
        return spans + self.partial_runs(rest) + self.cut_runs(rest)

    def may_hold(self, text: str) -> bool:
        """Whether `text` may hold a form of a secret or a run of one, told by a few lookups:
        anything of 2 * GRAM - 1 characters or more in it holds one of its blocks of GRAM
        characters at a multiple of GRAM, and one of a form holds a GRAM of that form (a shorter
        form is looked for as it is). Most short texts hold none; a long one is searched as it
        is (RE2 reads it faster than this)."""
        if len(text) >= _Matcher.LONG_TEXT:
            return True
        grams = self.grams
        if any(text[i : i + _GRAM] in grams for i in range(0, len(text) - _GRAM + 1, _GRAM)):
            return True
        return self.short_forms is not None and self.short_forms.found_in(text)

    def masked(self, value: str, spans: list[tuple[int, int]]) -> str:
        if not spans:
            return value
        pieces, position = [], 0
        for start, end in _merged(spans):
            pieces += [value[position:start], self.MASK]
            position = end
        return "".join(pieces) + value[position:]

    def partial_runs(self, text: str) -> list[tuple[int, int]]:
        """Where C.PARTIAL_SECRET_CHARS or more characters of a secret (as it is, or JSON-escaped)
        stand in a row: what is left of one cut, quoted in part, or split across two fields
        (`{"a": "sk-ant-api03-Xy...", "b": "...Qz"}`, two tool calls' arguments): each part of a
        split is masked where it is, so the parts read together give no run back either. Such a
        run holds at least one whole block of GRAM characters at a multiple of GRAM in its
        secret (blocks are half a run long): those are looked for, all at once, and each found
        is followed both ways as far as its secret goes. Not a run that is little more than what
        anyone's may start with (see ours)."""
        if self.blocks is None or len(text) < C.PARTIAL_SECRET_CHARS:
            return []
        spans: list[tuple[int, int]] = []
        reached = 0
        for start, end in self.blocks.spans(text):
            if start < reached:  # inside a run already found
                continue
            for source, offset in self.block_places[text[start:end]]:
                first, last = _run_around(text, start, source, offset, _GRAM)
                if last - first >= C.PARTIAL_SECRET_CHARS and self.ours(text[first:last]):
                    spans.append((first, last))
                    reached = max(reached, last)
        return spans

    def ours(self, run: str) -> bool:
        """Whether a run of one of our secrets gives some of it away: not when it lies within what
        it may share with anyone's (SHARED_PREFIX) and the few characters after that."""
        return not any(run in prefix for prefix in self.shared_prefixes)

    def cut_runs(self, value: str) -> list[tuple[int, int]]:
        """Where runs of a secret's forms are left where the text was cut: at its start and end,
        and on each side of a truncation mark or an ellipsis."""
        size = C.PARTIAL_SECRET_CHARS
        if len(value) < size or not self.pieces:
            return []
        marks = _CUT_MARKS.finditer(value) if "..." in value or "…" in value else ()
        bounds = [(0, 0), *(mark.span() for mark in marks), (len(value), len(value))]
        reach = len(self.secrets[0]) + 64  # no run is longer than the longest form (first)
        spans = []
        for start, end in bounds:
            earliest = max(0, start - reach)
            before = value[earliest:start].rstrip(" \t\"'`.,;:)]}")
            if len(before) >= size and before[-size:] in self.pieces:
                stop = earliest + len(before)
                forms = self.forms_with(before[-size:])
                spans.append((stop - _run_length(before, forms, backwards=True), stop))
            following = value[end : end + reach]
            after = following.lstrip(" \t\"'`([{")
            if len(after) >= size and after[:size] in self.pieces:
                offset = end + len(following) - len(after)
                forms = self.forms_with(after[:size])
                spans.append((offset, offset + _run_length(after, forms, backwards=False)))
        return [(start, end) for start, end in spans if self.ours(value[start:end])]

    def forms_with(self, piece: str) -> list[str]:
        return [form for form in self.secrets if piece in form]

    def data(self, value: Any) -> Any:
        """JSON-like data, keys included."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, (list, tuple)):
            return type(value)(self.data(v) for v in value)
        if isinstance(value, dict):
            return {self.data(k): self.data(v) for k, v in value.items()}
        return value

    def deep(self, value: Any) -> Any:
        """A copy of a record (pydantic model, dataclass, or JSON-like data) with every text in
        it redacted; the original is left as it was, for grading."""
        if isinstance(value, SpooledRecords):  # read redacted as it streams
            return MappedRecords(value, self.deep)
        if isinstance(value, BaseModel):
            return value.model_copy(
                update={name: self.deep(getattr(value, name)) for name in type(value).model_fields}
            )
        if is_dataclass(value) and not isinstance(value, type):
            return replace(
                value,
                **{
                    f.name: self.deep(getattr(value, f.name))
                    for f in dataclass_fields(value)
                    if f.init
                },
            )
        if isinstance(value, (list, tuple)):
            return type(value)(self.deep(v) for v in value)
        if isinstance(value, dict):
            return {self.deep(k): self.deep(v) for k, v in value.items()}
        return self.text(value) if isinstance(value, str) else value

    def masked_bytes(self, data: bytes) -> bytes:
        """A file's bytes with every secret masked (bytes that are not UTF-8 kept as they are)."""
        text = data.decode("utf-8", "surrogateescape")
        return self.text(text).encode("utf-8", "surrogateescape")


# the secrets of an earlier invocation in this process are not this one's
FORGOTTEN_AT_START.append(Redactor.forget)


def error_line(text: Any) -> str:
    """A fatal line as printed: redacted first (a server's stderr, a URL, an API message may hold
    a secret), then escaped for the terminal."""
    return f"error: {terminal_text(Redactor.for_run().text(str(text)))}"


def report_input_error(exc: InputError) -> None:
    """Bad input: one `error:` line a problem; on GitHub Actions an `::error` on its file and line
    too, so a typo in a suite shows where it is on the pull request."""
    for text in str(exc).splitlines():  # several problems of one file: one line each
        click.echo(error_line(text), err=True)
    if not on_github_actions():
        return
    redactor = Redactor.for_run()
    for problem in exc.problems if isinstance(exc, InputProblems) else [exc]:
        path = str(problem.path) if problem.path else ""
        text = problem.message + (f" ({problem.hint})" if problem.hint else "")
        line = workflow_command(
            "error",
            text,
            file=workspace_path(path) if path else "",
            line=problem.line or 0,
            title="bad input",
        )
        click.echo(redactor.text(line), err=True)
