import crypto from 'node:crypto';
import type { Knex } from 'knex';
import { processConfig } from '../config.js';
import { UPKEEP_QUEUES } from './upkeep.js';

// Least privilege in the database. The schema owner (the user that runs `fleet-admin migrate`) owns every table;
// the API, the admin API, the admin API's writes of the platform's records (batch writes and import jobs: `ingest`) and
// the webhook worker each run as a NOLOGIN role of their own, entered with SET ROLE on every new pooled connection,
// holding only the grants below. The roles are per database (`<database>_api`, `<database>_admin`,
// `<database>_ingest`, `<database>_worker`), so two services sharing a cluster never share a role. `fleet-admin migrate` creates them
// (when the owner may create roles) and re-applies the grants after every migration, so this list is the one
// place that says who may do what.

export type ServiceRole = 'api' | 'worker' | 'admin' | 'ingest';
export const SERVICE_ROLES: readonly ServiceRole[] = ['api', 'worker', 'admin', 'ingest'];

/** `FRS_DB_ROLES=off` runs every process as the connecting user (for a database where roles cannot be had). */
export const DB_ROLES_SWITCH = 'FRS_DB_ROLES';

/** The role of `role` in `database`; a long database name is shortened with a hash (identifiers stop at 63 bytes). */
export function serviceRoleName(database: string, role: ServiceRole): string {
  const base =
    Buffer.byteLength(database) <= 48
      ? database
      : `frs_${crypto.createHash('sha256').update(database).digest('hex').slice(0, 16)}`;
  return `${base}_${role}`;
}

// Every table the domain is made of: the API and the worker read them and write none. Customers' contact details and
// identity documents are readable by neither (no response or payload carries them), nor by the admin role. Only the
// ingest role writes the records the platform sends (batch writes, import jobs), contact details included.
const DOMAIN_TABLES = [
  'workspaces',
  'owners',
  'fleets',
  'vehicles',
  'maintenance',
  'vehicle_documents',
  'bookings',
  'extensions',
  'invoices',
  'payments',
  'installments',
  'expenses',
  'fines',
  'integrations',
  // running totals kept by triggers
  'payment_slots',
  'customer_ledger',
  'vehicle_revenue',
  'booking_status_counts',
  'workspace_totals',
  'open_balances',
  'payment_days',
  'expense_months',
  'vehicle_state_counts',
  'payment_months',
  'vehicle_models',
];
/** The records the platform sends (the import document's keys as tables; customers with their contact details). */
const RECORD_TABLES = [...DOMAIN_TABLES.slice(1, 14), 'customers'];
/** The running totals the triggers keep as records change (they run with the rights of the writer). */
const ROLLUP_TABLES = DOMAIN_TABLES.slice(14);
const CUSTOMER_COLUMNS = '(id, workspace_id, name)';
const ENDPOINT_COLUMNS_WITHOUT_SECRETS =
  '(id, workspace_id, name, url, events, is_active, disabled_at, disabled_reason, last_success_at, consecutive_failures, created_at, deleted_at, rate_limit)';
/** Which master key seals an endpoint's secrets, and until when the previous one signs: not secret. */
const ENDPOINT_SEALING_IDS = 'secret_key_id, previous_secret_key_id, previous_secret_expires_at';
/** How an endpoint signs (the scheme, its switch's overlap, the ed25519 public keys): not secret, shown to every client. */
const ENDPOINT_SIGNING_COLUMNS =
  'signature_scheme, previous_scheme_expires_at, signing_public_key, previous_signing_public_key, previous_signing_key_expires_at';
/** Which master key seals an endpoint's ed25519 private keys: not secret. */
const ENDPOINT_SIGNING_KEY_IDS = 'signing_private_key_key_id, previous_signing_private_key_key_id';

