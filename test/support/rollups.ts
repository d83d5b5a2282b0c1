import { expect } from 'chai';
import type { Knex } from 'knex';

// The running totals the triggers keep must equal the same figures recomputed from the base tables, after
// inserts, updates that move rows between groups, and deletes.
export async function recomputed(db: Knex, ws: string) {
  const one = async (sql: string) => (await db.raw(sql, { ws })).rows;
  return {
    invoicesPaid: await one(
      `SELECT i.id, coalesce(sum(p.net), 0) AS paid FROM invoices i LEFT JOIN payments p ON p.invoice_id = i.id WHERE i.workspace_id = :ws GROUP BY i.id ORDER BY i.id`,
    ),
    bookings:
      await one(`SELECT b.id, coalesce((SELECT sum(net) FROM payments p WHERE p.booking_id = b.id), 0) AS collected,
                                coalesce((SELECT sum(balance) FROM invoices i WHERE i.booking_id = b.id), 0) AS balance_due
                         FROM bookings b WHERE b.workspace_id = :ws ORDER BY b.id`),
    slots:
      await one(`SELECT date_bin('15 minutes', at, timestamptz '2000-01-01T00:00:00Z') AS slot, sum(net) AS collected,
                             coalesce(sum(net) FILTER (WHERE booking_id IS NOT NULL), 0) AS booking_collected, sum(deposit_net) AS deposits
                      FROM payments WHERE workspace_id = :ws GROUP BY 1 HAVING sum(net) <> 0 OR sum(deposit_net) <> 0
                        OR coalesce(sum(net) FILTER (WHERE booking_id IS NOT NULL), 0) <> 0 ORDER BY 1`),
    ledger:
      await one(`SELECT customer_id, sum(total) FILTER (WHERE status = 'issued') AS billed, sum(paid) FILTER (WHERE status = 'issued') AS collected,
                              sum(balance) AS outstanding, count(*) FILTER (WHERE balance > 0) AS open_invoices, count(*) FILTER (WHERE status = 'issued') AS invoices
                       FROM invoices WHERE workspace_id = :ws GROUP BY 1 HAVING count(*) FILTER (WHERE status = 'issued') > 0 ORDER BY 1`),
    vehicles:
      await one(`SELECT vehicle_id, sum(collected) AS revenue, count(*) FILTER (WHERE status <> 'canceled') AS bookings
                         FROM bookings WHERE workspace_id = :ws GROUP BY 1 ORDER BY 1`),
    statuses: await one(
      `SELECT status, count(*) AS count FROM bookings WHERE workspace_id = :ws GROUP BY 1 ORDER BY 1`,
    ),
    openBalances: await one(
      `SELECT due_date, sum(balance) AS balance, count(*) AS invoices FROM invoices WHERE workspace_id = :ws AND balance > 0 GROUP BY 1 ORDER BY 1`,
    ),
    days: await one(
      `SELECT (at AT TIME ZONE 'UTC')::date AS day, sum(net) AS collected FROM payments WHERE workspace_id = :ws GROUP BY 1 HAVING sum(net) <> 0 ORDER BY 1`,
    ),
    months: await one(`SELECT to_char(p.at AT TIME ZONE w.timezone, 'YYYY-MM') AS month, sum(p.net) AS collected
                       FROM payments p JOIN workspaces w ON w.id = p.workspace_id WHERE p.workspace_id = :ws GROUP BY 1 HAVING sum(p.net) <> 0 ORDER BY 1`),
    expenseMonths: await one(
      `SELECT to_char(date, 'YYYY-MM') AS month, sum(amount) AS amount FROM expenses WHERE workspace_id = :ws GROUP BY 1 ORDER BY 1`,
    ),
    vehicleStates: await one(`SELECT state, count(*) AS count,
                                     count(*) FILTER (WHERE EXISTS (SELECT 1 FROM bookings b WHERE b.vehicle_id = v.id AND b.status = 'active')) AS rented
                              FROM vehicles v WHERE workspace_id = :ws GROUP BY 1 ORDER BY 1`),
    activeBookings:
      await one(`SELECT v.id, (SELECT count(*) FROM bookings b WHERE b.vehicle_id = v.id AND b.status = 'active') AS active_bookings
                               FROM vehicles v WHERE v.workspace_id = :ws ORDER BY 1`),
    vehicleModels: await one(
      `SELECT make, model, count(*) AS vehicles FROM vehicles WHERE workspace_id = :ws GROUP BY 1, 2 ORDER BY 1, 2`,
    ),
    ledgerNames: await one(`SELECT c.id AS customer_id, c.name FROM customers c WHERE c.workspace_id = :ws
                              AND EXISTS (SELECT 1 FROM invoices i WHERE i.customer_id = c.id) ORDER BY 1`),
    // each open due date of the customer, earliest first, and the open balance due on or after it, then 0
    ledgerOpenDues: await one(`SELECT c.id AS customer_id,
                                 coalesce((SELECT array_agg(d ORDER BY d) FROM (SELECT DISTINCT i.due_date AS d FROM invoices i
                                           WHERE i.customer_id = c.id AND i.balance > 0) s), '{}')::text AS open_due_dates,
                                 (coalesce((SELECT array_agg((SELECT sum(j.balance) FROM invoices j WHERE j.customer_id = c.id AND j.balance > 0
                                                              AND j.due_date >= s.d)::bigint ORDER BY s.d)
                                            FROM (SELECT DISTINCT i.due_date AS d FROM invoices i WHERE i.customer_id = c.id AND i.balance > 0) s), '{}')
                                  || 0::bigint)::text AS owed_from
                               FROM customers c WHERE c.workspace_id = :ws AND EXISTS (SELECT 1 FROM invoices i WHERE i.customer_id = c.id) ORDER BY 1`),
    bookingRefs:
      await one(`SELECT b.id, '{"id":"' || c.id || '","name":' || to_json(c.name)::text || '}' AS customer_json,
                                   '{"id":"' || v.id || '","plate":' || to_json(v.plate)::text || '}' AS vehicle_json
                             FROM bookings b JOIN customers c ON c.id = b.customer_id JOIN vehicles v ON v.id = b.vehicle_id
                             WHERE b.workspace_id = :ws ORDER BY 1`),
    totals: (
      await one(`SELECT
        (SELECT coalesce(sum(net), 0) FROM payments WHERE workspace_id = :ws) AS collected,
        (SELECT coalesce(sum(net), 0) FROM payments WHERE workspace_id = :ws AND booking_id IS NOT NULL) AS booking_collected,
        (SELECT coalesce(sum(deposit_net), 0) FROM payments WHERE workspace_id = :ws) AS deposits,
        (SELECT coalesce(sum(amount), 0) FROM expenses WHERE workspace_id = :ws) AS expenses,
        (SELECT coalesce(sum(total), 0) FROM invoices WHERE workspace_id = :ws AND status = 'issued') AS billed,
        (SELECT coalesce(sum(paid), 0) FROM invoices WHERE workspace_id = :ws AND status = 'issued') AS invoice_collected,
        (SELECT coalesce(sum(balance), 0) FROM invoices WHERE workspace_id = :ws) AS outstanding,
        (SELECT count(*) FROM invoices WHERE workspace_id = :ws AND balance > 0) AS open_invoices,
        (SELECT count(DISTINCT customer_id) FROM invoices WHERE workspace_id = :ws AND status = 'issued') AS customers`)
    )[0],
  };
}

