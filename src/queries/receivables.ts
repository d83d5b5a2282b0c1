import type { Knex } from 'knex';
import type { Receivables, ReceivablesTotals } from '../../generated/strict/types.gen.js';
import { baseBindings, containsPattern, rows, trigramSearchable, type WorkspaceRef } from './common.js';
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
 * ledger index; the rest (outstanding 0) in name order from the customers index, only as many as the first
 * branch left of `limit`. The ageing columns are worked out for the returned customers only, from their open
 * invoices (an index-only scan). `totals` cover the whole book whatever `search` and `limit` say.
 */
export async function receivables(db: Knex, workspace: WorkspaceRef, params: ReceivablesParams, now: Date): Promise<Receivables> {
  const bindings: Record<string, unknown> = { ...baseBindings(workspace, now), limit: params.limit };
  // A search is a case-insensitive substring of the name. A term the trigram index can serve is matched with
  // ILIKE (wildcards escaped) in a statement planned for its value: the planner takes the few matches of a rare
  // term from the index, or walks the ledger in order for a common one. A shorter term cannot use the index, so
  // it is matched with strpos on lower-cased text (the same test: ILIKE compares lower-cased text too) in a
  // prepared statement whose plan, the ordered walk, is the right one for every such term.
  let nameFilter = '';
  let prepared = true;
  if (params.search && trigramSearchable(params.search)) {
    bindings.pattern = containsPattern(params.search);
    nameFilter = `AND c.name ILIKE :pattern ESCAPE '\\'`;
    prepared = false;
  } else if (params.search) {
    bindings.search = params.search;
    nameFilter = 'AND strpos(lower(c.name), lower(:search)) > 0';
  }
  const picked = `
    owing AS (
      SELECT l.customer_id, c.name, l.billed, l.collected, l.outstanding, l.open_invoices
      FROM customer_ledger l
      JOIN customers c ON c.id = l.customer_id AND c.workspace_id = l.workspace_id
      WHERE l.workspace_id = :ws AND l.invoices > 0 AND l.outstanding > 0 ${nameFilter}
      ORDER BY l.outstanding DESC, c.name, c.id
      LIMIT :limit
    ),
    settled AS (
      SELECT c.id AS customer_id, c.name, l.billed, l.collected, l.outstanding, l.open_invoices
      FROM customers c
      JOIN customer_ledger l ON l.customer_id = c.id AND l.workspace_id = c.workspace_id
      WHERE c.workspace_id = :ws AND l.invoices > 0 AND l.outstanding <= 0 ${nameFilter}
      ORDER BY c.name, c.id
      LIMIT :limit - (SELECT count(*) FROM owing)
    ),
    picked AS (SELECT 0 AS grp, * FROM owing UNION ALL SELECT 1 AS grp, * FROM settled),`;
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
      FROM picked p
      CROSS JOIN LATERAL (
        -- an invoice's workspace is its customer's (the foreign key is on both), so the customer alone
        -- selects its open invoices, read from invoices_customer_open without visiting the table
        SELECT ${AGING_COLUMNS}
        FROM invoices i WHERE i.customer_id = p.customer_id AND i.balance > 0
      ) a
    )
    SELECT l.billed, l.collected, l.outstanding, a.current, a.d1_30, a.d31_60, a.d60p,
           l.open_invoices AS "openInvoices", l.customers,
           (SELECT coalesce(json_agg(page ORDER BY grp, outstanding DESC, name, customer_id), '[]') FROM page) AS rows
    FROM (
      SELECT coalesce(max(t.billed), 0) AS billed, coalesce(max(t.invoice_collected), 0) AS collected,
             coalesce(max(t.outstanding), 0) AS outstanding, coalesce(max(t.open_invoices), 0) AS open_invoices,
             coalesce(max(t.customers), 0) AS customers
      FROM workspace_totals t WHERE t.workspace_id = :ws
    ) l,
    (SELECT ${AGING_COLUMNS} FROM open_balances i WHERE i.workspace_id = :ws) a
    `,
    bindings,
    { prepared },
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
