"""--html: one self-contained HTML report for every mode, opened in a real browser.

Every page here is made by the CLI from a real run (the scripted Anthropic server, the example MCP
server, the real Claude Code CLI for skills) and opened in Debian's headless Chromium: with
--dump-dom (the DOM after the page's script ran), --screenshot (a PNG, checked not to be blank),
and over the DevTools protocol on a pipe (clicks, typing a review note, reading feedback.json).
"""

from __future__ import annotations

import fcntl
import html
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import zlib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from conftest import ROOT, TEST_API_KEY, invoke
from fake_anthropic import ScriptedAnthropic, reply, text, tool_use, user_query

import evaluator as E
from claude_tool_evaluator.claude_code import find_claude_bin
from claude_tool_evaluator.writers.html import html_json

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
EXAMPLE_SERVER = ROOT / "examples" / "profiles_server.py"
SKILL_DIR = ROOT / "examples" / "skills" / "warehouse-sql"
SKILL_LISTING = "warehouse-sql: Writes, explains and fixes SQL"  # how Claude Code lists the skill
BROWSER_TIMEOUT = 120
HOSTILE = "<script>document.title='pwned'</script>"
HOSTILE_IMG = "<img src=x onerror=\"document.title='pwned'\">"
FINAL = "The warehouse holds the orders and users tables. <b>not bold</b>"
POSITIVE = "Write a SQL query for weekly revenue per country"
NEGATIVE = "Tell me a joke"
QA_PROMPT = "Which tables does the warehouse hold? Name them all."

pytestmark = pytest.mark.skipif(
    CHROMIUM is None and os.environ.get("CI") is None,
    reason="chromium is not installed (apt-get install -y chromium; CI installs it)",
)


# ============================================================================ the runs
def tool_results(body: dict) -> list[dict]:
    content = (body.get("messages") or [{}])[-1].get("content")
    return (
        [b for b in content if b.get("type") == "tool_result"] if isinstance(content, list) else []
    )


def answers(body: dict) -> dict:
    """Lists the tables (with an argument holding markup), then answers."""
    if tool_results(body):
        long = (
            "".join(f"\n| table_{n} | rows |" for n in range(40))
            if user_query(body) == "Show the tables"
            else ""
        )
        return reply(text(f"<response>{FINAL}</response>{long}"))
    return reply(
        text("Let me look."), tool_use("list_warehouse_tables", {"schema": "public</script><b>x"})
    )


def no_tools(body: dict) -> dict:
    return reply(text("I would rather not look."))


def claude_code(body: dict) -> dict:
    """Claude Code's model: the Skill tool for a SQL query when the skill is listed."""
    if tool_results(body):
        return reply(text("Here is the query."))
    if SKILL_LISTING in json.dumps(body.get("messages", [])) and "sql" in user_query(body).lower():
        return reply(tool_use("Skill", {"skill": "warehouse-sql"}))
    return reply(text("Why did the chicken cross the road?"))


class Lab:
    def __init__(self, root: Path, api: ScriptedAnthropic) -> None:
        self.root, self.api = root, api
        self.csv = write(
            root / "suite.csv",
            "test_name,user_prompt,expected_tools,forbidden_tools,tags\n"
            "tables_ok,Which tables are in my warehouse?,list_warehouse_tables,,smoke\n"
            f'"{HOSTILE}",List the tables please,list_warehouse_tables,,evil\n'
            f'"{HOSTILE_IMG.replace(chr(34), chr(34) * 2)}",Tables?,list_warehouse_tables,,evil\n'
            "forbidden_case,Show the tables,,list_warehouse_tables,nightly\n",
        )
        self.trigger = write(
            root / "trigger.md",
            "---\nname: sql-trigger\ntype: trigger\n---\n\n"
            f"# Positive Triggers\n\n- {POSITIVE}\n\n# Negative Triggers\n\n- {NEGATIVE}\n",
        )
        self.qa = write(
            root / "qa.xml",
            f"<evaluation>\n <qa_pair>\n  <question>{QA_PROMPT}</question>\n"
            "  <answer>orders and users tables</answer>\n </qa_pair>\n</evaluation>\n",
        )

    def run(self, *args: Any, model=answers, env: dict | None = None) -> tuple[int, str]:
        self.api.responder = model
        ran = invoke(*args, env=env)
        return ran.exit_code, ran.output

    def path(self, name: str) -> Path:
        return self.root / name