/** GRANT statements per role; `%s` is the role. */
const GRANTS: Record<ServiceRole, string[]> = {
  api: [
    // a process checks at start that the schema is up to date, and that its master key is the recorded one
    `GRANT SELECT ON knex_migrations, knex_migrations_lock, master_key_record TO %s`,
    // and records the API secret every API process holds (checkApiSecret in src/webhooks/sealing.ts)
    `GRANT INSERT (singleton, api_secret_id), UPDATE (api_secret_id) ON master_key_record TO %s`,
    `GRANT SELECT ON ${DOMAIN_TABLES.join(', ')} TO %s`,
    `GRANT SELECT ${CUSTOMER_COLUMNS} ON customers TO %s`,
    // the data versions an answer's ETag is decided by (src/api/revalidation.ts); the triggers keeping them need no grant
    `GRANT SELECT ON workspace_data_versions TO %s`,
    // authentication, and marking a key as used
    `GRANT SELECT (id, workspace_id, key_hash, role, expires_at, revoked_at, last_used_at) ON api_keys TO %s`,
    `GRANT UPDATE (last_used_at) ON api_keys TO %s`,
    // (the key cache's LISTEN and its heartbeat's NOTIFY, src/api/key-cache.ts, need no grant, even read-only)
    // the endpoint list: never the signing secrets
    `GRANT SELECT ${ENDPOINT_COLUMNS_WITHOUT_SECRETS} ON webhook_endpoints TO %s`,
    // (and how it signs, with its public key; never a private key)
    `GRANT SELECT (${ENDPOINT_SIGNING_COLUMNS}) ON webhook_endpoints TO %s`,
    // and the end of its throttle (written by the worker only: src/webhooks/etiquette.ts)
    `GRANT SELECT (throttled_until) ON webhook_endpoints TO %s`,
    // the delivery log (deliveries and their attempts) and the event feed (events, GET /v1/events: its long polls'
    // LISTEN needs no grant); the test operation queues a webhook.test event, its delivery, and remembers the
    // Idempotency-Key
    `GRANT SELECT, INSERT ON events, deliveries TO %s`,
    `GRANT SELECT ON delivery_attempts TO %s`,
    `GRANT SELECT, INSERT ON test_idempotency_keys TO %s`,
    `GRANT UPDATE (endpoint_id, delivery_id, created_at) ON test_idempotency_keys TO %s`,
  ],
  worker: [
    `GRANT SELECT ON knex_migrations, knex_migrations_lock, master_key_record TO %s`,
    `GRANT SELECT ON ${DOMAIN_TABLES.join(', ')} TO %s`,
    `GRANT SELECT ${CUSTOMER_COLUMNS} ON customers TO %s`,
    // signing (the sealed secrets) and the endpoints' delivery state
    `GRANT SELECT ON webhook_endpoints TO %s`,
    `GRANT UPDATE (consecutive_failures, last_success_at, is_active, disabled_at, disabled_reason, throttled_until, throttle_streak) ON webhook_endpoints TO %s`,
    // the throttled endpoints' token buckets, made and taken by the claim (src/webhooks/rate-limits.ts)
    `GRANT SELECT, INSERT, UPDATE ON webhook_rate_buckets TO %s`,
    // the calendar sweep and the outbox record events and fan them out; the dispatcher records attempts
    `GRANT SELECT, INSERT ON events, delivery_attempts TO %s`,
    `GRANT SELECT, INSERT, UPDATE ON deliveries TO %s`,
    `GRANT SELECT, UPDATE (processed_at, event_id, error) ON outbox TO %s`,
    `GRANT SELECT, INSERT, UPDATE (last_swept_at) ON calendar_state TO %s`,
    // consumed changes are deleted; FOR UPDATE SKIP LOCKED needs UPDATE on some column
    `GRANT SELECT, DELETE, UPDATE (recorded_at) ON entity_changes TO %s`,
    // the fold of the append-only running totals, and the rows awaiting it: run with the worker's own rights (a fold
    // fires the rollup triggers, which name tables unqualified: as the owner, an object planted in public could run)
    `GRANT EXECUTE ON FUNCTION rollups_compact(), rollups_pending() TO %s`,
    // the queued changes of direct writers, applied with the worker's own rights (migration 20261128000800): the queue
    // taken, and what the rollup triggers write for it (the derived columns of invoices, bookings and cars; a
    // status-change trigger on those tables inserts its event changes, none for these columns)
    `GRANT EXECUTE ON FUNCTION upkeep_fold(uuid[], text), upkeep_delay(), upkeep_oldest(uuid) TO %s`,
    // (a fold's per-session tables carry the data version trigger: making a trigger needs EXECUTE on its function)
    `GRANT EXECUTE ON FUNCTION workspace_data_version_bump() TO %s`,
    `GRANT SELECT, DELETE ON ${UPKEEP_QUEUES.map((queue) => `upkeep_${queue}`).join(', ')} TO %s`,
    `GRANT UPDATE (paid) ON invoices TO %s`,
    `GRANT UPDATE (collected, balance_due, customer_json, vehicle_json) ON bookings TO %s`,
    `GRANT UPDATE (active_bookings) ON vehicles TO %s`,
    `GRANT INSERT ON entity_changes TO %s`,
    `GRANT INSERT, UPDATE, DELETE ON ${ROLLUP_TABLES.join(', ')} TO %s`,
    // the payment-months trigger a fold fires locks the workspace's row FOR SHARE, which needs UPDATE on some column:
    // created_at, which nothing reads for a decision
    `GRANT UPDATE (created_at) ON workspaces TO %s`,
    // retention prunes finished import jobs (FOR UPDATE SKIP LOCKED, hence an UPDATE on one column); never a running one,
    // but records as failed a running one whose process is gone (failLostImports in src/webhooks/lost-imports.ts)
    `GRANT SELECT (id, workspace_id, phase, finished_at), UPDATE (phase, error, records_applied, finished_at, updated_at), DELETE ON import_jobs TO %s`,
    // retention deletes old delivery records in batches (FOR UPDATE SKIP LOCKED, hence an UPDATE on one column)
    `GRANT DELETE ON deliveries, delivery_attempts, events, test_idempotency_keys, outbox TO %s`,
    `GRANT SELECT, UPDATE (started_at) ON delivery_attempts TO %s`,
    // at its start the worker records its master key's sealing public key, which the API process seals to
    // (recordPublicKey in src/webhooks/sealing.ts)
    `GRANT INSERT (singleton, key_id, public_key), UPDATE (key_id, public_key) ON master_key_record TO %s`,
    `GRANT UPDATE (created_at) ON events TO %s`,
    `GRANT SELECT, UPDATE (created_at) ON test_idempotency_keys TO %s`,
    // retention forgets the admin API's idempotency keys after 24 hours too (a token's workspace scopes a sweep)
    `GRANT SELECT, DELETE, UPDATE (created_at) ON admin_idempotency_keys TO %s`,
    // tombstones older than the retention (src/core/import/versions.ts)
    `GRANT SELECT, DELETE, UPDATE (deleted_at) ON record_versions TO %s`,
    `GRANT SELECT (id, workspace_id) ON admin_tokens TO %s`,
    `GRANT SELECT (id, workspace_id, created_at, expires_at), UPDATE (created_at), DELETE ON portal_sessions TO %s`,
    `GRANT USAGE ON SEQUENCE delivery_attempts_id_seq TO %s`,
  ],
  // The admin API (src/admin/): the workspaces' settings, their keys and endpoints, the delivery records, its own
  // tokens and the audit trail; never a domain record (bookings, customers, money...), never a key's hash or a token's
  // to read back beyond authentication, and the audit trail only added to (no UPDATE or DELETE: no role may).
  admin: [
    `GRANT SELECT ON knex_migrations, knex_migrations_lock TO %s`,
    // sealing an endpoint's new signing secret reads the recorded public key it seals to (withSealingLock in
    // src/webhooks/sealing.ts); the admin API holds no master key and records none
    `GRANT SELECT ON master_key_record TO %s`,
    `GRANT SELECT (id, slug, status, timezone, reminders_ahead, webhook_allowed_cidrs) ON workspaces TO %s`,
    `GRANT INSERT (slug, status, timezone, reminders_ahead), UPDATE (status, timezone, reminders_ahead, webhook_allowed_cidrs) ON workspaces TO %s`,
    `GRANT SELECT (id, workspace_id, role, created_at, expires_at, revoked_at, last_used_at) ON api_keys TO %s`,
    `GRANT INSERT (workspace_id, key_hash, role, expires_at), UPDATE (revoked_at) ON api_keys TO %s`,
    // registration, switching and secret rotation: sealed secrets are written (sealed to the recorded public key on
    // the way in), never read; a rotation moves the current one to previous through rotate_endpoint_secret()
    `GRANT SELECT ${ENDPOINT_COLUMNS_WITHOUT_SECRETS.slice(0, -1)}, ${ENDPOINT_SEALING_IDS}) ON webhook_endpoints TO %s`,
    `GRANT INSERT ON webhook_endpoints TO %s`,
    `GRANT UPDATE ${ENDPOINT_COLUMNS_WITHOUT_SECRETS} ON webhook_endpoints TO %s`,
    // the end of an endpoint's throttle is shown, and written by the worker only (src/webhooks/etiquette.ts)
    `GRANT SELECT (throttled_until) ON webhook_endpoints TO %s`,
    `GRANT EXECUTE ON FUNCTION rotate_endpoint_secret(uuid, uuid, text, bytea, timestamptz) TO %s`,
    // the signature scheme and its switch; the ed25519 private keys are sealed like the secrets: written (a new key pair
    // through set_endpoint_signing_key(), which moves the current one to previous), never read
    `GRANT SELECT (${ENDPOINT_SIGNING_COLUMNS}, ${ENDPOINT_SIGNING_KEY_IDS}) ON webhook_endpoints TO %s`,
    `GRANT UPDATE (signature_scheme, previous_scheme_expires_at) ON webhook_endpoints TO %s`,
    `GRANT EXECUTE ON FUNCTION set_endpoint_signing_key(uuid, uuid, bytea, text, bytea, timestamptz) TO %s`,
    // publishing and example events; held deliveries released or failed when a workspace is set active again, retries
    `GRANT SELECT, INSERT ON events TO %s`,
    `GRANT SELECT, INSERT, UPDATE ON deliveries TO %s`,
    `GRANT SELECT ON delivery_attempts TO %s`,
    // example events count under the test-delivery limits, as the public test operation's do
    `GRANT SELECT, INSERT ON test_idempotency_keys TO %s`,
    `GRANT UPDATE (endpoint_id, delivery_id, created_at) ON test_idempotency_keys TO %s`,
    // authentication by admin token, and marking one as used (tokens are made and revoked by the CLI only)
    `GRANT SELECT (id, name, workspace_id, token_hash, created_at, expires_at, revoked_at, last_used_at), UPDATE (last_used_at) ON admin_tokens TO %s`,
    `GRANT SELECT, INSERT, UPDATE, DELETE ON admin_idempotency_keys TO %s`,
    // an entry's id, time and request id are the database's (migrations/20261128000210_audit_trail_server_set.ts)
    `GRANT SELECT, INSERT (actor_type, actor_id, actor_name, action, workspace_id, target_type, target_id, changes, client_request_id) ON audit_entries TO %s`,
    // the settings screen's links and sessions (src/core/portal-sessions.ts): made, opened, seen, ended; never deleted here
    `GRANT SELECT, INSERT (workspace_id, read_only, link_hash, created_by, admin_token_id, created_at, expires_at) ON portal_sessions TO %s`,
    `GRANT UPDATE (link_hash, session_hash, started_at, last_seen_at, ended_at) ON portal_sessions TO %s`,
  ],
  // The admin API's batch writes and import jobs (src/core/import/: writeRecords, createImport, getImport, cancelImport), on
  // a small pool of their own in the admin API's process: the platform's records, customers' contact details included,
  // with what writing them touches; nothing of the workspaces' settings, keys, endpoints' secrets or tokens.
  ingest: [
    // the workspace written into (findWorkspace); the triggers over the records, and a first load (src/db/bulk-load.ts),
    // lock its row, which needs UPDATE on some column: created_at, which nothing reads for a decision
    `GRANT SELECT (id, slug, status, timezone, reminders_ahead, webhook_allowed_cidrs), UPDATE (created_at) ON workspaces TO %s`,
    // the platform's records, their versions and tombstones, the jobs; the triggers over the records keep the running
    // totals, the entity changes and the data versions with these rights
    `GRANT SELECT, INSERT, UPDATE, DELETE ON ${RECORD_TABLES.join(', ')}, ${ROLLUP_TABLES.join(', ')} TO %s`,
    // a first load forgets the direct writers' queued changes its rebuild covers (src/db/bulk-load.ts)
    `GRANT EXECUTE ON FUNCTION upkeep_discard(uuid) TO %s`,
    `GRANT SELECT, INSERT, UPDATE, DELETE ON record_versions TO %s`,
    `GRANT SELECT, INSERT, UPDATE ON import_jobs TO %s`,
    `GRANT INSERT ON entity_changes TO %s`,
    `GRANT SELECT ON calendar_state TO %s`,
    // a batch's events and their deliveries: fan-out locks the subscribed endpoints FOR SHARE (an UPDATE on one column,
    // created_at) and reads them without their secrets
    `GRANT SELECT, INSERT ON events, deliveries TO %s`,
    `GRANT SELECT ${ENDPOINT_COLUMNS_WITHOUT_SECRETS}, UPDATE (created_at) ON webhook_endpoints TO %s`,
    // (may queue any event, as a writer of record versions: migrations/20261128001000_ingest_publishes_events.ts)
    // a batch's Idempotency-Key (src/admin/idempotency.ts) and the audit entry of each batch and job, whose trigger
    // reads the acting token's name
    `GRANT SELECT, INSERT, UPDATE, DELETE ON admin_idempotency_keys TO %s`,
    `GRANT SELECT (id, name) ON admin_tokens TO %s`,
    `GRANT SELECT, INSERT (actor_type, actor_id, actor_name, action, workspace_id, target_type, target_id, changes, client_request_id) ON audit_entries TO %s`,
  ],
};

