import type { Knex } from 'knex';
import type { FinanceOverview } from '../../generated/strict/types.gen.js';
import { baseBindings, MONTH_START_LOCAL, rows, TODAY, type WorkspaceRef } from './common.js';

export type { FinanceOverview };

/**
 * Open balances by days past due on the local calendar, over rows `i` with `balance` and `due_date`: the
 * open_balances rollup (one row per due date) for whole-workspace figures, a customer's open invoices for a
 * receivables row. Void invoices have no balance. Shared with receivables.
 * Columns: outstanding, current (not yet due), d1_30, d31_60, d60p (61 days and more).
 */
export const AGING_COLUMNS = `
  coalesce(sum(i.balance), 0) AS outstanding,
  coalesce(sum(i.balance) FILTER (WHERE i.due_date >= ${TODAY}), 0) AS current,
  coalesce(sum(i.balance) FILTER (WHERE i.due_date < ${TODAY} AND i.due_date >= ${TODAY} - 30), 0) AS d1_30,
  coalesce(sum(i.balance) FILTER (WHERE i.due_date < ${TODAY} - 30 AND i.due_date >= ${TODAY} - 60), 0) AS d31_60,
  coalesce(sum(i.balance) FILTER (WHERE i.due_date < ${TODAY} - 60), 0) AS d60p`;

/**
 * The finance overview. All-time money comes from workspace_totals, AR and ageing from open_balances, this month
 * and the six-month trend from payment_days (whole UTC days) and payment_slots (the part-days at each end of a
 * local month) and from expense_months, and the top vehicles from vehicle_revenue: a few hundred rows at most,
 * whatever the size of the book.
 */
export async function financeOverview(db: Knex, workspace: WorkspaceRef, now: Date): Promise<FinanceOverview> {
  const bindings = baseBindings(workspace, now);
  const [totals] = await rows<{
    collected: number;
    deposits: number;
    expenses: number;
    outstanding: number;
    current: number;
    d1_30: number;
    d31_60: number;
    d60p: number;
    monthly: { month: string; collected: number; expenses: number }[];
    top: { vehicle_id: string; plate: string; fleet_id: string; code: string; name: string; revenue: number; bookings: number }[];
  }>(
    db,
    `
    SELECT s.collected, s.deposits, e.expenses, a.outstanding, a.current, a.d1_30, a.d31_60, a.d60p,
      (SELECT json_agg(json_build_object('month', m.month, 'collected', m.collected, 'expenses', m.expenses) ORDER BY m.month)
       FROM (
         SELECT to_char(b.m, 'YYYY-MM') AS month,
           (SELECT coalesce(sum(d.collected), 0) FROM payment_days d
             WHERE d.workspace_id = :ws AND d.day >= (b.inner_start AT TIME ZONE 'UTC')::date AND d.day < (b.inner_end AT TIME ZONE 'UTC')::date)
           + (SELECT coalesce(sum(ps.collected), 0) FROM payment_slots ps
               WHERE ps.workspace_id = :ws AND ps.slot >= b.start AND ps.slot < b.inner_start)
           + (SELECT coalesce(sum(ps.collected), 0) FROM payment_slots ps
               WHERE ps.workspace_id = :ws AND ps.slot >= b.inner_end AND ps.slot < b.next) AS collected,
           (SELECT coalesce(sum(x.amount), 0) FROM expense_months x WHERE x.workspace_id = :ws AND x.month = b.m::date) AS expenses
         FROM (
           -- the local month [start, next) as instants, and the whole UTC days inside it [inner_start, inner_end)
           SELECT m, start, next,
             date_trunc('day', start, 'UTC') + CASE WHEN date_trunc('day', start, 'UTC') < start THEN interval '1 day' ELSE interval '0' END AS inner_start,
             date_trunc('day', next, 'UTC') AS inner_end
           -- six months counted back from this one over a series of constants: a series over the clock's months
           -- is estimated at 1,000 rows in a generic plan, which then looked so costly that PostgreSQL planned
           -- this statement afresh on every execution (2 ms, more than running it)
           FROM (SELECT g.m, g.m AT TIME ZONE :tz AS start, (g.m + interval '1 month') AT TIME ZONE :tz AS next
                 FROM (SELECT ${MONTH_START_LOCAL} - k * interval '1 month' AS m FROM generate_series(0, 5) AS k) g) l
         ) b
       ) m) AS monthly,
      (SELECT coalesce(json_agg(json_build_object('vehicle_id', t.vehicle_id, 'plate', t.plate, 'fleet_id', t.fleet_id,
                'code', t.code, 'name', t.name, 'revenue', t.revenue, 'bookings', t.bookings) ORDER BY t.revenue DESC, t.plate), '[]')
       FROM (
         SELECT r.vehicle_id, v.plate, f.id AS fleet_id, f.code, f.name, r.revenue, r.bookings
         FROM vehicle_revenue r
         JOIN vehicles v ON v.id = r.vehicle_id AND v.workspace_id = r.workspace_id
         JOIN fleets f ON f.id = v.fleet_id AND f.workspace_id = v.workspace_id
         WHERE r.workspace_id = :ws AND r.revenue > 0
         ORDER BY r.revenue DESC, v.plate
         LIMIT 5
       ) t) AS top
    FROM (
      SELECT coalesce(max(t.collected), 0) AS collected, coalesce(max(t.deposits), 0) AS deposits
      FROM (SELECT 1) one LEFT JOIN workspace_totals t ON t.workspace_id = :ws
    ) s,
    (SELECT coalesce(max(expenses), 0) AS expenses FROM workspace_totals WHERE workspace_id = :ws) e,
    (SELECT ${AGING_COLUMNS} FROM open_balances i WHERE i.workspace_id = :ws) a
    `,
    bindings,
    { prepared: true },
  );
  return {
    collectedAllTime: totals.collected,
    // the last month of the trend is this month
    collectedThisMonth: Number(totals.monthly[totals.monthly.length - 1].collected),
    arOutstanding: totals.outstanding,
    arOverdue: totals.d1_30 + totals.d31_60 + totals.d60p,
    depositsHeld: totals.deposits,
    expenses: totals.expenses,
    netProfitAllTime: totals.collected - totals.expenses,
    aging: [
      { bucket: 'current', amount: totals.current },
      { bucket: '1-30', amount: totals.d1_30 },
      { bucket: '31-60', amount: totals.d31_60 },
      { bucket: '61+', amount: totals.d60p },
    ],
    monthly: totals.monthly.map((m) => ({
      month: m.month,
      collected: Number(m.collected),
      expenses: Number(m.expenses),
      net: Number(m.collected) - Number(m.expenses),
    })) as FinanceOverview['monthly'], // generate_series gives exactly six months
    topVehicles: totals.top.map((t) => ({
      vehicle: { id: t.vehicle_id, plate: t.plate },
      fleet: { id: t.fleet_id, code: t.code, name: t.name },
      revenue: Number(t.revenue),
      bookings: Number(t.bookings),
    })),
  };
}
