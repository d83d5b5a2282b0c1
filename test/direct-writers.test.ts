import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from './support/database.js';
import { fixture, type Fixture } from './support/fixtures.js';
import { expectRollupsExact } from './support/rollups.js';

// Issue 32, point 5: the service's upkeep has no row that every writer of a workspace updates in place. Two writers of
// one workspace touching different records (their own customer, car, booking and invoice) never wait for each other,
// whatever the running totals they both move (the workspace's totals, a status count, a due date's open balance, a
// day's and a month's takings); the figures stay exact, and stay so after the worker's fold.

describe('direct writers of one workspace (issue 32)', () => {
  let db: Knex;

  before(async () => {
    db = (await testDatabase()).db;
  });

  /** Records of their own for two writers: a customer, a car, a confirmed booking and an open invoice each. */
  async function twoWriters(f: Fixture) {
    const own = async (k: number) => {
      const customerId = await f.customer({ name: `Customer ${k}` });
      const vehicleId = await f.vehicle({ plate: `P ${k}` });
      const bookingId = await f.booking({ customerId, vehicleId, status: 'confirmed', pickupAt: '2026-12-01T06:00:00Z', dropoffAt: '2026-12-03T06:00:00Z' });
      const invoiceId = await f.invoice({ customerId, bookingId, total: 100000, dueDate: '2026-12-10' });
      return { customerId, vehicleId, bookingId, invoiceId };
    };
    return [await own(1), await own(2)];
  }

  type Own = Awaited<ReturnType<typeof twoWriters>>[number];
  /** The kinds of one-row write the platform makes, each moving totals both writers share. */
  const WRITES: Record<string, (trx: Knex.Transaction, ws: string, o: Own) => Promise<unknown>> = {
    'a payment': (trx, ws, o) => trx.raw(
      `INSERT INTO payments (id, workspace_id, kind, status, amount, customer_id, booking_id, invoice_id, at)
       VALUES (?, ?, 'charge', 'captured', 1000, ?, ?, ?, '2026-11-22T08:05:00Z')`, [randomUUID(), ws, o.customerId, o.bookingId, o.invoiceId]),
    'an invoice': (trx, ws, o) => trx.raw(
      `INSERT INTO invoices (id, workspace_id, number, customer_id, booking_id, purpose, issue_date, due_date, total, status)
       VALUES (?, ?, ?, ?, ?, 'damage', '2026-11-22', '2026-12-10', 5000, 'issued')`, [randomUUID(), ws, `D-${randomUUID()}`, o.customerId, o.bookingId]),
    'a due date moved': (trx, _ws, o) => trx.raw(`UPDATE invoices SET due_date = '2026-12-11' WHERE id = ?`, [o.invoiceId]),
    'a new booking': (trx, ws, o) => trx.raw(
      `INSERT INTO bookings (id, workspace_id, number, customer_id, vehicle_id, type, status, pickup_at, dropoff_at, amount)
       VALUES (?, ?, ?, ?, ?, 'daily', 'confirmed', '2026-12-05T06:00:00Z', '2026-12-06T06:00:00Z', 20000)`, [randomUUID(), ws, `N-${randomUUID()}`, o.customerId, o.vehicleId]),
    'a booking going out': (trx, _ws, o) => trx.raw(`UPDATE bookings SET status = 'active' WHERE id = ?`, [o.bookingId]),
    'a rename': (trx, _ws, o) => trx.raw(`UPDATE customers SET name = name || ' Jr' WHERE id = ?`, [o.customerId]),
    'an expense': (trx, ws) => trx.raw(`INSERT INTO expenses (id, workspace_id, category, amount, date) VALUES (?, ?, 'fuel', 700, '2026-11-20')`, [randomUUID(), ws]),
  };

  for (const [kind, write] of Object.entries(WRITES)) {
    it(`${kind}: a second writer of the workspace commits while the first one's transaction is still open`, async () => {
      const f = await fixture(db);
      const [first, second] = await twoWriters(f);
      const t1 = await db.transaction();
      try {
        await write(t1, f.ws.id, first);
        // the second writer gives up after 2 s of waiting for a lock: it must not have to wait at all
        await db.transaction(async (t2) => {
          await t2.raw(`SET LOCAL lock_timeout = '2s'`);
          await write(t2, f.ws.id, second);
        });
      } finally {
        await t1.commit();
      }
      await expectRollupsExact(db, f.ws.id);
    });
  }

  it('the fold leaves every figure as it was, one row per key, and a fold meanwhile with writers leaves none behind', async () => {
    const f = await fixture(db);
    const [first, second] = await twoWriters(f);
    for (const write of Object.values(WRITES)) {
      for (const own of [first, second]) await db.transaction((trx) => write(trx, f.ws.id, own));
    }
    const before = await expectRollupsExact(db, f.ws.id);
    const t1 = await db.transaction();
    await WRITES['a payment'](t1, f.ws.id, first);
    await db.raw('SELECT rollups_compact()');
    await t1.commit();
    await db.raw('SELECT rollups_compact()');
    const after = await expectRollupsExact(db, f.ws.id);
    expect(after.totals.collected).to.equal(before.totals.collected + 1000);
    const { rows } = await db.raw(`SELECT count(*) AS n, count(DISTINCT (status)) AS keys FROM booking_status_counts WHERE workspace_id = ?`, [f.ws.id]);
    expect(rows[0]).to.deep.equal({ n: rows[0].keys, keys: rows[0].keys });
    const { rows: pending } = await db.raw(`SELECT count(*) AS n FROM workspace_totals WHERE workspace_id = ? AND pending`, [f.ws.id]);
    expect(pending[0].n).to.equal(0);
  });
});
