import { expect } from 'chai';
import fc from 'fast-check';
import { testDatabase } from '../support/database.js';
import { startApi, type TestApi } from '../support/api.js';
import { expectDocumented, PUBLIC_API, type ApiResponse } from '../support/http.js';
import { loadOpenApiDocument } from '../../src/contract/document.js';
import { createApiKey } from '../../src/core/workspaces.js';
import { queueTestDelivery } from '../../src/core/webhooks/test-delivery.js';
import { dropTestWorkspaces, webhookWorkspace } from '../webhooks/support.js';
import { idOf, operator } from '../support/actors.js';

// Property: whatever request is built from the document's operations (any method, mangled path parameters,
// known and unknown query parameters with hostile values, odd headers and bodies), the answer is never a 5xx, and
// every answer with a body is the documented one (checked by expectDocumented: status declared, schema, content
// type, x-request-id). Bounded in runs and time so it stays a few seconds of the normal `npm test`.

const RUNS = 400;

const document = loadOpenApiDocument();
const operations = Object.entries(document.paths).flatMap(([template, item]) =>
  Object.entries(item).map(([method, op]) => ({
    method: method.toUpperCase(),
    template,
    query: ((op.parameters ?? []) as Array<{ in?: string; name?: string; $ref?: string }>)
      .map((p) =>
        p.$ref
          ? (document.components.parameters as Record<string, { in: string; name: string }>)[p.$ref.split('/').pop()!]
          : p,
      )
      .filter((p) => p.in === 'query')
      .map((p) => p.name!),
  })),
);

const printable = (max: number) => fc.stringMatching(new RegExp(`^[\\x20-\\x7e]{0,${max}}$`));
const hostile = fc.constantFrom(
  '%',
  '%zz',
  '%E0%A4%A',
  '%00',
  'a%00b',
  '%C0%AF',
  '%FF',
  '..',
  '%2F',
  '%25',
  '-1',
  '0',
  '1e3',
  '2.5',
  '[]',
  '{}',
  'null',
  'true',
  'x'.repeat(300),
);
/** A value as it appears in a URL: either a hostile raw fragment or any string, percent-encoded. */
const urlValue = fc.oneof(
  hostile,
  fc.string({ maxLength: 40 }).map(encodeURIComponent),
  fc.string({ unit: 'grapheme', maxLength: 10 }).map(encodeURIComponent),
  fc.uuid(),
);

describe('property: no input gets a 5xx, every answer is documented', () => {
  let api: TestApi;
  let key: string;
  let ids: string[];

  before(async () => {
    const { db } = await testDatabase();
    const ws = await webhookWorkspace(db);
    key = (await createApiKey(db, operator, { workspaceId: await idOf(db, ws.slug) })).key;
    const endpoint = await ws.endpoint({ url: 'https://hooks.example.ae/fleet' });
    const queued = await queueTestDelivery(db, {
      workspaceId: ws.id,
      endpointId: endpoint.id,
      idempotencyKey: 'seed',
      now: new Date('2026-11-22T08:00:00.000Z'),
    });
    ids = [endpoint.id, (queued as { deliveryId: string }).deliveryId];
    api = await startApi({ now: new Date('2026-11-22T08:00:00.000Z') });
  });
  after(async () => {
    await api.close();
    await dropTestWorkspaces((await testDatabase()).db);
  });

  // Every one of the runs is made (no time limit that could end it early on a slow machine and pass unseen).
  it(`holds for ${RUNS} generated requests over every operation`, async function () {
    this.timeout(180_000);
    let made = 0;
    const request = fc.record({
      operation: fc.constantFrom(...operations),
      method: fc.option(fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'), { freq: 3 }),
      pathValues: fc.array(fc.oneof(urlValue, fc.constantFrom('ENDPOINT', 'DELIVERY')), { minLength: 2, maxLength: 2 }),
      query: fc.array(fc.tuple(fc.oneof(fc.constant('KNOWN'), urlValue), urlValue), { maxLength: 4 }),
      auth: fc.oneof(
        fc.constant('valid'),
        fc.constant('none'),
        printable(60).map((s) => `Bearer ${s}`),
        printable(60),
      ),
      idempotencyKey: fc.option(printable(300)),
      contentEncoding: fc.option(fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'x-unknown')),
      contentType: fc.option(
        fc.constantFrom('application/json', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data'),
      ),
      body: fc.option(fc.oneof(fc.string({ maxLength: 200 }), fc.json())),
      knownPick: fc.nat(),
    });
    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        let n = 0;
        const path = r.operation.template.replace(/\{[^}]+\}/g, () => {
          const v = r.pathValues[n++ % 2];
          return v === 'ENDPOINT' ? ids[0] : v === 'DELIVERY' ? ids[1] : v;
        });
        const known = r.operation.query;
        const query = r.query
          .map(
            ([name, value]) =>
              `${name === 'KNOWN' ? (known[r.knownPick % Math.max(known.length, 1)] ?? 'limit') : name}=${value}`,
          )
          .join('&');
        const method = r.method ?? r.operation.method;
        const url = query ? `${path}?${query}` : path;
        const headers: Record<string, string> = {};
        if (r.auth === 'valid') headers.authorization = `Bearer ${key}`;
        else if (r.auth !== 'none') headers.authorization = r.auth;
        if (r.idempotencyKey !== null) headers['idempotency-key'] = r.idempotencyKey;
        if (r.contentEncoding !== null) headers['content-encoding'] = r.contentEncoding;
        if (r.contentType !== null) headers['content-type'] = r.contentType;
        const withBody = r.body !== null && !['GET', 'HEAD'].includes(method);
        const res = await fetch(api.url + url, {
          method,
          headers,
          body: withBody ? r.body! : undefined,
          redirect: 'manual',
        });
        made += 1;
        const text = await res.text();
        const label = `${method} ${url} ${JSON.stringify(headers).slice(0, 200)}`;
        expect(res.status, label).to.be.below(500);
        expect(res.headers.get('x-request-id'), label).to.be.a('string');
        if (method === 'HEAD' || res.status === 204) return;
        const response: ApiResponse = { status: res.status, headers: res.headers, text, body: JSON.parse(text) };
        expectDocumented(PUBLIC_API, method, url, response);
      }),
      { numRuns: RUNS },
    );
    expect(made, 'requests made').to.be.at.least(RUNS);
  });
});
