import crypto from 'node:crypto';
import type { Knex } from 'knex';

/** What every query needs to know about the workspace it answers for. */
export interface WorkspaceRef {
  id: string;
  timezone: string;
}

/**
 * Named bindings shared by the SQL fragments below: `:ws` the workspace id, `:now` the caller's clock (ISO
 * string, cast to timestamptz), `:tz` the workspace's IANA time zone.
 */
export function baseBindings(workspace: WorkspaceRef, now: Date): { ws: string; now: string; tz: string } {
  return { ws: workspace.id, now: now.toISOString(), tz: workspace.timezone };
}

/** The clock as timestamptz. */
export const NOW = `CAST(:now AS timestamptz)`;
/**
 * Today's date on the workspace's local calendar. A scalar subquery, so PostgreSQL works it out once per
 * statement (an InitPlan) instead of converting time zones again for every row it filters.
 */
export const TODAY = `(SELECT (${NOW} AT TIME ZONE :tz)::date)`;
/**
 * The workspace (`:ws`) and the page size (`:limit`) as scalar subqueries, for prepared statements (rows(), prepared):
 * the planner sees neither value, so a plan made for the values costs what the generic plan does, and PostgreSQL keeps
 * the generic one after five executions. Bound directly, the generic plan is costed for an average workspace and a
 * tenth of its rows, looks dearer than a plan for one page, and the statement is planned on every request (for the
 * vehicle listing, about half its database time).
 */
export const WORKSPACE = '(SELECT CAST(:ws AS uuid))';
export const PAGE_SIZE = '(SELECT CAST(:limit AS integer))';
/**
 * One row more than the page (PAGE_SIZE + 1), for the lists that page by position: a row after the page says that
 * there is a next one, so the last page says so without a further request (see pageOf()).
 */
export const FETCH_SIZE = '(SELECT CAST(:limit AS integer) + 1)';
/** A value of a position bound as a scalar subquery, for the reason WORKSPACE is: one generic plan for every position. */
export const positionValue = (name: string, type: string) => `(SELECT CAST(:${name} AS ${type}))`;
/** Local midnight starting today, and the next one, as timestamptz: today is [DAY_START, DAY_END). */
export const DAY_START = `(SELECT (${TODAY})::timestamp AT TIME ZONE :tz)`;
export const DAY_END = `(SELECT (${TODAY} + 1)::timestamp AT TIME ZONE :tz)`;

type PgConnection = {
  query(config: { name?: string; text: string; values: unknown[] } | string): Promise<{ rows: unknown[] }>;
};

/** A statement with named bindings turned into PostgreSQL's positional form, worked out once per statement text. */
interface Compiled {
  /** The text with `$1`, `$2`, ... in place of `:name` (one parameter per occurrence, as knex numbers them). */
  text: string;
  /** The binding name of each parameter, in order. */
  names: string[];
  /** The prepared statement's name: a digest of the text, so equal texts share one plan per connection. */
  name: string;
}

const compiled = new Map<string, Compiled>();
/** Far above the query modules' few dozen texts: a text built from values (a mistake) cannot grow the map forever. */
const MAX_COMPILED = 1000;

/**
 * `:name` placeholders, also cast as `:name::type` (not `::type` casts themselves, not `T00:00` inside a literal),
 * replaced as knex.raw replaces named bindings: only names that have a value, even inside a quoted literal; a
 * backslash before the colon keeps a literal `:name`.
 */
const NAMED_BINDING = /(\\?)(?<![:\w]):(\w+)(?!\w)(?!:(?!:))/g;

function compile(sql: string, bindings: Record<string, unknown>): Compiled {
  let statement = compiled.get(sql);
  if (!statement) {
    const names: string[] = [];
    const text = sql.replace(NAMED_BINDING, (match: string, escape: string, name: string) => {
      if (escape) return match.slice(1);
      if (!Object.hasOwn(bindings, name)) return match;
      names.push(name);
      return `$${names.length}`;
    });
    statement = {
      text,
      names,
      name: `frs_${crypto.createHash('sha256').update(text).digest('base64url').slice(0, 32)}`,
    };
    if (compiled.size >= MAX_COMPILED) compiled.clear();
    compiled.set(sql, statement);
  }
  return statement;
}

