import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from './support/database.js';
import { seedDemo } from '../seeds/demo.js';

// The running totals the triggers keep must equal the same figures recomputed from the base tables, after
// inserts, updates that move rows between groups, and deletes.
async function recomputed(db: Knex, ws: string) {
  const one = async (sql: string) => (await db.raw(sql, { ws })).rows;
  return {
    invoicesPaid: await one(`SELECT i.id, coalesce(sum(p.net), 0) AS paid FROM invoices i LEFT JOIN payments p ON p.invoice_id = i.id WHERE i.workspace_id = :ws GROUP BY i.id ORDER BY i.id`),
    bookings: await one(`SELECT b.id, coalesce((SELECT sum(net) FROM payments p WHERE p.booking_id = b.id), 0) AS collected,
                                coalesce((SELECT sum(balance) FROM invoices i WHERE i.booking_id = b.id), 0) AS balance_due
                         FROM bookings b WHERE b.workspace_id = :ws ORDER BY b.id`),
    slots: await one(`SELECT date_bin('15 minutes', at, timestamptz '2000-01-01T00:00:00Z') AS slot, sum(net) AS collected,
                             coalesce(sum(net) FILTER (WHERE booking_id IS NOT NULL), 0) AS booking_collected, sum(deposit_net) AS deposits
                      FROM payments WHERE workspace_id = :ws GROUP BY 1 HAVING sum(net) <> 0 OR sum(deposit_net) <> 0
                        OR coalesce(sum(net) FILTER (WHERE booking_id IS NOT NULL), 0) <> 0 ORDER BY 1`),
    ledger: await one(`SELECT customer_id, sum(total) FILTER (WHERE status = 'issued') AS billed, sum(paid) FILTER (WHERE status = 'issued') AS collected,
                              sum(balance) AS outstanding, count(*) FILTER (WHERE balance > 0) AS open_invoices, count(*) FILTER (WHERE status = 'issued') AS invoices
                       FROM invoices WHERE workspace_id = :ws GROUP BY 1 HAVING count(*) FILTER (WHERE status = 'issued') > 0 ORDER BY 1`),
    vehicles: await one(`SELECT vehicle_id, sum(collected) AS revenue, count(*) FILTER (WHERE status <> 'canceled') AS bookings
                         FROM bookings WHERE workspace_id = :ws GROUP BY 1 ORDER BY 1`),
    statuses: await one(`SELECT status, count(*) AS count FROM bookings WHERE workspace_id = :ws GROUP BY 1 ORDER BY 1`),
    openBalances: await one(`SELECT due_date, sum(balance) AS balance, count(*) AS invoices FROM invoices WHERE workspace_id = :ws AND balance > 0 GROUP BY 1 ORDER BY 1`),
    days: await one(`SELECT (at AT TIME ZONE 'UTC')::date AS day, sum(net) AS collected FROM payments WHERE workspace_id = :ws GROUP BY 1 HAVING sum(net) <> 0 ORDER BY 1`),
    months: await one(`SELECT to_char(p.at AT TIME ZONE w.timezone, 'YYYY-MM') AS month, sum(p.net) AS collected
                       FROM payments p JOIN workspaces w ON w.id = p.workspace_id WHERE p.workspace_id = :ws GROUP BY 1 HAVING sum(p.net) <> 0 ORDER BY 1`),
    expenseMonths: await one(`SELECT to_char(date, 'YYYY-MM') AS month, sum(amount) AS amount FROM expenses WHERE workspace_id = :ws GROUP BY 1 ORDER BY 1`),
    vehicleStates: await one(`SELECT state, count(*) AS count,
                                     count(*) FILTER (WHERE EXISTS (SELECT 1 FROM bookings b WHERE b.vehicle_id = v.id AND b.status = 'active')) AS rented
                              FROM vehicles v WHERE workspace_id = :ws GROUP BY 1 ORDER BY 1`),
    activeBookings: await one(`SELECT v.id, (SELECT count(*) FROM bookings b WHERE b.vehicle_id = v.id AND b.status = 'active') AS active_bookings
                               FROM vehicles v WHERE v.workspace_id = :ws ORDER BY 1`),
    vehicleModels: await one(`SELECT make, model, count(*) AS vehicles FROM vehicles WHERE workspace_id = :ws GROUP BY 1, 2 ORDER BY 1, 2`),
    ledgerNames: await one(`SELECT c.id AS customer_id, c.name FROM customers c WHERE c.workspace_id = :ws
                              AND EXISTS (SELECT 1 FROM invoices i WHERE i.customer_id = c.id) ORDER BY 1`),
    totals: (await one(`SELECT
        (SELECT coalesce(sum(net), 0) FROM payments WHERE workspace_id = :ws) AS collected,
        (SELECT coalesce(sum(net), 0) FROM payments WHERE workspace_id = :ws AND booking_id IS NOT NULL) AS booking_collected,
        (SELECT coalesce(sum(deposit_net), 0) FROM payments WHERE workspace_id = :ws) AS deposits,
        (SELECT coalesce(sum(amount), 0) FROM expenses WHERE workspace_id = :ws) AS expenses,
        (SELECT coalesce(sum(total), 0) FROM invoices WHERE workspace_id = :ws AND status = 'issued') AS billed,
        (SELECT coalesce(sum(paid), 0) FROM invoices WHERE workspace_id = :ws AND status = 'issued') AS invoice_collected,
        (SELECT coalesce(sum(balance), 0) FROM invoices WHERE workspace_id = :ws) AS outstanding,
        (SELECT count(*) FROM invoices WHERE workspace_id = :ws AND balance > 0) AS open_invoices,
        (SELECT count(DISTINCT customer_id) FROM invoices WHERE workspace_id = :ws AND status = 'issued') AS customers`))[0],
  };
}

