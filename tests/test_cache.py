"""--cache DIR: a model answer once per exact request and sample, counted on the scripted server.

- A second identical run makes no model call and gives the same verdicts, answers, tool calls,
  usage and cost; the cost saved is said and recorded.
- -i 2 draws two samples; editing one case makes exactly that case's calls.
- The judge's calls go through the cache too; --cache with --batch is refused.
- Claude Code runs reach the cache through the local caching proxy, which replays the SSE stream.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
from conftest import CLAUDE, EXAMPLE_SERVER, ROOT, TEST_API_KEY, invoke, needs_claude
from fake_anthropic import ScriptedAnthropic, reply, text, tool_use, user_query

import test_constants as C
from claude_tool_evaluator.cache import ResponseCache, seal_of
from claude_tool_evaluator.claude_code import CachingProxy, claude_request_key

SERVER = ["--server-module", str(EXAMPLE_SERVER)]
SKILL = ROOT / "examples" / "skills" / "warehouse-sql"


@pytest.fixture(autouse=True)
def own_config_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's install key in a config folder of its own (never the user's ~/.config)."""
    folder = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder))
    return folder


def has_tool_result(body: dict) -> bool:
    content = (body.get("messages") or [{}])[-1].get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def respond(body: dict) -> dict:
    if body.get("tool_choice"):  # the judge
        return reply(tool_use("grade", {"passed": True, "score": 1.0, "evidence": "lists them"}))
    if has_tool_result(body):
        return reply(text("Your warehouse holds orders and users."))
    return reply(tool_use("list_warehouse_tables"))


def write_suite(path: Path, second_prompt: str = "List the tables please") -> Path:
    path.write_text(
        "test_name,user_prompt,expected_tools,rubric\n"
        "one,Which tables are in my warehouse?,list_warehouse_tables,\n"
        f"two,{second_prompt},list_warehouse_tables,\n"
        "judged,Show me every table,list_warehouse_tables,Names the tables\n"
    )
    return path


def stable(document: dict) -> dict:
    """What an identical run must repeat: everything but clocks and the cache's own counts."""
    document = json.loads(json.dumps(document))
    for key in ("generated_at", "suite_wall_time_s", "cache"):
        document["metadata"].pop(key, None)
    for name in ("latency_p50_ms", "latency_p95_ms"):
        document["summary"].pop(name, None)
    for case in document["cases"]:
        case.pop("seconds", None)
    for run in document["results"]:
        run.pop("latency_ms", None)
        # a case's identical runs share one judge call, paid by the run that reached it first
        # (a race between runs at once): the case's cost and verdict above are what is stable
        for name in ("judge_model", "judge_usage", "cost_usd"):
            run.pop(name, None)
        for call in run.get("tool_calls", []):
            call.pop("duration_ms", None)
        for entry in run.get("conversation_history", []):
            entry.pop("duration_ms", None)
    return document


def calls(api) -> int:
    return len(api.message_requests)


def test_a_second_identical_run_makes_no_model_call(cli, api, tmp_path):
    suite, cache = write_suite(tmp_path / "s.csv"), tmp_path / "cache"
    first, second = tmp_path / "1.json", tmp_path / "2.json"
    api.responder = respond
    done = cli("--csv", suite, *SERVER, "-i", "2", "--cache", cache, "-o", first)
    assert done.exit_code == 0, done.output
    # two samples of each of three cases, two calls each, and the judge once (its two runs read
    # alike: the judge grades a transcript once)
    assert calls(api) == 3 * 2 * 2 + 1
    assert len({b["model"] for b in api.message_requests}) == 2  # the model and the judge's
    made = calls(api)
    again = cli("--csv", suite, *SERVER, "-i", "2", "--cache", cache, "-o", second)
    assert again.exit_code == 0, again.output
    assert calls(api) == made, "every answer came from the cache"
    one, two = json.loads(first.read_text()), json.loads(second.read_text())
    assert stable(one) == stable(two)
    assert one["metadata"]["cache"]["misses"] == made and one["metadata"]["cache"]["hits"] == 0
    assert two["metadata"]["cache"]["hits"] == made and two["metadata"]["cache"]["misses"] == 0
    saved = two["metadata"]["cache"]["saved_usd"]
    assert saved == pytest.approx(one["summary"]["cost_usd"], abs=1e-5) and saved > 0
    assert f"--cache: {made} model call(s) answered from the cache, 0 sent; ${saved:.4f} saved" in (
        " ".join(again.output.split())
    )
    # the totals line says what was spent, not what the cache answered
    assert f"cost $0.0000 spent (${saved:.4f} more answered from --cache)" in again.output
    assert f"cost ${one['summary']['cost_usd']:.4f} ·" in done.output
    # the entries are files of the cache's format, redacted like every output
    entries = list(cache.rglob("*.json"))
    assert len(entries) == made
    assert all(json.loads(e.read_text())["format"] == C.CACHE_FORMAT for e in entries)
    assert TEST_API_KEY not in "".join(e.read_text() for e in entries)