function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

export async function currentDatabaseName(db: Knex): Promise<string> {
  return (await db.raw('SELECT current_database() AS name')).rows[0].name;
}

/** The service roles cannot be set up by this user; the message says what to do instead. */
export class DatabaseRolesError extends Error {}

/** Why roles could not be set up, with what an administrator runs instead and the switch that does without. */
function rolesRefused(database: string, user: string, detail: string): Error {
  const roles = SERVICE_ROLES.map((role) => quoteIdent(serviceRoleName(database, role)));
  return new DatabaseRolesError(
    `cannot set up the database roles ${roles.slice(0, -1).join(', ')} and ${roles.at(-1)} (${detail}). Have an administrator run: ` +
      `${roles.map((role) => `CREATE ROLE ${role} NOLOGIN; `).join('')}GRANT ${roles.join(', ')} TO ${quoteIdent(user)}; ` +
      `then run "fleet-admin migrate" again. Or set ${DB_ROLES_SWITCH}=off to run the API, the admin API and the worker with the owner's rights`,
  );
}

/**
 * Creates the service roles if missing, makes the connecting user a member (so it can SET ROLE), and sets their
 * grants to exactly the list above. Run by the migrator after the migrations, in one transaction.
 */
export async function applyRolePrivileges(db: Knex): Promise<void> {
  if (!processConfig().dbRoles) return;
  await db.transaction(async (trx) => {
    const database = await currentDatabaseName(trx);
    const {
      rows: [me],
    } = await trx.raw(`SELECT current_user AS user, rolsuper AS superuser, rolcreaterole AS createrole,
              current_setting('server_version_num')::int AS version
       FROM pg_roles WHERE rolname = current_user`);
    for (const role of SERVICE_ROLES) {
      const name = serviceRoleName(database, role);
      const ident = quoteIdent(name);
      const exists = (await trx.raw('SELECT 1 FROM pg_roles WHERE rolname = ?', [name])).rows.length > 0;
      if (!exists) {
        if (!me.superuser && !me.createrole) throw rolesRefused(database, me.user, `${me.user} may not create roles`);
        // Roles are cluster-wide: another migrator may create it at the same moment.
        await trx.raw(`SAVEPOINT create_role`);
        try {
          await trx.raw(`CREATE ROLE ${ident} NOLOGIN`);
          await trx.raw(`RELEASE SAVEPOINT create_role`);
        } catch (err) {
          if ((err as { code?: string }).code !== '42710') throw err;
          await trx.raw(`ROLLBACK TO SAVEPOINT create_role`);
        }
      }
      // SET ROLE needs membership (and, from PostgreSQL 16 on, the SET option of it).
      const member = (
        await trx.raw(`SELECT pg_has_role(current_user, ?, ?) AS ok`, [name, me.version >= 160000 ? 'SET' : 'MEMBER'])
      ).rows[0].ok;
      if (!member && !me.superuser) {
        try {
          await trx.raw(`GRANT ${ident} TO ${quoteIdent(me.user)}`);
        } catch (err) {
          throw rolesRefused(database, me.user, (err as Error).message);
        }
      }
      await trx.raw(`REVOKE ALL ON ALL TABLES IN SCHEMA public FROM ${ident}`);
      await trx.raw(`REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM ${ident}`);
      await trx.raw(`GRANT USAGE ON SCHEMA public TO ${ident}`);
      // (a no-op unless this user granted it; checked below)
      await trx.raw(`REVOKE CREATE ON SCHEMA public FROM ${ident}`);
      for (const grant of GRANTS[role]) await trx.raw(grant.replaceAll('%s', ident));
    }
    // Only the owner changes the schema: no service role may create in public (securePublicSchema below for PUBLIC).
    const writers: string[] = [];
    for (const role of SERVICE_ROLES) {
      const name = serviceRoleName(database, role);
      if ((await trx.raw(`SELECT has_schema_privilege(?, 'public', 'CREATE') AS can`, [name])).rows[0].can)
        writers.push(quoteIdent(name));
    }
    if (writers.length > 0)
      throw await publicSchemaWritable(
        trx,
        `the roles ${writers.join(', ')} may create objects in it`,
        `REVOKE CREATE ON SCHEMA public FROM ${writers.join(', ')};`,
      );
  });
}

