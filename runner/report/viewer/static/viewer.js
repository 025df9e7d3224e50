// mcpfleet view: optional niceties; every page works without this file.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  var button = document.getElementById("expand-all");
  if (!button) return;
  button.hidden = false;
  button.addEventListener("click", function () {
    var open = button.textContent === "expand all";
    document.querySelectorAll("ol.transcript details").forEach(function (d) { d.open = open; });
    button.textContent = open ? "fold all" : "expand all";
  });
});
