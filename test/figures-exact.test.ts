import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from './support/database.js';
import { fixture, type Fixture } from './support/fixtures.js';
import { fleetSummary } from '../src/queries/fleet.js';
import { bookingSummary } from '../src/queries/bookings.js';
import { operationsToday } from '../src/queries/today.js';
import { financeOverview } from '../src/queries/finance.js';
import { receivables } from '../src/queries/receivables.js';
import { searchVehicles } from '../src/queries/vehicles.js';
import { importDocument } from '../src/core/import/import-document.js';
import { writeRecords } from '../src/core/import/records.js';
import { startImport } from '../src/core/import/jobs.js';
import { cliAudit } from '../src/core/audit.js';
import { createKnex } from '../src/db/database.js';
import { foldUpkeep } from '../src/db/upkeep.js';
import { operator, operatorWith } from './support/actors.js';

// Issue 32, point 7: after a randomised run of concurrent writers, every figure of the read API equals the same figure
// computed from the base tables by a plain SQL query written here, independently of the running totals the service
// keeps. The writers are kinds (WRITER_KINDS): several direct SQL writers of the platform's kind at once, the CLI
// import's core, batch writes (writeRecords, with versions, stale versions and deletes), import jobs, and the worker's
// fold of the append-only totals; a kind is a function, so another joins the run by adding one. The randomness has a fixed seed, printed; the clock is fixed (NOW), and
// every record's time is written relative to it, so nothing depends on today's date.
const SEED = Number(process.env.FRS_FIGURES_SEED ?? 20261128);
// 12:00 on Sunday 22 November 2026 in Asia/Dubai (UTC+4)
const NOW = new Date('2026-11-22T08:00:00.000Z');
const TODAY = '2026-11-22';

/** A small deterministic generator (mulberry32). */
function random(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  return { next, int, pick: <T>(xs: readonly T[]): T => xs[int(xs.length)] };
}
type Random = ReturnType<typeof random>;

const hours = (h: number) => new Date(NOW.getTime() + h * 3_600_000);
const day = (d: number) => new Date(NOW.getTime() + d * 86_400_000).toISOString().slice(0, 10);

/** What every writer of the run shares: the workspace and its base records (made before the run). */
interface Run {
  db: Knex;
  f: Fixture;
  fleetId: string;
  vehicles: string[];
  customers: string[];
  /** Deadlocks and serialization failures retried, by writer kind. */
  retried: Map<string, number>;
}

interface WriterKind {
  name: string;
  /** How many run at once. */
  concurrency: number;
  run(run: Run, rng: Random, label: string): Promise<void>;
}

/** One transaction, retried when the database chose it as a deadlock's or a serialization failure's victim. */
async function transaction(run: Run, label: string, work: (trx: Knex.Transaction) => Promise<unknown>): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await run.db.transaction(async (trx) => {
        await work(trx);
      });
      return;
    } catch (err) {
      const code = (err as { code?: string }).code;
      if ((code !== '40P01' && code !== '40001') || attempt >= 5) throw err;
      run.retried.set(label, (run.retried.get(label) ?? 0) + 1);
    }
  }
}

/** `work` (a whole import), again when the database chose it as a deadlock's or a serialization failure's victim. */
async function retried(run: Run, label: string, work: () => Promise<unknown>): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await work();
      return;
    } catch (err) {
      const code =
        (err as { code?: string; cause?: { code?: string } }).code ??
        (err as { cause?: { code?: string } }).cause?.code;
      if ((code !== '40P01' && code !== '40001') || attempt >= 5) throw err;
      run.retried.set(label, (run.retried.get(label) ?? 0) + 1);
    }
  }
}

