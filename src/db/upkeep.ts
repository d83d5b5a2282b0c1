import type { Knex } from 'knex';

// The service's upkeep of its running totals (migration 20261128000800_upkeep_deferred). A writer that says nothing
// (the platform writing its tables directly) pays for a queued copy of the rows it changed, and the worker applies the
// queue: the figures follow within the fold's interval (frs_upkeep_delay_seconds shows how far behind they are). The
// service's own writers (batch writes, import jobs, the CLI's import and seeds) keep the totals in their own
// transaction instead (`frs.upkeep = inline`), so what they answer is already in the figures when they commit.

/** How often the worker applies the queued changes of direct writers: the figures' delay behind a direct write. */
export const UPKEEP_FOLD_INTERVAL_MS = 100;

/**
 * Makes `trx` keep the running totals itself (inline) for the rest of the transaction. A fold never waits long for a
 * row such a writer holds (its lock_timeout), so the two never deadlock at the writer's expense.
 */
export async function keepUpkeepInline(trx: Knex.Transaction): Promise<void> {
  await trx.raw(`SELECT set_config('frs.upkeep', 'inline', true)`);
}

/** The direct writers' queues (migration 20261128000800: tables upkeep_<queue>), in the order a fold applies them. */
export const UPKEEP_QUEUES = ['payments', 'expenses', 'invoices', 'bookings', 'vehicles', 'customers'] as const;

/**
 * Applies the queued changes of the given workspaces (all when null), a queue a transaction (so that the rows a fold
 * writes, an invoice's paid say, are held by it no longer than that queue's part); returns how many queued rows it applied.
 */
export async function foldUpkeep(db: Knex, workspaceIds: readonly string[] | null): Promise<number> {
  const workspaces = workspaceIds === null ? null : `{${workspaceIds.join(',')}}`;
  let applied = 0;
  for (const queue of UPKEEP_QUEUES) {
    const { rows } = await db.raw('SELECT upkeep_fold(?::uuid[], ?) AS applied', [workspaces, queue]);
    applied += Number(rows[0].applied);
  }
  return applied;
}

/** Seconds since the oldest change not yet applied was written (0 when the figures are current). */
export async function upkeepDelaySeconds(db: Knex): Promise<number> {
  const { rows } = await db.raw('SELECT upkeep_delay() AS delay');
  return Number(rows[0].delay);
}
