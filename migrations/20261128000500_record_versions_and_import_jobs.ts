import type { Knex } from 'knex';

// Keeping a workspace current from the platform (batch writes and import jobs, src/core/import/). Frozen SQL, imports
// nothing from src/.
// - record_versions: the version the platform gave a record (its outbox's sequence, a timestamp in microseconds...),
//   by document key and id, so that a retried or reordered change that is not newer is skipped. A deleted record keeps
//   its row as a tombstone (`deleted_at` set) so that a late upsert of an older version cannot bring it back; the
//   retention sweep removes tombstones older than FRS_RETENTION_DAYS. Kept beside the records, not in their tables, so
//   that the records' own tables (and the triggers over them) are the same whether or not the platform sends versions.
// - import_jobs: one per import job: its phase and progress, written outside the job's own transaction (which holds
//   every record until it commits), so that they can be read while it runs.
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE record_versions (
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      key text NOT NULL CHECK (length(key) BETWEEN 1 AND 40),
      id uuid NOT NULL,
      version bigint NOT NULL CHECK (version BETWEEN 0 AND 9007199254740991),
      deleted_at timestamptz,
      PRIMARY KEY (workspace_id, key, id)
    );
    CREATE INDEX record_versions_tombstones ON record_versions (deleted_at) WHERE deleted_at IS NOT NULL;

    CREATE TABLE import_jobs (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      phase text NOT NULL CHECK (phase IN ('running', 'succeeded', 'failed', 'canceled')),
      format text NOT NULL CHECK (format IN ('json', 'ndjson')),
      history boolean NOT NULL DEFAULT true,
      bulk boolean NOT NULL DEFAULT false,
      records_read bigint NOT NULL DEFAULT 0,
      records_applied bigint NOT NULL DEFAULT 0,
      counts jsonb NOT NULL DEFAULT '{}',
      error text,
      cancel_requested boolean NOT NULL DEFAULT false,
      started_by text NOT NULL CHECK (length(started_by) BETWEEN 1 AND 200),
      started_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      finished_at timestamptz,
      CHECK ((phase = 'running') = (finished_at IS NULL))
    );
    CREATE INDEX import_jobs_workspace ON import_jobs (workspace_id, started_at DESC);
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`DROP TABLE IF EXISTS import_jobs, record_versions`);
}
