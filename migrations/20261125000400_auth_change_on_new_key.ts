import type { Knex } from 'knex';

// A new API key is announced on the auth-changes channel too (it was announced only when a key changed or went), so
// that every API process forgets the key hashes it remembers as unknown (src/api/key-cache.ts): a key made in any
// process works at once, even if its hash was tried before it existed. The channel's name is written here as it is,
// not imported: what this migration does must not change with the code.
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER api_keys_auth_change ON api_keys;
    CREATE TRIGGER api_keys_auth_change
      AFTER INSERT OR UPDATE OF key_hash, workspace_id, role, expires_at, revoked_at OR DELETE OR TRUNCATE ON api_keys
      FOR EACH STATEMENT EXECUTE FUNCTION notify_auth_change();`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER api_keys_auth_change ON api_keys;
    CREATE TRIGGER api_keys_auth_change
      AFTER UPDATE OF key_hash, workspace_id, role, expires_at, revoked_at OR DELETE OR TRUNCATE ON api_keys
      FOR EACH STATEMENT EXECUTE FUNCTION notify_auth_change();`);
}
