import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { expect } from 'chai';
import type pg from 'pg';
import { createApp, type AppOptions } from '../../src/api/app.js';
import { listen } from '../../src/http/edge.js';
import { pathPattern } from '../../src/http/contract.js';
import { KeyCache, type HeartbeatTimings } from '../../src/api/key-cache.js';
import { loadOpenApiDocument, type OpenApiOperation } from '../../src/contract/document.js';
import { testDatabase } from './database.js';
import type { Database } from '../../src/db/database.js';
import { validators } from '../../src/contract/validators.js';
import { expectValidPayload } from './calendar-fixtures.js';
import { capturedLogger } from './logs.js';

// Every response a test receives is checked with the committed validators generated from the document, against
// the schema the document declares for that operation and status.
const document = loadOpenApiDocument();
const operations = Object.entries(document.paths).flatMap(([template, item]) =>
  Object.entries(item).map(([method, operation]) => ({
    method: method.toUpperCase(),
    regex: pathPattern(template),
    operation,
  })),
);

function declaredSchema(operation: OpenApiOperation, status: number): string {
  const response = operation.responses[String(status)];
  expect(response, `${operation.operationId} does not document status ${status}`).to.exist;
  const resolved = response.$ref
    ? (document.components.responses as Record<string, OpenApiOperation['responses'][string]>)[
        response.$ref.split('/').pop()!
      ]
    : response;
  return resolved.content!['application/json'].schema.$ref!.split('/').pop()!;
}

export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

/** Every answer says at most how old its data is (components/headers/DataMaxStaleness): whole milliseconds. */
function expectStalenessBound(response: ApiResponse): void {
  expect(response.headers.get('data-max-staleness-ms'), 'Data-Max-Staleness-Ms').to.match(/^(0|[1-9]\d{0,6})$/);
}

/** Checks a response against the document: declared status, schema, content type, x-request-id, Data-Max-Staleness-Ms. */
export function expectDocumented(method: string, path: string, response: ApiResponse): void {
  const pathname = new URL(path, 'http://x').pathname;
  const match = operations.find((o) => o.method === method && o.regex.test(pathname));
  if (response.status === 304) {
    // Not modified (to GET or HEAD): documented, no body, the tag it confirms, as the 200 would carry it.
    const get = operations.find((o) => o.method === 'GET' && o.regex.test(pathname));
    expect(method === 'GET' || method === 'HEAD', `${method} ${path} answered 304`).to.equal(true);
    expect(get?.operation.responses['304'], `${method} ${path} does not document 304`).to.exist;
    expect(response.text).to.equal('');
    expect(response.headers.get('etag')).to.match(/^W\/"[A-Za-z0-9_-]+"$/);
    expect(response.headers.get('cache-control')).to.equal('private, no-cache');
    expect(response.headers.get('x-request-id'), 'x-request-id').to.be.a('string').and.not.empty;
    expectStalenessBound(response);
    return;
  }
  const schema = match ? declaredSchema(match.operation, response.status) : 'ErrorResponse';
  if (!match) expect(response.status, `${method} ${pathname} is not an operation`).to.be.oneOf([404, 405]);
  expect(response.headers.get('content-type')).to.match(/^application\/json/);
  const requestId = response.headers.get('x-request-id');
  expect(requestId, 'x-request-id').to.be.a('string').and.not.empty;
  // An answer whose documented headers include ETag carries one (every /v1 GET's 200).
  if (
    match &&
    (match.operation.responses[String(response.status)] as { headers?: Record<string, unknown> }).headers?.ETag
  ) {
    expect(response.headers.get('etag'), `${method} ${path}: ETag`).to.match(/^W\/"[A-Za-z0-9_-]+"$/);
    expect(response.headers.get('cache-control')).to.equal('private, no-cache');
  } else {
    expect(response.headers.get('etag'), `${method} ${path} ${response.status}: no ETag`).to.equal(null);
  }
  expectStalenessBound(response);
  const validate = validators[schema];
  expect(validate, `no generated validator for ${schema}`).to.be.a('function');
  const valid = validate(response.body);
  expect(
    valid,
    `${method} ${path} ${response.status} does not match ${schema}: ${JSON.stringify(validate.errors)}`,
  ).to.equal(true);
  if (response.status >= 400) expect(response.body.error.requestId).to.equal(requestId);
  // A delivery's payload is declared free-form there; it is the event's own payload, checked as strictly.
  if (schema === 'DeliveryDetail') expectValidPayload(response.body.payload);
}

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
  const app = await createApp({
    db,
    logger,
    clock,
    keyCache,
    limits: options.limits,
    cursors: options.cursors,
    reads: options.reads,
  });
  const server: Server = await listen(app, 0, '127.0.0.1');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const request: TestApi['request'] = async (method, path, { key, headers = {}, body } = {}) => {
    const res = await fetch(url + path, {
      method,
      headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers },
      body,
      redirect: 'manual',
    });
    const text = await res.text();
    const response: ApiResponse = {
      status: res.status,
      headers: res.headers,
      text,
      body: text ? JSON.parse(text) : undefined,
    };
    expectDocumented(method, path, response);
    return response;
  };
  return {
    url,
    logs,
    request,
    get: (path, key, headers) => request('GET', path, { key, headers }),
    keyCache,
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await keyCache?.close();
    },
  };
}
