import type { Knex } from 'knex';
import { openSigningSecret, sealedSecretColumns } from './support/sealed-signing-secrets.js';

// Signing secrets are stored sealed (AES-256-GCM under the master key, see support/sealed-signing-secrets.ts) instead of in plain
// text, each with the id of the master key that sealed it; a rotation's previous secret is kept the same way
// until previous_secret_expires_at. The secrets already stored are sealed here, in the migration's transaction,
// and the table is then rewritten: an UPDATE leaves the old row versions (plain secrets included) in the table's
// files, and DROP COLUMN only hides the column; CLUSTER copies the live rows into new files and drops the old ones.
// (Backups and WAL taken before the upgrade still hold the old secrets: the README says to rotate them.)
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE webhook_endpoints
      ADD COLUMN secret_key_id text,
      ADD COLUMN secret_sealed bytea,
      ADD COLUMN previous_secret_key_id text,
      ADD COLUMN previous_secret_sealed bytea,
      ADD COLUMN previous_secret_expires_at timestamptz`);
  const rows: Array<{ id: string; secret: string }> = await knex('webhook_endpoints').select('id', 'secret');
  for (const row of rows)
    await knex('webhook_endpoints').where({ id: row.id }).update(sealedSecretColumns(row.id, row.secret));
  await knex.raw(`
    ALTER TABLE webhook_endpoints
      DROP COLUMN secret,
      ALTER COLUMN secret_key_id SET NOT NULL,
      ALTER COLUMN secret_sealed SET NOT NULL,
      ADD CONSTRAINT webhook_endpoints_previous_secret CHECK (
        (previous_secret_key_id IS NULL) = (previous_secret_sealed IS NULL)
        AND (previous_secret_sealed IS NULL) = (previous_secret_expires_at IS NULL))`);
  await knex.raw('CLUSTER webhook_endpoints USING webhook_endpoints_pkey');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE webhook_endpoints ADD COLUMN secret text`);
  const rows: Array<{ id: string; secret_key_id: string; secret_sealed: Buffer }> = await knex(
    'webhook_endpoints',
  ).select('id', 'secret_key_id', 'secret_sealed');
  for (const row of rows) {
    await knex('webhook_endpoints')
      .where({ id: row.id })
      .update({ secret: openSigningSecret(row.id, { keyId: row.secret_key_id, sealed: row.secret_sealed }) });
  }
  await knex.raw(`
    ALTER TABLE webhook_endpoints
      DROP CONSTRAINT webhook_endpoints_previous_secret,
      DROP COLUMN secret_key_id, DROP COLUMN secret_sealed,
      DROP COLUMN previous_secret_key_id, DROP COLUMN previous_secret_sealed, DROP COLUMN previous_secret_expires_at,
      ALTER COLUMN secret SET NOT NULL,
      ADD CONSTRAINT webhook_endpoints_secret_check CHECK (secret ~ '^whsec_[A-Za-z0-9]{32,}$')`);
}
