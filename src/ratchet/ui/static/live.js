// Live progress on the Runs page: poll the page's own JSON and update the rows in place, while any
// run on it is still running. No library; the page works (without live updates) with scripts off.
(function () {
  "use strict";
  function bar(fraction) {
    if (fraction === null || fraction === undefined) return null;
    var outer = document.createElement("span"), inner = document.createElement("span");
    outer.className = "bar";
    inner.style.width = (100 * fraction).toFixed(1) + "%";
    outer.appendChild(inner);
    return outer;
  }
  function pct(v) { return v === null || v === undefined ? "–" : Math.round(100 * v) + "%"; }
  function score(v) { return v === null || v === undefined ? "–" : Number(v).toFixed(3); }
  function fill(cell, fraction, text) {  // textContent only: run data is never parsed as HTML
    cell.textContent = "";
    var b = bar(fraction);
    if (b) { cell.appendChild(b); cell.appendChild(document.createTextNode(" ")); }
    var span = document.createElement("span");
    span.className = "text";
    span.textContent = text;
    cell.appendChild(span);
  }
  function update(run) {
    var row = document.querySelector('tr[data-run="' + CSS.escape(run.id) + '"]');
    if (!row) return;
    row.className = "status-" + run.status;
    var status = row.querySelector('[data-field="status"]');
    status.textContent = "";
    var s = document.createElement("span");
    s.className = "status " + run.status;
    s.textContent = run.status;
    status.appendChild(s);
    fill(row.querySelector('[data-field="budget_used"]'), run.budget_used, pct(run.budget_used));
    row.querySelector('[data-field="best_score"]').textContent = score(run.best_score);
    fill(row.querySelector('[data-field="progress"]'), run.fraction, run.progress);
  }
  function running() { return document.querySelector("tr.status-running") !== null; }
  function poll(table, every) {
    if (!running()) return;
    fetch(table.dataset.liveApi, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) {
        if (data) data.runs.forEach(update);
        document.body.dataset.polled = String(Number(document.body.dataset.polled || 0) + 1);
      })
      .catch(function () {})
      .then(function () { setTimeout(function () { poll(table, every); }, every); });
  }
  document.addEventListener("DOMContentLoaded", function () {
    var table = document.querySelector("table[data-live-api]");
    var every = Number(document.body.dataset.pollMs || 2000);
    if (table) setTimeout(function () { poll(table, every); }, every);
  });
})();