def write(path: Path, content: str) -> Path:
    path.write_text(content, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("html")
    with pytest.MonkeyPatch.context() as patch, ScriptedAnthropic() as api:
        patch.setenv("ANTHROPIC_API_KEY", TEST_API_KEY)
        patch.setenv("ANTHROPIC_BASE_URL", api.url)
        patch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
        patch.delenv("GITHUB_STEP_SUMMARY", raising=False)
        (root / "home").mkdir()
        patch.setenv("HOME", str(root / "home"))
        patch.chdir(root)
        yield Lab(root, api)


# The tests that read the one CSV report run on one worker, so it is written once (`--dist
# loadgroup`).
CSV_REPORT = pytest.mark.xdist_group("html-csv-report")


@pytest.fixture(scope="module")
def csv_report(lab: Lab) -> Path:
    """A CSV suite, two iterations, with hostile case names; -o and --html together."""
    code, output = lab.run(
        "--csv",
        lab.csv,
        "--server-module",
        EXAMPLE_SERVER,
        "-i",
        "2",
        "-o",
        lab.path("csv.json"),
        "--html",
        lab.path("csv.html"),
    )
    assert code == 1, output  # forbidden_case fails
    assert f"wrote {lab.path('csv.html')}" in output
    return lab.path("csv.html")


# ============================================================================ the browser
def chromium_args(profile: Path) -> list[str]:
    assert CHROMIUM, (
        "chromium is not installed: apt-get install -y chromium (the README's install step)"
    )
    return [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
    ]


def page_url(path: Path, case: str | None = None) -> str:
    return path.resolve().as_uri() + (f"#case={quote(case, safe='')}" if case is not None else "")


def dump_dom(path: Path, tmp_path: Path, case: str | None = None) -> str:
    done = subprocess.run(
        [*chromium_args(tmp_path / "profile-dom"), "--dump-dom", page_url(path, case)],
        capture_output=True,
        text=True,
        timeout=BROWSER_TIMEOUT,
    )
    assert done.returncode == 0 and "</html>" in done.stdout, done.stderr[-2000:]
    return done.stdout


def screenshot(path: Path, tmp_path: Path) -> Path:
    shot = tmp_path / "shot.png"
    done = subprocess.run(
        [
            *chromium_args(tmp_path / "profile-shot"),
            "--window-size=1280,900",
            f"--screenshot={shot}",
            page_url(path),
        ],
        capture_output=True,
        text=True,
        timeout=BROWSER_TIMEOUT,
    )
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    return shot


class DomText(HTMLParser):
    """The text of a dumped DOM (script contents left out), and its elements."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.tags: list[tuple[str, dict]] = []
        self.skip = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append((tag, dict(attrs)))
        self.skip += tag in ("script", "style")

    def handle_endtag(self, tag: str) -> None:
        self.skip -= tag in ("script", "style")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.parts.append(data)

    @property
    def text(self) -> str:
        return " ".join(self.parts)


def parse_dom(dom: str) -> DomText:
    parser = DomText()
    parser.feed(dom)
    return parser


class Browser:
    """Headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe:
    commands on fd 3, answers on fd 4, each message ended by NUL): no port, no websocket."""

    def __init__(self, profile: Path) -> None:
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()

        def child_fds() -> None:  # the pipe ends become the child's fds 3 and 4
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_chrome_r, from_chrome_w)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.process = subprocess.Popen(
            [*chromium_args(profile), "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=child_fds,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buffer, self.next_id, self.session = b"", 0, None

    def send(self, method: str, params: dict | None = None, session: bool = True) -> dict:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self.to_chrome, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self.buffer:
                chunk = os.read(self.from_chrome, 1 << 16)
                assert chunk, "chromium closed the DevTools pipe"
                self.buffer += chunk
            raw, _, self.buffer = self.buffer.partition(b"\0")
            answer = json.loads(raw)
            if answer.get("id") == self.next_id:
                return answer

    def call(self, method: str, params: dict | None = None, session: bool = True) -> dict:
        answer = self.send(method, params, session)
        assert "error" not in answer, answer
        return answer["result"]

    def open(self, url: str) -> None:
        target = self.call("Target.createTarget", {"url": url}, session=False)["targetId"]
        self.session = self.call(
            "Target.attachToTarget", {"targetId": target, "flatten": True}, session=False
        )["sessionId"]
        deadline = time.monotonic() + BROWSER_TIMEOUT
        while (
            time.monotonic() < deadline
        ):  # until the page (not about:blank) has drawn its case table
            answer = self.send(
                "Runtime.evaluate",
                {
                    "expression": "location.protocol === 'file:' && "
                    "!!document.getElementById('case-table')",
                    "returnByValue": True,
                },
            )
            if answer.get("result", {}).get("result", {}).get("value") is True:
                return
            time.sleep(0.1)
        raise AssertionError(f"the page did not load: {url}")

    def eval(self, expression: str) -> Any:
        answer = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        assert "exceptionDetails" not in answer, answer
        return answer["result"].get("value")

    def close(self) -> None:
        self.process.kill()
        self.process.wait(30)
        os.close(self.to_chrome)
        os.close(self.from_chrome)


@pytest.fixture
def browser(tmp_path):
    b = Browser(tmp_path / "profile-cdp")
    try:
        yield b
    finally:
        b.close()


def png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """The rows of an 8-bit RGB(A) PNG, unfiltered (enough of PNG for a screenshot)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, chunks, header = 8, [], None
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        body = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        position += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    channels = 3 if colour == 2 else 4
    raw, stride, rows, previous = (
        zlib.decompress(b"".join(chunks)),
        width * channels,
        [],
        bytearray(width * channels),
    )
    for y in range(height):
        kind, line = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (
                    line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)
                ) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, rows


