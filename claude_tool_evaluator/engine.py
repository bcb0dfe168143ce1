"""The conversation engine: the tool loop (model session + MCP hub), and who answers for the user
(nobody, the terminal, a simulated user).

May import: the foundations (errors, stopping, sinks, files, run_types, redaction, patterns),
results_schema, answers, loaders, hub, session, batches."""

from __future__ import annotations

import asyncio
import os
import re
import time
from typing import TYPE_CHECKING, Protocol

from rich.console import Console

import prompts
import test_constants as C

from .errors import FatalApiError, is_api_error
from .run_types import HistoryEntry, ToolCall, Transcript
from .session import ModelRequest, api_error_message
from .sinks import terminal_text

__all__ = [
    "ConversationObserver",
    "SimulatedUser",
    "StdinLines",
    "TerminalUser",
    "UserInput",
    "needs_user_input",
    "run_conversation",
    "text_of",
]

if TYPE_CHECKING:
    from .hub.calls import McpHub, RunTools
    from .run_types import RunSettings, TestCase
    from .session import ModelClient


_QUESTION_PATTERNS = re.compile(
    r"\b(would you like|do you want|shall i|should i|which (one|option|of)|what would you|"
    r"could you (please )?(tell|share|provide|clarify|confirm|specify)|can you (please )?(tell|share|provide|"
    r"clarify|confirm|specify)|please (provide|specify|confirm|let me know|tell me|share)|let me know|"
    r"do you have|are you (looking|using|trying)|please choose|which would you prefer)\b",
    re.IGNORECASE,
)


def needs_user_input(text: str) -> bool:
    """Whether an assistant turn that ended without tool use is waiting for the user.

    The rule: the final paragraph of the text ends with a question mark, or any of the last
    three sentences asks for a choice or for information ("would you like", "which one",
    "please provide", "let me know", ...). Text with no words at all counts as waiting (when
    unsure, ask). Pure statements do not."""
    stripped = text.strip()
    if not stripped:
        return True
    last_paragraph = stripped.split("\n\n")[-1].strip().rstrip("*_` )")
    if last_paragraph.endswith("?"):
        return True
    sentences = re.split(r"(?<=[.!?])\s+", stripped)
    return any(_QUESTION_PATTERNS.search(sentence) for sentence in sentences[-3:])


class UserInput(Protocol):
    """Who answers when Claude waits for the user: nobody (batch), a terminal, or a simulated user."""

    simulated: bool

    async def reply(self, transcript: Transcript, assistant_text: str) -> str | None:
        """The user's next message, or None to end the conversation."""


def _user_end_reason(user: UserInput | None) -> str:
    """`ended_by` when the user returned None: `user_end`, unless the user says otherwise
    (a simulated user that ran out of --max-user-turns sets `end_reason = "max_turns"`)."""
    return getattr(user, "end_reason", None) or "user_end"


class ConversationObserver:
    """Hooks for showing a conversation as it happens; the default shows nothing."""

    def on_start(self, transcript: Transcript) -> None: ...
    def on_user(self, text: str, simulated: bool = False) -> None: ...
    def on_assistant_text(self, text: str) -> None: ...
    def on_tool_call(self, call: ToolCall) -> None: ...
    def on_turn_end(self, transcript: Transcript) -> None: ...


def text_of(content: list[dict]) -> str:
    return "\n".join(block["text"] for block in content if block.get("type") == "text").strip()


def _initial_messages(case: TestCase) -> list[dict]:
    messages = [{"role": m.role, "content": m.content} for m in case.history]
    if case.prompt:
        messages.append({"role": "user", "content": case.prompt})
    return messages


async def _ask_user(
    transcript: Transcript,
    messages: list[dict],
    user: UserInput | None,
    observer: ConversationObserver,
) -> bool:
    """Gets the user's next message into the conversation; False when the user ends it."""
    if user is None:
        return False
    answer = await user.reply(transcript, transcript.final_text)
    if answer is None or not answer.strip():
        return False
    messages.append({"role": "user", "content": answer})
    transcript.history.append(HistoryEntry("user", answer, simulated=user.simulated))
    transcript.user_interventions += 1
    observer.on_user(answer, user.simulated)
    return True


