import { expect } from 'chai';
import { testDatabase } from '../support/database.js';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import pino from 'pino';
import type { Knex } from 'knex';
import { startApi, type TestApi } from '../support/api.js';
import { expectDocumented, PUBLIC_API, type ApiResponse } from '../support/http.js';
import { createApp } from '../../src/api/app.js';
import { API_STATEMENT_TIMEOUT_MS, createKnex } from '../../src/db/database.js';
import { createApiKey, createWorkspace } from '../../src/core/workspaces.js';
import { idOf, operator } from '../support/actors.js';

describe('errors and parameter validation', () => {
  let api: TestApi;
  let key: string;

  before(async () => {
    const { db } = await testDatabase();
    await createWorkspace(db, operator, { slug: 'errors-ws' });
    key = (await createApiKey(db, operator, { workspaceId: await idOf(db, 'errors-ws') })).key;
    api = await startApi({ now: new Date('2026-11-22T08:00:00.000Z') });
  });
  after(() => api.close());

  it('answers an unknown route with the documented 404 body', async () => {
    for (const path of ['/v1/nothing', '/v2/me', '/nothing']) {
      const res = await api.get(path, key);
      expect(res.status, path).to.equal(404);
      expect(res.body.error.code).to.equal('not_found');
    }
  });

  it('answers a known path with another method with 405 and Allow', async () => {
    const res = await api.request('DELETE', '/v1/me', { key });
    expect(res.status).to.equal(405);
    expect(res.body.error.code).to.equal('method_not_allowed');
    expect(res.headers.get('allow')).to.equal('GET, HEAD, OPTIONS');
  });

  it('never reads a request body: a malformed or falsely encoded one gets the answer the request deserves', async () => {
    const path = '/v1/webhooks/8d6f2c1e-4a3b-4c5d-8e9f-0a1b2c3d4e5f/test';
    for (const headers of <Array<Record<string, string>>>[
      { 'content-type': 'application/json' },
      { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      { 'content-type': 'application/json', 'content-encoding': 'deflate' },
      { 'content-type': 'application/json', 'content-encoding': 'br' },
      { 'content-type': 'text/plain', 'content-encoding': 'identity, gzip' },
    ]) {
      const label = JSON.stringify(headers);
      // no operation takes a body, so the test operation answers for the unknown endpoint ...
      const found = await api.request('POST', path, {
        key,
        headers: { ...headers, 'idempotency-key': 'k1' },
        body: '{"broken": ',
      });
      expect(found.status, label).to.equal(404);
      expect(found.body.error.code).to.equal('not_found');
      // ... and requests no operation accepts are refused for what they are
      expect((await api.request('POST', path, { headers, body: '{"broken": ' })).status, label).to.equal(401);
      expect((await api.request('PUT', '/v1/me', { key, headers, body: '{"broken": ' })).status, label).to.equal(405);
      expect((await api.request('PATCH', '/v1/nothing', { key, headers, body: 'x' })).status, label).to.equal(404);
    }
  });

  const badParameters: Array<[string, string]> = [
    ['/v1/vehicles?limit=0', 'limit'],
    ['/v1/vehicles?limit=51', 'limit'],
    ['/v1/vehicles?limit=abc', 'limit'],
    ['/v1/vehicles?limit=2.5', 'limit'],
    ['/v1/vehicles?limit=1&limit=2', 'limit'],
    ['/v1/vehicles?q=', 'q'],
    ['/v1/vehicles?from=2026-11-23T00:00:00Z', 'to'],
    ['/v1/vehicles?to=2026-11-23T00:00:00Z', 'from'],
    ['/v1/vehicles?from=tomorrow&to=2026-11-23T00:00:00Z', 'from'],
    ['/v1/vehicles?from=2026-11-23T00:00:00Z&to=2026-11-23', 'to'],
    ['/v1/vehicles?from=2026-11-23T10:00:00Z&to=2026-11-23T10:00:00Z', 'to'],
    ['/v1/vehicles?from=2026-11-24T00:00:00Z&to=2026-11-23T00:00:00Z', 'to'],
    ['/v1/receivables?limit=0', 'limit'],
    ['/v1/receivables?limit=201', 'limit'],
    ['/v1/receivables?search=', 'search'],
  ];
  for (const [path, parameter] of badParameters) {
    it(`GET ${path} is 400 naming "${parameter}"`, async () => {
      const res = await api.get(path, key);
      expect(res.status).to.equal(400);
      expect(res.body.error).to.include({ code: 'invalid_request', reason: parameter });
      expect(res.body.error.message).to.include(`"${parameter}"`);
    });
  }

  it('says a single-valued query parameter was given twice, naming it, whatever its value', async () => {
    const cases: Array<[string, string, string]> = [
      [
        '/v1/vehicles?limit=5&limit=6',
        'limit',
        'Query parameter "limit" was given twice; send it once, as an integer from 1 to 50.',
      ],
      [
        '/v1/vehicles?q=a&q=b',
        'q',
        'Query parameter "q" was given twice; send it once, as a string of 1 to 100 characters, with no NUL character.',
      ],
      [
        '/v1/receivables?search=al&limit=500&search=b&search=c',
        'search',
        'Query parameter "search" was given 3 times; send it once, as a string of 1 to 100 characters, with no NUL character.',
      ],
      [
        '/v1/receivables?limit=10&limit=10',
        'limit',
        'Query parameter "limit" was given twice; send it once, as an integer from 1 to 200.',
      ],
    ];
    for (const [path, parameter, message] of cases) {
      const res = await api.get(path, key);
      expect(res.status, path).to.equal(400);
      expect(res.body.error, path).to.include({ code: 'invalid_request', reason: parameter, message });
    }
  });

  it('says a date-time whose "+" arrived as a space is to be sent with %2B, naming the parameter', async () => {
    const told = (name: string) =>
      `Query parameter "${name}" must be an ISO 8601 date-time with an offset, such as 2026-11-22T08:30:00.000Z; its "+" arrived as a space, ` +
      'as an unencoded "+" in a URL does: encode "+" as %2B (…T06:00:00%2B04:00).';
    const cases: Array<[string, string]> = [
      ['/v1/vehicles?from=2026-12-01T06:00:00+04:00&to=2026-12-04T06:00:00Z', 'from'],
      ['/v1/vehicles?from=2026-12-01T06:00:00Z&to=2026-12-04T06:00:00.500+0400', 'to'],
      ['/v1/vehicles?from=2026-12-01T06:00%2004:00&to=2026-12-04T06:00:00Z', 'from'],
    ];
    for (const [path, parameter] of cases) {
      const res = await api.get(path, key);
      expect(res.status, path).to.equal(400);
      expect(res.body.error, path).to.include({ code: 'invalid_request', reason: parameter, message: told(parameter) });
    }
    // the same times encoded as the message says are accepted
    const encoded = await api.get('/v1/vehicles?from=2026-12-01T06:00:00%2B04:00&to=2026-12-04T06:00:00%2B04:00', key);
    expect(encoded.status).to.equal(200);
    // any other bad date-time keeps the plain message
    const other = await api.get('/v1/vehicles?from=2026-12-01 06:00:00&to=2026-12-04T06:00:00Z', key);
    expect(other.body.error.message).to.equal(
      'Query parameter "from" must be an ISO 8601 date-time with an offset, such as 2026-11-22T08:30:00.000Z.',
    );
  });

  it('the test operation needs a UUID id and an Idempotency-Key of 1 to 255 characters', async () => {
    const valid = '/v1/webhooks/8d6f2c1e-4a3b-4c5d-8e9f-0a1b2c3d4e5f/test';
    const cases: Array<[string, Record<string, string>, string]> = [
      ['/v1/webhooks/not-a-uuid/test', { 'idempotency-key': 'k' }, 'id'],
      [valid, {}, 'Idempotency-Key'],
      [valid, { 'idempotency-key': '' }, 'Idempotency-Key'],
      [valid, { 'idempotency-key': 'x'.repeat(256) }, 'Idempotency-Key'],
    ];
    for (const [path, headers, parameter] of cases) {
      const res = await api.request('POST', path, { key, headers });
      expect(res.status, `${path} ${JSON.stringify(headers).slice(0, 40)}`).to.equal(400);
      expect(res.body.error).to.include({ code: 'invalid_request', reason: parameter });
    }
  });

  it('checks the key before the parameters', async () => {
    const res = await api.get('/v1/vehicles?limit=0');
    expect(res.status).to.equal(401);
  });

  it('answers a request whose statement runs past the time limit with 503 unavailable and Retry-After, not logged as a defect', async function () {
    // (PostgreSQL's own timers never fire under a clock moved by faketime: see scripts/test-dates.ts)
    if (process.env.FAKETIME) this.skip();
    // The owner holds a lock that the fleet summary's statement waits for, for longer than the API's limit.
    const { db } = await testDatabase();
    const locker = await db.transaction();
    try {
      await locker.raw('LOCK TABLE vehicle_state_counts IN ACCESS EXCLUSIVE MODE');
      const started = Date.now();
      const giveUpMs = API_STATEMENT_TIMEOUT_MS + 2000;
      const response = await Promise.race([
        api.get('/v1/fleet/summary', key),
        new Promise<undefined>((resolve) => setTimeout(resolve, giveUpMs)),
      ]);
      const ms = Date.now() - started;
      expect(response, `no answer within ${giveUpMs} ms`).not.to.equal(undefined);
      expect(response!.status).to.equal(503);
      expect(response!.body.error.code).to.equal('unavailable');
      expect(response!.headers.get('retry-after')).to.equal('5');
      expect(ms).to.be.within(API_STATEMENT_TIMEOUT_MS, API_STATEMENT_TIMEOUT_MS + 1000);
      const logs = JSON.stringify(
        api.logs.filter((line: Record<string, unknown>) => line.requestId === response!.body.error.requestId),
      );
      expect(logs).to.include('statement cut short by its time limit').and.include('"status":503');
      expect(logs).not.to.include('unhandled error');
    } finally {
      await locker.rollback();
    }
    // and the next request, with nothing in its way, is answered
    expect((await api.get('/v1/fleet/summary', key)).status).to.equal(200);
  });

  it("answers with a request id of the server's own, never the one a client sent (kept beside it in the log and audit)", async () => {
    const sent = await api.get('/v1/me', key, { 'x-request-id': 'trace-123' });
    expect(sent.headers.get('x-request-id')).to.match(/^req_[\w-]{16}$/);
    const made = await api.get('/v1/me', key, { 'x-request-id': 'bad id with spaces' });
    expect(made.headers.get('x-request-id')).to.match(/^req_[\w-]{16}$/);
  });
});

describe('the documents and unexpected failures', () => {
  it('serves the OpenAPI document as JSON and YAML, and the reference page, without a key', async () => {
    const api = await startApi();
    try {
      const json = await fetch(`${api.url}/openapi.json`);
      expect(json.status).to.equal(200);
      const document = await json.json();
      expect(document.info.version).to.equal('1.0.0');
      expect(Object.keys(document.webhooks)).to.have.length(39);
      const yaml = await fetch(`${api.url}/openapi.yaml`);
      expect(yaml.headers.get('content-type')).to.match(/yaml/);
      expect(await yaml.text()).to.match(/^openapi: 3\.1\.0/);
      const docs = await fetch(`${api.url}/docs`);
      expect(docs.headers.get('content-type')).to.match(/^text\/html/);
      expect(await docs.text()).to.include('<script src="/docs/scalar.js"></script>');
      const bundle = await fetch(`${api.url}/docs/scalar.js`);
      expect(bundle.status).to.equal(200);
      expect(bundle.headers.get('content-type')).to.match(/^application\/javascript/);
      expect((await bundle.arrayBuffer()).byteLength).to.be.greaterThan(1_000_000);
      const icon = await fetch(`${api.url}/favicon.ico`);
      expect([icon.status, icon.headers.get('content-type')]).to.deep.equal([200, 'image/svg+xml']);
      expect(await icon.text()).to.match(/^<svg /);
    } finally {
      await api.close();
    }
  });

  it('locks the reference page down: a strict Content-Security-Policy, no inline script, no framing', async () => {
    const api = await startApi();
    try {
      const docs = await fetch(`${api.url}/docs`);
      const policy = Object.fromEntries(
        docs.headers
          .get('content-security-policy')!
          .split('; ')
          .map((d) => [d.split(' ')[0], d.split(' ').slice(1).join(' ')]),
      );
      expect(policy).to.deep.equal({
        'default-src': "'self'",
        'script-src': "'self'",
        'style-src': "'self' 'unsafe-inline'",
        'img-src': "'self' data:",
        'connect-src': "'self'",
        'object-src': "'none'",
        'frame-ancestors': "'none'",
        'base-uri': "'none'",
        'form-action': "'none'",
      });
      expect(docs.headers.get('x-frame-options')).to.equal('DENY');
      // every script of the page is a file of this server's; the configuration is one of them
      const page = await docs.text();
      expect(page.match(/<script[^>]*>/g)).to.deep.equal([
        '<script id="api-reference">',
        '<script src="/docs/configuration.js">',
        '<script src="/docs/scalar.js">',
      ]);
      expect(page).not.to.match(/<script[^>]*>[^<]+<\/script>/);
      expect(page).not.to.match(/<style/);
      const configuration = await fetch(`${api.url}/docs/configuration.js`);
      expect(configuration.headers.get('content-type')).to.match(/^application\/javascript/);
      expect(await configuration.text()).to.include('"url":"/openapi.json"');
      expect((await fetch(`${api.url}/docs/page.css`)).headers.get('content-type')).to.match(/^text\/css/);
    } finally {
      await api.close();
    }
  });

  /** The app on `db`, its log lines, and one GET of /v1/me with a well-formed key: the answer and how long it took. */
  async function meOn(db: Knex): Promise<{ response: ApiResponse; ms: number; text: string; logs: string }> {
    const lines: string[] = [];
    const logger = pino(
      { level: 'info' },
      new Writable({
        write(chunk, _e, done) {
          lines.push(chunk.toString());
          done();
        },
      }),
    );
    const app = await createApp({ db, logger });
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const { port } = server.address() as AddressInfo;
      const started = performance.now();
      const res = await fetch(`http://127.0.0.1:${port}/v1/me`, {
        headers: { authorization: 'Bearer frs_0123456789abcdef0123456789abcdef' },
      });
      const text = await res.text();
      const response = { status: res.status, headers: res.headers, text, body: JSON.parse(text) };
      expectDocumented(PUBLIC_API, 'GET', '/v1/me', response);
      return { response, ms: performance.now() - started, text, logs: lines.join('') };
    } finally {
      server.close();
    }
  }

  it('answers an unexpected failure with the documented 500 body: no stack trace, no detail, logged', async () => {
    // A database that answers but lacks the tables (the search path points at a schema that does not exist): a
    // defect, not an outage.
    const { url } = await testDatabase();
    const db = createKnex(url, 1, 'SET search_path TO no_such_schema');
    try {
      const { response, text, logs } = await meOn(db);
      expect(response.status).to.equal(500);
      expect(response.body.error.code).to.equal('internal_error');
      expect(response.headers.get('retry-after')).to.equal(null);
      expect(text).not.to.match(/api_keys|no_such_schema|at .*\.(ts|js):\d+/);
      expect(logs).to.include('unhandled error');
      expect(logs).not.to.include('frs_0123456789abcdef0123456789abcdef');
    } finally {
      await db.destroy();
    }
  });

  it('answers while the database cannot be reached with 503 unavailable and Retry-After, at once, not logged as a defect', async () => {
    // A database nobody listens on: every authentication lookup fails to connect.
    const db = createKnex('postgres://postgres:postgres@127.0.0.1:1/none');
    try {
      const { response, ms, text, logs } = await meOn(db);
      expect(response.status).to.equal(503);
      expect(response.body.error.code).to.equal('unavailable');
      expect(response.headers.get('retry-after')).to.equal('5');
      expect(ms).to.be.below(5000);
      expect(text).not.to.match(/ECONNREFUSED|127\.0\.0\.1|at .*\.(ts|js):\d+/);
      expect(logs).not.to.include('unhandled error');
      expect(logs).to.include('"status":503');
    } finally {
      await db.destroy();
    }
  });
});
