import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from './support/database.js';
import { fixture, type Fixture } from './support/fixtures.js';
import { expectRollupsExact, kept } from './support/rollups.js';
import pino from 'pino';
import { foldUpkeep, upkeepDelaySeconds } from '../src/db/upkeep.js';
import { startUpkeepLoop } from '../src/webhooks/upkeep-loop.js';
import { startedCalendar } from './support/calendar-fixtures.js';
import { createKnex } from '../src/db/database.js';
import { writeRecords } from '../src/core/import/records.js';
import { importDocument } from '../src/core/import/import-document.js';
import { cliAudit } from '../src/core/audit.js';
import { operator, operatorWith } from './support/actors.js';

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
      const bookingId = await f.booking({
        customerId,
        vehicleId,
        status: 'confirmed',
        pickupAt: '2026-12-01T06:00:00Z',
        dropoffAt: '2026-12-03T06:00:00Z',
      });
      const invoiceId = await f.invoice({ customerId, bookingId, total: 100000, dueDate: '2026-12-10' });
      return { customerId, vehicleId, bookingId, invoiceId };
    };
    return [await own(1), await own(2)];
  }

  type Own = Awaited<ReturnType<typeof twoWriters>>[number];
  /** The kinds of one-row write the platform makes, each moving totals both writers share. */
  const WRITES: Record<string, (trx: Knex.Transaction, ws: string, o: Own) => Promise<unknown>> = {
    'a payment': (trx, ws, o) =>
      trx.raw(
        `INSERT INTO payments (id, workspace_id, kind, status, amount, customer_id, booking_id, invoice_id, at)
       VALUES (?, ?, 'charge', 'captured', 1000, ?, ?, ?, '2026-11-22T08:05:00Z')`,
        [randomUUID(), ws, o.customerId, o.bookingId, o.invoiceId],
      ),
    'an invoice': (trx, ws, o) =>
      trx.raw(
        `INSERT INTO invoices (id, workspace_id, number, customer_id, booking_id, purpose, issue_date, due_date, total, status)
       VALUES (?, ?, ?, ?, ?, 'damage', '2026-11-22', '2026-12-10', 5000, 'issued')`,
        [randomUUID(), ws, `D-${randomUUID()}`, o.customerId, o.bookingId],
      ),
    'a due date moved': (trx, _ws, o) =>
      trx.raw(`UPDATE invoices SET due_date = '2026-12-11' WHERE id = ?`, [o.invoiceId]),
    'a new booking': (trx, ws, o) =>
      trx.raw(
        `INSERT INTO bookings (id, workspace_id, number, customer_id, vehicle_id, type, status, pickup_at, dropoff_at, amount)
       VALUES (?, ?, ?, ?, ?, 'daily', 'confirmed', '2026-12-05T06:00:00Z', '2026-12-06T06:00:00Z', 20000)`,
        [randomUUID(), ws, `N-${randomUUID()}`, o.customerId, o.vehicleId],
      ),
    'a booking going out': (trx, _ws, o) =>
      trx.raw(`UPDATE bookings SET status = 'active' WHERE id = ?`, [o.bookingId]),
    'a rename': (trx, _ws, o) => trx.raw(`UPDATE customers SET name = name || ' Jr' WHERE id = ?`, [o.customerId]),
    'an expense': (trx, ws) =>
      trx.raw(
        `INSERT INTO expenses (id, workspace_id, category, amount, date) VALUES (?, ?, 'fuel', 700, '2026-11-20')`,
        [randomUUID(), ws],
      ),
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

  /** A transaction of the platform's kind: it says nothing about upkeep (the tests' own writes are inline). */
  const direct = (write: (trx: Knex.Transaction) => Promise<unknown>) =>
    db.transaction(async (trx) => {
      await trx.raw(`SET LOCAL frs.upkeep = 'deferred'`);
      await write(trx);
    });

  it("queues a direct writer's changes for the fold instead of applying them, and the fold makes every figure exact", async () => {
    const f = await fixture(db);
    const [first, second] = await twoWriters(f);
    const before = await expectRollupsExact(db, f.ws.id);
    const {
      rows: [{ version: versionBefore }],
    } = await db.raw(
      `SELECT sum(changes)::int AS version FROM workspace_data_versions WHERE workspace_id = ? AND area = 'records'`,
      [f.ws.id],
    );
    for (const [name, write] of Object.entries(WRITES)) {
      for (const own of [first, second]) await direct((trx) => write(trx, f.ws.id, own));
      await direct((trx) => trx.raw(`UPDATE vehicles SET plate = ? WHERE id = ?`, [`Q ${name}`, first.vehicleId]));
    }
    // nothing applied yet: the totals as they were, the copies of the old name, the data version moved only by the two
    // renames (a customer's row is not queued: its own change counts at once, its copies' when they are rewritten)
    expect((await kept(db, f.ws.id)).totals).to.deep.equal(before.totals);
    const {
      rows: [booking],
    } = await db.raw(`SELECT customer_json, vehicle_json FROM bookings WHERE id = ?`, [first.bookingId]);
    expect(JSON.parse(booking.customer_json).name).to.equal('Customer 1');
    expect(JSON.parse(booking.vehicle_json).plate).to.equal('P 1');
    const {
      rows: [{ version: versionQueued }],
    } = await db.raw(
      `SELECT sum(changes)::int AS version FROM workspace_data_versions WHERE workspace_id = ? AND area = 'records'`,
      [f.ws.id],
    );
    expect(versionQueued).to.equal(versionBefore + 2);
    expect(await upkeepDelaySeconds(db)).to.be.greaterThan(0);
    // applied: exact (each figure against a recomputation from the base tables), the copies renamed, the version moved
    // (as the worker does it, with the worker's rights)
    expect(await foldUpkeep((await testDatabase()).forRole('worker'), [f.ws.id])).to.be.greaterThan(0);
    const after = await expectRollupsExact(db, f.ws.id);
    // two payments of 1000 and two expenses of 700 (WRITES), by hand
    expect(after.totals.collected - before.totals.collected).to.equal(2000);
    expect(after.totals.expenses - before.totals.expenses).to.equal(1400);
    const {
      rows: [renamed],
    } = await db.raw(`SELECT customer_json, vehicle_json FROM bookings WHERE id = ?`, [first.bookingId]);
    expect(JSON.parse(renamed.customer_json).name).to.equal('Customer 1 Jr');
    expect(JSON.parse(renamed.vehicle_json).plate).to.equal('Q an expense');
    const {
      rows: [{ version: versionAfter }],
    } = await db.raw(
      `SELECT sum(changes)::int AS version FROM workspace_data_versions WHERE workspace_id = ? AND area = 'records'`,
      [f.ws.id],
    );
    expect(versionAfter).to.be.greaterThan(versionBefore);
    // a second fold finds nothing of the workspace's
    expect(await foldUpkeep(db, [f.ws.id])).to.equal(0);
  });

  it("the service's own writers keep the totals in their transaction, in a session that says nothing (batch, CLI import)", async () => {
    const { url } = await testDatabase();
    const platform = createKnex(url, 2, `SET frs.upkeep = 'deferred'`);
    try {
      const f = await fixture(db);
      const [own] = await twoWriters(f);
      const payment = (id: string, amount: number) => ({
        id,
        kind: 'charge',
        amount,
        customerId: own.customerId,
        bookingId: own.bookingId,
        invoiceId: own.invoiceId,
        at: '2026-11-22T08:05:00Z',
      });
      await writeRecords(platform, operatorWith(cliAudit()), {
        workspaceId: f.ws.id,
        body: { upsert: { payments: [payment(randomUUID(), 3000)] } },
      });
      await importDocument(platform, operator, {
        workspace: f.slug,
        document: { payments: [payment(randomUUID(), 4000)] },
      });
      // nothing queued, and the figures already exact: the invoice's 100000 less the 7000 paid, by hand
      const {
        rows: [queued],
      } = await db.raw(`SELECT count(*)::int AS n FROM upkeep_payments WHERE workspace_id = ?`, [f.ws.id]);
      expect(queued.n).to.equal(0);
      const figures = await expectRollupsExact(db, f.ws.id);
      expect(figures.totals.collected).to.equal(7000);
      expect(Number((await db('invoices').where({ id: own.invoiceId }).first()).balance)).to.equal(93000);
    } finally {
      await platform.destroy();
    }
  });

  it('a fold gives way to a writer holding a row it needs (that workspace waits for a later fold) and goes on with the others', async () => {
    const busy = await fixture(db);
    const free = await fixture(db);
    const [b] = await twoWriters(busy);
    const [o] = await twoWriters(free);
    await direct((trx) => WRITES['a payment'](trx, busy.ws.id, b));
    await direct((trx) => WRITES['a payment'](trx, free.ws.id, o));
    const queued = async (ws: string) =>
      (await db.raw(`SELECT count(*)::int AS n FROM upkeep_payments WHERE workspace_id = ?`, [ws])).rows[0].n;
    // a platform transaction still open on the invoice the busy workspace's payment moves
    const writer = await db.transaction();
    try {
      await writer.raw(`UPDATE invoices SET due_date = due_date WHERE id = ?`, [b.invoiceId]);
      const started = Date.now();
      expect(await foldUpkeep(db, [busy.ws.id, free.ws.id])).to.equal(1);
      expect(Date.now() - started).to.be.lessThan(2000);
      expect([await queued(busy.ws.id), await queued(free.ws.id)]).to.deep.equal([1, 0]);
      // and the writer goes on: nothing of its transaction was aborted
      await writer.raw(`UPDATE invoices SET due_date = due_date WHERE id = ?`, [b.invoiceId]);
    } finally {
      await writer.commit();
    }
    expect(await foldUpkeep(db, [busy.ws.id, free.ws.id])).to.equal(1);
    expect(await queued(busy.ws.id)).to.equal(0);
    expect((await expectRollupsExact(db, busy.ws.id)).totals.collected).to.equal(1000);
  });

  it('queues nothing for the rows of a workspace being deleted (its totals go with it)', async () => {
    const f = await fixture(db);
    await twoWriters(f);
    await direct((trx) => trx('workspaces').where({ id: f.ws.id }).delete());
    const { rows } = await db.raw(`SELECT upkeep_oldest(?) AS oldest`, [f.ws.id]);
    expect(rows[0].oldest).to.equal(null);
  });

  it('drops, without applying them, the queued changes of a workspace deleted since', async () => {
    const f = await fixture(db);
    const [own] = await twoWriters(f);
    await direct((trx) => WRITES['a payment'](trx, f.ws.id, own));
    await db('workspaces').where({ id: f.ws.id }).delete();
    expect(await foldUpkeep(db, [f.ws.id])).to.equal(0);
    const { rows } = await db.raw(`SELECT upkeep_oldest(?) AS oldest`, [f.ws.id]);
    expect(rows[0].oldest).to.equal(null);
  });

  it('a first load into a workspace emptied by direct deletes does not count the deleted rows again', async () => {
    const f = await fixture(db);
    const [own] = await twoWriters(f);
    await direct(async (trx) => {
      for (const table of ['payments', 'invoices', 'bookings'])
        await trx(table).where({ workspace_id: f.ws.id }).delete();
      await trx('vehicles').where({ workspace_id: f.ws.id }).delete();
      await trx('customers').where({ workspace_id: f.ws.id }).delete();
    });
    expect(await upkeepDelaySeconds(db)).to.be.greaterThan(0);
    const customer = randomUUID();
    const invoice = randomUUID();
    await importDocument(db, operator, {
      workspace: f.slug,
      document: {
        customers: [{ id: customer, name: 'Loaded' }],
        invoices: [
          {
            id: invoice,
            number: 'L-1',
            customerId: customer,
            purpose: 'rental',
            issueDate: '2026-11-01',
            dueDate: '2026-12-01',
            total: 9000,
            status: 'issued',
          },
        ],
        payments: [
          {
            id: randomUUID(),
            kind: 'charge',
            amount: 2500,
            customerId: customer,
            invoiceId: invoice,
            at: '2026-11-02T09:00:00Z',
          },
        ],
      },
    });
    await foldUpkeep(db, [f.ws.id]);
    // by hand: the load alone (the deleted invoice of 100000 and its booking are gone, and stay out of the figures)
    const figures = await expectRollupsExact(db, f.ws.id);
    expect([figures.totals.billed, figures.totals.collected, figures.totals.outstanding]).to.deep.equal([
      9000, 2500, 6500,
    ]);
    expect(own.invoiceId).to.not.equal(invoice);
  });

  it("derives a direct writer's event only after the fold of its change, so its figures include it", async () => {
    const workerDb = (await testDatabase()).forRole('worker');
    const { f, endpoint, customerId, invoiceId } = await startedCalendar(db, workerDb, '2026-11-22T08:30:00.000Z');
    const payment = randomUUID();
    await direct((trx) =>
      trx.raw(
        `INSERT INTO payments (id, workspace_id, kind, status, amount, customer_id, invoice_id, at)
       VALUES (?, ?, 'charge', 'captured', 12000, ?, ?, '2026-11-22T08:29:00Z')`,
        [payment, f.ws.id, customerId, invoiceId],
      ),
    );
    const { runDerivedSweep } = await import('../src/webhooks/calendar.js');
    // a fold that could not run for the workspace (another fold holds it): the change waits
    const other = await workerDb.transaction();
    try {
      await other.raw(`SELECT pg_advisory_xact_lock(hashtext('frs.upkeep'), hashtext(?::text))`, [f.ws.id]);
      expect(await runDerivedSweep(workerDb, new Date(), [f.ws.id])).to.equal(0);
    } finally {
      await other.commit();
    }
    expect(await runDerivedSweep(workerDb, new Date(), [f.ws.id])).to.equal(1);
    expect((await f.deliveries(endpoint)).map((d) => [d.event, d.body.data.paymentId])).to.deep.equal([
      ['payment.captured', payment],
    ]);
  });

  it('the worker applies a direct write within a second, and queues its derived event', async () => {
    const workerDb = (await testDatabase()).forRole('worker');
    const { f, endpoint, customerId, invoiceId } = await startedCalendar(db, workerDb, '2026-11-22T08:30:00.000Z');
    const loop = startUpkeepLoop(workerDb, { logger: pino({ level: 'silent' }), workspaceIds: [f.ws.id] });
    try {
      const payment = randomUUID();
      await direct((trx) =>
        trx.raw(
          `INSERT INTO payments (id, workspace_id, kind, status, amount, customer_id, invoice_id, at)
         VALUES (?, ?, 'charge', 'captured', 12000, ?, ?, '2026-11-22T08:29:00Z')`,
          [payment, f.ws.id, customerId, invoiceId],
        ),
      );
      const committed = Date.now();
      let paid = 0;
      while (
        Date.now() - committed < 5000 &&
        (paid = Number((await db('invoices').where({ id: invoiceId }).first()).paid)) !== 12000
      ) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(paid).to.equal(12000);
      expect(Date.now() - committed).to.be.lessThan(1000);
      let list: Awaited<ReturnType<typeof f.deliveries>> = [];
      while (Date.now() - committed < 5000 && (list = await f.deliveries(endpoint)).length === 0)
        await new Promise((resolve) => setTimeout(resolve, 20));
      expect(list.map((d) => [d.event, d.body.data.paymentId, d.body.data.invoice?.id])).to.deep.equal([
        ['payment.captured', payment, invoiceId],
      ]);
    } finally {
      await loop.stop();
    }
  });

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
    const { rows } = await db.raw(
      `SELECT count(*) AS n, count(DISTINCT (status)) AS keys FROM booking_status_counts WHERE workspace_id = ?`,
      [f.ws.id],
    );
    expect(rows[0]).to.deep.equal({ n: rows[0].keys, keys: rows[0].keys });
    const { rows: pending } = await db.raw(
      `SELECT count(*) AS n FROM workspace_totals WHERE workspace_id = ? AND pending`,
      [f.ws.id],
    );
    expect(pending[0].n).to.equal(0);
  });
});
