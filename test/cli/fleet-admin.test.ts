import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { dropDatabase, testDatabase } from '../support/database.js';
import { freePort } from '../support/ports.js';
import { fleetAdminOn, LAUNCHER, type CliRun } from '../support/cli.js';
import { createKnex } from '../../src/db/database.js';
import { hashApiKey } from '../../src/secrets.js';
import { createApiKey } from '../../src/core/workspaces.js';
import { buildAttempt, buildDelivery, dropTestWorkspaces, webhookWorkspace } from '../webhooks/support.js';
import { openSigningSecret } from '../../src/webhooks/sealing.js';
import { idOf, operator } from '../support/actors.js';

/** Runs the real CLI (bin/fleet-admin.js) as a child process against the test database. */
async function fleetAdmin(...args: string[]): Promise<CliRun> {
  return fleetAdminOn((await testDatabase()).url, args);
}

/** Runs a command with --json, expects success, exactly one JSON object on stdout and nothing on stderr. */
async function json(...args: string[]): Promise<any> {
  const run = await fleetAdmin(...args, '--json');
  expect(run.stderr, 'stderr').to.equal('');
  expect(run.code, 'exit code').to.equal(0);
  expect(
    run.stdout.endsWith('\n') && run.stdout.indexOf('\n') === run.stdout.length - 1,
    'one line on stdout',
  ).to.equal(true);
  return JSON.parse(run.stdout);
}

/** Expects a non-zero exit, nothing on stdout and exactly one line on stderr: `fleet-admin: <message>`. */
async function fails(args: string[], message: string | RegExp): Promise<void> {
  const run = await fleetAdmin(...args);
  expect(run.code, 'exit code').to.be.a('number').and.not.equal(0);
  expect(run.stdout, 'stdout').to.equal('');
  expect(run.stderr.split('\n'), 'one line on stderr').to.have.length(2);
  const line = run.stderr.trimEnd();
  if (typeof message === 'string') expect(line).to.equal(`fleet-admin: ${message}`);
  else expect(line).to.match(message);
}

const slug = (name: string) => `cli-${name}-${process.pid}-${Date.now().toString(36)}`;

