
"use strict";
const DATA = JSON.parse(document.getElementById("report-data").textContent);
const SVG = "http://www.w3.org/2000/svg";
const NOTES = {};
const LONG_TEXT = 600, LONG_LINES = 10;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = String(text);
  return node;
}
const pct = (x, digits = 0) => (x === null || x === undefined) ? "n/a" : (x * 100).toFixed(digits) + "%";
const usd = (x) => "$" + Number(x || 0).toFixed(4);
const secs = (ms) => (Number(ms || 0) / 1000).toFixed(1) + "s";
const num = (x) => Number(x || 0).toLocaleString("en-US");
function verdictBadge(c) {
  if (c.error) return el("span", {class: "badge error"}, "error");
  return el("span", {class: "badge " + (c.passed ? "pass" : "fail")}, c.passed ? "pass" : "fail");
}
function longText(text) {
  text = String(text === null || text === undefined ? "" : text);
  const lines = text.split("\n");
  if (text.length <= LONG_TEXT && lines.length <= LONG_LINES) return el("pre", {}, text);
  const first = lines[0].slice(0, 120);
  return el("details", {}, el("summary", {}, first + " … (" + num(text.length) + " characters, " + lines.length + " lines)"),
            el("pre", {}, text));
}

// ---------------------------------------------------------------- header and overview
function renderHeader() {
  const top = document.getElementById("top");
  top.replaceChildren();
  document.title = DATA.title + " report";
  // a comparison that passes with a suspected regression let through is headed with a warning, never PASSED
  const [tint, verdict] = !DATA.passed ? ["fail", "FAILED"] : DATA.warning ? ["flaky", DATA.warning.toUpperCase()] : ["pass", "PASSED"];
  top.append(el("h1", {}, el("span", {class: "badge " + tint}, verdict),
                " ", DATA.title),
             el("div", {class: "muted"}, "model " + DATA.model,
                DATA.claude_version ? " · Claude Code " + DATA.claude_version : "",
                " · " + DATA.generated_at + " · wall time " + Number(DATA.wall_time_s || 0).toFixed(1) + "s"));
}
function card(label, value, detail) {
  return el("div", {class: "card"}, el("div", {class: "label"}, label), el("div", {class: "value"}, value),
            detail ? el("div", {class: "muted"}, detail) : null);
}
function renderOverview(app) {
  const s = DATA.summary, u = s.usage;
  app.append(el("h2", {id: "overview"}, "Overview"));
  app.append(el("div", {class: "cards"},
    card("Passed", s.passed + "/" + s.cases + " (" + pct(s.pass_rate) + ")",
         "95% interval " + pct(s.interval[0]) + "–" + pct(s.interval[1])),
    card("Runs", num(s.runs), s.run_errors + " with errors · " + s.flaky + " flaky · threshold " + pct(s.threshold)),
    card("Cost", usd(s.cost_usd)),
    card("Tokens", num(u.input_tokens + u.output_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens),
         "in " + num(u.input_tokens) + " · out " + num(u.output_tokens) + " · cache read " + num(u.cache_read_input_tokens)
         + " · cache write " + num(u.cache_creation_input_tokens)),
    card("Latency p50 / p95", secs(s.latency_p50_ms) + " / " + secs(s.latency_p95_ms))));
  if (s.not_started) app.append(el("p", {class: "flag"}, s.not_started + " runs not started (--max-cost)"));
  if (s.interrupted) app.append(el("p", {class: "flag"}, "Interrupted: rerun with --resume"));
}
function renderIsolation(app, isolation) {
  if (isolation.outside_writes.length) app.append(el("p", {class: "flag"},
    "Files changed outside the temporary projects: " + isolation.outside_writes.join(", ")));
  if (isolation.changed_elsewhere.length) app.append(el("p", {class: "flag"},
    "Changed while the runs ran, by another program (the runs are confined): "
    + isolation.changed_elsewhere.join(", ")));
  if (isolation.note) app.append(el("p", {class: "flag"}, isolation.note));
}
function renderBlock(app, block) {
  // any section without a renderer of its own: a heading, notes and tables of plain text
  app.append(el("h2", {}, block.title));
  for (const note of block.notes) app.append(el("p", {}, note));
  for (const t of block.tables) {
    if (t.caption) app.append(el("h3", {}, t.caption));
    app.append(el("table", {}, el("thead", {}, el("tr", {}, t.headers.map(h => el("th", {}, h)))),
      el("tbody", {}, t.rows.map(row => el("tr", {}, row.map(cell => el("td", {}, cell)))))));
  }
}