async def _run_tool_calls(
    transcript: Transcript,
    tool_uses: list[dict],
    hub: McpHub | RunTools,
    observer: ConversationObserver,
) -> list[dict]:
    """Runs a turn's tool calls in order and answers all of them in one user message."""
    results, summaries = [], []
    for block in tool_uses:
        outcome = await hub.call_tool(block["name"], block.get("input"))
        call = ToolCall(
            block["name"],
            block["input"] if isinstance(block.get("input"), dict) else {},
            outcome.output,
            outcome.is_error,
            outcome.duration_ms,
            outcome.server,
            transcript.model_calls,
            block["id"],
            outcome.source,
            outcome.executed,
        )
        transcript.tool_calls.append(call)
        if (outcome.server_failed or outcome.fails_case) and not transcript.error:
            transcript.error = (
                outcome.output
            )  # the case cannot be judged on a dead server or a replay miss
        observer.on_tool_call(call)
        results.append(
            {
                "type": "tool_result",
                "tool_use_id": block["id"],
                "content": outcome.output or "(no output)",
                "is_error": outcome.is_error,
            }
        )
        summaries.append(f"{call.name}: {outcome.output}")
    transcript.history.append(HistoryEntry("tool", "\n\n".join(summaries)))
    return results


async def _converse(
    transcript: Transcript,
    messages: list[dict],
    model: ModelClient,
    hub: McpHub | RunTools,
    settings: RunSettings,
    user: UserInput | None,
    observer: ConversationObserver,
) -> None:
    if not messages or messages[-1]["role"] != "user":
        # The history ends with Claude's answer: that is the final state, unless someone can reply.
        transcript.final_text = messages[-1]["content"] if messages else ""
        if not await _ask_user(transcript, messages, user, observer):
            transcript.ended_by = "completion" if user is None else _user_end_reason(user)
            return
    while True:
        if transcript.model_calls >= settings.max_turns:
            transcript.ended_by = "max_turns"
            return
        on_text = observer.on_assistant_text if settings.stream else None
        reply = await model.complete(
            ModelRequest(
                settings.model,
                settings.system_prompt,
                messages,
                hub.anthropic_tools,
                settings.max_tokens,
                settings.temperature,
            ),
            on_text,
        )
        transcript.model_calls += 1
        transcript.usage = transcript.usage + reply.usage
        transcript.stop_reason = reply.stop_reason
        messages.append({"role": "assistant", "content": reply.content})
        text = text_of(reply.content)
        tool_uses = [b for b in reply.content if b.get("type") == "tool_use"]
        transcript.history.append(HistoryEntry("assistant", text, has_tools=bool(tool_uses)))
        if text:
            transcript.final_text = text
            if not settings.stream:
                observer.on_assistant_text(text)
        if reply.stop_reason == "pause_turn":
            continue
        if reply.stop_reason == "max_tokens":
            transcript.truncated = True
        if tool_uses and reply.stop_reason == "tool_use":
            messages.append(
                {
                    "role": "user",
                    "content": await _run_tool_calls(transcript, tool_uses, hub, observer),
                }
            )
            observer.on_turn_end(transcript)
            continue
        observer.on_turn_end(transcript)
        if reply.stop_reason in ("refusal", "max_tokens") or not needs_user_input(text):
            transcript.ended_by = "completion"
            return
        if user is None:
            transcript.ended_by = "needs_input"
            return
        if not await _ask_user(transcript, messages, user, observer):
            transcript.ended_by = _user_end_reason(user)
            return


async def run_conversation(
    case: TestCase,
    model: ModelClient,
    hub: McpHub | RunTools,
    settings: RunSettings,
    iteration: int = 1,
    user: UserInput | None = None,
    observer: ConversationObserver | None = None,
) -> Transcript:
    """One conversation: Claude and the real tools until Claude is done, the user ends it, or
    the turn limit is reached. Failures become `transcript.error`; only a fatal API error raises."""
    observer = observer or ConversationObserver()
    transcript = Transcript(case=case, iteration=iteration, model=settings.model)
    transcript.history = [HistoryEntry(m.role, m.content) for m in case.history]
    messages = _initial_messages(case)
    if case.prompt:
        transcript.history.append(HistoryEntry("user", case.prompt))
    observer.on_start(transcript)
    start = time.perf_counter()
    try:
        await _converse(transcript, messages, model, hub, settings, user, observer)
    except FatalApiError:
        raise
    except (asyncio.CancelledError, KeyboardInterrupt):
        # Ctrl-C: the part that happened is still a result (the observer holds it); the run stops.
        transcript.error, transcript.ended_by = "interrupted", "error"
        transcript.latency_ms = round((time.perf_counter() - start) * 1000, 2)
        raise
    except Exception as exc:
        transcript.error = (
            api_error_message(exc) if is_api_error(exc) else f"{exc.__class__.__name__}: {exc}"
        )
    if transcript.error:
        transcript.ended_by = "error"
    transcript.latency_ms = round((time.perf_counter() - start) * 1000, 2)
    return transcript


