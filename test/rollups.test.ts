import crypto from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import pg from 'pg';
import { testDatabase, waitsForLock } from './support/database.js';
import { seedDemo } from '../seeds/demo.js';
import { expectRollupsExact, kept, recomputed } from './support/rollups.js';
import { deferRollups, finishDeferredRollups } from '../src/db/bulk-load.js';
import { createWorkspace } from '../src/core/workspaces.js';
import { fixture } from './support/fixtures.js';
import { operator } from './support/actors.js';

describe('running totals kept by triggers', () => {
  it('equal the figures recomputed from the base tables after inserts, updates and deletes', async () => {
    const { db } = await testDatabase();
    await seedDemo(db, 'rollups-demo', new Date('2026-11-22T08:00:00.000Z'));
    const ws = (await db('workspaces').where({ slug: 'rollups-demo' }).first('id')).id;
    const before = await kept(db, ws);
    expect(before).to.deep.equal(await recomputed(db, ws));
    expect(Number(before.totals.collected)).to.be.greaterThan(0);

    // Move rows between groups and remove some, in multi-row statements.
    await db.raw(
      `UPDATE invoices SET status = 'void' WHERE id IN (SELECT id FROM invoices WHERE workspace_id = :ws AND balance > 0 ORDER BY id LIMIT 3)`,
      { ws },
    );
    await db.raw(
      `UPDATE invoices SET due_date = due_date - 40 WHERE id IN (SELECT id FROM invoices WHERE workspace_id = :ws AND balance > 0 ORDER BY id DESC LIMIT 5)`,
      { ws },
    );
    await db.raw(
      `UPDATE payments SET status = 'canceled' WHERE id IN (SELECT id FROM payments WHERE workspace_id = :ws AND kind = 'charge' ORDER BY id LIMIT 4)`,
      { ws },
    );
    await db.raw(
      `UPDATE payments SET at = at - interval '45 days', invoice_id = NULL WHERE id IN (SELECT id FROM payments WHERE workspace_id = :ws AND invoice_id IS NOT NULL ORDER BY id DESC LIMIT 4)`,
      { ws },
    );
    // another calendar (the months are rebuilt), then more changes to payments on it
    await db.raw(`UPDATE workspaces SET timezone = 'America/New_York' WHERE id = :ws`, { ws });
    await db.raw(
      `DELETE FROM payments WHERE id IN (SELECT id FROM payments WHERE workspace_id = :ws AND kind IN ('refund', 'deposit_release') ORDER BY id LIMIT 3)`,
      { ws },
    );
    await db.raw(
      `UPDATE bookings SET status = 'canceled' WHERE id IN (SELECT id FROM bookings WHERE workspace_id = :ws AND status = 'pending' ORDER BY id LIMIT 2)`,
      { ws },
    );
    await db.raw(
      `DELETE FROM expenses WHERE id IN (SELECT id FROM expenses WHERE workspace_id = :ws ORDER BY id LIMIT 5)`,
      { ws },
    );
    await db.raw(
      `UPDATE vehicles SET state = 'inactive' WHERE id IN (SELECT id FROM vehicles WHERE workspace_id = :ws AND state = 'active' ORDER BY id LIMIT 2)`,
      { ws },
    );
    // cars out now: one comes back, one goes out, one booking moves car, one rented car goes to the workshop
    await db.raw(
      `UPDATE bookings SET status = 'completed' WHERE id IN (SELECT id FROM bookings WHERE workspace_id = :ws AND status = 'active' ORDER BY id LIMIT 1)`,
      { ws },
    );
    await db.raw(
      `UPDATE bookings SET status = 'active' WHERE id IN (SELECT id FROM bookings WHERE workspace_id = :ws AND status = 'confirmed' ORDER BY id LIMIT 1)`,
      { ws },
    );
    await db.raw(
      `UPDATE bookings SET vehicle_id = (SELECT id FROM vehicles WHERE workspace_id = :ws AND state = 'active' ORDER BY id DESC LIMIT 1)
                  WHERE id IN (SELECT id FROM bookings WHERE workspace_id = :ws AND status = 'active' ORDER BY id DESC LIMIT 1)`,
      { ws },
    );
    await db.raw(
      `UPDATE vehicles SET state = 'in_service' WHERE id IN (SELECT vehicle_id FROM bookings WHERE workspace_id = :ws AND status = 'active' ORDER BY id LIMIT 1)`,
      { ws },
    );
    await db.raw(
      `UPDATE customers SET name = name || ' Renamed' WHERE id IN (SELECT customer_id FROM customer_ledger WHERE workspace_id = :ws ORDER BY customer_id LIMIT 3)`,
      { ws },
    );
    await db.raw(
      `UPDATE vehicles SET model = 'Renamed' WHERE id IN (SELECT id FROM vehicles WHERE workspace_id = :ws ORDER BY id LIMIT 3)`,
      { ws },
    );
    // new plates for cars with bookings; a new booking of a renamed customer; a booking moving to another customer
    await db.raw(
      `UPDATE vehicles SET plate = plate || ' "Q"' WHERE id IN (SELECT vehicle_id FROM bookings WHERE workspace_id = :ws ORDER BY id LIMIT 2)`,
      { ws },
    );
    await db.raw(
      `INSERT INTO bookings (id, workspace_id, number, customer_id, vehicle_id, type, status, pickup_at, dropoff_at, amount)
                  SELECT gen_random_uuid(), workspace_id, number || '-R', (SELECT customer_id FROM customer_ledger WHERE workspace_id = :ws ORDER BY customer_id LIMIT 1),
                         vehicle_id, type, 'canceled', pickup_at, dropoff_at, amount
                  FROM bookings WHERE workspace_id = :ws ORDER BY id LIMIT 2`,
      { ws },
    );
    await db.raw(
      `UPDATE bookings SET customer_id = (SELECT customer_id FROM customer_ledger WHERE workspace_id = :ws ORDER BY customer_id DESC LIMIT 1)
                  WHERE id IN (SELECT id FROM bookings WHERE workspace_id = :ws ORDER BY id DESC LIMIT 1)`,
      { ws },
    );
    // a copy written by hand is taken afresh
    await db.raw(
      `UPDATE bookings SET customer_json = '{"id":null}' WHERE id IN (SELECT id FROM bookings WHERE workspace_id = :ws ORDER BY id LIMIT 1)`,
      { ws },
    );
    await db.raw(
      `INSERT INTO vehicles (id, workspace_id, fleet_id, make, model, plate, category, daily_rate, state)
                  SELECT gen_random_uuid(), workspace_id, fleet_id, 'Newmake', model, plate || ' N', category, daily_rate, state
                  FROM vehicles WHERE workspace_id = :ws ORDER BY id LIMIT 2`,
      { ws },
    );
    await db.raw(
      `DELETE FROM vehicles WHERE workspace_id = :ws AND make = 'Newmake' AND id = (SELECT min(id::text)::uuid FROM vehicles WHERE workspace_id = :ws AND make = 'Newmake')`,
      { ws },
    );

    const after = await kept(db, ws);
    expect(after).to.deep.equal(await recomputed(db, ws));
    expect(after.totals).not.to.deep.equal(before.totals);
    // the copies followed the renames, the new plates (escaped as JSON) and the bookings' new customers
    const copied = after.bookingRefs as Array<{ customer_json: string; vehicle_json: string }>;
    expect(copied.filter((b) => b.customer_json.endsWith(' Renamed"}')).length).to.be.greaterThan(2);
    expect(copied.filter((b) => b.vehicle_json.endsWith(' \\"Q\\""}')).length).to.be.greaterThan(1);
  });

  it('writes a make and model only when its count changes: a car going out rewrites the car, not its model', async () => {
    const { db } = await testDatabase();
    await seedDemo(db, 'rollups-models', new Date('2026-11-22T08:00:00.000Z'));
    const ws = (await db('workspaces').where({ slug: 'rollups-models' }).first('id')).id;
    const booking = await db('bookings')
      .where({ workspace_id: ws, status: 'confirmed' })
      .orderBy('id')
      .first('id', 'vehicle_id');
    const car = await db('vehicles').where({ id: booking.vehicle_id }).first('make', 'model');
    // xmin: the transaction that last wrote the row
    const version = async () =>
      (
        await db.raw(
          `SELECT xmin::text AS v FROM vehicle_models WHERE workspace_id = :ws AND make = :make AND model = :model`,
          { ws, ...car },
        )
      ).rows[0].v;
    const carVersion = async () =>
      (await db.raw(`SELECT xmin::text AS v, active_bookings FROM vehicles WHERE id = ?`, [booking.vehicle_id]))
        .rows[0];
    const [model, vehicle] = [await version(), await carVersion()];
    await db('bookings').where({ id: booking.id }).update({ status: 'active' });
    expect((await carVersion()).active_bookings).to.equal(vehicle.active_bookings + 1);
    expect((await carVersion()).v).not.to.equal(vehicle.v);
    expect(await version()).to.equal(model);
    expect(await kept(db, ws)).to.deep.equal(await recomputed(db, ws));
  });
});