// ---------------------------------------------------------------- charts (inline SVG)
const COLOURS = {precision: "#0969da", recall: "#bf8700", f1: "#1a7f37"};
function legend(entries) {
  return el("div", {class: "legend"}, entries.map(([name, colour]) => el("span", {}, el("i", {style: "background:" + colour}), name)));
}
function barChart(rows, series, opts) {
  // rows: [{label, values: {series: 0..1}}], horizontal bars, one group per row
  const labelWidth = opts.labelWidth || 190, width = opts.width || 420, bar = 12, gap = 10;
  const head = opts.threshold === undefined ? 0 : 16;   // room for the threshold's label above the bars
  const groupHeight = series.length * bar + gap, height = head + rows.length * groupHeight + 30;
  const chart = svg("svg", {width: labelWidth + width + 60, height: height, role: "img", "aria-label": opts.title});
  const x = (v) => labelWidth + v * width;
  for (const tick of [0, 0.25, 0.5, 0.75, 1]) {
    chart.append(svg("line", {x1: x(tick), x2: x(tick), y1: 0, y2: height - 20, stroke: "#d0d7de"}));
    if (opts.ticks !== false) chart.append(svg("text", {x: x(tick), y: height - 6, "text-anchor": "middle"}, pct(tick)));
  }
  rows.forEach((row, i) => {
    const top = head + i * groupHeight;
    const fits = Math.floor(labelWidth / 7);
    const label = row.label.length > fits ? row.label.slice(0, fits - 1) + "…" : row.label;
    const text = svg("text", {x: labelWidth - 8, y: top + groupHeight / 2, "text-anchor": "end", "dominant-baseline": "middle"}, label);
    text.append(svg("title", {}, row.label));
    chart.append(text);
    series.forEach(([name, colour], j) => {
      const value = row.values[name];
      if (value === null || value === undefined) return;
      const rect = svg("rect", {x: x(0), y: top + j * bar, width: Math.max(1, value * width), height: bar - 2,
                                fill: row.colour || colour});
      rect.append(svg("title", {}, row.label + " " + name + ": " + pct(value, 1)));
      chart.append(rect);
      chart.append(svg("text", {x: x(value) + 4, y: top + j * bar + bar / 2, "dominant-baseline": "middle"},
                       row.text === undefined ? pct(value) : row.text));
    });
  });
  if (opts.threshold !== undefined) {
    chart.append(svg("line", {x1: x(opts.threshold), x2: x(opts.threshold), y1: 0, y2: height - 20, stroke: "#cf222e",
                              "stroke-width": 2, "stroke-dasharray": "5,3"}));
    chart.append(svg("text", {x: x(opts.threshold) + 4, y: 11, fill: "#cf222e"}, "threshold " + pct(opts.threshold)));
  }
  return el("div", {class: "chart"}, chart);
}
function renderToolSelection(page) {
  const s = DATA.summary;
  const app = el("div", {class: "chart-row"});   // the bars and the heat map side by side when they fit
  if ((s.tools && s.tools.length) || Object.keys(s.confusion || {}).length) page.append(el("h2", {id: "tools"}, "Tool selection"), app);
  if (s.tools && s.tools.length) {
    app.append(el("div", {}, el("h3", {}, "Precision, recall and F1 per tool"), legend(Object.entries(COLOURS)),
      barChart(s.tools.map(t => ({label: t.tool, values: {precision: t.precision, recall: t.recall, f1: t.f1}})),
               Object.entries(COLOURS), {title: "precision, recall and F1 per tool"})));
  }
  const confusion = s.confusion || {};
  const expected = Object.keys(confusion).sort();
  if (expected.length) {
    const called = [...new Set(expected.flatMap(e => Object.keys(confusion[e])))].sort();
    const most = Math.max(1, ...expected.flatMap(e => Object.values(confusion[e])));
    const cell = 36, left = 190, top = 120;
    const chart = svg("svg", {width: left + called.length * cell + 110, height: top + expected.length * cell + 10,
                              role: "img", "aria-label": "confusion table"});
    called.forEach((name, j) => {
      const text = svg("text", {x: 0, y: 0, transform: "translate(" + (left + j * cell + cell / 2) + "," + (top - 8) + ") rotate(-45)"},
                       name.length > 22 ? name.slice(0, 21) + "…" : name);
      text.append(svg("title", {}, name));
      chart.append(text);
    });
    expected.forEach((name, i) => {
      chart.append(svg("text", {x: left - 8, y: top + i * cell + cell / 2, "text-anchor": "end", "dominant-baseline": "middle"},
                       name.length > 26 ? name.slice(0, 25) + "…" : name));
      called.forEach((other, j) => {
        const n = confusion[name][other] || 0;
        const shade = n / most;
        const colour = name === other ? "rgba(26,127,55," + (0.1 + 0.9 * shade) + ")" : "rgba(207,34,46," + (n ? 0.1 + 0.9 * shade : 0.03) + ")";
        const rect = svg("rect", {x: left + j * cell, y: top + i * cell, width: cell - 2, height: cell - 2, fill: colour});
        rect.append(svg("title", {}, "expected " + name + ", called first " + other + ": " + n));
        chart.append(rect);
        if (n) chart.append(svg("text", {x: left + j * cell + cell / 2, y: top + i * cell + cell / 2, "text-anchor": "middle",
                                         "dominant-baseline": "middle", fill: shade > 0.5 ? "#fff" : "#1f2328"}, n));
      });
    });
    app.append(el("div", {}, el("h3", {}, "Confusion: expected tool (rows) → tool called first (columns)"), el("div", {class: "chart"}, chart)));
  }
}
function renderCoverage(app) {
  const c = DATA.summary.tool_coverage;
  if (c && (c.available.length || c.called.length)) {
    app.append(el("h2", {id: "coverage"}, "Tool coverage"));
    const covered = c.available.filter(t => t in c.calls).length;
    app.append(el("p", {}, covered + "/" + c.available.length + " of the servers' tools called in some run"
                  + (c.coverage !== null ? " (" + pct(c.coverage) + ")" : "") + "."));
    const tools = [...c.available, ...c.called.filter(t => !c.available.includes(t))];
    const most = Math.max(1, ...Object.values(c.calls));
    app.append(barChart(tools.map(t => ({label: t, text: c.calls[t] ? c.calls[t] + " calls" : "never called",
                                         values: {calls: (c.calls[t] || 0) / most},
                                         colour: c.calls[t] ? (c.expected.includes(t) ? "#1a7f37" : "#0969da") : "#cf222e"})),
                        [["calls", "#0969da"]], {title: "calls per tool", labelWidth: 240, ticks: false}));
    app.append(legend([["expected by a case", "#1a7f37"], ["called, not expected", "#0969da"], ["never called", "#cf222e"]]));
  }
}
function renderTriggers(app, triggers) {
  app.append(el("h2", {id: "skills"}, "Skill triggering"));
  app.append(el("table", {},
    el("thead", {}, el("tr", {}, ["Skill", "triggerRate", "falsePositiveRate", "triggerScore", "Precision", "Recall", "F1",
                                  "Errored runs", "Cost"].map(h => el("th", {}, h)))),
    el("tbody", {}, triggers.map(t => el("tr", {},
      el("td", {}, t.skill + (t.distractors === null || t.distractors === undefined ? "" : " (+" + t.distractors + ")")),
      el("td", {class: "num"}, t.triggerRate === null ? "n/a" : t.triggerRate.toFixed(0) + "% (" + t.positivesActivated + "/" + t.positives + ")"),
      el("td", {class: "num"}, t.falsePositiveRate === null ? "n/a" : t.falsePositiveRate.toFixed(0) + "% (" + t.negativesActivated + "/" + t.negatives + ")"),
      el("td", {class: "num"}, t.triggerScore.toFixed(1) + "%"),
      el("td", {class: "num"}, t.precision.toFixed(0) + "%"),
      el("td", {class: "num"}, t.recall === null ? "n/a" : t.recall.toFixed(0) + "%"),
      el("td", {class: "num"}, t.f1.toFixed(0) + "%"),
      el("td", {class: "num"}, t.erroredRuns + "/" + t.totalRuns),
      el("td", {class: "num"}, usd(t.costUsd)))))));
  const label = (t) => t.skill + (t.distractors === null || t.distractors === undefined ? "" : " (+" + t.distractors + " distractors)");
  for (const t of triggers) {
    app.append(el("h3", {}, "Activation rate per query: " + label(t)));
    app.append(legend([["should activate", "#1a7f37"], ["should not activate", "#8c959f"], ["wrong side of the threshold", "#cf222e"]]));
    app.append(barChart(t.queryResults.map(q => ({label: (q.correct ? "✓ " : "✗ ") + q.query,
                                                  values: {rate: q.activationRate},
                                                  colour: !q.correct ? "#cf222e" : q.expected === "activate" ? "#1a7f37" : "#8c959f"})),
                        [["rate", "#1a7f37"]], {title: "activation rate per query", labelWidth: 300, threshold: t.threshold}));
  }
}
function renderQa(app, qa) {
  app.append(el("h2", {id: "qa"}, "QA accuracy"));
  app.append(el("div", {class: "cards"},
    card("Accuracy", qa.correct + "/" + qa.runs + " runs (" + pct(qa.accuracy) + ")", "95% interval " + pct(qa.interval[0]) + "–" + pct(qa.interval[1])),
    card("Tasks", qa.tasks), card("Mean task duration", qa.mean_task_seconds.toFixed(2) + "s"),
    card("Tool calls per run", qa.mean_tool_calls.toFixed(2), qa.tool_calls + " in all")));
  if (qa.tools.length) app.append(el("table", {}, el("thead", {}, el("tr", {}, ["Tool", "Calls", "Total", "Mean", "Longest"].map(h => el("th", {}, h)))),
    el("tbody", {}, qa.tools.map(t => el("tr", {}, el("td", {}, t.tool), el("td", {class: "num"}, t.calls),
      el("td", {class: "num"}, secs(t.total_ms)), el("td", {class: "num"}, t.mean_ms.toFixed(0) + " ms"),
      el("td", {class: "num"}, t.max_ms.toFixed(0) + " ms"))))));
}
function renderMatrix(app, m) {
  // a model matrix: each model's totals, the cases that pass on one model and fail on another, then
  // every case and tool with a column per model
  const head = (first) => el("thead", {}, el("tr", {}, el("th", {}, first), m.models.map(model => el("th", {}, model))));
  app.append(el("h2", {id: "models"}, "Models side by side"));
  app.append(el("table", {}, el("thead", {}, el("tr", {}, ["Model", "Passed", "Runs", "Runs with errors", "Cost",
      "Latency p50 / p95", "$/MTok in / out"].map(h => el("th", {}, h)))),
    el("tbody", {}, m.summaries.map(s => el("tr", {}, el("td", {}, s.model),
      el("td", {class: "num"}, s.passed + "/" + s.cases + " (" + pct(s.pass_rate) + ")"), el("td", {class: "num"}, s.runs),
      el("td", {class: "num"}, s.run_errors), el("td", {class: "num"}, usd(s.cost_usd)),
      el("td", {class: "num"}, secs(s.latency_p50_ms) + " / " + secs(s.latency_p95_ms)),
      el("td", {class: "num"}, "$" + s.price.input + " / $" + s.price.output + (s.priced ? "" : " (guessed)")))))));
  const differ = m.cases.filter(c => c.disagree);
  app.append(el("p", {class: differ.length ? "flag" : "muted"}, differ.length
    ? differ.length + " case(s) pass on one model and fail on another: "
      + differ.map(c => c.name + " (passes on " + c.passed_on.join(", ") + "; fails on " + c.failed_on.join(", ") + ")").join("; ")
    : "Every case has the same verdict on every model."));
  app.append(el("table", {}, head("Case"), el("tbody", {}, m.cases.map(c => el("tr", {},
    el("td", {}, c.name, c.disagree ? [" ", el("span", {class: "badge fail"}, "differs")] : null),
    m.models.map(model => {
      const cell = c.models[model];
      return el("td", {class: "num"}, cell ? [verdictBadge(cell), " " + cell.passes + "/" + cell.runs + " · "
        + usd(cell.cost_usd) + " · " + secs(cell.mean_latency_ms)] : "-");
    }))))));
  if (m.tools.length) app.append(el("table", {}, head("Tool (calls · F1 · mean call)"), el("tbody", {}, m.tools.map(t => el("tr", {},
    el("td", {}, t.tool), m.models.map(model => {
      const cell = t.models[model];
      return el("td", {class: "num"}, cell ? cell.calls + " · " + (cell.f1 === null ? "n/a" : cell.f1.toFixed(2))
        + " · " + Number(cell.mean_ms || 0).toFixed(0) + " ms" : "-");
    }))))));
}
function renderComparisons(app) {
  if (!DATA.comparisons) return;
  app.append(el("h2", {id: "changes"}, "Changes: regressions and fixes first"));
  for (const c of DATA.comparisons) {
    const counts = {};
    c.changes.forEach(ch => { counts[ch.change] = (counts[ch.change] || 0) + 1; });
    const tint = {failed: "fail", warning: "flaky", passed: "pass"}[c.verdict];
    app.append(el("h3", {}, el("span", {class: "badge " + tint}, c.badge), " ", c.old + " → " + c.new));
    app.append(el("p", {}, c.counts + " · passed " + c.old_passed + " → "
                  + c.new_passed + " · cost " + usd(c.old_cost) + " → " + usd(c.new_cost)
                  + " · a change counts when " + c.method));
    if (c.suspicion) app.append(el("p", {class: "flag"}, c.suspicion));
    if (c.statistics.length) app.append(el("table", {class: "comparison-statistics"},
      el("tbody", {}, c.statistics.map(([label, shown]) => el("tr", {}, el("td", {}, label), el("td", {}, shown))))));
    for (const [skill, before, after] of c.trigger_scores)
      app.append(el("p", {}, "triggerScore " + skill + ": " + (before === null ? "-" : before.toFixed(1) + "%") + " → "
                    + (after === null ? "-" : after.toFixed(1) + "%")));
    if (!c.changes.length) { app.append(el("p", {class: "muted"}, "No case changed.")); continue; }
    app.append(el("table", {}, el("thead", {}, el("tr", {}, ["Case", "Change", "Old", "New", "Difference (interval), p", "Note"].map(h => el("th", {}, h)))),
      el("tbody", {}, c.changes.map(ch => el("tr", {},
        el("td", {}, DATA.runs && caseByName(ch.name) ? el("button", {class: "link", onclick: () => openCase(ch.name)}, ch.name) : ch.name),
        el("td", {class: "change-" + ch.change}, ch.shown), el("td", {}, ch.old || "-"), el("td", {}, ch.new || "-"),
        el("td", {}, ch.statistics), el("td", {}, ch.reasons))))));
  }
}

