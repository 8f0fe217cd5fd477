// The console's little script: times in the viewer's zone, live statuses, live new runs.
// No framework, no inline code; every value from the server goes in as text, never as markup.
(function () {
  "use strict";
  var ended = ["succeeded", "failed", "cancelled"];
  var stamp = new Intl.DateTimeFormat("sv-SE", {
    year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit",
    second: "2-digit", timeZoneName: "short"
  });

  // Times are served in UTC (kept as the hover title); shown in the viewer's zone.
  function localTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (t) {
      var moment = new Date(t.getAttribute("datetime"));
      if (!isNaN(moment.getTime())) { t.textContent = stamp.format(moment); }
    });
  }

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    if (cls) { node.className = cls; }
    return node;
  }

  function seconds(value) {
    if (value === null || value === undefined) { return "—"; }
    if (value < 1) { return Math.round(value * 1000) + " ms"; }
    if (value < 120) { return value.toFixed(1) + " s"; }
    return (value / 60).toFixed(1) + " min";
  }

  function pill(status, runId) {
    var span = el("span", status.replace("_", " "), "pill " + status);
    span.setAttribute("data-run-status", status);
    span.setAttribute("data-run-id", runId);
    return span;
  }

  // A row of the runs list, as runs.html draws it.
  function row(run) {
    var tr = el("tr", null, "fresh");
    var link = el("a", run.run_id, "mono");
    link.href = "/runs/" + encodeURIComponent(run.run_id);
    var cells = [el("td"), el("td"), el("td"), el("td", run.trigger), el("td", null, "nowrap"),
      el("td", run.took_seconds === null ? "—" : seconds(run.took_seconds), "num"),
      el("td", run.cost, "num")];
    cells[0].appendChild(link);
    cells[1].appendChild(document.createTextNode(run.workflow_id + " "));
    cells[1].appendChild(el("span", "v" + run.workflow_version, "muted"));
    cells[2].appendChild(pill(run.status, run.run_id));
    if (run.error) {
      var snippet = el("div", run.error, "snippet");
      snippet.title = run.error;
      cells[2].appendChild(snippet);
    }
    var time = el("time", run.created_at);
    time.setAttribute("datetime", run.created_at);
    time.title = run.created_at.replace("T", " ").replace(/\.\d+/, "").replace("+00:00", " UTC");
    cells[4].appendChild(time);
    cells.forEach(function (c) { tr.appendChild(c); });
    localTimes(tr);
    return tr;
  }

  // Statuses of the runs a page shows (cells are looked up each time: rows are added live).
  var live = document.body.getAttribute("data-live") === "reload";
  function statusTick() {
    var cells = document.querySelectorAll("[data-run-status]");
    var wanted = [];
    cells.forEach(function (c) {
      if (ended.indexOf(c.getAttribute("data-run-status")) < 0) {
        wanted.push("id=" + encodeURIComponent(c.getAttribute("data-run-id")));
      }
    });
    if (!wanted.length) { window.setTimeout(statusTick, 2000); return; }
    fetch("/api/status?" + wanted.slice(0, 200).join("&"), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : {}; })
      .then(function (found) {
        var changed = false;
        cells.forEach(function (c) {
          var now = found[c.getAttribute("data-run-id")];
          if (now && now !== c.getAttribute("data-run-status")) {
            changed = true;
            c.setAttribute("data-run-status", now);
            c.className = "pill " + now;
            c.textContent = now.replace("_", " ");
          }
        });
        if (changed && live) { window.location.reload(); return; }
        window.setTimeout(statusTick, 2000);
      })
      .catch(function () { window.setTimeout(statusTick, 5000); });
  }

  // New runs on the runs list's first page, within a second or so of their start.
  var body = document.querySelector("[data-live-runs]");
  function runsTick() {
    if (document.hidden) { window.setTimeout(runsTick, 1000); return; }
    var query = body.getAttribute("data-filters");
    var after = body.getAttribute("data-live-runs");
    var url = "/api/runs?" + (query ? query + "&" : "") + "after=" + encodeURIComponent(after);
    fetch(url, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : { runs: [], complete: true }; })
      .then(function (found) {
        if (!found.complete) { window.location.reload(); return; }
        if (found.runs.length) {
          var none = body.querySelector("tr.none");
          if (none) { none.remove(); }
          for (var i = found.runs.length - 1; i >= 0; i--) {
            body.insertBefore(row(found.runs[i]), body.firstChild);
          }
          body.setAttribute("data-live-runs", found.runs[0].cursor);
        }
        window.setTimeout(runsTick, 1000);
      })
      .catch(function () { window.setTimeout(runsTick, 5000); });
  }

  localTimes(document);
  if (document.querySelector("[data-run-status]") || body) { window.setTimeout(statusTick, 2000); }
  if (body) { window.setTimeout(runsTick, 1000); }
})();
