import type { Knex } from 'knex';

// Which admin token made a settings-screen link, so that revoking the token ends the links and sessions it made
// (src/core/admin-tokens.ts). Null for a link the CLI made, and for links made before this column (their `created_by`
// still names the token). The reference also orders a link's making against its token's revocation: the insert waits
// for a revocation that holds the token's row. Frozen SQL, imports nothing from src/.
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE portal_sessions ADD COLUMN admin_token_id uuid REFERENCES admin_tokens(id);
    CREATE INDEX portal_sessions_admin_token ON portal_sessions (admin_token_id) WHERE admin_token_id IS NOT NULL;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE portal_sessions DROP COLUMN admin_token_id');
}
