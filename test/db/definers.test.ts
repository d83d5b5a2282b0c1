import crypto from 'node:crypto';
import { expect } from 'chai';
import pg from 'pg';
import { testDatabase } from '../support/database.js';
import { serviceRoleName } from '../../src/db/roles.js';

// Functions that run as their owner (SECURITY DEFINER) on a PostgreSQL where the schema public is writable (14 grants
// CREATE on it to PUBLIC; a database an administrator loosened, on any version): a role that plants a function of the
// exact argument types in public must not get its code run by a definer, with the owner's rights
// (migrations/20261128000200_definers_catalog_search_path.ts). Run on the embedded PostgreSQL and on 14
// (test/postgres-14.test.ts).

/** Every SECURITY DEFINER function outside the system's schemas, with its settings (pg_proc.proconfig). */
async function definers(client: pg.Client): Promise<Array<{ name: string; config: string[] | null }>> {
  return (
    await client.query(`
    SELECT n.nspname || '.' || p.proname AS name, p.proconfig AS config
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE p.prosecdef AND n.nspname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1`)
  ).rows;
}

/** What the planted code does when it runs: fail the statement, naming who it ran as. */
const RAISE = `BEGIN RAISE EXCEPTION 'planted code ran as %', current_user; END`;

describe('definer functions on a database where public is writable', () => {
  let url: string;
  let client: pg.Client;

  beforeEach(async () => {
    ({ url } = await testDatabase());
    // a connection of its own: PL/pgSQL plans made before the planting must not hide it
    client = new pg.Client(url);
    await client.connect();
  });
  afterEach(async () => {
    await client.end();
  });

  it('every SECURITY DEFINER function searches pg_catalog and pg_temp only', async () => {
    const found = await definers(client);
    expect(found.length).to.be.greaterThan(0);
    for (const { name, config } of found) expect(config, name).to.deep.equal(['search_path=pg_catalog, pg_temp']);
  });

  it("functions and operators the API's role plants in public never run in a definer, though they win outside one", async () => {
    const {
      rows: [{ database }],
    } = await client.query('SELECT current_database() AS database');
    const api = `"${serviceRoleName(database, 'api')}"`;
    // the definers this test exercises below: one added later must be added here too
    expect((await definers(client)).map((d) => d.name.replace(/^.*\./, ''))).to.have.members([
      'rotate_endpoint_secret',
      'set_endpoint_signing_key',
      'workspace_data_version_bump',
      'workspace_data_versions_made',
      'workspaces_payment_months',
      'upkeep_queue_payments',
      'upkeep_queue_expenses',
      'upkeep_queue_invoices',
      'upkeep_queue_bookings',
      'upkeep_queue_vehicles',
      'upkeep_queue_customers',
      'upkeep_discard',
    ]);
    await client.query('BEGIN');
    try {
      // public writable by the API's role, as PostgreSQL 14 leaves it to every role (all of this is rolled back)
      await client.query(`GRANT CREATE ON SCHEMA public TO ${api}`);
      await client.query(`SET LOCAL ROLE ${api}`);
      await client.query(`
        CREATE FUNCTION public.frs_planted_step(uuid[], uuid) RETURNS uuid[] LANGUAGE plpgsql AS $$ ${RAISE} $$;
        CREATE AGGREGATE public.array_agg(uuid) (SFUNC = public.frs_planted_step, STYPE = uuid[]);
        CREATE FUNCTION public.generate_series(integer, integer) RETURNS SETOF integer LANGUAGE plpgsql AS $$ ${RAISE} $$;
        CREATE FUNCTION public.pg_trigger_depth() RETURNS integer LANGUAGE plpgsql AS $$ ${RAISE} $$;
        CREATE FUNCTION public.pg_backend_pid() RETURNS integer LANGUAGE plpgsql AS $$ ${RAISE} $$;
        CREATE FUNCTION public.date_trunc(text, timestamp) RETURNS timestamp LANGUAGE plpgsql AS $$ ${RAISE} $$;
        CREATE FUNCTION public.frs_planted_sum_step(bigint, bigint) RETURNS bigint LANGUAGE plpgsql AS $$ ${RAISE} $$;
        CREATE AGGREGATE public.sum(bigint) (SFUNC = public.frs_planted_sum_step, STYPE = bigint);
        CREATE FUNCTION public.frs_planted_eq(uuid, uuid) RETURNS boolean LANGUAGE plpgsql AS $$ ${RAISE} $$;
        CREATE OPERATOR public.= (LEFTARG = uuid, RIGHTARG = uuid, FUNCTION = public.frs_planted_eq);
        CREATE FUNCTION public.frs_planted_plus(bigint, integer) RETURNS bigint LANGUAGE plpgsql AS $$ ${RAISE} $$;
        CREATE OPERATOR public.+ (LEFTARG = bigint, RIGHTARG = integer, FUNCTION = public.frs_planted_plus);`);
      // the planted array_agg is live: a session that searches public (every role's default path) runs it
      await client.query('SAVEPOINT live');
      const live = await client.query(`SELECT array_agg(x) FROM (VALUES (gen_random_uuid())) v (x)`).then(
        () => undefined,
        (err: Error) => err.message,
      );
      expect(live).to.match(/^planted code ran as /);
      await client.query('ROLLBACK TO SAVEPOINT live');
      await client.query('RESET ROLE');

      // workspace_data_versions_made: a workspace's counters, from its start
      const slug = `definers-${crypto.randomBytes(6).toString('hex')}`;
      const {
        rows: [{ id }],
      } = await client.query(`INSERT INTO workspaces (slug, timezone) VALUES ($1, 'UTC') RETURNING id`, [slug]);
      const version = async (area: string) =>
        Number(
          (
            await client.query(
              `SELECT sum(changes)::int AS n, count(*)::int AS slots FROM workspace_data_versions WHERE workspace_id = $1 AND area = $2`,
              [id, area],
            )
          ).rows[0].n,
        );
      expect(
        (await client.query(`SELECT count(*)::int AS n FROM workspace_data_versions WHERE workspace_id = $1`, [id]))
          .rows[0].n,
      ).to.equal(16);
      // workspace_data_version_bump: insert, update, delete (a table's own workspace_id), a workspace's own row, truncate
      await client.query(
        `INSERT INTO events (workspace_id, event, data, source) VALUES ($1, 'webhook.test', '{}', 'test')`,
        [id],
      );
      await client.query(`UPDATE events SET created_at = created_at WHERE workspace_id = $1`, [id]);
      await client.query(`DELETE FROM events WHERE workspace_id = $1`, [id]);
      expect(await version('webhooks')).to.equal(3);
      // workspaces_payment_months (a time zone change regroups the collected payments; a slot to regroup)
      await client.query(
        `INSERT INTO payment_slots (workspace_id, slot, collected) VALUES ($1, '2026-11-30T22:00:00Z', 500)`,
        [id],
      );
      const recordsBefore = await version('records');
      await client.query(`UPDATE workspaces SET timezone = 'Asia/Dubai', reminders_ahead = 5 WHERE id = $1`, [id]);
      expect(await version('records')).to.equal(recordsBefore + 1);
      const months = (
        await client.query(
          `SELECT to_char(month, 'YYYY-MM') AS month, collected::int AS collected FROM payment_months WHERE workspace_id = $1`,
          [id],
        )
      ).rows;
      expect(months).to.deep.equal([{ month: '2026-12', collected: 500 }]);
      await client.query('TRUNCATE payment_days');
      expect(await version('records')).to.equal(recordsBefore + 2);
      // rotate_endpoint_secret: the current sealed secret becomes the previous one (the admin role's rotation)
      const {
        rows: [endpoint],
      } = await client.query(
        `INSERT INTO webhook_endpoints (workspace_id, name, url, events, secret_key_id, secret_sealed)
         VALUES ($1, 'definers', 'https://example.com/hook', '{}', 'k_old', '\\x01') RETURNING id`,
        [id],
      );
      const expires = '2026-11-29T00:00:00.000Z';
      const {
        rows: [rotated],
      } = await client.query(`SELECT rotate_endpoint_secret($1, $2, 'k_new', '\\x02', $3) AS workspace`, [
        endpoint.id,
        id,
        expires,
      ]);
      expect(rotated.workspace).to.equal(id);
      const {
        rows: [after],
      } = await client.query(
        `SELECT secret_key_id, encode(secret_sealed, 'hex') AS sealed, previous_secret_key_id, encode(previous_secret_sealed, 'hex') AS previous FROM webhook_endpoints WHERE id = $1`,
        [endpoint.id],
      );
      expect(after).to.deep.equal({
        secret_key_id: 'k_new',
        sealed: '02',
        previous_secret_key_id: 'k_old',
        previous: '01',
      });
      // set_endpoint_signing_key: the current key pair becomes the previous one (the admin role's key rotation)
      const publicKey = (byte: string) => `\\x${byte.repeat(32)}`;
      await client.query(`SELECT set_endpoint_signing_key($1, $2, $3, 'k_old', '\\x01', NULL)`, [
        endpoint.id,
        id,
        publicKey('aa'),
      ]);
      const {
        rows: [keyed],
      } = await client.query(`SELECT set_endpoint_signing_key($1, $2, $3, 'k_new', '\\x02', $4) AS workspace`, [
        endpoint.id,
        id,
        publicKey('bb'),
        expires,
      ]);
      expect(keyed.workspace).to.equal(id);
      const {
        rows: [rekeyed],
      } = await client.query(
        `SELECT encode(signing_public_key, 'hex') AS public, signing_private_key_key_id AS key_id,
                encode(previous_signing_public_key, 'hex') AS previous, previous_signing_private_key_key_id AS previous_key_id
         FROM webhook_endpoints WHERE id = $1`,
        [endpoint.id],
      );
      expect(rekeyed).to.deep.equal({
        public: 'bb'.repeat(32),
        key_id: 'k_new',
        previous: 'aa'.repeat(32),
        previous_key_id: 'k_old',
      });
      // upkeep_queue_<table>: a direct writer's changed rows queued for the worker's fold (an expense's, for real; the
      // other tables' statements change no row here, and run their queue functions all the same)
      await client.query(`SET LOCAL frs.upkeep = 'deferred'`);
      const {
        rows: [expense],
      } = await client.query(
        `INSERT INTO expenses (id, workspace_id, category, amount, date) VALUES (gen_random_uuid(), $1, 'fuel', 700, '2026-11-20') RETURNING id`,
        [id],
      );
      await client.query(`UPDATE expenses SET amount = 900 WHERE id = $1`, [expense.id]);
      await client.query(`DELETE FROM expenses WHERE id = $1`, [expense.id]);
      await client.query(`UPDATE customers SET name = name || '' WHERE workspace_id = $1`, [id]);
      for (const table of ['payments', 'invoices', 'bookings', 'vehicles']) {
        await client.query(`UPDATE ${table} SET workspace_id = workspace_id WHERE workspace_id = $1`, [id]);
        await client.query(`DELETE FROM ${table} WHERE workspace_id = $1`, [id]);
      }
      const { rows: queued } = await client.query(
        `SELECT amount::int, upkeep_sign::int AS sign FROM upkeep_expenses WHERE workspace_id = $1 ORDER BY upkeep_at, upkeep_sign, amount`,
        [id],
      );
      expect(queued.map((q) => q.sign * q.amount).sort((a, b) => a - b)).to.deep.equal([-900, -700, 700, 900]);
      // upkeep_discard: a first load's rebuild covers the queued changes of the emptied workspace
      await client.query(`SELECT upkeep_discard($1)`, [id]);
      expect(
        (await client.query(`SELECT count(*)::int AS n FROM upkeep_expenses WHERE workspace_id = $1`, [id])).rows[0].n,
      ).to.equal(0);
    } finally {
      await client.query('ROLLBACK');
    }
  });
});
