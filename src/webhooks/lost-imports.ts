import type { Knex } from 'knex';

// Import jobs whose process is gone: the engine's retention finds them (so that a job nobody reads again is seen
// ended, and pruned in time), and so does reading a job (getImport in src/core/import/jobs.ts). A running job's
// transaction holds its lock (LOCK in jobs.ts); here it is only tried.

/** Succeeds only when no transaction holds the job's lock (the same key as jobs.ts's LOCK). */
const TRY_LOCK = `pg_try_advisory_xact_lock(hashtextextended('frs.import:' || ?::text, 0))`;

/** The error of a job whose process stopped (its connection gone, its transaction rolled back). */
export const LOST_JOB_ERROR = 'the process running the job stopped before it finished; nothing was written';

/**
 * Records as failed the running jobs whose process is gone (nothing was written): taking a job's lock succeeds only when
 * no transaction holds it. Of one job (`id`, getImport), or of every workspace (or `workspaceIds`: the worker's
 * retention, so that a job nobody reads again is seen ended, and pruned in time). Returns the ids it failed.
 */
export async function failLostImports(
  db: Knex,
  scope: { id?: string; workspaceIds?: string[] | null } = {},
): Promise<string[]> {
  return db.transaction(async (t) => {
    // (the lock is tried on running jobs only: a finished job's is nobody's to hold)
    let candidates = t('import_jobs').where({ phase: 'running' }).select('id');
    if (scope.id !== undefined) candidates = candidates.where({ id: scope.id });
    if (scope.workspaceIds) candidates = candidates.whereIn('workspace_id', scope.workspaceIds);
    const ids = (await candidates).map((r: { id: string }) => r.id);
    const lost: string[] = [];
    for (const id of ids) {
      const { rows } = await t.raw(`SELECT ${TRY_LOCK} AS free`, [id]);
      if (rows[0].free) lost.push(id);
    }
    if (lost.length === 0) return [];
    return (
      await t('import_jobs')
        .whereIn('id', lost)
        .where({ phase: 'running' })
        .update({
          phase: 'failed',
          error: LOST_JOB_ERROR,
          records_applied: 0,
          finished_at: t.fn.now(),
          updated_at: t.fn.now(),
        })
        .returning('id')
    ).map((r: { id: string }) => r.id);
  });
}
