import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from '../support/database.js';
import { startApi, type TestApi } from '../support/api.js';
import { createApiKey } from '../../src/core/workspaces.js';
import { IDEMPOTENCY_WINDOW_MS } from '../../src/webhooks/retention.js';
import {
  MAX_PENDING_TESTS_PER_ENDPOINT,
  MAX_TEST_CALLS_PER_MINUTE,
  TEST_MESSAGE,
} from '../../src/core/webhooks/test-delivery.js';
import { dropTestWorkspaces, webhookWorkspace, type TestEndpoint, type TestWorkspace } from './support.js';
import { validators } from '../../src/contract/validators.js';
import { idOf, operator } from '../support/actors.js';

describe('webhooks: POST /v1/webhooks/{id}/test', () => {
  let db: Knex;
  let api: TestApi;
  let now: Date;
  let ws: TestWorkspace;
  let key: string;
  let endpoint: TestEndpoint;
  let n = 0;

  before(async () => {
    ({ db } = await testDatabase());
    now = new Date('2026-11-22T08:30:00.000Z');
    api = await startApi({ now: () => now });
  });
  beforeEach(async () => {
    ws = await webhookWorkspace(db);
    key = (await createApiKey(db, operator, { workspaceId: await idOf(db, ws.slug) })).key;
    endpoint = await ws.endpoint({ url: 'https://hooks.example.ae/fleet', events: ['invoice.issued'] });
  });
  after(async () => {
    await api.close();
    await dropTestWorkspaces(db);
  });

  const send = (endpointId: string, idempotencyKey = `key-${++n}`, apiKey = key) =>
    api.request('POST', `/v1/webhooks/${endpointId}/test`, {
      key: apiKey,
      headers: { 'idempotency-key': idempotencyKey },
    });
  const deliveries = () => db('deliveries').where({ workspace_id: ws.id });

  it('queues a webhook.test delivery to that endpoint only, whatever its event list, and answers 202 {deliveryId}', async () => {
    await ws.endpoint({ url: 'https://other.example/hook' });
    const res = await send(endpoint.id);
    expect(res.status).to.equal(202);
    expect(Object.keys(res.body)).to.deep.equal(['deliveryId']);
    const rows = await deliveries();
    expect(rows).to.have.length(1);
    expect(rows[0]).to.include({
      id: res.body.deliveryId,
      endpoint_id: endpoint.id,
      event: 'webhook.test',
      status: 'queued',
      attempts: 0,
    });
    const body = JSON.parse(rows[0].body);
    expect(validators.WebhookTestEvent(body), JSON.stringify(validators.WebhookTestEvent.errors)).to.equal(true);
    expect(body).to.include({ id: res.body.deliveryId, event: 'webhook.test' });
    expect(body.data).to.deep.equal({ endpointId: endpoint.id, message: TEST_MESSAGE });
    expect((await db('events').where({ workspace_id: ws.id }).first()).source).to.equal('test');
  });

  it('queues a test for a switched-off endpoint too', async () => {
    const off = await ws.endpoint({ url: 'https://off.example/hook', active: false });
    const res = await send(off.id);
    expect(res.status).to.equal(202);
    expect(await deliveries()).to.have.length(1);
    expect((await deliveries())[0]).to.include({ endpoint_id: off.id, status: 'queued' });
  });

  it('answers 404 not_found for an unknown endpoint and for one of another workspace, queuing nothing', async () => {
    const other = await webhookWorkspace(db);
    const foreign = await other.endpoint({ url: 'https://foreign.example/hook' });
    for (const id of ['8d6f2c1e-4a3b-4c5d-8e9f-0a1b2c3d4e5f', foreign.id]) {
      const res = await send(id);
      expect(res.status, id).to.equal(404);
      expect(res.body.error.code).to.equal('not_found');
    }
    expect(await db('deliveries').whereIn('workspace_id', [ws.id, other.id])).to.deep.equal([]);
  });

  it('replays the same key for the same endpoint within 24 hours: the first deliveryId, nothing new queued', async () => {
    const first = await send(endpoint.id, 'retry-me');
    now = new Date(now.getTime() + IDEMPOTENCY_WINDOW_MS - 1000);
    const again = await send(endpoint.id, 'retry-me');
    expect(again.status).to.equal(202);
    expect(again.body).to.deep.equal(first.body);
    expect(await deliveries()).to.have.length(1);
  });

  it('answers 409 idempotency_key_reused for the same key on another endpoint', async () => {
    const second = await ws.endpoint({ url: 'https://second.example/hook' });
    expect((await send(endpoint.id, 'shared')).status).to.equal(202);
    const res = await send(second.id, 'shared');
    expect(res.status).to.equal(409);
    expect(res.body.error).to.include({ code: 'idempotency_key_reused', reason: 'Idempotency-Key' });
    expect(await deliveries()).to.have.length(1);
  });

  it('lets a key be used again after 24 hours', async () => {
    const second = await ws.endpoint({ url: 'https://second.example/hook' });
    const first = await send(endpoint.id, 'daily');
    now = new Date(now.getTime() + IDEMPOTENCY_WINDOW_MS + 1000);
    const same = await send(endpoint.id, 'daily');
    expect(same.status).to.equal(202);
    expect(same.body.deliveryId).not.to.equal(first.body.deliveryId);
    now = new Date(now.getTime() + IDEMPOTENCY_WINDOW_MS + 1000);
    expect((await send(second.id, 'daily')).status).to.equal(202);
    expect(await deliveries()).to.have.length(3);
  });

  it('keeps keys per workspace', async () => {
    const other = await webhookWorkspace(db);
    const otherKey = (await createApiKey(db, operator, { workspaceId: await idOf(db, other.slug) })).key;
    const otherEndpoint = await other.endpoint({ url: 'https://foreign.example/hook' });
    const mine = await send(endpoint.id, 'same-key');
    const theirs = await send(otherEndpoint.id, 'same-key', otherKey);
    expect([mine.status, theirs.status]).to.deep.equal([202, 202]);
    expect(mine.body.deliveryId).not.to.equal(theirs.body.deliveryId);
  });

  it('queues one delivery for concurrent requests with one key', async () => {
    const responses = await Promise.all(Array.from({ length: 6 }, () => send(endpoint.id, 'raced')));
    expect(responses.map((r) => r.status)).to.deep.equal(Array(6).fill(202));
    expect(new Set(responses.map((r) => r.body.deliveryId)).size).to.equal(1);
    expect(await deliveries()).to.have.length(1);
  });

  describe('limits', () => {
    const expectRateLimited = (res: Awaited<ReturnType<typeof send>>, retryAfter: string, message: string) => {
      expect(res.status).to.equal(429);
      expect(res.headers.get('retry-after')).to.equal(retryAfter);
      expect(res.body.error).to.deep.include({ code: 'rate_limited', message });
      expect(res.body.error).not.to.have.property('reason');
    };

    it('allows 5 test deliveries pending per endpoint; the 6th answers 429 with Retry-After and queues nothing', async () => {
      expect(MAX_PENDING_TESTS_PER_ENDPOINT).to.equal(5);
      for (let i = 0; i < 5; i++) expect((await send(endpoint.id)).status).to.equal(202);
      // As if each had failed once and were retried 90 s and more from the API's clock.
      const rows = await deliveries().orderBy('id');
      for (const [i, row] of rows.entries()) {
        await db('deliveries')
          .where({ id: row.id })
          .update({ status: 'retrying', attempts: 1, next_attempt_at: new Date(now.getTime() + 90_000 + i * 1000) });
      }
      const refused = await send(endpoint.id, 'sixth');
      expectRateLimited(
        refused,
        '90',
        'This endpoint already has 5 test deliveries pending; try again when one has finished.',
      );
      expect(await deliveries()).to.have.length(5);
      expect(await db('test_idempotency_keys').where({ workspace_id: ws.id, key: 'sixth' })).to.deep.equal([]);
      // The limit is per endpoint; and once one of the five has finished, the first endpoint takes one more.
      const other = await ws.endpoint({ url: 'https://other.example/hook' });
      expect((await send(other.id)).status).to.equal(202);
      await db('deliveries')
        .where({ id: rows[0].id })
        .update({ status: 'accepted', next_attempt_at: null, finished_at: now });
      expect((await send(endpoint.id, 'sixth')).status).to.equal(202);
      expect(await deliveries()).to.have.length(7);
    });

    it('allows 60 queued test calls a minute per workspace; the 61st answers 429 until the oldest leaves the minute; replays still answer 202', async () => {
      expect(MAX_TEST_CALLS_PER_MINUTE).to.equal(60);
      const started = now.getTime();
      const targets = [endpoint];
      for (let i = 0; i < 12; i++) targets.push(await ws.endpoint({ url: `https://hooks${i}.example.ae/fleet` }));
      const first = await send(targets[0].id, 'call-0');
      for (let i = 1; i < 60; i++) {
        now = new Date(started + i * 500); // 60 calls from 0 s to 29.5 s, 5 per endpoint
        expect((await send(targets[Math.floor(i / 5)].id, `call-${i}`)).status, `call ${i}`).to.equal(202);
      }
      // At 29.5 s: the oldest call (0 s) leaves the window at 60 s, 30.5 s from now.
      expectRateLimited(
        await send(targets[12].id, 'call-60'),
        '31',
        'At most 60 test deliveries a minute per workspace; try again later.',
      );
      expect(await deliveries()).to.have.length(60);
      // A repeat of an earlier key is answered as before and does not count.
      const replay = await send(targets[0].id, 'call-0');
      expect(replay.status).to.equal(202);
      expect(replay.body).to.deep.equal(first.body);
      // Another workspace has its own minute.
      const other = await webhookWorkspace(db);
      const otherKey = (await createApiKey(db, operator, { workspaceId: await idOf(db, other.slug) })).key;
      expect(
        (await send((await other.endpoint({ url: 'https://foreign.example/hook' })).id, 'x', otherKey)).status,
      ).to.equal(202);
      now = new Date(started + 59_999);
      expect((await send(targets[12].id, 'call-60')).status).to.equal(429);
      now = new Date(started + 60_000);
      expect((await send(targets[12].id, 'call-60')).status).to.equal(202);
      expect(await deliveries()).to.have.length(61);
    });
  });
});