/** A direct SQL writer: 60 one-row transactions of the platform's kinds, on its own records and shared ones. */
const directSql: WriterKind = {
  name: 'direct SQL',
  concurrency: 4,
  async run(run, rng, label) {
    const ws = run.f.ws.id;
    const bookings: Array<{ id: string; customer: string; status: string }> = [];
    const invoices: Array<{ id: string; customer: string; booking: string | null }> = [];
    const payments: string[] = [];
    const expenses: string[] = [];
    const STATUSES = ['pending', 'confirmed', 'active', 'completed', 'canceled'];
    for (let n = 0; n < 60; n++) {
      const kind = rng.pick([
        'booking',
        'booking',
        'status',
        'status',
        'rename',
        'invoice',
        'invoice',
        'payment',
        'payment',
        'payment',
        'cancel payment',
        'delete payment',
        'due date',
        'void',
        'expense',
        'delete expense',
        'vehicle state',
        'delete invoice',
      ] as const);
      const customer = rng.pick(run.customers);
      await transaction(run, label, async (trx) => {
        if (kind === 'booking' || bookings.length === 0) {
          const id = randomUUID();
          const pickup = hours(-72 + rng.int(24 * 7));
          const status = rng.pick(STATUSES);
          await trx('bookings').insert({
            id,
            workspace_id: ws,
            number: `${label}-${n}`,
            customer_id: customer,
            vehicle_id: rng.pick(run.vehicles),
            type: 'daily',
            status,
            pickup_at: pickup,
            dropoff_at: new Date(pickup.getTime() + (1 + rng.int(72)) * 3_600_000),
            amount: 1000 * (1 + rng.int(90)),
          });
          bookings.push({ id, customer, status });
        } else if (kind === 'status') {
          const b = rng.pick(bookings);
          b.status = rng.pick(STATUSES);
          await trx('bookings').where({ id: b.id }).update({ status: b.status });
        } else if (kind === 'rename') {
          await trx('customers')
            .where({ id: customer })
            .update({ name: `Customer ${label}-${n}` });
        } else if (kind === 'invoice' || invoices.length === 0) {
          const b = rng.next() < 0.6 ? rng.pick(bookings) : undefined;
          const id = randomUUID();
          await trx('invoices').insert({
            id,
            workspace_id: ws,
            number: `${label}-I${n}`,
            customer_id: b?.customer ?? customer,
            booking_id: b?.id ?? null,
            purpose: 'rental',
            issue_date: day(-100),
            due_date: day(-95 + rng.int(125)),
            total: 500 * (1 + rng.int(200)),
            status: rng.next() < 0.9 ? 'issued' : 'void',
          });
          invoices.push({ id, customer: b?.customer ?? customer, booking: b?.id ?? null });
        } else if (kind === 'payment') {
          const i = rng.next() < 0.8 ? rng.pick(invoices) : undefined;
          const id = randomUUID();
          await trx('payments').insert({
            id,
            workspace_id: ws,
            kind: rng.pick(['charge', 'charge', 'charge', 'refund', 'deposit', 'deposit_release']),
            status: rng.next() < 0.9 ? 'captured' : 'canceled',
            amount: 100 * (1 + rng.int(300)),
            customer_id: i?.customer ?? customer,
            booking_id: i?.booking ?? null,
            invoice_id: i?.id ?? null,
            at: hours(-24 * 180 + rng.int(24 * 180 - 1)),
          });
          payments.push(id);
        } else if (kind === 'cancel payment' && payments.length > 0) {
          await trx('payments')
            .where({ id: rng.pick(payments) })
            .update({ status: 'canceled' });
        } else if (kind === 'delete payment' && payments.length > 0) {
          const id = payments.splice(rng.int(payments.length), 1)[0];
          await trx('payments').where({ id }).delete();
        } else if (kind === 'due date') {
          await trx('invoices')
            .where({ id: rng.pick(invoices).id })
            .update({ due_date: day(-95 + rng.int(125)) });
        } else if (kind === 'void') {
          await trx('invoices')
            .where({ id: rng.pick(invoices).id })
            .update({ status: 'void' });
        } else if (kind === 'expense') {
          const id = randomUUID();
          await trx('expenses').insert({
            id,
            workspace_id: ws,
            category: 'fuel',
            amount: 100 * (1 + rng.int(50)),
            date: day(-rng.int(200)),
          });
          expenses.push(id);
        } else if (kind === 'delete expense' && expenses.length > 0) {
          await trx('expenses')
            .where({ id: expenses.splice(rng.int(expenses.length), 1)[0] })
            .delete();
        } else if (kind === 'vehicle state') {
          await trx('vehicles')
            .where({ id: rng.pick(run.vehicles) })
            .update({ state: rng.pick(['active', 'active', 'in_service', 'inactive']) });
        } else if (kind === 'delete invoice') {
          // an invoice nobody paid (the platform deletes its drafts); one with payments stays
          const i = invoices.splice(rng.int(invoices.length), 1)[0];
          await trx.raw(
            'DELETE FROM invoices i WHERE i.id = ? AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.invoice_id = i.id)',
            [i.id],
          );
        }
      });
    }
  },
};

