import type { Knex } from 'knex';

// Every change that can make a key stop working (revoked, expiry moved, key deleted, workspace frozen, renamed or
// deleted) is announced on a NOTIFY channel when its transaction commits, so every running API drops its cache
// of key lookups at once (src/api/key-cache.ts). Marking a key as used (last_used_at) announces nothing. The channel's
// name is written here as it is, not imported: what this migration does must not change with the code.
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION notify_auth_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('frs_auth_changes', TG_TABLE_NAME);
      RETURN NULL;
    END $$;

    CREATE TRIGGER api_keys_auth_change
      AFTER UPDATE OF key_hash, workspace_id, role, expires_at, revoked_at OR DELETE OR TRUNCATE ON api_keys
      FOR EACH STATEMENT EXECUTE FUNCTION notify_auth_change();
    CREATE TRIGGER workspaces_auth_change
      AFTER UPDATE OF id, slug, status, timezone OR DELETE OR TRUNCATE ON workspaces
      FOR EACH STATEMENT EXECUTE FUNCTION notify_auth_change();`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER api_keys_auth_change ON api_keys;
    DROP TRIGGER workspaces_auth_change ON workspaces;
    DROP FUNCTION notify_auth_change();`);
}
