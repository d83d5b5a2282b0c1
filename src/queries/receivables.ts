import type { Knex } from 'knex';
import type { Receivables } from '../../generated/strict/types.gen.js';
import { baseBindings, containsPattern, jsonText, trigramSearchable, type WorkspaceRef } from './common.js';
import { RECENT_AGING_COLUMNS, RECENT_DUE_DATES, WORKSPACE_AGING } from './finance.js';

export type { Receivables };

export interface ReceivablesParams {
  /** Case-insensitive substring of the customer's name. */
  search?: string;
  limit: number;
}

/**
 * One row per customer with at least one issued invoice (customer_ledger.invoices > 0), ordered by outstanding
 * (highest first), then name, then id, read in that order from customer_ledger_order (which also holds the row's
 * figures and the name) and stopping at `limit`. The ageing columns are worked out for the returned customers
 * only, from their recent open invoices (an index-only scan). `totals` cover the whole book whatever `search` and
 * `limit` say.
 */
export async function receivables(db: Knex, workspace: WorkspaceRef, params: ReceivablesParams, now: Date): Promise<Receivables> {
  return JSON.parse(await receivablesJson(db, workspace, params, now)) as Receivables;
}

/** The same answer as receivables(), as the JSON text of the document's Receivables: what the API sends. */
export async function receivablesJson(db: Knex, workspace: WorkspaceRef, params: ReceivablesParams, now: Date): Promise<string> {
  const bindings: Record<string, unknown> = baseBindings(workspace, now);
  // The page size is written into the statement (an integer, 1 to 200 by the document): a generic plan for a
  // LIMIT parameter is costed for a tenth of the ledger, so PostgreSQL would plan every execution afresh.
  const limit = Math.trunc(params.limit);
  if (!(limit >= 1)) throw new RangeError(`receivables: limit must be a positive integer, got ${params.limit}`);
  // A search is a case-insensitive substring of the name. A term the trigram index can serve is matched with
  // ILIKE (wildcards escaped) on customers, in a statement planned for its value: the planner takes the few
  // matches of a rare term from customers_name_trgm, or walks the ledger in order for a common one. A shorter
  // term cannot use the index: it is tested with strpos on the lower-cased name while walking the ledger in
  // order (the same test: ILIKE compares lower-cased text too), in a statement prepared once per connection.
  let nameFilter = '';
  let prepared = true;
  if (params.search && trigramSearchable(params.search)) {
    bindings.pattern = containsPattern(params.search);
    nameFilter = `AND l.customer_id IN (SELECT c.id FROM customers c WHERE c.workspace_id = :ws AND c.name ILIKE :pattern ESCAPE '\\')`;
    prepared = false;
  } else if (params.search) {
    bindings.search = params.search;
    nameFilter = 'AND strpos(lower(l.name), lower(:search)) > 0';
  }
  const picked = `
    picked AS (
      SELECT l.customer_id, l.name, l.billed, l.collected, l.outstanding, l.open_invoices
      FROM customer_ledger l
      WHERE l.workspace_id = :ws AND l.invoices > 0 ${nameFilter}
      ORDER BY l.outstanding DESC, l.name, l.customer_id
      LIMIT ${limit}
    ),`;
  // The answer is built as JSON by PostgreSQL and handed over as text: the API sends it as it is, so Node neither
  // parses up to 200 rows nor serialises them again (measured: about a third of the Node CPU of search=al&limit=200).
  // The keys and their order are the document's Receivables.
  return jsonText(
    db,
    `
    WITH ${picked}
    page AS (
      SELECT p.customer_id, p.name, p.billed, p.collected, p.outstanding, p.open_invoices,
             a.current, a.d1_30, a.d31_60, p.outstanding - a.current - a.d1_30 - a.d31_60 AS d60p
      FROM picked p
      CROSS JOIN LATERAL (
        -- the customer's open invoices due in the last 60 days and after, from invoices_customer_due alone (an
        -- invoice's workspace is its customer's: the foreign key is on both); 61+ is the rest of the customer's
        -- outstanding, which customer_ledger keeps equal to the sum of its open balances
        SELECT ${RECENT_AGING_COLUMNS}
        FROM invoices i WHERE i.customer_id = p.customer_id AND i.balance > 0 AND ${RECENT_DUE_DATES}
      ) a
    )
    SELECT json_build_object(
             'rows', (SELECT coalesce(json_agg(json_build_object(
                        'customerId', customer_id, 'name', name, 'billed', billed, 'collected', collected,
                        'outstanding', outstanding, 'current', current, 'd1_30', d1_30, 'd31_60', d31_60, 'd60p', d60p,
                        'openInvoices', open_invoices) ORDER BY outstanding DESC, name, customer_id), '[]') FROM page),
             'totals', json_build_object(
                        'billed', l.billed, 'collected', l.collected, 'outstanding', l.outstanding, 'current', a.current,
                        'd1_30', a.d1_30, 'd31_60', a.d31_60, 'd60p', a.d60p, 'openInvoices', l.open_invoices,
                        'customers', l.customers))::text AS body
    FROM (
      SELECT coalesce(max(t.billed), 0) AS billed, coalesce(max(t.invoice_collected), 0) AS collected,
             coalesce(max(t.outstanding), 0) AS outstanding, coalesce(max(t.open_invoices), 0) AS open_invoices,
             coalesce(max(t.customers), 0) AS customers
      FROM workspace_totals t WHERE t.workspace_id = :ws
    ) l,
    (${WORKSPACE_AGING}) a
    `,
    bindings,
    { prepared },
  );
}
