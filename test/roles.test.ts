import crypto from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { dropDatabase, testDatabase } from './support/database.js';
import { expectRejection } from './support/assertions.js';
import { API_STATEMENT_TIMEOUT_MS, connectionSetup, createKnex, INGEST_POOL_MAX } from '../src/db/database.js';
import { isStatementCanceled } from '../src/db/outage.js';
import { migrateLatest } from '../src/db/migrate.js';
import { fixture } from './support/fixtures.js';
import { currentDatabaseName, DatabaseRolesError, serviceRoleName } from '../src/db/roles.js';
import { apiStatementTimeoutMs, ConfigError, configFrom, dbRolesEnabled } from '../src/config.js';
import { createApiKey } from '../src/core/workspaces.js';
import { createEndpoint } from '../src/core/webhooks/endpoints.js';
import { queueTestDelivery } from '../src/core/webhooks/test-delivery.js';
import { idOf, operator, operatorWith, FIXTURE_ACTOR } from './support/actors.js';
import { processConfig } from '../src/config.js';

// Least privilege in the database (src/db/roles.ts): what the API's and the worker's connections may and may not
// do. Every statement that must fail is checked for PostgreSQL's permission error (42501), nothing else.

async function permissionDenied(statement: Promise<unknown>): Promise<string> {
  try {
    await statement;
  } catch (err) {
    expect((err as { code?: string }).code, (err as Error).message).to.equal('42501');
    return (err as Error).message;
  }
  throw new Error('the statement succeeded');
}

