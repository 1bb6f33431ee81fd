// A case's trace as a timeline, a page of events at a time (big events as previews, read
// whole when opened), with its totals and its filmstrip beside it: a frame opens large and
// takes the timeline to the step it was taken at. The first page comes in the case page
// itself and shows as the page is parsed (`EverdictTrace.boot(box)`, right after each box);
// the rest is read from the API as the timeline is scrolled (or "Load more"), so a
// 10,000-event trace opens as fast as a short one.
window.EverdictTrace = (function () {
  "use strict";
  var PAGE = 100;

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function getJSON(url) {
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (reply) {
        if (!reply.ok) throw new Error(url + " answered " + reply.status);
        return reply.json();
      });
  }

  function seconds(ms) {
    if (ms < 1000) return ms + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
    return Math.floor(ms / 60000) + " min " + Math.round((ms % 60000) / 1000) + " s";
  }

  function oneLine(value) {
    if (value === null || value === undefined) return "";
    var text = typeof value === "string" ? value : JSON.stringify(value);
    return text.replace(/\s+/g, " ").slice(0, 300);
  }

  var ARGUMENTS = ["command", "file_path", "path", "pattern", "url", "query", "description"];

  function argument(data) {
    var sources = [data.input, data.arguments, data];
    for (var i = 0; i < sources.length; i++) {
      var source = sources[i];
      if (!source || typeof source !== "object") continue;
      for (var j = 0; j < ARGUMENTS.length; j++) {
        var value = source[ARGUMENTS[j]];
        if (Array.isArray(value)) value = value.join(" ");
        if (typeof value === "string" && value.trim()) return value;
      }
    }
    if (Array.isArray(data.changes) && data.changes.length) return data.changes[0].path;
    return "";
  }

  function summary(e) {
    var d = e.data || {};
    if (e.kind === "tool_call") return argument(d);
    if (e.kind === "tool_result") return oneLine(d.content || d.output || d.result || d.error || d.status);
    if (e.kind === "message") return oneLine(d.text || d.message || (d.items && JSON.stringify(d.items)) || d.subtype || "");
    if (e.kind === "usage") {
      var u = d.usage || d;
      var parts = [];
      if (u.input_tokens !== undefined) parts.push(u.input_tokens + " in");
      if (u.output_tokens !== undefined) parts.push(u.output_tokens + " out");
      var cost = d.total_cost_usd !== undefined ? d.total_cost_usd : d.cost_usd;
      if (cost !== undefined) parts.push("$" + cost);
      return parts.join(" · ");
    }
    if (e.kind === "error") return oneLine(d.message || d.error || d.result || d);
    if (e.kind === "dropped") return d.message || "";
    return oneLine(d.error || d.line || d.event || d);
  }

  var KINDS = { tool_call: "tool", tool_result: "result", message: "", usage: "usage",
    error: "error", raw: "raw", dropped: "dropped" };

  function Trace(box) {
    this.box = box;
    this.run = box.getAttribute("data-run");
    var query = "key=" + encodeURIComponent(box.getAttribute("data-key"));
    if (Number(box.getAttribute("data-repeats")) > 1) query += "&repeat=" + box.getAttribute("data-repeat");
    this.query = query;
    this.list = box.querySelector("[data-timeline]");
    this.more = box.querySelector("[data-trace-more]");
    this.state = box.querySelector("[data-trace-state]");
    this.after = null;      // the last seq loaded
    this.done = false;
    this.loading = null;
    this.firstTs = null;
    this.calls = {};        // tool call id → its row, to show the result's duration on it
    var self = this;
    this.more.addEventListener("click", function () { self.page(); });
  }

  Trace.prototype.url = function (extra) {
    return "/api/runs/" + this.run + "/trace?" + this.query + extra;
  };

  Trace.prototype.start = function (first) {
    var self = this;
    var shown = first ? Promise.resolve(this.show(first)) : this.page();
    return shown.then(function () {
      if (!self.list.children.length) self.state.textContent = "none recorded";
      if ("IntersectionObserver" in window) {
        self.sentinel = el("li", "t-sentinel");
        self.list.appendChild(self.sentinel);
        new IntersectionObserver(function (entries) {
          if (entries[0].isIntersecting && !self.done) self.page();
        }, { root: self.list, rootMargin: "400px" }).observe(self.sentinel);
      }
    });
  };

  Trace.prototype.page = function () {
    if (this.loading) return this.loading;
    if (this.done) return Promise.resolve();
    var self = this;
    var after = this.after === null ? "" : "&after_seq=" + this.after;
    this.loading = getJSON(this.url("&brief=1&limit=" + PAGE + after)).then(function (reply) {
      self.show(reply);
      self.loading = null;
    }).catch(function (error) {
      self.state.textContent = "could not be read (" + error.message + ")";
      self.loading = null;
    });
    return this.loading;
  };

  Trace.prototype.show = function (reply) {
    var self = this;
    if (this.after === null) this.totals(reply);
    reply.events.forEach(function (e) { self.add(e); });
    if (reply.events.length) this.after = reply.events[reply.events.length - 1].seq;
    this.done = reply.next_after_seq === null;
    this.more.hidden = this.done;
  };

  Trace.prototype.totals = function (reply) {
    var t = reply.totals, parts = [];
    this.firstTs = reply.first_ts;
    this.state.textContent = reply.kept + " events" + (reply.dropped ? ", " + reply.dropped + " dropped" : "") +
      (reply.running ? " · running" : "") + (reply.attempt ? " · attempt " + reply.attempt : "");
    if (reply.first_ts !== null && reply.last_ts !== null) parts.push("took " + seconds(reply.last_ts - reply.first_ts));
    parts.push(t.tool_calls + " tool calls");
    if (t.tool_errors) parts.push(t.tool_errors + " failed");
    if (t.errors) parts.push(t.errors + " errors");
    if (t.raw) {
      parts.push(t.raw + (t.raw === 1 ? " event" : " events") + " this parser does not know" +
        (reply.parser ? " (" + reply.parser + ")" : ""));
    }
    if (t.input_tokens !== null) parts.push(t.input_tokens + " input tokens");
    if (t.output_tokens !== null) parts.push(t.output_tokens + " output tokens");
    var cached = (t.cache_read_input_tokens || 0) + (t.cached_input_tokens || 0);
    if (cached) parts.push(cached + " cached");
    if (t.cost_usd !== null) parts.push("$" + t.cost_usd + " (reported)");
    if (reply.step && reply.running) parts.push("now: " + reply.step.text);
    var box = this.box.querySelector("[data-trace-totals]");
    box.replaceChildren();
    parts.forEach(function (p) { box.appendChild(el("span", "tag", p)); });
  };

  Trace.prototype.add = function (e) {
    var d = e.data || {};
    var li = el("li", "k-" + e.kind);
    li.setAttribute("data-seq", e.seq);
    li.setAttribute("data-ts", e.ts);
    this.lastTs = e.ts;
    if (e.kind === "error" || d.is_error) li.className += " err";
    var details = el("details");
    var head = el("summary");
    var at = this.firstTs === null ? 0 : e.ts - this.firstTs;
    head.appendChild(el("span", "t-at", "+" + seconds(Math.max(0, at))));
    head.appendChild(el("span", "t-kind", KINDS[e.kind] === undefined ? e.kind : KINDS[e.kind]));
    head.appendChild(el("span", "t-name", e.name));
    head.appendChild(el("span", "t-sum", summary(e)));
    var dur = el("span", "t-dur", d.duration_ms !== undefined ? seconds(d.duration_ms) : "");
    head.appendChild(dur);
    details.appendChild(head);
    var body = el("pre", "", JSON.stringify(d, null, 2));
    details.appendChild(body);
    if (e.clipped) {
      var self = this;
      details.addEventListener("toggle", function once() {
        details.removeEventListener("toggle", once);
        getJSON(self.url("&limit=1&after_seq=" + (e.seq - 1))).then(function (reply) {
          if (reply.events.length) body.textContent = JSON.stringify(reply.events[0].data, null, 2);
        });
      });
    }
    li.appendChild(details);
    if (e.kind === "tool_call" && d.id) this.calls[d.id] = dur;
    if (e.kind === "tool_result" && d.call_id && this.calls[d.call_id] && d.duration_ms !== undefined) {
      this.calls[d.call_id].textContent = seconds(d.duration_ms);
    }
    this.list.insertBefore(li, this.sentinel || null);
  };

  // Load pages until `seq` is on the timeline, then show it.
  Trace.prototype.reveal = function (seq) {
    var self = this;
    var row = this.list.querySelector('li[data-seq="' + seq + '"]');
    if (row || this.done || seq < 0) {
      row = row || this.list.querySelector("li[data-seq]");
      if (!row) return Promise.resolve();
      Array.prototype.forEach.call(this.list.querySelectorAll(".t-here"), function (r) {
        r.classList.remove("t-here");
      });
      row.classList.add("t-here");
      row.scrollIntoView({ block: "center" });
      return Promise.resolve();
    }
    return this.page().then(function () { return self.reveal(seq); });
  };

  // The step a frame was taken at: the last event before it (the runner and the harness
  // share the member's clock), loading pages until one after it is on the timeline.
  Trace.prototype.revealAt = function (ts, fallbackSeq) {
    var self = this;
    if (!this.done && (this.lastTs === undefined || this.lastTs <= ts)) {
      return this.page().then(function () { return self.revealAt(ts, fallbackSeq); });
    }
    var rows = this.list.querySelectorAll("li[data-seq]");
    var chosen = null;
    for (var i = 0; i < rows.length; i++) {
      if (Number(rows[i].getAttribute("data-ts")) > ts) break;
      chosen = rows[i];
    }
    if (!chosen) return this.reveal(fallbackSeq);
    return this.reveal(Number(chosen.getAttribute("data-seq")));
  };

  Trace.prototype.film = function () {
    var self = this;
    var aside = this.box.querySelector("[data-filmstrip]");
    return getJSON("/api/runs/" + this.run + "/screens?" + this.query).then(function (reply) {
      if (!reply.frames.length) return;
      aside.hidden = false;
      self.box.querySelector(".trace-grid").classList.add("with-film");
      self.box.querySelector("[data-film-count]").textContent = reply.frames.length + " frames";
      var frames = self.box.querySelector("[data-frames]");
      reply.frames.forEach(function (f) {
        var button = el("button", "frame");
        button.type = "button";
        button.setAttribute("data-n", f.n);
        var img = el("img");
        img.loading = "lazy";
        img.alt = "Frame " + f.n;
        img.src = f.url;
        button.appendChild(img);
        var at = self.firstTs === null ? null : f.taken_at - self.firstTs;
        button.appendChild(el("span", "", "#" + f.n + (at !== null ? " · +" + seconds(Math.max(0, at)) : "")));
        button.addEventListener("click", function () { self.open(f); });
        frames.appendChild(button);
      });
    }).catch(function () {});
  };

  Trace.prototype.open = function (frame) {
    var view = this.box.querySelector("[data-frame-view]");
    view.querySelector("[data-frame-big]").src = frame.url;
    view.querySelector("[data-frame-big]").alt = "Frame " + frame.n;
    var at = this.firstTs === null ? null : frame.taken_at - this.firstTs;
    view.querySelector("[data-frame-caption]").textContent =
      "Frame " + frame.n + (at !== null ? " · taken at +" + seconds(Math.max(0, at)) : "");
    if (typeof view.showModal === "function") view.showModal();
    else view.setAttribute("open", "");
    this.revealAt(frame.taken_at, frame.trace_seq);
  };

  function boot(box) {
    var embedded = box.querySelector('script[type="application/json"]');
    var first = embedded ? JSON.parse(embedded.textContent) : null;
    var trace = new Trace(box);
    box.trace = trace;
    trace.start(first).then(function () { return trace.film(); });
  }

  return { boot: boot };
})();