class StdinLines:
    """Lines from stdin, awaited through the event loop instead of a blocking read, so Ctrl-C
    (which cancels the running task) also interrupts a prompt that waits for the user."""

    def __init__(self, fd: int = 0) -> None:
        self.fd = fd
        self.pending = b""  # bytes read past the end of the line handed out

    async def readline(self) -> str | None:
        """The next line without its newline; None at end of input (Ctrl-D on a terminal)."""
        while b"\n" not in self.pending:
            chunk = await self._read_chunk()
            if not chunk:
                break
            self.pending += chunk
        if not self.pending:
            return None
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode("utf-8", "replace").rstrip("\r")

    async def _read_chunk(self) -> bytes:
        loop = asyncio.get_running_loop()
        readable = loop.create_future()
        try:
            loop.add_reader(self.fd, lambda: None if readable.done() else readable.set_result(None))
        except (OSError, ValueError, NotImplementedError):
            return os.read(self.fd, 65536)  # a regular file cannot be polled, and never blocks
        try:
            await readable
        finally:
            loop.remove_reader(self.fd)
        return os.read(self.fd, 65536)


_END_CONVERSATION_WORDS = ("end",)


class TerminalUser:
    """The person at the terminal. `end` or EOF (Ctrl-D) ends the conversation; an empty line
    asks again, so a stray Enter does not end it."""

    simulated = False

    def __init__(self, console: Console, lines: StdinLines | None = None) -> None:
        self.console = console
        self.lines = lines or StdinLines()

    async def reply(self, transcript: Transcript, assistant_text: str) -> str | None:
        while True:
            self.console.print(
                "[bold green]You[/bold green] [dim](reply, or 'end' to finish)[/dim] › ",
                end="",
                highlight=False,
            )
            self.console.file.flush()
            line = await self.lines.readline()
            if line is None:
                self.console.print()
                return None
            if not os.isatty(self.lines.fd):  # piped replies are not echoed by a terminal
                self.console.print(terminal_text(line), markup=False, highlight=False)
            if line.strip().lower() in _END_CONVERSATION_WORDS:
                return None
            if line.strip():
                return line.strip()


def _simulated_user_view(transcript: Transcript) -> str:
    """The conversation as its user saw it: the messages, not the tool traffic."""
    messages = [
        f"<{entry.role}>\n{entry.content}\n</{entry.role}>"
        for entry in transcript.history
        if entry.role in ("user", "assistant") and entry.content
    ]
    if not messages:
        return "The conversation has not started yet. Write the user's first message."
    return (
        "<conversation>\n" + "\n".join(messages) + "\n</conversation>\n\n"
        f"Write the user's next message, or only {prompts.SIMULATED_USER_DONE} if the goal has been met."
    )


def _simulated_user_message(answer: str) -> str | None:
    """The simulated user's message, or None when it says it is done."""
    answer = re.sub(r"^\s*(<user>|user:)\s*", "", answer.strip(), flags=re.IGNORECASE)
    answer = re.sub(r"\s*</user>\s*$", "", answer)
    if not answer or re.search(rf"\b{prompts.SIMULATED_USER_DONE}\W*$", answer):
        return None
    return answer


class SimulatedUser:
    """A second model plays the user: it is given the goal and the conversation so far, answers
    when Claude waits for the user, and says DONE when the goal is met. After `max_turns` of its
    messages it stops, and the conversation ends as `max_turns`."""

    simulated = True

    def __init__(
        self,
        goal: str,
        model: ModelClient,
        model_id: str = C.DEFAULT_USER_MODEL,
        max_turns: int = C.DEFAULT_MAX_USER_TURNS,
        max_tokens: int = C.DEFAULT_USER_MAX_TOKENS,
    ) -> None:
        self.goal, self.model, self.model_id = goal, model, model_id
        self.max_turns, self.max_tokens = max_turns, max_tokens
        self.end_reason = "user_end"

    async def reply(self, transcript: Transcript, assistant_text: str) -> str | None:
        if transcript.user_interventions >= self.max_turns:
            self.end_reason = "max_turns"
            return None
        system = prompts.SIMULATED_USER_PROMPT.format(
            goal=self.goal, done=prompts.SIMULATED_USER_DONE
        )
        request = ModelRequest(
            self.model_id,
            system,
            [{"role": "user", "content": _simulated_user_view(transcript)}],
            [],
            self.max_tokens,
        )
        answer = await self.model.complete(request)
        transcript.simulated_user_model = self.model_id  # its tokens count in the run's cost
        transcript.simulated_user_usage = transcript.simulated_user_usage + answer.usage
        return _simulated_user_message(text_of(answer.content))
