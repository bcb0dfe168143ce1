"""--optimize: the description loop against scripted models whose choices depend on the
descriptions they are shown, so every score can be computed here and compared with the loop's.

- Tools: a CSV suite against a real MCP server with two confusable tools
  (tests/servers/confusable_server.py). The model under test calls the tool whose description
  shares the most words with the query (ties: the first by name). The optimizer model is
  scripted: its forced `propose` answers are descriptions this file chose from the split.
- Skills: the real Claude Code CLI against the scripted server; its model uses the Skill tool
  when the skill's listed description shares a word with the query.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from conftest import ROOT, TEST_API_KEY
from fake_anthropic import ScriptedAnthropic, forced_tool, reply, text, tool_use, user_query

import evaluator as E
import prompts
from claude_tool_evaluator.files import journal_path
from claude_tool_evaluator.loaders.skills import split_frontmatter
from claude_tool_evaluator.modes.optimizer import (
    SHOULD_NOT_TRIGGER,
    SHOULD_TRIGGER,
    CandidateScore,
    OptimizeLoop,
    SplitItem,
    stratified_split,
)
from claude_tool_evaluator.results_schema.sections import OptimizationRoundRecord

CONFUSABLE = ROOT / "tests" / "servers" / "confusable_server.py"
ORIGINAL = "Looks a document up by its number."
INVOICE_WORDS = ["birch", "cedar", "maple", "aspen", "alder", "larch"]
RECEIPT_WORDS = ["mango", "lemon", "peach", "grape", "melon", "guava"]


def words(value: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", value.lower()) if len(w) > 3}


def prompt_of(word: str, number: int) -> str:
    return f"Get the {word} doc {number}"


CASES = [
    (f"invoice_{w}", prompt_of(w, 1000 + i), "lookup_invoice") for i, w in enumerate(INVOICE_WORDS)
] + [
    (f"receipt_{w}", prompt_of(w, 2000 + i), "lookup_receipt") for i, w in enumerate(RECEIPT_WORDS)
]


def choose(query: str, descriptions: dict[str, str]) -> str:
    """The model under test: the tool whose description shares most words with the query."""
    return max(sorted(descriptions), key=lambda name: len(words(query) & words(descriptions[name])))


def system_text(body: dict) -> str:
    system = body.get("system") or ""
    return system if isinstance(system, str) else " ".join(b.get("text", "") for b in system)


def is_proposer(body: dict) -> bool:
    return system_text(body) == prompts.OPTIMIZER_SYSTEM_PROMPT


def tool_results(body: dict) -> bool:
    content = (body.get("messages") or [{}])[-1].get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


class Models:
    """The model under test and the scripted optimizer, on one server."""

    def __init__(self, proposals: list[dict]) -> None:
        self.proposals = list(proposals)
        self.proposer_requests: list[dict] = []

    def __call__(self, body: dict) -> dict:
        if is_proposer(body):
            assert forced_tool(body) == "propose"
            self.proposer_requests.append(body)
            return reply(tool_use("propose", self.proposals.pop(0)))
        if tool_results(body):
            return reply(text("Here it is."))
        shown = {t["name"]: t["description"] for t in body.get("tools") or []}
        query = user_query(body)
        number = query.rsplit(" ", 1)[-1]
        return reply(tool_use(choose(query, shown), {"number": number}))


def write_suite(folder: Path) -> Path:
    lines = ["test_name,user_prompt,expected_tools"] + [f"{n},{p},{t}" for n, p, t in CASES]
    path = folder / "suite.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def split_of(holdout: float = 0.4, seed: int = 42) -> dict[str, str]:
    items = [SplitItem(name, tool) for name, _, tool in CASES]
    return {i.key: i.split for i in stratified_split(items, holdout, seed)}


def expected_scores(
    descriptions: dict[str, str], split: dict[str, str]
) -> dict[str, tuple[int, int]]:
    out = {"train": [0, 0], "test": [0, 0]}
    for name, prompt, tool in CASES:
        part = out[split[name]]
        part[1] += 1
        part[0] += choose(prompt, descriptions) == tool
    return {k: tuple(v) for k, v in out.items()}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_API_KEY)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def server_args() -> list[str]:
    return ["--server", f"{sys.executable} {CONFUSABLE}"]


# ============================================================================ tools
def test_tool_descriptions_loop_scores_each_candidate_and_picks_the_best_by_test(
    cli, env: Path, monkeypatch
):
    split = split_of()
    receipts_train = [w for w in RECEIPT_WORDS if split[f"receipt_{w}"] == "train"]
    receipts_test = [w for w in RECEIPT_WORDS if split[f"receipt_{w}"] == "test"]
    assert len(receipts_train) == 4 and len(receipts_test) == 2
    overfit = f"{ORIGINAL} For {' '.join(receipts_train[:3])} documents."  # train 7/8, test 2/4
    general = f"{ORIGINAL} For {' '.join(receipts_train[:2] + receipts_test)} documents."  # train 6/8, test 4/4
    proposals = [
        {"descriptions": {"lookup_receipt": "   "}},  # invalid: sent back once
        {"descriptions": {"lookup_receipt": overfit}},  # round 1
        {"descriptions": {"lookup_receipt": general}},  # round 2
        {"descriptions": {"lookup_payment": "Payments."}},  # round 3: invalid ...
        {"descriptions": {"lookup_receipt": ""}},  # ... twice: dropped
    ]
    models = Models(proposals)
    suite = write_suite(env)
    with ScriptedAnthropic(responder=models) as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        code, out, err = cli(
            "--optimize",
            "--csv",
            suite,
            *server_args(),
            "--runs",
            "1",
            "--optimize-rounds",
            "3",
            "-o",
            env / "tools.json",
            "--report",
            env / "tools.md",
        )
    assert code == 0, out + err
    assert not models.proposals, "every scripted proposal was asked for"
    document = json.loads((env / "tools.json").read_text())
    optimization = document["optimization"]
    assert {s["item"]: s["split"] for s in optimization["split"]} == split
    rounds = {r["round"]: r for r in optimization["rounds"]}
    assert [r["status"] for r in optimization["rounds"]] == [
        "scored",
        "scored",
        "scored",
        "dropped",
    ]
    candidates = {
        0: {"lookup_invoice": ORIGINAL, "lookup_receipt": ORIGINAL},
        1: {"lookup_invoice": ORIGINAL, "lookup_receipt": overfit},
        2: {"lookup_invoice": ORIGINAL, "lookup_receipt": general},
    }
    for number, descriptions in candidates.items():
        want = expected_scores(descriptions, split)
        got = rounds[number]
        assert (got["train_passed"], got["train_total"]) == want["train"], (number, got)
        assert (got["test_passed"], got["test_total"]) == want["test"], (number, got)
    assert rounds[1]["train_passed"] > rounds[2]["train_passed"]  # train prefers round 1 ...
    assert (
        optimization["best_round"] == 2 and optimization["improved"]
    )  # ... the test split decides
    assert rounds[1]["refused"] and "empty" in rounds[1]["refused"][0]
    assert len(rounds[3]["refused"]) == 2 and "lookup_payment" in rounds[3]["refused"][0]
    assert optimization["stopped"] == "rounds"
    # the ready file: a --tool-overrides JSON with only what changed
    ready = json.loads((env / "tools.tool-overrides.json").read_text())
    assert ready == {"lookup_receipt": {"description": general}}
    assert document["metadata"]["evaluation"] == "optimize"
    assert document["metadata"]["tool_overrides"] == ready
    # the proposer saw train failures only: no test case's prompt, no test score
    test_prompts = [p for n, p, _ in CASES if split[n] == "test"]
    train_failures = [p for n, p, t in CASES if split[n] == "train" and t == "lookup_receipt"]
    assert len(models.proposer_requests) == 5
    for body in models.proposer_requests:
        sent = json.dumps(body)
        assert not any(p in sent for p in test_prompts), "a test query reached the optimizer"
        assert "test" not in json.dumps(body["messages"]).lower()
        assert body["tool_choice"] == {"type": "tool", "name": "propose"}
    first = json.dumps(models.proposer_requests[0]["messages"])
    assert all(p in first for p in train_failures)
    # the invalid proposal went back once, with its reason, as the tool's error
    retry = models.proposer_requests[1]["messages"]
    assert (
        retry[-1]["content"][0]["is_error"] is True
        and "empty" in retry[-1]["content"][0]["content"]
    )
    # only the tools involved in failures may be rewritten
    allowed = models.proposer_requests[0]["tools"][0]["input_schema"]["properties"]["descriptions"][
        "properties"
    ]
    assert set(allowed) == {"lookup_invoice", "lookup_receipt"}
    # the history shows earlier attempts with their train scores
    third = json.dumps(models.proposer_requests[3]["messages"])
    assert f"({rounds[1]['train_passed']}/8 training cases passed)" in third and general in third
    # the report: a table of rounds and the best as a diff against the original
    report = (env / "tools.md").read_text()
    assert "## Description optimization" in report and "| Round | Status | Train | Test |" in report
    assert (
        "```diff" in report
        and f"+For {' '.join(receipts_train[:2] + receipts_test)} documents." in report
    )
    assert "Round 2 beat the original" in report


def test_nothing_beats_the_original_and_it_says_so(cli, env: Path, monkeypatch):
    split = split_of()
    worse = (
        f"{ORIGINAL} For {' '.join(INVOICE_WORDS)} documents."  # receipts now win invoice queries
    )
    models = Models([{"descriptions": {"lookup_receipt": worse}}])
    suite = write_suite(env)
    with ScriptedAnthropic(responder=models) as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        code, out, err = cli(
            "--optimize",
            "--csv",
            suite,
            *server_args(),
            "--runs",
            "1",
            "--optimize-rounds",
            "1",
            "-o",
            env / "o.json",
            "--report",
            env / "o.md",
        )
    assert code == 0, out + err
    optimization = json.loads((env / "o.json").read_text())["optimization"]
    want = expected_scores({"lookup_invoice": ORIGINAL, "lookup_receipt": worse}, split)
    assert (
        optimization["rounds"][1]["test_passed"],
        optimization["rounds"][1]["test_total"],
    ) == want["test"]
    assert (
        optimization["best_round"] == 0
        and not optimization["improved"]
        and optimization["best"] == {}
    )
    assert "Nothing beat the original" in (env / "o.md").read_text()
    assert "Nothing beat the original" in " ".join(out.split())
    assert not (env / "o.tool-overrides.json").exists()


def test_dry_run_estimates_the_whole_loop_and_sends_nothing(cli, env: Path, monkeypatch):
    suite = write_suite(env)
    with ScriptedAnthropic(responder=Models([])) as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        code, out, err = cli(
            "--optimize", "--csv", suite, *server_args(), "--optimize-rounds", "4", "--dry-run"
        )
        assert code == 0, out + err
        assert api.message_requests == []
    flat = " ".join((out + err).split())
    # 5 candidates (the original and 4 rounds) x 12 cases x 3 runs (the default in this mode)
    assert "runs: 180" in flat and "4 to 8 proposal call(s)" in flat, flat


def test_resume_continues_from_the_journal_without_asking_or_running_again(
    cli, env: Path, monkeypatch
):
    split = split_of()
    receipts_train = [w for w in RECEIPT_WORDS if split[f"receipt_{w}"] == "train"]
    better = f"{ORIGINAL} For {' '.join(receipts_train[:1])} documents."
    best = f"{ORIGINAL} For {' '.join(RECEIPT_WORDS)} documents."
    suite = write_suite(env)
    out_file = env / "r.json"
    first = Models([{"descriptions": {"lookup_receipt": better}}])
    with ScriptedAnthropic(responder=first) as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        # the original's 12 runs, one proposal, then the money runs out while round 1 is scored
        code, out, err = cli(
            "--optimize",
            "--csv",
            suite,
            *server_args(),
            "--runs",
            "1",
            "--optimize-rounds",
            "2",
            "-o",
            out_file,
            "--max-cost",
            "0.02",
        )
        assert code == 0, out + err
    assert journal_path(out_file).exists(), "a loop stopped by --max-cost keeps its journal"
    assert json.loads(out_file.read_text())["optimization"]["stopped"] == "max-cost"
    events = [json.loads(line) for line in journal_path(out_file).read_text().splitlines()]
    scored = {e["candidate_hash"] for e in events if e["event"] == "scored"}
    kept = [e for e in events if e["event"] == "run" and e["candidate_hash"] not in scored]
    assert 1 <= len(kept) < len(CASES), "round 1's finished runs are journaled one by one"
    second = Models([{"descriptions": {"lookup_receipt": best}}])
    with ScriptedAnthropic(responder=second) as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        code, out, err = cli(
            "--optimize",
            "--csv",
            suite,
            *server_args(),
            "--runs",
            "1",
            "--optimize-rounds",
            "2",
            "-o",
            out_file,
            "--resume",
        )
        assert code == 0, out + err
        openings = [b for b in api.message_requests if not is_proposer(b) and not tool_results(b)]
    optimization = json.loads(out_file.read_text())["optimization"]
    assert [r["round"] for r in optimization["rounds"]] == [0, 1, 2]
    assert optimization["rounds"][1]["descriptions"] == {"lookup_receipt": better}
    assert len(second.proposer_requests) == 1, "round 1's proposal came from the journal"
    assert len(openings) == 2 * len(CASES) - len(kept), (
        "neither the original nor round 1's finished runs ran again; the rest of rounds 1 and 2 did"
    )
    assert optimization["best_round"] == 2 and optimization["stopped"] == "train all passing"
    assert not journal_path(out_file).exists()


def test_optimize_input_problems_are_one_line(cli, env: Path):
    for args, message in [
        (["--optimize"], "--optimize needs --skill S with --trigger EVALS, or --csv SUITE"),
        (
            ["--optimize", "--skill", ROOT / "examples" / "skills" / "warehouse-sql"],
            "--optimize needs",
        ),
        (["--optimize", "--csv", "x.csv", "--tag", "a"], "--tag does not apply to --optimize runs"),
    ]:
        code, out, err = cli(*args)
        assert code == 2 and err.count("\n") == 1 and message in err, err


# ============================================================================ skills, through the real Claude Code CLI
def test_skill_description_loop_through_claude_code(tmp_path: Path):
    from test_descriptions import CLAUDE, ClaudeCodeModel, make_skill, run_cli, write_trigger

    if CLAUDE is None:
        pytest.skip("the Claude Code CLI (claude) is not installed")
    skill = make_skill(tmp_path, "doc-helper", "Helps with documents.")
    before = skill.read_bytes()
    positives, negatives = (
        ["Plan the zebra migration", "Plan the zebra rollout"],
        ["Tell me a joke", "Write a haiku"],
    )
    trigger = write_trigger(tmp_path / "t.md", positives, negatives)
    items = [SplitItem(q, SHOULD_TRIGGER) for q in positives] + [
        SplitItem(q, SHOULD_NOT_TRIGGER) for q in negatives
    ]
    split = {i.key: i.split for i in stratified_split(items, 0.5, 7)}
    proposal = "Plans zebra work, and helps with documents."
    model = ClaudeCodeModel(
        "doc-helper",
        [
            {"description": "Use it for <b>zebra</b> work."},  # sent back
            {"description": proposal},
        ],
    )
    with ScriptedAnthropic(responder=model) as api:
        done = run_cli(
            tmp_path,
            api,
            "--optimize",
            "--skill",
            skill.parent,
            "--trigger",
            trigger,
            "--runs",
            "1",
            "--holdout",
            "0.5",
            "--seed",
            "7",
            "--optimize-rounds",
            "2",
            "--claude-bin",
            CLAUDE,
            "-o",
            "opt.json",
            "--report",
            "opt.md",
        )
    assert done.exit_code == 0, done.stdout + done.stderr
    work = tmp_path / "work"
    optimization = json.loads((work / "opt.json").read_text())["optimization"]
    assert {s["item"]: s["split"] for s in optimization["split"]} == split
    assert sorted(s["split"] for s in optimization["split"]) == ["test", "test", "train", "train"]

    def expected(description: str) -> dict[str, tuple[int, int]]:
        out = {"train": [0, 0], "test": [0, 0]}
        for query in positives + negatives:
            fired = bool(words(query) & words(description))
            out[split[query]][0] += fired == (query in positives)
            out[split[query]][1] += 1
        return {k: tuple(v) for k, v in out.items()}

    rounds = optimization["rounds"]
    for record, description in zip(rounds, ["Helps with documents.", proposal]):
        want = expected(description)
        assert (record["train_passed"], record["train_total"]) == want["train"], record
        assert (record["test_passed"], record["test_total"]) == want["test"], record
    assert len(rounds) == 2 and optimization["stopped"] == "train all passing"
    assert optimization["best_round"] == 1 and optimization["best"] == {"doc-helper": proposal}
    assert rounds[1]["refused"] and "'<' or '>'" in rounds[1]["refused"][0]
    # what Claude Code listed: the original, then the candidate, never the file changed
    assert set(model.listings) == {"Helps with documents.", proposal}
    assert skill.read_bytes() == before
    # the ready file: a SKILL.md copy with the new description, the rest kept
    data, body, _ = split_frontmatter((work / "opt.SKILL.md").read_text(), work / "opt.SKILL.md")
    assert data == {
        "name": "doc-helper",
        "description": proposal,
        "license": "MIT",
        "metadata": {"owner": "team-a"},
    }
    assert body.strip().endswith("The body stays as it is.")
    # the optimizer never saw a test query
    tests = [q for q in positives + negatives if split[q] == "test"]
    assert len(model.proposer.proposer_requests) == 2
    for body in model.proposer.proposer_requests:
        assert not any(q in json.dumps(body) for q in tests)
    report = (work / "opt.md").read_text()
    assert "Round 1 beat the original: 2/2 held-out test queries against 1/2" in report
    assert (
        "-Helps with documents." in report
        and "+Plans zebra work, and helps with documents." in report
    )


# ============================================================================ choosing the best
def test_the_best_is_chosen_by_test_then_train_then_the_shorter():
    from types import SimpleNamespace

    items = [
        SplitItem("a", "x", "train"),
        SplitItem("b", "x", "train"),
        SplitItem("c", "y", "test"),
        SplitItem("d", "y", "test"),
    ]
    task = SimpleNamespace(kind="skill", subject="s", items=items)
    settings = E.Settings.of(optimize=True, runs=1)
    loop = OptimizeLoop(task, settings, None, None)

    def add(round_no: int, description: str, passed: set[str]) -> None:
        score = CandidateScore({k: k in passed for k in "abcd"}, 0.0, True, [])
        loop.scores[round_no] = ({"s": description}, score)
        (tp, tt), (sp, st) = score.counts(items, "train"), score.counts(items, "test")
        loop.rounds.append(
            OptimizationRoundRecord(
                round=round_no,
                status="scored",
                train_passed=tp,
                train_total=tt,
                test_passed=sp,
                test_total=st,
                train_score=tp / tt,
                test_score=sp / st,
            )
        )

    add(0, "the original description", {"a", "c"})  # train 1/2, test 1/2
    add(1, "best on train", {"a", "b", "c"})  # train 2/2, test 1/2
    add(2, "a longer description, best on test", {"c", "d"})  # train 0/2, test 2/2
    add(3, "shorter, same as 2", {"c", "d"})  # the same scores, shorter
    record, best = loop.record({"s": "the original description"})
    assert record.best_round == 3 and best == {"s": "shorter, same as 2"} and record.improved
    loop.scores.pop(3), loop.scores.pop(2)
    loop.rounds = loop.rounds[:2]
    record, _ = loop.record({"s": "the original description"})
    assert record.best_round == 1  # equal on test: train decides
    loop.scores.pop(1)
    loop.rounds = loop.rounds[:1]
    record, best = loop.record({"s": "the original description"})
    assert record.best_round == 0 and not record.improved and record.best == {}


# ============================================================================ interrupted loops
class CountingModels:
    """The model under test and a proposer that answers from what it is shown (so a proposal
    asked again gets the same answer), counting every answered request by what it pays for;
    at request `kill_at` it sends `signum` to the evaluator and answers nothing more."""

    def __init__(self, better: str, best: str, kill_at: int = 0, signum: int = 0) -> None:
        self.better, self.best = better, best
        self.kill_at, self.signum, self.pid = kill_at, signum, 0
        self.count = 0
        self.answered: list[tuple] = []
        self.lock = __import__("threading").Lock()

    def __call__(self, body: dict) -> dict:
        with self.lock:
            self.count += 1
            if self.kill_at and self.count >= self.kill_at:
                if self.count == self.kill_at:
                    __import__("os").kill(self.pid, self.signum)
                return {"reset": True}
            if is_proposer(body):
                shown = json.dumps(body["messages"])
                proposal = self.best if self.better in shown else self.better
                self.answered.append(("proposal", proposal))
                return reply(tool_use("propose", {"descriptions": {"lookup_receipt": proposal}}))
            shown = {t["name"]: t["description"] for t in body.get("tools") or []}
            kind = "answer" if tool_results(body) else "choice"
            self.answered.append((kind, user_query(body), json.dumps(shown, sort_keys=True)))
            if tool_results(body):
                return reply(text("Here it is."))
            query = user_query(body)
            return reply(tool_use(choose(query, shown), {"number": query.rsplit(" ", 1)[-1]}))


def run_loop(folder: Path, models: CountingModels, *more: str) -> tuple[int, str]:
    import os
    import subprocess

    with ScriptedAnthropic(responder=models) as api:
        env = dict(os.environ, ANTHROPIC_API_KEY=TEST_API_KEY, ANTHROPIC_BASE_URL=api.url)
        process = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "evaluator.py"),
                "--optimize",
                "--csv",
                str(write_suite(folder)),
                *server_args(),
                "--runs",
                "1",
                "--optimize-rounds",
                "2",
                "--concurrency",
                "1",
                "-o",
                str(folder / "r.json"),
                *more,
            ],
            cwd=folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        models.pid = process.pid
        output, _ = process.communicate(timeout=300)
    return process.returncode, output


def loop_result(folder: Path) -> dict:
    """The loop's record, less what a second invocation prices differently (it writes the prompt
    cache again) and where it wrote its ready file."""
    optimization = json.loads((folder / "r.json").read_text())["optimization"]
    priced = ("cost_usd", "proposer_cost_usd", "best_file")
    rounds = [{k: v for k, v in r.items() if k not in priced} for r in optimization["rounds"]]
    return {k: v for k, v in optimization.items() if k not in priced} | {"rounds": rounds}


REFERENCE: dict[str, tuple] = {}


def reference_loop(tmp_path_factory, better: str, best: str) -> tuple[list, dict]:
    if "loop" not in REFERENCE:
        folder = tmp_path_factory.mktemp("uninterrupted")
        models = CountingModels(better, best)
        code, output = run_loop(folder, models)
        assert code == 0, output
        REFERENCE["loop"] = (sorted(models.answered), loop_result(folder))
    return REFERENCE["loop"]


# One worker runs the four, so the uninterrupted reference loop they share runs once.
@pytest.mark.xdist_group("optimize-stopped")
@pytest.mark.parametrize(
    "signum, kill_at",
    [(15, 7), (9, 19), (9, 36), (15, 62)],
    ids=["SIGTERM-round-0", "kill-9-round-0", "kill-9-round-1", "SIGTERM-round-2"],
)
def test_a_loop_stopped_at_any_moment_resumes_paying_for_no_run_twice(
    tmp_path, tmp_path_factory, signum, kill_at
):
    """The optimizer lost a whole round on SIGTERM and paid for it again: it printed "keeping 8
    runs", wrote no journal, and --resume re-ran every call. Each run is journaled as it
    finishes: stopped anywhere (SIGTERM or kill -9) and resumed, no finished run and no proposal
    is paid twice, and the loop ends as an uninterrupted one does."""
    split = split_of()
    train = [w for w in RECEIPT_WORDS if split[f"receipt_{w}"] == "train"]
    better = f"{ORIGINAL} For {train[0]} documents."
    best = f"{ORIGINAL} For {' '.join(RECEIPT_WORDS)} documents."
    answered, result = reference_loop(tmp_path_factory, better, best)
    assert len(answered) == 74  # 3 candidates x 12 cases x 2 calls, and 2 proposals
    first = CountingModels(better, best, kill_at, signum)
    code, output = run_loop(tmp_path, first)
    assert code == (143 if signum == 15 else -9), output
    assert journal_path(tmp_path / "r.json").exists(), output
    if signum == 15:
        assert "interrupted" in output and "--resume" in output, output
    second = CountingModels(better, best)
    code, output = run_loop(tmp_path, second, "--resume")
    assert code == 0, output
    paid = sorted(first.answered + second.answered)
    finished = [a for a in paid if a[0] != "choice"]  # a run is paid once its answer came
    assert finished == [a for a in answered if a[0] != "choice"], "a finished run ran twice"
    assert len(paid) - len(answered) <= 1, "only the run cut short is asked again"
    assert loop_result(tmp_path) == result


def test_a_loop_stopped_before_its_first_run_says_so(tmp_path):
    """A SIGTERM in the loop's first seconds (its server still starting) printed nothing at all."""
    import os
    import signal
    import subprocess
    import time

    seconds = f"30.{time.time_ns() % 10**6}"  # a sleep of our own, to see the server starting
    slow_server = f"sh -c 'sleep {seconds}; exec {sys.executable} {CONFUSABLE}'"
    env = dict(os.environ, ANTHROPIC_API_KEY=TEST_API_KEY, ANTHROPIC_BASE_URL="http://127.0.0.1:9")
    process = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "evaluator.py"),
            "--optimize",
            "--csv",
            str(write_suite(tmp_path)),
            "--server",
            slow_server,
            "-o",
            str(tmp_path / "r.json"),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the server is starting: the loop is preparing
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        if f"sleep {seconds}" in ps:
            break
        time.sleep(0.1)
    # (a signal while asyncio is still connecting the new process's pipes can hang Python 3.11's
    # asyncio.run on its way out: a CPython issue, not this test's subject)
    time.sleep(1)
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 143, output
    assert "interrupted before the first run: nothing was spent" in output, output
