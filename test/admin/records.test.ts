import crypto from 'node:crypto';
import os from 'node:os';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from '../support/database.js';
import { expectRollupsExact } from '../support/rollups.js';
import { startApi, type TestApi } from '../support/api.js';
import { startAdminApi, type TestAdminApi } from './support.js';
import { createAdminToken } from '../../src/core/admin-tokens.js';
import { createApiKey, createWorkspace } from '../../src/core/workspaces.js';
import { runRetention } from '../../src/webhooks/retention.js';
import { examplePayload } from '../webhooks/support.js';
import { loadOpenApiDocument } from '../../src/contract/document.js';
import { ServiceMetrics } from '../../src/observability/metrics.js';
import { writeRecords } from '../../src/core/import/records.js';
import { operator, operatorWith, FIXTURE_ACTOR } from '../support/actors.js';

// Batch writes (issue 32, points 1-3 and 8) through the admin API as its own database role, every answer checked against
// openapi/admin.yaml; the figures read back through the public API (its role, its ETags).

const OPERATOR = { actor: { type: 'cli' as const, name: os.userInfo().username } };
const uuid = () => crypto.randomUUID();

/** One customer, a car with its fleet and owner, a booking, an invoice of 10,000 fils and a charge of 6,000 on it. */
function smallBatch() {
  const owner = { id: uuid(), name: 'Al Noor Rentals' };
  const fleet = { id: uuid(), code: 'NOOR', name: 'Al Noor fleet', ownerId: owner.id };
  const car = {
    id: uuid(),
    fleetId: fleet.id,
    make: 'Toyota',
    model: 'Camry',
    plate: 'Dubai A 12345',
    category: 'sedan',
    dailyRate: 15000,
    state: 'active',
  };
  const customer = { id: uuid(), name: 'Layla Haddad' };
  const booking = {
    id: uuid(),
    number: 'BK-1',
    customerId: customer.id,
    vehicleId: car.id,
    type: 'daily',
    status: 'completed',
    pickupAt: '2026-10-01T08:00:00.000Z',
    dropoffAt: '2026-10-03T08:00:00.000Z',
    amount: 30000,
  };
  const invoice = {
    id: uuid(),
    number: 'INV-1',
    customerId: customer.id,
    bookingId: booking.id,
    purpose: 'rental',
    issueDate: '2026-10-01',
    dueDate: '2026-10-08',
    total: 10000,
    status: 'issued',
  };
  const charge = {
    id: uuid(),
    kind: 'charge',
    amount: 6000,
    customerId: customer.id,
    bookingId: booking.id,
    invoiceId: invoice.id,
    at: '2026-10-01T09:00:00.000Z',
  };
  return { owner, fleet, car, customer, booking, invoice, charge };
}