// ---------------------------------------------------------------- the case table
const COLUMNS = [
  ["name", "Case", c => c.name], ["tags", "Tag", c => (c.tags || []).join(", ") || c.group],
  ["verdict", "Verdict", c => c.error ? 2 : c.passed ? 0 : 1], ["pass_rate", "Pass rate", c => c.pass_rate],
  ["flaky", "Flaky", c => c.flaky ? 1 : 0], ["cost", "Cost", c => c.cost], ["reasons", "Reasons", c => c.reasons.length]];
const CHANGE_RANK = {regression: 0, suspected: 1, removed: 2, fixed: 3, noise: 4, added: 5, "": 6};
let sortKey = DATA.comparisons ? "change" : "verdict", sortDown = DATA.comparisons ? false : true;
function caseByName(name) { return DATA.cases.find(c => c.name === name); }
function renderCases(app) {
  app.append(el("h2", {id: "cases"}, "Cases (" + DATA.cases.length + ")"));
  const filter = el("input", {type: "search", id: "case-filter", placeholder: "filter: name, tag, reason, prompt"});
  const verdict = el("select", {id: "verdict-filter"}, ["all", "failed", "passed", "flaky", "error"].map(v => el("option", {value: v}, v)));
  const shown = el("span", {class: "muted", id: "case-count"});
  app.append(el("div", {class: "controls"}, filter, verdict, shown));
  const head = el("tr", {});
  const columns = DATA.comparisons ? [["change", "Change", c => CHANGE_RANK[c.change || ""]], ...COLUMNS] : COLUMNS;
  for (const [key, title, _] of columns) {
    const numeric = ["pass_rate", "cost"].includes(key);
    head.append(el("th", {class: "sortable" + (numeric ? " num" : ""), title: "sort by " + title.toLowerCase(),
                          onclick: () => { sortDown = sortKey === key ? !sortDown : key !== "name"; sortKey = key; draw(); }}, title));
  }
  const body = el("tbody", {id: "case-rows"});
  app.append(el("table", {id: "case-table"}, el("thead", {}, head), body));
  app.append(el("section", {id: "case-detail", hidden: true}));
  function draw() {
    const query = filter.value.trim().toLowerCase(), wanted = verdict.value;
    const pick = columns.find(c => c[0] === sortKey)[2];
    const rows = DATA.cases.filter(c => {
      if (wanted === "failed" && (c.passed || c.error)) return false;
      if (wanted === "passed" && !c.passed) return false;
      if (wanted === "flaky" && !c.flaky) return false;
      if (wanted === "error" && !c.error) return false;
      if (!query) return true;
      return [c.name, c.group, c.prompt, c.description, ...(c.tags || []), ...c.reasons.map(r => r[0])]
        .some(text => String(text || "").toLowerCase().includes(query));
    }).sort((a, b) => {
      const x = pick(a), y = pick(b);
      const order = typeof x === "string" ? x.localeCompare(y) : x - y;
      return (sortDown ? -order : order) || a.name.localeCompare(b.name);
    });
    body.replaceChildren(...rows.map(c => {
      const row = el("tr", {class: "case-row", "data-case": c.name, onclick: () => openCase(c.name)});
      if (DATA.comparisons) row.append(el("td", {class: "change-" + c.change}, c.change || "unchanged"));
      row.append(el("td", {}, el("button", {class: "link"}, c.name)),
                 el("td", {}, (c.tags || []).join(", ") || c.group),
                 el("td", {}, verdictBadge(c)),
                 el("td", {class: "num"}, c.passes + "/" + c.runs + " (" + pct(c.pass_rate) + ")"),
                 el("td", {}, c.flaky ? el("span", {class: "badge flaky"}, "flaky") : ""),
                 el("td", {class: "num"}, usd(c.cost)),
                 el("td", {}, c.reasons.length ? el("ul", {class: "reasons"}, c.reasons.map(([r, n]) => el("li", {}, r + (c.runs > 1 ? " (" + n + "/" + c.runs + ")" : "")))) : ""));
      return row;
    }));
    shown.textContent = rows.length + " of " + DATA.cases.length + " shown";
  }
  filter.addEventListener("input", draw);
  verdict.addEventListener("change", draw);
  draw();
}