def assert_not_blank(shot: Path) -> None:
    width, height, rows = png_pixels(shot)
    assert width >= 800 and height >= 600
    sample = [row[i] for row in rows[::7] for i in range(0, len(row), 29)]
    mean = sum(sample) / len(sample)
    variance = sum((v - mean) ** 2 for v in sample) / len(sample)
    distinct = len(set(sample))
    assert variance > 50 and distinct > 20, (
        f"the screenshot looks blank (variance {variance:.1f}, {distinct} values)"
    )


def assert_self_contained(page: str) -> None:
    """One file that loads nothing: no resource URL, no external script or style, a CSP that
    forbids requests, and only the page's own two script elements."""
    assert not re.search(
        r"""(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//""", page, re.IGNORECASE
    )
    assert not re.search(r"url\(\s*['\"]?\s*(?:https?:)?//|@import", page, re.IGNORECASE)
    # the one http URL in the page is SVG's namespace name, an identifier that is never fetched
    assert set(re.findall(r"https?://[^\s\"'<>]+", page)) <= {"http://www.w3.org/2000/svg"}
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page)
    assert csp, "no Content-Security-Policy meta tag"
    policy = dict(part.strip().split(" ", 1) for part in csp.group(1).split(";"))
    assert policy["default-src"] == "'none'" and "connect-src" not in policy
    assert policy["script-src"].startswith("'sha256-") and "unsafe" not in policy["script-src"]
    assert page.count("<script") == 2 and "innerHTML" not in page and "eval(" not in page


