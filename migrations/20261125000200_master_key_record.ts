import type { Knex } from 'knex';

// Which master key sealed the stored signing secrets (src/core/webhooks/signing-secrets.ts): one row, key_id NULL until
// the first secret is sealed. The first seal sets it and a master-key rotation moves it, each in its own transaction,
// and every process checks its key against it at start, so a process given no key or another key refuses instead of
// sealing secrets nobody can open.
// The API and the worker read it (src/db/roles.ts); only the owner writes it.
//
// Recorded here from the secrets already stored: the key most of them are sealed with (all of them, unless a process
// once sealed some under a key of its own, the accident this record prevents from now on; ties go to the lower id,
// so the choice does not depend on the rows' order).
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE master_key_record (
      singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
      key_id text CHECK (key_id ~ '^mk_[0-9a-f]{16}$')
    )`);
  await knex.raw(`
    INSERT INTO master_key_record (key_id)
    SELECT (SELECT secret_key_id FROM webhook_endpoints GROUP BY secret_key_id ORDER BY count(*) DESC, secret_key_id LIMIT 1)`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE master_key_record');
}
