import type { Knex } from 'knex';
import type { Receivables, ReceivablesRow } from '../../generated/strict/types.gen.js';
import {
  baseBindings,
  containsPattern,
  FETCH_SIZE,
  jsonObjectText,
  jsonPage,
  jsonValue,
  pageOf,
  positionValue,
  trigramSearchable,
  WORKSPACE,
  type JsonPage,
  type WorkspaceRef,
} from './common.js';
import { AGING_EDGES, agingColumns, WORKSPACE_AGING } from './finance.js';

export type { Receivables };

export interface ReceivablesParams {
  /** Case-insensitive substring of the customer's name. */
  search?: string;
  limit: number;
  /** The page after this customer's place in the order (a page's `next`); none: the first page. */
  after?: ReceivablesPosition;
}

/** A customer's place in the order: outstanding (as text: a bigint), name, customer id. */
export type ReceivablesPosition = [outstanding: string, name: string, customerId: string];

/** A row's place in the order, as `after` takes it. */
export const receivablesPosition = (
  row: Pick<ReceivablesRow, 'outstanding' | 'name' | 'customerId'>,
): ReceivablesPosition => [String(row.outstanding), row.name, row.customerId];

/** A page as the query module answers it: rows and totals, and the position the next page starts after (null: the last). */
export type ReceivablesPage = Omit<Receivables, 'nextCursor'> & { next: ReceivablesPosition | null };

/**
 * A search term of three letters or digits or more that matches at most this many of the workspace's customers
 * (whether they owe anything or not) is answered from the trigram index on names: its matches are looked up and
 * sorted. A term matching more is tested while walking the ledger in order, which reaches a page of matches sooner
 * than looking them all up. Measured on the large bench set (50,000 customers, limit 50): 968 matches cost about
 * 3.6 ms looked up against 2.7 ms walked, and finding out that a term is common costs a look-up of this many.
 */
export const RARE_TERM_MATCHES = 500;

const { number, plainString, string } = jsonValue;

const ROW_JSON = jsonObjectText([
  ['customerId', plainString('customer_id')],
  ['name', string('name')],
  ['billed', number('billed')],
  ['collected', number('collected')],
  ['outstanding', number('outstanding')],
  ['current', number('current')],
  ['d1_30', number('d1_30')],
  ['d31_60', number('d31_60')],
  ['d60p', number('d60p')],
  ['openInvoices', number('open_invoices')],
]);

const TOTALS_JSON = jsonObjectText([
  ['billed', number('l.billed')],
  ['collected', number('l.collected')],
  ['outstanding', number('l.outstanding')],
  ['current', number('a.current')],
  ['d1_30', number('a.d1_30')],
  ['d31_60', number('a.d31_60')],
  ['d60p', number('a.d60p')],
  ['openInvoices', number('l.open_invoices')],
  ['customers', number('l.customers')],
]);

/** What a walk reads of a ledger row `l`: the columns customer_ledger_order carries (an index-only scan). */
const LEDGER_COLUMNS = 'l.customer_id, l.name, l.billed, l.collected, l.outstanding, l.open_invoices';
/** What a page reads of a picked ledger row: also its open balances by due date (not in the index; see owedFrom()). */
const PICKED_COLUMNS = `${LEDGER_COLUMNS}, l.open_due_dates, l.owed_from`;
/**
 * The rows a walk testing a search term picked, with their open balances by due date read by primary key: the walk
 * itself stays index-only, though it may skip most of what it reads (20,000 customers, a term matching none: 663
 * buffers, against 20,613 had it read every row walked from the table). The look-up is a LATERAL subquery with a
 * LIMIT, which the planner cannot turn into a join of its own choosing: one look-up per picked row whatever the
 * statistics say (a hash join would read the whole ledger: 8 ms for a page of 50 on the large bench set).
 */
const withOpenDues = (picked: string) => `
      SELECT w.*, d.open_due_dates, d.owed_from FROM (${picked}) w
      CROSS JOIN LATERAL (SELECT d.open_due_dates, d.owed_from FROM customer_ledger d WHERE d.customer_id = w.customer_id LIMIT 1) d`;

const ORDER = 'l.outstanding DESC, l.name, l.customer_id';
/** The position a later page starts after (scalar subqueries, for one generic plan whatever the position). */
const AFTER_OUTSTANDING = positionValue('afterOutstanding', 'bigint');
const AFTER_NAME_AND_ID = `(${positionValue('afterName', 'text')}, ${positionValue('afterId', 'uuid')})`;