# ============================================================================ a CSV suite
@CSV_REPORT
def test_csv_suite_report_holds_every_case_and_runs_nothing_it_holds(
    csv_report: Path, tmp_path: Path
):
    page = csv_report.read_text(encoding="utf-8")
    assert_self_contained(page)
    assert (
        HOSTILE not in page and "</script><b>" not in page
    )  # data never closes the script element
    raw = dump_dom(csv_report, tmp_path)
    dom = parse_dom(raw)
    names = ["tables_ok", HOSTILE, HOSTILE_IMG, "forbidden_case"]
    for name in names:
        assert name in dom.text, name
    title = re.findall(r"<title>(.*?)</title>", raw[: raw.index("</head>")])
    assert title == ["Tool-use evaluation report"], (
        title
    )  # the page's script ran, the hostile names did not
    rows = [attrs["data-case"] for tag, attrs in dom.tags if tag == "tr" and "data-case" in attrs]
    assert sorted(rows) == sorted(names)
    assert not any(tag == "img" for tag, _ in dom.tags)
    assert sum(1 for tag, _ in dom.tags if tag == "script") == 2
    for chart in ("precision, recall and F1 per tool", "calls per tool"):
        assert any(tag == "svg" and attrs.get("aria-label") == chart for tag, attrs in dom.tags), (
            chart
        )


@CSV_REPORT
def test_a_case_opened_from_the_fragment_shows_its_transcripts(csv_report: Path, tmp_path: Path):
    dom = parse_dom(dump_dom(csv_report, tmp_path, HOSTILE))
    detail = dom.text[dom.text.index("Note on this case") - 400 :]
    assert HOSTILE in detail and "Run 1" in detail and "Run 2" in detail
    assert "tool call:" in detail and "list_warehouse_tables" in detail
    assert '"schema": "public</script><b>x"' in detail  # the arguments, as text
    assert "List the tables please" in detail and FINAL in detail  # user and Claude
    runs = [attrs["data-run"] for tag, attrs in dom.tags if tag == "article"]
    assert runs == [f"{HOSTILE}/run-1", f"{HOSTILE}/run-2"]
    failed = parse_dom(dump_dom(csv_report, tmp_path, "forbidden_case")).text
    reason = next(
        r
        for r in json.loads((csv_report.parent / "csv.json").read_text())["cases"]
        if r["name"] == "forbidden_case"
    )["reasons"]
    assert reason and all(
        f"↳ {r}" in failed for r in reason
    )  # the reason sits at the call it names


@CSV_REPORT
def test_the_screenshot_is_not_blank(csv_report: Path, tmp_path: Path):
    assert_not_blank(screenshot(csv_report, tmp_path))


