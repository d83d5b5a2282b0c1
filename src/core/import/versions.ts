import type { Knex } from 'knex';

// Versions and tombstones (record_versions, migration 20261128000500): the version the platform gave each record, so
// that a change that is not newer than what is stored is skipped, whatever order retries and reorderings bring.

/** A versioned upsert (`deleting` false) or delete of one record, with its index in the request. */
export interface Versioned {
  id: string;
  version: number;
  deleting: boolean;
  index: number;
}

export interface VersionOutcome {
  /** Newer than what is stored (or nothing is): to be written. Their version is recorded. */
  applied: Versioned[];
  /** The same version as stored, for the same kind of change (an upsert of a live record, a delete of a tombstone). */
  unchanged: Versioned[];
  /** Older, or the same version for the other kind of change: skipped. */
  stale: Versioned[];
}

/**
 * Records the versions of `versioned` that are newer than the stored ones (a delete's as a tombstone) and says which
 * were. The statement locks each record's version row, so two writers of one record are ordered: the second sees the
 * first's version. Without a version, an upsert revives a tombstone (last write wins) and a delete forgets the version.
 */
export async function applyVersions(
  trx: Knex,
  workspaceId: string,
  key: string,
  versioned: Versioned[],
  unversioned: { upserts: string[]; deletes: string[] },
): Promise<VersionOutcome> {
  const outcome: VersionOutcome = { applied: [], unchanged: [], stale: [] };
  if (unversioned.upserts.length > 0) {
    await trx.raw(
      `UPDATE record_versions SET deleted_at = NULL WHERE workspace_id = ? AND key = ? AND id = ANY(?::uuid[]) AND deleted_at IS NOT NULL`,
      [workspaceId, key, unversioned.upserts],
    );
  }
  if (unversioned.deletes.length > 0) {
    await trx.raw(`DELETE FROM record_versions WHERE workspace_id = ? AND key = ? AND id = ANY(?::uuid[])`, [
      workspaceId,
      key,
      unversioned.deletes,
    ]);
  }
  if (versioned.length === 0) return outcome;
  // One id per statement: the batch refused duplicates. Sorted, so concurrent writers lock rows in one order.
  const sorted = [...versioned].sort((a, b) => (a.id.toLowerCase() < b.id.toLowerCase() ? -1 : 1));
  const { rows } = await trx.raw(
    `INSERT INTO record_versions (workspace_id, key, id, version, deleted_at)
     SELECT ?, ?, input.id, input.version, CASE WHEN input.deleting THEN now() END
       FROM unnest(?::uuid[], ?::bigint[], ?::boolean[]) AS input (id, version, deleting)
     ON CONFLICT (workspace_id, key, id) DO UPDATE SET version = excluded.version, deleted_at = excluded.deleted_at
       WHERE record_versions.version < excluded.version
     RETURNING id`,
    [workspaceId, key, sorted.map((v) => v.id), sorted.map((v) => v.version), sorted.map((v) => v.deleting)],
  );
  const won = new Set(rows.map((r: { id: string }) => r.id));
  const lost = versioned.filter((v) => !won.has(v.id.toLowerCase()));
  const stored = new Map<string, { version: number; deleted: boolean }>();
  if (lost.length > 0) {
    const { rows: current } = await trx.raw(
      `SELECT id, version, deleted_at IS NOT NULL AS deleted FROM record_versions WHERE workspace_id = ? AND key = ? AND id = ANY(?::uuid[])`,
      [workspaceId, key, lost.map((v) => v.id)],
    );
    for (const row of current) stored.set(row.id, { version: Number(row.version), deleted: row.deleted });
  }
  for (const v of versioned) {
    if (won.has(v.id.toLowerCase())) {
      outcome.applied.push(v);
      continue;
    }
    const s = stored.get(v.id.toLowerCase());
    (s && s.version === v.version && s.deleted === v.deleting ? outcome.unchanged : outcome.stale).push(v);
  }
  return outcome;
}

/**
 * Marks the transaction's writes as history (a backfill): the service's triggers record no entity changes for them, so
 * no derived event (`payment.captured`...) is raised for records that were already true elsewhere. Transaction-local.
 */
export async function markHistory(trx: Knex): Promise<void> {
  await trx.raw(`SELECT set_config('frs.history', 'on', true)`);
}
