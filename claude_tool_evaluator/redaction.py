"""Secrets: one redactor for every byte that leaves the process (the API key, every server's
credentials, what looks like a credential), in every sink and encoding it knows.

May import: errors, stopping, sinks, files, records."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import fields as dataclass_fields
from dataclasses import is_dataclass, replace
from typing import TYPE_CHECKING, Any

import click
from pydantic import BaseModel

import test_constants as C

from .errors import InputProblems
from .files import MappedRecords, SpooledRecords
from .sinks import HIDDEN, on_github_actions, terminal_text, workflow_command, workspace_path
from .stopping import FORGOTTEN_AT_START

if TYPE_CHECKING:
    from .errors import InputError
    from .records import ServerSpec


# A name that says its value is a credential: an env variable, a header, a URL query parameter or
# a command-line flag, split into its words (`GITHUB_TOKEN`, `X-Api-Key`, `--db-password`). Not a
# substring match: `AUTHOR`, `KEYSPACE` and `MONKEY` hold no credential.
SECRET_WORD = re.compile(
    r"\w*(?:KEY|TOKEN|SECRETS?|PASSW(?:OR)?DS?)|PASS|PASSPHRASE|PWD?|CREDENTIALS?|BEARER|COOKIE"
    r"|PRIVATE|DSN|AUTH(?:ORIZATION|N|Z|TOKEN|KEY)?",
    re.IGNORECASE,
)


# The short flags whose next argument is a password (`mysql -p`, `psql`-style wrappers).
SECRET_SHORT_FLAGS = ("-p",)


# What our own one-line sinks (error lines, the terminal) show escaped: a secret holding a line
# break or a control character is matched in that shape too.
ESCAPED_IN_LINES = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029{HIDDEN}]")


# `scheme://user:password@host`, anywhere in a value (a DSN inside `--db=...` too).
URL_WITH_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@]*@[^\s]*")


# Where a text was cut: our own truncation marks (cap_text, one_line, tail) and an ellipsis.
CUT_MARKS = re.compile(r"\n?\.\.\.\[truncated [^\]]*\]|…|\.\.\.")


# What a reader reads through, and so does the redactor (see read_through): a line break with the
# next line's indentation, raw or JSON-escaped (a base64 or hex text wrapped at any width starts
# and ends mid-line: `base64` wraps at 76, `openssl base64` at 64, `xxd -p` at 60), and a
# percent-escape (`%2D` or `%2d`, of any byte or only some).
LINE_BREAK = r"\r?\n[ \t]*|\\r\\n|\\n"
LINE_BREAKS = re.compile(LINE_BREAK)
READ_THROUGH = re.compile(r"%[0-9A-Fa-f]{2}|" + LINE_BREAK)


# Credentials by their shape, whoever's they are and whether or not we were told about them: the
# well-known prefixes of API keys and tokens, each followed by as many characters as the real
# ones have at least (a prefix named in prose, a placeholder like `sk-ant-...`, a tool name like
# `hf_hub_download` or a hash is not a key). Not inside a longer word (`task-`, `disk-`).
KEY_SHAPES = (
    r"sk-ant-[A-Za-z0-9_-]{20,}",  # Anthropic: sk-ant-api03-, sk-ant-admin01-, sk-ant-oat01-
    r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}",  # OpenAI project, service and admin keys
    r"sk-[A-Za-z0-9]{32,}",  # OpenAI's older keys: sk- and 48 letters and digits
    r"gh[pousr]_[A-Za-z0-9]{36,}",  # GitHub: personal, OAuth, user-to-server, server, refresh
    r"github_pat_[A-Za-z0-9_]{22,}",  # GitHub's fine-grained tokens
    r"(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])",  # AWS access key IDs (long-lived, temporary)
    r"xox[abeoprs]-[A-Za-z0-9-]{20,}",  # Slack bot, user, app-level and refresh tokens
    r"AIza[A-Za-z0-9_-]{35}",  # Google API keys
    r"hf_[A-Za-z0-9]{30,}",  # Hugging Face
    r"[rs]k_(?:live|test)_[A-Za-z0-9]{20,}",  # Stripe secret and restricted keys
    r"glpat-[A-Za-z0-9_-]{20,}",  # GitLab personal access tokens
    r"npm_[A-Za-z0-9]{36,}",  # npm
    r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",  # PyPI API tokens
)
KEY_SHAPED = re.compile("(?<![A-Za-z0-9])(?:" + "|".join(KEY_SHAPES) + ")")
# What each key shape starts with: a text holding none of them holds no key, and `in` tells so
# far faster than KEY_SHAPED (most texts hold none).
KEY_HINTS = (
    *("sk-", "sk_", "rk_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "AKIA", "ASIA"),
    *("xox", "AIza", "hf_", "glpat-", "npm_", "pypi-"),
)


def key_hinted(text: str) -> bool:
    return any(hint in text for hint in KEY_HINTS)


def read_through(text: str) -> str:
    """`text` as a reader reads it (READ_THROUGH): line breaks dropped, percent-escapes decoded,
    each to the character of its byte (a secret's UTF-8 bytes are matched so too, see forms)."""
    if "%" in text:
        return READ_THROUGH.sub(read_through_character, text)
    return LINE_BREAKS.sub("", text)  # the same, faster


def read_through_changes(text: str) -> bool:
    """Whether read_through could find more in `text` than there is as it stands: it has a line
    break between two of its characters (a break at either end joins nothing, and many texts end
    with one), or a percent-escape. `in` first: it tells faster, and most texts have neither."""
    inner = text.strip()
    hinted = "\n" in inner or "%" in inner or "\\n" in inner
    return hinted and READ_THROUGH.search(inner) is not None


def read_through_character(match: re.Match[str]) -> str:
    escape = match.group()
    return chr(int(escape[1:], 16)) if escape.startswith("%") else ""


def read_through_origins(text: str) -> tuple[list[int], list[int]]:
    """Where each character of read_through(text) starts, and where it ends, in `text`: two
    lists as long as that text, so built only when something was found in it."""
    starts: list[int] = []
    ends: list[int] = []
    position = 0
    for match in READ_THROUGH.finditer(text):
        starts += range(position, match.start())
        ends += range(position + 1, match.start() + 1)
        if match.group().startswith("%"):
            starts.append(match.start())
            ends.append(match.end())
        position = match.end()
    starts += range(position, len(text))
    ends += range(position + 1, len(text) + 1)
    return starts, ends


def merged(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans in order, those that overlap or touch made one."""
    joined: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if joined and start <= joined[-1][1]:
            joined[-1] = (joined[-1][0], max(end, joined[-1][1]))
        else:
            joined.append((start, end))
    return joined


def secret_name(name: str) -> bool:
    return any(SECRET_WORD.fullmatch(word) for word in re.split(r"[^A-Za-z0-9]+", name) if word)


def entropy_bits(text: str) -> float:
    """Shannon entropy per character."""
    import math

    counts: dict[str, int] = {}
    for char in text:
        counts[char] = counts.get(char, 0) + 1
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def looks_random(value: str) -> bool:
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
    return changes >= len(core) // 4 and entropy_bits(core) >= C.RANDOM_SECRET_MIN_ENTROPY


# Webhook URLs whose path is their credential: the host, and the path before the secret part.
WEBHOOK_PATHS = (
    (re.compile(r"hooks\.slack\.com"), re.compile(r"/(?:services|workflows|triggers)/")),
    (re.compile(r"(?:[\w-]+\.)?discord(?:app)?\.com"), re.compile(r"/api(?:/v\d+)?/webhooks/")),
)
# A path segment that is an identifier rather than a credential, however random it looks.
UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")

# `user:password@host` without a scheme: Go's MySQL DSN (`app:pw@tcp(db:3306)/shop`), Redis's
# `default:pw@cache:6379`. Not an image digest (`postgres:16@sha256:...`) nor a mail address.
BARE_USERINFO = re.compile(r"(?<![\w/:@.+-])(?!mailto:)[\w.+-]+:([^\s:@/]+)@(?!sha\d+:)[\w.-]+")

# A connection string's `Key=Value` pairs: `;`-separated (ADO.NET, ODBC, JDBC's
# `;password=...;`), a value quoted or braced or not; or libpq's space-separated ones.
CONNECTION_STRING_PAIR = re.compile(
    r"""(?:^|;)\s*([^=;]+?)\s*=\s*("(?:[^"]|"")*"|'(?:[^']|'')*'|\{(?:[^}]|\}\})*\}|[^;]*)"""
)
SPACED_PAIR = re.compile(r"""(?:^|\s)([\w.-]+)\s*=\s*('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|\S+)""")


