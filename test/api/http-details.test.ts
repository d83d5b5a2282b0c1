import net from 'node:net';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import pino from 'pino';
import { testDatabase } from '../support/database.js';
import { startApi, type TestApi } from '../support/api.js';
import { createApp } from '../../src/api/app.js';
import { listen } from '../../src/http/edge.js';
import { createKnex } from '../../src/db/database.js';
import { loadOpenApiDocument } from '../../src/contract/document.js';
import { validators } from '../../src/contract/validators.js';
import { createApiKey, createWorkspace } from '../../src/core/workspaces.js';
import { idOf, operator } from '../support/actors.js';

const UUID = '8d6f2c1e-4a3b-4c5d-8e9f-0a1b2c3d4e5f';
const document = loadOpenApiDocument();
/** Every operation of the document as [METHOD, concrete path]: path parameters filled with a UUID. */
const operations = Object.entries(document.paths).flatMap(([template, item]) =>
  Object.keys(item).map((method) => [method.toUpperCase(), template.replace(/\{[^}]+\}/g, UUID)] as const),
);

/** Sends raw bytes and reads every byte until the server closes the connection. */
async function rawExchange(url: string, bytes: Buffer): Promise<string> {
  const { port } = new URL(url);
  const socket = net.connect(Number(port), '127.0.0.1');
  await once(socket, 'connect');
  const chunks: Buffer[] = [];
  socket.on('data', (c) => chunks.push(c));
  socket.write(bytes);
  await once(socket, 'close');
  return Buffer.concat(chunks).toString('utf8');
}

/** Sends raw bytes and reads the whole answer (the server closes the connection after these errors). */
async function rawRequest(
  url: string,
  bytes: Buffer,
): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  const text = await rawExchange(url, bytes);
  const [head, body] = [text.slice(0, text.indexOf('\r\n\r\n')), text.slice(text.indexOf('\r\n\r\n') + 4)];
  const [statusLine, ...lines] = head.split('\r\n');
  const headers = Object.fromEntries(
    lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
  );
  return { status: Number(statusLine.split(' ')[1]), headers, body };
}

