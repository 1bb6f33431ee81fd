// Grey out the runners that lack the chosen harness's capabilities, as the server does
// for the harness in the query string; dispatch refuses them anyway.
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

  function update() {
    var chosen = harness.options[harness.selectedIndex];
    var needed = chosen ? words(chosen.getAttribute("data-capabilities")) : [];
    var anyOption = null;
    var capable = 0;
    Array.prototype.forEach.call(runtime.options, function (option) {
      if (option.hasAttribute("data-any")) {
        anyOption = option;
        return;
      }
      var has = words(option.getAttribute("data-capabilities"));
      var missing = needed.filter(function (c) { return has.indexOf(c) < 0; });
      option.disabled = missing.length > 0;
      option.textContent = option.getAttribute("data-label") +
        (missing.length ? " — lacks " + missing.join(", ") : "");
      if (!option.disabled) capable += 1;
    });
    if (anyOption) {
      anyOption.disabled = capable === 0;
      anyOption.textContent = anyOption.getAttribute("data-label") +
        (capable === 0 ? " — lacks " + (needed.join(", ") || "a paired runner") : "");
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
