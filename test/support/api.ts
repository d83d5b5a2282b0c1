import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import type pg from 'pg';
import { createApp, type AppOptions } from '../../src/api/app.js';
import { listen } from '../../src/http/edge.js';
import { KeyCache, type HeartbeatTimings } from '../../src/api/key-cache.js';
import { EventArrivals } from '../../src/api/event-arrivals.js';
import { testDatabase } from './database.js';
import type { Database } from '../../src/db/database.js';
import { documentedClient, PUBLIC_API, type ApiResponse } from './http.js';
import { capturedLogger } from './logs.js';

export interface TestApi {
  url: string;
  /** Every log line the app wrote, as parsed objects. */
  logs: Array<Record<string, unknown>>;
  request(
    method: string,
    path: string,
    options?: { key?: string; headers?: Record<string, string>; body?: string },
  ): Promise<ApiResponse>;
  get(path: string, key?: string, headers?: Record<string, string>): Promise<ApiResponse>;
  /** The app's key cache, when started with one. */
  keyCache?: KeyCache;
  /** The event feed's LISTEN connection, when started with one. */
  events?: EventArrivals;
  close(): Promise<void>;
}

/**
 * The real app on an ephemeral port, on the test database as the API's role, with the given clock; with a key cache
 * when asked, listening as the API's role (or through `connect`, when given), with the given heartbeat timings.
 */
export async function startApi(
  options: {
    now?: Date | (() => Date);
    keyCache?: boolean | ({ connect?: () => Promise<pg.Client> } & HeartbeatTimings);
    limits?: AppOptions['limits'];
    cursors?: AppOptions['cursors'];
    /** Another database than the tests' (a primary with a replica), and its read routing. */
    database?: Database;
    reads?: AppOptions['reads'];
    /** The event feed's LISTEN connection (the long polls'), as the API's role, as main starts it. */
    events?: boolean;
  } = {},
): Promise<TestApi> {
  // The API's own connections: its database role (src/db/roles.ts), as in production.
  const database = options.database ?? (await testDatabase());
  const db = database.forRole('api');
  const { logger, logs } = capturedLogger();
  const now = options.now;
  const clock = now === undefined ? undefined : typeof now === 'function' ? now : () => now;
  const { connect = () => database.connectAs('api'), ...timings } =
    typeof options.keyCache === 'object' ? options.keyCache : {};
  const keyCache = options.keyCache ? await KeyCache.start(connect, db, logger, timings) : undefined;
  const events = options.events ? await EventArrivals.start(() => database.connectAs('api'), logger) : undefined;
  const app = await createApp({
    db,
    logger,
    clock,
    keyCache,
    limits: options.limits,
    cursors: options.cursors,
    reads: options.reads,
    events,
  });
  const server: Server = await listen(app, 0, '127.0.0.1');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const client = documentedClient({ ...PUBLIC_API, baseUrl: url });
  const request: TestApi['request'] = (method, path, { key, headers = {}, body } = {}) =>
    client.request(method, path, { headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers }, body });
  return {
    url,
    logs,
    request,
    get: (path, key, headers) => request('GET', path, { key, headers }),
    keyCache,
    events,
    close: async () => {
      // (as main stops: the long polls answered at once, then the server closed)
      const feedClosed = events?.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await keyCache?.close();
      await feedClosed;
    },
  };
}
