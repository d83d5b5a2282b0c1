import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from './support/database.js';
import { expectRollupsExact } from './support/rollups.js';
import { operator } from './support/actors.js';
import { buildDemoDocument, seedDemo } from '../seeds/demo.js';
import { seedLarge } from '../seeds/large.js';
import { importDocument } from '../src/core/import/import-document.js';
import { hashApiKey } from '../src/secrets.js';
import { addDays, localDate, zonedInstant } from '../src/time.js';
import type { FleetImportDocument } from '../generated/import-document.js';
import { validators } from '../src/contract/validators.js';

const unique = (prefix: string) =>
  `${prefix}-${Date.now().toString(36)}-${Math.floor(Math.random() * 1e6).toString(36)}`;

/** In-memory checks of one document: a consistent calendar and a busy "today" around `now`. */
function checkCalendar(doc: FleetImportDocument, now: Date, tz: string): void {
  const today = localDate(now, tz);
  const bookings = doc.bookings ?? [];
  const held = bookings.filter((b) => b.status === 'confirmed' || b.status === 'active');
  const blocks = doc.maintenance ?? [];
  for (const a of held) {
    expect(Date.parse(a.dropoffAt)).to.be.above(Date.parse(a.pickupAt));
    // a car that is late back is still out: it holds the car until now
    const aEnd = a.status === 'active' ? Math.max(Date.parse(a.dropoffAt), now.getTime()) : Date.parse(a.dropoffAt);
    for (const b of held) {
      if (a === b || a.vehicleId !== b.vehicleId) continue;
      const bEnd = b.status === 'active' ? Math.max(Date.parse(b.dropoffAt), now.getTime()) : Date.parse(b.dropoffAt);
      const overlap = Date.parse(a.pickupAt) < bEnd && Date.parse(b.pickupAt) < aEnd;
      expect(overlap, `${a.number} and ${b.number} overlap`).to.equal(false);
    }
    for (const m of blocks.filter((x) => x.vehicleId === a.vehicleId)) {
      const overlap = Date.parse(a.pickupAt) < Date.parse(m.endsAt) && Date.parse(m.startsAt) < aEnd;
      expect(overlap, `${a.number} overlaps maintenance`).to.equal(false);
    }
  }
  const on = (iso: string) => localDate(new Date(iso), tz) === today;
  const handovers = bookings.filter((b) => ['confirmed', 'active', 'completed'].includes(b.status) && on(b.pickupAt));
  const returns = bookings.filter((b) => ['active', 'completed'].includes(b.status) && on(b.dropoffAt));
  expect(new Set(handovers.map((b) => b.status))).to.have.keys('confirmed', 'active', 'completed');
  expect(new Set(returns.map((b) => b.status))).to.have.keys('active', 'completed');
  // nothing that has happened is dated in the future
  for (const p of doc.payments ?? []) expect(Date.parse(p.at), `payment ${p.id}`).to.be.at.most(now.getTime());
  for (const b of bookings) {
    if (b.returnedAt) expect(Date.parse(b.returnedAt)).to.be.at.most(now.getTime());
    if (b.status === 'confirmed') expect(Date.parse(b.pickupAt)).to.be.at.least(now.getTime());
    if (b.status === 'active' || b.status === 'completed')
      expect(Date.parse(b.pickupAt)).to.be.at.most(now.getTime() + 10);
  }
}