def url_secrets(value: str) -> list[str]:
    """The credentials of every URL in a value: its password (`postgresql://user:PASS@host/db`,
    any scheme), a user name that looks random (`https://TOKEN@host/...`), its query parameters
    that are credential-named (`?api_key=X`) or look random (`?sig=...`), and the secret part of
    its path (see path_secrets)."""
    import urllib.parse

    found = []
    for match in URL.finditer(value):
        try:
            parts = urllib.parse.urlsplit(match.group())
            password, user = parts.password, parts.username
        except ValueError:
            continue
        if password:
            found += [password, urllib.parse.unquote(password)]
        if user and looks_random(urllib.parse.unquote(user)):
            found += [user, urllib.parse.unquote(user)]
        queries = urllib.parse.parse_qsl(parts.query)
        found += [v for k, v in queries if secret_name(k) or looks_random(v)]
        found += path_secrets(parts.hostname or "", parts.path)
    return found


def path_secrets(host: str, path: str) -> list[str]:
    """A webhook's secret path: Slack's `T.../B.../...` after `/services/`, Discord's `ID/TOKEN`
    after `/api/webhooks/` (and the token alone), and any other URL's random-looking path
    segments (`/hooks/incoming/3fQ...`), UUIDs aside."""
    for host_shape, path_before in WEBHOOK_PATHS:
        before = path_before.match(path)
        if host_shape.fullmatch(host) and before:
            secret = path[before.end() :].strip("/")
            return [secret, secret.rsplit("/", 1)[-1]]
    return [part for part in path.split("/") if looks_random(part) and not UUID.fullmatch(part)]