def test_editing_one_case_makes_exactly_its_calls(cli, api, tmp_path):
    cache = tmp_path / "cache"
    api.responder = respond
    assert cli("--csv", write_suite(tmp_path / "s.csv"), *SERVER, "--cache", cache).exit_code == 0
    before = calls(api)
    edited = write_suite(tmp_path / "s.csv", "Which tables do I have please?")
    done = cli("--csv", edited, *SERVER, "--cache", cache, "--json")
    assert done.exit_code == 0, done.output
    new = api.message_requests[before:]
    assert len(new) == 2 and {user_query(b) for b in new} == {"Which tables do I have please?"}
    assert json.loads(done.stdout)["metadata"]["cache"] == {
        "folder": str(cache),
        "hits": 2 + 3,  # one and judged (with its judge call)
        "misses": 2,
        "refused": 0,
        "not_kept": 0,
        "saved_usd": pytest.approx(json.loads(done.stdout)["metadata"]["cache"]["saved_usd"]),
    }


def test_more_iterations_draw_new_samples(cli, api, tmp_path):
    cache, suite = tmp_path / "cache", write_suite(tmp_path / "s.csv")
    api.responder = respond
    cli("--csv", suite, *SERVER, "-k", "one", "-i", "2", "--cache", cache)
    before = calls(api)
    cli("--csv", suite, *SERVER, "-k", "one", "-i", "3", "--cache", cache)
    assert calls(api) - before == 2, "only the third iteration is new"


def test_cache_and_batch_do_not_mix(cli, tmp_path, no_api_key):
    done = cli("--csv", write_suite(tmp_path / "s.csv"), *SERVER, "--cache", tmp_path, "--batch")
    assert done.exit_code == 2 and done.stderr.count("\n") == 1 and "--batch" in done.stderr


def skill_model(body: dict) -> dict:
    if has_tool_result(body):
        return reply(text("Use identifies and anonymous_id."))
    listing = json.dumps(body.get("messages", []))
    if (
        "warehouse-sql: Writes, explains and fixes SQL" in listing
        and "sql" in user_query(body).lower()
    ):
        return reply(tool_use("Skill", {"skill": "warehouse-sql"}))
    return reply(text("A joke, then."))