describe('the admin API: batch writes (writeRecords)', () => {
  let db: Knex;
  let admin: TestAdminApi;
  let api: TestApi;
  let token: { id: string; token: string };
  let ws: { id: string; slug: string };
  let key: string;
  let n = 0;

  before(async () => {
    ({ db } = await testDatabase());
    token = await createAdminToken(db, operatorWith(OPERATOR), { name: 'records test', workspaceId: 'every' });
    admin = await startAdminApi();
    api = await startApi({ now: new Date('2026-11-20T10:00:00.000Z') });
  });
  beforeEach(async () => {
    ws = await createWorkspace(db, operator, { slug: `records-${process.pid}-${Date.now().toString(36)}-${++n}` });
    key = (await createApiKey(db, operator, { workspaceId: ws.id })).key;
  });
  after(async () => {
    await admin?.close();
    await api?.close();
  });

  const write = (body: unknown, headers: Record<string, string> = {}) =>
    admin.request('POST', `/admin/v1/workspaces/${ws.id}/records`, { token: token.token, body, headers });
  /** What the workspace looks like from outside: the figures and ETags of the read API, and its events. */
  async function outside() {
    const read = async (path: string) => {
      const res = await api.get(path, key);
      expect(res.status, path).to.equal(200);
      return { body: res.body, etag: res.headers.get('etag') };
    };
    return {
      finance: await read('/v1/finance/overview'),
      bookings: await read('/v1/bookings/summary'),
      fleet: await read('/v1/fleet/summary'),
      receivables: await read('/v1/receivables'),
      events: Number((await db('events').where({ workspace_id: ws.id }).count({ c: '*' }))[0].c),
    };
  }

  it('writes parents before children whatever the order, with the events, in one go; the same batch again is all unchanged', async () => {
    const r = smallBatch();
    const captured = examplePayload('payment.captured');
    // Children first in the body: the batch orders them.
    const body = {
      upsert: {
        payments: [r.charge],
        invoices: [r.invoice],
        bookings: [r.booking],
        customers: [r.customer],
        vehicles: [r.car],
        fleets: [r.fleet],
        owners: [r.owner],
      },
      events: [{ event: 'payment.captured', data: captured.data }],
    };
    const first = await write(body);
    expect(first.status, JSON.stringify(admin.logs.filter((l) => l.err).map((l) => l.err))).to.equal(200);
    const one = { owners: 1, fleets: 1, vehicles: 1, customers: 1, bookings: 1, invoices: 1, payments: 1 };
    expect(first.body).to.deep.equal({
      upserted: one,
      unchanged: {},
      stale: {},
      deleted: {},
      events: [first.body.events[0]],
    });
    expect(await db('events').where({ id: first.body.events[0] }).first('event')).to.deep.equal({
      event: 'payment.captured',
    });
    const seen = await outside();
    expect(seen.finance.body.collectedAllTime).to.equal(6000);
    expect(seen.finance.body.arOutstanding).to.equal(4000);
    expect(seen.bookings.body.byStatus.completed).to.equal(1);
    await expectRollupsExact(db, ws.id);

    // Sent again (no dedupeKey on the event: it is recorded again, as publishEvent would).
    const again = await write({ upsert: body.upsert });
    expect(again.body).to.deep.equal({ upserted: {}, unchanged: one, stale: {}, deleted: {}, events: [] });
    const after = await outside();
    expect([after.finance, after.bookings, after.fleet, after.receivables]).to.deep.equal([
      seen.finance,
      seen.bookings,
      seen.fleet,
      seen.receivables,
    ]);

    // A change: the charge refunded in part and the booking's invoice voided; the figures follow.
    const refund = {
      id: uuid(),
      kind: 'refund',
      amount: 1000,
      customerId: r.customer.id,
      bookingId: r.booking.id,
      invoiceId: r.invoice.id,
      at: '2026-10-02T09:00:00.000Z',
    };
    const changed = await write({ upsert: { payments: [r.charge, refund] } });
    expect(changed.body).to.deep.equal({
      upserted: { payments: 1 },
      unchanged: { payments: 1 },
      stale: {},
      deleted: {},
      events: [],
    });
    expect((await outside()).finance.body.collectedAllTime).to.equal(5000);
    await expectRollupsExact(db, ws.id);

    // Audited once per batch, with counts and no record's contents.
    const audits = await db('audit_entries')
      .whereNot({ actor_name: FIXTURE_ACTOR })
      .where({ workspace_id: ws.id, action: 'workspace.records_write' })
      .orderBy('at')
      .select('changes', 'actor_type');
    expect(audits).to.have.length(3);
    expect(audits[0]).to.deep.equal({
      actor_type: 'admin_token',
      changes: { upserted: one, unchanged: {}, stale: {}, deleted: {}, events: 1, history: false },
    });
    expect(JSON.stringify(audits)).not.to.include('Layla');
  });

  it('deletes children with their parents, keeps every figure exact, and keeps versions: stale, unchanged, tombstones until retention', async () => {
    const r = smallBatch();
    await write({
      upsert: {
        owners: [r.owner],
        fleets: [r.fleet],
        vehicles: [r.car],
        customers: [{ ...r.customer, version: 5 }],
        bookings: [r.booking],
        invoices: [r.invoice],
        payments: [{ ...r.charge, version: 10 }],
      },
    });
    // An older version of the charge is stale; the same version again is unchanged; a newer one is written.
    const older = await write({ upsert: { payments: [{ ...r.charge, amount: 1, version: 9 }] } });
    expect(older.body).to.deep.include({ upserted: {}, unchanged: {}, stale: { payments: 1 } });
    expect(await db('payments').where({ id: r.charge.id }).first('amount')).to.deep.equal({ amount: 6000 });
    expect((await write({ upsert: { payments: [{ ...r.charge, version: 10 }] } })).body).to.deep.include({
      unchanged: { payments: 1 },
    });
    expect((await write({ upsert: { payments: [{ ...r.charge, amount: 7000, version: 11 }] } })).body).to.deep.include({
      upserted: { payments: 1 },
    });
    expect((await outside()).finance.body.collectedAllTime).to.equal(7000);

    // Deleted at version 12: a tombstone keeps a late upsert at 11 out; a delete at 11 is stale too.
    const deleted = await write({ delete: { payments: [{ id: r.charge.id, version: 12 }] } });
    expect(deleted.body).to.deep.equal({
      upserted: {},
      unchanged: {},
      stale: {},
      deleted: { payments: 1 },
      events: [],
    });
    expect((await write({ upsert: { payments: [{ ...r.charge, version: 11 }] } })).body).to.deep.include({
      stale: { payments: 1 },
    });
    expect((await write({ delete: { payments: [{ id: r.charge.id, version: 11 }] } })).body).to.deep.include({
      stale: { payments: 1 },
    });
    expect((await write({ delete: { payments: [{ id: r.charge.id, version: 12 }] } })).body).to.deep.include({
      unchanged: { payments: 1 },
    });
    expect(await db('payments').where({ id: r.charge.id }).first()).to.equal(undefined);
    const figures = await outside();
    expect(figures.finance.body.collectedAllTime).to.equal(0);
    expect(figures.finance.body.arOutstanding).to.equal(10000);
    await expectRollupsExact(db, ws.id);

    // The whole booking's tree goes in one batch, children named after parents: every figure back to nothing.
    const gone = await write({
      delete: {
        customers: [{ id: r.customer.id, version: 6 }],
        bookings: [{ id: r.booking.id }],
        invoices: [{ id: r.invoice.id }],
      },
    });
    expect(gone.body).to.deep.equal({
      upserted: {},
      unchanged: {},
      stale: {},
      deleted: { customers: 1, bookings: 1, invoices: 1 },
      events: [],
    });
    const empty = await outside();
    expect([empty.finance.body.arOutstanding, empty.bookings.body.total, empty.receivables.body.rows]).to.deep.equal([
      0,
      0,
      [],
    ]);
    await expectRollupsExact(db, ws.id);

    // Retention takes tombstones older than FRS_RETENTION_DAYS, not younger ones.
    const tombstones = () =>
      db('record_versions')
        .where({ workspace_id: ws.id })
        .whereNotNull('deleted_at')
        .count({ c: '*' })
        .then((rows) => Number(rows[0].c));
    expect(await tombstones()).to.equal(2);
    expect(
      (
        await runRetention(db, {
          now: new Date(Date.now() + 29 * 86_400_000),
          retentionDays: 30,
          workspaceIds: [ws.id],
        })
      ).tombstones,
    ).to.equal(0);
    expect(
      (
        await runRetention(db, {
          now: new Date(Date.now() + 31 * 86_400_000),
          retentionDays: 30,
          workspaceIds: [ws.id],
        })
      ).tombstones,
    ).to.equal(2);
  });

  it('refuses bad input, changing nothing: 400 naming every bad record, 409 missing_reference and dependent_records, 404, 413, 415', async () => {
    const r = smallBatch();
    await write({
      upsert: {
        owners: [r.owner],
        fleets: [r.fleet],
        vehicles: [r.car],
        customers: [r.customer],
        bookings: [r.booking],
        invoices: [r.invoice],
        payments: [r.charge],
      },
    });
    const eventsBefore = Number((await db('events').where({ workspace_id: ws.id }).count({ c: '*' }))[0].c);
    const before = await outside();
    const newCustomer = { id: uuid(), name: 'Omar' };

    const bad = await write({
      upsert: {
        customers: [newCustomer],
        bookings: [
          { ...r.booking, id: uuid(), number: 'BK-2', pickupAt: 'tomorrow' },
          { ...r.booking, id: uuid(), number: 'BK-3', amount: -1 },
        ],
        payments: [{ ...r.charge, id: uuid(), kind: 'gift' }],
      },
      events: [{ event: 'payment.captured', data: { paymentId: 'nope' } }],
    });
    expect(bad.status).to.equal(400);
    expect(bad.body.error.reason).to.equal('/upsert/bookings/0/pickupAt');
    for (const pointer of ['/upsert/bookings/0/pickupAt', '/upsert/bookings/1/amount', '/upsert/payments/0/kind'])
      expect(bad.body.error.message).to.include(pointer);

    const crossField = await write({ upsert: { bookings: [{ ...r.booking, dropoffAt: r.booking.pickupAt }] } });
    expect([crossField.status, crossField.body.error.reason]).to.deep.equal([400, '/upsert/bookings/0/dropoffAt']);

    const missing = uuid();
    const dangling = await write({
      upsert: {
        customers: [newCustomer],
        bookings: [{ ...r.booking, id: uuid(), number: 'BK-4', vehicleId: missing }],
      },
    });
    expect([dangling.status, dangling.body.error.code, dangling.body.error.reason]).to.deep.equal([
      409,
      'missing_reference',
      '/upsert/bookings/0/vehicleId',
    ]);
    expect(dangling.body.error.message).to.include(missing);

    const dependents = await write({ delete: { invoices: [{ id: r.invoice.id }] } });
    expect([dependents.status, dependents.body.error.code]).to.deep.equal([409, 'dependent_records']);
    expect(dependents.body.error.message).to.include(`payments ${r.charge.id}`);

    const tooMany = await write({
      upsert: { customers: Array.from({ length: 5001 }, () => ({ id: uuid(), name: 'x' })) },
    });
    expect([tooMany.status, tooMany.body.error.code]).to.deep.equal([413, 'payload_too_large']);
    expect(tooMany.body.error.message).to.include('5000 records');

    const notJson = await admin.request('POST', `/admin/v1/workspaces/${ws.id}/records`, {
      token: token.token,
      body: 'a,b',
      headers: { 'content-type': 'text/csv' },
    });
    expect(notJson.status).to.equal(415);
    const nowhere = await admin.request('POST', `/admin/v1/workspaces/${uuid()}/records`, {
      token: token.token,
      body: { upsert: { customers: [newCustomer] } },
    });
    expect(nowhere.status).to.equal(404);

    const after = await outside();
    expect(after).to.deep.equal(before);
    expect(Number((await db('events').where({ workspace_id: ws.id }).count({ c: '*' }))[0].c)).to.equal(eventsBefore);
    expect(await db('customers').where({ id: newCustomer.id }).first()).to.equal(undefined);
  });

  it("names the record the database refuses, never in the database's words, and changes nothing (L3b)", async () => {
    const r = smallBatch();
    await write({
      upsert: {
        owners: [r.owner],
        fleets: [r.fleet],
        vehicles: [r.car],
        customers: [r.customer],
        bookings: [r.booking],
        invoices: [r.invoice],
        payments: [r.charge],
      },
    });
    const before = await outside();
    // Year 0 passes the document's date-time format, and no date PostgreSQL stores (SQLSTATE 22008): the third payment.
    const payment = (at: string) => ({ ...r.charge, id: uuid(), invoiceId: undefined, at });
    const refused = await write({
      upsert: {
        payments: [
          payment('2026-10-02T09:00:00.000Z'),
          payment('2026-10-03T09:00:00.000Z'),
          payment('0000-01-01T00:00:00Z'),
          payment('2026-10-04T09:00:00.000Z'),
        ],
      },
    });
    expect([refused.status, refused.body.error.code, refused.body.error.reason]).to.deep.equal([
      400,
      'invalid_request',
      '/upsert/payments/2',
    ]);
    expect(refused.body.error.message).to.equal(
      '1 record is invalid; nothing was written: /upsert/payments/2: the record cannot be stored: a date or time is out of the range the service stores',
    );
    expect(await outside()).to.deep.equal(before);
    expect(await db('payments').where({ workspace_id: ws.id }).pluck('id')).to.deep.equal([r.charge.id]);
  });

  it('refuses a body nested too deep or an object of too many members before parsing it; names each bad record once (M2)', async () => {
    const before = await outside();
    // 1 MiB of `[`: refused on its depth, not read as JSON (it would be "not valid JSON", after parsing it all).
    const deep = await write(`{"upsert":${'['.repeat(1024 * 1024)}`);
    expect([deep.status, deep.body.error.reason, deep.body.error.message]).to.deep.equal([
      400,
      'body',
      'The request body is nested more than 64 levels deep.',
    ]);
    // `[` inside a string is text, not nesting.
    const inString = await write(`{"upsert":{"customers":[{"id":"${uuid()}","name":"${'['.repeat(100)}"}]},"bogus":1}`);
    expect([inString.status, inString.body.error.reason]).to.deep.equal([400, '/bogus']);

    const members = Object.fromEntries(Array.from({ length: 1001 }, (_, i) => [`extra${i}`, i]));
    const wide = await write({ upsert: { customers: [{ id: uuid(), name: 'Wide', ...members }] } });
    expect([wide.status, wide.body.error.reason, wide.body.error.message]).to.deep.equal([
      400,
      'body',
      'An object in the request body has more than 1000 members.',
    ]);

    // 25 records of 900 unknown members each: the first 20 named, each once, by its first problem.
    const some = Object.fromEntries(Array.from({ length: 900 }, (_, i) => [`extra${i}`, i]));
    const many = await write({
      upsert: { customers: Array.from({ length: 25 }, (_, i) => ({ id: uuid(), name: `C${i}`, ...some })) },
    });
    expect([many.status, many.body.error.reason]).to.deep.equal([400, '/upsert/customers/0/extra0']);
    const named = [...many.body.error.message.matchAll(/\/upsert\/customers\/(\d+)/g)].map((m: RegExpMatchArray) =>
      Number(m[1]),
    );
    expect(named).to.deep.equal(Array.from({ length: 20 }, (_, i) => i));
    expect(many.body.error.message).to.match(/^at least 20 records are invalid; nothing was written: /);
    expect(await outside()).to.deep.equal(before);
  });

  it('answers a repeated Idempotency-Key with the first answer; the settings screen cannot reach the operation', async () => {
    const r = smallBatch();
    const body = { upsert: { owners: [r.owner] } };
    const first = await write(body, { 'idempotency-key': 'batch-1' });
    const second = await write(body, { 'idempotency-key': 'batch-1' });
    expect(second.body).to.deep.equal(first.body);
    expect(first.body.upserted).to.deep.equal({ owners: 1 });
    const reused = await write(
      { upsert: { owners: [{ ...r.owner, name: 'other' }] } },
      { 'idempotency-key': 'batch-1' },
    );
    expect([reused.status, reused.body.error.code]).to.deep.equal([409, 'idempotency_key_reused']);
    // The settings screen's session is not among the operation's schemes: its dispatcher has no route to it.
    const operation = loadOpenApiDocument('admin').paths['/admin/v1/workspaces/{workspaceId}/records'].post;
    expect(operation.security ?? loadOpenApiDocument('admin').security).to.deep.equal([{ adminToken: [] }]);
  });

  it('counts records written, stale and refused in the metrics', async () => {
    const metrics = new ServiceMetrics({ defaultMetrics: false });
    const r = smallBatch();
    await writeRecords(db, operator, {
      workspaceId: ws.id,
      body: { upsert: { owners: [{ ...r.owner, version: 2 }], fleets: [r.fleet] } },
      metrics: metrics.records,
    });
    await writeRecords(db, operator, {
      workspaceId: ws.id,
      body: { upsert: { owners: [{ ...r.owner, version: 1 }] }, delete: { fleets: [{ id: r.fleet.id }] } },
      metrics: metrics.records,
    });
    await writeRecords(db, operator, {
      workspaceId: ws.id,
      body: { upsert: { vehicles: [{ ...r.car, fleetId: uuid() }] } },
      metrics: metrics.records,
    }).catch(() => undefined);
    const text = await metrics.registry.metrics();
    for (const line of [
      'frs_records_written_total{key="owners",operation="upsert"} 1',
      'frs_records_written_total{key="fleets",operation="upsert"} 1',
      'frs_records_written_total{key="fleets",operation="delete"} 1',
      'frs_records_stale_total{key="owners"} 1',
      'frs_records_refused_total{reason="missing_reference"} 1',
    ])
      expect(text).to.include(line);
  });
});