def connection_string_secrets(value: str) -> list[str]:
    """The values of a connection string's credential-named keys (`Password=`, `Pwd=`,
    `AccountKey=`, `SharedAccessKey=`; `User Id=` is not one), quoted or not."""
    if "=" not in value:
        return []
    pairs = CONNECTION_STRING_PAIR if ";" in value else SPACED_PAIR
    found = []
    for match in pairs.finditer(value):
        name, secret = match.groups()
        if secret_name(name):
            found += [secret, unquoted(secret)]
    return found


def unquoted(value: str) -> str:
    """A connection string's value without its quotes or braces (a doubled one is one)."""
    if len(value) >= 2 and value[0] + value[-1] in ('""', "''", "{}"):
        return value[1:-1].replace(value[-1] * 2, value[-1])
    return value


def bare_userinfo_secrets(value: str) -> list[str]:
    return [match.group(1) for match in BARE_USERINFO.finditer(value)] if "@" in value else []


# What is inside a value, whatever its name: the credentials of its URLs, of its connection
# string, and of a `user:password@host` without a scheme.
EMBEDDED_SECRETS: tuple[Callable[[str], list[str]], ...] = (
    url_secrets,
    connection_string_secrets,
    bare_userinfo_secrets,
)


def embedded_secrets(value: str) -> list[str]:
    return [secret for find in EMBEDDED_SECRETS for secret in find(value)]


def value_secrets(name: str, value: str) -> list[str]:
    """What a named value gives the redactor: all of it when its name says it is a credential or
    it looks random, and the credentials inside it either way (EMBEDDED_SECRETS)."""
    if secret_name(name) or looks_random(value):
        return [value, *embedded_secrets(value)]
    return embedded_secrets(value)


