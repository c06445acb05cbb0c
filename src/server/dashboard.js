// CAR's dashboard: a live page reloads its content when CAR's data changes (Server-Sent
// Events from /events), unless you are typing in it. Every page works without this script.
(function () {
  "use strict";
  var main = document.getElementById("main");
  var status = document.getElementById("live-status");
  if (!main || !main.hasAttribute("data-live") || !window.EventSource || !window.fetch) return;
  var loading = false;
  var again = false;
  function typing() {
    var a = document.activeElement;
    return a && main.contains(a) && (a.tagName === "INPUT" || a.tagName === "TEXTAREA");
  }
  function reload() {
    if (loading) { again = true; return; }
    if (typing()) return;
    loading = true;
    fetch(location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) return;
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("main");
        if (fresh && fresh.innerHTML !== main.innerHTML && !typing()) {
          main.innerHTML = fresh.innerHTML;
          if (status) status.textContent = "Updated " + new Date().toLocaleTimeString();
        }
      })
      .catch(function () {})
      .then(function () {
        loading = false;
        if (again) { again = false; reload(); }
      });
  }
  var source = new EventSource("/events");
  source.addEventListener("ready", function () {
    main.setAttribute("data-following", "");
  });
  source.addEventListener("change", reload);
  source.onerror = function () {
    main.removeAttribute("data-following");
    if (status) status.textContent = "Live updates paused; retrying";
  };
})();
