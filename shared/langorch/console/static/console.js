// Live status: cells marked data-run-status are refreshed every few seconds from
// /api/status; the run page reloads once its run changes status. No framework, no inline code.
(function () {
  "use strict";
  var cells = document.querySelectorAll("[data-run-status]");
  if (!cells.length) { return; }
  var live = document.body.getAttribute("data-live") === "reload";
  var ended = ["succeeded", "failed", "cancelled"];
  function ids() {
    var out = [];
    cells.forEach(function (c) {
      if (ended.indexOf(c.getAttribute("data-run-status")) < 0) {
        out.push("id=" + encodeURIComponent(c.getAttribute("data-run-id")));
      }
    });
    return out;
  }
  function tick() {
    var wanted = ids();
    if (!wanted.length) { return; }
    fetch("/api/status?" + wanted.join("&"), { credentials: "same-origin" })
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
        window.setTimeout(tick, 2000);
      })
      .catch(function () { window.setTimeout(tick, 5000); });
  }
  window.setTimeout(tick, 2000);
})();
