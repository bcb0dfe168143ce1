"use strict";
// The label sheet: every text is put in with textContent (never markup); the labels leave the
// page only as the file the person downloads.
(function () {
  const data = JSON.parse(document.getElementById("sheet-data").textContent);
  const labels = {};  // "run\u0000grader" -> {verdict, note}
  const main = document.getElementById("items");
  const progress = document.getElementById("progress");

  function element(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }

  function keyOf(item) { return item.run + "\u0000" + item.grader; }

  function showProgress() {
    const done = Object.values(labels).filter((l) => l.verdict).length;
    progress.textContent = done + " of " + data.items.length + " labelled (source: " + data.source + ")";
  }

  function block(item, title, text) {
    if (!text) return [];
    return [element("div", title, "label"), element("pre", text)];
  }

  data.items.forEach(function (item, index) {
    const card = element("section", undefined, "item");
    const key = keyOf(item);
    labels[key] = { verdict: "", note: "" };
    card.appendChild(element("h2", (index + 1) + ". " + item.case + " / " + item.grader));
    card.appendChild(element("div", "run " + item.run + (item.scope ? " · plugin " + item.scope : ""), "muted"));
    [
      ...block(item, "Prompt", item.prompt),
      ...block(item, "Criterion", item.criterion),
      ...block(item, "Final answer", item.answer),
      ...block(item, "Transcript", item.transcript),
    ].forEach((node) => card.appendChild(node));
    const judged = element("div", "The judge said: " + item.judge.toUpperCase() + (item.explanation ? " (" + item.explanation + ")" : ""), "muted");
    const buttons = element("div");
    buttons.appendChild(element("span", "Your verdict: ", "label"));
    const pass = element("button", "Pass", "pass");
    const fail = element("button", "Fail", "fail");
    const note = element("input", undefined, "note");
    note.placeholder = "note (optional)";
    function choose(verdict) {
      labels[key].verdict = verdict;
      pass.classList.toggle("chosen", verdict === "pass");
      fail.classList.toggle("chosen", verdict === "fail");
      showProgress();
    }
    pass.addEventListener("click", () => choose("pass"));
    fail.addEventListener("click", () => choose("fail"));
    note.addEventListener("input", () => { labels[key].note = note.value; });
    buttons.appendChild(pass);
    buttons.appendChild(fail);
    buttons.appendChild(note);
    card.appendChild(buttons);
    card.appendChild(judged);
    main.appendChild(card);
  });

  document.getElementById("download").addEventListener("click", function () {
    const lines = data.items
      .filter((item) => labels[keyOf(item)].verdict)
      .map((item) => {
        const label = labels[keyOf(item)];
        const line = { run: item.run, grader: item.grader, verdict: label.verdict };
        if (label.note) line.note = label.note;
        return JSON.stringify(line);
      });
    const blob = new Blob([lines.join("\n") + (lines.length ? "\n" : "")], { type: "application/x-ndjson" });
    const link = element("a");
    link.href = URL.createObjectURL(blob);
    link.download = "labels.jsonl";
    document.body.appendChild(link);
    link.click();
    link.remove();
  });
  showProgress();
})();