async function kept(db: Knex, ws: string) {
  const one = async (sql: string) => (await db.raw(sql, { ws })).rows;
  return {
    invoicesPaid: await one(`SELECT id, paid FROM invoices WHERE workspace_id = :ws ORDER BY id`),
    bookings: await one(`SELECT id, collected, balance_due FROM bookings WHERE workspace_id = :ws ORDER BY id`),
    slots: await one(`SELECT slot, collected, booking_collected, deposits FROM payment_slots WHERE workspace_id = :ws
                        AND (collected <> 0 OR booking_collected <> 0 OR deposits <> 0) ORDER BY slot`),
    ledger: await one(`SELECT customer_id, billed, collected, outstanding, open_invoices, invoices FROM customer_ledger WHERE workspace_id = :ws AND invoices > 0 ORDER BY 1`),
    vehicles: await one(`SELECT vehicle_id, revenue, bookings FROM vehicle_revenue WHERE workspace_id = :ws AND (revenue <> 0 OR bookings <> 0) ORDER BY 1`),
    statuses: await one(`SELECT status, count FROM booking_status_counts WHERE workspace_id = :ws AND count <> 0 ORDER BY 1`),
    openBalances: await one(`SELECT due_date, balance, invoices FROM open_balances WHERE workspace_id = :ws AND invoices > 0 ORDER BY 1`),
    days: await one(`SELECT day, collected FROM payment_days WHERE workspace_id = :ws AND collected <> 0 ORDER BY 1`),
    months: await one(`SELECT to_char(month, 'YYYY-MM') AS month, collected FROM payment_months WHERE workspace_id = :ws AND collected <> 0 ORDER BY 1`),
    expenseMonths: await one(`SELECT to_char(month, 'YYYY-MM') AS month, amount FROM expense_months WHERE workspace_id = :ws AND amount <> 0 ORDER BY 1`),
    vehicleStates: await one(`SELECT state, count, rented FROM vehicle_state_counts WHERE workspace_id = :ws AND count <> 0 ORDER BY 1`),
    activeBookings: await one(`SELECT id, active_bookings FROM vehicles WHERE workspace_id = :ws ORDER BY 1`),
    vehicleModels: await one(`SELECT make, model, vehicles FROM vehicle_models WHERE workspace_id = :ws AND vehicles <> 0 ORDER BY 1, 2`),
    ledgerNames: await one(`SELECT customer_id, name FROM customer_ledger WHERE workspace_id = :ws ORDER BY 1`),
    totals: (await one(`SELECT collected, booking_collected, deposits, expenses, billed, invoice_collected, outstanding, open_invoices, customers
                        FROM workspace_totals WHERE workspace_id = :ws`))[0],
  };
}

