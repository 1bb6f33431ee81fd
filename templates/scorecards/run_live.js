// The run page follows its run live: a WebSocket sends only what changed since the page's
// last log line, result and event (new log lines, new results, the run's status and summary);
// if the socket cannot be used, the page polls the REST API from the same numbers instead.
// Without JavaScript the page is complete as rendered; a reload shows the latest state.
(function () {
  "use strict";
  var config = JSON.parse(document.getElementById("run-live").textContent);
  var TERMINAL = ["succeeded", "failed", "canceled"];
  var POLL_MS = 1500;
  var after = config.after;
  var resultsAfter = config.results_after;
  var eventsAfter = config.events_after;
  var terminal = config.terminal;
  var logPanel = document.getElementById("log-lines");
  var liveState = document.getElementById("live-state");
  var resultsBody = document.getElementById("run-results");
  var pollTimer = null;
  var lastShown = 0;
  Array.prototype.forEach.call(resultsBody.querySelectorAll("tr[data-seq]"), function (tr) {
    lastShown = Math.max(lastShown, Number(tr.getAttribute("data-seq")));
  });

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function setState(state, label) {
    liveState.setAttribute("data-state", state);
    liveState.textContent = label;
  }

  function percent(value) {
    return value === null || value === undefined ? "—" : Math.round(value * 100) + "%";
  }

  function appendLines(lines) {
    var fresh = lines.filter(function (l) { return l.seq > after; });
    if (!fresh.length) return;
    var follow = logPanel.scrollTop + logPanel.clientHeight >= logPanel.scrollHeight - 8;
    var empty = document.getElementById("log-empty");
    if (empty) empty.parentNode.removeChild(empty);
    fresh.forEach(function (l) {
      var row = el("div", "log-line");
      row.setAttribute("data-seq", l.seq);
      row.appendChild(el("span", "log-case", l.case));
      row.appendChild(document.createTextNode(l.line));
      logPanel.appendChild(row);
      after = l.seq;
    });
    if (follow) logPanel.scrollTop = logPanel.scrollHeight;
  }

  function badge(provenance) {
    if (!provenance || !provenance.ran_on) return "";
    var runner = String(provenance.runner || "");
    var label = runner.indexOf("/") >= 0 ? runner.slice(runner.indexOf("/") + 1) : runner;
    return [provenance.ran_on, label, provenance.by].filter(Boolean).join(" · ");
  }

  function caseUrl(key) {
    if (key === "." || key === "..") return config.case_base + "?key=" + encodeURIComponent(key);
    return config.case_base + encodeURIComponent(key) + "/";
  }

  function cell(label, className, child) {
    var td = el("td", className);
    td.setAttribute("data-label", label);
    if (typeof child === "string") td.textContent = child;
    else if (child) td.appendChild(child);
    return td;
  }

  function resultRow(r) {
    var tr = el("tr");
    tr.setAttribute("data-case", r.case);
    tr.setAttribute("data-repeat", r.repeat);
    tr.setAttribute("data-seq", r.seq);
    var link = el("a", "case-link", r.case);
    link.href = caseUrl(r.case);
    var ccell = cell("Case", "wrap mono", link);
    if (config.repeats > 1) {
      ccell.appendChild(document.createTextNode(" "));
      ccell.appendChild(el("span", "muted small", "#" + (r.repeat + 1)));
    }
    tr.appendChild(ccell);
    var vcell = cell("Verdict", "", el("span", "verdict v-" + r.verdict, r.verdict));
    if (r.reason && r.verdict !== "pass") {
      vcell.appendChild(document.createTextNode(" "));
      vcell.appendChild(el("span", "small muted wrap", r.reason));
    }
    tr.appendChild(vcell);
    tr.appendChild(cell("Score", "", Number(r.score).toFixed(2)));
    tr.appendChild(cell("Duration", "", (r.duration_ms / 1000).toFixed(1) + " s"));
    var runner = String((r.provenance && r.provenance.runner) || "");
    tr.appendChild(cell("Runner", "wrap", runner.slice(runner.indexOf("/") + 1) || "—"));
    var text = badge(r.provenance);
    tr.appendChild(cell("Provenance", "", text ? el("span", "badge self-hosted", text) : el("span", "muted", "—")));
    return tr;
  }

  function addResults(results) {
    results.forEach(function (r) {
      resultsAfter = Math.max(resultsAfter, r.seq);
      if (!config.live_results) return;
      if (config.verdicts.length && config.verdicts.indexOf(r.verdict) < 0) return;
      if (r.seq <= lastShown) return;
      // A judged verdict settles again (a new seq): it replaces its "judging" row.
      var same = Array.prototype.find.call(resultsBody.querySelectorAll("tr[data-seq]"), function (tr) {
        return tr.getAttribute("data-case") === r.case && tr.getAttribute("data-repeat") === String(r.repeat);
      });
      if (same) {
        same.replaceWith(resultRow(r));
        lastShown = r.seq;
        return;
      }
      var shown = resultsBody.querySelectorAll("tr[data-seq]").length;
      if (shown >= config.page_size) {
        // The page is full: the rest are on the next page, from the last row shown.
        var more = document.getElementById("results-more");
        document.getElementById("results-next").href =
          "?" + (config.verdicts.length ? "verdict=" + config.verdicts.join(",") + "&" : "") +
          "cursor=" + encodeURIComponent(btoa("p=" + lastShown)) + "#results-title";
        more.hidden = false;
        return;
      }
      var empty = resultsBody.querySelector("tr.empty");
      if (empty) empty.parentNode.removeChild(empty);
      resultsBody.appendChild(resultRow(r));
      lastShown = r.seq;
    });
  }

  function addEvents(events, replace) {
    var list = document.getElementById("run-events");
    var items = document.createDocumentFragment();
    events.forEach(function (e) {
      var li = el("li", e.level);
      var at = el("time", "", String(e.at).slice(11, 19));
      at.setAttribute("datetime", e.at);
      li.appendChild(at);
      li.appendChild(document.createTextNode(e.message));
      items.appendChild(li);
      if (e.id) eventsAfter = Math.max(eventsAfter, e.id);
    });
    if (replace) list.replaceChildren(items);
    else list.appendChild(items);
  }

  // A summary's interval as the page first drew it (templatetags/runs.py: interval and
  // interval_note): `62 % [48–74]`, a decimal when the ends would round together.
  function signed(v, places) {
    var text = Math.abs(v).toFixed(places);
    return (v < 0 && Number(text) !== 0 ? "\u2212" : "") + text;
  }
  function intervalText(e) {
    if (!e || e.value === null) return "\u2014";
    if (!e.ci) return signed(e.value * 100, 0) + " %";
    var lo = e.ci[0] * 100, hi = e.ci[1] * 100;
    var places = hi - lo > 0 && hi - lo < 5 ? 1 : 0;
    return signed(e.value * 100, places) + " % [" + signed(lo, places) + "\u2013" +
      signed(hi, places) + "]";
  }
  function intervalNote(e) {
    if (!e || !e.method) return "";
    var method = e.method === "wilson" ? "Wilson" : "bootstrap over cases";
    var left = ["judging", "skipped", "unsettled"].filter(function (k) { return e[k]; })
      .map(function (k) { return e[k] + " " + k; });
    return "95 % " + method + " interval over " + e.cases + " cases" +
      (left.length ? "; " + left.join(", ") + " left out" : "");
  }

  function renderSummary(s) {
    var done = s.pass + s.fail + s.error;
    var progress = document.getElementById("run-progress");
    progress.max = s.total || 1;
    progress.value = done;
    var parts = document.createDocumentFragment();
    var text = el("span");
    text.id = "progress-text";
    text.appendChild(el("strong", "", done + "/" + s.total));
    text.appendChild(document.createTextNode(" done"));
    parts.appendChild(text);
    parts.appendChild(el("span", "v-pass", s.pass + " pass"));
    parts.appendChild(el("span", "v-fail", s.fail + " fail"));
    parts.appendChild(el("span", "v-error", s.error + " error"));
    if (s.judging) parts.appendChild(el("span", "muted", s.judging + " judging"));
    parts.appendChild(el("span", "muted", s.running + " running · " + s.pending + " waiting"));
    parts.appendChild(el("span", "", "pass rate " + percent(s.pass_rate)));
    document.getElementById("run-summary").replaceChildren(parts);
    var fraction = document.createDocumentFragment();
    var mean = el("span", "", "mean pass fraction ");
    mean.appendChild(el("strong", "", percent(s.pass_fraction)));
    if (s.stderr !== null && s.stderr !== undefined) {
      mean.appendChild(document.createTextNode(" ± " + percent(s.stderr) + " "));
      mean.appendChild(el("span", "muted small", "(standard error over " + s.cases + " cases)"));
    }
    fraction.appendChild(mean);
    if (s.flaky) fraction.appendChild(el("span", "flaky", s.flaky + " flaky"));
    document.getElementById("run-fraction").replaceChildren(fraction);
    var interval = document.createDocumentFragment();
    var rate = el("span", "", "pass rate ");
    rate.appendChild(el("strong", "", intervalText(s.pass_rate_ci)));
    rate.appendChild(document.createTextNode(" "));
    rate.appendChild(el("span", "muted small", intervalNote(s.pass_rate_ci)));
    interval.appendChild(rate);
    if (s.mean_score_ci && s.mean_score_ci.value !== null) {
      interval.appendChild(el("span", "", "mean score " + intervalText(s.mean_score_ci)));
    }
    document.getElementById("run-interval").replaceChildren(interval);
    document.getElementById("run-cost").firstChild.textContent =
      "Reported cost $" + (s.cost_usd || 0) + " — provenance only: a self-hosted run spends " +
      "the member's own login and is not billed to the workspace budget.";
  }

  function renderRun(run) {
    var status = document.getElementById("run-status");
    status.textContent = run.status;
    status.className = "status st-" + run.status;
    var detail = document.getElementById("run-status-detail");
    detail.textContent = run.status_detail || "";
    detail.hidden = !run.status_detail;
    renderSummary(run.summary);
    if (run.finished_at) {
      var finished = document.getElementById("run-finished");
      var at = el("time", "", String(run.finished_at).replace("T", " ").slice(0, 19));
      at.setAttribute("datetime", run.finished_at);
      finished.replaceChildren(at);
    }
    terminal = TERMINAL.indexOf(run.status) >= 0;
    var cancel = document.getElementById("cancel-form");
    if (terminal && cancel) cancel.parentNode.removeChild(cancel);
    if (terminal) setState("finished", "finished");
  }

  function getJSON(url) {
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (reply) {
        if (!reply.ok) throw new Error(url + " answered " + reply.status);
        return reply.json();
      });
  }

  // Other parts of the page (the running cases) follow the same messages.
  function announce(message) {
    document.dispatchEvent(new CustomEvent("run-live", { detail: message }));
  }

  function poll() {
    if (pollTimer !== null) return;
    setState("polling", "polling");
    announce({ type: "polling" });
    var busy = false;
    function tick() {
      if (busy) return;
      busy = true;
      var wasTerminal = terminal;
      var cursor = resultsAfter ? "&cursor=" + encodeURIComponent(btoa("p=" + resultsAfter)) : "";
      getJSON(config.logs_api + "?after=" + after)
        .then(function (lines) {
          appendLines(lines);
          return getJSON(config.results_api + "?limit=200" + cursor);
        })
        .then(function (page) {
          addResults(page.results);
          return getJSON(config.api);
        })
        .then(function (run) {
          renderRun(run);
          addEvents(run.events, true);
          // One more pass after the run ends picks up its last lines, then stop.
          if (wasTerminal && terminal) {
            clearInterval(pollTimer);
            setState("finished", "finished");
          }
        })
        .catch(function () { setState("polling", "polling (server unreachable, retrying)"); })
        .then(function () { busy = false; });
    }
    pollTimer = setInterval(tick, POLL_MS);
    tick();
  }

  function connect() {
    if (!("WebSocket" in window)) return poll();
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    var socket;
    try {
      socket = new WebSocket(scheme + window.location.host + config.socket + "?after=" + after +
        "&results_after=" + resultsAfter + "&events_after=" + eventsAfter);
    } catch (error) {
      return poll();
    }
    socket.onopen = function () { setState("live", "live"); };
    socket.onmessage = function (event) {
      var message = JSON.parse(event.data);
      announce(message);
      if (message.type === "logs") appendLines(message.lines);
      else if (message.type === "results") addResults(message.results);
      else if (message.type === "run") {
        addEvents(message.events, false);
        renderRun(message.run);
      }
    };
    socket.onclose = function () {
      if (terminal) setState("finished", "finished");
      else poll();
    };
  }

  if (!terminal) connect();
})();
