import type { Knex } from 'knex';

// Signing secrets sealed to a public key (issue 31): only the worker, which holds the master key, opens them.
//
// - master_key_record.public_key: the sealing public key of the recorded master key, which a process holding no
//   master key (the API process: admin API, settings screen) seals new secrets to. Recorded by the first process
//   holding the key that seals or starts a worker; NULL until then.
// - master_key_record.api_secret_id: the id of the API secret (cursors, CSRF tokens, stored answers) every API process
//   must hold, so that one given a stale secret refuses at start instead of answering other processes' cursors 400.
// - rotate_endpoint_secret(): an endpoint's secret rotation, the current sealed secret becoming the previous one (or
//   dropped) inside the database. The admin role may write sealed secrets but not read them, and `SET previous =
//   current` reads the column; this function, run as its owner, does that one move and nothing else. It is SECURITY
//   DEFINER, so its search_path is pg_catalog then pg_temp and every name is qualified: no object another role made
//   can stand in for one it uses.
// - admin_idempotency_keys: its stored answers were sealed under the master key, which the admin API no longer holds,
//   and its keys were kept as given; from now on the key is kept as its SHA-256 and the answer sealed under a key
//   derived from the Idempotency-Key and the API process's own secret (src/admin/idempotency.ts). The rows of before
//   (kept 24 hours at most) could not be opened: they are removed, and a request repeated with such a key is new.
export async function up(knex: Knex): Promise<void> {
  // the schema the service's tables are in, named in full inside the definer (it searches no schema of its own)
  const {
    rows: [{ schema }],
  } = await knex.raw('SELECT current_schema() AS schema');
  const S = `"${String(schema).replaceAll('"', '""')}"`;
  await knex.raw(`
    ALTER TABLE master_key_record
      ADD COLUMN public_key bytea CHECK (octet_length(public_key) = 32),
      ADD COLUMN api_secret_id text CHECK (api_secret_id ~ '^as_[0-9a-f]{16}$');

    CREATE FUNCTION rotate_endpoint_secret(endpoint uuid, workspace uuid, key_id text, sealed bytea, previous_expires_at timestamptz)
    RETURNS uuid LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
      UPDATE ${S}.webhook_endpoints AS e
      SET previous_secret_key_id = CASE WHEN previous_expires_at IS NULL THEN NULL ELSE e.secret_key_id END,
          previous_secret_sealed = CASE WHEN previous_expires_at IS NULL THEN NULL ELSE e.secret_sealed END,
          previous_secret_expires_at = previous_expires_at,
          secret_key_id = key_id,
          secret_sealed = sealed
      WHERE e.id = endpoint AND e.deleted_at IS NULL AND (workspace IS NULL OR e.workspace_id = workspace)
      RETURNING e.workspace_id
    $$;
    REVOKE ALL ON FUNCTION rotate_endpoint_secret(uuid, uuid, text, bytea, timestamptz) FROM PUBLIC;

    DELETE FROM admin_idempotency_keys;
    ALTER TABLE admin_idempotency_keys ADD CONSTRAINT admin_idempotency_keys_key_digest CHECK (key ~ '^[0-9a-f]{64}$');
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE admin_idempotency_keys DROP CONSTRAINT admin_idempotency_keys_key_digest;
    DROP FUNCTION rotate_endpoint_secret(uuid, uuid, text, bytea, timestamptz);
    ALTER TABLE master_key_record DROP COLUMN public_key, DROP COLUMN api_secret_id;
  `);
}