def argument_secrets(args: Sequence[str]) -> list[str]:
    """The secrets of a command line: the value of a credential-named flag (`--token X`,
    `--api-key=X`, `--key X`, `-p X`), the credentials inside an argument (EMBEDDED_SECRETS),
    and arguments that look random."""
    found = []
    for index, arg in enumerate(args):
        name, sep, value = arg.partition("=")
        flag = arg.startswith("-")
        if flag and sep:
            found += value_secrets(name, value)
            continue
        found += [arg] if looks_random(arg) else embedded_secrets(arg)
        following = args[index + 1] if index + 1 < len(args) else None
        if (
            flag
            and following is not None
            and not following.startswith("-")  # `--no-auth --port 8080`: no value
            and (secret_name(arg) or arg in SECRET_SHORT_FLAGS)
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
        found += value_secrets(name, value)
        if secret_name(name) and " " in value:
            found.append(value.split(" ", 1)[-1])
    found += embedded_secrets(spec.url) if spec.url else []
    found += argument_secrets([spec.command, *spec.args])
    return [s for s in found if s]


API_CREDENTIALS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


def environment_without_credentials(**extra: str) -> dict[str, str]:
    """Our environment for a child that needs no API credentials (a `verify` command): without
    the API key and token, plus `extra`."""
    env = {name: value for name, value in os.environ.items() if name not in API_CREDENTIALS}
    env.update(extra)
    return env


def environment_secrets() -> list[str]:
    """Our own environment's credentials: the API key and token, and every variable whose name
    says it holds one (`GITHUB_TOKEN` in CI), unless its value is a path (`SSH_AUTH_SOCK`)."""
    return [
        value
        for name, value in os.environ.items()
        if name in API_CREDENTIALS or (secret_name(name) and not os.path.isabs(value))
    ]


class Redactor:
    """The one redactor for every byte that leaves the process, applied after grading: the
    scorers, the judge and `verify` see the runs as they were; the journal, every writer, the
    terminal, the HTML page, the artifacts kept, live views, notices and every fatal `error:`
    line get the redacted form of every field, labels (case names, prompts, tags) included.

    Its secrets are the credentials in our environment and what every server this invocation
    resolved is given (see spec_secrets), learned before any server starts. Each is matched raw
    and in the forms servers echo it: JSON-escaped (once or twice), URL-encoded, base64 (at any
    byte alignment), hex, and with control characters shown escaped; and read through line
    breaks and percent-escapes (READ_THROUGH): base64 wrapped at any width, starting mid-line,
    and a secret percent-encoded byte by byte, or only some of its bytes. A run of
    C.PARTIAL_SECRET_CHARS or more of one where a text was cut (its start or end, a truncation
    mark, an ellipsis) is masked too. Values shorter than MIN_LENGTH are not secrets: they are
    settings ("8080", "true") and masking them would mangle every text. Keys of a well-known
    shape (KEY_SHAPES) are masked too, told about or not: a key in a case's name, a prompt or a
    tool's output."""

    MIN_LENGTH = 6
    MASK = "[REDACTED]"
    learned: set[str] = set()  # what this invocation has seen; main() forgets it when it starts
    made: dict[frozenset[str], Redactor] = {}  # one redactor per set of secrets, built once

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        unique = {s for s in secrets if isinstance(s, str) and len(s.strip()) >= self.MIN_LENGTH}
        forms = {form for secret in unique for form in self.forms(secret)}
        # longest first: a token inside a header value, the whole of a secret before its part
        self.secrets = sorted(forms, key=len, reverse=True)
        self.pattern = re.compile("|".join(map(re.escape, self.secrets))) if forms else None
        size = C.PARTIAL_SECRET_CHARS
        self.pieces = {f[i : i + size] for f in self.secrets for i in range(len(f) - size + 1)}

    @staticmethod
    def forms(secret: str) -> set[str]:
        import base64
        import urllib.parse

        once = json.dumps(secret)[1:-1]
        forms = {
            secret,
            once,
            json.dumps(secret, ensure_ascii=False)[1:-1],
            json.dumps(once)[1:-1],
            once.replace("/", "\\/"),
            repr(secret)[1:-1],
            ESCAPED_IN_LINES.sub(
                lambda m: m.group().encode("unicode_escape").decode("ascii"), secret
            ),
            urllib.parse.quote(secret, safe=""),
            urllib.parse.quote_plus(secret, safe=""),
            urllib.parse.quote(secret),
        }
        raw = secret.encode("utf-8", "surrogatepass")
        forms |= {raw.hex(), raw.hex().upper()}
        forms.add(raw.decode("latin-1"))  # percent-encoded, as read_through decodes its bytes
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            forms |= {encode(raw).decode("ascii"), encode(raw).decode("ascii").rstrip("=")}
            for shift in range(3):
                # Inside a longer base64 text the secret starts at some byte offset: the characters
                # that only its own bits make up are the same whatever comes before or after.
                encoded = encode(b"\0" * shift + raw).decode("ascii")
                start, end = -(-shift * 8 // 6), (shift + len(raw)) * 8 // 6
                forms.add(encoded[start:end])
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
        return cls.of([*environment_secrets(), *cls.learned])

    def text(self, value: str) -> str:
        if not value:
            return value
        # most of what there is to mask, fast: the secrets as they are shown, and keys
        if self.pattern is not None:
            value = self.pattern.sub(self.MASK, value)
        if key_hinted(value):
            value = KEY_SHAPED.sub(self.MASK, value)
        if not read_through_changes(value):
            return self.masked(value, self.cut_runs(value))
        # what is left: shown over lines, percent-encoded, or both
        view = read_through(value)
        spans = self.found(view) + self.cut_runs(view)
        if not spans:
            return value
        starts, ends = read_through_origins(value)
        return self.masked(value, [(starts[start], ends[end - 1]) for start, end in spans])

    def found(self, text: str) -> list[tuple[int, int]]:
        """Where the secrets and the keys are in `text`."""
        matchers = [self.pattern] if self.pattern is not None else []
        matchers += [KEY_SHAPED] if key_hinted(text) else []
        return [match.span() for matcher in matchers for match in matcher.finditer(text)]

    def masked(self, value: str, spans: list[tuple[int, int]]) -> str:
        if not spans:
            return value
        pieces, position = [], 0
        for start, end in merged(spans):
            pieces += [value[position:start], self.MASK]
            position = end
        return "".join(pieces) + value[position:]

    def cut_runs(self, value: str) -> list[tuple[int, int]]:
        """Where runs of a secret are left where the text was cut: at its start and end, and on
        each side of a truncation mark or an ellipsis."""
        size = C.PARTIAL_SECRET_CHARS
        if len(value) < size or not self.pieces:
            return []
        marks = CUT_MARKS.finditer(value) if "..." in value or "…" in value else ()
        bounds = [(0, 0), *(mark.span() for mark in marks), (len(value), len(value))]
        reach = len(self.secrets[0]) + 64  # no run is longer than the longest form (first)
        spans = []
        for start, end in bounds:
            earliest = max(0, start - reach)
            before = value[earliest:start].rstrip(" \t\"'`.,;:)]}")
            if len(before) >= size and before[-size:] in self.pieces:
                stop = earliest + len(before)
                spans.append((stop - self.run_length(before, backwards=True), stop))
            following = value[end : end + reach]
            after = following.lstrip(" \t\"'`([{")
            if len(after) >= size and after[:size] in self.pieces:
                offset = end + len(following) - len(after)
                spans.append((offset, offset + self.run_length(after, backwards=False)))
        return spans

    def run_length(self, text: str, backwards: bool) -> int:
        """How much of the end (or start) of `text` is one run of some secret form."""
        best = 0
        for form in self.secrets:
            longest = min(len(form), len(text))
            for length in range(longest, best, -1):
                part = text[-length:] if backwards else text[:length]
                if part in form:
                    best = length
                    break
        return best

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