@needs_claude
def test_claude_code_runs_hit_the_cache_through_the_proxy(tmp_path):
    trigger = tmp_path / "trigger.md"
    trigger.write_text(
        "---\nname: t\ntype: trigger\nskill: warehouse-sql\n---\n\n# Positive Triggers\n\n"
        '- "Write a SQL query for weekly revenue"\n\n# Negative Triggers\n\n- "Tell me a joke"\n'
    )
    (tmp_path / "home").mkdir()
    (tmp_path / "work").mkdir()
    cache = tmp_path / "cache"
    documents = []
    with ScriptedAnthropic(responder=skill_model) as api:
        env = {
            "PATH": __import__("os").environ["PATH"],
            "HOME": str(tmp_path / "home"),
            "ANTHROPIC_API_KEY": TEST_API_KEY,
            "ANTHROPIC_BASE_URL": api.url,
        }
        counts = []
        for name in ("1.json", "2.json"):
            done = subprocess.run(
                [sys.executable, str(ROOT / "evaluator.py"), "--claude-bin", CLAUDE, "--skill",
                 str(SKILL), "--trigger", str(trigger), "--runs", "2", "--cache", str(cache),
                 "-o", str(tmp_path / name)],
                cwd=tmp_path / "work", env=env, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            assert done.returncode == 0, done.stdout + done.stderr
            counts.append(len(api.message_requests))
            documents.append(json.loads((tmp_path / name).read_text()))
    assert counts[0] > 0 and counts[1] == counts[0], "the second run made no model call"
    assert all(r["path"].startswith("/v1/messages") for r in api.requests), "paths unprefixed"
    first, second = documents
    assert [(c["name"], c["passed"], c["passes"]) for c in first["cases"]] == [
        (c["name"], c["passed"], c["passes"]) for c in second["cases"]
    ]
    assert [r["activated_skills"] for r in first["results"]] == [
        r["activated_skills"] for r in second["results"]
    ]
    assert second["metadata"]["cache"]["misses"] == 0
    assert second["metadata"]["cache"]["hits"] == counts[0]
    assert second["metadata"]["cache"]["saved_usd"] > 0


def accepted_with_nodelay(handler_class: type) -> list[int]:
    """Records TCP_NODELAY on each connection a BaseHTTPRequestHandler class sets up."""
    seen: list[int] = []
    setup = handler_class.setup

    def recording_setup(self) -> None:
        setup(self)
        seen.append(self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    handler_class.setup = recording_setup
    return seen


def test_the_caching_proxy_and_the_scripted_server_answer_without_nagle(tmp_path):
    """An answer is written as headers, then body: with Nagle's algorithm on, the body waits for
    the client's delayed ACK (40 ms on Linux) on every answer claude gets through the proxy."""
    with ScriptedAnthropic(responses=[reply(text("hi"))]) as api:
        api_seen = accepted_with_nodelay(api._httpd.RequestHandlerClass)
        proxy = CachingProxy(ResponseCache.open(tmp_path / "c"), api.url)
        proxy_seen = accepted_with_nodelay(proxy.server.RequestHandlerClass)
        with proxy:
            answer = httpx2.post(
                proxy.url + "/v1/messages",
                headers={"x-api-key": TEST_API_KEY, "anthropic-version": "2023-06-01"},
                json={"model": "claude-test", "max_tokens": 5, "messages": [
                    {"role": "user", "content": "hi"}]},
                timeout=30,
            )  # fmt: skip
    assert answer.status_code == 200 and answer.json()["content"][0]["text"] == "hi"
    assert proxy_seen and all(proxy_seen), proxy_seen
    assert api_seen and all(api_seen), api_seen


def test_a_claude_code_request_of_another_day_is_the_same_entry():
    """Claude Code writes the date into every request: a cache filled one day missed every request
    the next (a nightly CI run's). The date is left out of the key; the rest of the text is not."""

    def request(date: str, month: str, query: str = "Write a SQL query") -> bytes:
        system = (
            f"# currentDate\nToday's date is {date}.\n"
            f"- The current month is {month} — use this when searching"
        )
        return json.dumps({"system": system, "messages": [{"role": "user", "content": query}],
                           "metadata": {"user_id": date}}).encode()  # fmt: skip

    def key(body: bytes) -> tuple:
        named = claude_request_key("/sample/1/v1/messages", body, "")
        assert named is not None
        return json.dumps(named[0], sort_keys=True), named[1]

    today = key(request("2026-11-26", "November 2026"))
    assert key(request("2026-12-01", "December 2026")) == today
    assert key(request("2026-11-26", "November 2026", "Write a SQL query!")) != today
    assert "2026-11-26" not in today[0] and "Today's date is DATE" in today[0]


# ---------------------------------------------------------------------------- the folder is input
# A cache folder is shared between CI jobs and restored from artifacts: whoever can write it must
# not be able to choose what Claude "answered". Each entry names its request and is sealed.
ONE_CASE = "test_name,user_prompt,expected_tools\none,Which tables are in my warehouse?,list_warehouse_tables\n"


def first_answer(cache: Path) -> Path:
    """The entry answering the case's first request (the one that calls a tool)."""
    return next(
        e for e in sorted(cache.rglob("*.json")) if '"list_warehouse_tables"' in e.read_text()
    )


def forge(entry: Path, name: str, arguments: dict, reseal: bool) -> None:
    """Rewrites the entry's answer to call another tool (and, with reseal, seals it as this
    program would without CLAUDE_TOOL_EVAL_CACHE_SECRET)."""
    document = json.loads(entry.read_text())
    block = next(b for b in document["content"] if b.get("type") == "tool_use")
    block.update(name=name, input=arguments)
    if reseal:
        document["seal"] = seal_of(document)
    entry.write_text(json.dumps(document))


def cached_once(api, tmp_path: Path) -> tuple[Path, Path]:
    """The one-case suite run once with --cache: (suite, cache folder)."""
    suite, cache = tmp_path / "s.csv", tmp_path / "cache"
    suite.write_text(ONE_CASE)
    api.responder = respond
    assert invoke("--csv", suite, *SERVER, "--cache", cache).exit_code == 0
    return suite, cache


def tool_calls_of(path: Path) -> list[tuple[str, dict, str]]:
    document = json.loads(path.read_text())
    return [
        (c["name"], c["input"], c.get("source", "live"))
        for run in document["results"]
        for c in run["tool_calls"]
    ]


def test_a_tampered_entry_is_a_warned_miss_and_its_call_is_never_made(cli, api, tmp_path):
    suite, cache = cached_once(api, tmp_path)
    made, entry = calls(api), first_answer(cache)
    forge(entry, "describe_table", {"table": "FORGED"}, reseal=False)
    again = cli("--csv", suite, *SERVER, "--cache", cache, "-o", tmp_path / "2.json")
    assert again.exit_code == 0, again.output
    warning = [line for line in again.stderr.splitlines() if line.startswith("warning:")]
    assert warning == [
        f"warning: --cache entry {entry} ignored: its seal does not match (edited, or sealed "
        "with another CLAUDE_TOOL_EVAL_CACHE_SECRET or another install's key); the request is "
        "made again and the entry rewritten"
    ]
    # asked of the model again, and the request after it (the live answer's tool call has a new
    # id, so the conversation that follows is new too)
    assert calls(api) == made + 2
    assert tool_calls_of(tmp_path / "2.json") == [("list_warehouse_tables", {}, "live")]
    assert json.loads((tmp_path / "2.json").read_text())["metadata"]["cache"]["refused"] == 1
    assert "1 entr(ies) refused" in " ".join(again.output.split())
    # rewritten: the next run is answered from the cache, without a word
    third = cli("--csv", suite, *SERVER, "--cache", cache)
    assert calls(api) == made + 2 and "warning" not in third.output


def test_an_entry_sealed_without_the_folders_secret_is_refused(cli, api, tmp_path, monkeypatch):
    monkeypatch.setenv("CLAUDE_TOOL_EVAL_CACHE_SECRET", "only-ci-knows-this-0f3a9c")
    suite, cache = cached_once(api, tmp_path)
    made, entry = calls(api), first_answer(cache)
    with monkeypatch.context() as unset:  # the forger knows this program, not the secret
        unset.delenv("CLAUDE_TOOL_EVAL_CACHE_SECRET")
        forge(entry, "describe_table", {"table": "FORGED"}, reseal=True)
    again = cli("--csv", suite, *SERVER, "--cache", cache, "-o", tmp_path / "2.json")
    assert (
        "sealed with this install's key, not the environment's CLAUDE_TOOL_EVAL_CACHE_SECRET"
        in again.stderr
        and calls(api) == made + 2
    )
    assert tool_calls_of(tmp_path / "2.json") == [("list_warehouse_tables", {}, "live")]


def test_an_entry_sealed_with_the_old_fixed_key_is_refused_and_its_call_never_runs(
    cli, api, tmp_path, own_config_folder
):
    """Earlier versions sealed with a key written in the source: a forger who read it seals an
    entry calling another tool. Without CLAUDE_TOOL_EVAL_CACHE_SECRET the seal is this install's
    random key (made once, mode 0600, in the config folder), so the forged entry is refused, said
    so by `cache verify`, and its tool call is never made."""
    import hashlib
    import hmac

    suite, cache = cached_once(api, tmp_path)
    key_file = own_config_folder / "claude-tool-evaluator" / "cache-key"
    assert key_file.is_file() and key_file.stat().st_mode & 0o777 == 0o600
    key = key_file.read_text()
    made, entry = calls(api), first_answer(cache)
    document = json.loads(entry.read_text())
    block = next(b for b in document["content"] if b.get("type") == "tool_use")
    block.update(name="describe_table", input={"table": "FORGED"})
    body = {k: v for k, v in document.items() if k != "seal"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    document["seal"] = hmac.new(
        b"claude-tool-eval cache seal", canonical.encode(), hashlib.sha256
    ).hexdigest()
    entry.write_text(json.dumps(document))
    verified = cli("cache", "verify", cache)
    assert verified.exit_code == 1
    assert verified.output.splitlines()[:2] == [
        f"{entry}: sealed with the old fixed key (in the source, anyone's), which anyone can forge",
        "sealed with this install's key: 1, the old fixed key (in the source, anyone's): 1",
    ]
    again = cli("--csv", suite, *SERVER, "--cache", cache, "-o", tmp_path / "2.json")
    assert "which anyone can forge" in again.stderr and calls(api) == made + 2
    assert tool_calls_of(tmp_path / "2.json") == [("list_warehouse_tables", {}, "live")]
    assert key_file.read_text() == key  # made once


def test_a_cached_answer_is_held_to_the_tool_policy_like_a_live_one(cli, api, tmp_path):
    suite, cache = cached_once(api, tmp_path)
    made = calls(api)
    # a forger who knows the seal's key: the entry is used, and its destructive call withheld
    forge(first_answer(cache), "save_note", {"note": "forged"}, reseal=True)
    again = cli("--csv", suite, *SERVER, "--cache", cache, "-o", tmp_path / "2.json")
    assert "warning: --cache" not in again.output
    assert calls(api) == made + 1, "only the request after the withheld call (a new result)"
    assert tool_calls_of(tmp_path / "2.json") == [("save_note", {"note": "forged"}, "policy")]


@pytest.mark.parametrize(
    "what, written, problem",
    [
        (
            "oversized",
            lambda: '{"format": "' + " " * (C.CACHE_ENTRY_MAX_BYTES + 1) + '"}',
            "over the bound",
        ),
        ("too deep", lambda: '{"a": ' * 100_000 + "1" + "}" * 100_000, "nested too deeply"),
        (
            "deep but parseable",
            lambda: '{"a": ' * 500 + "1" + "}" * 500,
            f"nested more than {C.MAX_JSON_DEPTH} levels deep",
        ),
        ("not JSON", lambda: "{not json", "invalid JSON: Expecting property name"),
        ("another format", lambda: '{"format": "claude-tool-eval cache 1"}', "an older version"),
    ],
)
def test_a_broken_entry_is_a_warned_miss_never_a_run_error(
    cli, api, tmp_path, what, written, problem
):
    suite, cache = cached_once(api, tmp_path)
    made, entry = calls(api), first_answer(cache)
    entry.write_text(written())
    again = cli("--csv", suite, *SERVER, "--cache", cache, "-o", tmp_path / "2.json")
    assert again.exit_code == 0, again.output
    assert f"warning: --cache entry {entry} ignored: " in again.stderr and problem in again.stderr
    assert calls(api) == made + 2
    assert tool_calls_of(tmp_path / "2.json") == [("list_warehouse_tables", {}, "live")]


def test_an_entry_copied_under_another_requests_name_is_refused(cli, api, tmp_path):
    suite, cache = cached_once(api, tmp_path)
    made = calls(api)
    entries = sorted(cache.rglob("*.json"))
    answer = first_answer(cache)
    other = next(e for e in entries if e != answer)
    other.write_bytes(answer.read_bytes())  # a sound entry, for the wrong request
    again = cli("--csv", suite, *SERVER, "--cache", cache)
    assert "it answers another request" in again.stderr and calls(api) > made


def test_cache_verify_and_prune(cli, api, tmp_path):
    suite, cache = cached_once(api, tmp_path)
    entries = sorted(cache.rglob("*.json"))
    assert len(entries) == 2
    sound = cli("cache", "verify", cache)
    assert sound.exit_code == 0 and sound.output.splitlines() == [
        "sealed with this install's key: 2",
        f"{cache}: 2 entries sound, none refused",
    ]
    tampered = first_answer(cache)
    forge(tampered, "describe_table", {"table": "FORGED"}, reseal=False)
    bad = cli("cache", "verify", cache)
    assert bad.exit_code == 1
    assert bad.output.splitlines() == [
        f"{tampered}: its seal does not match (edited, or sealed with another "
        "CLAUDE_TOOL_EVAL_CACHE_SECRET or another install's key)",
        "sealed with this install's key: 1, an unknown key: 1",
        f"{cache}: 1 entry sound, 1 refused (`cache prune` removes them)",
    ]
    plan = cli("cache", "prune", cache, "--dry-run")
    assert plan.output.startswith("would remove 1 entry") and tampered.exists()
    assert cli("cache", "prune", cache).output.startswith("removed 1 entry")
    assert not tampered.exists() and cli("cache", "verify", cache).exit_code == 0
    # --unused-for: an entry no run has read for that many days goes too
    (kept,) = cache.rglob("*.json")
    os.utime(kept, (time.time() - 3 * 86400,) * 2)
    assert cli("cache", "prune", cache, "--unused-for", "7").output.startswith("removed 0 ")
    assert cli("cache", "prune", cache, "--unused-for", "2").output.startswith("removed 1 entry")
    # a hit marks the entry used
    cli("--csv", suite, *SERVER, "--cache", cache)
    (used,) = [e for e in cache.rglob("*.json") if '"list_warehouse_tables"' in e.read_text()]
    os.utime(used, (time.time() - 3 * 86400,) * 2)
    cli("--csv", suite, *SERVER, "--cache", cache)
    assert used.stat().st_mtime > time.time() - 60


def test_cache_verbs_refuse_a_missing_folder_in_one_line(cli, tmp_path):
    for verb in ("verify", "prune"):
        done = cli("cache", verb, tmp_path / "nowhere")
        assert done.exit_code == 2
        assert done.output.strip().splitlines() == [
            f"error: {tmp_path / 'nowhere'}: no such cache folder (give the folder --cache named)"
        ]


def test_an_answer_holding_a_secret_is_not_kept_so_a_rerun_repeats_the_live_run(cli, api, tmp_path):
    # Kept redacted and replayed, the answer's tool call would carry `[REDACTED]` to the live
    # tool where the model gave the value: the rerun's verdict would flip and it would pay again.
    suite, cache = tmp_path / "s.csv", tmp_path / "cache"
    expected = json.dumps({"describe_table": {"table": TEST_API_KEY}}).replace('"', '""')
    suite.write_text(
        "test_name,user_prompt,expected_tools,expected_args\n"
        f'keyed,Describe the table named like my key,describe_table,"{expected}"\n'
    )

    def answer(body: dict) -> dict:
        if has_tool_result(body):
            return reply(text("That table does not exist."))
        return reply(tool_use("describe_table", {"table": TEST_API_KEY}))

    api.responder = answer
    runs = []
    for name in ("1.json", "2.json"):
        done = cli("--csv", suite, *SERVER, "--cache", cache, "-o", tmp_path / name)
        runs.append(json.loads((tmp_path / name).read_text()))
        assert done.exit_code == 0, done.output
    first, second = runs
    assert [c["passed"] for c in first["cases"]] == [c["passed"] for c in second["cases"]] == [True]
    assert first["metadata"]["cache"]["not_kept"] == 1  # the answer calling with the key
    assert second["metadata"]["cache"]["hits"] == 0
    assert TEST_API_KEY not in "".join(e.read_text() for e in cache.rglob("*.json"))
