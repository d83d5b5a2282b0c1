import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from '../support/database.js';
import { proxiedTestDatabase } from '../support/tcp-proxy.js';
import { startReceiver, type Receiver, type Reply } from '../support/receiver.js';
import { updateWorkspace } from '../../src/core/workspaces.js';
import { InputError } from '../../src/errors.js';
import { setEndpointActive } from '../../src/core/webhooks/endpoints.js';
import { recordEvent } from '../../src/webhooks/record-event.js';
import { queueTestDelivery } from '../../src/core/webhooks/test-delivery.js';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';
import { summariseStreaks } from '../../src/webhooks/attempt-records.js';
import { listDeliveries } from '../../src/core/webhooks/deliveries.js';
import { releaseHeldDeliveries } from '../../src/webhooks/endpoint-lifecycle.js';
import knexFactory from 'knex';
import { RETRY_DELAYS_MS } from '../../src/webhooks/retry-schedule.js';
import {
  bookingConfirmedData,
  delivery,
  examplePayload,
  quietLogger,
  dropTestWorkspaces,
  endpointRow,
  eventually,
  sleep,
  webhookWorkspace,
  type TestWorkspace,
} from './support.js';
import { idOf, operator } from '../support/actors.js';

const DAY = 24 * 60 * 60 * 1000;

