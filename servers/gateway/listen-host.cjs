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

// Stopping promptly. supergateway 4.0.0 handles SIGTERM by awaiting its cleanup (its sessions, then its children:
// SIGTERM to each child's process group, SIGKILL 5 s later) and ignores every further SIGTERM meanwhile. A cleanup
// that never settles (a session whose transport never closes) left it running for ever, deaf to SIGTERM, its
// child gone: seen after a test run, re-parented to init 38 minutes later, stopped only by SIGKILL. In a pod that
// holds the node until the grace period's SIGKILL. So: the first SIGTERM (SIGINT, SIGHUP) gives its cleanup
// MCPFLEET_STOP_SECONDS (default 1) at most; then, or at a second signal, every child process group it started
// is SIGKILLed and the process exits.
const childProcess = require("node:child_process");

const started = new Set(); // pids of children started detached (supergateway's): each leads its process group
const spawn = childProcess.spawn;
childProcess.spawn = function spawnTracked(...args) {
  const child = spawn.apply(this, args);
  const options = args.find((a, i) => i > 0 && a !== null && typeof a === "object" && !Array.isArray(a)) || {};
  if (child.pid !== undefined) {
    const pid = child.pid;
    started.add({ pid, group: Boolean(options.detached) });
    child.once("exit", () => {
      // Forgotten only once nothing of its group is left: a shell's child that ignored SIGTERM outlives the shell.
      for (const c of started) {
        if (c.pid !== pid) continue;
        try {
          process.kill(c.group ? -pid : pid, 0);
        } catch {
          started.delete(c);
        }
      }
    });
  }
  return child;
};
require("node:module").syncBuiltinESMExports(); // supergateway is ESM: its `import { spawn }` gets this one

function killChildren() {
  for (const { pid, group } of started) {
    try {
      process.kill(group ? -pid : pid, "SIGKILL");
    } catch {
      // gone already
    }
  }
}

const stopSeconds = Number(process.env.MCPFLEET_STOP_SECONDS || "1");
let signalled = 0;
function stopSoon() {
  signalled += 1;
  if (signalled > 1) {
    killChildren();
    process.exit(0);
  }
  setTimeout(() => {
    killChildren();
    process.exit(0);
  }, Math.max(0, stopSeconds) * 1000).unref();
}
for (const name of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(name, stopSoon);
process.on("exit", killChildren); // a clean exit leaves no child either
