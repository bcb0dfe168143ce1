"""The hostile room: a text as a model reads it, for scan. Hidden characters decoded into the text
they smuggle (tag characters, variation selectors) or dropped, look-alike letters folded to the
Latin ones they imitate (compatibility forms, Cyrillic and Greek homoglyphs, accents), and base64
or hex decoded, also when split by spaces or line breaks. The tables here are data.

May import: the rooms above scoring (sinks)."""

from __future__ import annotations

import base64
import binascii
import codecs
import functools
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..sinks import HIDDEN_UNSAFE

__all__ = [
    "Payload",
    "Reading",
    "VARIATION_SELECTOR",
    "as_read",
    "encoded_payloads",
    "hidden_flag",
    "look_alikes_folded",
    "plain",
    "readings",
    "selector_text",
    "tag_decoded",
]

# A scanner that matches the bytes misses what a model reads through: "іgnоrе" in Cyrillic,
# "ｉｇｎｏｒｅ" in full-width or "𝗶𝗴𝗻𝗼𝗿𝗲" in mathematical letters, a sentence in tag
# characters or variation selectors (invisible, yet tokens the model is given), base64 in
# 8-character chunks. Scan matches its phrases against `readings(text)`: the text so read, then
# every payload decoded from it.

# Cyrillic, Greek and other letters drawn like a Latin one (Unicode's confusables.txt, the letters
# of these scripts whose skeleton is a single Latin letter), and the quotes a phrase may use.
_CONFUSABLES = str.maketrans(
    {
        **dict(zip("аԁеһіјӏорԛѕԝхусɡ", "adehijlopqswxycg", strict=True)),
        **dict(zip("АВСЕНІЈКМОРЅТХУԚԜӀҮ", "ABCEHIJKMOPSTXYQWIY", strict=True)),
        **dict(zip("αιοκνρτυχϲϳ", "aiokvptuxcj", strict=True)),
        **dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧ", "ABEZHIKMNOPTYX", strict=True)),
        **dict(zip("ıȷɑօսհ", "ijaouh", strict=True)),
        **dict.fromkeys("‘’‚‛′ʼˈ´", "'"),
        **dict.fromkeys("“”„‟″", '"'),
    }
)

# The basic variation selectors (VS1-16) and the supplement (VS17-256). One after a character
# picks its glyph (an emoji's colour form, a kanji's variant); a run of them is no glyph choice
# but bytes: 0-15 as U+FE00-FE0F, 16-255 as U+E0100-E01EF ("emoji smuggling"), or two basic
# selectors a byte, its high and low half.
_VARIATION_SELECTORS = "\ufe00-\ufe0f\U000e0100-\U000e01ef"  # a character class's body
VARIATION_SELECTOR = re.compile(f"[{_VARIATION_SELECTORS}]")
_VARIATION_SELECTOR_RUN = re.compile(f"[{_VARIATION_SELECTORS}]{{2,}}")
_BASIC_SELECTORS = re.compile("[\ufe00-\ufe0f]+")

# A subdivision flag (🏴 then two to six tag letters or digits, then CANCEL TAG) is the one use
# of tag characters in ordinary text: the flag of Scotland, England, Wales.
_EMOJI_FLAG = re.compile("\U0001f3f4([\U000e0030-\U000e0039\U000e0061-\U000e007a]{2,6})\U000e007f")

# Runs of base64 (either alphabet) or hex words, separated by whitespace only: where a payload
# split into chunks or lines hides. Each word stands alone (not inside a longer word).
_BASE64_RUN = re.compile(
    r"(?<![\w+/=-])[A-Za-z0-9+/_-]+={0,2}(?:\s+[A-Za-z0-9+/_-]+={0,2})*(?![\w+/=-])"
)
_HEX_RUN = re.compile(r"(?<![\w])[0-9A-Fa-f]+(?:\s+[0-9A-Fa-f]+)*(?![\w])")
_MIN_PAYLOAD_CHARS = 8  # decoded text shorter than this is a word, not a message
_MAX_PAYLOAD_CHARS = 16_384  # a payload is decoded this far (a longer one is cut)
_READING_DEPTH = 3  # payloads inside payloads are decoded this many times deep


@dataclass(frozen=True)
class Reading:
    """What a model reads in a text (`text`), what had to be undone to read it (`how`: the steps
    and encodings that changed something), and for a payload the encoded words it came from."""

    text: str
    how: tuple[str, ...] = ()
    encoded: str = ""


