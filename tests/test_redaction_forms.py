"""The redactor's hidden forms, property by property (hypothesis draws the keys and the text
around them): a key of a well-known shape no one told us about in every encoding the known
secrets already get (base64 at any offset, hex, base32, reversed, zero-width characters between
its characters, fullwidth, gzip+base64, percent-encoding, markdown-escaped, SQL-concatenated,
interleaved), a Basic authorization's value, a PEM private key block (raw or with escaped line
breaks), and a known secret as UTF-16LE base64 (PowerShell's -EncodedCommand), markdown-escaped,
SQL-concatenated and interleaved with characters. Each form goes through the redactor, and
through the JSON and the HTML writers (what they write holds no form and no key)."""

from __future__ import annotations

import base64
import gzip
import json
import urllib.parse
from collections.abc import Callable
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claude_tool_evaluator import finished_run as E
from claude_tool_evaluator.redaction import Redactor
from claude_tool_evaluator.results_schema.document import CaseResult, Metadata
from claude_tool_evaluator.writers.formats import write_results_json
from claude_tool_evaluator.writers.html import write_html_report

ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
KEYS = st.one_of(
    st.text(ALNUM, min_size=36, max_size=40).map(lambda body: "ghp_" + body),
    st.text(ALNUM + "_", min_size=30, max_size=40).map(lambda body: "github_pat_" + body),
    st.text(ALNUM + "-_", min_size=30, max_size=40).map(lambda body: "sk-ant-api03-" + body),
    st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", min_size=16, max_size=16).map(
        lambda body: "AKIA" + body
    ),
    st.text(ALNUM, min_size=24, max_size=30).map(lambda body: "xoxb-1234-" + body),
)
AROUND = st.text("abcdefghij klmnop,.:;", max_size=20)  # what the form sits between


def fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def markdown_escaped(text: str) -> str:
    return "".join("\\" + c if c in "\\`*_{}[]()#+-.!|<>~" else c for c in text)


# How a key (told about or not) is written so that no raw search finds it.
KEY_FORMS: dict[str, Callable[[str], str]] = {
    "base64": lambda k: base64.b64encode(k.encode()).decode(),
    "base64 at offset 1": lambda k: base64.b64encode(b"x" + k.encode()).decode(),
    "base64 at offset 2": lambda k: base64.b64encode(b"xy" + k.encode()).decode(),
    "url-safe base64": lambda k: base64.urlsafe_b64encode(k.encode()).decode().rstrip("="),
    "hex": lambda k: k.encode().hex(),
    "HEX": lambda k: k.encode().hex().upper(),
    "base32": lambda k: base64.b32encode(k.encode()).decode(),
    "reversed": lambda k: k[::-1],
    "split by zero-width": lambda k: "\u200b".join(k),
    "fullwidth": fullwidth,
    "gzip+base64": lambda k: base64.b64encode(gzip.compress(k.encode(), mtime=0)).decode(),
    "percent-encoded": lambda k: "".join(f"%{b:02X}" for b in k.encode()),
    "markdown-escaped": markdown_escaped,
    "SQL-concatenated": lambda k: f"'{k[:9]}' || '{k[9:]}'",
    "interleaved": lambda k: "".join(c + "." for c in k),
    "UTF-16LE base64": lambda k: base64.b64encode(f"echo {k}".encode("utf-16-le")).decode(),
    "Basic authorization": lambda k: (
        "Authorization: Basic " + base64.b64encode(f"x-access-token:{k}".encode()).decode()
    ),
}
NO_SECRETS = Redactor([])  # keys by their shape alone: no one told the redactor about them


def leaks(masked: str, key: str, shown: str) -> bool:
    return key in masked or shown in masked or key[-20:] in masked


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=KEYS, before=AROUND, after=AROUND)
def test_a_well_known_key_is_masked_in_every_form(key: str, before: str, after: str):
    for name, form in KEY_FORMS.items():
        shown = form(key)
        masked = NO_SECRETS.text(f"{before} {shown} {after}")
        assert not leaks(masked, key, shown), (name, masked)
        assert "[REDACTED]" in masked, name


# A secret we were told about (an API key of no well-known shape, a password).
SECRETS = st.text(ALNUM + "-_!", min_size=16, max_size=32).filter(lambda s: len(set(s)) > 6)
SECRET_FORMS = {
    name: KEY_FORMS[name]
    for name in ("UTF-16LE base64", "markdown-escaped", "SQL-concatenated", "interleaved")
}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secret=SECRETS, before=AROUND, after=AROUND)
def test_a_known_secret_is_masked_in_its_new_forms(secret: str, before: str, after: str):
    redactor = Redactor([secret])
    for name, form in SECRET_FORMS.items():
        shown = form(secret)
        masked = redactor.text(f"{before} {shown} {after}")
        assert secret not in masked and shown not in masked, (name, masked)


PEM_BODY = st.text(ALNUM + "+/", min_size=64, max_size=200)


@settings(max_examples=25, deadline=None)
@given(body=PEM_BODY, kind=st.sampled_from(["RSA ", "OPENSSH ", "EC ", "", "ENCRYPTED "]))
def test_a_pem_private_key_block_is_masked_raw_or_escaped(body: str, kind: str):
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    block = "\n".join(
        [f"-----BEGIN {kind}PRIVATE KEY-----", *lines, f"-----END {kind}PRIVATE KEY-----"]
    )
    for shown in (block, json.dumps(block), block.split("-----END")[0]):  # cut short, too
        masked = NO_SECRETS.text(f"key: {shown} done")
        assert body[:32] not in masked and body[-16:] not in masked, masked
        assert masked.startswith("key: ") and "[REDACTED]" in masked


def results_holding(texts: list[str]) -> E.Results:
    """A results document whose cases' names, prompts and reasons hold `texts`."""
    cases = [
        CaseResult(
            name=f"case {i}",
            kind="case",
            passed=False,
            prompt=text,
            reasons={text: 1},
            description=text,
        )
        for i, text in enumerate(texts)
    ]
    return E.Results(
        Metadata(total_results=0, generated_at="now", mode="batch", evaluation="tools", model="m"),
        False,
        E.SummaryRecord(cases=len(cases), passed=0, failed=len(cases)),
        cases,
        lambda: (),
        0,
        {},
        "forms",
    )


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=KEYS)
def test_every_form_is_masked_through_the_json_and_html_writers(key: str, tmp_path_factory):
    folder = tmp_path_factory.mktemp("writers")
    shown = [form(key) for form in KEY_FORMS.values()]
    results = results_holding(shown).redacted()  # what every writer reads (write_outputs)
    write_results_json(str(folder / "r.json"), results)
    write_html_report(str(folder / "r.html"), results)
    for path in (Path(folder / "r.json"), Path(folder / "r.html")):
        written = path.read_text(encoding="utf-8")
        readable = urllib.parse.unquote(written)
        for name, form in zip(KEY_FORMS, shown):
            assert form not in written and form not in readable, (path.name, name)
        assert key not in written and "REDACTED" in written, path.name