@CSV_REPORT
def test_clicks_filters_and_review_notes_in_the_browser(csv_report: Path, browser: Browser):
    browser.open(page_url(csv_report))
    assert browser.eval("document.title") == "Tool-use evaluation report"
    assert browser.eval("document.getElementById('case-detail').hidden") is True
    browser.eval("document.querySelector('tr.case-row[data-case=\"forbidden_case\"]').click()")
    assert browser.eval("document.querySelector('#case-detail h2').textContent").endswith(
        "forbidden_case"
    )
    assert browser.eval("location.hash") == "#case=forbidden_case"
    assert browser.eval("document.querySelectorAll('#case-detail .step.tool').length") == 2
    collapsed = browser.eval(
        "[...document.querySelectorAll('#case-detail .step.assistant details summary')]"
        ".map(s => s.textContent)"
    )
    assert len(collapsed) == 2 and all("41 lines" in s for s in collapsed), (
        collapsed
    )  # long answers fold
    assert (
        browser.eval("document.querySelector('#case-detail .step.assistant details').open") is False
    )
    # review notes: one on the case, one on a run, downloaded as skill-creator's feedback.json
    browser.eval("""(() => { for (const [id, note] of [["forbidden_case", "why call it at all?"],
                                                      ["forbidden_case/run-2", "second run <b>too</b>"]]) {
        const box = document.querySelector('textarea[data-note="' + id + '"]');
        box.value = note; box.dispatchEvent(new Event('input')); } })()""")
    feedback = json.loads(browser.eval("feedbackJson()"))
    assert feedback["status"] == "complete"
    assert {r["run_id"]: r["feedback"] for r in feedback["reviews"]} == {
        "forbidden_case": "why call it at all?",
        "forbidden_case/run-2": "second run <b>too</b>",
    }
    link = browser.eval(
        "[document.getElementById('download-feedback').download, "
        "document.getElementById('download-feedback').href.slice(0, 5)]"
    )
    assert link == ["feedback.json", "blob:"]
    # filter and sort
    browser.eval(
        "(() => { const f = document.getElementById('case-filter'); f.value = 'forbidden';"
        " f.dispatchEvent(new Event('input')); })()"
    )
    assert browser.eval(
        "[...document.querySelectorAll('tr.case-row')].map(r => r.dataset.case)"
    ) == ["forbidden_case"]
    browser.eval(
        "(() => { const f = document.getElementById('case-filter'); f.value = '';"
        " f.dispatchEvent(new Event('input')); })()"
    )
    browser.eval(
        "[...document.querySelectorAll('th.sortable')].find(th => th.textContent === 'Case').click()"
    )
    order = browser.eval("[...document.querySelectorAll('tr.case-row')].map(r => r.dataset.case)")
    assert order == sorted(order, key=str) or order == sorted(order, key=str, reverse=True)
    assert len(order) == 4
    assert browser.eval("document.title") == "Tool-use evaluation report"


# ============================================================================ a skill benchmark (real Claude Code)
def test_skill_benchmark_report_shows_activation_and_the_skill_call(lab: Lab, tmp_path: Path):
    try:
        find_claude_bin(os.environ.get("CLAUDE_BIN"))
    except E.InputError:
        pytest.fail("the Claude Code CLI is not installed: npm install (the README's install step)")
    html = lab.path("skills.html")
    code, output = lab.run(
        "--skill",
        SKILL_DIR,
        "--trigger",
        lab.trigger,
        "--runs",
        "1",
        "--html",
        html,
        "-o",
        lab.path("skills.json"),
        model=claude_code,
    )
    assert code == 0, output
    page = html.read_text(encoding="utf-8")
    assert_self_contained(page)
    case = f"warehouse-sql: {POSITIVE}"
    dom = parse_dom(dump_dom(html, tmp_path, case))
    assert case in dom.text and f"warehouse-sql: {NEGATIVE}" in dom.text
    assert any(
        tag == "svg" and attrs.get("aria-label") == "activation rate per query"
        for tag, attrs in dom.tags
    )
    for metric in ("triggerRate", "falsePositiveRate", "triggerScore"):
        assert metric in dom.text
    detail = dom.text[dom.text.index("Note on this case") :]
    assert "tool call:" in detail and "Skill" in detail and '"skill": "warehouse-sql"' in detail
    assert "activated skills: warehouse-sql" in detail
    assert_not_blank(screenshot(html, tmp_path))


# ============================================================================ a QA run
def test_qa_report_shows_accuracy_and_the_transcript(lab: Lab, tmp_path: Path):
    html = lab.path("qa.html")
    code, output = lab.run(
        "--qa",
        lab.qa,
        "--server-module",
        EXAMPLE_SERVER,
        "--html",
        html,
        "--answer-match",
        "contains",
    )
    assert code == 0, output
    assert_self_contained(html.read_text(encoding="utf-8"))
    cases = [c.name for c in E.load_qa_suite(lab.qa)]
    dom = parse_dom(dump_dom(html, tmp_path, cases[0]))
    assert "QA accuracy" in dom.text and "1/1 runs (100%)" in dom.text
    detail = dom.text[dom.text.index("Note on this case") :]
    assert QA_PROMPT in detail and "list_warehouse_tables" in detail and FINAL in detail