describe('database roles: least privilege for the API, the admin API, its ingest and the worker', () => {
  let db: Knex;
  let api: Knex;
  let worker: Knex;
  let admin: Knex;
  let ingest: Knex;
  let f: Awaited<ReturnType<typeof fixture>>;
  let bookingId: string;
  let endpointId: string;

  before(async () => {
    const database = await testDatabase();
    ({ db } = database);
    api = database.forRole('api');
    worker = database.forRole('worker');
    admin = database.forRole('admin');
    ingest = database.forRole('ingest');
    f = await fixture(db);
    bookingId = await f.booking({
      status: 'confirmed',
      pickupAt: '2026-12-01T06:00:00Z',
      dropoffAt: '2026-12-03T06:00:00Z',
    });
    endpointId = (
      await createEndpoint(db, operator, {
        workspaceId: await idOf(db, f.slug),
        url: 'https://receiver.example/hooks',
        policy: processConfig().destinationPolicy,
      })
    ).id;
  });

  it('FRS_DB_ROLES is on unless switched off, and nothing else is accepted', () => {
    expect(dbRolesEnabled({})).to.equal(true);
    expect(dbRolesEnabled({ FRS_DB_ROLES: 'on' })).to.equal(true);
    expect(dbRolesEnabled({ FRS_DB_ROLES: 'off' })).to.equal(false);
    expect(() => dbRolesEnabled({ FRS_DB_ROLES: 'no' })).to.throw(
      ConfigError,
      'FRS_DB_ROLES must be on or off, got "no"',
    );
  });

  it('each process runs as its own role of this database', async () => {
    const name = await currentDatabaseName(db);
    expect((await api.raw('SELECT current_user AS u')).rows[0].u).to.equal(serviceRoleName(name, 'api'));
    expect((await worker.raw('SELECT current_user AS u')).rows[0].u).to.equal(serviceRoleName(name, 'worker'));
    expect((await admin.raw('SELECT current_user AS u')).rows[0].u).to.equal(serviceRoleName(name, 'admin'));
    expect((await ingest.raw('SELECT current_user AS u')).rows[0].u).to.equal(serviceRoleName(name, 'ingest'));
  });

  it('the ingest pool is small: a sixth connection waits for one of its five', async () => {
    expect(INGEST_POOL_MAX).to.equal(5);
    const held = await Promise.all([1, 2, 3, 4, 5].map(() => ingest.client.acquireConnection()));
    try {
      const sixth = ingest.client.acquireConnection();
      const outcome = await Promise.race([
        sixth.then(() => 'acquired'),
        new Promise((resolve) => setTimeout(() => resolve('waiting'), 300)),
      ]);
      expect(outcome).to.equal('waiting');
      ingest.client.releaseConnection(held.pop());
      ingest.client.releaseConnection(await sixth);
    } finally {
      for (const connection of held) ingest.client.releaseConnection(connection);
    }
  });

  it("the API's statements have a time limit, set on its connections after SET ROLE; the worker's have none", async () => {
    const database = await testDatabase();
    const setting = async (run: Promise<{ rows: Array<{ statement_timeout: string }> }>) =>
      (await run).rows[0].statement_timeout;
    expect(await setting(api.raw('SHOW statement_timeout'))).to.equal('3s');
    expect(await setting(worker.raw('SHOW statement_timeout'))).to.equal('0');
    expect(await setting(admin.raw('SHOW statement_timeout'))).to.equal('3s');
    expect(await setting(ingest.raw('SHOW statement_timeout'))).to.equal('3s');
    const listening = await database.connectAs('api');
    try {
      expect(await setting(listening.query('SHOW statement_timeout'))).to.equal('3s');
    } finally {
      await listening.end();
    }
    // a statement that would take 10 s is cut short when the limit is reached, and the connection serves on (not under
    // a clock moved forward by faketime, where PostgreSQL's own timers never fire: see scripts/test-dates.ts)
    if (process.env.FAKETIME) return;
    const started = Date.now();
    const err = await api.raw('SELECT pg_sleep(10)').then(
      () => undefined,
      (caught: unknown) => caught,
    );
    const ms = Date.now() - started;
    expect((err as { code?: string } | undefined)?.code).to.equal('57014');
    expect(isStatementCanceled(err)).to.equal(true);
    expect(ms).to.be.within(API_STATEMENT_TIMEOUT_MS, API_STATEMENT_TIMEOUT_MS + 1000);
    expect((await api.raw('SELECT 1 AS one')).rows[0].one).to.equal(1);
  });

  it("the API's time limit holds with FRS_DB_ROLES=off too, and FRS_API_STATEMENT_TIMEOUT_MS sets it within bounds", () => {
    expect(connectionSetup('fleet', 'api', configFrom({}))).to.equal(
      `SET ROLE "fleet_api"; SET statement_timeout = '3000ms'`,
    );
    expect(connectionSetup('fleet', 'worker', configFrom({}))).to.equal('SET ROLE "fleet_worker"');
    expect(connectionSetup('fleet', 'api', configFrom({ FRS_DB_ROLES: 'off' }))).to.equal(
      `SET statement_timeout = '3000ms'`,
    );
    expect(connectionSetup('fleet', 'worker', configFrom({ FRS_DB_ROLES: 'off' }))).to.equal(undefined);
    expect(connectionSetup('fleet', 'api', configFrom({ FRS_API_STATEMENT_TIMEOUT_MS: '1500' }))).to.equal(
      `SET ROLE "fleet_api"; SET statement_timeout = '1500ms'`,
    );
    expect(apiStatementTimeoutMs({ FRS_API_STATEMENT_TIMEOUT_MS: '' })).to.equal(3000);
    for (const bad of ['0', '99', '60001', '3s', '-1', '1e3']) {
      expect(() => apiStatementTimeoutMs({ FRS_API_STATEMENT_TIMEOUT_MS: bad }), bad).to.throw(
        ConfigError,
        `FRS_API_STATEMENT_TIMEOUT_MS must be a whole number of milliseconds from 100 to 60000, got "${bad}"`,
      );
    }
  });

  it('the API cannot UPDATE bookings, SELECT a signing secret or CREATE TABLE', async () => {
    expect(
      await permissionDenied(api.raw(`UPDATE bookings SET status = 'canceled' WHERE id = ?`, [bookingId])),
    ).to.match(/permission denied for table bookings/);
    expect(
      await permissionDenied(api.raw('SELECT secret_sealed FROM webhook_endpoints WHERE id = ?', [endpointId])),
    ).to.match(/permission denied for table webhook_endpoints/);
    expect(
      await permissionDenied(api.raw('SELECT previous_secret_sealed, secret_key_id FROM webhook_endpoints')),
    ).to.match(/permission denied/);
    expect(await permissionDenied(api.raw(`CREATE TABLE api_was_here_${process.pid} (id int)`))).to.match(
      /permission denied for schema public/,
    );
    // ... nor change any other domain record, a key, or an endpoint
    await permissionDenied(
      api.raw(`INSERT INTO customers (id, workspace_id, name) VALUES (?, ?, 'x')`, [crypto.randomUUID(), f.ws.id]),
    );
    await permissionDenied(api.raw('DELETE FROM invoices WHERE workspace_id = ?', [f.ws.id]));
    await permissionDenied(api.raw('UPDATE workspaces SET status = status WHERE id = ?', [f.ws.id]));
    await permissionDenied(api.raw('UPDATE api_keys SET revoked_at = NULL WHERE workspace_id = ?', [f.ws.id]));
    await permissionDenied(api.raw('UPDATE webhook_endpoints SET url = url WHERE id = ?', [endpointId]));
    await permissionDenied(
      api.raw('SELECT phone, email, id_document FROM customers WHERE workspace_id = ?', [f.ws.id]),
    );
    await permissionDenied(api.raw('ALTER TABLE bookings ADD COLUMN api_was_here int'));
    expect((await db('bookings').where({ id: bookingId }).first('status')).status).to.equal('confirmed');
  });

  it('the API can do what it does: read, mark a key as used, queue a test delivery', async () => {
    const { id: keyId } = await createApiKey(db, operator, { workspaceId: await idOf(db, f.slug) });
    const usedAt = new Date('2026-11-20T10:00:00.000Z');
    expect(await api('api_keys').where({ id: keyId }).update({ last_used_at: usedAt })).to.equal(1);
    expect((await db('api_keys').where({ id: keyId }).first('last_used_at')).last_used_at).to.deep.equal(usedAt);
    expect((await api('bookings').where({ id: bookingId }).first('status')).status).to.equal('confirmed');
    const queued = await queueTestDelivery(api, {
      workspaceId: f.ws.id,
      endpointId,
      idempotencyKey: 'roles-test',
      now: new Date(),
    });
    expect(queued.replayed, 'queued a test delivery').to.equal(false);
    const replayed = await queueTestDelivery(api, {
      workspaceId: f.ws.id,
      endpointId,
      idempotencyKey: 'roles-test',
      now: new Date(),
    });
    expect(replayed).to.deep.equal({ deliveryId: queued.deliveryId, replayed: true });
  });

  it('the API can queue only webhook.test: not another event, nor a test delivery whose body says otherwise', async () => {
    const event = (name: string) => ({
      workspace_id: f.ws.id,
      event: name,
      data: {},
      source: 'publish',
      created_at: new Date(),
    });
    expect(await permissionDenied(api('events').insert(event('payment.captured')))).to.match(
      /may queue only webhook\.test events/,
    );
    // A test event is allowed (the test operation inserts one), and a delivery of it whose body is another event is not.
    const [{ id: eventId }] = await api('events').insert(event('webhook.test')).returning('id');
    const id = crypto.randomUUID();
    const forged = JSON.stringify({ id, event: 'payment.captured', createdAt: new Date().toISOString(), data: {} });
    const delivery = {
      id,
      workspace_id: f.ws.id,
      event_id: eventId,
      endpoint_id: endpointId,
      event: 'webhook.test',
      body: forged,
      status: 'queued',
      next_attempt_at: new Date(),
    };
    expect(await permissionDenied(api('deliveries').insert(delivery))).to.match(
      /may queue only webhook\.test deliveries/,
    );
    expect(await permissionDenied(api('deliveries').insert({ ...delivery, event: 'payment.captured' }))).to.match(
      /may queue only webhook\.test deliveries/,
    );
    // The worker (who may update deliveries) is not restricted.
    const [{ id: workerEvent }] = await worker('events').insert(event('payment.captured')).returning('id');
    expect(workerEvent).to.be.a('string');
  });

  it('the worker reads signing secrets and writes delivery state, but cannot change domain records or the schema', async () => {
    expect(await worker('webhook_endpoints').where({ id: endpointId }).first('secret_key_id')).to.have.property(
      'secret_key_id',
    );
    expect(await worker('webhook_endpoints').where({ id: endpointId }).update({ consecutive_failures: 0 })).to.equal(1);
    expect(
      await permissionDenied(worker.raw(`UPDATE bookings SET status = 'canceled' WHERE id = ?`, [bookingId])),
    ).to.match(/permission denied for table bookings/);
    expect(await permissionDenied(worker.raw(`CREATE TABLE worker_was_here_${process.pid} (id int)`))).to.match(
      /permission denied for schema public/,
    );
    await permissionDenied(worker.raw('UPDATE webhook_endpoints SET url = url WHERE id = ?', [endpointId]));
    await permissionDenied(
      worker.raw('UPDATE webhook_endpoints SET secret_sealed = secret_sealed WHERE id = ?', [endpointId]),
    );
    await permissionDenied(worker.raw('SELECT key_hash FROM api_keys'));
    await permissionDenied(worker.raw('DELETE FROM payments WHERE workspace_id = ?', [f.ws.id]));
    await permissionDenied(
      worker.raw('INSERT INTO outbox (workspace_id, event, data) VALUES (?, ?, ?)', [f.ws.id, 'lead.created', '{}']),
    );
  });

  it('the admin API changes workspace settings, keys and endpoints, adds to the audit trail, and no role changes the trail', async () => {
    const { createWorkspace, updateWorkspace, revokeApiKey } = await import('../src/core/workspaces.js');
    const { setEndpointActive } = await import('../src/core/webhooks/endpoints.js');
    const { createAdminToken } = await import('../src/core/admin-tokens.js');
    // (an admin token as the actor: the trail takes a `cli` actor from the owner's sessions only)
    const token = await createAdminToken(db, operatorWith({ actor: { type: 'cli', name: 'roles-test' } }), {
      name: `roles test ${process.pid}`,
      workspaceId: 'every',
    });
    const audit = { actor: { type: 'admin_token' as const, id: token.id, name: token.name } };
    const actor = operatorWith(audit);
    // what it does, as its own role
    const ws = await createWorkspace(admin, actor, { slug: `roles-admin-${process.pid}-${Date.now().toString(36)}` });
    expect(
      (
        await updateWorkspace(admin, actor, {
          workspaceId: ws.id,
          changes: { status: 'frozen', remindersAhead: 7 },
          now: new Date(),
        })
      ).remindersAhead,
    ).to.equal(7);
    const key = await createApiKey(admin, actor, { workspaceId: ws.id });
    expect((await revokeApiKey(admin, actor, { keyId: key.id, workspaceId: ws.id })).id).to.equal(key.id);
    expect(
      (await setEndpointActive(admin, actor, { endpointId, workspaceId: 'every', active: false, now: new Date() }))
        .isActive,
    ).to.equal(false);
    expect(
      await admin('audit_entries')
        .whereNot({ actor_name: FIXTURE_ACTOR })
        .where({ workspace_id: ws.id })
        .pluck('action'),
    ).to.have.members(['workspace.create', 'workspace.update', 'api_key.create', 'api_key.revoke']);
    // never the platform's records (the ingest role writes them), nor customers' contact details
    expect(
      await permissionDenied(
        admin.raw('SELECT phone, email, id_document FROM customers WHERE workspace_id = ?', [f.ws.id]),
      ),
    ).to.match(/permission denied for table customers/);
    expect(
      await permissionDenied(admin.raw(`UPDATE bookings SET status = 'canceled' WHERE id = ?`, [bookingId])),
    ).to.match(/permission denied for table bookings/);
    await permissionDenied(
      admin.raw(`INSERT INTO customers (id, workspace_id, name) VALUES (?, ?, 'x')`, [crypto.randomUUID(), f.ws.id]),
    );
    await permissionDenied(admin.raw('DELETE FROM payments WHERE workspace_id = ?', [f.ws.id]));
    await permissionDenied(admin.raw('SELECT * FROM record_versions'));
    await permissionDenied(admin.raw('SELECT * FROM import_jobs'));
    // never a key's hash or a signing secret
    await permissionDenied(admin.raw('SELECT key_hash FROM api_keys'));
    await permissionDenied(admin.raw('DELETE FROM api_keys WHERE id = ?', [key.id]));
    await permissionDenied(admin.raw('DELETE FROM workspaces WHERE id = ?', [ws.id]));
    await permissionDenied(admin.raw('UPDATE workspaces SET slug = slug WHERE id = ?', [ws.id]));
    await permissionDenied(admin.raw(`INSERT INTO admin_tokens (name, token_hash) VALUES ('x', sha256('x'))`));
    await permissionDenied(admin.raw(`CREATE TABLE admin_was_here_${process.pid} (id int)`));
    // the audit trail is only ever added to: by no service role changed or deleted
    for (const role of [api, worker, admin, ingest]) {
      await permissionDenied(
        role.raw(`UPDATE audit_entries SET actor_name = 'someone else' WHERE workspace_id = ?`, [ws.id]),
      );
      await permissionDenied(role.raw('DELETE FROM audit_entries WHERE workspace_id = ?', [ws.id]));
      await permissionDenied(role.raw('TRUNCATE audit_entries'));
    }
    await permissionDenied(
      api.raw(
        `INSERT INTO audit_entries (actor_type, actor_name, action, target_type, target_id) VALUES ('cli', 'x', 'x', 'x', 'x')`,
      ),
    );
    await permissionDenied(worker.raw('SELECT * FROM admin_tokens'));
    await permissionDenied(api.raw('SELECT * FROM admin_tokens'));
    expect(
      await db('audit_entries')
        .whereNot({ actor_name: FIXTURE_ACTOR })
        .where({ workspace_id: ws.id })
        .count<{ count: number }[]>('* as count'),
    ).to.deep.equal([{ count: 4 }]);
  });

  it("the ingest role writes the platform's records (writeRecords, import jobs) with their events, and nothing of settings, keys or secrets", async () => {
    const { writeRecords } = await import('../src/core/import/records.js');
    const { startImport } = await import('../src/core/import/jobs.js');
    const { createAdminToken } = await import('../src/core/admin-tokens.js');
    const { examplePayload } = await import('./webhooks/support.js');
    const token = await createAdminToken(db, operatorWith({ actor: { type: 'cli', name: 'roles-test' } }), {
      name: `roles ingest test ${process.pid}`,
      workspaceId: 'every',
    });
    const audit = {
      actor: { type: 'admin_token' as const, id: token.id, name: token.name },
      requestId: 'req_rolesIngestTest0',
    };
    const customer = crypto.randomUUID();
    // a batch: a customer with contact details, a change to a booking, an event fanned out to the endpoint
    const batch = {
      upsert: { customers: [{ id: customer, name: 'Layla', phone: '+971500000001', email: 'layla@example.ae' }] },
      events: [{ event: 'payment.captured', data: examplePayload('payment.captured').data }],
    };
    const result = await writeRecords(ingest, operatorWith(audit), { workspaceId: f.ws.id, body: batch });
    expect(result).to.deep.include({ upserted: { customers: 1 }, unchanged: {}, stale: {}, deleted: {} });
    expect(await db('customers').where({ id: customer }).first('name', 'phone', 'email')).to.deep.equal({
      name: 'Layla',
      phone: '+971500000001',
      email: 'layla@example.ae',
    });
    expect(
      await db('deliveries').where({ event_id: result.events[0], endpoint_id: endpointId }).pluck('event'),
    ).to.deep.equal(['payment.captured']);
    expect(
      await db('audit_entries')
        .whereNot({ actor_name: FIXTURE_ACTOR })
        .where({ workspace_id: f.ws.id, action: 'workspace.records_write' })
        .pluck('actor_name'),
    ).to.deep.equal([token.name]);
    expect((await ingest.raw(`UPDATE bookings SET status = status WHERE id = ?`, [bookingId])).rowCount).to.equal(1);
    // an import job, as the admin API runs it
    const other = crypto.randomUUID();
    const { done } = await startImport(ingest, operatorWith(audit), {
      workspaceId: f.ws.id,
      body: (async function* () {
        yield JSON.stringify({ customers: [{ id: other, name: 'Omar' }] });
      })(),
      format: 'json',
    });
    expect(await done).to.deep.include({ phase: 'succeeded', recordsApplied: 1, counts: { customers: 1 } });
    // never a workspace's settings, a key, a token's hash, an endpoint's secret or URL, the schema
    await permissionDenied(ingest.raw('UPDATE workspaces SET status = status WHERE id = ?', [f.ws.id]));
    await permissionDenied(ingest.raw('SELECT key_hash FROM api_keys'));
    await permissionDenied(ingest.raw('SELECT token_hash FROM admin_tokens'));
    await permissionDenied(ingest.raw('SELECT secret_sealed FROM webhook_endpoints WHERE id = ?', [endpointId]));
    await permissionDenied(ingest.raw('UPDATE webhook_endpoints SET url = url WHERE id = ?', [endpointId]));
    await permissionDenied(ingest.raw('UPDATE deliveries SET status = status WHERE workspace_id = ?', [f.ws.id]));
    await permissionDenied(ingest.raw('SELECT * FROM master_key_record'));
    await permissionDenied(ingest.raw('DELETE FROM import_jobs WHERE workspace_id = ?', [f.ws.id]));
    await permissionDenied(ingest.raw(`CREATE TABLE ingest_was_here_${process.pid} (id int)`));
  });
});