/** A small document of new customers, with a booking, an invoice and a payment each: what the import kinds load. */
function smallDocument(run: Run, rng: Random, label: string) {
  const customers = Array.from({ length: 3 }, (_, c) => ({ id: randomUUID(), name: `Imported ${label}-${c}` }));
  const bookings = customers.map((c, b) => {
    const pickup = hours(-48 + rng.int(96));
    return {
      id: randomUUID(),
      number: `${label}-B${b}`,
      customerId: c.id,
      vehicleId: rng.pick(run.vehicles),
      type: 'daily',
      status: rng.pick(['confirmed', 'active', 'completed']),
      pickupAt: pickup.toISOString(),
      dropoffAt: new Date(pickup.getTime() + (2 + rng.int(48)) * 3_600_000).toISOString(),
      amount: 1000 * (1 + rng.int(50)),
    };
  });
  const invoices = bookings.map((b, i) => ({
    id: randomUUID(),
    number: `${label}-I${i}`,
    customerId: b.customerId,
    bookingId: b.id,
    purpose: 'rental',
    issueDate: day(-30),
    dueDate: day(-40 + rng.int(60)),
    total: 1000 * (1 + rng.int(40)),
    status: 'issued',
  }));
  const payments = invoices.map((i) => ({
    id: randomUUID(),
    kind: 'charge',
    amount: 100 * (1 + rng.int(100)),
    customerId: i.customerId,
    bookingId: i.bookingId,
    invoiceId: i.id,
    at: hours(-rng.int(24 * 60)).toISOString(),
  }));
  return { customers, bookings, invoices, payments };
}

/** The CLI import's core (fleet-admin import): two small documents. */
const cliImport: WriterKind = {
  name: 'CLI import',
  concurrency: 1,
  async run(run, rng, label) {
    for (let k = 0; k < 2; k++) {
      const doc = smallDocument(run, rng, `${label}-${k}`);
      await retried(run, label, () => importDocument(run.db, operator, { workspace: run.f.slug, document: doc }));
    }
  },
};

/**
 * Batch writes (writeRecords): a small document with versions, then a newer version of one payment (a voided invoice
 * and a changed amount), a stale one that must change nothing, and the delete of another payment.
 */
const batchWrites: WriterKind = {
  name: 'batch writes',
  concurrency: 2,
  async run(run, rng, label) {
    for (let k = 0; k < 3; k++) {
      const doc = smallDocument(run, rng, `${label}-${k}`);
      const v1 = Object.fromEntries(
        Object.entries(doc).map(([key, rows]) => [key, rows.map((r) => ({ ...r, version: 1 }))]),
      );
      await transaction(run, label, (trx) =>
        writeRecords(trx, operatorWith(cliAudit()), { workspaceId: run.f.ws.id, body: { upsert: v1 } }),
      );
      const [first, second] = doc.payments;
      const newer = { ...first, amount: first.amount + 100 * (1 + rng.int(50)), version: 3 };
      const stale = { ...first, amount: 1, version: 2 };
      await transaction(run, label, (trx) =>
        writeRecords(trx, operatorWith(cliAudit()), {
          workspaceId: run.f.ws.id,
          body: {
            upsert: { payments: [newer], invoices: [{ ...doc.invoices[2], status: 'void', version: 2 }] },
            delete: { payments: [{ id: second.id, version: 2 }] },
          },
        }),
      );
      await transaction(run, label, (trx) =>
        writeRecords(trx, operatorWith(cliAudit()), {
          workspaceId: run.f.ws.id,
          body: { upsert: { payments: [stale] } },
        }),
      );
    }
  },
};

