// The running cases of the run page: what each one does now ("Bash `npm test` · 40 s") and
// its newest frame. The run's WebSocket (run_live.js) announces `running` messages with only
// the cases that changed and those that stopped; when it falls back to polling, this polls
// the running cases itself. Elapsed times tick here, between messages.
(function () {
  "use strict";
  var section = document.getElementById("running-section");
  if (!section || section.getAttribute("data-terminal") === "1") return;
  var list = document.getElementById("running-cases");
  var api = section.getAttribute("data-api");
  var caseBase = section.getAttribute("data-case-base");
  var shown = {};  // job id → {li, step, receivedAt}
  var pollTimer = null;

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function elapsed(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + " s";
    var m = Math.floor(s / 60);
    s = s % 60;
    if (m < 60) return m + " min" + (s ? " " + s + " s" : "");
    return Math.floor(m / 60) + " h" + (m % 60 ? " " + (m % 60) + " min" : "");
  }

  function caseUrl(key) {
    if (key === "." || key === "..") return caseBase + "?key=" + encodeURIComponent(key);
    return caseBase + encodeURIComponent(key) + "/";
  }

  function stepText(entry) {
    var step = entry.step;
    if (!step) return "starting";
    if (step.age_ms === null || step.age_ms === undefined) return step.label;
    return step.label + " · " + elapsed(step.age_ms + Date.now() - entry.receivedAt);
  }

  function place(item) {
    var entry = shown[item.job];
    if (!entry) {
      var li = el("li");
      li.setAttribute("data-job", item.job);
      li.setAttribute("data-case", item.case);
      var link = el("a", "mono", item.case + (item.repeat ? " #" + (item.repeat + 1) : ""));
      link.href = caseUrl(item.case);
      li.appendChild(link);
      li.appendChild(el("span", "step"));
      entry = shown[item.job] = { li: li, frame: null };
      list.appendChild(li);
    }
    entry.step = item.step;
    entry.receivedAt = Date.now();
    entry.li.querySelector(".step").textContent = stepText(entry);
    if (item.frame && (!entry.frame || entry.frame.n !== item.frame.n)) {
      entry.frame = item.frame;
      var next = new Image();
      next.alt = "The newest screen of " + item.case;
      next.className = "live-frame";
      next.setAttribute("data-n", item.frame.n);
      next.onload = function () {
        var old = entry.li.querySelector("img");
        if (old) entry.li.replaceChild(next, old);
        else entry.li.appendChild(next);
      };
      next.src = item.frame.url;
    }
  }

  function apply(message) {
    (message.gone || []).forEach(function (job) {
      var entry = shown[job];
      if (entry) entry.li.parentNode.removeChild(entry.li);
      delete shown[job];
    });
    (message.cases || []).forEach(place);
    var empty = document.getElementById("running-empty");
    empty.hidden = Object.keys(shown).length > 0;
  }

  function fetchAll() {
    return fetch(api, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (reply) { return reply.ok ? reply.json() : null; })
      .then(function (reply) {
        if (!reply) return;
        var now = {};
        reply.cases.forEach(function (c) { now[c.job] = true; });
        var gone = Object.keys(shown).filter(function (job) { return !now[job]; });
        apply({ cases: reply.cases, gone: gone });
      })
      .catch(function () {});
  }

  document.addEventListener("run-live", function (event) {
    var message = event.detail;
    if (message.type === "running") apply(message);
    else if (message.type === "polling" && pollTimer === null) {
      pollTimer = setInterval(fetchAll, 1500);
    } else if (message.type === "run" && ["succeeded", "failed", "canceled"].indexOf(message.run.status) >= 0) {
      apply({ cases: [], gone: Object.keys(shown) });
    }
  });
  setInterval(function () {
    Object.keys(shown).forEach(function (job) {
      var entry = shown[job];
      entry.li.querySelector(".step").textContent = stepText(entry);
    });
  }, 1000);
  fetchAll();
})();
