// Grey out the runners that lack the chosen harness's capabilities (a repo it needs
// included) or runner features, as the server does for the harness in the query string,
// saying what fixes it; dispatch refuses them anyway.
(function () {
  "use strict";
  var form = document.getElementById("run-form");
  if (!form) return;
  var harness = form.elements.harness;
  var runtime = form.elements.runtime;
  if (!harness || !runtime) return;

  function words(value) {
    return value ? value.split(" ").filter(Boolean) : [];
  }

  function lacking(needed, has) {
    return needed.filter(function (c) { return has.indexOf(c) < 0; });
  }

  // The same words as the server's `runtime_refusal`.
  function refusal(missing, outdated) {
    var repo = "repo:";
    var installable = ["chromium"];
    var others = missing.filter(function (c) {
      return c.indexOf(repo) !== 0 && installable.indexOf(c) < 0;
    });
    var parts = others.length ? ["lacks " + others.join(", ")] : [];
    missing.forEach(function (c) {
      if (installable.indexOf(c) >= 0) parts.push("needs " + c + " (install it on that machine)");
    });
    missing.forEach(function (c) {
      if (c.indexOf(repo) === 0) {
        parts.push("map the repo: python -m runnercli repo add " + c.slice(repo.length) + " PATH");
      }
    });
    if (outdated.length) parts.push("update the runner: it cannot run " + outdated.join(", "));
    return parts.join("; ");
  }

  function update() {
    var chosen = harness.options[harness.selectedIndex];
    var needed = chosen ? words(chosen.getAttribute("data-capabilities")) : [];
    var wanted = chosen ? words(chosen.getAttribute("data-features")) : [];
    var outdatedOnly = false;
    var anyOption = null;
    var capable = 0;
    Array.prototype.forEach.call(runtime.options, function (option) {
      if (option.hasAttribute("data-any")) {
        anyOption = option;
        return;
      }
      var missing = lacking(needed, words(option.getAttribute("data-capabilities")));
      var outdated = lacking(wanted, words(option.getAttribute("data-features")));
      option.disabled = missing.length + outdated.length > 0;
      option.textContent = option.getAttribute("data-label") +
        (option.disabled ? " — " + refusal(missing, outdated) : "");
      if (!option.disabled) capable += 1;
      if (!missing.length && outdated.length) outdatedOnly = true;
    });
    if (anyOption) {
      anyOption.disabled = capable === 0;
      var why = outdatedOnly ? refusal([], wanted) : refusal(needed, []) || "lacks a paired runner";
      anyOption.textContent = anyOption.getAttribute("data-label") +
        (capable === 0 ? " — " + why : "");
    }
    var selected = runtime.options[runtime.selectedIndex];
    if (!selected || selected.disabled) {
      var firstEnabled = Array.prototype.find.call(runtime.options, function (o) { return !o.disabled; });
      if (firstEnabled) firstEnabled.selected = true;
    }
  }

  harness.addEventListener("change", update);
  update();
})();
