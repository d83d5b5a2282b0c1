import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { expect } from 'chai';
import { listen } from '../../src/http/edge.js';
import { pathPattern } from '../../src/http/contract.js';
import { createAdminApp, type AdminAppOptions } from '../../src/admin/app.js';
import { loadOpenApiDocument, type OpenApiOperation } from '../../src/contract/document.js';
import { adminValidators } from '../../src/contract/validators.js';
import { testDatabase } from '../support/database.js';
import { capturedLogger } from '../support/logs.js';

// The admin API on an ephemeral port, as its own database role, its log lines captured; and the check every answer of
// the admin tests goes through: declared status and schema of openapi/admin.yaml (the generated strict validators).
const document = loadOpenApiDocument('admin');
const operations = Object.entries(document.paths).flatMap(([template, item]) =>
  Object.entries(item)
    .filter(([, operation]) => (operation as OpenApiOperation).responses)
    .map(([method, operation]) => ({
      method: method.toUpperCase(),
      template,
      regex: pathPattern(template),
      operation: operation as OpenApiOperation,
    })),
);

/**
 * Whether a client may call an operation: its security lists the client's scheme (the settings screen's own session
 * calls, under /portal/, are the screen's). Any other operation is no route for that client.
 */
function inReach(template: string, operation: OpenApiOperation, scheme: 'adminToken' | 'portalSession'): boolean {
  const security = (operation.security ?? document.security ?? []) as Array<Record<string, unknown>>;
  return (
    security.some((requirement) => scheme in requirement) ||
    (scheme === 'portalSession' && template.startsWith('/portal/'))
  );
}

/**
 * Checks an answer against the admin document: a declared status, its schema, JSON, x-request-id. `scheme`: the
 * client asked (the admin listener's token, or the settings screen's session).
 */
export function expectAdminDocumented(
  method: string,
  path: string,
  response: { status: number; headers: Headers; body: unknown },
  scheme: 'adminToken' | 'portalSession' = 'adminToken',
): void {
  const pathname = new URL(path, 'http://x').pathname;
  const match = operations.find(
    (o) => o.method === method && o.regex.test(pathname) && inReach(o.template, o.operation, scheme),
  );
  let schema = 'ErrorResponse';
  if (match) {
    const declared = match.operation.responses[String(response.status)];
    expect(declared, `${match.operation.operationId} does not document ${response.status}`).to.exist;
    const resolved = declared.$ref
      ? (document.components.responses as Record<string, typeof declared>)[declared.$ref.split('/').pop()!]
      : declared;
    if (!resolved.content) {
      // A declared answer without a body (204): none sent, and the request id still there.
      expect(response.headers.get('content-type'), `${method} ${path} ${response.status} has a body`).to.equal(null);
      expect(response.headers.get('x-request-id')).to.be.a('string').and.not.empty;
      return;
    }
    schema = resolved.content['application/json'].schema.$ref!.split('/').pop()!;
  } else {
    expect(response.status, `${method} ${pathname} is not an operation`).to.be.oneOf([404, 405]);
  }
  expect(response.headers.get('content-type')).to.match(/^application\/json/);
  const requestId = response.headers.get('x-request-id');
  expect(requestId).to.be.a('string').and.not.empty;
  const validate = adminValidators[schema];
  expect(
    validate(response.body),
    `${method} ${path} ${response.status} does not match ${schema}: ${JSON.stringify(validate.errors)}`,
  ).to.equal(true);
  if (response.status >= 400)
    expect((response.body as { error: { requestId: string } }).error.requestId).to.equal(requestId);
}

export interface TestAdminApi {
  url: string;
  logs: Array<Record<string, unknown>>;
  request(
    method: string,
    path: string,
    options?: { token?: string; body?: unknown; headers?: Record<string, string> },
  ): Promise<{ status: number; headers: Headers; body: any }>;
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
  return {
    url,
    logs,
    async request(method, path, { token, body, headers = {} } = {}) {
      const res = await fetch(url + path, {
        method,
        headers: {
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...headers,
        },
        body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      });
      const text = await res.text();
      const response = { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
      expectAdminDocumented(method, path, response);
      return response;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
