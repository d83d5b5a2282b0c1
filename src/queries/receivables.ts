import type { Knex } from 'knex';
import type { Receivables, ReceivablesTotals } from '../../generated/openapi/types.gen.js';
import { baseBindings, rows, type WorkspaceRef } from './common.js';
import { AGING_COLUMNS } from './finance.js';

export type { Receivables };

export interface ReceivablesParams {
  /** Case-insensitive substring of the customer's name. */
  search?: string;
  limit: number;
}

/**
 * One row per customer with at least one issued invoice (customer_ledger.invoices > 0), ordered by outstanding
 * (highest first), then name, then id. Customers who owe something are read in outstanding order from the
 * ledger index; the rest (outstanding 0) in name order from the customers index; each branch stops at `limit`.
 * The ageing columns are worked out for the returned customers only, from their open invoices. `totals` cover
 * the whole book whatever `search` and `limit` say.
 */
export async function receivables(db: Knex, workspace: WorkspaceRef, params: ReceivablesParams, now: Date): Promise<Receivables> {
  const bindings: Record<string, unknown> = { ...baseBindings(workspace, now), limit: params.limit };
  // With a search, the matching customers are found once (a literal, case-insensitive substring test: no
  // wildcards to escape) and both branches read from them.
  let picked: string;
  if (params.search) {
    bindings.search = params.search;
    picked = `
    matching AS MATERIALIZED (
      SELECT c.id, c.name FROM customers c WHERE c.workspace_id = :ws AND strpos(lower(c.name), lower(:search)) > 0
    ),
    picked AS (
      (SELECT 0 AS grp, l.customer_id, c.name, l.billed, l.collected, l.outstanding, l.open_invoices
       FROM matching c JOIN customer_ledger l ON l.customer_id = c.id
       WHERE l.workspace_id = :ws AND l.invoices > 0 AND l.outstanding > 0
       ORDER BY l.outstanding DESC, c.name, c.id
       LIMIT :limit)
      UNION ALL
      (SELECT 1 AS grp, l.customer_id, c.name, l.billed, l.collected, l.outstanding, l.open_invoices
       FROM matching c JOIN customer_ledger l ON l.customer_id = c.id
       WHERE l.workspace_id = :ws AND l.invoices > 0 AND l.outstanding <= 0
       ORDER BY c.name, c.id
       LIMIT :limit)
    ),`;
  } else {
    picked = `
    picked AS (
      (SELECT 0 AS grp, l.customer_id, c.name, l.billed, l.collected, l.outstanding, l.open_invoices
       FROM customer_ledger l
       JOIN customers c ON c.id = l.customer_id AND c.workspace_id = l.workspace_id
       WHERE l.workspace_id = :ws AND l.invoices > 0 AND l.outstanding > 0
       ORDER BY l.outstanding DESC, c.name, c.id
       LIMIT :limit)
      UNION ALL
      (SELECT 1 AS grp, c.id, c.name, l.billed, l.collected, l.outstanding, l.open_invoices
       FROM customers c
       JOIN customer_ledger l ON l.customer_id = c.id AND l.workspace_id = c.workspace_id
       WHERE c.workspace_id = :ws AND l.invoices > 0 AND l.outstanding <= 0
       ORDER BY c.name, c.id
       LIMIT :limit)
    ),`;
  }
  const [r] = await rows<ReceivablesTotals & {
    rows: {
      customer_id: string;
      name: string;
      billed: number;
      collected: number;
      outstanding: number;
      current: number;
      d1_30: number;
      d31_60: number;
      d60p: number;
      open_invoices: number;
    }[];
  }>(
    db,
    `
    WITH ${picked}
    page AS (
      SELECT p.grp, p.customer_id, p.name, p.billed, p.collected, p.outstanding, p.open_invoices,
             a.current, a.d1_30, a.d31_60, a.d60p
      FROM (SELECT * FROM picked ORDER BY grp, outstanding DESC, name, customer_id LIMIT :limit) p
      CROSS JOIN LATERAL (
        SELECT ${AGING_COLUMNS}
        FROM invoices i WHERE i.customer_id = p.customer_id AND i.workspace_id = :ws AND i.balance > 0
      ) a
    )
    SELECT l.billed, l.collected, l.outstanding, a.current, a.d1_30, a.d31_60, a.d60p,
           l.open_invoices AS "openInvoices", l.customers,
           (SELECT coalesce(json_agg(page ORDER BY grp, outstanding DESC, name, customer_id), '[]') FROM page) AS rows
    FROM (
      SELECT coalesce(sum(billed), 0) AS billed, coalesce(sum(collected), 0) AS collected,
             coalesce(sum(outstanding), 0) AS outstanding, coalesce(sum(open_invoices), 0) AS open_invoices,
             count(*) AS customers
      FROM customer_ledger WHERE workspace_id = :ws AND invoices > 0
    ) l,
    (SELECT ${AGING_COLUMNS} FROM invoices i WHERE i.workspace_id = :ws AND i.balance > 0) a
    `,
    bindings,
  );
  const totals = r;
  return {
    rows: r.rows.map((r) => ({
      customerId: r.customer_id,
      name: r.name,
      billed: r.billed,
      collected: r.collected,
      outstanding: r.outstanding,
      current: r.current,
      d1_30: r.d1_30,
      d31_60: r.d31_60,
      d60p: r.d60p,
      openInvoices: r.open_invoices,
    })),
    totals: {
      billed: totals.billed,
      collected: totals.collected,
      outstanding: totals.outstanding,
      current: totals.current,
      d1_30: totals.d1_30,
      d31_60: totals.d31_60,
      d60p: totals.d60p,
      openInvoices: totals.openInvoices,
      customers: totals.customers,
    },
  };
}