describe('HTTP details and input that must never get a 5xx', () => {
  let api: TestApi;
  let key: string;

  before(async () => {
    const { db } = await testDatabase();
    const slug = `http-${process.pid}-${Date.now().toString(36)}`;
    await createWorkspace(db, operator, { slug });
    key = (await createApiKey(db, operator, { workspaceId: await idOf(db, slug) })).key;
    api = await startApi({ now: new Date('2026-11-22T08:00:00.000Z') });
  });
  after(() => api.close());

  it('answers HEAD on every GET operation like GET, without a body', async () => {
    const gets = operations.filter(([method]) => method === 'GET');
    expect(gets.length).to.equal(14);
    for (const [, path] of gets) {
      const get = await api.get(path, key);
      const head = await fetch(api.url + path, { method: 'HEAD', headers: { authorization: `Bearer ${key}` } });
      expect(head.status, path).to.equal(get.status);
      expect(head.headers.get('content-type'), path).to.equal(get.headers.get('content-type'));
      expect(head.headers.get('content-length'), path).to.equal(String(Buffer.byteLength(get.text)));
      expect(await head.text(), path).to.equal('');
    }
    // an error answers HEAD like GET too
    const unauthenticated = await fetch(`${api.url}/v1/me`, { method: 'HEAD' });
    expect(unauthenticated.status).to.equal(401);
    expect(unauthenticated.headers.get('www-authenticate')).to.match(/^Bearer/);
  });

  it('answers OPTIONS with 204 and Allow, without a key; an unknown path with 404', async () => {
    const cases: Array<[string, string]> = [
      ['/v1/me', 'GET, HEAD, OPTIONS'],
      [`/v1/webhooks/${UUID}/test`, 'POST, OPTIONS'],
      [`/v1/webhooks/${UUID}/deliveries/${UUID}`, 'GET, HEAD, OPTIONS'],
      ['/healthz', 'GET, HEAD, OPTIONS'],
    ];
    for (const [path, allow] of cases) {
      const res = await fetch(api.url + path, { method: 'OPTIONS' });
      expect(res.status, path).to.equal(204);
      expect(res.headers.get('allow'), path).to.equal(allow);
      expect(await res.text()).to.equal('');
    }
    const unknown = await api.request('OPTIONS', '/v1/nothing');
    expect(unknown.status).to.equal(404);
    // a 405 lists the same methods
    const wrong = await api.request('PUT', `/v1/webhooks/${UUID}/test`, { key });
    expect(wrong.status).to.equal(405);
    expect(wrong.headers.get('allow')).to.equal('POST, OPTIONS');
  });

  it('refuses an unknown query parameter by name on every operation, after the key is checked', async () => {
    for (const [method, path] of operations) {
      const res = await api.request(method, `${path}?colour=red`, { key, headers: { 'idempotency-key': 'k' } });
      expect(res.status, `${method} ${path}`).to.equal(400);
      expect(res.body.error).to.include({ code: 'invalid_request', reason: 'colour' });
      expect(res.body.error.message).to.include('"colour"');
    }
    expect((await api.get('/v1/me?colour=red')).status).to.equal(401);
  });

  it('marks every answer nosniff, and no-store unless it has an ETag (then private, no-cache): data, errors, probes', async () => {
    for (const res of [await api.get('/v1/me'), await api.get('/v1/nothing', key), await api.get('/healthz')]) {
      expect(res.headers.get('cache-control')).to.equal('no-store');
      expect(res.headers.get('x-content-type-options')).to.equal('nosniff');
    }
    const tagged = await api.get('/v1/me', key);
    expect(tagged.headers.get('cache-control')).to.equal('private, no-cache');
    expect(tagged.headers.get('x-content-type-options')).to.equal('nosniff');
  });

  it('answers a malformed percent-escape in a path parameter with 400 naming it, after the key is checked', async () => {
    for (const id of ['%zz', '%', '%E0%A4%A', '%C0%AF', 'a%2']) {
      const test = await api.request('POST', `/v1/webhooks/${id}/test`, { key, headers: { 'idempotency-key': 'k' } });
      expect(test.status, id).to.equal(400);
      expect(test.body.error).to.include({ code: 'invalid_request', reason: 'id' });
      const log = await api.get(`/v1/webhooks/${UUID}/deliveries/${id}`, key);
      expect(log.body.error, id).to.include({ code: 'invalid_request', reason: 'deliveryId' });
      expect((await api.request('POST', `/v1/webhooks/${id}/test`)).status, id).to.equal(401);
      expect((await api.get(`/v1/nothing/${id}`, key)).status, id).to.equal(404);
    }
  });

  it('refuses a NUL character in q and search with 400 naming the parameter', async () => {
    for (const [path, parameter] of [
      ['/v1/vehicles?q=a%00b', 'q'],
      ['/v1/receivables?search=%00', 'search'],
    ]) {
      const res = await api.get(path, key);
      expect(res.status).to.equal(400);
      expect(res.body.error).to.include({ code: 'invalid_request', reason: parameter });
      expect(res.body.error.message).to.include('no NUL character');
    }
  });

  it("answers what Node's parser refuses with the documented body and an x-request-id", async () => {
    const check = (
      res: { status: number; headers: Record<string, string>; body: string },
      status: number,
      code: string,
    ) => {
      expect(res.status).to.equal(status);
      expect(res.headers['content-type']).to.match(/^application\/json/);
      const body = JSON.parse(res.body);
      expect(validators.ErrorResponse(body), JSON.stringify(validators.ErrorResponse.errors)).to.equal(true);
      expect(body.error.code).to.equal(code);
      expect(body.error.requestId).to.equal(res.headers['x-request-id']);
    };
    const utf8Url = Buffer.concat([
      Buffer.from('GET /v1/vehicles?q='),
      Buffer.from('Ñ‡Ø§', 'utf8'),
      Buffer.from(' HTTP/1.1\r\nHost: x\r\n\r\n'),
    ]);
    check(await rawRequest(api.url, utf8Url), 400, 'invalid_request');
    const longHeader = Buffer.from(`GET /v1/me HTTP/1.1\r\nHost: x\r\nX-Long: ${'a'.repeat(20_000)}\r\n\r\n`);
    check(await rawRequest(api.url, longHeader), 431, 'headers_too_large');
    check(await rawRequest(api.url, Buffer.from('NONSENSE\r\n\r\n')), 400, 'invalid_request');
  });

  it('never answers HEAD with a body, whatever layer answers it (the error paths a fuzz found included)', async () => {
    // Each HEAD is followed on the same connection by a GET of /healthz: after the HEAD answer's header block comes
    // either that GET's answer (the connection kept) or nothing (closed). A body would sit in between.
    const head = (path: string | Buffer, headers = '') =>
      Buffer.concat([
        Buffer.from('HEAD '),
        Buffer.from(path),
        Buffer.from(` HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n${headers}\r\n`),
      ]);
    const heads: Array<[string, number, Buffer]> = [
      ['/nope', 404, head('/nope')],
      ['/v1/nothing/%zz', 404, head('/v1/nothing/%zz')],
      ['/v1/me without a key', 401, Buffer.from('HEAD /v1/me HTTP/1.1\r\nHost: x\r\n\r\n')],
      ['/v1/webhooks/%zz/deliveries', 400, head('/v1/webhooks/%zz/deliveries')],
      ['a cut UTF-8 escape', 400, head(`/v1/webhooks/${UUID}/deliveries/%E0%A4%A`)],
      ['limit=abc', 400, head('/v1/vehicles?limit=abc')],
      ['limit=0&from=x', 400, head('/v1/vehicles?limit=0&from=x')],
      ['an unknown parameter', 400, head('/v1/vehicles?unknown=1')],
      ['a POST-only path', 405, head(`/v1/webhooks/${UUID}/test`)],
      ['/v1/fleet/summary', 200, head('/v1/fleet/summary')],
      ['/openapi.json', 200, head('/openapi.json')],
      // refused by Node's HTTP parser before the app: bytes outside ASCII in the URL, headers over the limit
      ['bytes outside ASCII', 400, head(Buffer.concat([Buffer.from('/v1/vehicles?q='), Buffer.from('Ñ‡Ø§', 'utf8')]))],
      ['an overlong header', 431, head('/v1/me', `X-Long: ${'a'.repeat(20_000)}\r\n`)],
    ];
    for (const [path, status, request] of heads) {
      const text = await rawExchange(
        api.url,
        Buffer.concat([request, Buffer.from('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')]),
      );
      const end = text.indexOf('\r\n\r\n') + 4;
      expect(text.slice(0, end), path).to.match(new RegExp(`^HTTP/1.1 ${status} `));
      const rest = text.slice(end);
      if (/\r\nconnection: close\r\n/i.test(text.slice(0, end)))
        expect(rest, `${path}: bytes after a HEAD answer`).to.equal('');
      else expect(rest.slice(0, 17), `${path}: bytes after a HEAD answer`).to.equal('HTTP/1.1 200 OK\r\n');
    }
    // and for a bare request line the parser refuses: no method to go by, so no body either
    expect((await rawExchange(api.url, Buffer.from('HEAD\r\n\r\n'))).split('\r\n\r\n')[1]).to.equal('');
  });

  it('GET /healthz and /readyz answer without a key', async () => {
    const health = await api.get('/healthz');
    expect(health.status).to.equal(200);
    expect(health.body).to.deep.equal({ status: 'ok' });
    const ready = await api.get('/readyz');
    expect(ready.status).to.equal(200);
    expect(ready.body).to.deep.equal({ status: 'ready' });
  });

  it('GET /readyz is 503 not_ready naming the database when it does not answer; /healthz stays 200', async () => {
    const db = createKnex('postgres://postgres:postgres@127.0.0.1:1/none');
    const app = await createApp({ db, logger: pino({ level: 'silent' }) });
    const server = await listen(app, 0, '127.0.0.1');
    try {
      const { port } = server.address() as AddressInfo;
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
      const body = await ready.json();
      expect(ready.status).to.equal(503);
      expect(validators.ErrorResponse(body)).to.equal(true);
      expect(body.error).to.include({ code: 'not_ready', reason: 'database' });
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).to.equal(200);
    } finally {
      server.close();
      await db.destroy();
    }
  });

  it('GET /readyz is 503 naming the schema when a migration is missing', async () => {
    const { db } = await testDatabase();
    // a migration this code has, removed from the record for the length of the test (in a transaction never committed)
    const trx = await db.transaction();
    try {
      await trx('knex_migrations').where('name', 'like', '%receivables_indexes').delete();
      const { readiness } = await import('../../src/observability/health.js');
      expect(await readiness(trx as never)).to.deep.include({ ready: false, check: 'schema' });
    } finally {
      await trx.rollback();
    }
  });
});