describe('seeds: demo workspace', () => {
  const now = new Date();
  const tz = 'Asia/Dubai';

  it('buildDemoDocument is deterministic and its ids do not depend on the clock', () => {
    const a = buildDemoDocument(now, tz);
    const b = buildDemoDocument(new Date(now.getTime()), tz);
    expect(JSON.stringify(a)).to.equal(JSON.stringify(b));
    const later = buildDemoDocument(new Date(now.getTime() + 3 * 86_400_000), tz);
    expect(later.vehicles!.map((v) => [v.id, v.plate])).to.deep.equal(a.vehicles!.map((v) => [v.id, v.plate]));
    expect(later.customers!.map((c) => c.id)).to.deep.equal(a.customers!.map((c) => c.id));
    // booking and invoice numbers go with their ids, so a later re-import never swaps them between records
    const numbers = (d: FleetImportDocument) => new Map([...d.bookings!, ...d.invoices!].map((x) => [x.id, x.number]));
    const before = numbers(a);
    for (const [id, number] of numbers(later)) if (before.has(id)) expect(before.get(id)).to.equal(number);
  });

  it('buildDemoDocument validates against the import schema, at any time of day and in other time zones', () => {
    const validate = validators.ImportDocument;
    const instants: Array<[Date, string]> = [
      [now, tz],
      [zonedInstant(localDate(now, tz), '00:00', tz), tz], // exactly midnight: nothing has happened today yet
      [new Date(zonedInstant(localDate(now, tz), '00:00', tz).getTime() + 90_000), tz],
      [zonedInstant(localDate(now, tz), '06:30', tz), tz],
      [new Date(zonedInstant(addDays(localDate(now, tz), 1), '00:00', tz).getTime() - 1), tz], // the day's last millisecond
      [zonedInstant('2026-03-31', '23:30', tz), tz], // month end
      [zonedInstant('2026-03-08', '12:00', 'America/New_York'), 'America/New_York'], // a DST change day
      [zonedInstant('2026-11-01', '01:30', 'America/New_York'), 'America/New_York'],
    ];
    for (const [at, zone] of instants) {
      const doc = buildDemoDocument(at, zone);
      expect(validate(doc), `${at.toISOString()} ${zone}: ${JSON.stringify(validate.errors?.slice(0, 3))}`).to.equal(
        true,
      );
      checkCalendar(doc, at, zone);
    }
  });

  describe('imported into a fresh workspace', () => {
    const slug = unique('demo');
    let db: Knex;
    let ws: string;
    let key: string;
    const today = localDate(now, tz);

    before(async () => {
      ({ db } = await testDatabase());
      const result = await seedDemo(db, slug, now);
      expect(result.workspace).to.equal(slug);
      key = result.key;
      ws = (await db('workspaces').where({ slug }).first('id', 'timezone')).id;
    });

    const one = async (sql: string, bindings: Knex.RawBinding[] = []) => (await db.raw(sql, bindings)).rows;

    it('creates the workspace in Asia/Dubai and a demo API key', async () => {
      expect(await db('workspaces').where({ slug }).first('timezone')).to.deep.equal({ timezone: 'Asia/Dubai' });
      expect(key).to.match(/^frs_[0-9A-Za-z]{32,}$/);
      const row = await db('api_keys').where({ workspace_id: ws }).first('role', 'key_hash');
      expect(row.role).to.equal('demo');
      expect(Buffer.compare(row.key_hash, hashApiKey(key))).to.equal(0);
    });

    it('has handovers and returns today on the workspace calendar', async () => {
      const handovers = await one(
        `SELECT status, count(*)::int AS n FROM bookings WHERE workspace_id = ? AND status IN ('confirmed', 'active', 'completed')
           AND (pickup_at AT TIME ZONE ?)::date = ?::date GROUP BY status`,
        [ws, tz, today],
      );
      expect(Object.fromEntries(handovers.map((r: { status: string; n: number }) => [r.status, r.n]))).to.have.keys(
        'confirmed',
        'active',
        'completed',
      );
      const returns = await one(
        `SELECT status, count(*)::int AS n FROM bookings WHERE workspace_id = ? AND status IN ('active', 'completed')
           AND (dropoff_at AT TIME ZONE ?)::date = ?::date GROUP BY status`,
        [ws, tz, today],
      );
      expect(Object.fromEntries(returns.map((r: { status: string; n: number }) => [r.status, r.n]))).to.have.keys(
        'active',
        'completed',
      );
      expect(handovers.reduce((s: number, r: { n: number }) => s + r.n, 0)).to.be.at.least(4);
      expect(returns.reduce((s: number, r: { n: number }) => s + r.n, 0)).to.be.at.least(4);
    });

    it('has open balances in all four ageing buckets, a void invoice, and fully and partly paid ones', async () => {
      const buckets = await one(
        `SELECT CASE WHEN due_date >= ?::date THEN 'current' WHEN ?::date - due_date <= 30 THEN '1-30'
                     WHEN ?::date - due_date <= 60 THEN '31-60' ELSE '61+' END AS bucket, sum(balance)::bigint AS amount
         FROM invoices WHERE workspace_id = ? AND balance > 0 GROUP BY 1`,
        [today, today, today, ws],
      );
      const amounts = Object.fromEntries(buckets.map((r: { bucket: string; amount: number }) => [r.bucket, r.amount]));
      expect(amounts).to.have.keys('current', '1-30', '31-60', '61+');
      for (const v of Object.values(amounts)) expect(v).to.be.above(0);
      const [kinds] = await one(
        `SELECT count(*) FILTER (WHERE status = 'void')::int AS void,
                count(*) FILTER (WHERE status = 'issued' AND paid >= total AND total > 0)::int AS paid,
                count(*) FILTER (WHERE status = 'issued' AND paid > 0 AND paid < total)::int AS part,
                count(DISTINCT purpose)::int AS purposes
         FROM invoices WHERE workspace_id = ?`,
        [ws],
      );
      expect(kinds.void).to.be.at.least(1);
      expect(kinds.paid).to.be.above(10);
      expect(kinds.part).to.be.at.least(2);
      expect(kinds.purposes).to.equal(7);
    });

    it('has every booking type and status, a late active booking, upcoming ones and extensions', async () => {
      const types = (await one(`SELECT DISTINCT type FROM bookings WHERE workspace_id = ?`, [ws])).map(
        (r: { type: string }) => r.type,
      );
      expect(types).to.have.members(['daily', 'monthly', 'lease', 'rent_to_own']);
      const statuses = (await one(`SELECT DISTINCT status FROM bookings WHERE workspace_id = ?`, [ws])).map(
        (r: { status: string }) => r.status,
      );
      expect(statuses).to.have.members(['pending', 'confirmed', 'active', 'completed', 'canceled']);
      const [late] = await one(
        `SELECT count(*)::int AS n FROM bookings WHERE workspace_id = ? AND status = 'active' AND dropoff_at < ?`,
        [ws, now],
      );
      expect(late.n).to.be.at.least(1);
      const [upcoming] = await one(
        `SELECT count(*)::int AS n FROM bookings WHERE workspace_id = ? AND status = 'confirmed' AND pickup_at > ?`,
        [ws, now],
      );
      expect(upcoming.n).to.be.at.least(3);
      const [extended] = await one(
        `SELECT count(*)::int AS n FROM bookings b JOIN extensions e ON e.booking_id = b.id
         WHERE b.workspace_id = ? AND b.original_dropoff_at < b.dropoff_at AND e.new_dropoff_at = b.dropoff_at`,
        [ws],
      );
      expect(extended.n).to.be.at.least(2);
    });

    it('has vehicle documents expiring today, in 7 days and within 30 days', async () => {
      const rows = await one(
        `SELECT expires_at::text AS d FROM vehicle_documents WHERE workspace_id = ? AND expires_at BETWEEN ?::date AND ?::date`,
        [ws, today, addDays(today, 30)],
      );
      const dates = rows.map((r: { d: string }) => r.d);
      expect(dates).to.include.members([today, addDays(today, 7), addDays(today, 30)]);
    });

    it('is a consistent calendar: no two confirmed or active bookings of one car overlap, nor maintenance', async () => {
      const clashes = await one(
        `SELECT a.number, b.number AS other FROM bookings a JOIN bookings b
           ON a.vehicle_id = b.vehicle_id AND a.id < b.id
          AND tstzrange(a.pickup_at, a.dropoff_at, '[)') && tstzrange(b.pickup_at, b.dropoff_at, '[)')
         WHERE a.workspace_id = ? AND a.status IN ('confirmed', 'active') AND b.status IN ('confirmed', 'active')`,
        [ws],
      );
      expect(clashes).to.deep.equal([]);
      // counting a late car as out until now changes nothing either
      const late = await one(
        `SELECT a.number FROM bookings a JOIN bookings b ON a.vehicle_id = b.vehicle_id AND a.id <> b.id
          AND tstzrange(a.pickup_at, greatest(a.dropoff_at, ?), '[)') && tstzrange(b.pickup_at, b.dropoff_at, '[)')
         WHERE a.workspace_id = ? AND a.status = 'active' AND b.status IN ('confirmed', 'active')`,
        [now, ws],
      );
      expect(late).to.deep.equal([]);
      const blocked = await one(
        `SELECT b.number FROM bookings b JOIN maintenance m ON m.vehicle_id = b.vehicle_id
          AND tstzrange(b.pickup_at, b.dropoff_at, '[)') && m.period
         WHERE b.workspace_id = ? AND b.status IN ('confirmed', 'active')`,
        [ws],
      );
      expect(blocked).to.deep.equal([]);
      const [outOfService] = await one(
        `SELECT count(*)::int AS n FROM bookings b JOIN vehicles v ON v.id = b.vehicle_id
         WHERE b.workspace_id = ? AND b.status = 'active' AND v.state <> 'active'`,
        [ws],
      );
      expect(outOfService.n).to.equal(0);
    });

    it('has collections in each of the last six months, expenses of every kind, deposits held, fines, tolls and integrations', async () => {
      const months = await one(
        `SELECT to_char(at AT TIME ZONE ?, 'YYYY-MM') AS m, sum(net)::bigint AS collected FROM payments
         WHERE workspace_id = ? GROUP BY 1`,
        [tz, ws],
      );
      const collected = Object.fromEntries(months.map((r: { m: string; collected: number }) => [r.m, r.collected]));
      const month0 = today.slice(0, 7);
      for (let k = 0; k < 6; k++) {
        const d = new Date(Date.UTC(Number(month0.slice(0, 4)), Number(month0.slice(5, 7)) - 1 - k, 1));
        const m = d.toISOString().slice(0, 7);
        expect(collected[m], `collections in ${m}`).to.be.above(0);
      }
      const [money] = await one(
        `SELECT count(*) FILTER (WHERE kind = 'refund')::int AS refunds, count(*) FILTER (WHERE kind = 'charge' AND status = 'canceled')::int AS canceled,
                sum(deposit_net)::bigint AS held, count(*) FILTER (WHERE kind = 'deposit_release')::int AS releases
         FROM payments WHERE workspace_id = ?`,
        [ws],
      );
      expect(money.refunds).to.be.at.least(2);
      expect(money.canceled).to.be.at.least(1);
      expect(money.releases).to.be.at.least(1);
      expect(money.held).to.be.above(0);
      const categories = (await one(`SELECT DISTINCT category FROM expenses WHERE workspace_id = ?`, [ws])).map(
        (r: { category: string }) => r.category,
      );
      expect(categories).to.include.members(['fuel', 'maintenance', 'insurance', 'salik', 'cleaning']);
      const [fines] = await one(
        `SELECT count(*) FILTER (WHERE kind = 'fine')::int AS fines, count(*) FILTER (WHERE kind = 'toll')::int AS tolls FROM fines WHERE workspace_id = ?`,
        [ws],
      );
      expect(fines.fines).to.be.at.least(1);
      expect(fines.tolls).to.be.at.least(1);
      const integrations = await one(
        `SELECT status, detail, hint, failing_since FROM integrations WHERE workspace_id = ? ORDER BY status`,
        [ws],
      );
      expect(integrations.map((r: { status: string }) => r.status)).to.include.members(['ok', 'failing']);
      const failing = integrations.find((r: { status: string }) => r.status === 'failing');
      expect(failing.detail).to.be.a('string');
      expect(failing.hint).to.be.a('string');
      expect(failing.failing_since).to.be.instanceOf(Date);
      const [installments] = await one(
        `SELECT count(*) FILTER (WHERE paid_at IS NOT NULL)::int AS paid, count(*) FILTER (WHERE i.due_date < ?::date AND i.invoice_id IS NOT NULL AND v.balance > 0)::int AS overdue,
                count(*) FILTER (WHERE i.due_date BETWEEN ?::date AND ?::date)::int AS soon
         FROM installments i LEFT JOIN invoices v ON v.id = i.invoice_id WHERE i.workspace_id = ?`,
        [today, today, addDays(today, 14), ws],
      );
      expect(installments.paid).to.be.above(5);
      expect(installments.overdue).to.be.at.least(2);
      expect(installments.soon).to.be.at.least(1);
    });

    it('stores customer contact details (that the API must never show) and re-imports in place', async () => {
      const [c] = await one(
        `SELECT count(*)::int AS n, count(phone)::int AS phones, count(email)::int AS emails, count(id_document)::int AS ids FROM customers WHERE workspace_id = ?`,
        [ws],
      );
      expect(c.n).to.equal(40);
      expect(c.phones).to.equal(40);
      expect(c.emails).to.equal(40);
      expect(c.ids).to.equal(40);
      const countAll = async () =>
        (
          await one(
            `SELECT (SELECT count(*) FROM bookings WHERE workspace_id = ?)::int AS b, (SELECT count(*) FROM payments WHERE workspace_id = ?)::int AS p,
                  (SELECT sum(paid) FROM invoices WHERE workspace_id = ?)::bigint AS paid, (SELECT sum(outstanding) FROM customer_ledger WHERE workspace_id = ?)::bigint AS ar`,
            [ws, ws, ws, ws],
          )
        )[0];
      const before = await countAll();
      await importDocument(db, operator, { workspace: slug, document: buildDemoDocument(now, tz, ws) });
      expect(await countAll()).to.deep.equal(before);
    });

    it('can be loaded into a second workspace of the same database, with ids of its own', async () => {
      const other = unique('demo2');
      await seedDemo(db, other, now);
      const rows = await one(
        `SELECT w.slug, count(v.id)::int AS n FROM workspaces w JOIN vehicles v ON v.workspace_id = w.id WHERE w.slug IN (?, ?) GROUP BY w.slug`,
        [slug, other],
      );
      expect(rows.map((r: { n: number }) => r.n)).to.deep.equal([60, 60]);
    });
  });
});

