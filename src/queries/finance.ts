import type { Knex } from 'knex';
import type { FinanceOverview } from '../../generated/strict/types.gen.js';
import { baseBindings, NOW, rows, TODAY, type WorkspaceRef } from './common.js';

export type { FinanceOverview };

/**
 * Where the ageing buckets start, latest first: a balance due today or later is current, one due from 30 days back
 * up to yesterday is 1-30, one due from 60 days back is 31-60, anything older 61+ (on the workspace's calendar).
 * The one definition of the edges: the whole-workspace ageing (WORKSPACE_AGING) and a receivables row
 * (src/queries/receivables.ts) both give agingColumns() what is owed from each of these days on.
 */
export const AGING_EDGES = [TODAY, `${TODAY} - 30`, `${TODAY} - 60`] as const;

/**
 * The ageing columns current, d1_30, d31_60 and d60p from `owedFrom`, the open balance due on or after each of
 * AGING_EDGES (SQL expressions, in that order), and `outstanding`, all that is open: each bucket is the difference
 * of two of them, 61+ the rest of the outstanding, so the due dates further back than 60 days, as many as the book
 * is old, are never read.
 */
export function agingColumns(owedFrom: readonly string[], outstanding: string): string {
  const [fromToday, from30DaysAgo, from60DaysAgo] = owedFrom;
  return `${fromToday} AS current, ${from30DaysAgo} - ${fromToday} AS d1_30, ${from60DaysAgo} - ${from30DaysAgo} AS d31_60,
    ${outstanding} - ${from60DaysAgo} AS d60p`;
}

/**
 * Whole-workspace ageing: workspace_totals.outstanding, and what is owed from each edge on summed from the
 * open_balances rollup (one row per due date; void invoices have no balance) over a range of its key.
 * Columns: outstanding, current, d1_30, d31_60, d60p.
 */
const OWED_FROM_EDGES = ['from_today', 'from_30_days_ago', 'from_60_days_ago'];
export const WORKSPACE_AGING = `
  SELECT t.outstanding, ${agingColumns(
    OWED_FROM_EDGES.map((column) => `r.${column}`),
    't.outstanding',
  )}
  FROM (SELECT coalesce(sum(outstanding), 0) AS outstanding FROM workspace_totals WHERE workspace_id = :ws) t,
  (SELECT ${AGING_EDGES.map((day, k) => `coalesce(sum(i.balance) FILTER (WHERE i.due_date >= ${day}), 0) AS ${OWED_FROM_EDGES[k]}`).join(', ')}
   FROM open_balances i WHERE i.workspace_id = :ws AND i.due_date >= ${AGING_EDGES[2]}) r`;

/**
 * The finance overview. All-time money comes from workspace_totals, AR and ageing from WORKSPACE_AGING, this month
 * and the six-month trend from payment_months (net collected per month of the workspace's calendar, as stored) and
 * expense_months, and the top vehicles from vehicle_revenue: a few dozen rows whatever the size of the book.
 */
const FINANCE_OVERVIEW_SQL = `
  SELECT t.collected, t.deposits, t.expenses, a.outstanding, a.current, a.d1_30, a.d31_60, a.d60p,
    (SELECT json_agg(json_build_object('month', to_char(g.m, 'YYYY-MM'), 'collected', coalesce(p.collected, 0),
                                       'expenses', coalesce(x.amount, 0)) ORDER BY g.m)
     -- six months counted back from this one on the calendar payment_months is kept in, the workspace's zone as
     -- stored; over a series of constants (a series over the clock's months would be estimated at 1,000 rows in a
     -- generic plan, which then looks so costly that PostgreSQL plans every execution afresh)
     FROM (SELECT (date_trunc('month', ${NOW} AT TIME ZONE w.timezone) - k * interval '1 month')::date AS m
           FROM workspaces w, generate_series(0, 5) AS k WHERE w.id = :ws) g
     -- (append-only totals, migration 20261128000610: a month is the sum of its rows)
     LEFT JOIN LATERAL (SELECT sum(p.collected) AS collected FROM payment_months p WHERE p.workspace_id = :ws AND p.month = g.m) p ON true
     LEFT JOIN LATERAL (SELECT sum(x.amount) AS amount FROM expense_months x WHERE x.workspace_id = :ws AND x.month = g.m) x ON true) AS monthly,
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
    SELECT coalesce(sum(t.collected), 0) AS collected, coalesce(sum(t.deposits), 0) AS deposits,
           coalesce(sum(t.expenses), 0) AS expenses
    FROM workspace_totals t WHERE t.workspace_id = :ws
  ) t,
  (${WORKSPACE_AGING}) a`;

export async function financeOverview(db: Knex, workspace: WorkspaceRef, now: Date): Promise<FinanceOverview> {
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
    top: {
      vehicle_id: string;
      plate: string;
      fleet_id: string;
      code: string;
      name: string;
      revenue: number;
      bookings: number;
    }[];
  }>(db, FINANCE_OVERVIEW_SQL, baseBindings(workspace, now), { prepared: true });
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
