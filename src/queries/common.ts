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
/** Local midnight starting today, and the next one, as timestamptz: today is [DAY_START, DAY_END). */
export const DAY_START = `(SELECT (${TODAY})::timestamp AT TIME ZONE :tz)`;
export const DAY_END = `(SELECT (${TODAY} + 1)::timestamp AT TIME ZONE :tz)`;
/** The first day of the current local month, as a local timestamp (timestamp without time zone). */
export const MONTH_START_LOCAL = `date_trunc('month', ${NOW} AT TIME ZONE :tz)`;

type PgConnection = { query(config: { name: string; text: string; values: unknown[] }): Promise<{ rows: unknown[] }> };

/**
 * Runs a raw statement with named bindings and returns its rows. `prepared`: as a named prepared statement, so
 * each pooled connection parses and plans it once and PostgreSQL may then keep a generic plan (planning cost the
 * summaries as much as running them). Only for statements whose best plan does not depend on the values bound
 * (a workspace, the clock, its time zone); a search pattern or a page size keeps a plan made for its values.
 */
export async function rows<T>(db: Knex, sql: string, bindings: Record<string, unknown>, options: { prepared?: boolean } = {}): Promise<T[]> {
  if (!options.prepared) return (await db.raw(sql, bindings as Knex.ValueDict)).rows as T[];
  const native = db.raw(sql, bindings as Knex.ValueDict).toSQL().toNative();
  const name = `frs_${crypto.createHash('sha256').update(native.sql).digest('base64url').slice(0, 32)}`;
  const connection = (await db.client.acquireConnection()) as PgConnection;
  try {
    return (await connection.query({ name, text: native.sql, values: native.bindings as unknown[] })).rows as T[];
  } finally {
    await db.client.releaseConnection(connection);
  }
}

/** `%s%` with LIKE's wildcards and escape character in `s` escaped: a substring pattern for ILIKE ... ESCAPE '\'. */
export function containsPattern(s: string): string {
  return `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}
