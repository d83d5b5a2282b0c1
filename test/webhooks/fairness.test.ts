import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from '../support/database.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { recordEvent } from '../../src/webhooks/record-event.js';
import { queueTestDelivery } from '../../src/core/webhooks/test-delivery.js';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';
import { defaultWorkspaceConcurrency } from '../../src/webhooks/fairness.js';
import { createApiKey, updateWorkspace } from '../../src/core/workspaces.js';
import type { DestinationPolicy } from '../../src/webhooks/destination-policy.js';
import { DEFAULT_DNS_DEADLINE_MS } from '../../src/webhooks/name-resolution.js';
import { startDnsServer } from '../support/dns-server.js';
import { startApi } from '../support/api.js';
import {
  bookingConfirmedData,
  dropTestWorkspaces,
  eventually,
  quietLogger,
  sleep,
  webhookWorkspace,
  type TestWorkspace,
} from './support.js';
import { workspaceConcurrencyFromEnv } from '../../src/config.js';
import { idOf, operator } from '../support/actors.js';

const DAY = 24 * 60 * 60 * 1000;

describe('webhooks: fairness between workspaces, frozen workspaces', () => {
  let db: Knex;
  let receiver: Receiver;
  /** Paths whose requests are never answered (until the attempt times out). */
  const dead = new Set<string>();

  before(async () => {
    ({ db } = await testDatabase());
    receiver = await startReceiver((request) => (dead.has(request.path) ? 'hang' : { status: 204 }));
  });
  beforeEach(() => {
    receiver.reset();
    dead.clear();
  });
  after(async () => {
    await receiver.close();
    await dropTestWorkspaces(db);
  });

  const publish = async (ws: TestWorkspace, count: number) => {
    for (let i = 0; i < count; i++)
      await recordEvent(db, {
        workspaceId: ws.id,
        event: 'booking.confirmed',
        data: bookingConfirmedData(),
        source: 'publish',
      });
  };
  const endpointOn = async (ws: TestWorkspace, options: { dead?: boolean } = {}) => {
    const url = receiver.endpointUrl();
    if (options.dead) dead.add(new URL(url).pathname);
    return { ...(await ws.endpoint({ url })), path: new URL(url).pathname };
  };

  it('gives a workspace a quarter of the slots by default; FRS_WEBHOOK_WORKSPACE_CONCURRENCY sets it', () => {
    expect(defaultWorkspaceConcurrency(64)).to.equal(16);
    expect(defaultWorkspaceConcurrency(16)).to.equal(4);
    expect(defaultWorkspaceConcurrency(2)).to.equal(1);
    expect(workspaceConcurrencyFromEnv(64, {})).to.equal(undefined);
    expect(workspaceConcurrencyFromEnv(64, { FRS_WEBHOOK_WORKSPACE_CONCURRENCY: '8' })).to.equal(8);
    for (const bad of ['0', '65', '2.5', 'many']) {
      expect(() => workspaceConcurrencyFromEnv(64, { FRS_WEBHOOK_WORKSPACE_CONCURRENCY: bad })).to.throw(
        `FRS_WEBHOOK_WORKSPACE_CONCURRENCY must be a whole number from 1 to 64, got "${bad}"`,
      );
    }
  });

  it("a workspace with 8 dead endpoints and a backlog holds only its share; another workspace's deliveries go straight through", async () => {
    const noisy = await webhookWorkspace(db);
    const quiet = await webhookWorkspace(db);
    const deadEndpoints = [];
    for (let i = 0; i < 8; i++) deadEndpoints.push(await endpointOn(noisy, { dead: true }));
    const healthy = await endpointOn(quiet);
    await publish(noisy, 10); // 80 deliveries to endpoints that never answer, queued first
    await publish(quiet, 5);
    // 16 slots, 8 per endpoint: without a workspace share the noisy workspace's 8 x 8 would take all 16.
    const dispatcher = new Dispatcher({
      db,
      logger: quietLogger(),
      workspaceIds: [noisy.id, quiet.id],
      concurrency: 16,
      attemptTimeoutMs: 3000,
      leaseMs: 6000,
    });
    await dispatcher.start();
    try {
      await eventually(async () => dispatcher.totals.accepted === 5, 2500, "the quiet workspace's 5 deliveries");
      // (The noisy workspace's first claims may still be on their way to the receiver.)
      await eventually(
        async () => receiver.requests.filter((r) => dead.has(r.path)).length >= 4,
        2500,
        "the noisy workspace's share",
      );
      // Accepted while every attempt of the noisy workspace is still hanging: none of them has finished yet.
      expect(dispatcher.totals).to.deep.equal({ attempted: 5, accepted: 5, retrying: 0, failed: 0 });
      const noisyRequests = receiver.requests.filter((r) => dead.has(r.path));
      // Its share: 4 of 16 slots, spread over 4 different endpoints (round-robin across its endpoints).
      expect(noisyRequests).to.have.length(4);
      expect(new Set(noisyRequests.map((r) => r.path)).size).to.equal(4);
      expect(receiver.requests.filter((r) => r.path === healthy.path)).to.have.length(5);
      const quietRows = await db('deliveries').where({ workspace_id: quiet.id });
      expect(quietRows.map((r) => r.status)).to.deep.equal(Array(5).fill('accepted'));
      const pendingNoisy = await db('deliveries')
        .where({ workspace_id: noisy.id, status: 'queued' })
        .count({ n: '*' })
        .first();
      expect(Number(pendingNoisy!.n)).to.equal(80);
    } finally {
      await dispatcher.stop();
    }
  });

  it("a workspace whose endpoint's name never resolves, with 8 attempts in flight, does not delay another's delivery by 1 s", async () => {
    // A name server of the test's own: healthy.test is 127.0.0.1 (the receiver), stuck.test never gets an answer.
    const names = await startDnsServer({
      records: { 'healthy.test': { addresses: ['127.0.0.1'], ttl: 60 } },
      silent: ['stuck.test'],
    });
    const stuckWs = await webhookWorkspace(db);
    const healthyWs = await webhookWorkspace(db);
    const port = new URL(receiver.url).port;
    const stuck = await stuckWs.endpoint({ url: `http://stuck.test:${port}/hooks/stuck` });
    const healthy = await healthyWs.endpoint({ url: `http://healthy.test:${port}/hooks/healthy` });
    // Private destinations allowed (the receiver is on 127.0.0.1); names asked of the test's server, default deadline.
    const policy: DestinationPolicy = { allowPrivate: true, allowedCidrs: [], dns: { servers: [names.address] } };
    // The default limits and attempt time-out (8 per endpoint, 16 per workspace, 10 s).
    const dispatcher = new Dispatcher({
      db,
      logger: quietLogger(),
      workspaceIds: [stuckWs.id, healthyWs.id],
      destinationPolicy: policy,
    });
    await publish(stuckWs, 8);
    await dispatcher.start();
    try {
      // All 8 in flight, waiting on the name: the lookup reached the server, and nothing has finished.
      await eventually(async () => names.queriesOf('stuck.test').length > 0, 2000, 'the lookup of stuck.test');
      await sleep(100);
      expect(
        await db('deliveries').where({ endpoint_id: stuck.id }).whereNotNull('lease_owner').count({ n: '*' }).first(),
      ).to.deep.equal({ n: 8 });
      expect(dispatcher.totals.attempted).to.equal(0);

      const queuedAt = Date.now();
      await publish(healthyWs, 1);
      await receiver.waitForRequests(1, 5000);
      const delayMs = receiver.requests[0].receivedAt - queuedAt;
      console.log(`      (healthy workspace's delivery received ${delayMs} ms after it was queued)`);
      expect(receiver.requests[0].path).to.equal('/hooks/healthy');
      expect(delayMs).to.be.below(1000);

      // The stuck attempts end at the lookup's deadline (not the attempt's 10 s), as dns, in one flight of queries.
      // (The upper bounds leave seconds of slack for a busy machine and still fall short of the attempt's 10 s.)
      await eventually(async () => dispatcher.totals.attempted === 9, 10_000, 'the stuck attempts');
      const attempts = await db('delivery_attempts').where({ endpoint_id: stuck.id }).orderBy('id');
      const durations = attempts.map((a) => a.duration_ms);
      console.log(`      (stuck attempts took ${Math.min(...durations)} to ${Math.max(...durations)} ms)`);
      expect(attempts).to.have.length(8);
      for (const a of attempts) {
        expect(a).to.include({
          number: 1,
          status_code: null,
          error_kind: 'dns',
          error: `ETIMEOUT: stuck.test did not resolve within ${DEFAULT_DNS_DEADLINE_MS} ms`,
          response_body: null,
        });
        expect(a.duration_ms).to.be.within(DEFAULT_DNS_DEADLINE_MS - 10, DEFAULT_DNS_DEADLINE_MS + 4000);
      }
      expect(names.queriesOf('stuck.test').length).to.be.within(2, 4);
      expect(await db('deliveries').where({ endpoint_id: healthy.id }).first('status')).to.deep.equal({
        status: 'accepted',
      });
      expect(receiver.requests).to.have.length(1);
    } finally {
      await dispatcher.stop();
      await names.close();
    }
    // The delivery log shows the kind as the document describes it (every response is validated against it).
    const api = await startApi();
    try {
      const { key } = await createApiKey(db, operator, { workspaceId: await idOf(db, stuckWs.slug) });
      const [row] = await db('deliveries').where({ endpoint_id: stuck.id }).limit(1);
      const detail = await api.get(`/v1/webhooks/${stuck.id}/deliveries/${row.id}`, key);
      expect(detail.status).to.equal(200);
      expect(detail.body).to.include({ status: 'retrying', lastErrorKind: 'dns', lastStatusCode: null });
      expect(detail.body.attempts[0]).to.include({
        number: 1,
        errorKind: 'dns',
        statusCode: null,
        error: `ETIMEOUT: stuck.test did not resolve within ${DEFAULT_DNS_DEADLINE_MS} ms`,
      });
    } finally {
      await api.close();
    }
  });

  it('claims round-robin across workspaces rather than oldest first', async () => {
    const first = await webhookWorkspace(db);
    const second = await webhookWorkspace(db);
    const firstEndpoint = await endpointOn(first, { dead: true });
    const secondEndpoint = await endpointOn(second, { dead: true });
    await publish(first, 6);
    await publish(second, 6);
    // 4 slots, 4 per workspace allowed: oldest-first would give all 4 to the first workspace.
    const dispatcher = new Dispatcher({
      db,
      logger: quietLogger(),
      workspaceIds: [first.id, second.id],
      concurrency: 4,
      perWorkspaceConcurrency: 4,
      attemptTimeoutMs: 3000,
      leaseMs: 6000,
    });
    await dispatcher.start();
    try {
      await receiver.waitForRequests(4, 2500);
      await sleep(200);
      // In flight: 2 and 2.
      expect(receiver.requests.filter((r) => r.path === firstEndpoint.path)).to.have.length(2);
      expect(receiver.requests.filter((r) => r.path === secondEndpoint.path)).to.have.length(2);
      // Leased: those, and as many claimed ahead (twice the slots), round-robin too: 4 and 4, not 6 and 2.
      const leased = await db('deliveries')
        .whereIn('workspace_id', [first.id, second.id])
        .whereNotNull('lease_owner')
        .select('workspace_id');
      expect(leased.filter((r) => r.workspace_id === first.id)).to.have.length(4);
      expect(leased.filter((r) => r.workspace_id === second.id)).to.have.length(4);
    } finally {
      await dispatcher.stop();
    }
  });

  it('a frozen workspace sends nothing, test deliveries included; events are still recorded; set active, it sends', async () => {
    const ws = await webhookWorkspace(db);
    const endpoint = await endpointOn(ws);
    await updateWorkspace(db, operator, {
      workspaceId: await idOf(db, ws.slug),
      changes: { status: 'frozen' },
      now: new Date(),
    });
    await publish(ws, 2);
    await queueTestDelivery(db, {
      workspaceId: ws.id,
      endpointId: endpoint.id,
      idempotencyKey: 'frozen-test',
      now: new Date(),
    });
    expect(await db('events').where({ workspace_id: ws.id }).count({ n: '*' }).first()).to.deep.equal({ n: 3 });
    // The sweep's clock: a day after the last delivery was queued (by the database clock), so all are due.
    const { max } = (await db('deliveries').where({ workspace_id: ws.id }).max('created_at').first())!;
    const sweepAt = new Date(max.getTime() + DAY);
    const dispatcher = ws.dispatcher();
    expect(await dispatcher.runOnce(sweepAt)).to.deep.equal({ attempted: 0, accepted: 0, retrying: 0, failed: 0 });
    expect(receiver.requests).to.deep.equal([]);
    expect((await db('deliveries').where({ workspace_id: ws.id })).map((r) => r.status)).to.deep.equal([
      'queued',
      'queued',
      'queued',
    ]);

    // 6 days 23 hours after the oldest was queued: under the 7-day rule, so everything is sent.
    const { min } = (await db('deliveries').where({ workspace_id: ws.id }).min('created_at').first())!;
    await updateWorkspace(db, operator, {
      workspaceId: await idOf(db, ws.slug),
      changes: { status: 'active' },
      now: new Date(min.getTime() + 7 * DAY - 3_600_000),
    });
    expect(await dispatcher.runOnce(sweepAt)).to.deep.equal({ attempted: 3, accepted: 3, retrying: 0, failed: 0 });
    expect(receiver.requests.map((r) => r.event).sort()).to.deep.equal([
      'booking.confirmed',
      'booking.confirmed',
      'webhook.test',
    ]);
  });

  it('set active after more than 7 days, what waited is marked failed instead of sent', async () => {
    const ws = await webhookWorkspace(db);
    await endpointOn(ws);
    await updateWorkspace(db, operator, {
      workspaceId: await idOf(db, ws.slug),
      changes: { status: 'frozen' },
      now: new Date(),
    });
    await publish(ws, 1);
    const [row] = await db('deliveries').where({ workspace_id: ws.id });
    // Created (database clock) now; set active 7 days and a minute later by the clock passed in.
    const later = new Date(row.created_at.getTime() + 7 * DAY + 60_000);
    await updateWorkspace(db, operator, {
      workspaceId: await idOf(db, ws.slug),
      changes: { status: 'active' },
      now: later,
    });
    const after = await db('deliveries').where({ id: row.id }).first();
    expect(after).to.include({
      status: 'failed',
      next_attempt_at: null,
      attempts: 0,
      last_error: 'waited longer than 7 days while the workspace was frozen',
    });
    expect(await ws.dispatcher().runOnce(later)).to.deep.equal({ attempted: 0, accepted: 0, retrying: 0, failed: 0 });
    expect(receiver.requests).to.deep.equal([]);
  });
});
