// Preloaded with `node -r`: a server that listens on a port without naming a host (as
// server-everything's SSE mode does, on every interface) listens on 127.0.0.1 only.
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  const isPort = typeof port === "number" || (typeof port === "string" && /^\d+$/.test(port));
  if (isPort && typeof args[1] !== "string") {
    args.splice(1, 0, "127.0.0.1");
  }
  return listen.apply(this, args);
};
