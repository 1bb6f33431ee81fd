// A running case's Files tab: each listing and each file is asked of the case's runner
// through the files API; a request it does not answer in time is said so here. Included
// with each running repeat's tab: bound once.
if (!window.everdictCaseFiles) {
window.everdictCaseFiles = true;
document.addEventListener("DOMContentLoaded", () => {
  const TEXT = /\.(txt|md|json|jsonl|csv|log|diff|patch|py|js|ts|html|css|xml|ya?ml|toml|ini|cfg|sh|rs|go|c|h)$/i;
  const IMAGE = /\.(png|jpe?g|gif|webp)$/i;
  for (const panel of document.querySelectorAll("[data-files]")) {
    const tab = document.querySelector(`[data-files-tab][aria-controls="${panel.id}"]`);
    const list = panel.querySelector("[data-files-list]");
    const view = panel.querySelector("[data-files-view]");
    const where = panel.querySelector("[data-files-where]");
    const error = panel.querySelector("[data-files-error]");
    const url = (path, op) => {
      const query = new URLSearchParams({key: panel.dataset.key, path, op, repeat: panel.dataset.repeat});
      return `${panel.dataset.url}?${query}`;
    };
    const say = async (reply) => {
      let text = `HTTP ${reply.status}`;
      try {
        const body = await reply.json();
        text = body.detail || Object.values(body).flat().join(" ") || text;
      } catch (e) { /* not JSON: the status says it */ }
      error.textContent = text;
      error.hidden = false;
    };
    const ask = async (path, op) => {
      error.hidden = true;
      const reply = await fetch(url(path, op), {credentials: "same-origin"});
      if (!reply.ok) { await say(reply); return null; }
      return reply;
    };
    const row = (entry) => {
      const tr = document.createElement("tr");
      const name = document.createElement("td");
      const link = document.createElement("a");
      const shown = entry.path.split("/").pop() + (entry.kind === "dir" ? "/" : "");
      link.textContent = shown;
      link.className = "mono";
      link.dataset.path = entry.path;
      link.dataset.kind = entry.kind;
      link.href = url(entry.path, "read");
      if (entry.kind === "dir") {
        link.addEventListener("click", (event) => { event.preventDefault(); open(entry.path); });
      } else if (entry.kind === "symlink" || TEXT.test(entry.path) || IMAGE.test(entry.path)) {
        // A symlink is asked of the runner first: it may lead out, which it refuses.
        link.addEventListener("click", (event) => { event.preventDefault(); show(entry.path); });
      } else {
        link.download = entry.path.split("/").pop();
      }
      name.appendChild(link);
      const size = document.createElement("td");
      size.textContent = entry.kind === "dir" ? "—" : `${entry.size} B`;
      const when = document.createElement("td");
      when.textContent = new Date(entry.mtime * 1000).toLocaleTimeString();
      tr.append(name, size, when);
      return tr;
    };
    const open = async (path) => {
      where.textContent = `/${path}`;
      list.replaceChildren();
      view.replaceChildren();
      const reply = await ask(path, "list");
      if (!reply) return;
      const listing = await reply.json();
      if (path) {
        const up = row({path: path.split("/").slice(0, -1).join("/"), kind: "dir", size: 0, mtime: Date.now() / 1000});
        up.querySelector("a").textContent = "../";
        list.appendChild(up);
      }
      for (const entry of listing.entries) list.appendChild(row(entry));
      panel.dataset.loaded = path || ".";
    };
    const show = async (path) => {
      view.replaceChildren();
      const reply = await ask(path, "read");
      if (!reply) return;
      const type = reply.headers.get("Content-Type") || "";
      if (type.startsWith("image/")) {
        const img = document.createElement("img");
        img.alt = path;
        img.dataset.filesImage = path;
        img.src = URL.createObjectURL(await reply.blob());
        view.appendChild(img);
      } else {
        const pre = document.createElement("pre");
        pre.dataset.filesText = path;
        pre.textContent = await reply.text();
        view.appendChild(pre);
      }
    };
    tab.addEventListener("click", () => {
      const opening = panel.hidden;
      panel.hidden = !opening;
      tab.setAttribute("aria-selected", String(opening));
      if (opening && !panel.dataset.loaded) open("");
    });
  }
});
}
