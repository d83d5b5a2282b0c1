import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { listen } from '../../src/http/edge.js';
import { createAdminApp, type AdminAppOptions } from '../../src/admin/app.js';
import { testDatabase } from '../support/database.js';
import { capturedLogger } from '../support/logs.js';
import { ADMIN_API, documentedClient, type ApiResponse } from '../support/http.js';

// The admin API on an ephemeral port, as its own database role, its log lines captured; every response its client
// receives is checked against openapi/admin.yaml (test/support/http.ts).

export interface TestAdminApi {
  url: string;
  logs: Array<Record<string, unknown>>;
  request(
    method: string,
    path: string,
    options?: { token?: string; body?: unknown; headers?: Record<string, string> },
  ): Promise<ApiResponse>;
  close(): Promise<void>;
}

export async function startAdminApi(
  options: Partial<Pick<AdminAppOptions, 'clock' | 'authFailures'>> = {},
): Promise<TestAdminApi> {
  return startAdminApiAt({ portalUrl: 'http://localhost:3000', ...options });
}

/** The admin API with the settings screen's links pointing at `portalUrl`. */
export async function startAdminApiAt(
  options: Partial<Pick<AdminAppOptions, 'clock' | 'authFailures' | 'portalUrl'>> = {},
): Promise<TestAdminApi> {
  const database = await testDatabase();
  const { logger, logs } = capturedLogger();
  const app = await createAdminApp({
    db: database.forRole('admin'),
    ingestDb: database.forRole('ingest'),
    logger,
    ...options,
  });
  const server: Server = await listen(app, 0, '127.0.0.1');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const client = documentedClient({ ...ADMIN_API, baseUrl: url });
  return {
    url,
    logs,
    request: (method, path, { token, body, headers = {} } = {}) =>
      client.request(method, path, {
        headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
        body,
      }),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