describe('fleet-admin CLI', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fleet-cli-'));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('migrate reports the migrations it applied (none on a migrated database)', async () => {
    expect(await json('migrate')).to.deep.equal({ applied: [] });
  });

  it('migrate applies every migration to an empty database', async () => {
    const { db, url } = await testDatabase();
    const name = `fleet_cli_migrate_${process.pid}`;
    await db.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [name]);
    await db.raw('CREATE DATABASE ??', [name]);
    try {
      const emptyUrl = url.replace(/\/[^/?]+(\?|$)/, `/${name}$1`);
      const run = await fleetAdminOn(emptyUrl, ['migrate', '--json']);
      expect(run.stderr).to.equal('');
      const expected = fs
        .readdirSync(path.join(path.dirname(LAUNCHER), '..', 'migrations'))
        .filter((file) => /^\d{14}_.+\.ts$/.test(file))
        .map((file) => file.replace(/\.ts$/, ''))
        .sort();
      expect(JSON.parse(run.stdout)).to.deep.equal({ applied: expected });
    } finally {
      await dropDatabase(url, name);
    }
  });

  it('with DATABASE_URL makes no master key unless told to: endpoint create without one refuses; secrets create-master-key makes the key file', async () => {
    const { db, url } = await testDatabase();
    const name = `fleet_cli_master_key_${process.pid}`;
    await db.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [name]);
    await db.raw('CREATE DATABASE ??', [name]);
    const ownUrl = url.replace(/\/[^/?]+(\?|$)/, `/${name}$1`);
    const own = createKnex(ownUrl, 1);
    const dataDir = fs.mkdtempSync(path.join(dir, 'data-'));
    const noKey = { FRS_SECRET_KEY: '', FRS_SECRET_KEY_PREVIOUS: '', FRS_DATA_DIR: dataDir };
    const run = (env: NodeJS.ProcessEnv, ...args: string[]) => fleetAdminOn(ownUrl, [...args, '--json'], env);
    const ok = async (env: NodeJS.ProcessEnv, ...args: string[]) => {
      const result = await run(env, ...args);
      expect(result.stderr, args.join(' ')).to.equal('');
      return JSON.parse(result.stdout);
    };
    const refusal = async (env: NodeJS.ProcessEnv, ...args: string[]) => {
      const result = await run(env, ...args);
      expect(result.code, args.join(' ')).to.equal(1);
      expect(result.stdout).to.equal('');
      return result.stderr;
    };
    const KEY_SETTINGS =
      'FRS_SECRET_KEY, or FRS_SECRET_KEY_FILE for a key file; during a master-key rotation the old key goes in FRS_SECRET_KEY_PREVIOUS';
    try {
      // Nothing sealed yet: migrate and a workspace need no key.
      await ok(noKey, 'migrate');
      await ok(noKey, 'workspace', 'create', '--slug', 'keys');
      const create = ['endpoint', 'create', '--workspace', 'keys', '--url', 'https://example.com/hook'];
      expect(await refusal(noKey, ...create)).to.equal(
        `fleet-admin: there is no master key: no FRS_SECRET_KEY and no key file ${path.join(dataDir, 'secret.key')}; set FRS_SECRET_KEY, or FRS_SECRET_KEY_FILE to the key file ` +
          `(for a database that holds no signing secret yet, "fleet-admin secrets create-master-key" makes one)\n`,
      );
      expect(fs.readdirSync(dataDir), 'no key file').to.deep.equal([]);
      expect(
        (
          await own.raw(
            'SELECT (SELECT count(*)::int FROM webhook_endpoints) AS endpoints, (SELECT key_id FROM master_key_record) AS recorded',
          )
        ).rows[0],
      ).to.deep.equal({ endpoints: 0, recorded: null });

      // Told to: the key file FRS_SECRET_KEY_FILE names, made by the command, readable by its owner only.
      const file = path.join(dataDir, 'keys', 'fleet.key');
      const withFile = { ...noKey, FRS_SECRET_KEY_FILE: file };
      const made = await ok(withFile, 'secrets', 'create-master-key');
      const keyId = `mk_${crypto
        .createHash('sha256')
        .update('frs-master-key-id\0')
        .update(Buffer.from(fs.readFileSync(file, 'utf8').trim(), 'base64'))
        .digest('hex')
        .slice(0, 16)}`;
      expect(made).to.deep.equal({ keyId, file });
      expect(fs.statSync(file).mode & 0o777).to.equal(0o600);
      expect(await refusal(withFile, 'secrets', 'create-master-key')).to.equal(
        `fleet-admin: the master key file ${file} exists already: a new key would open none of the secrets sealed under it (to replace it: fleet-admin secrets rotate-master-key)\n`,
      );
      const endpoint = await ok(withFile, ...create);
      expect(await own('webhook_endpoints').where({ id: endpoint.id }).first('secret_key_id')).to.deep.equal({
        secret_key_id: keyId,
      });
      expect(await own('master_key_record').first('key_id'), 'the first seal records its key').to.deep.equal({
        key_id: keyId,
      });

      // Now the database holds a secret: a sealing command without the key refuses at start, still making none.
      expect(await refusal(noKey, ...create)).to.equal(
        `fleet-admin: the database holds signing secrets sealed with master key ${keyId} and this process has no master key: give it the key they were sealed with (${KEY_SETTINGS})\n`,
      );
      expect(fs.readdirSync(dataDir)).to.deep.equal(['keys']);
      expect((await own.raw('SELECT count(*)::int AS n FROM webhook_endpoints')).rows[0].n).to.equal(1);

      // A key file its group or other users can read is refused, by every command.
      fs.chmodSync(file, 0o644);
      expect(await refusal(withFile, 'workspace', 'list')).to.equal(
        `fleet-admin: the master key file ${file} is open to other users (mode 0644): run chmod 600 ${file}\n`,
      );
    } finally {
      await own.destroy();
      await dropDatabase(url, name);
    }
  });

  it('refuses to work on a database whose schema is behind, naming fleet-admin migrate', async () => {
    const { db, url } = await testDatabase();
    const name = `fleet_cli_behind_${process.pid}`;
    await db.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [name]);
    await db.raw('CREATE DATABASE ??', [name]);
    try {
      const emptyUrl = url.replace(/\/[^/?]+(\?|$)/, `/${name}$1`);
      const run = await fleetAdminOn(emptyUrl, ['workspace', 'create', '--slug', 'x', '--json']);
      expect(run.code).to.equal(1);
      expect(run.stdout).to.equal('');
      expect(run.stderr).to.match(
        /^fleet-admin: the database schema is not up to date \(\d+ migration\(s\) pending, first 20261122000100_core_schema\): run "npx fleet-admin migrate"\n$/,
      );
      // Nothing was created: not even Knex's bookkeeping tables hold a migration.
      const own = createKnex(emptyUrl, 1);
      try {
        expect(
          (
            await own.raw(
              `SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public' AND tablename NOT LIKE 'knex_%'`,
            )
          ).rows[0].n,
        ).to.equal(0);
      } finally {
        await own.destroy();
      }
    } finally {
      await dropDatabase(url, name);
    }
  });

  it('prints its version', async () => {
    const run = await fleetAdmin('--version');
    const { version } = JSON.parse(fs.readFileSync(path.join(path.dirname(LAUNCHER), '..', 'package.json'), 'utf8'));
    expect(version).to.match(/^\d+\.\d+\.\d+/);
    expect(run).to.deep.equal({ code: 0, stdout: `${version}\n`, stderr: '' });
  });

  it('refuses a DATABASE_URL that is not a URL, and explains an unreachable database, in one line each', async () => {
    const notAUrl = await fleetAdminOn('fleet:secret@db/fleet', ['migrate', '--json']);
    expect(notAUrl).to.deep.equal({
      code: 1,
      stdout: '',
      stderr:
        'fleet-admin: DATABASE_URL is not a PostgreSQL URL: expected postgres://USER:PASSWORD@HOST:PORT/DATABASE (unset it to use the embedded database)\n',
    });
    // A port nothing listens on (one the system just handed out and took back); the password never appears.
    const port = await freePort();
    const refused = await fleetAdminOn(`postgres://fleet:s3cret-pw@127.0.0.1:${port}/fleet`, ['migrate', '--json']);
    expect(refused).to.deep.equal({
      code: 1,
      stdout: '',
      stderr: `fleet-admin: cannot connect to the database at 127.0.0.1:${port}/fleet: connection refused (is PostgreSQL running there?); check DATABASE_URL (unset it to use the embedded database)\n`,
    });
  });

  it('creates and changes a workspace', async () => {
    const { db } = await testDatabase();
    const s = slug('ws');
    const created = await json(
      'workspace',
      'create',
      '--slug',
      s,
      '--timezone',
      'Europe/London',
      '--reminders-ahead',
      '5',
    );
    const row = await db('workspaces').where({ slug: s }).first();
    expect(created).to.deep.equal({ id: row.id, slug: s, status: 'active' });
    expect(row).to.include({ timezone: 'Europe/London', reminders_ahead: 5 });

    const changed = await json('workspace', 'set', '--slug', s, '--status', 'frozen', '--reminders-ahead', '60');
    expect(changed).to.deep.equal({ id: row.id, slug: s, status: 'frozen' });
    expect(await db('workspaces').where({ slug: s }).first('status', 'reminders_ahead', 'timezone')).to.deep.equal({
      status: 'frozen',
      reminders_ahead: 60,
      timezone: 'Europe/London',
    });
  });

  it('prints a short human-readable line without --json', async () => {
    const s = slug('human');
    const run = await fleetAdmin('workspace', 'create', '--slug', s);
    expect(run.code).to.equal(0);
    expect(run.stdout).to.match(new RegExp(`^workspace ${s} \\([0-9a-f-]{36}\\) is active\\n$`));
  });

  it('refuses bad input with one line on stderr, a non-zero exit and no change', async () => {
    const { db } = await testDatabase();
    const s = slug('bad');
    await json('workspace', 'create', '--slug', s);
    await Promise.all([
      fails(
        ['workspace', 'set', '--slug', 'no-such-workspace', '--status', 'frozen', '--json'],
        'no workspace with slug "no-such-workspace"',
      ),
      fails(
        ['key', 'create', '--workspace', 'no-such-workspace', '--json'],
        'no workspace with slug "no-such-workspace"',
      ),
      fails(
        ['workspace', 'create', '--slug', `${s}-tz`, '--timezone', 'Mars/Olympus', '--json'],
        '--timezone must be an IANA time zone such as Asia/Dubai, got the unknown "Mars/Olympus"',
      ),
      fails(
        ['workspace', 'set', '--slug', s, '--reminders-ahead', '0', '--json'],
        '--reminders-ahead must be a whole number of days from 1 to 60, got 0',
      ),
      fails(
        ['workspace', 'set', '--slug', s, '--reminders-ahead', 'soon', '--json'],
        /^fleet-admin: option '--reminders-ahead <days>' argument 'soon' is invalid/,
      ),
      fails(
        ['workspace', 'set', '--slug', s, '--status', 'paused', '--json'],
        /^fleet-admin: option '--status <status>' argument 'paused' is invalid/,
      ),
      fails(
        ['workspace', 'set', '--slug', s, '--webhook-allowed-cidrs', '10.1.0.0/16,10.2.0.0/33', '--json'],
        '--webhook-allowed-cidrs must hold CIDR ranges such as 10.1.0.0/16 or fd12:3456::/32, got "10.2.0.0/33"',
      ),
      fails(['workspace', 'create', '--json'], "required option '--slug <slug>' not specified"),
      fails(['workspace', 'create', '--slug', `${s}-x`, '--colour', 'red', '--json'], "unknown option '--colour'"),
      fails(['key', 'revoke', '--id', 'not-a-uuid', '--json'], '--id must be a UUID, got "not-a-uuid"'),
      fails(
        ['key', 'create', '--workspace', s, '--expires-at', 'tomorrow', '--json'],
        '--expires-at must be an ISO 8601 date-time, got "tomorrow"',
      ),
      fails(
        ['key', 'create', '--workspace', s, '--role', 'r'.repeat(65), '--json'],
        '--role must be 1 to 64 characters',
      ),
      fails(
        ['endpoint', 'create', '--workspace', s, '--url', `https://hooks.example.ae/${'p'.repeat(2030)}`, '--json'],
        '--url must be at most 2048 characters',
      ),
    ]);
    expect(await db('workspaces').where('slug', 'like', `${s}-%`).count({ n: '*' })).to.deep.equal([{ n: 0 }]);
    expect(await db('workspaces').where({ slug: s }).first('status', 'reminders_ahead')).to.deep.equal({
      status: 'active',
      reminders_ahead: 3,
    });
  });

  it('creates an API key whose hash is stored, and revokes it', async () => {
    const { db } = await testDatabase();
    const s = slug('key');
    await json('workspace', 'create', '--slug', s);
    const created = await json(
      'key',
      'create',
      '--workspace',
      s,
      '--role',
      'reader',
      '--expires-at',
      '2030-01-01T00:00:00Z',
    );
    expect(created).to.have.all.keys('id', 'key', 'role', 'expiresAt');
    expect(created).to.include({ role: 'reader', expiresAt: '2030-01-01T00:00:00.000Z' });
    expect(created.key).to.match(/^frs_[0-9A-Za-z]{40}$/);
    const row = await db('api_keys').where({ id: created.id }).first('key_hash');
    expect(Buffer.compare(row.key_hash, hashApiKey(created.key))).to.equal(0);

    const plain = await json('key', 'create', '--workspace', s);
    expect(plain).to.include({ role: null, expiresAt: null });

    const revoked = await json('key', 'revoke', '--id', created.id);
    expect(revoked).to.have.all.keys('id', 'revokedAt');
    expect(revoked.id).to.equal(created.id);
    expect(new Date(revoked.revokedAt).toISOString()).to.equal(revoked.revokedAt);
  });

  it('registers a webhook endpoint and switches it off and on', async () => {
    const { db } = await testDatabase();
    const s = slug('hook');
    await json('workspace', 'create', '--slug', s);
    const created = await json(
      'endpoint',
      'create',
      '--workspace',
      s,
      '--url',
      'https://hooks.example.com/fleet',
      '--events',
      'booking.confirmed, payment.captured',
    );
    expect(created).to.have.all.keys(
      'id',
      'name',
      'url',
      'events',
      'isActive',
      'disabledAt',
      'disabledReason',
      'lastSuccessAt',
      'consecutiveFailures',
      'rateLimit',
      'throttledUntil',
      'secret',
      'signatureScheme',
      'publicKey',
      'previousSchemeExpiresAt',
    );
    expect(created).to.deep.include({
      name: 'hooks.example.com',
      url: 'https://hooks.example.com/fleet',
      events: ['booking.confirmed', 'payment.captured'],
      isActive: true,
    });
    expect(created.secret).to.match(/^whsec_[0-9A-Za-z]{32,}$/);
    const stored = await db('webhook_endpoints').where({ id: created.id }).first('secret_key_id', 'secret_sealed');
    expect(stored.secret_sealed.toString('latin1')).not.to.include('whsec_');
    expect(openSigningSecret(created.id, { keyId: stored.secret_key_id, sealed: stored.secret_sealed })).to.equal(
      created.secret,
    );

    const named = await json(
      'endpoint',
      'create',
      '--workspace',
      s,
      '--url',
      'http://127.0.0.1:9000/in',
      '--name',
      'Local',
    );
    expect(named).to.deep.include({ name: 'Local', events: [] });

    const off = await json('endpoint', 'disable', '--id', created.id);
    expect(off).to.have.all.keys(
      'id',
      'name',
      'url',
      'events',
      'isActive',
      'disabledAt',
      'disabledReason',
      'lastSuccessAt',
      'consecutiveFailures',
      'signatureScheme',
      'publicKey',
      'previousSchemeExpiresAt',
      'rateLimit',
      'throttledUntil',
    );
    expect(off).to.include({
      id: created.id,
      isActive: false,
      disabledReason: 'manual',
      lastSuccessAt: null,
      consecutiveFailures: 0,
      rateLimit: null,
    });
    expect(new Date(off.disabledAt).toISOString()).to.equal(off.disabledAt);

    await db('webhook_endpoints').where({ id: created.id }).update({ consecutive_failures: 20 });
    const on = await json('endpoint', 'enable', '--id', created.id);
    expect(on).to.deep.equal({
      ...off,
      isActive: true,
      disabledAt: null,
      disabledReason: null,
      consecutiveFailures: 0,
      rateLimit: null,
    });

    await Promise.all([
      fails(
        ['endpoint', 'create', '--workspace', s, '--url', 'not a url'],
        '--url must be an absolute http or https URL, got "not a url"',
      ),
      fails(
        ['endpoint', 'create', '--workspace', s, '--url', 'ftp://files.example.com/'],
        '--url must use http or https, got "ftp://files.example.com/"',
      ),
      fails(
        ['endpoint', 'create', '--workspace', s, '--url', 'HTTPS://x.example.com/'],
        '--url must start with http:// or https:// and contain no spaces, got "HTTPS://x.example.com/"',
      ),
      fails(
        ['endpoint', 'create', '--workspace', s, '--url', ' https://x.example.com/'],
        '--url must start with http:// or https:// and contain no spaces, got " https://x.example.com/"',
      ),
      fails(
        ['endpoint', 'create', '--workspace', s, '--url', 'https://x.example.com/', '--events', 'Booking Confirmed'],
        /^fleet-admin: --events must name events of the webhooks section of openapi\/openapi.yaml, not the unknown event "Booking Confirmed"$/,
      ),
      fails(
        ['endpoint', 'enable', '--id', crypto.randomUUID()],
        /^fleet-admin: no webhook endpoint with id [0-9a-f-]{36}$/,
      ),
    ]);
    expect(
      await db('webhook_endpoints')
        .join('workspaces', 'workspaces.id', 'webhook_endpoints.workspace_id')
        .where('workspaces.slug', s)
        .count({ n: '*' }),
    ).to.deep.equal([{ n: 2 }]);
  });

  it('refuses a private or credential-carrying endpoint URL when the switch is off (the default)', async () => {
    const s = slug('egress');
    await json('workspace', 'create', '--slug', s);
    const strict = { FRS_ALLOW_PRIVATE_WEBHOOK_URLS: '' };
    const refused = async (url: string, message: string) => {
      const run = await fleetAdminOn(
        (await testDatabase()).url,
        ['endpoint', 'create', '--workspace', s, '--url', url],
        strict,
      );
      expect(run.code, url).to.equal(1);
      expect(run.stdout).to.equal('');
      expect(run.stderr).to.equal(`fleet-admin: --url refused: ${message}\n`);
    };
    const advice =
      "webhooks are not sent to private destinations (set FRS_ALLOW_PRIVATE_WEBHOOK_URLS=1, list the range in FRS_WEBHOOK_ALLOWED_CIDRS for every workspace, or in the workspace's webhookAllowedCidrs for its endpoints only)";
    await refused('http://127.0.0.1:9000/in', `127.0.0.1 is a loopback address; ${advice}`);
    await refused('http://169.254.169.254/latest/meta-data', `169.254.169.254 is a link-local address; ${advice}`);
    await refused(
      'https://ops:s3cret@hooks.example.com/fleet',
      'the URL must not carry a user name or password (they would be shown to every API key and are never sent)',
    );
    const run = await fleetAdminOn(
      (await testDatabase()).url,
      ['endpoint', 'create', '--workspace', s, '--url', 'http://10.1.2.3/in', '--json'],
      { ...strict, FRS_WEBHOOK_ALLOWED_CIDRS: '10.1.0.0/16' },
    );
    expect(run.code).to.equal(0);
    expect(JSON.parse(run.stdout)).to.include({ url: 'http://10.1.2.3/in', isActive: true });
    const { db } = await testDatabase();
    const stored = await db('webhook_endpoints')
      .join('workspaces', 'workspaces.id', 'webhook_endpoints.workspace_id')
      .where('workspaces.slug', s)
      .pluck('url');
    expect(stored).to.deep.equal(['http://10.1.2.3/in']);
  });

  it('seed demo fills a new workspace and prints it with a working API key', async () => {
    const { db } = await testDatabase();
    const s = slug('demo');
    const seeded = await json('seed', 'demo', '--workspace', s);
    expect(seeded).to.have.all.keys('workspace', 'key');
    expect(seeded.workspace).to.equal(s);
    const workspace = await db('workspaces').where({ slug: s }).first('id');
    const key = await db('api_keys')
      .where({ key_hash: hashApiKey(seeded.key) })
      .first('workspace_id');
    expect(key.workspace_id).to.equal(workspace.id);
    expect(Number((await db('vehicles').where({ workspace_id: workspace.id }).count({ n: '*' }))[0].n)).to.be.above(0);
  });

  it('seed large passes the sizes on and prints the rows per table', async () => {
    const s = slug('large');
    const sizes = ['--vehicles', '10', '--bookings', '20', '--invoices', '20', '--payments', '30', '--customers', '15'];
    const counts = await json('seed', 'large', '--workspace', s, ...sizes);
    expect(counts).to.include({ vehicles: 10, bookings: 20, invoices: 20, payments: 30, customers: 15 });
    await Promise.all([
      fails(
        ['seed', 'large', '--workspace', slug('large-bad'), '--vehicles', 'lots'],
        /^fleet-admin: option '--vehicles <n>' argument 'lots' is invalid/,
      ),
      fails(
        ['seed', 'large', '--workspace', s, '--vehicles', '10'],
        `workspace "${s}" already holds owners; seed a new or empty workspace`,
      ),
    ]);
  });

  it('imports a file, and refuses a malformed or invalid one', async () => {
    const { db } = await testDatabase();
    const s = slug('import');
    await json('workspace', 'create', '--slug', s);
    const owner = { id: crypto.randomUUID(), name: 'Owner' };
    const fleet = { id: crypto.randomUUID(), code: 'F1', name: 'Fleet one', ownerId: owner.id };
    const good = path.join(dir, 'good.json');
    fs.writeFileSync(good, JSON.stringify({ owners: [owner], fleets: [fleet] }));
    expect(await json('import', '--workspace', s, '--file', good)).to.deep.equal({
      imported: { owners: 1, fleets: 1 },
    });
    expect((await db('fleets').where({ id: fleet.id }).first('code')).code).to.equal('F1');

    const malformed = path.join(dir, 'malformed.json');
    fs.writeFileSync(malformed, '{"owners": [');
    const invalid = path.join(dir, 'invalid.json');
    fs.writeFileSync(invalid, JSON.stringify({ fleets: [{ ...fleet, code: 'F 2' }] }));
    const missing = path.join(dir, 'missing.json');
    await Promise.all([
      fails(
        ['import', '--workspace', s, '--file', malformed, '--json'],
        new RegExp(`^fleet-admin: ${malformed} is not valid JSON: .+$`),
      ),
      fails(
        ['import', '--workspace', s, '--file', missing, '--json'],
        new RegExp(`^fleet-admin: cannot read ${missing}: ENOENT`),
      ),
      fails(
        ['import', '--workspace', s, '--file', invalid, '--json'],
        'invalid import document at /fleets/0/code: must match pattern "^[A-Za-z0-9_-]+$"',
      ),
      fails(
        ['import', '--workspace', 'no-such-workspace', '--file', good, '--json'],
        'no workspace with slug "no-such-workspace"',
      ),
    ]);
    expect((await db('fleets').where({ id: fleet.id }).first('code')).code).to.equal('F1');
  });

  it('publishes an event, sweeps it to a receiver, and lists the delivery', async () => {
    // A database of its own: the delivery sweep attempts whatever is due in the whole database.
    const { db, url } = await testDatabase();
    const name = `fleet_cli_webhooks_${process.pid}`;
    await db.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [name]);
    await db.raw('CREATE DATABASE ??', [name]);
    const received: Array<{ headers: http.IncomingHttpHeaders; body: string }> = [];
    const receiver = http.createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => {
        body += chunk;
      });
      req.on('end', () => {
        received.push({ headers: req.headers, body });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const target = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    const dbUrl = url.replace(/\/[^/?]+(\?|$)/, `/${name}$1`);
    const run = async (...args: string[]) => {
      const result = await fleetAdminOn(dbUrl, [...args, '--json']);
      expect(result.stderr, args.join(' ')).to.equal('');
      expect(result.code, args.join(' ')).to.equal(0);
      return JSON.parse(result.stdout);
    };
    try {
      await run('migrate');
      await run('workspace', 'create', '--slug', 'hooks');
      const endpoint = await run(
        'endpoint',
        'create',
        '--workspace',
        'hooks',
        '--url',
        target,
        '--events',
        'booking.confirmed',
      );
      const data = {
        bookingId: '2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f',
        customerId: '9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b',
        vehicleId: '7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d',
        fleet: { id: '5d2e8f1a-3b4c-4d6e-8f7a-9b0c1d2e3f45', code: 'DXB', name: 'Dubai' },
        vehicle: { id: '7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d', plate: 'Dubai A 1' },
      };
      const published = await run(
        'publish',
        '--workspace',
        'hooks',
        '--event',
        'booking.confirmed',
        '--data',
        JSON.stringify(data),
        '--dedupe-key',
        'b-1',
      );
      expect(Object.keys(published).sort()).to.deep.equal(['deliveries', 'eventId']);
      expect(published.deliveries).to.equal(1);
      // The same dedupe key again queues nothing.
      expect(
        await run(
          'publish',
          '--workspace',
          'hooks',
          '--event',
          'booking.confirmed',
          '--data',
          JSON.stringify(data),
          '--dedupe-key',
          'b-1',
        ),
      ).to.deep.equal({ eventId: published.eventId, deliveries: 0 });

      const invalid = await fleetAdminOn(dbUrl, [
        'publish',
        '--workspace',
        'hooks',
        '--event',
        'booking.confirmed',
        '--data',
        '{"bookingId": "nope"}',
        '--json',
      ]);
      expect(invalid.code).to.equal(1);
      expect(invalid.stdout).to.equal('');
      expect(invalid.stderr.trimEnd().split('\n')).to.have.length(1);
      expect(invalid.stderr).to.match(/^fleet-admin: invalid booking\.confirmed event/);

      expect(
        await run('sweep', '--workspace', 'hooks', '--now', '2026-11-22T08:00:00.000Z', '--calendar'),
      ).to.deep.equal({
        calendar: { events: 0 },
        deliveries: { attempted: 0, accepted: 0, retrying: 0, failed: 0 },
      });
      expect(received).to.have.length(0);
      expect(await run('sweep', '--deliveries')).to.deep.equal({
        calendar: { events: 0 },
        deliveries: { attempted: 1, accepted: 1, retrying: 0, failed: 0 },
      });
      expect(received).to.have.length(1);
      const body = JSON.parse(received[0].body);
      expect(body).to.deep.include({ event: 'booking.confirmed', data });
      expect(received[0].headers['service-delivery']).to.equal(body.id);

      const listed = await run('deliveries', 'list', '--endpoint', endpoint.id);
      expect(listed.rows).to.have.length(1);
      expect(listed.rows[0]).to.deep.include({
        id: body.id,
        endpointId: endpoint.id,
        event: 'booking.confirmed',
        status: 'accepted',
        attempts: 1,
        createdAt: body.createdAt,
        nextAttemptAt: null,
        lastStatusCode: 204,
        lastErrorKind: null,
        lastError: null,
      });
      await fails(['deliveries', 'list', '--endpoint', 'nope'], '--endpoint must be a UUID, got "nope"');
    } finally {
      receiver.close();
      await dropDatabase(url, name);
    }
  });

  it('lists workspaces, keys (never the key) and endpoints (never the secret); refuses webhook.test as a subscription, truthfully', async () => {
    const { db } = await testDatabase();
    const ws = await webhookWorkspace(db);
    const key = await createApiKey(db, operator, {
      workspaceId: await idOf(db, ws.slug),
      role: 'reporting',
      expiresAt: '2030-01-01T00:00:00.000Z',
    });
    const endpoint = await ws.endpoint({ url: 'https://hooks.example.ae/fleet', events: ['invoice.issued'] });
    const [workspaces, keys, endpoints] = await Promise.all([
      json('workspace', 'list'),
      json('key', 'list', '--workspace', ws.slug),
      json('endpoint', 'list', '--workspace', ws.slug),
    ]);
    expect(workspaces.rows.find((w: { slug: string }) => w.slug === ws.slug)).to.deep.equal({
      id: ws.id,
      slug: ws.slug,
      status: 'active',
      timezone: 'Asia/Dubai',
      remindersAhead: 3,
      webhookAllowedCidrs: [],
    });
    expect(keys.rows).to.have.length(1);
    expect(keys.rows[0]).to.deep.include({
      id: key.id,
      role: 'reporting',
      expiresAt: '2030-01-01T00:00:00.000Z',
      revokedAt: null,
      lastUsedAt: null,
    });
    expect(Object.keys(keys.rows[0]).sort()).to.deep.equal([
      'createdAt',
      'expiresAt',
      'id',
      'lastUsedAt',
      'revokedAt',
      'role',
    ]);
    expect(JSON.stringify(keys)).not.to.include(key.key);
    expect(endpoints.rows).to.have.length(1);
    expect(endpoints.rows[0]).to.deep.include({
      id: endpoint.id,
      url: 'https://hooks.example.ae/fleet',
      events: ['invoice.issued'],
      isActive: true,
    });
    expect(JSON.stringify(endpoints)).not.to.include(endpoint.secret);
    expect(JSON.stringify(endpoints)).not.to.include('whsec_');
    await Promise.all([
      fails(
        [
          'endpoint',
          'create',
          '--workspace',
          ws.slug,
          '--url',
          'https://x.example.com/',
          '--events',
          'booking.confirmed,webhook.test',
        ],
        "--events must not name webhook.test, which cannot be subscribed to: it is sent only by the test operation (POST /v1/webhooks/{id}/test), to the endpoint it names, whatever that endpoint's events",
      ),
      fails(['key', 'list', '--workspace', 'no-such-workspace'], 'no workspace with slug "no-such-workspace"'),
    ]);
    await dropTestWorkspaces(db);
  });

  it('shows a delivery with its attempts, lists the last error, resends a failed one and recovers a window', async () => {
    const { db } = await testDatabase();
    const ws = await webhookWorkspace(db);
    const endpoint = await ws.endpoint({ url: 'https://hooks.example.ae/fleet' });
    const failed = await buildDelivery(db, ws, endpoint, {
      status: 'failed',
      createdAt: '2026-11-21T08:00:00.000Z',
      attempts: 2,
      lastStatusCode: null,
      lastError: 'ECONNREFUSED: connect ECONNREFUSED 10.0.0.7:443',
    });
    await buildAttempt(db, endpoint, failed.id, {
      number: 1,
      startedAt: '2026-11-21T08:00:00.100Z',
      durationMs: 3,
      statusCode: 502,
      errorKind: 'status',
      error: 'HTTP 502',
      responseBody: 'bad gateway',
    });
    await buildAttempt(db, endpoint, failed.id, {
      number: 2,
      startedAt: '2026-11-21T08:01:00.100Z',
      durationMs: 4,
      statusCode: null,
      errorKind: 'connection',
      error: 'ECONNREFUSED: connect ECONNREFUSED 10.0.0.7:443',
      responseBody: null,
    });
    const second = await buildDelivery(db, ws, endpoint, {
      status: 'failed',
      createdAt: '2026-11-21T09:00:00.000Z',
      attempts: 9,
      lastStatusCode: 500,
      lastError: 'HTTP 500',
    });
    await buildDelivery(db, ws, endpoint, {
      status: 'failed',
      createdAt: '2026-11-21T13:00:00.000Z',
      attempts: 9,
      lastStatusCode: 500,
      lastError: 'HTTP 500',
    });

    const listed = await json('deliveries', 'list', '--endpoint', endpoint.id);
    expect(
      listed.rows.map((r: { id: string; lastError: string | null }) => [r.id, r.lastError]),
    ).to.deep.include.members([
      [failed.id, 'ECONNREFUSED: connect ECONNREFUSED 10.0.0.7:443'],
      [second.id, 'HTTP 500'],
    ]);
    const shown = await json('deliveries', 'show', '--id', failed.id);
    expect(shown).to.deep.include({
      id: failed.id,
      status: 'failed',
      attemptCount: 2,
      lastErrorKind: 'connection',
      payload: JSON.parse(failed.body),
    });
    expect(shown.attempts).to.deep.equal([
      {
        number: 1,
        startedAt: '2026-11-21T08:00:00.100Z',
        durationMs: 3,
        statusCode: 502,
        errorKind: 'status',
        error: 'HTTP 502',
        responseBody: 'bad gateway',
      },
      {
        number: 2,
        startedAt: '2026-11-21T08:01:00.100Z',
        durationMs: 4,
        statusCode: null,
        errorKind: 'connection',
        error: 'ECONNREFUSED: connect ECONNREFUSED 10.0.0.7:443',
        responseBody: null,
      },
    ]);
    const text = await fleetAdmin('deliveries', 'show', '--id', failed.id);
    expect(text.stdout).to.include(
      '  #2 2026-11-21T08:01:00.100Z 4 ms: failed, ECONNREFUSED: connect ECONNREFUSED 10.0.0.7:443 (connection)\n    answer: (none)',
    );

    expect(await json('deliveries', 'resend', '--id', failed.id)).to.deep.equal({
      id: failed.id,
      status: 'queued',
      attempts: 2,
    });
    expect((await db('deliveries').where({ id: failed.id }).first()).status).to.equal('queued');
    await fails(
      ['deliveries', 'resend', '--id', failed.id],
      `delivery ${failed.id} is queued; only a failed delivery can be resent`,
    );

    expect(
      await json(
        'endpoint',
        'recover',
        '--id',
        endpoint.id,
        '--since',
        '2026-11-21T00:00:00Z',
        '--until',
        '2026-11-21T12:00:00Z',
      ),
    ).to.deep.equal({
      endpointId: endpoint.id,
      since: '2026-11-21T00:00:00.000Z',
      until: '2026-11-21T12:00:00.000Z',
      queued: 1,
    });
    expect((await db('deliveries').where({ id: second.id }).first()).status).to.equal('queued');
    await fails(['endpoint', 'recover', '--id', endpoint.id], "required option '--since <iso>' not specified");
    // what was queued again is this test's: gone before any other suite's sweep could meet it
    await dropTestWorkspaces(db);
  });
});
