import { expect } from 'chai';
import { testDatabase } from '../support/database.js';
import { startApi, type TestApi } from '../support/api.js';
import { createApiKey, createWorkspace } from '../../src/workspaces.js';

describe('errors and parameter validation', () => {
  let api: TestApi;
  let key: string;

  before(async () => {
    const { db } = await testDatabase();
    await createWorkspace(db, { slug: 'errors-ws' });
    key = (await createApiKey(db, { workspaceSlug: 'errors-ws' })).key;
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
    expect(res.headers.get('allow')).to.equal('GET');
  });

  it('answers a malformed JSON body with the documented 400 body, no stack trace', async () => {
    const res = await api.request('POST', '/v1/webhooks/8d6f2c1e-4a3b-4c5d-8e9f-0a1b2c3d4e5f/test', {
      key,
      headers: { 'content-type': 'application/json', 'idempotency-key': 'k1' },
      body: '{"broken": ',
    });
    expect(res.status).to.equal(400);
    expect(res.body.error).to.include({ code: 'invalid_request', reason: 'body' });
    expect(res.text).not.to.match(/at .*\.(ts|js):\d+/);
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

  it('keeps a valid incoming x-request-id and makes one otherwise', async () => {
    const kept = await api.get('/v1/me', key, { 'x-request-id': 'trace-123' });
    expect(kept.headers.get('x-request-id')).to.equal('trace-123');
    const made = await api.get('/v1/me', key, { 'x-request-id': 'bad id with spaces' });
    expect(made.headers.get('x-request-id')).to.match(/^req_[\w-]{16}$/);
  });
});
