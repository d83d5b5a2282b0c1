import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';

// A small HTTP CONNECT proxy of the tests' own on 127.0.0.1, standing for an egress proxy such as Stripe's smokescreen:
// it opens a tunnel to the host and port a CONNECT asks for, resolving names from its own table (`hosts`, its "DNS"),
// so a test's receiver on 127.0.0.1 is reached through it under a public-looking name. It records every CONNECT, and
// can be told to refuse them.

export interface ProxiedConnect {
  /** What the CONNECT asked for: `host:port`. */
  target: string;
  /** Its Proxy-Authorization header, if any. */
  authorization: string | undefined;
}

export interface ConnectProxy {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  port: number;
  /** Every CONNECT received, in order. */
  connects: ProxiedConnect[];
  /** Answer every CONNECT with this status (and close), or open tunnels again (null). */
  refuseWith(status: number | null): void;
  /** Forgets the CONNECTs seen so far. */
  reset(): void;
  close(): Promise<void>;
}

export async function startConnectProxy(hosts: Record<string, string> = {}): Promise<ConnectProxy> {
  const connects: ProxiedConnect[] = [];
  const sockets = new Set<net.Socket>();
  let refusal: number | null = null;
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  };
  // Plain proxy requests (not CONNECT) are not what the service sends: refused.
  const server = http.createServer((_req, res) => res.writeHead(405, { connection: 'close' }).end());
  server.on('connection', track);
  server.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    const target = req.url ?? '';
    connects.push({ target, authorization: req.headers['proxy-authorization'] });
    if (refusal !== null) {
      client.end(`HTTP/1.1 ${refusal} Refused\r\ncontent-length: 0\r\nconnection: close\r\n\r\n`);
      return;
    }
    const split = target.lastIndexOf(':');
    const host = target.slice(0, split).replace(/^\[(.*)\]$/, '$1');
    const upstream = net.connect(Number(target.slice(split + 1)), hosts[host] ?? host, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    track(upstream);
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    connects,
    refuseWith(status) {
      refusal = status;
    },
    reset() {
      connects.length = 0;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