describe('database roles on a PostgreSQL where the owner is not a superuser (the README recipe)', () => {
  let adminUrl: string;
  const owners = { withCreateRole: `frs_owner_cr_${process.pid}`, without: `frs_owner_plain_${process.pid}` };
  const databases = { withCreateRole: `fleet_roles_cr_${process.pid}`, without: `fleet_roles_plain_${process.pid}` };
  const password = crypto.randomBytes(12).toString('hex');
  const opened: Knex[] = [];

  /** A connection to `database` as `user`, optionally as a service role (SET ROLE), closed after the tests. */
  const connect = (database: string, user: string, setRole?: string) => {
    const url = new URL(adminUrl);
    url.username = user;
    url.password = password;
    url.pathname = `/${database}`;
    const knex = createKnex(url.toString(), 2, setRole);
    opened.push(knex);
    return knex;
  };

  before(async () => {
    ({ url: adminUrl } = await testDatabase());
    const admin = createKnex(adminUrl, 1);
    try {
      await admin.raw(`CREATE ROLE ?? LOGIN CREATEROLE PASSWORD '${password}'`, [owners.withCreateRole]);
      await admin.raw(`CREATE ROLE ?? LOGIN PASSWORD '${password}'`, [owners.without]);
      await admin.raw('CREATE DATABASE ?? OWNER ??', [databases.withCreateRole, owners.withCreateRole]);
      await admin.raw('CREATE DATABASE ?? OWNER ??', [databases.without, owners.without]);
    } finally {
      await admin.destroy();
    }
  });
  after(async () => {
    await Promise.all(opened.map((knex) => knex.destroy()));
    for (const name of Object.values(databases)) await dropDatabase(adminUrl, name);
    const admin = createKnex(adminUrl, 1);
    try {
      for (const name of Object.values(owners)) await admin.raw('DROP ROLE IF EXISTS ??', [name]);
    } finally {
      await admin.destroy();
    }
  });

  /** Runs `sql` in `database` as the cluster's superuser (an administrator). */
  const asAdministrator = async (database: string, sql: string) => {
    const url = new URL(adminUrl);
    url.pathname = `/${database}`;
    const knex = createKnex(url.toString(), 1);
    try {
      return (await knex.raw(sql)).rows;
    } finally {
      await knex.destroy();
    }
  };
  /** migrate's refusal while others may create in public; `statement`: what the administrator runs. */
  const publicLocked = (who: string, statement: string) =>
    `the schema public is not the owner's alone (${who} may create objects in it): a function planted there could run with the rights of the code that finds it. ` +
    `Have an administrator (the schema's owner, "postgres", or a superuser) run: ${statement} then run "fleet-admin migrate" again`;

  /**
   * On PostgreSQL 14 the schema public is the bootstrap superuser's and every role may create in it: migrate refuses,
   * changing nothing, and names the statement an administrator runs (the schema given to the owner, as 15 and later
   * do); once run, migrate takes CREATE away from PUBLIC itself. (15 and later: nothing to do.)
   */
  async function publicLockedByAdministrator(database: string, ownerName: string, owner: Knex): Promise<void> {
    const [{ can }] = await asAdministrator(
      database,
      `SELECT has_schema_privilege('public', 'public', 'CREATE') AS can`,
    );
    if (!can) return;
    const refused = await expectRejection(migrateLatest(owner), DatabaseRolesError);
    expect(refused.message).to.equal(publicLocked('every role', `ALTER SCHEMA public OWNER TO "${ownerName}";`));
    expect((await owner.raw(`SELECT to_regclass('knex_migrations') AS t`)).rows[0].t).to.equal(null);
    await asAdministrator(database, `ALTER SCHEMA public OWNER TO "${ownerName}"`);
  }

  it('an owner with CREATEROLE migrates, creates both roles for itself, and the API role it set up is kept in bounds', async () => {
    const owner = connect(databases.withCreateRole, owners.withCreateRole);
    await publicLockedByAdministrator(databases.withCreateRole, owners.withCreateRole, owner);
    expect((await migrateLatest(owner)).length).to.be.greaterThan(0);
    const api = connect(
      databases.withCreateRole,
      owners.withCreateRole,
      `SET ROLE "${serviceRoleName(databases.withCreateRole, 'api')}"`,
    );
    expect((await api.raw('SELECT count(*)::int AS n FROM bookings')).rows[0].n).to.equal(0);
    await permissionDenied(api.raw(`UPDATE bookings SET status = 'canceled'`));
    await permissionDenied(api.raw('SELECT secret_sealed FROM webhook_endpoints'));
    await permissionDenied(api.raw('CREATE TABLE api_was_here (id int)'));
    // public opened again by an administrator, to every role and to the API's: migrate closes it (the owner owns public)
    const apiRole = `"${serviceRoleName(databases.withCreateRole, 'api')}"`;
    await asAdministrator(databases.withCreateRole, `GRANT CREATE ON SCHEMA public TO PUBLIC, ${apiRole}`);
    expect(await migrateLatest(owner)).to.deep.equal([]);
    const [{ anyone, apiCan }] = await asAdministrator(
      databases.withCreateRole,
      `SELECT has_schema_privilege('public', 'public', 'CREATE') AS anyone, has_schema_privilege('${serviceRoleName(databases.withCreateRole, 'api')}', 'public', 'CREATE') AS "apiCan"`,
    );
    expect({ anyone, apiCan }).to.deep.equal({ anyone: false, apiCan: false });
  });

  it('an owner that may not create roles is told the statements an administrator runs, and migrates once they ran', async () => {
    const owner = connect(databases.without, owners.without);
    const [apiRole, workerRole, adminRole, ingestRole] = (['api', 'worker', 'admin', 'ingest'] as const).map((role) =>
      serviceRoleName(databases.without, role),
    );
    await publicLockedByAdministrator(databases.without, owners.without, owner);
    const refused = await expectRejection(migrateLatest(owner), DatabaseRolesError);
    expect(refused.message).to.equal(
      `cannot set up the database roles "${apiRole}", "${workerRole}", "${adminRole}" and "${ingestRole}" (${owners.without} may not create roles). Have an administrator run: ` +
        `CREATE ROLE "${apiRole}" NOLOGIN; CREATE ROLE "${workerRole}" NOLOGIN; CREATE ROLE "${adminRole}" NOLOGIN; CREATE ROLE "${ingestRole}" NOLOGIN; ` +
        `GRANT "${apiRole}", "${workerRole}", "${adminRole}", "${ingestRole}" TO "${owners.without}"; ` +
        'then run "fleet-admin migrate" again. Or set FRS_DB_ROLES=off to run the API, the admin API and the worker with the owner\'s rights',
    );
    const admin = createKnex(adminUrl, 1);
    try {
      await admin.raw(
        `CREATE ROLE "${apiRole}" NOLOGIN; CREATE ROLE "${workerRole}" NOLOGIN; CREATE ROLE "${adminRole}" NOLOGIN; CREATE ROLE "${ingestRole}" NOLOGIN; GRANT "${apiRole}", "${workerRole}", "${adminRole}", "${ingestRole}" TO "${owners.without}"`,
      );
    } finally {
      await admin.destroy();
    }
    expect(await migrateLatest(owner)).to.deep.equal([]);
    const worker = connect(databases.without, owners.without, `SET ROLE "${workerRole}"`);
    expect((await worker.raw('SELECT count(*)::int AS n FROM webhook_endpoints')).rows[0].n).to.equal(0);
    await permissionDenied(worker.raw('DELETE FROM workspaces'));
  });
});
