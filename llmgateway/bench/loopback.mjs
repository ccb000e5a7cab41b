// Preloaded into Portkey's gateway (node --import): its start script calls
// server.listen(port) with no host, which listens on every interface; this binds
// any listen() without a host to 127.0.0.1 instead.
import net from 'node:net';
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' && (args[1] === undefined || typeof args[1] === 'function')) {
    args.splice(1, args[1] === undefined ? 1 : 0, '127.0.0.1');
  }
  return listen.apply(this, args);
};