/**
 * The schema public lets others create in it; the message names the statement an administrator runs: giving the schema
 * to the migrating user when another owns it (as PostgreSQL 15 and later give it to the database's owner; migrate then
 * takes the rights away itself), else the REVOKE.
 */
async function publicSchemaWritable(db: Knex, detail: string, revoke: string): Promise<DatabaseRolesError> {
  const {
    rows: [schema],
  } = await db.raw(
    `SELECT current_user AS me, pg_get_userbyid(nspowner) AS owner, pg_has_role(current_user, nspowner, 'USAGE') AS owns FROM pg_namespace WHERE nspname = 'public'`,
  );
  const statement = schema.owns ? revoke : `ALTER SCHEMA public OWNER TO ${quoteIdent(schema.me)};`;
  return new DatabaseRolesError(
    `the schema public is not the owner's alone (${detail}): a function planted there could run with the rights of the code ` +
      `that finds it. Have an administrator (the schema's owner, ${quoteIdent(schema.owner)}, or a superuser) run: ${statement} then run "fleet-admin migrate" again`,
  );
}

/**
 * Takes CREATE on the schema public away from PUBLIC, or refuses naming the statement an administrator runs. Run by the
 * migrator before the migrations, whatever FRS_DB_ROLES says. PostgreSQL 15 and later grant PUBLIC no CREATE there; 14
 * does, to every role of the cluster (the service roles and whoever else logs in): any of them could then plant, say,
 * public.array_agg(uuid), which an exact type match makes the function that an unqualified array_agg of a uuid calls
 * (whatever the search_path order) in any session that searches public, the owner's (migrations, the CLI) included.
 * Only the schema's owner (or a superuser) may revoke it; on 14 that is the cluster's bootstrap superuser unless an
 * administrator gave the schema to the database's owner.
 */
