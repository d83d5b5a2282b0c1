import type { Knex } from 'knex';

// Asymmetric signatures (Standard Webhooks `v1a`, ed25519; issue 34 point 3).
//
// - signature_scheme: how the endpoint's deliveries are signed, `hmac-sha256` (the shared secret: `v1` and
//   service-signature) or `ed25519` (the key pair: `v1a`). previous_scheme_expires_at: after a switch, until when the
//   scheme switched away from keeps signing beside the new one, so that no receiver breaks.
// - signing_public_key: the raw 32-byte ed25519 public key (not secret: shown as `whpk_` + base64). The private key is
//   sealed like the signing secret (src/webhooks/sealing.ts): signing_private_key_sealed under the master key
//   signing_private_key_key_id, opened only by the worker. The previous_signing_* columns keep the key pair a rotation
//   replaced, with the time it stops signing.
// - set_endpoint_signing_key(): gives an endpoint a new key pair, the current one becoming the previous one (or being
//   dropped) inside the database. The admin role may write sealed columns but not read them, and moving the current
//   key to previous reads them; this definer, run as its owner, does that one move and nothing else (as
//   rotate_endpoint_secret() does for the secret, migration 20261128000100).
export async function up(knex: Knex): Promise<void> {
  // the schema the service's tables are in, named in full inside the definer (it searches no schema of its own)
  const {
    rows: [{ schema }],
  } = await knex.raw('SELECT current_schema() AS schema');
  const S = `"${String(schema).replaceAll('"', '""')}"`;
  await knex.raw(`
    ALTER TABLE webhook_endpoints
      ADD COLUMN signature_scheme text NOT NULL DEFAULT 'hmac-sha256'
        CONSTRAINT webhook_endpoints_signature_scheme_known CHECK (signature_scheme IN ('hmac-sha256', 'ed25519')),
      ADD COLUMN previous_scheme_expires_at timestamptz,
      ADD COLUMN signing_public_key bytea CHECK (octet_length(signing_public_key) = 32),
      ADD COLUMN signing_private_key_key_id text,
      ADD COLUMN signing_private_key_sealed bytea,
      ADD COLUMN previous_signing_public_key bytea CHECK (octet_length(previous_signing_public_key) = 32),
      ADD COLUMN previous_signing_private_key_key_id text,
      ADD COLUMN previous_signing_private_key_sealed bytea,
      ADD COLUMN previous_signing_key_expires_at timestamptz,
      ADD CONSTRAINT webhook_endpoints_signing_key_whole CHECK (
        (signing_public_key IS NULL) = (signing_private_key_sealed IS NULL)
        AND (signing_private_key_sealed IS NULL) = (signing_private_key_key_id IS NULL)),
      ADD CONSTRAINT webhook_endpoints_previous_signing_key_whole CHECK (
        (previous_signing_public_key IS NULL) = (previous_signing_private_key_sealed IS NULL)
        AND (previous_signing_private_key_sealed IS NULL) = (previous_signing_private_key_key_id IS NULL)
        AND (previous_signing_private_key_sealed IS NULL) = (previous_signing_key_expires_at IS NULL)),
      ADD CONSTRAINT webhook_endpoints_ed25519_has_key CHECK (signature_scheme <> 'ed25519' OR signing_public_key IS NOT NULL);

    CREATE FUNCTION set_endpoint_signing_key(endpoint uuid, workspace uuid, public_key bytea, key_id text, sealed bytea, previous_expires_at timestamptz)
    RETURNS uuid LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
      UPDATE ${S}.webhook_endpoints AS e
      SET previous_signing_public_key = CASE WHEN previous_expires_at IS NULL THEN NULL ELSE e.signing_public_key END,
          previous_signing_private_key_key_id = CASE WHEN previous_expires_at IS NULL THEN NULL ELSE e.signing_private_key_key_id END,
          previous_signing_private_key_sealed = CASE WHEN previous_expires_at IS NULL THEN NULL ELSE e.signing_private_key_sealed END,
          previous_signing_key_expires_at = CASE WHEN previous_expires_at IS NULL OR e.signing_public_key IS NULL THEN NULL ELSE previous_expires_at END,
          signing_public_key = public_key,
          signing_private_key_key_id = key_id,
          signing_private_key_sealed = sealed
      WHERE e.id = endpoint AND e.deleted_at IS NULL AND (workspace IS NULL OR e.workspace_id = workspace)
      RETURNING e.workspace_id
    $$;
    REVOKE ALL ON FUNCTION set_endpoint_signing_key(uuid, uuid, bytea, text, bytea, timestamptz) FROM PUBLIC;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP FUNCTION set_endpoint_signing_key(uuid, uuid, bytea, text, bytea, timestamptz);
    ALTER TABLE webhook_endpoints
      DROP COLUMN signature_scheme, DROP COLUMN previous_scheme_expires_at,
      DROP COLUMN signing_public_key, DROP COLUMN signing_private_key_key_id, DROP COLUMN signing_private_key_sealed,
      DROP COLUMN previous_signing_public_key, DROP COLUMN previous_signing_private_key_key_id,
      DROP COLUMN previous_signing_private_key_sealed, DROP COLUMN previous_signing_key_expires_at;
  `);
}