/** Import jobs (createImport's core): a small document streamed in two pieces. */
const importJobs: WriterKind = {
  name: 'import jobs',
  concurrency: 1,
  async run(run, rng, label) {
    for (let k = 0; k < 2; k++) {
      const text = JSON.stringify(smallDocument(run, rng, `${label}-${k}`));
      const half = Math.floor(text.length / 2);
      // a job is all or nothing: one chosen as a deadlock's victim is sent again, as the platform would
      for (let attempt = 0; ; attempt++) {
        const { done } = await startImport(run.db, operatorWith(cliAudit()), {
          workspaceId: run.f.ws.id,
          body: Readable.from([text.slice(0, half), text.slice(half)]),
          format: 'json',
        });
        const job = await done;
        if (job.phase === 'succeeded') break;
        if (attempt >= 5) throw new Error(`import job ${job.id} ended ${job.phase}: ${JSON.stringify(job.error)}`);
        run.retried.set(label, (run.retried.get(label) ?? 0) + 1);
      }
    }
  },
};

/** The worker's fold of the append-only running totals, now and then during the run. */
const fold: WriterKind = {
  name: "the worker's fold",
  concurrency: 1,
  async run(run, rng) {
    for (let k = 0; k < 8; k++) {
      await new Promise((resolve) => setTimeout(resolve, 50 + rng.int(200)));
      await foldUpkeep(run.db, [run.f.ws.id]);
      await run.db.raw('SELECT rollups_compact()');
    }
  },
};

export const WRITER_KINDS: WriterKind[] = [directSql, cliImport, batchWrites, importJobs, fold];

/** The figures of the read API, from the query modules the API answers with. */
async function served(db: Knex, ws: Fixture['ws']) {
  const window = { from: hours(2), to: hours(30) };
  return {
    fleet: await fleetSummary(db, ws, NOW),
    bookings: await bookingSummary(db, ws, NOW),
    operations: await operationsToday(db, ws, NOW),
    finance: await financeOverview(db, ws, NOW),
    receivables: await receivables(db, ws, { limit: 200 }, NOW).then(({ rows, totals }) => ({ rows, totals })),
    vehicles: (await searchVehicles(db, ws, { limit: 200 }, NOW)).rows,
    vehiclesInWindow: (await searchVehicles(db, ws, { limit: 200, ...window }, NOW)).rows,
    window,
  };
}