describe('running totals of a bulk load (src/db/bulk-load.ts)', () => {
  const unique = (prefix: string) =>
    `${prefix}-${Date.now().toString(36)}-${Math.floor(Math.random() * 1e6).toString(36)}`;
  const expense = (ws: string, amount: number, date: string) => ({
    id: crypto.randomUUID(),
    workspace_id: ws,
    category: 'insurance',
    amount,
    date,
  });

  it("a direct writer's queue holds every column of its table (a column added to a table must be added to its queue)", async () => {
    const { db } = await testDatabase();
    const columns = async (table: string) =>
      (
        await db.raw(
          `SELECT array_agg(attname::text ORDER BY attname) AS names FROM pg_attribute WHERE attrelid = ?::regclass AND attnum > 0 AND NOT attisdropped`,
          [table],
        )
      ).rows[0].names as string[];
    for (const table of ['payments', 'expenses', 'invoices', 'bookings', 'vehicles']) {
      expect(await columns(`upkeep_${table}`), table).to.deep.equal(
        [...(await columns(table)), 'upkeep_at', 'upkeep_sign'].sort(),
      );
    }
  });

  it('rollups_rebuild knows every rollup: the triggers leaving a bulk-loaded workspace alone are exactly these', async () => {
    const { db } = await testDatabase();
    // A new rollup must be added to rollups_rebuild (migration 20261123002110, restated by later ones) and to this list.
    // A statement trigger leaves the workspace alone through rollup_changes (written out in its static statements since
    // 20261128000700), a row trigger through its WHEN condition.
    const { rows } = await db.raw(`SELECT DISTINCT p.proname FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
                                   WHERE NOT t.tgisinternal AND (p.prosrc LIKE '%rollup_changes(%' OR p.prosrc LIKE '%frs.bulk_load_workspace%'
                                                                 OR pg_get_triggerdef(t.oid) LIKE '%frs.bulk_load_workspace%')
                                   ORDER BY 1`);
    expect(rows.map((r: { proname: string }) => r.proname)).to.deep.equal([
      'bookings_copy_refs',
      'bookings_rollup',
      'bookings_vehicles_out',
      'customer_ledger_totals',
      'expenses_months',
      'expenses_totals',
      'invoices_open_balances',
      'invoices_open_dues',
      'invoices_rollup',
      'payment_slots_days',
      'payment_slots_months',
      'payments_rollup',
      'payments_totals',
      'upkeep_queue_bookings',
      'upkeep_queue_expenses',
      'upkeep_queue_invoices',
      'upkeep_queue_payments',
      'upkeep_queue_vehicles',
      'vehicles_models',
      'vehicles_state_counts',
    ]);
  });

  /**
   * Starts `write` in a transaction of its own, beside a transaction still open, and tells whether it came to wait on a
   * lock (seen in pg_stat_activity, as waitsForLock does) or finished first; `end` awaits it and commits. Not through a
   * server time-out such as lock_timeout: under test:dates' moved clock PostgreSQL's own timers do not fire while a backend
   * waits (see scripts/test-dates.ts), and the test would hang instead of failing.
   */
  async function writer(db: Knex, write: (w: Knex.Transaction) => Promise<unknown>) {
    const w = await db.transaction();
    const { pid } = (await w.raw('SELECT pg_backend_pid() AS pid')).rows[0];
    const written = Promise.resolve(write(w));
    written.catch(() => {}); // awaited by end()
    const waits = await Promise.race([
      written.then(
        () => false,
        () => false,
      ),
      waitsForLock(db, pid),
    ]);
    const end = async () => {
      try {
        await written;
        await w.commit();
      } finally {
        if (!w.isCompleted()) await w.rollback();
      }
    };
    return { waits, end };
  }

  it('leaves only the loaded workspace to the end, keeps other writers waiting, and is exact at commit', async () => {
    const { db } = await testDatabase();
    const other = await createWorkspace(db, operator, { slug: unique('bulk-other') });
    const loaded = await createWorkspace(db, operator, { slug: unique('bulk-loaded') });
    await db('expenses').insert(expense(other.id, 1000, '2026-10-05'));
    let waiting: Awaited<ReturnType<typeof writer>> | undefined;
    try {
      await db.transaction(async (trx) => {
        expect(await deferRollups(trx, loaded.id)).to.equal(true);
        await trx('expenses').insert([
          expense(loaded.id, 70000, '2026-10-05'),
          expense(loaded.id, 30000, '2026-11-01'),
        ]);
        // not counted yet: the triggers leave the loaded workspace alone
        expect((await kept(trx, loaded.id)).expenseMonths).to.deep.equal([]);
        // but keep counting every other workspace, in the same transaction
        await trx('expenses').insert(expense(other.id, 500, '2026-10-20'));
        expect((await kept(trx, other.id)).expenseMonths).to.deep.equal([{ month: '2026-10', amount: 1500 }]);

        // another writer into the loaded workspace waits for the load to commit (it would otherwise go uncounted)
        waiting = await writer(db, (w) => w('expenses').insert(expense(loaded.id, 1, '2026-10-05')));
        expect(waiting.waits, 'the other writer waits for the load').to.equal(true);

        await finishDeferredRollups(trx, loaded.id);
        const rollups = await expectRollupsExact(trx, loaded.id);
        expect(rollups.expenseMonths).to.deep.equal([
          { month: '2026-10', amount: 70000 },
          { month: '2026-11', amount: 30000 },
        ]);
        expect(rollups.totals.expenses).to.equal(100000);
        // the triggers count the loaded workspace again after the rebuild
        await trx('expenses').insert(expense(loaded.id, 5, '2026-11-02'));
      });
    } finally {
      await waiting?.end();
    }
    // the writer that waited went on after the commit, and was counted
    expect((await expectRollupsExact(db, loaded.id)).totals.expenses).to.equal(100006);
    expect((await expectRollupsExact(db, other.id)).totals.expenses).to.equal(1500);
    // a workspace holding records is not bulk-loaded: the triggers keep its totals, and other writers do not wait
    let beside: Awaited<ReturnType<typeof writer>> | undefined;
    try {
      await db.transaction(async (trx) => {
        expect(await deferRollups(trx, loaded.id)).to.equal(false);
        beside = await writer(db, (w) => w('expenses').insert(expense(loaded.id, 7, '2026-11-03')));
        expect(beside.waits, 'the other writer does not wait').to.equal(false);
      });
    } finally {
      await beside?.end();
    }
    expect((await expectRollupsExact(db, loaded.id)).totals.expenses).to.equal(100013);
  });
});