# ============================================================================ a comparison
def test_comparison_report_puts_regressions_first(lab: Lab, tmp_path: Path):
    old, new = lab.path("old.json"), lab.path("new.json")
    # six runs a case: 6/6 -> 0/6 is significant (p = 2/924, Holm x4), one run would be noise
    lab.run(
        "--csv", lab.csv, "--server-module", EXAMPLE_SERVER, "-i", "6", "-o", old, model=answers
    )
    lab.run(
        "--csv", lab.csv, "--server-module", EXAMPLE_SERVER, "-i", "6", "-o", new, model=no_tools
    )
    html = lab.path("diff.html")
    code, output = lab.run("--compare", old, new, "--html", html)
    assert code == 1, output
    assert_self_contained(html.read_text(encoding="utf-8"))
    dom = parse_dom(dump_dom(html, tmp_path))
    text = dom.text
    assert text.index("Changes: regressions and fixes first") < text.index("Cases (4)")
    assert "3 regression(s), 1 fix(es), 0 within noise" in text
    # four tied p's: Holm tests each at alpha / 4, and the interval is at that level (98.75 %)
    assert "-100.0 pts (98.8% " in text and "(Holm over 4 cases)" in text
    assert "runs passed" in text and "cost per run" in text
    rows = [attrs["data-case"] for tag, attrs in dom.tags if tag == "tr" and "data-case" in attrs]
    assert set(rows[:3]) == {"tables_ok", HOSTILE, HOSTILE_IMG} and rows[3] == "forbidden_case"
    opened = parse_dom(dump_dom(html, tmp_path, "tables_ok")).text
    assert "I would rather not look." in opened[opened.index("Note on this case") :]


# ============================================================================ --from: the reports of a results file
@CSV_REPORT
def test_from_renders_every_report_of_a_results_file(csv_report: Path, lab: Lab):
    source = lab.path("csv.json")
    outputs = {
        "--html": lab.path("from.html"),
        "--report": lab.path("from.md"),
        "--junit": lab.path("from.xml"),
        "--csv-out": lab.path("from.csv"),
    }
    code, output = lab.run(
        "--from", source, *[x for pair in outputs.items() for x in map(str, pair)]
    )
    assert code == 0, output
    page = outputs["--html"].read_text(encoding="utf-8")
    data = json.loads(
        re.search(
            r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S
        ).group(1)
    )
    original = json.loads(
        re.search(
            r'<script type="application/json" id="report-data">(.*?)</script>',
            csv_report.read_text(encoding="utf-8"),
            re.S,
        ).group(1)
    )
    assert data["cases"] == original["cases"] and data["runs"] == original["runs"]
    assert (
        "forbidden_case" in outputs["--report"].read_text()
        and "### Failures" in outputs["--report"].read_text()
    )
    assert outputs["--junit"].read_text().count("<testcase") == 4
    assert len(outputs["--csv-out"].read_text().strip().splitlines()) == 1 + 8


@CSV_REPORT
def test_an_api_key_in_a_results_file_never_reaches_the_page(csv_report: Path, lab: Lab):
    document = json.loads(lab.path("csv.json").read_text())
    document["results"][0]["tool_calls"][0]["output"] = f"token={TEST_API_KEY} leaked by a server"
    leaky = write(lab.path("leaky.json"), json.dumps(document))
    code, output = lab.run("--from", leaky, "--html", lab.path("leaky.html"))
    assert code == 0, output
    page = lab.path("leaky.html").read_text(encoding="utf-8")
    assert TEST_API_KEY not in page and "token=[REDACTED] leaked by a server" in page