/** The same figures, each by a plain query over the base tables. */
async function computed(db: Knex, ws: Fixture['ws'], window: { from: Date; to: Date }) {
  const b = {
    ws: ws.id,
    now: NOW.toISOString(),
    today: TODAY,
    tz: ws.timezone,
    from: window.from.toISOString(),
    to: window.to.toISOString(),
  };
  const one = async <T = Record<string, any>>(sql: string): Promise<T> => (await db.raw(sql, b)).rows[0] as T;
  const all = async <T = Record<string, any>>(sql: string): Promise<T[]> => (await db.raw(sql, b)).rows as T[];
  const rentedNow = `EXISTS (SELECT 1 FROM bookings x WHERE x.vehicle_id = v.id AND x.status = 'active')`;
  const f = await one(`SELECT count(*) AS total, count(*) FILTER (WHERE v.state = 'active' AND ${rentedNow}) AS rented,
      count(*) FILTER (WHERE v.state = 'active' AND NOT ${rentedNow}) AS available,
      count(*) FILTER (WHERE v.state = 'in_service') AS in_service, count(*) FILTER (WHERE v.state = 'inactive') AS inactive
    FROM vehicles v WHERE v.workspace_id = :ws`);
  const fleet = {
    total: f.total,
    byStatus: { available: f.available, rented: f.rented, in_service: f.in_service, inactive: f.inactive },
    available: f.available,
    rented: f.rented,
    inService: f.in_service,
    utilization:
      f.total - f.in_service - f.inactive === 0
        ? 0
        : Math.round((f.rented / (f.total - f.in_service - f.inactive)) * 10000) / 10000,
  };
  const dayStart = `((CAST(:today AS date))::timestamp AT TIME ZONE :tz)`;
  const dayEnd = `((CAST(:today AS date) + 1)::timestamp AT TIME ZONE :tz)`;
  const s = await one(`SELECT
      count(*) FILTER (WHERE status = 'pending') AS pending, count(*) FILTER (WHERE status = 'confirmed') AS confirmed,
      count(*) FILTER (WHERE status = 'active') AS active, count(*) FILTER (WHERE status = 'completed') AS completed,
      count(*) FILTER (WHERE status = 'canceled') AS canceled, count(*) AS total,
      count(*) FILTER (WHERE status = 'confirmed' AND pickup_at > CAST(:now AS timestamptz)) AS upcoming,
      count(*) FILTER (WHERE status = 'active' AND dropoff_at >= ${dayStart} AND dropoff_at < ${dayEnd}) AS due_returns,
      count(*) FILTER (WHERE status = 'active' AND dropoff_at < CAST(:now AS timestamptz)) AS overdue,
      (SELECT coalesce(sum(net), 0) FROM payments WHERE workspace_id = :ws AND booking_id IS NOT NULL) AS revenue
    FROM bookings WHERE workspace_id = :ws`);
  const bookings = {
    byStatus: {
      pending: s.pending,
      confirmed: s.confirmed,
      active: s.active,
      completed: s.completed,
      canceled: s.canceled,
    },
    total: s.total,
    active: s.active,
    upcoming: s.upcoming,
    dueReturns: s.due_returns,
    overdue: s.overdue,
    revenueCollected: s.revenue,
  };
  const items = (time: 'pickup' | 'dropoff', statuses: string) =>
    all(`
    SELECT b.id AS "bookingId", json_build_object('id', c.id, 'name', c.name) AS customer, json_build_object('id', v.id, 'plate', v.plate) AS vehicle,
           to_char(b.${time}_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS time, b.amount,
           (SELECT coalesce(sum(i.balance), 0) FROM invoices i WHERE i.booking_id = b.id) AS "balanceDue"
    FROM bookings b JOIN customers c ON c.id = b.customer_id JOIN vehicles v ON v.id = b.vehicle_id
    WHERE b.workspace_id = :ws AND b.status IN (${statuses}) AND b.${time}_at >= ${dayStart} AND b.${time}_at < ${dayEnd}
    ORDER BY b.${time}_at, b.id`);
  const operations = {
    handovers: await items('pickup', `'confirmed', 'active', 'completed'`),
    returns: await items('dropoff', `'active', 'completed'`),
  };
  // ageing by whole local days past due: current (not yet), 1-30, 31-60, 61+
  const aging = `
      coalesce(sum(i.balance) FILTER (WHERE i.due_date >= CAST(:today AS date)), 0) AS current,
      coalesce(sum(i.balance) FILTER (WHERE CAST(:today AS date) - i.due_date BETWEEN 1 AND 30), 0) AS d1_30,
      coalesce(sum(i.balance) FILTER (WHERE CAST(:today AS date) - i.due_date BETWEEN 31 AND 60), 0) AS d31_60,
      coalesce(sum(i.balance) FILTER (WHERE CAST(:today AS date) - i.due_date > 60), 0) AS d60p`;
  const a = await one(
    `SELECT coalesce(sum(i.balance), 0) AS outstanding, ${aging} FROM invoices i WHERE i.workspace_id = :ws`,
  );
  const money = await one(`SELECT coalesce(sum(net), 0) AS collected, coalesce(sum(deposit_net), 0) AS deposits,
      (SELECT coalesce(sum(amount), 0) FROM expenses WHERE workspace_id = :ws) AS expenses FROM payments WHERE workspace_id = :ws`);
  const monthly = await all(`
    SELECT to_char(m, 'YYYY-MM') AS month,
           (SELECT coalesce(sum(p.net), 0) FROM payments p WHERE p.workspace_id = :ws AND date_trunc('month', p.at AT TIME ZONE :tz) = m) AS collected,
           (SELECT coalesce(sum(e.amount), 0) FROM expenses e WHERE e.workspace_id = :ws AND date_trunc('month', e.date) = m) AS expenses
    FROM generate_series(date_trunc('month', CAST(:today AS date)) - interval '5 months', date_trunc('month', CAST(:today AS date)), interval '1 month') m
    ORDER BY m`);
  const top = await all(`
    SELECT json_build_object('id', v.id, 'plate', v.plate) AS vehicle, json_build_object('id', fl.id, 'code', fl.code, 'name', fl.name) AS fleet,
           r.revenue, r.bookings
    FROM (SELECT b.vehicle_id, (SELECT coalesce(sum(p.net), 0) FROM payments p JOIN bookings x ON x.id = p.booking_id WHERE x.vehicle_id = b.vehicle_id) AS revenue,
                 count(*) FILTER (WHERE b.status <> 'canceled') AS bookings
          FROM bookings b WHERE b.workspace_id = :ws GROUP BY b.vehicle_id) r
    JOIN vehicles v ON v.id = r.vehicle_id JOIN fleets fl ON fl.id = v.fleet_id
    WHERE r.revenue > 0 ORDER BY r.revenue DESC, v.plate LIMIT 5`);
  const finance = {
    collectedAllTime: money.collected,
    collectedThisMonth: monthly[5].collected,
    arOutstanding: a.outstanding,
    arOverdue: a.d1_30 + a.d31_60 + a.d60p,
    depositsHeld: money.deposits,
    expenses: money.expenses,
    netProfitAllTime: money.collected - money.expenses,
    aging: [
      { bucket: 'current', amount: a.current },
      { bucket: '1-30', amount: a.d1_30 },
      { bucket: '31-60', amount: a.d31_60 },
      { bucket: '61+', amount: a.d60p },
    ],
    monthly: monthly.map((m) => ({
      month: m.month,
      collected: m.collected,
      expenses: m.expenses,
      net: m.collected - m.expenses,
    })),
    topVehicles: top,
  };
  const receivableRows = await all(`
    SELECT c.id AS "customerId", c.name,
           coalesce(sum(i.total) FILTER (WHERE i.status = 'issued'), 0) AS billed, coalesce(sum(i.paid) FILTER (WHERE i.status = 'issued'), 0) AS collected,
           coalesce(sum(i.balance), 0) AS outstanding, ${aging}, count(*) FILTER (WHERE i.balance > 0) AS "openInvoices"
    FROM invoices i JOIN customers c ON c.id = i.customer_id WHERE i.workspace_id = :ws
    GROUP BY c.id, c.name HAVING count(*) FILTER (WHERE i.status = 'issued') > 0
    ORDER BY outstanding DESC, c.name, c.id`);
  const t = await one(`SELECT coalesce(sum(i.total) FILTER (WHERE i.status = 'issued'), 0) AS billed,
      coalesce(sum(i.paid) FILTER (WHERE i.status = 'issued'), 0) AS collected, coalesce(sum(i.balance), 0) AS outstanding, ${aging},
      count(*) FILTER (WHERE i.balance > 0) AS "openInvoices", count(DISTINCT i.customer_id) FILTER (WHERE i.status = 'issued') AS customers
    FROM invoices i WHERE i.workspace_id = :ws`);
  const vehicleRows = (withWindow: boolean) =>
    all(`
    SELECT v.id, v.make, v.model, v.plate, v.category, v.daily_rate AS "dailyRate"${
      withWindow
        ? `,
           v.state = 'active'
           AND NOT EXISTS (SELECT 1 FROM bookings x WHERE x.vehicle_id = v.id AND x.status IN ('confirmed', 'active')
                           AND x.pickup_at < CAST(:to AS timestamptz)
                           AND (CASE WHEN x.status = 'active' THEN greatest(x.dropoff_at, CAST(:now AS timestamptz)) ELSE x.dropoff_at END) > CAST(:from AS timestamptz))
           AND NOT EXISTS (SELECT 1 FROM maintenance m WHERE m.vehicle_id = v.id AND m.starts_at < CAST(:to AS timestamptz) AND m.ends_at > CAST(:from AS timestamptz))
           AS available`
        : ''
    }
    FROM vehicles v WHERE v.workspace_id = :ws ORDER BY v.make, v.model, v.plate`);
  return {
    fleet,
    bookings,
    operations,
    finance,
    receivables: { rows: receivableRows, totals: t },
    vehicles: await vehicleRows(false),
    vehiclesInWindow: await vehicleRows(true),
    window,
  };
}