describe('webhooks: the dispatcher', () => {
  let db: Knex;
  let ws: TestWorkspace;
  let receiver: Receiver;
  /** What the receiver answers; tests change it. */
  let answer: (path: string) => Reply;

  before(async () => {
    ({ db } = await testDatabase());
    receiver = await startReceiver((request) => answer(request.path));
  });
  beforeEach(async () => {
    ws = await webhookWorkspace(db);
    answer = () => ({ status: 204 });
    receiver.reset();
  });
  after(async () => {
    await receiver.close();
    await dropTestWorkspaces(db);
  });

  const publish = async (count = 1) => {
    const ids: string[] = [];
    for (let i = 0; i < count; i++)
      ids.push(
        (
          await recordEvent(db, {
            workspaceId: ws.id,
            event: 'booking.confirmed',
            data: bookingConfirmedData(),
            source: 'publish',
          })
        ).eventId,
      );
    return ids;
  };
  const deliveriesOf = (endpointId: string) =>
    db('deliveries').where({ endpoint_id: endpointId }).orderBy('created_at');
  const receiverEndpoint = async (options: { events?: string[]; active?: boolean } = {}) => {
    const url = receiver.endpointUrl();
    const endpoint = await ws.endpoint({ url, ...options });
    receiver.setSecret(url, endpoint.secret);
    return { ...endpoint, path: new URL(url).pathname };
  };

  it('delivers to a real receiver: exact body bytes, headers, a signature that verifies, everything recorded', async () => {
    const all = await receiverEndpoint();
    const filtered = await receiverEndpoint({ events: ['payment.captured'] });
    await publish(3);
    const counts = await ws.dispatcher().runOnce();
    expect(counts).to.deep.equal({ attempted: 3, accepted: 3, retrying: 0, failed: 0 });
    expect(receiver.requests).to.have.length(3);
    const rows = await deliveriesOf(all.id);
    expect(await deliveriesOf(filtered.id)).to.deep.equal([]);
    for (const row of rows) {
      const request = receiver.requests.find((r) => r.deliveryId === row.id)!;
      expect(request.verified).to.deep.equal({ ok: true });
      expect(request.rawBody.toString('utf8')).to.equal(row.body);
      expect(request).to.include({ contentType: 'application/json', event: 'booking.confirmed', path: all.path });
      expect(request.body.id).to.equal(row.id);
      expect(row).to.include({
        status: 'accepted',
        attempts: 1,
        last_status_code: 204,
        last_error: null,
        next_attempt_at: null,
        lease_owner: null,
      });
      expect(row.finished_at).to.be.an.instanceOf(Date);
      const attempts = await db('delivery_attempts').where({ delivery_id: row.id });
      expect(attempts).to.have.length(1);
      expect(attempts[0]).to.include({
        number: 1,
        status_code: 204,
        error_kind: null,
        error: null,
        response_body: '',
        endpoint_id: all.id,
      });
      expect(attempts[0].duration_ms).to.be.a('number').and.at.least(0);
    }
    const endpoint = await endpointRow(db, all.id);
    expect(endpoint).to.include({ consecutive_failures: 0, is_active: true });
    expect(endpoint.last_success_at).to.be.an.instanceOf(Date);
  });

  it("walks the whole retry schedule by the sweep's clock: 9 attempts, then failed, then nothing more", async () => {
    const endpoint = await receiverEndpoint();
    answer = () => ({ status: 500, body: 'down for maintenance' });
    const [eventId] = await publish();
    const { id } = await db('deliveries').where({ event_id: eventId }).first('id');
    const dispatcher = ws.dispatcher();
    let now = new Date();
    expect(await dispatcher.runOnce(now)).to.deep.equal({ attempted: 1, accepted: 0, retrying: 1, failed: 0 });
    for (const [i, delay] of RETRY_DELAYS_MS.entries()) {
      const due = new Date(now.getTime() + delay);
      const row = await delivery(db, id);
      expect(row.next_attempt_at.getTime(), `retry ${i + 1} scheduled`).to.equal(due.getTime());
      expect(row).to.include({ status: 'retrying', attempts: i + 1, last_status_code: 500 });
      expect(
        (await dispatcher.runOnce(new Date(due.getTime() - 1))).attempted,
        `retry ${i + 1} not before it is due`,
      ).to.equal(0);
      now = due;
      const last = i === RETRY_DELAYS_MS.length - 1;
      expect(await dispatcher.runOnce(now)).to.deep.equal({
        attempted: 1,
        accepted: 0,
        retrying: last ? 0 : 1,
        failed: last ? 1 : 0,
      });
    }
    const row = await delivery(db, id);
    expect(row).to.include({
      status: 'failed',
      attempts: 9,
      next_attempt_at: null,
      last_status_code: 500,
      last_error: 'HTTP 500',
    });
    expect((await dispatcher.runOnce(new Date(now.getTime() + 30 * DAY))).attempted).to.equal(0);
    const attempts = await db('delivery_attempts').where({ delivery_id: id }).orderBy('number');
    expect(attempts.map((a) => a.number)).to.deep.equal([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    for (const a of attempts)
      expect(a).to.include({ status_code: 500, error_kind: 'status', response_body: 'down for maintenance' });
    // Nine requests with the same id and the same bytes, each signed.
    expect(receiver.requests).to.have.length(9);
    expect(new Set(receiver.requests.map((r) => r.rawBody.toString())).size).to.equal(1);
    expect(receiver.requests.every((r) => r.deliveryId === id && r.verified?.ok)).to.equal(true);
    expect((await endpointRow(db, endpoint.id)).consecutive_failures).to.equal(9);
  });

  it('records time-outs and refused connections as failures to retry', async () => {
    const slow = await receiverEndpoint();
    answer = () => 'hang';
    const closed = await ws.endpoint({ url: 'http://127.0.0.1:1/hook' });
    await publish();
    const counts = await ws.dispatcher({ attemptTimeoutMs: 200, leaseMs: 5000 }).runOnce();
    expect(counts).to.deep.equal({ attempted: 2, accepted: 0, retrying: 2, failed: 0 });
    const [timedOut] = await deliveriesOf(slow.id);
    const [refused] = await deliveriesOf(closed.id);
    expect(timedOut).to.include({
      status: 'retrying',
      last_status_code: null,
      last_error: 'no complete answer within 200 ms',
    });
    expect(refused.status).to.equal('retrying');
    expect(refused.last_error).to.include('ECONNREFUSED');
    expect((await db('delivery_attempts').where({ delivery_id: timedOut.id }).first()).error_kind).to.equal('timeout');
    expect((await db('delivery_attempts').where({ delivery_id: refused.id }).first()).error_kind).to.equal(
      'connection',
    );
  });

  it('switches an endpoint off at exactly the 20th failure in a row and holds what is pending', async () => {
    const endpoint = await receiverEndpoint();
    // (a 500: a 503 would throttle the endpoint, test/webhooks/etiquette.test.ts)
    answer = () => ({ status: 500 });
    await publish(19);
    const now = new Date();
    expect(await ws.dispatcher().runOnce(now)).to.include({ attempted: 19, retrying: 19 });
    expect(await endpointRow(db, endpoint.id)).to.include({
      consecutive_failures: 19,
      is_active: true,
      disabled_at: null,
    });

    await publish(2);
    // One at a time, so the 21st delivery is not already in flight when the 20th failure switches the endpoint off.
    expect(await ws.dispatcher({ concurrency: 1 }).runOnce(new Date())).to.include({ attempted: 1, retrying: 1 });
    const off = await endpointRow(db, endpoint.id);
    expect(off).to.include({ consecutive_failures: 20, is_active: false, disabled_reason: 'failures' });
    expect(off.disabled_at).to.be.an.instanceOf(Date);
    const rows = await deliveriesOf(endpoint.id);
    expect(rows).to.have.length(21);
    expect(rows.every((r) => r.status === 'held' && r.next_attempt_at === null)).to.equal(true);
    // The 21st had been claimed ahead (a dispatcher leases up to twice its slots): not sent, its lease given back.
    expect(rows.every((r) => r.lease_owner === null && r.lease_until === null)).to.equal(true);

    // Held: nothing is sent, however late it gets; new events are recorded held.
    expect((await ws.dispatcher().runOnce(new Date(now.getTime() + 3 * DAY))).attempted).to.equal(0);
    await publish();
    expect((await deliveriesOf(endpoint.id)).map((r) => r.status)).to.deep.equal(Array(22).fill('held'));
    expect(receiver.requests).to.have.length(20);
  });

  it('still sends a test delivery to a switched-off endpoint, without switching it back on', async () => {
    const endpoint = await receiverEndpoint({ active: false });
    await db('webhook_endpoints').where({ id: endpoint.id }).update({ consecutive_failures: 20 });
    await publish();
    const { deliveryId } = (await queueTestDelivery(db, {
      workspaceId: ws.id,
      endpointId: endpoint.id,
      idempotencyKey: 'k',
      now: new Date(),
    })) as { deliveryId: string };
    expect(await ws.dispatcher().runOnce()).to.deep.equal({ attempted: 1, accepted: 1, retrying: 0, failed: 0 });
    expect(receiver.requests.map((r) => r.deliveryId)).to.deep.equal([deliveryId]);
    expect(receiver.requests[0]).to.include({ event: 'webhook.test' });
    expect(receiver.requests[0].body.data).to.deep.equal({
      endpointId: endpoint.id,
      message: 'This is a test delivery from Fleet Rental Service.',
    });
    const row = await endpointRow(db, endpoint.id);
    expect(row).to.include({ is_active: false, consecutive_failures: 0 });
    expect(row.last_success_at).to.be.an.instanceOf(Date);
    expect((await deliveriesOf(endpoint.id)).map((r) => r.status).sort()).to.deep.equal(['accepted', 'held']);
  });

  it('summarises a batch of outcomes per endpoint in the order they finished', () => {
    const at = new Date('2026-11-22T08:00:00.000Z');
    const outcome = (endpointId: string, ok: boolean, ms = 0) => ({
      claim: { endpointId },
      outcome: { ok, startedAt: at, durationMs: ms },
    });
    const summary = summariseStreaks([
      outcome('b', false),
      outcome('a', false),
      outcome('a', false),
      outcome('a', true, 5),
      outcome('a', false),
      outcome('a', false),
      outcome('a', false),
      outcome('a', true, 9),
      outcome('a', false),
    ]);
    expect(summary).to.deep.equal([
      {
        endpointId: 'a',
        successes: 2,
        leading: 2,
        trailing: 1,
        longestAfterSuccess: 3,
        lastSuccessAt: '2026-11-22T08:00:00.009Z',
      },
      { endpointId: 'b', successes: 0, leading: 1, trailing: 1, longestAfterSuccess: 0, lastSuccessAt: null },
    ]);
  });

  it('resets the failure streak on a success, and counts failures in a row across deliveries', async () => {
    const endpoint = await receiverEndpoint();
    answer = () => ({ status: 500 });
    await publish(19);
    const dispatcher = ws.dispatcher();
    await dispatcher.runOnce();
    expect((await endpointRow(db, endpoint.id)).consecutive_failures).to.equal(19);
    answer = () => ({ status: 200 });
    await publish();
    expect(await dispatcher.runOnce()).to.include({ attempted: 1, accepted: 1 });
    const reset = await endpointRow(db, endpoint.id);
    expect(reset).to.include({ consecutive_failures: 0, is_active: true });
    expect(reset.last_success_at).to.be.an.instanceOf(Date);
    answer = () => ({ status: 500 });
    await publish(2);
    await dispatcher.runOnce();
    expect((await endpointRow(db, endpoint.id)).consecutive_failures).to.equal(2);
  });

  it('sends what was held when the endpoint is switched back on; held over 7 days becomes failed', async () => {
    const endpoint = await receiverEndpoint({ active: false });
    await publish(3);
    const rows = await deliveriesOf(endpoint.id);
    const now = new Date();
    await db('deliveries')
      .where({ id: rows[0].id })
      .update({ created_at: new Date(now.getTime() - 7 * DAY - 1000) });
    // The operator's switch (fleet-admin endpoint enable) releases what was held.
    await setEndpointActive(db, operator, { endpointId: endpoint.id, workspaceId: 'every', active: true, now });
    const released = await db('deliveries')
      .whereIn(
        'id',
        rows.map((r) => r.id),
      )
      .orderBy('created_at');
    expect(released.map((r) => r.status)).to.deep.equal(['failed', 'queued', 'queued']);
    expect(released[0]).to.include({
      next_attempt_at: null,
      last_error: 'held longer than 7 days while the endpoint was switched off',
    });
    expect(released[1].next_attempt_at.getTime()).to.equal(now.getTime());
    expect(await ws.dispatcher().runOnce(new Date(now.getTime() + 1000))).to.include({ attempted: 2, accepted: 2 });
    expect(receiver.requests.map((r) => r.deliveryId)).to.have.members([rows[1].id, rows[2].id]);
  });

  it('releaseHeldDeliveries counts what it queued and what it failed', async () => {
    const endpoint = await receiverEndpoint({ active: false });
    await publish(2);
    const [old] = await deliveriesOf(endpoint.id);
    const now = new Date();
    await db('deliveries')
      .where({ id: old.id })
      .update({ created_at: new Date(now.getTime() - 8 * DAY) });
    expect(await releaseHeldDeliveries(db, endpoint.id, now)).to.deep.equal({ queued: 1, failed: 1 });
    expect(await releaseHeldDeliveries(db, endpoint.id, now)).to.deep.equal({ queued: 0, failed: 0 });
  });

  it("lists an endpoint's deliveries newest first", async () => {
    const endpoint = await receiverEndpoint();
    answer = () => ({ status: 500 });
    await publish();
    await ws.dispatcher().runOnce();
    await publish();
    const { rows } = await listDeliveries(db, operator, { endpointId: endpoint.id, workspaceId: 'every' });
    expect(rows).to.have.length(2);
    expect(rows[0]).to.include({ event: 'booking.confirmed', status: 'queued', attempts: 0, lastStatusCode: null });
    expect(rows[1]).to.include({ event: 'booking.confirmed', status: 'retrying', attempts: 1, lastStatusCode: 500 });
    expect(rows[1].nextAttemptAt).to.match(/^\d{4}-\d{2}-\d{2}T.*Z$/);
    let caught: unknown;
    await listDeliveries(db, operator, { endpointId: 'not-a-uuid', workspaceId: 'every' }).catch(
      (err) => (caught = err),
    );
    expect(caught).to.be.instanceOf(InputError);
    caught = undefined;
    await listDeliveries(db, operator, {
      endpointId: '8d6f2c1e-4a3b-4c5d-8e9f-0a1b2c3d4e5f',
      workspaceId: 'every',
    }).catch((err) => (caught = err));
    expect(caught).to.be.instanceOf(InputError);
  });

  it('bounds concurrency per endpoint, so a slow endpoint does not delay the others', async () => {
    const slow = await receiverEndpoint({ events: ['payment.captured'] });
    const fast = await receiverEndpoint({ events: ['booking.confirmed'] });
    answer = (path) => (path === slow.path ? { status: 204, delayMs: 1000 } : { status: 204, delayMs: 10 });
    const payment = examplePayload('payment.captured');
    for (let i = 0; i < 4; i++)
      await recordEvent(db, { workspaceId: ws.id, event: 'payment.captured', data: payment.data, source: 'publish' });
    await publish(10);
    const started = Date.now();
    const run = ws.dispatcher({ concurrency: 4, perEndpointConcurrency: 2, perWorkspaceConcurrency: 4 }).runOnce();
    await eventually(
      async () => receiver.requests.filter((r) => r.path === fast.path).length === 10,
      5000,
      'the fast endpoint',
    );
    expect(Date.now() - started, 'the fast endpoint is done while the slow one still works').to.be.below(900);
    expect(receiver.requests.filter((r) => r.path === slow.path)).to.have.length(2);
    expect(await run).to.deep.equal({ attempted: 14, accepted: 14, retrying: 0, failed: 0 });
    expect(receiver.maxInFlight).to.be.at.most(4);
  });

  it('runs continuously: woken by NOTIFY when something is queued, polling at least once a second', async () => {
    await receiverEndpoint();
    const dispatcher = ws.dispatcher({ pollIntervalMs: 1000 });
    await dispatcher.start();
    try {
      await sleep(200);
      for (let i = 1; i <= 3; i++) {
        const queued = Date.now();
        await publish();
        await receiver.waitForRequests(i, 2000);
        // Well under the poll interval: it was the notification that woke the dispatcher.
        expect(receiver.requests[i - 1].receivedAt - queued, `event ${i}`).to.be.below(500);
      }
      // A delivery queued without a notification is still picked up by the poll, within about a second.
      await eventually(
        async () => (await db('deliveries').where({ workspace_id: ws.id, status: 'accepted' })).length === 3,
        3000,
        'three accepted',
      );
      const row = await db('deliveries').where({ workspace_id: ws.id }).first();
      await db('deliveries')
        .where({ id: row.id })
        .update({ status: 'queued', next_attempt_at: db.fn.now(), finished_at: null });
      const quiet = Date.now();
      await receiver.waitForRequests(4, 3000);
      expect(receiver.requests[3].receivedAt - quiet).to.be.below(1500);
    } finally {
      await dispatcher.stop();
    }
  });

  it('through a database outage longer than its lease, records what it sent before claiming again, and sends it once', async () => {
    // The worker's connections go through a proxy that can refuse them; the attempt ends while the database is away.
    const { database, proxy, close } = await proxiedTestDatabase();
    const endpoint = await receiverEndpoint();
    answer = () => ({ status: 204, delayMs: 400 });
    await publish(1);
    const dispatcher = new Dispatcher({
      db: database.forRole('worker'),
      logger: quietLogger(),
      workspaceIds: [ws.id],
      leaseMs: 1500,
      attemptTimeoutMs: 1000,
      pollIntervalMs: 100,
    });
    try {
      await dispatcher.start();
      await receiver.waitForRequests(1, 5000);
      proxy.cut(); // the attempt's answer comes while nothing reaches the database
      await sleep(3000); // the lease (1.5 s) ran out meanwhile
      proxy.restore();
      const row = await eventually(
        async () => (await deliveriesOf(endpoint.id)).find((d) => d.status === 'accepted'),
        10_000,
        'the delivery recorded',
      );
      await sleep(1000);
      expect(receiver.requests.map((r) => r.deliveryId)).to.deep.equal([row.id]);
      expect(row).to.include({ attempts: 1, lease_owner: null });
    } finally {
      await dispatcher.stop();
      await close();
    }
  });

  it('stops within seconds during a database outage, leaving what it could not record to its leases', async () => {
    const { database, proxy, close } = await proxiedTestDatabase();
    const endpoint = await receiverEndpoint();
    answer = () => ({ status: 204, delayMs: 300 });
    await publish(1);
    const dispatcher = new Dispatcher({
      db: database.forRole('worker'),
      logger: quietLogger(),
      workspaceIds: [ws.id],
      pollIntervalMs: 100,
    });
    try {
      await dispatcher.start();
      await receiver.waitForRequests(1, 5000);
      proxy.cut();
      await sleep(1000); // the answer came, and its record failed
      const stopping = Date.now();
      await dispatcher.stop();
      expect(Date.now() - stopping).to.be.below(3000);
      proxy.restore();
      const [row] = await deliveriesOf(endpoint.id);
      expect(row.status).to.equal('queued'); // not recorded: its lease runs out and it is attempted again
      expect(row.lease_owner).to.equal(dispatcher.owner);
    } finally {
      await close();
    }
  });

  it('fails a one-off sweep after repeated database errors instead of retrying for ever', async () => {
    const unreachable = knexFactory({
      client: 'pg',
      connection: 'postgres://nobody:nothing@127.0.0.1:1/none',
      log: { warn: () => undefined, error: () => undefined },
    });
    try {
      const dispatcher = new Dispatcher({ db: unreachable, logger: quietLogger(), pollIntervalMs: 10 });
      let caught: unknown;
      await dispatcher.runOnce().catch((err) => (caught = err));
      expect((caught as Error)?.message).to.include('ECONNREFUSED');
    } finally {
      await unreachable.destroy();
    }
  });

  it('claims ahead within twice its slots, sends within its slots, and gives back what it claimed ahead when it stops', async () => {
    const endpoint = await receiverEndpoint();
    answer = () => ({ status: 204, delayMs: 400 });
    await publish(4);
    const dispatcher = ws.dispatcher({ concurrency: 1 });
    await dispatcher.start();
    await receiver.waitForRequests(1, 3000);
    const leased = await db('deliveries').where({ endpoint_id: endpoint.id }).whereNotNull('lease_owner');
    expect(leased, 'one in flight, one claimed ahead').to.have.length(2);
    await dispatcher.stop();
    expect(receiver.requests).to.have.length(1);
    expect(receiver.maxInFlight).to.equal(1);
    const rows = await deliveriesOf(endpoint.id);
    expect(rows.map((r) => r.status).sort()).to.deep.equal(['accepted', 'queued', 'queued', 'queued']);
    expect(rows.filter((r) => r.lease_owner !== null || r.lease_until !== null)).to.have.length(0);
    // Given back, not left to run out: another dispatcher sends them at once.
    answer = () => ({ status: 204 });
    expect(await ws.dispatcher().runOnce()).to.deep.equal({ attempted: 3, accepted: 3, retrying: 0, failed: 0 });
  });

  for (const change of ['a switch-off', 'a freeze'] as const) {
    it(`does not send what it claimed ahead after ${change} by another writer: the claim is given back and not taken again`, async () => {
      const endpoint = await receiverEndpoint();
      // The first attempt outlasts the time a claim may wait ready (0.5 s), so the second waits past it.
      answer = () => ({ status: 204, delayMs: 900 });
      await publish(2);
      const dispatcher = ws.dispatcher({ concurrency: 1 });
      await dispatcher.start();
      try {
        await receiver.waitForRequests(1, 3000);
        const leased = await db('deliveries').where({ endpoint_id: endpoint.id }).whereNotNull('lease_owner');
        expect(leased, 'one in flight, one claimed ahead').to.have.length(2);
        if (change === 'a switch-off')
          await setEndpointActive(db, operator, {
            endpointId: endpoint.id,
            workspaceId: 'every',
            active: false,
            now: new Date(),
          });
        else
          await updateWorkspace(db, operator, {
            workspaceId: await idOf(db, ws.slug),
            changes: { status: 'frozen' },
            now: new Date(),
          });
        const [first, second] = await deliveriesOf(endpoint.id);
        await eventually(
          async () => (await db('deliveries').where({ id: first.id }).first()).status === 'accepted',
          5000,
          'the first recorded',
        );
        const given = await eventually(
          async () => {
            const row = await db('deliveries').where({ id: second.id }).first();
            return row.lease_owner === null ? row : undefined;
          },
          5000,
          'the claim held ahead given back',
        );
        expect(given.status).to.equal(change === 'a switch-off' ? 'held' : 'queued');
      } finally {
        await dispatcher.stop();
      }
      expect(receiver.requests.map((r) => r.deliveryId)).to.have.length(1);
      expect(
        await db('delivery_attempts')
          .whereIn('delivery_id', db('deliveries').select('id').where({ endpoint_id: endpoint.id }))
          .count({ n: '*' }),
      ).to.deep.equal([{ n: 1 }]);
    });
  }

  it('stops gracefully: the attempts in flight finish and are recorded, nothing new is claimed', async () => {
    const endpoint = await receiverEndpoint();
    answer = () => ({ status: 204, delayMs: 400 });
    const dispatcher = ws.dispatcher();
    await dispatcher.start();
    await publish(3);
    await receiver.waitForRequests(3, 3000);
    await dispatcher.stop();
    const rows = await deliveriesOf(endpoint.id);
    expect(rows.map((r) => r.status)).to.deep.equal(['accepted', 'accepted', 'accepted']);
    await publish();
    await sleep(300);
    expect(receiver.requests).to.have.length(3);
    expect((await deliveriesOf(endpoint.id)).filter((r) => r.status === 'queued')).to.have.length(1);
  });
});