def tag_decoded(text: str) -> str:
    """Tag characters as the ASCII they mirror (a subdivision flag's too); CANCEL TAG and the
    language tag dropped."""
    return "".join(
        chr(ord(c) - 0xE0000) if 0xE0020 <= ord(c) <= 0xE007E else c
        for c in text
        if not 0xE0000 <= ord(c) <= 0xE001F and ord(c) != 0xE007F
    )


def _selector_bytes(run: str) -> bytes:
    """The bytes a run of variation selectors encodes (see VARIATION_SELECTOR_RUN)."""
    if _BASIC_SELECTORS.fullmatch(run) and len(run) % 2 == 0:
        halves = [ord(c) - 0xFE00 for c in run]
        return bytes(high << 4 | low for high, low in zip(halves[::2], halves[1::2], strict=True))
    return bytes(ord(c) - 0xFE00 if ord(c) <= 0xFE0F else ord(c) - 0xE0100 + 16 for c in run)


def selector_text(run: str) -> str:
    return _selector_bytes(run).decode("utf-8", errors="replace")


def _selectors_decoded(text: str) -> str:
    """Runs of variation selectors as the text they encode; a lone one (a glyph choice) dropped."""
    text = _VARIATION_SELECTOR_RUN.sub(lambda m: selector_text(m.group()), text)
    return VARIATION_SELECTOR.sub("", text)


def _invisible_dropped(text: str) -> str:
    """Zero-width, bidi, blank and every other format, private-use or unassigned character gone,
    and control characters but tab and line breaks: a word split by them reads whole."""
    return "".join(
        c
        for c in HIDDEN_UNSAFE.sub("", text)
        if unicodedata.category(c) not in ("Cf", "Co", "Cn")
        and (unicodedata.category(c) != "Cc" or c in "\t\n\r")
    )


def _compatibility_folded(text: str) -> str:
    """NFKC: full-width, mathematical, circled, superscript letters as plain ones."""
    return unicodedata.normalize("NFKC", text)


def look_alikes_folded(text: str) -> str:
    return text.translate(_CONFUSABLES)


def _accents_dropped(text: str) -> str:
    decomposed = unicodedata.normalize("NFD", text)
    return unicodedata.normalize(
        "NFC", "".join(c for c in decomposed if not unicodedata.combining(c))
    )


# The steps from the characters a definition holds to the letters a model reads, in order: each
# (what it undoes, how).
_READING_STEPS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("tag characters", tag_decoded),
    ("variation selectors", _selectors_decoded),
    ("invisible characters", _invisible_dropped),
    ("full-width or mathematical letters", _compatibility_folded),
    ("look-alike letters", look_alikes_folded),
    ("accents", _accents_dropped),
)


_PLAIN = re.compile(r"[\t\n\r\x20-\x7e]*")  # printable ASCII: every step leaves it as it is


def plain(text: str) -> bool:
    return _PLAIN.fullmatch(text) is not None


@functools.lru_cache(maxsize=4096)
def as_read(text: str) -> Reading:
    if plain(text):
        return Reading(text)
    how = []
    for what, step in _READING_STEPS:
        read = step(text)
        if read != text:
            how.append(what)
        text = read
    return Reading(text, tuple(how))


def _printable(text: str) -> bool:
    """No control character but tab and line breaks: text, not bytes."""
    return all(c.isprintable() or c in "\t\n\r" for c in text)


def _base64_decoded(words: str) -> bytes | None:
    joined = words.translate({ord("-"): "+", ord("_"): "/"}).rstrip("=")
    if len(joined) % 4 == 1:
        return None
    try:
        return base64.b64decode(joined + "=" * (-len(joined) % 4), validate=True)
    except binascii.Error:
        return None


def _hex_decoded(words: str) -> bytes | None:
    try:
        return bytes.fromhex(words) if len(words) % 2 == 0 else None
    except ValueError:
        return None


def _ending(reader: codecs.IncrementalDecoder, raw: bytes | None) -> str | None:
    """What the last bytes would add to a text decoded so far (None: it would not be text), the
    reader left as it was."""
    if raw is None:
        return None
    state = reader.getstate()
    try:
        return reader.decode(raw, final=True)
    except UnicodeDecodeError:
        return None
    finally:
        reader.setstate(state)


# Each encoding a payload may come in: (name, its runs of words, the bytes of some of their
# characters, how many characters decode as a group).
_ENCODINGS: tuple[tuple[str, re.Pattern, Callable[[str], bytes | None], int], ...] = (
    ("base64", _BASE64_RUN, _base64_decoded, 4),
    ("hex", _HEX_RUN, _hex_decoded, 2),
)