describe('seeds: large generated workspace (small sizes)', () => {
  const slug = unique('large');
  const sizes = { vehicles: 50, bookings: 500, invoices: 500, payments: 750, customers: 100 };
  let db: Knex;
  let ws: string;
  let counts: Record<string, number>;
  const now = new Date();

  before(async () => {
    ({ db } = await testDatabase());
    counts = await seedLarge(db, slug, { ...sizes, now });
    ws = (await db('workspaces').where({ slug }).first('id')).id;
  });

  const one = async (sql: string, bindings: Knex.RawBinding[] = []) => (await db.raw(sql, bindings)).rows;

  it('creates the requested rows and reports the counts per table', async () => {
    expect(counts).to.include({
      owners: 3,
      fleets: 3,
      vehicles: 50,
      customers: 100,
      bookings: 500,
      invoices: 500,
      payments: 750,
      integrations: 2,
    });
    for (const table of ['maintenance', 'vehicle_documents', 'expenses', 'fines', 'extensions', 'installments']) {
      const [row] = await one(`SELECT count(*)::int AS n FROM ${table} WHERE workspace_id = ?`, [ws]);
      expect(counts[table], table).to.equal(row.n);
      expect(row.n, table).to.be.above(0);
    }
    const [plates] = await one(
      `SELECT count(*)::int AS n, count(DISTINCT plate_key)::int AS keys FROM vehicles WHERE workspace_id = ?`,
      [ws],
    );
    expect(plates.keys).to.equal(plates.n);
  });

  it('keeps every rollup equal to its base tables (computed once at the end of the load)', async () => {
    const rollups = await expectRollupsExact(db, ws);
    expect(Number(rollups.totals.collected)).to.be.above(0);
    expect(Number(rollups.totals.outstanding)).to.be.above(0);
    expect(rollups.bookings.filter((b: { collected: number }) => b.collected > 0).length).to.be.above(0);
    expect(rollups.bookings.filter((b: { balance_due: number }) => b.balance_due > 0).length).to.be.above(0);
    expect(rollups.invoicesPaid.filter((i: { paid: number }) => i.paid > 0).length).to.be.above(0);
  });

  it('looks like a real book: mostly paid, open balances in every ageing bucket, cars out now, some late, bookings ahead', async () => {
    const today = localDate(now, 'Asia/Dubai');
    const buckets = await one(
      `SELECT CASE WHEN due_date >= ?::date THEN 'current' WHEN ?::date - due_date <= 30 THEN '1-30'
                   WHEN ?::date - due_date <= 60 THEN '31-60' ELSE '61+' END AS bucket, count(*)::int AS n
       FROM invoices WHERE workspace_id = ? AND balance > 0 GROUP BY 1`,
      [today, today, today, ws],
    );
    expect(buckets.map((r: { bucket: string }) => r.bucket)).to.have.members(['current', '1-30', '31-60', '61+']);
    const [inv] = await one(
      `SELECT count(*) FILTER (WHERE status = 'issued' AND balance = 0)::int AS paid, count(*) FILTER (WHERE status = 'void')::int AS void,
              count(*)::int AS n FROM invoices WHERE workspace_id = ?`,
      [ws],
    );
    expect(inv.paid / inv.n).to.be.above(0.8);
    const [b] = await one(
      `SELECT count(*) FILTER (WHERE status = 'active')::int AS active, count(*) FILTER (WHERE status = 'active' AND dropoff_at < ?)::int AS late,
              count(*) FILTER (WHERE status = 'confirmed' AND pickup_at > ?)::int AS upcoming,
              count(*) FILTER (WHERE status = 'completed')::int AS completed, count(DISTINCT type)::int AS types, count(DISTINCT status)::int AS statuses,
              min(pickup_at) AS first
       FROM bookings WHERE workspace_id = ?`,
      [now, now, ws],
    );
    expect(b.active).to.be.at.least(3);
    expect(b.late).to.be.at.least(1);
    expect(b.upcoming).to.be.at.least(3);
    expect(b.completed / 500).to.be.above(0.8);
    expect(b.types).to.equal(4);
    expect(b.statuses).to.equal(5);
    expect(now.getTime() - b.first.getTime()).to.be.above(2.9 * 365 * 86_400_000);
    const [p] = await one(
      `SELECT count(*) FILTER (WHERE kind = 'refund')::int AS refunds, count(*) FILTER (WHERE kind = 'charge' AND status = 'canceled')::int AS canceled,
              count(*) FILTER (WHERE kind = 'deposit')::int AS deposits, count(*) FILTER (WHERE kind = 'deposit_release')::int AS releases,
              count(*) FILTER (WHERE kind = 'charge' AND (booking_id IS NULL OR invoice_id IS NULL))::int AS unlinked,
              max(at) AS last
       FROM payments WHERE workspace_id = ?`,
      [ws],
    );
    expect(p.refunds).to.be.above(0);
    expect(p.canceled).to.be.above(0);
    expect(p.deposits).to.be.above(0);
    expect(p.releases).to.be.above(0);
    expect(p.unlinked).to.equal(0);
    expect(p.last.getTime()).to.be.at.most(now.getTime());
  });

  it('refuses to seed a workspace that already holds data', async () => {
    let caught: unknown;
    try {
      await seedLarge(db, slug, { vehicles: 10, bookings: 10, invoices: 10, payments: 10, customers: 10, now });
    } catch (err) {
      caught = err;
    }
    expect(String(caught)).to.match(/already holds/);
  });

  it('shows progress as lines, not a redrawn bar, where stderr is not a terminal', async () => {
    const lines: string[] = [];
    const stream = {
      isTTY: false,
      write: (text: string) => lines.push(...text.split('\n').filter(Boolean)),
    } as unknown as NodeJS.WriteStream;
    await seedLarge(db, unique('large-progress'), {
      vehicles: 10,
      bookings: 20,
      invoices: 20,
      payments: 30,
      customers: 10,
      now,
      progress: true,
      progressStream: stream,
      progressIntervalMs: 0,
    });
    expect(lines.length).to.be.above(1);
    for (const line of lines)
      expect(line).to.match(/^seed large: \d{1,3}% \| [a-z ()]+ \| [\d,]+\/[\d,]+ row steps \| \d+m \d\ds$/);
    // 10 + 10 + 2*20 + 2*20 + 2*30 + 60 + 10 + 2*10 + 0 row steps, every one of them done at the end
    expect(lines.at(-1)).to.match(/^seed large: 100% \| running totals \| 250\/250 row steps/);
    expect(lines.join('\n')).not.to.include('\r');
  });
});