/**
 * The ledger rows in the page's order up to the page size and one more (whether a next page exists): read from
 * customer_ledger_order (which holds the order, the figures and the name), `filter` tested on the way. The page size
 * and the workspace are scalar subqueries, so the planner costs every execution alike (a tenth of an average
 * workspace's ledger): one generic plan per statement text, of the same shape as the plan for a known page size of 1
 * to 200. A page size bound as a parameter would be planned on every request; so would a small workspace's page
 * (0.5 ms), its plan made for its own values looking cheaper than the generic one.
 *
 * A later page (`after`): the rows after the position. The order mixes directions (outstanding descending, then name
 * and id ascending), which no row comparison states, and a condition such as `outstanding < o OR (outstanding = o
 * AND (name, id) > (n, i))` is no start for the index walk: it would walk the whole of the position's outstanding
 * from its first row, and most customers of a book may owe the same (0: paid up). So two walks of the index, each
 * from its exact start: the rest of the position's outstanding (by name and id), then the lower amounts; appended in
 * that order (a Merge Append reading each as far as the page needs), so a deep page reads what the first does.
 */
const walk = (filter: string, after: boolean, columns = LEDGER_COLUMNS) => {
  const from = (start: string) => `
      SELECT ${columns}
      FROM customer_ledger l
      WHERE l.workspace_id = ${WORKSPACE} AND l.invoices > 0 ${start} ${filter}
      ORDER BY ${ORDER}
      LIMIT ${FETCH_SIZE}`;
  if (!after) return from('');
  return `
      SELECT * FROM (
        (${from(`AND l.outstanding = ${AFTER_OUTSTANDING} AND (l.name, l.customer_id) > ${AFTER_NAME_AND_ID}`)})
        UNION ALL
        (${from(`AND l.outstanding < ${AFTER_OUTSTANDING}`)})
      ) l
      ORDER BY ${ORDER}
      LIMIT ${FETCH_SIZE}`;
};

// A substring of the name, case-insensitive: strpos on the lower-cased name is what ILIKE '%term%' tests (it
// lower-cases both sides too); the term is lower-cased once (a scalar subquery), not for every row walked.
const NAME_HAS_TERM = 'strpos(lower(l.name), (SELECT lower(:search))) > 0';

/** The page without a search (each row walked is picked: its open balances are read on the way). */
const picked = (after: boolean) => `picked AS (${walk('', after, PICKED_COLUMNS)}),`;
/** With a term too short for the trigram index. */
const pickedShortTerm = (after: boolean) => `picked AS (${withOpenDues(walk(`AND ${NAME_HAS_TERM}`, after))}),`;
/**
 * With a term the trigram index can serve: up to RARE_TERM_MATCHES + 1 customers whose name matches (ILIKE, the
 * wildcards escaped) from customers_workspace_name_trgm; if that is all of them, the page is those in the ledger,
 * sorted; otherwise the ledger walked in order. Either way the same rows: which way is a matter of cost only. The
 * pattern is a scalar subquery, so the statement has one plan whatever the term (planning it for each term took
 * 1.5 ms, five times its execution for a rare term). The workspace is a scalar subquery too (see walk()), and an
 * index condition: the index is GIN on (workspace_id, name's trigrams), so its scan returns this workspace's matches
 * only, never another tenant's (`moh` from a workspace of 20 customers beside one of 50,000: 16 buffers; on an index
 * of names alone, 532, fetching and dropping the other's 2,540 matches). It stays a GIN condition with thousands of
 * small workspaces too (not narrowed instead by the workspace's whole entry in customers_name, a B-tree).
 */
const pickedTrigramTerm = (after: boolean) => `
    matched AS MATERIALIZED (
      SELECT c.id FROM customers c
      WHERE c.workspace_id = ${WORKSPACE} AND c.name ILIKE (SELECT CAST(:pattern AS text)) ESCAPE '\\'
      LIMIT ${RARE_TERM_MATCHES + 1}
    ),
    rare AS (SELECT count(*) <= ${RARE_TERM_MATCHES} AS term FROM matched),
    picked AS (
      (SELECT ${PICKED_COLUMNS}
       FROM matched m JOIN customer_ledger l ON l.customer_id = m.id
       WHERE (SELECT term FROM rare) AND l.invoices > 0
         ${after ? `AND (l.outstanding < ${AFTER_OUTSTANDING} OR (l.outstanding = ${AFTER_OUTSTANDING} AND (l.name, l.customer_id) > ${AFTER_NAME_AND_ID}))` : ''}
       ORDER BY ${ORDER}
       LIMIT ${FETCH_SIZE})
      UNION ALL
      (${withOpenDues(walk(`AND NOT (SELECT term FROM rare) AND ${NAME_HAS_TERM}`, after))})
    ),`;