@dataclass(frozen=True)
class Payload:
    encoding: str
    encoded: str  # the words as they stand in the text
    text: str  # what they decode to
    words: int  # how many words (chunks, lines) it was split into


def _longest_payload(
    words: list[str], first: int, decode: Callable[[str], bytes | None], group: int
) -> tuple[int, str] | None:
    """The longest run of `words` from the `first` that decodes to readable UTF-8 text of at least
    MIN_PAYLOAD_CHARS: (how many words, the text). The whole groups are decoded once, as the
    words come (a prefix's decoding never changes, so the first group that is not text ends the
    search); only the last, partial group is decoded again for each word."""
    reader = codecs.getincrementaldecoder("utf-8")()
    pieces: list[str] = []
    best: tuple[int, int, str] | None = None  # (words, pieces, the last group's text)
    joined, fed, chars = "", 0, 0
    for count, index in enumerate(range(first, len(words)), start=1):
        word = words[index]
        joined += word
        if len(joined) > _MAX_PAYLOAD_CHARS:
            break
        whole = len(joined) // group * group
        raw = decode(joined[fed:whole])
        if raw is None:
            break
        try:
            begun = reader.decode(raw)
        except UnicodeDecodeError:
            break
        if not _printable(begun):
            break
        pieces.append(begun)
        fed, chars = whole, chars + len(begun)
        last = _ending(reader, decode(joined[whole:]))
        if last is not None and _printable(last) and chars + len(last) >= _MIN_PAYLOAD_CHARS:
            best = (count, len(pieces), last)
        if "=" in word:  # base64 padding: the payload ends here
            break
    if best is None:
        return None
    count, kept, last = best
    return count, "".join(pieces[:kept]) + last


def _payloads_in(text: str) -> Iterator[Payload]:
    for encoding, runs, decode, block in _ENCODINGS:
        for run in runs.finditer(text):
            words = run.group().split()
            start = 0
            while start < len(words):
                found = _longest_payload(words, start, decode, block)
                if found is None:
                    start += 1
                    continue
                count, decoded = found
                yield Payload(encoding, " ".join(words[start : start + count]), decoded, count)
                start += count


@functools.lru_cache(maxsize=4096)
def encoded_payloads(text: str) -> tuple[Payload, ...]:
    """Every base64 or hex payload in a text that decodes to text: whole, or split into words by
    spaces or line breaks (tried from each word on; a payload found, the search goes on after)."""
    return tuple(_payloads_in(text))


# A name made of words (snake_case, kebab-case, dotted or camelCase): a model reads the words.
_IDENTIFIER = re.compile(
    r"[A-Za-z][A-Za-z0-9]*(?:[_.-]+[A-Za-z0-9]+){2,}|[a-z]+(?:[A-Z][a-z0-9]+){2,}"
)
_ROT13_MIN_LETTERS = 12  # a shorter text says nothing in ROT13


def _identifier_words(text: str) -> str | None:
    """A name's words, as a model reads `ignore_all_previous_instructions` (None: not a name)."""
    if not _IDENTIFIER.fullmatch(text):
        return None
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", re.sub(r"[_.-]+", " ", text))


def _also_read(read: Reading) -> Iterator[Reading]:
    """What a model can read a text as besides its letters: a name's words, and ROT13 (a model
    told to "decode and obey" reads it; plain text in ROT13 is no phrase)."""
    words = _identifier_words(read.text)
    if words is not None:
        yield Reading(words, (*read.how, "a name's words"))
    if sum(c.isalpha() for c in read.text) >= _ROT13_MIN_LETTERS:
        yield Reading(codecs.encode(read.text, "rot13"), (*read.how, "ROT13"))


@functools.lru_cache(maxsize=4096)
def readings(text: str, depth: int = _READING_DEPTH) -> tuple[Reading, ...]:
    """The text as a model reads it (and as a name's words, and in ROT13), then every payload
    decoded from that reading (and from the payloads' own readings, `depth` deep), each read the
    same way. Every check of a scan reads the same strings: each is read once."""
    read = as_read(text)
    if depth <= 1:
        return (read,)
    return (
        read,
        *(_also_read(read) if depth == _READING_DEPTH else ()),
        *(
            Reading(inner.text, (*read.how, p.encoding, *inner.how), inner.encoded or p.encoded)
            for p in encoded_payloads(read.text)
            for inner in readings(p.text, depth - 1)
        ),
    )


def hidden_flag(text: str, start: int) -> bool:
    """Whether the tag characters from `start` spell a subdivision flag's code (EMOJI_FLAG)."""
    return start > 0 and _EMOJI_FLAG.match(text, start - 1) is not None
