import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { openDatabase, type Database } from '../../src/db/database.js';
import { testDatabase } from './database.js';

/** A TCP proxy of the test's own on 127.0.0.1, for connections that misbehave without closing (or that close). */
export interface TcpProxy {
  port: number;
  /** Stops forwarding bytes either way, on every connection (and on new ones), keeping every socket open. */
  freeze(): void;
  /** Forwards again, starting with what was held back. */
  thaw(): void;
  /** Closes every connection and refuses new ones (accepted, then closed at once) until `restore()`. */
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

/**
 * A proxy to `port` on 127.0.0.1. Bytes are written as they are read (no backpressure: the tests' traffic is small).
 * `onClientBytes` sees every chunk a client sends, with a number for its connection.
 */
export async function startTcpProxy(
  port: number,
  options: { onClientBytes?: (connection: number, chunk: Buffer) => void } = {},
): Promise<TcpProxy> {
  let connections = 0;
  const sockets = new Set<net.Socket>();
  let frozen = false;
  let refusing = false;
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined); // a cut connection's other end reports ECONNRESET
    if (frozen) socket.pause();
  };
  const server = net.createServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    // Written before the upstream connection is open, bytes wait in its buffer.
    const upstream = net.connect(port, '127.0.0.1');
    const connection = ++connections;
    track(client);
    track(upstream);
    client.on('data', (chunk) => {
      options.onClientBytes?.(connection, chunk);
      upstream.write(chunk);
    });
    upstream.on('data', (chunk) => client.write(chunk));
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    freeze() {
      frozen = true;
      for (const socket of sockets) socket.pause();
    },
    thaw() {
      frozen = false;
      for (const socket of sockets) socket.resume();
    },
    cut() {
      refusing = true;
      for (const socket of sockets) socket.destroy();
    },
    restore() {
      refusing = false;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * The test database opened again through a proxy of its own (its URL's port replaced by the proxy's), so that a
 * test can make the database fall silent (`freeze`) or refuse connections (`cut`) for this handle alone.
 */
export async function proxiedTestDatabase(
  poolMax = 2,
): Promise<{ database: Database; proxy: TcpProxy; close(): Promise<void> }> {
  const target = new URL((await testDatabase()).url);
  const proxy = await startTcpProxy(Number(target.port));
  target.port = String(proxy.port);
  const database = await openDatabase({ url: target.toString(), schema: 'as-is', poolMax });
  return {
    database,
    proxy,
    close: async () => {
      await database.close();
      await proxy.close();
    },
  };
}