describe('the figures stay exact after concurrent writers of every kind (issue 32)', () => {
  it(`equal a plain computation from the base tables after a randomised run (seed ${SEED})`, async function () {
    this.timeout(180_000);
    console.log(`      figures-exact seed: ${SEED} (FRS_FIGURES_SEED to replay)`);
    const { db, url } = await testDatabase();
    // The writers' sessions say nothing about upkeep, as the platform's do (the tests' own are inline): direct SQL is
    // queued for the worker's fold, the service's own writers keep their totals in their own transactions.
    const writers = createKnex(url, 10, `SET frs.upkeep = 'deferred'`);
    try {
      const f = await fixture(db, { timezone: 'Asia/Dubai' });
      const fleetId = await f.fleet({ code: 'F1', name: 'Fleet One' });
      const rng = random(SEED);
      const vehicles: string[] = [];
      for (let k = 0; k < 12; k++) {
        vehicles.push(
          await f.vehicle({
            fleetId,
            make: rng.pick(['Toyota', 'Nissan', 'Kia']),
            model: rng.pick(['A', 'B']),
            plate: `Dubai ${k} ${1000 + rng.int(9000)}`,
          }),
        );
      }
      await db('maintenance').insert({
        id: randomUUID(),
        workspace_id: f.ws.id,
        vehicle_id: vehicles[0],
        starts_at: hours(10),
        ends_at: hours(20),
      });
      const customers: string[] = [];
      for (let k = 0; k < 10; k++) customers.push(await f.customer({ name: `Customer ${k}` }));
      const run: Run = { db: writers, f, fleetId, vehicles, customers, retried: new Map() };

      await Promise.all(
        WRITER_KINDS.flatMap((kind, k) =>
          Array.from({ length: kind.concurrency }, (_, n) =>
            kind.run(run, random(SEED + 1000 * (k + 1) + n), `${kind.name.replace(/\W+/g, '')}${n}`),
          ),
        ),
      );
      if (run.retried.size > 0)
        console.log(
          `      retried (deadlock or serialization failure): ${JSON.stringify(Object.fromEntries(run.retried))}`,
        );

      // the direct writers' last changes applied, as the worker's next tick does
      await foldUpkeep(db, [f.ws.id]);
      const answers = await served(db, f.ws);
      const plain = await computed(db, f.ws, answers.window);
      expect(answers).to.deep.equal(plain);
      // the run wrote something worth checking: every section has figures
      expect(plain.bookings.total).to.be.greaterThan(20);
      expect(plain.finance.collectedAllTime).to.not.equal(0);
      expect(plain.receivables.rows.length).to.be.greaterThan(5);
      expect(plain.operations.handovers.length + plain.operations.returns.length).to.be.greaterThan(0);
      // and after a last fold, the same
      await db.raw('SELECT rollups_compact()');
      expect(await served(db, f.ws)).to.deep.equal(plain);
    } finally {
      await writers.destroy();
    }
  });
});
