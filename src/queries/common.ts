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

/** Runs a raw statement with named bindings and returns its rows. */
export async function rows<T>(db: Knex, sql: string, bindings: Record<string, unknown>): Promise<T[]> {
  const result = await db.raw(sql, bindings as Knex.ValueDict);
  return result.rows as T[];
}

/** `%s%` with LIKE's wildcards and escape character in `s` escaped: a substring pattern for ILIKE ... ESCAPE '\'. */
export function containsPattern(s: string): string {
  return `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}