@CSV_REPORT
def test_from_makes_no_model_call(csv_report: Path, lab: Lab):
    before = len(lab.api.requests)
    code, _ = lab.run("--from", lab.path("csv.json"), "--html", lab.path("again.html"))
    assert code == 0 and len(lab.api.requests) == before


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "results file is not valid JSON"),
        ('{"schema_version": "0.1", "results": []}', "schema version"),
        ('{"results": []}', "schema version"),
    ],
)
def test_from_a_bad_file_is_one_line_and_exit_2(lab: Lab, content: str, message: str):
    bad = write(lab.path("bad.json"), content)
    code, output = lab.run("--from", bad, "--html", lab.path("bad.html"))
    assert code == 2 and message in output and len(output.strip().splitlines()) == 1, output
    assert not lab.path("bad.html").exists()


@CSV_REPORT
def test_from_needs_an_output_and_takes_no_run_option(lab: Lab, csv_report: Path):
    code, output = lab.run("--from", lab.path("csv.json"))
    assert (
        code == 2 and "needs an output to write" in output and len(output.strip().splitlines()) == 1
    )
    code, output = lab.run("--from", lab.path("csv.json"), "--html", lab.path("x.html"), "-i", "2")
    assert code == 2 and "does not apply to --from" in output
    code, output = lab.run("--from", lab.path("csv.json"), "--html", lab.path("csv.json"))
    assert code == 2 and "is the input" in output


# ============================================================================ size
@CSV_REPORT
def test_a_200_case_suite_is_well_under_2_mb(csv_report: Path, lab: Lab):
    """200 cases x 3 runs, each with the CSV suite's transcripts (tool output cut where long)."""
    document = json.loads(lab.path("csv.json").read_text())
    template_case, template_runs = (
        document["cases"][0],
        [r for r in document["results"] if r["test_name"] == "tables_ok"],
    )
    cases, results = [], []
    for n in range(200):
        cases.append(dict(template_case, name=f"case_{n:03d}"))
        for iteration in (1, 2, 3):
            results.append(dict(template_runs[0], test_name=f"case_{n:03d}", iteration=iteration))
    document.update(cases=cases, results=results)
    document["metadata"]["total_results"] = len(results)
    big = write(lab.path("big.json"), json.dumps(document))
    code, output = lab.run("--from", big, "--html", lab.path("big.html"))
    assert code == 0, output
    size = lab.path("big.html").stat().st_size
    assert size < 1_500_000, f"{size:,} bytes for 200 cases x 3 runs"
    assert lab.path("big.html").read_text(encoding="utf-8").count("case_199/run-3") >= 1


# ============================================================================ GitHub Actions' step summary
@CSV_REPORT
def test_step_summary_is_appended_in_every_mode_that_writes_results(lab: Lab, csv_report: Path):
    summary = lab.path("step-summary.md")
    write(summary, "earlier step\n")
    env = {"GITHUB_STEP_SUMMARY": str(summary)}
    code, _ = lab.run("--csv", lab.csv, "--server-module", EXAMPLE_SERVER, env=env)
    assert code == 1
    content = summary.read_text()
    assert (
        content.startswith("earlier step\n")
        and "## ❌ Tool-use evaluation: 3/4 cases passed" in content
    )
    assert "&lt;script&gt;" in content and HOSTILE not in content
    lab.run(
        "--qa", lab.qa, "--server-module", EXAMPLE_SERVER, "--answer-match", "contains", env=env
    )
    assert "### QA accuracy" in summary.read_text()
    lab.run("--compare", lab.path("csv.json"), lab.path("csv.json"), env=env)
    assert "Comparison: 0 regression(s)" in summary.read_text()
    lab.run("--from", lab.path("csv.json"), "--report", lab.path("s.md"), env=env)
    assert summary.read_text().count("Tool-use evaluation: 3/4 cases passed") == 2
    before = summary.read_text()
    lab.run("--csv", lab.csv, "--server-module", EXAMPLE_SERVER, env={"GITHUB_STEP_SUMMARY": ""})
    assert summary.read_text() == before  # unset (or empty): nothing is appended anywhere


def test_the_readme_shows_a_screenshot_of_the_report():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", readme[readme.index("## The HTML report") :])
    assert shown and shown[0] == "examples/report.png"
    assert_not_blank(ROOT / shown[0])


