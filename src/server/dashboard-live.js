// CAR's dashboard: one connection to /events shared by every open page of the dashboard (a
// browser opens at most six connections to one server over HTTP/1.1, so a stream per tab would
// stall the seventh tab). Each page talks to this worker over its port.
"use strict";
var ports = [];
var source = null;
function tell(type) {
  ports.forEach(function (port) { port.postMessage(type); });
}
function follow() {
  source = new EventSource("/events");
  source.addEventListener("ready", function () { tell("ready"); });
  source.addEventListener("change", function () { tell("change"); });
  source.onerror = function () { tell("error"); };
}
onconnect = function (event) {
  var port = event.ports[0];
  ports.push(port);
  port.onmessage = function (message) {
    if (message.data !== "leave") return;
    ports = ports.filter(function (p) { return p !== port; });
    if (!ports.length && source) { source.close(); source = null; }
  };
  port.start();
  if (!source) follow();
  else if (source.readyState === 1) port.postMessage("ready");
};