const INDEX_PLANS = `BEGIN; SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off`;

/**
 * Runs a raw statement with named bindings and returns its rows. The statement's positional form is worked out on
 * its first use and kept (the texts are the query modules' own, a few dozen in all), so a request costs neither a
 * parse of the text nor a digest of it. `prepared`: as a named prepared statement, so each pooled connection parses
 * and plans it once and PostgreSQL may then keep a generic plan (planning cost the summaries as much as running
 * them). Only for statements whose best plan does not depend on the values bound (a workspace, the clock, its time
 * zone; a workspace or page size whose estimate would change the plan is written as WORKSPACE and PAGE_SIZE); a
 * statement whose best plan depends on a value it sees keeps a plan made for its values (unnamed, planned each time).
 * `indexPlans`: planned with sequential and bitmap scans off, in a transaction of its own (BEGIN, SET LOCAL, the
 * statement, COMMIT: three round trips): for a queue's claim and record, which read a few rows by key or in index
 * order, and whose kept plan must not depend on how full the queue was when it was made.
 */
export async function rows<T>(
  db: Knex,
  sql: string,
  bindings: Record<string, unknown>,
  options: { prepared?: boolean; indexPlans?: boolean } = {},
): Promise<T[]> {
  const statement = compile(sql, bindings);
  const values = statement.names.map((name) => {
    if (!Object.hasOwn(bindings, name)) throw new Error(`rows(): no value for :${name}`);
    return bindings[name];
  });
  if (options.indexPlans && (db as Knex.Transaction).isTransaction)
    throw new Error('rows(): indexPlans runs its statement in a transaction of its own');
  const connection = (await db.client.acquireConnection()) as PgConnection;
  try {
    const query = options.prepared
      ? { name: statement.name, text: statement.text, values }
      : { text: statement.text, values };
    if (!options.indexPlans) return (await connection.query(query)).rows as T[];
    // Planned with sequential and bitmap scans switched off (SET LOCAL, in the statement's own transaction), so the
    // plan a connection keeps for a prepared statement reads by index whatever the table's size or statistics were
    // when it was made (a plan made while a queue was empty would otherwise scan the whole table once it is full).
    // (By hand, not knex's transaction(): a named prepared statement needs the connection itself.)
    try {
      await connection.query(INDEX_PLANS);
      const result = (await connection.query(query)).rows as T[];
      await connection.query('COMMIT');
      return result;
    } catch (err) {
      // A connection that cannot end its transaction is not given back to the pool as it is: knex discards it.
      await connection.query('ROLLBACK').catch((rollbackError: unknown) => {
        (connection as { __knex__disposed?: unknown }).__knex__disposed = rollbackError;
      });
      throw err;
    }
  } finally {
    await db.client.releaseConnection(connection);
  }
}

/**
 * Runs a statement whose one row has one column, `body`: an answer PostgreSQL built as JSON and selected as text,
 * which the API sends as it is (Node neither parses the rows nor serialises them again).
 */
export async function jsonText(
  db: Knex,
  sql: string,
  bindings: Record<string, unknown>,
  options: { prepared?: boolean } = {},
): Promise<string> {
  const [r] = await rows<{ body: string }>(db, sql, bindings, options);
  return r.body;
}

/**
 * A page of a list that pages by position (keyset paging): its answer as JSON text (jsonText()), and `next`, the
 * position of its last row as the text of each key of the list's order, when a row follows it (null on the last
 * page). The next page is the rows after `next` in the list's order, whatever was inserted or deleted meanwhile.
 */
export interface JsonPage {
  json: string;
  next: string[] | null;
}

