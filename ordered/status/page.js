// Refreshes the page in place every 2 seconds: fetches it again and swaps
// in the server's new #content (rendered and escaped by html/template; the
// script never builds markup from data). Paused while the tab is hidden.
"use strict";
(function () {
  var every = 2000, busy = false;
  var conn = document.getElementById("conn");
  function tell(text) { conn.textContent = text; }
  // Typing in a repair form (StatusOptions.Repair): no refresh, which
  // would replace the form.
  function editing() {
    var a = document.activeElement;
    return !!(a && a.form && a.form.classList.contains("repair") && a.tagName === "INPUT");
  }
  function refresh() {
    if (busy || document.hidden || editing()) { return; }
    busy = true;
    fetch(location.href, { cache: "no-store", headers: { "Accept": "text/html" } })
      .then(function (resp) {
        if (!resp.ok) { throw new Error("HTTP " + resp.status); }
        return resp.text();
      })
      .then(function (text) {
        var doc = new DOMParser().parseFromString(text, "text/html");
        var next = doc.getElementById("content"), cur = document.getElementById("content");
        if (!next || !cur) { throw new Error("no content in the response"); }
        cur.replaceWith(document.adoptNode(next));
        document.title = doc.title;
        tell("");
      })
      .catch(function (err) { tell("refresh failed (" + err.message + "): showing the last page"); })
      .finally(function () { busy = false; });
  }
  // A repair button asks before it posts.
  document.addEventListener("submit", function (ev) {
    var f = ev.target;
    if (f.classList.contains("repair") && !window.confirm(f.getAttribute("data-confirm"))) { ev.preventDefault(); }
  });
  setInterval(refresh, every);
})();