export async function kept(db: Knex, ws: string) {
  const one = async (sql: string) => (await db.raw(sql, { ws })).rows;
  return {
    invoicesPaid: await one(`SELECT id, paid FROM invoices WHERE workspace_id = :ws ORDER BY id`),
    bookings: await one(`SELECT id, collected, balance_due FROM bookings WHERE workspace_id = :ws ORDER BY id`),
    // (the append-only totals, migration 20261128000610: a key's figure is the sum of its rows)
    slots:
      await one(`SELECT slot, sum(collected) AS collected, sum(booking_collected) AS booking_collected, sum(deposits) AS deposits
                      FROM payment_slots WHERE workspace_id = :ws GROUP BY slot
                      HAVING sum(collected) <> 0 OR sum(booking_collected) <> 0 OR sum(deposits) <> 0 ORDER BY slot`),
    ledger: await one(
      `SELECT customer_id, billed, collected, outstanding, open_invoices, invoices FROM customer_ledger WHERE workspace_id = :ws AND invoices > 0 ORDER BY 1`,
    ),
    vehicles: await one(
      `SELECT vehicle_id, revenue, bookings FROM vehicle_revenue WHERE workspace_id = :ws AND (revenue <> 0 OR bookings <> 0) ORDER BY 1`,
    ),
    statuses: await one(
      `SELECT status, sum(count) AS count FROM booking_status_counts WHERE workspace_id = :ws GROUP BY 1 HAVING sum(count) <> 0 ORDER BY 1`,
    ),
    openBalances:
      await one(`SELECT due_date, sum(balance) AS balance, sum(invoices) AS invoices FROM open_balances WHERE workspace_id = :ws
                             GROUP BY 1 HAVING sum(invoices) > 0 ORDER BY 1`),
    days: await one(
      `SELECT day, sum(collected) AS collected FROM payment_days WHERE workspace_id = :ws GROUP BY 1 HAVING sum(collected) <> 0 ORDER BY 1`,
    ),
    months:
      await one(`SELECT to_char(month, 'YYYY-MM') AS month, sum(collected) AS collected FROM payment_months WHERE workspace_id = :ws
                       GROUP BY 1 HAVING sum(collected) <> 0 ORDER BY 1`),
    expenseMonths:
      await one(`SELECT to_char(month, 'YYYY-MM') AS month, sum(amount) AS amount FROM expense_months WHERE workspace_id = :ws
                              GROUP BY 1 HAVING sum(amount) <> 0 ORDER BY 1`),
    vehicleStates:
      await one(`SELECT state, sum(count) AS count, sum(rented) AS rented FROM vehicle_state_counts WHERE workspace_id = :ws
                              GROUP BY 1 HAVING sum(count) <> 0 ORDER BY 1`),
    activeBookings: await one(`SELECT id, active_bookings FROM vehicles WHERE workspace_id = :ws ORDER BY 1`),
    vehicleModels: await one(
      `SELECT make, model, vehicles FROM vehicle_models WHERE workspace_id = :ws AND vehicles <> 0 ORDER BY 1, 2`,
    ),
    ledgerNames: await one(`SELECT customer_id, name FROM customer_ledger WHERE workspace_id = :ws ORDER BY 1`),
    ledgerOpenDues: await one(
      `SELECT customer_id, open_due_dates::text, owed_from::text FROM customer_ledger WHERE workspace_id = :ws ORDER BY 1`,
    ),
    bookingRefs: await one(`SELECT id, customer_json, vehicle_json FROM bookings WHERE workspace_id = :ws ORDER BY 1`),
    totals: (
      await one(
        `SELECT ${[
          'collected',
          'booking_collected',
          'deposits',
          'expenses',
          'billed',
          'invoice_collected',
          'outstanding',
          'open_invoices',
          'customers',
        ]
          .map((c) => `coalesce(sum(${c}), 0) AS ${c}`)
          .join(', ')} FROM workspace_totals WHERE workspace_id = :ws`,
      )
    )[0],
  };
}

/** Every running total of the workspace equals the same figure computed afresh from its base tables. */
export async function expectRollupsExact(db: Knex, ws: string): Promise<Awaited<ReturnType<typeof kept>>> {
  const rollups = await kept(db, ws);
  expect(rollups).to.deep.equal(await recomputed(db, ws));
  return rollups;
}