describe('running totals kept by triggers', () => {
  it('equal the figures recomputed from the base tables after inserts, updates and deletes', async () => {
    const { db } = await testDatabase();
    await seedDemo(db, 'rollups-demo', new Date('2026-11-22T08:00:00.000Z'));
    const ws = (await db('workspaces').where({ slug: 'rollups-demo' }).first('id')).id;
    const before = await kept(db, ws);
    expect(before).to.deep.equal(await recomputed(db, ws));
    expect(Number(before.totals.collected)).to.be.greaterThan(0);

    // Move rows between groups and remove some, in multi-row statements.
    await db.raw(`UPDATE invoices SET status = 'void' WHERE id IN (SELECT id FROM invoices WHERE workspace_id = :ws AND balance > 0 ORDER BY id LIMIT 3)`, { ws });
    await db.raw(`UPDATE invoices SET due_date = due_date - 40 WHERE id IN (SELECT id FROM invoices WHERE workspace_id = :ws AND balance > 0 ORDER BY id DESC LIMIT 5)`, { ws });
    await db.raw(`UPDATE payments SET status = 'canceled' WHERE id IN (SELECT id FROM payments WHERE workspace_id = :ws AND kind = 'charge' ORDER BY id LIMIT 4)`, { ws });
    await db.raw(`UPDATE payments SET at = at - interval '45 days', invoice_id = NULL WHERE id IN (SELECT id FROM payments WHERE workspace_id = :ws AND invoice_id IS NOT NULL ORDER BY id DESC LIMIT 4)`, { ws });
    // another calendar (the months are rebuilt), then more changes to payments on it
    await db.raw(`UPDATE workspaces SET timezone = 'America/New_York' WHERE id = :ws`, { ws });
    await db.raw(`DELETE FROM payments WHERE id IN (SELECT id FROM payments WHERE workspace_id = :ws AND kind IN ('refund', 'deposit_release') ORDER BY id LIMIT 3)`, { ws });
    await db.raw(`UPDATE bookings SET status = 'canceled' WHERE id IN (SELECT id FROM bookings WHERE workspace_id = :ws AND status = 'pending' ORDER BY id LIMIT 2)`, { ws });
    await db.raw(`DELETE FROM expenses WHERE id IN (SELECT id FROM expenses WHERE workspace_id = :ws ORDER BY id LIMIT 5)`, { ws });
    await db.raw(`UPDATE vehicles SET state = 'inactive' WHERE id IN (SELECT id FROM vehicles WHERE workspace_id = :ws AND state = 'active' ORDER BY id LIMIT 2)`, { ws });
    // cars out now: one comes back, one goes out, one booking moves car, one rented car goes to the workshop
    await db.raw(`UPDATE bookings SET status = 'completed' WHERE id IN (SELECT id FROM bookings WHERE workspace_id = :ws AND status = 'active' ORDER BY id LIMIT 1)`, { ws });
    await db.raw(`UPDATE bookings SET status = 'active' WHERE id IN (SELECT id FROM bookings WHERE workspace_id = :ws AND status = 'confirmed' ORDER BY id LIMIT 1)`, { ws });
    await db.raw(`UPDATE bookings SET vehicle_id = (SELECT id FROM vehicles WHERE workspace_id = :ws AND state = 'active' ORDER BY id DESC LIMIT 1)
                  WHERE id IN (SELECT id FROM bookings WHERE workspace_id = :ws AND status = 'active' ORDER BY id DESC LIMIT 1)`, { ws });
    await db.raw(`UPDATE vehicles SET state = 'in_service' WHERE id IN (SELECT vehicle_id FROM bookings WHERE workspace_id = :ws AND status = 'active' ORDER BY id LIMIT 1)`, { ws });
    await db.raw(`UPDATE customers SET name = name || ' Renamed' WHERE id IN (SELECT customer_id FROM customer_ledger WHERE workspace_id = :ws ORDER BY customer_id LIMIT 3)`, { ws });
    await db.raw(`UPDATE vehicles SET model = 'Renamed' WHERE id IN (SELECT id FROM vehicles WHERE workspace_id = :ws ORDER BY id LIMIT 3)`, { ws });
    await db.raw(`INSERT INTO vehicles (id, workspace_id, fleet_id, make, model, plate, category, daily_rate, state)
                  SELECT gen_random_uuid(), workspace_id, fleet_id, 'Newmake', model, plate || ' N', category, daily_rate, state
                  FROM vehicles WHERE workspace_id = :ws ORDER BY id LIMIT 2`, { ws });
    await db.raw(`DELETE FROM vehicles WHERE workspace_id = :ws AND make = 'Newmake' AND id = (SELECT min(id::text)::uuid FROM vehicles WHERE workspace_id = :ws AND make = 'Newmake')`, { ws });

    const after = await kept(db, ws);
    expect(after).to.deep.equal(await recomputed(db, ws));
    expect(after.totals).not.to.deep.equal(before.totals);
  });
});
