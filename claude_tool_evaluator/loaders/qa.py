"""QA evaluations in mcp-builder's XML (question and answer pairs), parsed without entity
expansion.

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers, the loaders above it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..answers import answer_match_hint, answer_match_problem, normalize_answer_match
from ..errors import InputError, InputProblems
from ..files import read_text_file
from ..run_types import TestCase
from .servers import wrong_file

__all__ = [
    "load_qa_suite",
]

# mcp-builder's evaluation file: <evaluation><qa_pair><question/><answer/></qa_pair>...</evaluation>.
# Parsed with expat directly: a DOCTYPE or an entity declaration is refused before anything is
# expanded (no entity bombs, no external entities), and every element keeps its line.
_QA_HINT = "write <evaluation><qa_pair><question>...</question><answer>...</answer></qa_pair>...</evaluation>"


_MAX_XML_DEPTH = 32


@dataclass
class _XmlElement:
    tag: str
    attributes: dict[str, str]
    line: int
    children: list[_XmlElement] = field(default_factory=list)
    chunks: list[str] = field(default_factory=list)  # all text inside, its children's included

    @property
    def text(self) -> str:
        return "".join(self.chunks).strip()

    def walk(self) -> Iterable[_XmlElement]:
        for child in self.children:
            yield child
            yield from child.walk()


def _parse_xml(text: str, path: Path, what: str) -> _XmlElement:
    """The root element of an XML document; DOCTYPE and entity declarations are refused, a
    malformed document is one line naming where expat stopped."""
    from xml.parsers import expat

    parser = expat.ParserCreate(encoding="UTF-8")  # read_text_file decoded it as UTF-8 already
    stack: list[_XmlElement] = []
    roots: list[_XmlElement] = []

    def refuse(kind: str) -> Callable[..., None]:
        def handler(*_: Any) -> None:
            raise InputError(
                f"{kind} are not allowed in a {what}",
                path,
                parser.CurrentLineNumber,
                "remove it: the file is plain XML, without a DTD or entities",
            )

        return handler

    def start(tag: str, attributes: dict[str, str]) -> None:
        if len(stack) >= _MAX_XML_DEPTH:
            raise InputError(
                f"the XML is nested more than {_MAX_XML_DEPTH} levels deep",
                path,
                parser.CurrentLineNumber,
                _QA_HINT,
            )
        element = _XmlElement(tag, attributes, parser.CurrentLineNumber)
        (stack[-1].children if stack else roots).append(element)
        stack.append(element)

    def data(chunk: str) -> None:
        for element in stack:
            element.chunks.append(chunk)

    parser.StartDoctypeDeclHandler = refuse("DOCTYPE declarations")
    parser.EntityDeclHandler = refuse("entity declarations")
    parser.StartElementHandler = start
    parser.EndElementHandler = lambda tag: stack.pop()
    parser.CharacterDataHandler = data
    try:
        parser.Parse(text.encode("utf-8"), True)
    except expat.ExpatError as exc:
        raise InputError(
            f"malformed XML: {expat.ErrorString(exc.code)}",
            path,
            exc.lineno,
            "fix the XML (escape & as &amp; and < as &lt; in questions and answers)",
        ) from None
    return roots[0]


def load_qa_suite(path: str | Path, prefix: str = "") -> list[TestCase]:
    """A QA evaluation in mcp-builder's format: each <qa_pair> is a case whose prompt is its
    question and whose expected answer is its answer (both trimmed, as mcp-builder does), named
    task-1, task-2, ... An <answer match="numeric:0.01"> gives a pair its own answer_match. Any
    root element will do (mcp-builder reads the pairs wherever they are)."""
    path = Path(path)
    text = read_text_file(path, "QA evaluation")
    other = wrong_file(text, path, "--qa", "a QA evaluation")
    if other is not None:
        raise other
    root = _parse_xml(text, path, "QA evaluation")
    pairs = [e for e in root.walk() if e.tag == "qa_pair"]
    if not pairs:
        raise InputError("the evaluation has no <qa_pair>", path, root.line, _QA_HINT)
    problems: list[InputError] = []
    cases = []
    for number, pair in enumerate(pairs, 1):
        parts = {tag: [c for c in pair.children if c.tag == tag] for tag in ("question", "answer")}
        wrong = [tag for tag, found in parts.items() if len(found) != 1]
        if wrong:
            problems.append(
                InputError(
                    f"<qa_pair> {number} needs exactly one <{wrong[0]}>, it has "
                    f"{len(parts[wrong[0]])}",
                    path,
                    pair.line,
                    _QA_HINT,
                )
            )
            continue
        (question,), (answer,) = parts["question"], parts["answer"]
        empty = next((e for e in (question, answer) if not e.text), None)
        if empty is not None:
            problems.append(
                InputError(
                    f"<qa_pair> {number} has an empty <{empty.tag}>",
                    path,
                    empty.line,
                    "every question needs one verifiable answer",
                )
            )
            continue
        match = answer.attributes.get("match", "exact")
        problem = answer_match_problem(match, answer.text)
        if problem:
            problems.append(
                InputError(f"<qa_pair> {number}: {problem}", path, answer.line, answer_match_hint())
            )
            continue
        cases.append(
            TestCase(
                name=f"{prefix}task-{number}",
                prompt=question.text,
                source=str(path),
                line=pair.line,
                expected_answer=answer.text,
                answer_match=normalize_answer_match(match),
            )
        )
    if problems:
        raise InputProblems(problems)
    return cases