/**
 * The open balance of a picked ledger row `p` due on or after `day`, from its open_due_dates (sorted) and
 * owed_from (migration 20261123003200): width_bucket, a binary search, counts the due dates before `day`; the element
 * after them is what is owed from `day` on. So a row is aged on any day without reading its invoices
 * (agingColumns(): 61+ is the rest of the row's outstanding, the sum of its open balances).
 */
const owedFrom = (day: string) => `p.owed_from[width_bucket(${day} - 1, p.open_due_dates) + 1]`;

/** The rows picked, numbered in the order: the page is rows 1 to limit, and `next` the last one's keys when a row follows. */
const PAGE = pageOf('p', 'p.outstanding DESC, p.name, p.customer_id', ['p.outstanding', 'p.name', 'p.customer_id']);

/** The statement for a page chosen by `picked`: its rows' ageing, the totals, the answer's JSON text and `next`. */
const receivablesSql = (picked: string) => `
    WITH ${picked}
    page AS (
      SELECT p.customer_id, p.name, p.billed, p.collected, p.outstanding, p.open_invoices,
             ${agingColumns(AGING_EDGES.map(owedFrom), 'p.outstanding')}, ${PAGE.number}
      FROM picked p
    )
    -- one concat() around the rows: each || would copy the whole text again
    SELECT concat('{"rows":[', r.rows, '],"totals":', ${TOTALS_JSON}, '}') AS body, r.next
    FROM (
      SELECT string_agg(${ROW_JSON}, ',' ORDER BY outstanding DESC, name, customer_id) ${PAGE.inPage} AS rows, ${PAGE.next} AS next
      FROM page p
    ) r,
    (
      SELECT coalesce(sum(t.billed), 0) AS billed, coalesce(sum(t.invoice_collected), 0) AS collected,
             coalesce(sum(t.outstanding), 0) AS outstanding, coalesce(sum(t.open_invoices), 0) AS open_invoices,
             coalesce(sum(t.customers), 0) AS customers
      FROM workspace_totals t WHERE t.workspace_id = :ws
    ) l,
    (${WORKSPACE_AGING}) a`;

/** The three statements (no search, a short term, a longer term), for the first page and for a page after a position. */
const STATEMENTS = new Map(
  [false, true].map((after) => [
    after,
    {
      all: receivablesSql(picked(after)),
      short: receivablesSql(pickedShortTerm(after)),
      trigram: receivablesSql(pickedTrigramTerm(after)),
    },
  ]),
);

/**
 * One row per customer with at least one issued invoice (customer_ledger.invoices > 0), ordered by outstanding
 * (highest first), then name, then id, read in that order from customer_ledger_order (which also holds the row's
 * figures and the name) and stopping at `limit`. The ageing columns are worked out for the returned customers
 * only, from their ledger rows' open balances by due date (owedFrom()). `totals` cover the whole book whatever
 * `search` and `limit` say.
 */
export async function receivables(
  db: Knex,
  workspace: WorkspaceRef,
  params: ReceivablesParams,
  now: Date,
): Promise<ReceivablesPage> {
  const page = await receivablesJson(db, workspace, params, now);
  return {
    ...(JSON.parse(page.json) as Omit<Receivables, 'nextCursor'>),
    next: page.next as ReceivablesPosition | null,
  };
}

/**
 * The same page as receivables(), as the JSON text of the document's Receivables without `nextCursor` (the API
 * appends it, signed, from `next`): what the API sends. Built by PostgreSQL (keys in the document's order), so Node
 * neither parses up to 200 rows nor serialises them again. Each of its statements (no search, a short term, a longer
 * term; the first page or one after a position) is prepared once per connection with one plan.
 */
export async function receivablesJson(
  db: Knex,
  workspace: WorkspaceRef,
  params: ReceivablesParams,
  now: Date,
): Promise<JsonPage> {
  const { sql, bindings } = receivablesStatement(workspace, params, now);
  return jsonPage(db, sql, bindings, { prepared: true });
}

/** Which of the six statements answers `params`, and its named bindings (the tests read its plan). */
export function receivablesStatement(
  workspace: WorkspaceRef,
  params: ReceivablesParams,
  now: Date,
): { sql: string; bindings: Record<string, unknown> } {
  const limit = Math.trunc(params.limit);
  if (!(limit >= 1)) throw new RangeError(`receivables: limit must be a positive integer, got ${params.limit}`);
  const bindings: Record<string, unknown> = { ...baseBindings(workspace, now), limit };
  if (params.after) [bindings.afterOutstanding, bindings.afterName, bindings.afterId] = params.after;
  const statements = STATEMENTS.get(params.after !== undefined)!;
  if (!params.search) return { sql: statements.all, bindings };
  bindings.search = params.search;
  if (!trigramSearchable(params.search)) return { sql: statements.short, bindings };
  bindings.pattern = containsPattern(params.search);
  return { sql: statements.trigram, bindings };
}