// ---------------------------------------------------------------- a case opened: its runs as transcripts
function noteBox(id, label) {
  const box = el("textarea", {"data-note": id, placeholder: "a note for the review (goes into feedback.json)"});
  box.value = NOTES[id] || "";
  box.addEventListener("input", () => { if (box.value.trim()) NOTES[id] = box.value; else delete NOTES[id]; saveNotes(); });
  return [el("label", {class: "note-label"}, label), box];
}
function reasonHome(reason, steps) {
  // the tool call a reason names (the first whose tool it mentions); else the run's header
  let best = -1, length = 0;
  steps.forEach((step, i) => {
    if (step.role === "tool" && step.name && reason.includes(step.name) && step.name.length > length && best < 0) { best = i; length = step.name.length; }
  });
  if (best < 0 && /answer|response|refus|concept|pattern/i.test(reason)) {   // about what Claude said last
    steps.forEach((step, i) => { if (step.role === "assistant") best = i; });
  }
  return best;
}
function renderStep(step, flags) {
  const box = el("div", {class: "step " + step.role + (step.error ? " failed" : "")});
  if (step.role === "tool") {
    box.append(el("div", {class: "who"}, "tool call: ", el("code", {}, step.name),
                  step.ms ? " · " + Number(step.ms).toFixed(0) + " ms" : "", step.error ? " · error" : ""));
    if (step.input) box.append(el("div", {class: "muted"}, "arguments"), longText(step.input));
    if (step.output) box.append(el("div", {class: "muted"}, "result"), longText(step.output));
  } else {
    box.append(el("div", {class: "who"}, step.role === "user" ? (step.simulated ? "User (simulated)" : "User") : "Claude"),
               longText(step.text));
  }
  for (const flag of flags) box.append(el("div", {class: "flag"}, "↳ " + flag));
  return box;
}
function renderRun(run) {
  const box = el("article", {class: "run", "data-run": run.id});
  const verdict = run.passed === null ? el("span", {class: "badge error"}, "no verdict") :
    el("span", {class: "badge " + (run.passed ? "pass" : "fail")}, run.passed ? "pass" : "fail");
  box.append(el("h4", {}, (run.arm ? run.arm + " · " : "") + "Run " + run.iteration + " ", verdict, " ",
                el("span", {class: "muted"}, usd(run.cost) + " · " + secs(run.latency_ms) + " · " + num(run.tokens) + " tokens"
                   + (run.ended_by ? " · ended by " + run.ended_by : "") + (run.model ? " · " + run.model : ""))));
  if (run.error) box.append(el("p", {class: "flag"}, "error: " + run.error));
  const homes = {}, loose = [];
  for (const reason of run.reasons) {
    const home = reasonHome(reason, run.steps);
    if (home < 0) loose.push(reason); else (homes[home] = homes[home] || []).push(reason);
  }
  if (loose.length) box.append(el("div", {class: "flag"}, "Why it failed:"), el("ul", {class: "reasons flag"}, loose.map(r => el("li", {}, r))));
  if (run.facts) box.append(el("p", {class: "muted"}, Object.entries(run.facts).map(([k, v]) => k + ": " + v).join(" · ")));
  run.steps.forEach((step, i) => box.append(renderStep(step, homes[i] || [])));
  for (const [name, grade] of Object.entries(run.grades || {})) {
    const g = el("div", {class: "grade"}, el("strong", {}, name === "judge" ? "Judge" : name === "verify" ? "State check" : name),
      " ", grade.error ? el("span", {class: "badge error"}, "error") : el("span", {class: "badge " + (grade.passed ? "pass" : "fail")}, grade.passed ? "pass" : "fail"));
    for (const [key, value] of Object.entries(grade)) if (key !== "passed") g.append(el("div", {}, el("span", {class: "muted"}, key + ": "), longText(typeof value === "string" ? value : JSON.stringify(value))));
    box.append(g);
  }
  box.append(...noteBox(run.id, "Note on run " + run.iteration));
  return box;
}
function openCase(name) {
  const c = caseByName(name), detail = document.getElementById("case-detail");
  if (!c || !detail) return;
  document.querySelectorAll("tr.case-row.open").forEach(r => r.classList.remove("open"));
  document.querySelectorAll("tr.case-row").forEach(r => { if (r.getAttribute("data-case") === name) r.classList.add("open"); });
  detail.hidden = false;
  detail.replaceChildren(...[
    el("h2", {}, verdictBadge(c), " ", c.name),
    el("p", {class: "muted"}, [c.group, c.description,
       c.breaches === null || c.breaches === undefined ? "" : c.breaches ? "attack breached in " + c.breaches + "/" + c.runs + " runs" : "attack held",
       (c.breaches === null || c.breaches === undefined ? "" : "utility: ") + c.passes + "/" + c.runs + " runs passed",
       c.interval ? "95% interval " + pct(c.interval[0]) + "–" + pct(c.interval[1]) : "", usd(c.cost)].filter(Boolean).join(" · ")),
    c.prompt ? [el("div", {class: "muted"}, "prompt"), longText(c.prompt)] : null,
    c.reasons.length ? el("ul", {class: "reasons flag"}, c.reasons.map(([r, n]) => el("li", {}, r + " (" + n + "/" + c.runs + " runs)"))) : null,
    noteBox(c.name, "Note on this case")].flat().filter(x => x));
  if (!c.run_ids.length) detail.append(el("p", {class: "muted"}, DATA.results_file ? "Runs are in " + DATA.results_file + " (--summary-only)." : "No run of this case is in the results."));
  for (const id of c.run_ids) if (DATA.runs[id]) detail.append(renderRun(DATA.runs[id]));
  const hash = "#case=" + encodeURIComponent(name);
  if (location.hash !== hash) { try { history.replaceState(null, "", hash); } catch (e) { /* a page without history */ } }
  detail.scrollIntoView({block: "start"});
}

