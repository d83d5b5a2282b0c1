import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { DEFAULT_HTTP_LIMITS, type HttpLimits } from '../config.js';
import { addressKey } from './auth-failures.js';

// What one client can hold of the API's HTTP server: how long it may take to send a request, how many connections
// the server keeps open, and a connection whose request carries a body nobody reads is closed after the answer
// instead of being kept alive while the rest of the body drains. Node's defaults (60 s for headers, 300 s for a
// request, checked every 30 s, no connection cap) let slow or endless senders hold sockets for minutes.

export const MAX_CONNECTIONS_ENV = 'FRS_MAX_CONNECTIONS';
export const MAX_CONNECTIONS_PER_ADDRESS_ENV = 'FRS_MAX_CONNECTIONS_PER_ADDRESS';
// The limits and their defaults are settings (src/config.ts).
export { DEFAULT_HTTP_LIMITS, type HttpLimits };

/**
 * Closes, unanswered, a connection of an address that already holds `cap` open ones. Addresses are counted as the
 * rate limits count them (addressKey): an IPv6 client by its /64, which one host usually holds whole and can pick any
 * address of.
 */
function capConnectionsPerAddress(server: Server, cap: number): void {
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const address = addressKey(socket.remoteAddress ?? '');
    const held = open.get(address) ?? 0;
    if (held >= cap) {
      socket.destroy();
      server.emit('dropPerAddress', address);
      return;
    }
    open.set(address, held + 1);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left > 0) open.set(address, left);
      else open.delete(address);
    });
  });
}

/**
 * No operation reads a request body. Node would read and discard one after the answer to keep the connection alive,
 * for as long as the sender keeps sending: the answer to a request that announces a body says `Connection: close`
 * instead, and Node closes the connection once it is sent.
 */
function closeWhenBodyUnread(req: IncomingMessage, res: ServerResponse): void {
  const length = req.headers['content-length'];
  if (req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0'))
    res.setHeader('Connection', 'close');
}

const LONG_BODY = Symbol('frs.longBody');

/**
 * Lifts the request time-out from one request whose body may honestly take long (an import job's upload, which the
 * job itself watches for stalls: src/core/import/jobs.ts). Node's own `requestTimeout` is server-wide, so the time-out is
 * kept here per request instead (requestBodyTimeout).
 */
export function allowLongBody(req: IncomingMessage): void {
  (req as IncomingMessage & { [LONG_BODY]?: true })[LONG_BODY] = true;
}

/**
 * The request time-out, per request: a request whose body is not whole `ms` after its headers gets what Node would
 * send (the server's 'clientError' with ERR_HTTP_REQUEST_TIMEOUT: a 408, then the connection closed), unless an
 * operation lifted it (allowLongBody). The headers time-out stays Node's.
 */
function requestBodyTimeout(server: Server, ms: number): (req: IncomingMessage) => void {
  return (req) => {
    if (req.complete) return;
    const timer = setTimeout(() => {
      if (req.complete || (req as IncomingMessage & { [LONG_BODY]?: true })[LONG_BODY] || req.socket.destroyed) return;
      if (server.listenerCount('clientError') === 0) {
        req.socket.destroy();
        return;
      }
      server.emit(
        'clientError',
        Object.assign(new Error('Request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' }),
        req.socket,
      );
    }, ms);
    timer.unref();
    req.once('end', () => clearTimeout(timer));
    req.once('close', () => clearTimeout(timer));
  };
}

/** Sets the limits on a server before it listens (the time-out checks start when it does). */
export function applyHttpLimits(server: Server, limits: HttpLimits): void {
  server.headersTimeout = limits.headersTimeoutMs;
  // (0: Node's server-wide check is off; requestBodyTimeout keeps the same time per request, so one route can lift it)
  server.requestTimeout = 0;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  (server as Server & { connectionsCheckingInterval: number }).connectionsCheckingInterval = limits.checkIntervalMs;
  if (limits.maxConnections > 0) server.maxConnections = limits.maxConnections;
  if (limits.maxConnectionsPerAddress > 0) capConnectionsPerAddress(server, limits.maxConnectionsPerAddress);
  server.prependListener('request', closeWhenBodyUnread);
  if (limits.requestTimeoutMs > 0)
    server.prependListener('request', requestBodyTimeout(server, limits.requestTimeoutMs));
}

/**
 * A connection over the cap is closed unanswered, so the client cannot be told why: the operator is, at warn, at most
 * once a minute with how many were closed since the last line.
 */
export function logDroppedConnections(
  server: Server,
  logger: Logger,
  maxConnections: number,
  maxConnectionsPerAddress = DEFAULT_HTTP_LIMITS.maxConnectionsPerAddress,
): void {
  let dropped = 0;
  let lastLine = 0;
  server.on('drop', () => {
    dropped++;
    if (Date.now() - lastLine < 60_000) return;
    logger.warn(
      { dropped, maxConnections },
      `connections closed unanswered: ${MAX_CONNECTIONS_ENV} (${maxConnections}) were open`,
    );
    lastLine = Date.now();
    dropped = 0;
  });
  let droppedPerAddress = 0;
  let lastPerAddressLine = 0;
  server.on('dropPerAddress', (address: string) => {
    droppedPerAddress++;
    if (Date.now() - lastPerAddressLine < 60_000) return;
    // (the address is the client's: an operator's to see, as in any access log; never a key or a secret)
    logger.warn(
      { dropped: droppedPerAddress, address, maxConnectionsPerAddress },
      `connections closed unanswered: one address held ${MAX_CONNECTIONS_PER_ADDRESS_ENV} (${maxConnectionsPerAddress})`,
    );
    lastPerAddressLine = Date.now();
    droppedPerAddress = 0;
  });
}
