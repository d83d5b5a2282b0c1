import type { Knex } from 'knex';
import { keepUpkeepInline } from './upkeep.js';

// Bulk loading into one workspace (seed large, an import into an empty workspace). The running totals of that
// workspace are computed once, set-based, at the end of the load's transaction (rollups_rebuild, in the
// 20261123002110 migration) instead of by the statement triggers chunk by chunk; the triggers stay in force for
// every other workspace and every other transaction.

/** The base tables whose rows feed a running total: a workspace holding none of them has no totals to keep. */
const ROLLUP_SOURCES = ['vehicles', 'customers', 'bookings', 'invoices', 'payments', 'expenses'] as const;

/**
 * Makes the rollup triggers of `trx` leave `workspaceId`'s rows alone, when the workspace holds no rows yet, and
 * returns whether it did; the caller then ends the load with finishDeferredRollups. Otherwise (false) the
 * triggers keep the totals as usual, and nothing is locked. Either way the totals are exact at commit.
 *
 * A deferred workspace's row is locked FOR UPDATE for the rest of the transaction: every insert into the workspace (its
 * foreign key check takes a key-share lock on that row) waits until the load commits. With no rows of the
 * workspace to update or delete beforehand, no other writer can change what the rebuild counts.
 */
export async function deferRollups(trx: Knex.Transaction, workspaceId: string): Promise<boolean> {
  // the service's own write: its totals are kept in its transaction, bulk-loaded or not (src/db/upkeep.ts)
  await keepUpkeepInline(trx);
  // In a savepoint: rolled back, it releases the lock again when the workspace is not bulk-loaded after all.
  await trx.raw('SAVEPOINT defer_rollups');
  await trx.raw('SELECT 1 FROM workspaces WHERE id = ? FOR UPDATE', [workspaceId]);
  const holdsRows = ROLLUP_SOURCES.map((table) => `EXISTS (SELECT 1 FROM ${table} WHERE workspace_id = :ws)`).join(
    ' OR ',
  );
  const { rows } = await trx.raw(`SELECT ${holdsRows} AS held`, { ws: workspaceId });
  if (rows[0].held) {
    await trx.raw('ROLLBACK TO SAVEPOINT defer_rollups');
    await trx.raw('RELEASE SAVEPOINT defer_rollups');
    return false;
  }
  await trx.raw('RELEASE SAVEPOINT defer_rollups');
  // direct writers' changes of rows deleted before (queued, not yet applied) are in the rebuild already
  await trx.raw('SELECT upkeep_discard(?)', [workspaceId]);
  // Transaction-local: gone at commit or rollback, and never seen by another connection.
  await trx.raw(`SELECT set_config('frs.bulk_load_workspace', ?, true)`, [workspaceId]);
  return true;
}

/** Sets every running total of the workspace to a fresh computation and puts the triggers back in force for it. */
export async function finishDeferredRollups(trx: Knex.Transaction, workspaceId: string): Promise<void> {
  // Statistics that count the rows just loaded (ANALYZE in a transaction samples its own inserts): planned with the
  // workspace thought empty, the rebuild's joins ran as nested loops over whole aggregates, for minutes.
  await trx.raw(`ANALYZE ${ROLLUP_SOURCES.join(', ')}`);
  await trx.raw('SELECT rollups_rebuild(?)', [workspaceId]);
  await trx.raw(`SELECT set_config('frs.bulk_load_workspace', '', true)`);
}