def test_html_json_escapes_what_could_end_the_script():
    value = {"name": "</script><script>alert(1)</script>&\u2028\u2029<!--"}
    encoded = html_json(value)
    assert "<" not in encoded and ">" not in encoded and "&" not in encoded
    assert "\u2028" not in encoded and "\u2029" not in encoded
    assert json.loads(encoded) == value


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


# ============================================================================ a plugin
def test_the_plugin_page_shows_claude_code_s_effect_and_both_arms_labelled(
    greeter_side_by_side, browser: Browser, tmp_path: Path
):
    """tests/plugins/greeter, run by `plugin --html` and by `claude plugin eval --report` on one
    scripted server (tests/plugin_side_by_side.py): our page is the plugin's own — titled with
    its name and version, its verdict line claude plugin eval's, four cases (the arm without the
    plugin is each case's labelled baseline, never a case or a failure of its own), and per case
    both arms' runs with every grader's verdict, the prompt and the graders."""
    runs = greeter_side_by_side
    ours = runs.folder / "ours.html"
    assert_self_contained(ours.read_text(encoding="utf-8"))
    theirs = runs.read("cc.html")
    their_verdict = re.search(r'<p class="verdict">(.*?)</p>', theirs, re.S)
    assert their_verdict, "no verdict line in claude plugin eval's report"
    headline = html.unescape(re.sub(r"<[^>]+>", "", their_verdict.group(1)))
    assert "Eval report — greeter v1.0.0" in html.unescape(theirs)
    browser.open(page_url(ours))
    assert browser.eval("document.title") == "Plugin greeter v1.0.0 report"
    assert browser.eval("document.querySelector('p.verdict').textContent") == headline
    cards = browser.eval(
        "Object.fromEntries([...document.querySelectorAll('.card')].map(c =>"
        " [c.querySelector('.label').textContent, c.querySelector('.value').textContent]))"
    )
    assert cards["Suite score · with greeter"] == "83.3%" and cards["Baseline score"] == "50%"
    assert cards["Ablation Δ"] == "↑ +33.3 pts" and cards["Passed"] == "3/4 (75%)"
    assert browser.eval("document.getElementById('cases').textContent") == "Cases (4)"
    rows = browser.eval("[...document.querySelectorAll('tr.case-row')].map(r => r.dataset.case)")
    assert sorted(rows) == ["01-greet", "02-capital", "03-welcome-command", "04-yaml-case"]
    header = browser.eval("document.querySelector('#top .muted').textContent")
    assert "Claude Code 2.1.332" in header and "wall time 0.0s" not in header
    assert runs.ours["metadata"]["model"] in header
    # a case opened: both arms' runs, each labelled, with its graders' verdicts
    browser.eval("document.querySelector('tr.case-row[data-case=\"01-greet\"]').click()")
    titles = browser.eval(
        "[...document.querySelectorAll('#case-detail .run > h4')].map(h => h.textContent)"
    )
    assert [t.split(" ")[0:4] for t in titles] == [
        ["with", "greeter", "·", "Run"],
        ["with", "greeter", "·", "Run"],
        ["baseline", "(without)", "·", "Run"],
        ["baseline", "(without)", "·", "Run"],
    ]
    assert all(" tokens" in t and " 0 tokens" not in t for t in titles)
    # the plugin's section: per case, each arm's runs with every grader's verdict and why
    section = browser.eval(
        "document.querySelector('details[data-plugin-case=\"01-greet\"]').textContent"
    )
    assert "with greeter · run 1" in section and "baseline (without) · run 2" in section
    assert "✓ pass says-done: matched Done" in section
    assert "✗ fail uses-skill: Skill called 0x (expected 1..∞)" in section
    assert "Please write a formal greeting card that greets Alex warmly by name." in section
    assert 'target "last_message" pattern "Done"' in section
    assert_not_blank(screenshot(ours, tmp_path))