export async function securePublicSchema(db: Knex): Promise<void> {
  const publicMayCreate = async () =>
    (
      await db.raw(
        `SELECT EXISTS (SELECT 1 FROM pg_namespace n, aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) a
     WHERE n.nspname = 'public' AND a.grantee = 0 AND a.privilege_type = 'CREATE') AS can`,
      )
    ).rows[0].can as boolean;
  if (!(await publicMayCreate())) return;
  const {
    rows: [schema],
  } = await db.raw(
    `SELECT pg_has_role(current_user, nspowner, 'USAGE') AS owns FROM pg_namespace WHERE nspname = 'public'`,
  );
  if (schema.owns) await db.raw('REVOKE CREATE ON SCHEMA public FROM PUBLIC');
  if (await publicMayCreate())
    throw await publicSchemaWritable(
      db,
      'every role may create objects in it',
      'REVOKE CREATE ON SCHEMA public FROM PUBLIC;',
    );
}

/** `SET ROLE` for a new pooled connection of `role`'s processes, or undefined with FRS_DB_ROLES=off. */
export function setRoleStatement(
  database: string,
  role: ServiceRole,
  enabled = processConfig().dbRoles,
): string | undefined {
  return enabled ? `SET ROLE ${quoteIdent(serviceRoleName(database, role))}` : undefined;
}
