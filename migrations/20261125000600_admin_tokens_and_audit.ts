import type { Knex } from 'knex';

// The admin API's credential, its remembered Idempotency-Keys, and the audit trail of every change made through the
// admin API or the CLI. Frozen SQL, imports nothing from src/ (what a migration does must not change with the code).
// - admin_tokens: `fra_...` tokens, stored as the SHA-256 of the token (never the token); a token with a workspace
//   acts on that workspace only.
// - admin_idempotency_keys: the first answer to a POST that created something, per token and key, sealed under the
//   master key (it may hold a new API key), with the hash of the request it answered; kept 24 hours.
// - audit_entries: written in the same transaction as the change; no foreign keys, so an entry outlives what it
//   names; no service role may change or delete one (src/db/roles.ts grants INSERT and SELECT only).
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE admin_tokens (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      name text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
      workspace_id uuid REFERENCES workspaces(id) ON DELETE CASCADE,
      token_hash bytea NOT NULL UNIQUE CHECK (length(token_hash) = 32),
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz,
      revoked_at timestamptz,
      last_used_at timestamptz
    );
    CREATE INDEX admin_tokens_workspace ON admin_tokens (workspace_id) WHERE workspace_id IS NOT NULL;

    CREATE TABLE admin_idempotency_keys (
      token_id uuid NOT NULL REFERENCES admin_tokens(id) ON DELETE CASCADE,
      key text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
      request_hash bytea NOT NULL,
      status smallint,
      response_key_id text,
      response_sealed bytea,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (token_id, key)
    );

    CREATE TABLE audit_entries (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      at timestamptz NOT NULL DEFAULT clock_timestamp(),
      actor_type text NOT NULL CHECK (actor_type IN ('admin_token', 'cli')),
      actor_id uuid,
      actor_name text NOT NULL,
      action text NOT NULL,
      workspace_id uuid,
      target_type text NOT NULL,
      target_id text NOT NULL,
      changes jsonb NOT NULL DEFAULT '{}'::jsonb,
      request_id text,
      CHECK ((actor_type = 'admin_token') = (actor_id IS NOT NULL))
    );
    CREATE INDEX audit_entries_at ON audit_entries (at DESC, id DESC);
    CREATE INDEX audit_entries_workspace_at ON audit_entries (workspace_id, at DESC, id DESC) WHERE workspace_id IS NOT NULL;`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE audit_entries; DROP TABLE admin_idempotency_keys; DROP TABLE admin_tokens;');
}
