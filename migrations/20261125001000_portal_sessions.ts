import type { Knex } from 'knex';

// The settings screen's sessions (src/portal/). Frozen SQL, imports nothing from src/.
// - portal_sessions: one per link the admin API's createPortalSession made. The link's one-time key and, once the link
//   is opened, the session's cookie token are stored as their SHA-256 hashes (never the key or the token); opening the
//   link clears link_hash, so the key cannot be used twice. `expires_at` is the absolute end of both the link and the
//   session; `last_seen_at` decides the idle end; `ended_at` is set when the admin API or the staff end it.
// - audit_entries: a change made in the screen names the session as its actor (`portal_session`, with its id).
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE portal_sessions (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      read_only boolean NOT NULL,
      link_hash bytea UNIQUE CHECK (length(link_hash) = 32),
      session_hash bytea UNIQUE CHECK (length(session_hash) = 32),
      created_by text NOT NULL CHECK (length(created_by) BETWEEN 1 AND 200),
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      started_at timestamptz,
      last_seen_at timestamptz,
      ended_at timestamptz,
      CHECK ((started_at IS NULL) = (session_hash IS NULL)),
      CHECK (link_hash IS NULL OR session_hash IS NULL)
    );
    CREATE INDEX portal_sessions_workspace ON portal_sessions (workspace_id, created_at DESC, id DESC);

    ALTER TABLE audit_entries DROP CONSTRAINT audit_entries_actor_type_check;
    ALTER TABLE audit_entries DROP CONSTRAINT audit_entries_check;
    ALTER TABLE audit_entries ADD CONSTRAINT audit_entries_actor_type_check CHECK (actor_type IN ('admin_token', 'cli', 'portal_session'));
    ALTER TABLE audit_entries ADD CONSTRAINT audit_entries_check CHECK ((actor_type IN ('admin_token', 'portal_session')) = (actor_id IS NOT NULL));
  `);
}

// Back: the screen's audit entries stay, recorded as the CLI's would be if the column allowed no other (their actor's
// name still says which session made them).
export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE audit_entries DROP CONSTRAINT audit_entries_actor_type_check;
    ALTER TABLE audit_entries DROP CONSTRAINT audit_entries_check;
    UPDATE audit_entries SET actor_type = 'cli', actor_id = NULL WHERE actor_type = 'portal_session';
    ALTER TABLE audit_entries ADD CONSTRAINT audit_entries_actor_type_check CHECK (actor_type IN ('admin_token', 'cli'));
    ALTER TABLE audit_entries ADD CONSTRAINT audit_entries_check CHECK ((actor_type = 'admin_token') = (actor_id IS NOT NULL));
    DROP TABLE portal_sessions;
  `);
}