// ---------------------------------------------------------------- a plugin's page (claude plugin eval's figures)
function renderPlugin(app, p) {
  // the plugin's effect as claude plugin eval reports it, per configuration: the headline, the tiles
  for (const t of p.tiles) {
    app.append(el("h2", {id: "plugin-effect"}, t.title + (t.label ? " (" + t.label + ")" : "")));
    app.append(el("p", {class: "verdict"}, t.headline || "No baseline arm was run: absolute scores only."));
    app.append(el("div", {class: "cards"},
      card("Suite score · with " + p.plugin, t.suite_score, "mean of per-case scores"),
      t.delta ? card("Ablation Δ", t.delta, "score points vs baseline") : null,
      t.baseline ? card("Baseline score", t.baseline, "without the plugin") : null,
      card("Cases", String(t.cases_total), t.cases),
      card("Perfect runs", t.perfect_runs, "runs where every grader passed")));
  }
  renderBlock(app, p);
  // each case: its score with and without, both arms' runs with every grader's verdict, the prompt and the graders
  app.append(el("h2", {id: "plugin-cases"}, "Each case, with " + p.plugin + " and baseline (without)"));
  for (const c of p.cases) {
    // its rows: the case, or in a model matrix the case on each configuration (`NAME (model @ version)`)
    const rows = DATA.cases.filter(x => x.name === c.name || x.name.startsWith(c.name + " ("));
    const runs = rows.flatMap(x => x.run_ids).map(id => DATA.runs[id]).filter(Boolean);
    const arms = [["with " + p.plugin, c.score], ["baseline (without)", c.score_without]];
    const box = el("details", {class: "plugin-case", "data-plugin-case": c.name},
      el("summary", {}, c.name + " — " + c.delta + " — with " + p.plugin + " " + c.score
                       + (c.score_without ? " · baseline (without) " + c.score_without : "")));
    for (const [label, score] of arms) {
      const mine = runs.filter(r => r.arm === label);
      if (!mine.length) continue;
      box.append(el("h4", {class: "arm"}, label + (score ? " · " + score : "")));
      for (const run of mine) {
        box.append(el("div", {class: "plugin-run"},
          el("strong", {}, label + " · run " + run.iteration + (rows.length > 1 && run.model ? " · " + run.model : "")), " ",
          el("span", {class: "badge " + (run.error ? "error" : run.passed ? "pass" : "fail")}, run.error ? "error" : run.passed ? "pass" : "fail"),
          " ", el("span", {class: "muted"}, "score " + (run.facts.score || "") + " · " + (run.facts.turns || 0) + " turns · " + usd(run.cost) + " · " + secs(run.latency_ms) + " · " + num(run.tokens) + " tokens"),
          run.error ? el("p", {class: "flag"}, "error: " + run.error) : null,
          el("ul", {class: "verdicts"}, Object.entries(run.grades || {}).map(([name, g]) =>
            el("li", {}, el("span", {class: "badge " + (g.passed ? "pass" : "fail")}, g.passed ? "✓ pass" : "✗ fail"),
               " " + name.replace(/^grader /, "") + ": " + g.text)))));
      }
    }
    // an arm whose runs an earlier run gave (nothing they depend on changed): from which run, when
    for (const line of c.reused || []) box.append(el("p", {class: "muted reused"}, line));
    box.append(el("div", {class: "muted"}, "prompt"), longText(c.prompt));
    box.append(el("div", {class: "muted"}, "graders — what “good” means for this case"),
               plainTable(["grader", "type", "fields"], c.graders));
    app.append(box);
  }
}

