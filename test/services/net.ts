/** Loopback helpers for tests: free ports and waiting for a port to accept connections. */
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';

// Ports handed out come from below the kernel's ephemeral range (32768–60999 by default): a port
// from listen(0) that is closed again can be given by the kernel to any outgoing connection
// before the test's server binds it (CI saw `--grpc-port` taken that way). Below the range only
// another test's pick can collide, so picks are random and never repeated within a process.
const LOW = 10_000;
const HIGH = 32_767;
const handedOut = new Set<number>();
/** The Fetch standard's "bad ports" in that range: fetch() refuses them (undici: "bad port"). */
const FETCH_BAD_PORTS = new Set([10080]);

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

export async function freePort(): Promise<number> {
  for (let tries = 0; tries < 200; tries++) {
    const port = LOW + Math.floor(Math.random() * (HIGH - LOW + 1));
    if (handedOut.has(port) || FETCH_BAD_PORTS.has(port)) continue;
    if (await bindable(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`no free port between ${LOW} and ${HIGH} after 200 tries`);
}

export async function canConnect(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ host, port });
    const t = setTimeout(() => {
      sock.destroy();
      resolve(false);
    }, timeoutMs);
    sock.once('connect', () => {
      clearTimeout(t);
      sock.end();
      resolve(true);
    });
    sock.once('error', () => {
      clearTimeout(t);
      resolve(false);
    });
  });
}

export async function waitForPort(host: string, port: number, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await canConnect(host, port, 500)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nothing listens on ${host}:${port} after ${timeoutMs} ms`);
}

/**
 * Relays TCP connections from `listenHost` (a free port) to `target`: lets pods of the test
 * cluster, which reach the host only at its address on the node's veth, talk to a server that
 * listens on the host's loopback (the suites' Redis, sshd). The bytes are the server's own.
 */
export async function relayTcp(listenHost: string, target: { host: string; port: number }): Promise<{ host: string; port: number; address: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(target);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.once('close', () => sockets.delete(s));
      s.once('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  const port = await new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, listenHost, () => resolve((server.address() as AddressInfo).port));
  });
  return {
    host: listenHost,
    port,
    address: `${listenHost}:${port}`,
    close: () =>
      new Promise((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}
