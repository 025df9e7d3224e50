// Preloaded into supergateway by mcpfleet-gateway (node --require): every TCP server the process opens binds
// $MCPFLEET_LISTEN_HOST, whatever host its caller gave or left out. supergateway 4.0.0 (the newest release) has no
// host option and calls app.listen(port), which binds every interface of the pod: with no authentication, any
// workload that reaches the pod IP could drive the trial's MCP server. Unix sockets and inherited handles are
// left as they are.
"use strict";

const net = require("node:net");

const host = process.env.MCPFLEET_LISTEN_HOST;
if (host) {
  const listen = net.Server.prototype.listen;
  net.Server.prototype.listen = function listenOnHost(...args) {
    const first = args[0];
    if (first === undefined || typeof first === "function") {
      args.unshift(0, host); // listen([callback]): a random port, on host
    } else if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) {
      // listen(port[, host][, backlog][, callback])
      if (typeof args[1] === "string") args[1] = host;
      else args.splice(1, 0, host);
    } else if (first !== null && typeof first === "object" && !("fd" in first) && !("_handle" in first)) {
      if (!("path" in first)) args[0] = { ...first, host }; // listen(options[, callback]) with a port
    }
    return listen.apply(this, args);
  };
}