// ---------------------------------------------------------------- review notes -> feedback.json
const STORE = "eval-report-notes:" + DATA.generated_at + ":" + DATA.title;
function loadNotes() {
  try { Object.assign(NOTES, JSON.parse(localStorage.getItem(STORE) || "{}")); } catch (e) { /* storage off */ }
}
let downloadUrl = null;
function feedbackJson() {
  // skill-creator's feedback.json: {"reviews": [{run_id, feedback, timestamp}], "status"}; a case's note has the case's name as its id
  const stamp = new Date().toISOString();
  const reviews = Object.entries(NOTES).map(([run_id, feedback]) => ({run_id, feedback, timestamp: stamp}));
  return JSON.stringify({reviews, status: "complete"}, null, 2) + "\n";
}
function saveNotes() {
  try { localStorage.setItem(STORE, JSON.stringify(NOTES)); } catch (e) { /* storage off: notes live in the page */ }
  const bar = document.getElementById("review-bar");
  if (downloadUrl) URL.revokeObjectURL(downloadUrl);
  downloadUrl = URL.createObjectURL(new Blob([feedbackJson()], {type: "application/json"}));
  bar.replaceChildren(el("span", {}, "Review: " + Object.keys(NOTES).length + " note(s)"),
                      el("a", {id: "download-feedback", href: downloadUrl, download: "feedback.json"}, "Download feedback.json"),
                      el("span", {class: "muted"}, "Open a case to write a note on it or on any of its runs."));
}

