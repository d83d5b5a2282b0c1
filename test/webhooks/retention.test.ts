import crypto from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from '../support/database.js';
import { recordEvent } from '../../src/webhooks/record-event.js';
import { queueTestDelivery } from '../../src/core/webhooks/test-delivery.js';
import { createPortalLink } from '../../src/core/portal-sessions.js';
import { cliAudit } from '../../src/core/audit.js';
import { DEDUPE_KEY_KEEP_DAYS, runRetention } from '../../src/webhooks/retention.js';
import { createAdminToken } from '../../src/core/admin-tokens.js';
import {
  bookingConfirmedData,
  dropTestWorkspaces,
  examplePayload,
  webhookWorkspace,
  type TestWorkspace,
} from './support.js';
import { retentionDaysFromEnv } from '../../src/config.js';
import { idOf, operatorWith } from '../support/actors.js';

const SECOND = 1000;
const HOUR = 3600 * SECOND;
const DAY = 24 * HOUR;
/** The fixture's reference time; every timestamp below is set relative to it, and the clock is walked from it. */
const T0 = Date.parse('2026-10-01T00:00:00.000Z');
const at = (ms: number) => new Date(T0 + ms);

describe('webhooks: retention', () => {
  let db: Knex;

  before(async () => {
    ({ db } = await testDatabase());
  });
  after(() => dropTestWorkspaces(db));

  it('reads FRS_RETENTION_DAYS: 30 by default, a whole number of days from 1 to 3650', () => {
    expect(retentionDaysFromEnv({})).to.equal(30);
    expect(retentionDaysFromEnv({ FRS_RETENTION_DAYS: '7' })).to.equal(7);
    for (const bad of ['0', '-1', '1.5', 'thirty', '3651']) {
      expect(() => retentionDaysFromEnv({ FRS_RETENTION_DAYS: bad })).to.throw(
        `FRS_RETENTION_DAYS must be a whole number of days from 1 to 3650, got "${bad}"`,
      );
    }
  });

  it('walks the clock past the retention: finished records go, in batches; pending deliveries and their events stay', async () => {
    const ws = await webhookWorkspace(db);
    const other = await webhookWorkspace(db);
    const e = await ws.endpoint({ url: 'https://hooks.example.ae/fleet', events: ['booking.confirmed'] });
    await ws.endpoint({ url: 'https://off.example.ae/hook', events: ['payment.captured'], active: false });

    const publish = async (workspace: TestWorkspace, event = 'booking.confirmed') => {
      const data = event === 'booking.confirmed' ? bookingConfirmedData() : examplePayload(event).data;
      const { eventId } = await recordEvent(db, { workspaceId: workspace.id, event, data, source: 'publish' });
      const row = await db('deliveries').where({ event_id: eventId }).first();
      return { eventId, deliveryId: row.id as string };
    };
    const setDelivery = (id: string, fields: Record<string, unknown>) => db('deliveries').where({ id }).update(fields);
    const setEvent = (id: string, createdAt: Date) => db('events').where({ id }).update({ created_at: createdAt });
    const attempt = (deliveryId: string, number: number, startedAt: Date) =>
      db('delivery_attempts').insert({
        delivery_id: deliveryId,
        endpoint_id: e.id,
        number,
        started_at: startedAt,
        duration_ms: 5,
        status_code: 500,
        error_kind: 'status',
        error: 'HTTP 500',
      });

    // Accepted at T0 - 1 s after one attempt; its event two seconds older.
    const accepted = await publish(ws);
    await setEvent(accepted.eventId, at(-2 * SECOND));
    await setDelivery(accepted.deliveryId, {
      status: 'accepted',
      next_attempt_at: null,
      attempts: 1,
      finished_at: at(-SECOND),
    });
    await attempt(accepted.deliveryId, 1, at(-SECOND));
    // Failed at T0 + 2 d; attempts at T0 - 1 d and T0 + 2 d.
    const failed = await publish(ws);
    await setEvent(failed.eventId, at(-DAY));
    await setDelivery(failed.deliveryId, {
      status: 'failed',
      next_attempt_at: null,
      attempts: 2,
      finished_at: at(2 * DAY),
    });
    await attempt(failed.deliveryId, 1, at(-DAY));
    await attempt(failed.deliveryId, 2, at(2 * DAY));
    // Still retrying (pending), created T0 - 1 d, one old attempt.
    const retrying = await publish(ws);
    await setEvent(retrying.eventId, at(-DAY));
    await setDelivery(retrying.deliveryId, {
      status: 'retrying',
      attempts: 1,
      next_attempt_at: at(200 * DAY),
      created_at: at(-DAY),
    });
    await attempt(retrying.deliveryId, 1, at(-DAY));
    // Held for the switched-off endpoint since T0 - 1 d.
    const held = await publish(ws, 'payment.captured');
    await setEvent(held.eventId, at(-DAY));
    expect((await db('deliveries').where({ id: held.deliveryId }).first()).status).to.equal('held');
    // Events with no delivery (nothing subscribed), one with a dedupe key.
    await db('events').insert({
      workspace_id: ws.id,
      event: 'lead.created',
      data: '{}',
      source: 'publish',
      created_at: at(-DAY),
    });
    const [keyed] = await db('events')
      .insert({
        workspace_id: ws.id,
        event: 'invoice.overdue',
        dedupe_key: 'invoice.overdue:x:7',
        data: '{}',
        source: 'calendar',
        created_at: at(-DAY),
      })
      .returning('id');
    // A test call at T0 (its Idempotency-Key is dated T0), accepted at T0 + 3 d.
    const test = await queueTestDelivery(db, {
      workspaceId: ws.id,
      endpointId: e.id,
      idempotencyKey: 'k1',
      now: at(0),
    });
    expect(test.replayed).to.equal(false);
    const testEvent = (await db('deliveries').where({ id: test.deliveryId }).first()).event_id;
    await setEvent(testEvent, at(0));
    await setDelivery(test.deliveryId, {
      status: 'accepted',
      next_attempt_at: null,
      attempts: 1,
      finished_at: at(3 * DAY),
    });
    // The platform's outbox: one row processed at T0 - 1 d, one not processed.
    await db('outbox').insert({ workspace_id: ws.id, event: 'lead.created', data: '{}', processed_at: at(-DAY) });
    const [unprocessed] = await db('outbox')
      .insert({ workspace_id: ws.id, event: 'lead.created', data: '{}', created_at: at(-DAY) })
      .returning('id');
    // Another workspace's old record: not this test's to delete.
    const foreign = await other.endpoint({ url: 'https://foreign.example/hook' });
    const theirs = await publish(other);
    await setDelivery(theirs.deliveryId, { status: 'accepted', next_attempt_at: null, finished_at: at(-10 * DAY) });

    // A settings-screen link made at T0 for 5 minutes: its record goes once its expiry is older than the cutoff.
    const link = await createPortalLink(db, operatorWith(cliAudit()), {
      workspaceId: ws.id,
      expiresInMinutes: 5,
      now: at(0),
    });

    // As the worker runs it: on the worker's database role (src/db/roles.ts).
    const workerDb = (await testDatabase()).forRole('worker');
    const sweep = (now: Date) =>
      runRetention(workerDb, { now, retentionDays: 30, batchSize: 1, workspaceIds: [ws.id] });
    const remaining = async () => ({
      deliveries: (await db('deliveries').where({ workspace_id: ws.id }).pluck('id')).sort(),
      events: (await db('events').where({ workspace_id: ws.id }).pluck('id')).sort(),
      attempts: (
        await db('delivery_attempts')
          .where({ endpoint_id: e.id })
          .orderBy(['delivery_id', 'number'])
          .select('delivery_id', 'number')
      )
        .map((a) => `${a.delivery_id}#${a.number}`)
        .sort(),
      keys: await db('test_idempotency_keys').where({ workspace_id: ws.id }).pluck('key'),
      outbox: (await db('outbox').where({ workspace_id: ws.id }).pluck('id')).map(Number).sort(),
    });
    const sorted = (ids: string[]) => [...ids].sort();

    // T0 + 30 d - 1 h: the cutoff is T0 - 1 h. The key is older than 24 h; the lonely event, the processed outbox row
    // and the failed delivery's first attempt are older than the cutoff. The retrying delivery's attempt is as old,
    // but its delivery is still pending: it keeps its history. Nothing finished before the cutoff.
    expect(await sweep(at(30 * DAY - HOUR))).to.deep.equal({
      idempotencyKeys: 1,
      attempts: 1,
      deliveries: 0,
      events: 1,
      outbox: 1,
      portalSessions: 0,
      tombstones: 0,
      importJobs: 0,
      lostImportJobs: 0,
    });
    expect(await remaining()).to.deep.equal({
      deliveries: sorted([
        accepted.deliveryId,
        failed.deliveryId,
        retrying.deliveryId,
        held.deliveryId,
        test.deliveryId,
      ]),
      events: sorted([accepted.eventId, failed.eventId, retrying.eventId, held.eventId, keyed.id, testEvent]),
      attempts: sorted([`${accepted.deliveryId}#1`, `${failed.deliveryId}#2`, `${retrying.deliveryId}#1`]),
      keys: [],
      outbox: [Number(unprocessed.id)],
    });

    // T0 + 30 d + 1 h: the accepted delivery (finished T0 - 1 s), its attempt, then its event.
    expect(await sweep(at(30 * DAY - HOUR + 4 * 60_000))).to.deep.include({
      portalSessions: 0,
      tombstones: 0,
      importJobs: 0,
      lostImportJobs: 0,
    });
    expect(await sweep(at(30 * DAY + HOUR))).to.deep.equal({
      idempotencyKeys: 0,
      attempts: 1,
      deliveries: 1,
      events: 1,
      outbox: 0,
      portalSessions: 1,
      tombstones: 0,
      importJobs: 0,
      lostImportJobs: 0,
    });
    expect(await db('portal_sessions').where({ id: link.id })).to.deep.equal([]);
    // T0 + 35 d: the failed delivery (T0 + 2 d) with its last attempt, the test delivery (T0 + 3 d), their events.
    expect(await sweep(at(35 * DAY))).to.deep.equal({
      idempotencyKeys: 0,
      attempts: 1,
      deliveries: 2,
      events: 2,
      outbox: 0,
      portalSessions: 0,
      tombstones: 0,
      importJobs: 0,
      lostImportJobs: 0,
    });
    // Running again at the same time deletes nothing more.
    expect(await sweep(at(35 * DAY))).to.deep.equal({
      idempotencyKeys: 0,
      attempts: 0,
      deliveries: 0,
      events: 0,
      outbox: 0,
      portalSessions: 0,
      tombstones: 0,
      importJobs: 0,
      lostImportJobs: 0,
    });
    // The event with a dedupe key stays 90 days (created T0 - 1 d): still there at T0 + 89 d - 1 h, gone at T0 + 89 d + 1 h.
    expect(DEDUPE_KEY_KEEP_DAYS).to.equal(90);
    expect((await sweep(at(89 * DAY - HOUR))).events).to.equal(0);
    expect(await sweep(at(89 * DAY + HOUR))).to.deep.equal({
      idempotencyKeys: 0,
      attempts: 0,
      deliveries: 0,
      events: 1,
      outbox: 0,
      portalSessions: 0,
      tombstones: 0,
      importJobs: 0,
      lostImportJobs: 0,
    });

    // Years later: the pending deliveries (retrying, held), the retrying one's attempt, their events and the
    // unprocessed outbox row remain.
    expect(await sweep(at(3000 * DAY))).to.deep.equal({
      idempotencyKeys: 0,
      attempts: 0,
      deliveries: 0,
      events: 0,
      outbox: 0,
      portalSessions: 0,
      tombstones: 0,
      importJobs: 0,
      lostImportJobs: 0,
    });
    expect(await remaining()).to.deep.equal({
      deliveries: sorted([retrying.deliveryId, held.deliveryId]),
      events: sorted([retrying.eventId, held.eventId]),
      attempts: [`${retrying.deliveryId}#1`],
      keys: [],
      outbox: [Number(unprocessed.id)],
    });
    expect(await db('deliveries').where({ id: retrying.deliveryId }).first()).to.include({
      status: 'retrying',
      attempts: 1,
    });
    // The other workspace's record was out of scope.
    expect(await db('deliveries').where({ endpoint_id: foreign.id }).pluck('id')).to.deep.equal([theirs.deliveryId]);
  });

  it("forgets the admin API's idempotency keys (and the sealed answers they replay) after 24 hours, whether or not their token comes back", async () => {
    const ws = await webhookWorkspace(db);
    const token = await createAdminToken(db, operatorWith({ actor: { type: 'cli', name: 'test' } }), {
      name: 'retention test',
      workspaceId: await idOf(db, ws.slug),
    });
    // a key is kept as its SHA-256 (src/admin/idempotency.ts)
    const digest = (key: string) => crypto.createHash('sha256').update(key).digest('hex');
    const row = (key: string, createdAt: Date) => ({
      token_id: token.id,
      key: digest(key),
      request_hash: Buffer.alloc(32),
      status: 201,
      created_at: createdAt,
    });
    await db('admin_idempotency_keys').insert([row('old', at(-25 * HOUR)), row('recent', at(-23 * HOUR))]);
    const workerDb = (await testDatabase()).forRole('worker');
    expect(
      (await runRetention(workerDb, { now: at(0), retentionDays: 30, batchSize: 1, workspaceIds: [ws.id] }))
        .idempotencyKeys,
    ).to.equal(1);
    expect(await db('admin_idempotency_keys').where({ token_id: token.id }).pluck('key')).to.deep.equal([
      digest('recent'),
    ]);
    await db('admin_tokens').where({ id: token.id }).delete();
  });
});