describe("a statement's old and new rows joined in a trigger (migrations/20261128001100)", () => {
  it("are joined by a plan made for the statement's size, not the one-row plan a connection cached first", async () => {
    const { db, url } = await testDatabase();
    const f = await fixture(db);
    const first = await f.booking({
      status: 'pending',
      pickupAt: '2026-03-01T10:00:00Z',
      dropoffAt: '2026-03-03T10:00:00Z',
    });
    const { rows } = await db.raw(
      `INSERT INTO bookings (id, workspace_id, number, customer_id, vehicle_id, type, status, pickup_at, dropoff_at, amount)
       SELECT gen_random_uuid(), b.workspace_id, 'J-' || n, b.customer_id, b.vehicle_id, 'daily', 'pending', b.pickup_at + n * interval '3 days',
              b.dropoff_at + n * interval '3 days', 0
       FROM bookings b CROSS JOIN generate_series(1, 200) n WHERE b.id = ? RETURNING id`,
      [first],
    );
    const many = rows.map((r: { id: string }) => r.id);
    // (its calendar started, as the worker's first sweep starts it: from then on its changes are recorded)
    await db('calendar_state').insert({
      workspace_id: f.ws.id,
      first_swept_at: new Date('2026-03-01T00:00:00Z'),
      last_swept_at: new Date('2026-03-01T00:00:00Z'),
    });
    // (a connection of its own, whose plans are made here; auto_explain shows the plans of the triggers' statements)
    const client = new pg.Client(url);
    await client.connect();
    const plans: string[] = [];
    client.on('notice', (notice) => plans.push(notice.message ?? ''));
    try {
      await client.query(`LOAD 'auto_explain'`);
      await client.query(`SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on;
                          SET auto_explain.log_level = notice; SET client_min_messages = notice`);
      // a one-row statement first: the static statement is planned for one row each side, and that plan is kept
      await client.query(`UPDATE bookings SET status = 'confirmed' WHERE id = $1`, [first]);
      plans.length = 0;
      await client.query(`UPDATE bookings SET status = 'confirmed' WHERE id = ANY ($1::uuid[])`, [many]);
    } finally {
      await client.end();
    }
    const joins = plans.filter((plan) => plan.includes('JOIN old_rows o ON o.id = n.id'));
    expect(joins, 'the join of old and new rows ran').to.have.length(1);
    // the two transition tables are hashed, not scanned once per row of the other (a nested loop over them)
    expect(joins[0]).to.match(/Hash Join[^\n]*\n\s+Hash Cond: \(o\.id = n\.id\)/);
    // and it recorded what it should: each booking confirmed once
    const recorded = await db('entity_changes')
      .whereIn('entity_id', [first, ...many])
      .where({ event: 'booking.confirmed' })
      .count({ n: '*' });
    expect(Number(recorded[0].n)).to.equal(201);
  });
});