// ---------------------------------------------------------------- the crowded room: the curve (inline SVG) and who took what
const CROWD_COLOURS = {triggerRate: "#1a7f37", falsePositiveRate: "#cf222e", triggerScore: "#0969da",
                       recall: "#bf8700", precision: "#0969da", f1: "#1a7f37"};
function lineChart(points, series, opts) {
  // points: [{x, series: {name: % or null}, intervals: {name: [low, high]}}]; a line per series, its band behind it
  const left = 48, top = 14, width = opts.width || 600, height = opts.height || 240, bottom = 40;
  const chart = svg("svg", {width: left + width + 24, height: top + height + bottom, role: "img", "aria-label": opts.title});
  const xs = points.map(p => p.x), low = Math.min(...xs), high = Math.max(...xs);
  const x = (v) => left + (high === low ? width / 2 : (v - low) / (high - low) * width);
  const y = (v) => top + height - v / 100 * height;
  for (const tick of [0, 25, 50, 75, 100]) {
    chart.append(svg("line", {x1: left, x2: left + width, y1: y(tick), y2: y(tick), stroke: "#d0d7de"}));
    chart.append(svg("text", {x: left - 6, y: y(tick), "text-anchor": "end", "dominant-baseline": "middle"}, tick + "%"));
  }
  for (const v of [...new Set(xs)]) {
    chart.append(svg("line", {x1: x(v), x2: x(v), y1: top, y2: top + height, stroke: "#eaeef2"}));
    chart.append(svg("text", {x: x(v), y: top + height + 16, "text-anchor": "middle"}, v));
  }
  chart.append(svg("text", {x: left + width / 2, y: top + height + 34, "text-anchor": "middle"}, opts.xLabel));
  for (const [name, colour] of series) {
    const shown = points.filter(p => p.series[name] !== null && p.series[name] !== undefined);
    if (!shown.length) continue;
    const band = shown.filter(p => p.intervals[name]);
    if (band.length) {
      const edge = band.map(p => x(p.x) + "," + y(p.intervals[name][1]))
        .concat(band.slice().reverse().map(p => x(p.x) + "," + y(p.intervals[name][0])));
      chart.append(svg("polygon", {points: edge.join(" "), fill: colour, "fill-opacity": 0.08, stroke: "none"}));
    }
    chart.append(svg("polyline", {points: shown.map(p => x(p.x) + "," + y(p.series[name])).join(" "),
                                  fill: "none", stroke: colour, "stroke-width": name === series[0][0] ? 4.5 : 2.5,
                                  ...(name === "triggerScore" || name === "f1" ? {"stroke-dasharray": "7,4"} : {})}));
    for (const p of shown) {
      const dot = svg("circle", {cx: x(p.x), cy: y(p.series[name]), r: 4, fill: colour});
      const band = p.intervals[name] ? " (95% " + p.intervals[name][0].toFixed(0) + "–" + p.intervals[name][1].toFixed(0) + "%)" : "";
      dot.append(svg("title", {}, name + " at " + p.x + ": " + p.series[name].toFixed(1) + "%" + band));
      chart.append(dot);
    }
  }
  return el("div", {class: "chart"}, chart);
}
function plainTable(headers, rows) {
  return el("table", {}, el("thead", {}, el("tr", {}, headers.map(h => el("th", {}, h)))),
            el("tbody", {}, rows.map(row => el("tr", {}, row.map(cell => el("td", {}, cell))))));
}
function renderCrowding(app, c) {
  const skills = c.kind === "skills";
  app.append(el("h2", {id: "crowding"}, "The crowded room: " + (skills ? "skills beside the skill under test" : "tools beside the servers' own")));
  app.append(el("p", {class: "muted"}, c.distractors.length + " distractors from " + c.sources.join(", ")
    + ", added in a seeded order (seed " + c.seed + "): step K holds the first K. Bands: 95% Wilson intervals."));
  const series = Object.entries(CROWD_COLOURS).filter(([name]) => (skills ? ["triggerRate", "falsePositiveRate", "triggerScore"]
                                                                         : ["recall", "precision", "f1"]).includes(name));
  const groups = {};
  for (const p of c.points) (groups[p.model + "\u0000" + p.subject] = groups[p.model + "\u0000" + p.subject] || []).push(p);
  for (const [key, points] of Object.entries(groups)) {
    const [model, subject] = key.split("\u0000");
    app.append(el("h3", {}, (subject ? subject + " on " : "") + model));
    app.append(legend(series));
    app.append(lineChart(points.map(p => ({x: skills ? p.distractors : p.offered, series: p.series, intervals: p.intervals})), series,
      {title: "rates by number of distractors", xLabel: skills ? "distractor skills installed" : "tools offered"}));
    app.append(plainTable(skills ? ["Distractors", "Runs taken", "Listed"] : ["Distractor tools", "Tools offered", "Tool tokens per call", "Runs taken"],
      points.map(p => skills ? [p.distractors, p.stolen_runs + "/" + p.runs, p.listed === null ? "?" : p.listed]
                             : [p.distractors, p.offered, num(p.tool_tokens), p.stolen_runs + "/" + p.runs])));
  }
  app.append(el("h3", {}, skills ? "Who took the queries" : "Who took the misses"));
  if (!c.thieves.length) app.append(el("p", {class: "muted"}, "Nothing was taken."));
  else app.append(plainTable(["Step", "Model", skills ? "Query" : "Case", "Expected", "Taken by", "Runs", "Instead / alongside"],
    c.thieves.map(t => [t.distractors, t.model, t.case, t.expected, t.thief + (t.decoy ? " (distractor)" : ""), t.runs + "/" + t.of_runs,
                        t.instead + " / " + t.alongside])));
  if (c.hints.length) {
    app.append(el("h3", {}, "Consolidation hints"));
    app.append(plainTable(["Expected", "Taken by", "Share of its runs", "Descriptions", "Involved"],
      c.hints.map(h => [h.expected, h.taken_by, pct(h.rate), el("div", {}, el("p", {}, h.expected + ": " + h.expected_description),
                                                                  el("p", {}, h.taken_by + ": " + h.taken_by_description)), h.cases.join("; ")])));
  }
  app.append(el("details", {}, el("summary", {}, "The distractors, in order (" + c.distractors.length + ")"),
    plainTable(["#", "Name", "Source", "Description"], c.distractors.map((d, i) => [i + 1, d.name, d.source, d.description]))));
}

// ---------------------------------------------------------------- the page
// The page's own renderers of results sections, by the name a Section row gives (html_renderer).
const SECTION_RENDERERS = {renderTriggers, renderQa, renderMatrix, renderIsolation, renderBlock,
                           renderCrowding, renderPlugin};
function render() {
  renderHeader();
  const app = document.getElementById("app");
  app.replaceChildren();
  renderOverview(app);
  const sections = (place) => (DATA.sections || []).filter(s => s.place === place).forEach(s => {
    const draw = SECTION_RENDERERS[s.renderer] || renderBlock;
    draw(app, s.data);
  });
  sections("first");
  sections("before_cases");
  renderComparisons(app);
  renderToolSelection(app);
  renderCoverage(app);
  sections("after_cases");
  renderCases(app);
  loadNotes();
  saveNotes();
  openFromHash();
}
function openFromHash() {
  const match = /^#case=(.*)$/.exec(location.hash);
  if (match) { try { openCase(decodeURIComponent(match[1])); } catch (e) { /* a bad fragment opens nothing */ } }
}
window.addEventListener("hashchange", openFromHash);
render();