/** Runs a statement whose one row has `body` (as for jsonText()) and `next` (a text[] or null, see pageOf()). */
export async function jsonPage(
  db: Knex,
  sql: string,
  bindings: Record<string, unknown>,
  options: { prepared?: boolean } = {},
): Promise<JsonPage> {
  const [r] = await rows<{ body: string; next: string[] | null }>(db, sql, bindings, options);
  return { json: r.body, next: r.next };
}

/**
 * For a statement that reads up to FETCH_SIZE rows in the list's order: `number`, each row's place (1, 2, ...), and
 * over those numbered rows (alias `alias`) the aggregates `inPage` (a FILTER clause: the rows up to the page size)
 * and `next` (the keys of the page's last row as text[] when a row follows it, else null).
 */
export function pageOf(
  alias: string,
  orderBy: string,
  keys: string[],
): { number: string; inPage: string; next: string } {
  const n = `${alias}.page_row`;
  // The page size as PAGE_SIZE here too: a plan made for a known size would fold it and cost a hair less than the
  // generic one, and the statement would be planned on every request.
  return {
    number: `row_number() OVER (ORDER BY ${orderBy}) AS page_row`,
    inPage: `FILTER (WHERE ${n} <= ${PAGE_SIZE})`,
    next: `CASE WHEN max(${n}) > ${PAGE_SIZE} THEN max(ARRAY[${keys.map((k) => `(${k})::text`).join(', ')}]) FILTER (WHERE ${n} = ${PAGE_SIZE}) END`,
  };
}

/** `%s%` with LIKE's wildcards and escape character in `s` escaped: a substring pattern for ILIKE ... ESCAPE '\'. */
export function containsPattern(s: string): string {
  return `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/**
 * Whether a substring search for `s` can use a trigram index (pg_trgm): it takes trigrams from runs of at least
 * three letters or digits. A shorter term matches so much that reading in order and filtering is the better plan.
 */
export function trigramSearchable(s: string): boolean {
  return /[\p{L}\p{N}]{3}/u.test(s);
}

/**
 * SQL expressions that write JSON text by concatenation, for answers PostgreSQL builds and the API sends as they
 * are (jsonText()). Measured on today's operations (about 90 items): json_build_object and json_agg cost about
 * twice what text concatenation does, and casting built text to json parses it all again. Each value below is an
 * SQL expression of JSON text; NULL is written as null, as json_build_object writes it (a NULL left inside a
 * concatenation would blank the whole item).
 */
export const jsonValue = {
  /** Text that may need escaping (names, plates): quoted and escaped by to_json, as JSON.stringify escapes it. */
  string: (expr: string) => `to_json(${expr}::text)::text`,
  /**
   * A value whose text is never escaped (a uuid, a time written as ISO 8601), quoted as it is. Cast to text first:
   * text || uuid is a SQL function (textanycat) the planner inlines by parsing it, each time it plans.
   */
  plainString: (expr: string) => `'"' || (${expr})::text || '"'`,
  /** A bigint or integer (its text is a JSON number); a boolean (its text is true or false). */
  number: (expr: string) => `(${expr})::text`,
  boolean: (expr: string) => `(${expr})::text`,
  /** JSON text already (a nested jsonObjectText/jsonArrayText). */
  json: (expr: string) => expr,
};

/** `{"key":value,...}` from SQL expressions of JSON text (jsonValue), keys in the order given. */
export function jsonObjectText(fields: Array<[key: string, value: string]>): string {
  const parts = fields.map(([key, value], i) => {
    if (!/^\w+$/.test(key)) throw new Error(`jsonObjectText(): key ${key} is not a plain name`);
    return `'${i === 0 ? '{' : ','}"${key}":' || coalesce(${value}, 'null')`;
  });
  return `(${parts.length ? parts.join(' || ') : `'{'`} || '}')`;
}

/**
 * `[item,...]` over the rows of the query this aggregate is in, in `orderBy` order (those `filter` keeps: a FILTER
 * clause); `[]` when there are none.
 */
export function jsonArrayText(item: string, orderBy: string, filter = ''): string {
  return `('[' || coalesce(string_agg(${item}, ',' ORDER BY ${orderBy}) ${filter}, '') || ']')`;
}
