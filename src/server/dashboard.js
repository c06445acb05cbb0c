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
  function handle(type) {
    if (type === "ready") {
      // Whatever changed between this page's rendering and its joining the stream.
      main.setAttribute("data-following", "");
      reload();
    }
    else if (type === "change") reload();
    else if (type === "error") {
      main.removeAttribute("data-following");
      if (status) status.textContent = "Live updates paused; retrying";
    }
  }
  // One stream for every open page, through a shared worker; a stream of its own without one.
  if (window.SharedWorker) {
    var worker = new SharedWorker("/dashboard-live.js");
    worker.port.onmessage = function (message) { handle(message.data); };
    worker.port.start();
    window.addEventListener("pagehide", function () { worker.port.postMessage("leave"); });
    // Back from the browser's page cache, the worker has let this page go: load it anew.
    window.addEventListener("pageshow", function (event) { if (event.persisted) location.reload(); });
  } else {
    var source = new EventSource("/events");
    source.addEventListener("ready", function () { handle("ready"); });
    source.addEventListener("change", function () { handle("change"); });
    source.onerror = function () { handle("error"); };
  }
})();
