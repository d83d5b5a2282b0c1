import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { dropDatabase, testDatabase } from '../support/database.js';
import { fleetAdminOn } from '../support/cli.js';
import { expectRejection } from '../support/assertions.js';
import { startReceiver, verifyIndependently, type Receiver } from '../support/receiver.js';
import { createKnex } from '../../src/db/database.js';
import { migrationSource } from '../../src/db/migrate.js';
import { ROOT_DIR } from '../../src/config.js';
import { loadKeyring, masterKeyFile, MasterKeyError, newSigningSecret, writeKeyFile } from '../../src/secrets.js';
import { InputError } from '../../src/errors.js';
import { recordEvent } from '../../src/webhooks/record-event.js';
import { rotateSigningSecret } from '../../src/core/webhooks/signing-secrets.js';
import { openSigningSecret, sealedSecretColumns } from '../../src/webhooks/sealing.js';
import { bookingConfirmedData, dropTestWorkspaces, webhookWorkspace, type TestWorkspace } from './support.js';
import * as frozenSealing from '../../migrations/support/sealed-signing-secrets.js';
import { operator, FIXTURE_ACTOR } from '../support/actors.js';

const HOUR = 3_600_000;

/** Applies migrations one by one until `name` is the next one pending. */
async function migrateUpTo(knex: Knex, name: string): Promise<void> {
  const source = migrationSource();
  for (;;) {
    const [, pending] = await knex.migrate.list({ migrationSource: source });
    expect(pending, `${name} is still pending`).not.to.be.empty;
    if (source.getMigrationName(pending[0]) === name) return;
    await knex.migrate.up({ migrationSource: source });
  }
}

/** The pending migrations' names. */
async function pendingNames(knex: Knex): Promise<string[]> {
  const source = migrationSource();
  const [, pending] = await knex.migrate.list({ migrationSource: source });
  return pending.map((file: unknown) => source.getMigrationName(file as string));
}

/** The master key id of a base64 key, as the service works it out. */
const keyIdOf = (key: string) => loadKeyring({ env: { FRS_SECRET_KEY: key } }).current.id;

/** The key the database records as the one that sealed its signing secrets (null: none sealed yet). */
const recordedKeyId = async (knex: Knex): Promise<string | null> =>
  (await knex('master_key_record').first('key_id')).key_id;

/** What the settings name when a process has the key the database needs: the tail of every refusal. */
const KEY_SETTINGS =
  'FRS_SECRET_KEY, or FRS_SECRET_KEY_FILE for a key file; during a master-key rotation the old key goes in FRS_SECRET_KEY_PREVIOUS';

const hmac = (secret: string, t: string, body: Buffer) =>
  crypto.createHmac('sha256', secret).update(`${t}.`).update(body).digest('hex');

/** The `service-signature` of a request split into its t and its v1 values, in order. */
function signatureParts(header: string | undefined): { t: string; v1: string[] } {
  const pairs = (header ?? '').split(',').map((p) => p.split('='));
  return { t: pairs.find(([k]) => k === 't')![1], v1: pairs.filter(([k]) => k === 'v1').map(([, v]) => v) };
}

describe('webhooks: signing secrets at rest and their rotation', () => {
  let db: Knex;
  let ws: TestWorkspace;
  let receiver: Receiver;

  before(async () => {
    ({ db } = await testDatabase());
    receiver = await startReceiver(() => ({ status: 204 }));
  });
  beforeEach(async () => {
    ws = await webhookWorkspace(db);
    receiver.reset();
  });
  after(async () => {
    await receiver.close();
    await dropTestWorkspaces(db);
  });

  /** Publishes one booking.confirmed, sends it, and returns what the receiver got. */
  const deliverOne = async () => {
    await recordEvent(db, {
      workspaceId: ws.id,
      event: 'booking.confirmed',
      data: bookingConfirmedData(),
      source: 'publish',
    });
    const counts = await ws.dispatcher().runOnce();
    expect(counts).to.deep.equal({ attempted: 1, accepted: 1, retrying: 0, failed: 0 });
    expect(receiver.requests).to.have.length(1);
    const [request] = receiver.requests.splice(0);
    return request;
  };

  it('stores no signing secret in plain text: the table holds a sealed value and the key id, which open to the secret shown once', async () => {
    const endpoint = await ws.endpoint({ url: receiver.endpointUrl() });
    const row = await db('webhook_endpoints').where({ id: endpoint.id }).first();
    expect(row).not.to.have.property('secret');
    expect(row.secret_key_id).to.match(/^mk_[0-9a-f]{16}$/);
    expect(openSigningSecret(endpoint.id, { keyId: row.secret_key_id, sealed: row.secret_sealed })).to.equal(
      endpoint.secret,
    );
    // Every endpoint in the table: no text column mentions whsec_, no bytea column holds its bytes.
    const plain = await db.raw(
      `SELECT count(*)::int AS n FROM webhook_endpoints w
       WHERE row_to_json(w)::text LIKE '%whsec%'
          OR position(convert_to('whsec_', 'UTF8') IN w.secret_sealed) > 0
          OR position(convert_to('whsec_', 'UTF8') IN coalesce(w.previous_secret_sealed, ''::bytea)) > 0`,
    );
    expect(plain.rows[0].n).to.equal(0);
    expect(row.secret_sealed.includes(Buffer.from(endpoint.secret.slice(6)))).to.equal(false);
  });

  it('a sealed secret opens only on its own row: copied to another endpoint it is refused and nothing is sent', async () => {
    const a = await ws.endpoint({ url: receiver.endpointUrl() });
    const b = await ws.endpoint({ url: receiver.endpointUrl() });
    const sealedA = await db('webhook_endpoints').where({ id: a.id }).first('secret_key_id', 'secret_sealed');
    await db('webhook_endpoints').where({ id: b.id }).update(sealedA);
    expect(() => openSigningSecret(b.id, { keyId: sealedA.secret_key_id, sealed: sealedA.secret_sealed })).to.throw(
      MasterKeyError,
      /failed authentication/,
    );
    await db('webhook_endpoints').where({ id: a.id }).update({ is_active: false, disabled_reason: 'manual' });
    await recordEvent(db, {
      workspaceId: ws.id,
      event: 'booking.confirmed',
      data: bookingConfirmedData(),
      source: 'publish',
    });
    expect(await ws.dispatcher().runOnce()).to.deep.equal({ attempted: 0, accepted: 0, retrying: 0, failed: 0 });
    expect(receiver.requests).to.have.length(0);
    // It waits (leased, still queued) for the right key instead of being dropped.
    const pending = await db('deliveries').where({ endpoint_id: b.id }).first('status', 'attempts');
    expect(pending).to.deep.equal({ status: 'queued', attempts: 0 });
  });

  it('during the overlap every delivery carries two v1 values, the new secret first; with overlap 0 only the new one', async () => {
    const url = receiver.endpointUrl();
    const endpoint = await ws.endpoint({ url });
    const now = new Date();
    const rotated = await rotateSigningSecret(db, operator, { endpointId: endpoint.id, workspaceId: 'every', now });
    expect(rotated.secret)
      .to.match(/^whsec_[0-9A-Za-z]{40}$/)
      .and.not.equal(endpoint.secret);
    expect(rotated.previousSecretExpiresAt).to.equal(new Date(now.getTime() + 24 * HOUR).toISOString());

    const during = await deliverOne();
    const { t, v1 } = signatureParts(during.signature);
    expect(during.signature).to.equal(`t=${t},v1=${v1[0]},v1=${v1[1]}`);
    expect(v1).to.deep.equal([hmac(rotated.secret, t, during.rawBody), hmac(endpoint.secret, t, during.rawBody)]);
    // A receiver on either secret accepts it.
    for (const secret of [rotated.secret, endpoint.secret])
      expect(verifyIndependently(during.rawBody, during.signature, secret, Date.now() / 1000)).to.deep.equal({
        ok: true,
      });
    // The Standard Webhooks header carries the same two signatures, space-separated, the new one first.
    const standard = (secret: string) =>
      `v1,${crypto
        .createHmac('sha256', Buffer.from(secret.slice('whsec_'.length), 'base64'))
        .update(`${during.deliveryId}.${t}.`)
        .update(during.rawBody)
        .digest('base64')}`;
    expect(during.headers['webhook-timestamp']).to.equal(t);
    expect(during.headers['webhook-signature']).to.equal(`${standard(rotated.secret)} ${standard(endpoint.secret)}`);

    const again = await rotateSigningSecret(db, operator, {
      endpointId: endpoint.id,
      workspaceId: 'every',
      overlapHours: 0,
      now: new Date(),
    });
    expect(again.previousSecretExpiresAt).to.equal(null);
    const after = await deliverOne();
    const parts = signatureParts(after.signature);
    expect(parts.v1).to.deep.equal([hmac(again.secret, parts.t, after.rawBody)]);
    expect(verifyIndependently(after.rawBody, after.signature, rotated.secret, Date.now() / 1000)).to.deep.equal({
      ok: false,
      reason: 'signature_mismatch',
    });
  });

  it('after the overlap only the new secret signs', async () => {
    const endpoint = await ws.endpoint({ url: receiver.endpointUrl() });
    // Rotated 3 hours ago with a 2-hour overlap: it ended an hour ago.
    const rotated = await rotateSigningSecret(db, operator, {
      endpointId: endpoint.id,
      workspaceId: 'every',
      overlapHours: 2,
      now: new Date(Date.now() - 3 * HOUR),
    });
    const request = await deliverOne();
    const { t, v1 } = signatureParts(request.signature);
    expect(v1).to.deep.equal([hmac(rotated.secret, t, request.rawBody)]);
  });

  it('refuses a bad id, an unknown endpoint and an overlap outside 0 to 720 hours, changing nothing', async () => {
    const endpoint = await ws.endpoint({ url: receiver.endpointUrl() });
    const before = await db('webhook_endpoints').where({ id: endpoint.id }).first();
    expect(
      (
        await expectRejection(
          rotateSigningSecret(db, operator, { endpointId: 'nope', workspaceId: 'every', now: new Date() }),
          InputError,
        )
      ).message,
    ).to.equal('id must be a UUID, got "nope"');
    const unknown = crypto.randomUUID();
    expect(
      (
        await expectRejection(
          rotateSigningSecret(db, operator, { endpointId: unknown, workspaceId: 'every', now: new Date() }),
          InputError,
        )
      ).message,
    ).to.equal(`no webhook endpoint with id ${unknown}`);
    for (const hours of [-1, 721, 1.5]) {
      expect(
        (
          await expectRejection(
            rotateSigningSecret(db, operator, {
              endpointId: endpoint.id,
              workspaceId: 'every',
              overlapHours: hours,
              now: new Date(),
            }),
            InputError,
          )
        ).message,
      ).to.equal(`overlapHours must be a whole number of hours from 0 to 720, got ${hours}`);
    }
    expect(await db('webhook_endpoints').where({ id: endpoint.id }).first()).to.deep.equal(before);
    // (A rotation no longer opens the endpoint's current secret: it seals the new one to the recorded public key, and
    // the database moves the current one to previous. A process given another key than the recorded one is refused
    // at start and at every seal: see "the database records the master key" below.)
  });
});

describe('the master key', () => {
  const dirs: string[] = [];
  const tempDir = () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'frs-master-key-'));
    dirs.push(dir);
    return dir;
  };
  after(() => dirs.forEach((dir) => fs.rmSync(dir, { recursive: true, force: true })));

  it('a process that only opens secrets does not create a key file: it says which key it lacks', () => {
    const dataDir = tempDir();
    expect(() => loadKeyring({ env: {}, dataDir, createIfMissing: false })).to.throw(
      MasterKeyError,
      /^there is no master key: no FRS_SECRET_KEY and no key file /,
    );
    expect(fs.existsSync(masterKeyFile(dataDir))).to.equal(false);
  });

  it('without FRS_SECRET_KEY is a key file created once under the data folder, readable by its owner only', () => {
    const dataDir = tempDir();
    const first = loadKeyring({ env: {}, dataDir });
    const file = masterKeyFile(dataDir);
    expect(file).to.equal(path.join(dataDir, 'secret.key'));
    expect(fs.statSync(file).mode & 0o777).to.equal(0o600);
    expect(Buffer.from(fs.readFileSync(file, 'utf8').trim(), 'base64')).to.have.length(32);
    expect(loadKeyring({ env: {}, dataDir }).current.id).to.equal(first.current.id);
    expect(first.source).to.deep.equal({ kind: 'file', path: file });
  });

  it('with DATABASE_URL no key file is created, even by a process about to seal: only the embedded default makes its own', () => {
    const dataDir = tempDir();
    const env = { DATABASE_URL: 'postgres://fleet@db.example/fleet' };
    expect(() => loadKeyring({ env, dataDir })).to.throw(
      MasterKeyError,
      `there is no master key: no FRS_SECRET_KEY and no key file ${masterKeyFile(dataDir)}; set FRS_SECRET_KEY, or FRS_SECRET_KEY_FILE to the key file`,
    );
    expect(fs.readdirSync(dataDir)).to.deep.equal([]);
  });

  it('reads the key file FRS_SECRET_KEY_FILE names, and refuses one its group or other users can read, naming chmod 600', () => {
    const file = path.join(tempDir(), 'fleet.key');
    const key = crypto.randomBytes(32).toString('base64');
    fs.writeFileSync(file, `${key}\n`, { mode: 0o600 });
    const env = { FRS_SECRET_KEY_FILE: file, DATABASE_URL: 'postgres://fleet@db.example/fleet' };
    expect(loadKeyring({ env })).to.deep.include({ source: { kind: 'file', path: file } });
    expect(loadKeyring({ env }).current.id).to.equal(keyIdOf(key));
    for (const mode of [0o644, 0o640, 0o604]) {
      fs.chmodSync(file, mode);
      expect(() => loadKeyring({ env }), mode.toString(8)).to.throw(
        MasterKeyError,
        `the master key file ${file} is open to other users (mode 0${mode.toString(8)}): run chmod 600 ${file}`,
      );
    }
    // Its owner only: read-only is as good as 0600.
    fs.chmodSync(file, 0o400);
    expect(loadKeyring({ env }).current.id).to.equal(keyIdOf(key));
  });

  it('rewrites the key file through a temporary file of its own: a link planted at a name it could have picked is not followed', () => {
    const dir = tempDir();
    const file = path.join(dir, 'secret.key');
    const planted = path.join(dir, 'planted');
    fs.writeFileSync(planted, '', { mode: 0o644 });
    // The name the temporary file once had (the key file's, with this process's id): predictable to other users.
    const link = `${file}.${process.pid}.tmp`;
    fs.symlinkSync(planted, link);
    const keys = [crypto.randomBytes(32).toString('base64'), crypto.randomBytes(32).toString('base64')];
    writeKeyFile(file, keys);
    expect(fs.readFileSync(planted, 'utf8'), 'nothing written through the link').to.equal('');
    expect(fs.lstatSync(file).isFile(), 'the key file is a file of its own, not the link').to.equal(true);
    expect(fs.readFileSync(file, 'utf8')).to.equal(`${keys[0]}\n${keys[1]}\n`);
    expect(fs.statSync(file).mode & 0o777).to.equal(0o600);
    expect(fs.readdirSync(dir).sort(), 'no temporary file left').to.deep.equal(
      [path.basename(planted), path.basename(file), path.basename(link)].sort(),
    );
  });

  it('FRS_SECRET_KEY wins over the key file, and a malformed one is refused naming the variable', () => {
    const dataDir = tempDir();
    const key = crypto.randomBytes(32).toString('base64');
    expect(loadKeyring({ env: { FRS_SECRET_KEY: key }, dataDir }).source).to.deep.equal({ kind: 'env' });
    expect(fs.existsSync(masterKeyFile(dataDir))).to.equal(false);
    for (const bad of ['short', crypto.randomBytes(16).toString('base64'), crypto.randomBytes(33).toString('base64')]) {
      expect(() => loadKeyring({ env: { FRS_SECRET_KEY: bad }, dataDir })).to.throw(
        MasterKeyError,
        'FRS_SECRET_KEY must be the base64 of 32 random bytes',
      );
    }
    expect(() => loadKeyring({ env: { FRS_SECRET_KEY: key, FRS_SECRET_KEY_PREVIOUS: 'x' }, dataDir })).to.throw(
      MasterKeyError,
      'FRS_SECRET_KEY_PREVIOUS must be',
    );
  });

  it("the sealing migration's frozen copy (migrations/support) seals what the service opens, under the same key and key file (the service now seals sealed boxes, which it alone opens)", () => {
    const id = crypto.randomUUID();
    const secret = newSigningSecret();
    // Under FRS_SECRET_KEY (the test runs'): the same key id and format, each side opening the other's, on this row only.
    const frozen = frozenSealing.sealedSecretColumns(id, secret);
    expect(frozen.secret_key_id).to.equal(keyIdOf(process.env.FRS_SECRET_KEY!));
    expect([frozen.secret_sealed[0], frozen.secret_sealed.length]).to.deep.equal([1, 1 + 12 + 16 + secret.length]);
    expect(openSigningSecret(id, { keyId: frozen.secret_key_id, sealed: frozen.secret_sealed })).to.equal(secret);
    expect(() =>
      openSigningSecret(crypto.randomUUID(), { keyId: frozen.secret_key_id, sealed: frozen.secret_sealed }),
    ).to.throw('failed authentication');
    const live = sealedSecretColumns(id, secret);
    expect([live.secret_key_id, live.secret_sealed[0], live.secret_sealed.length]).to.deep.equal([
      frozen.secret_key_id,
      2,
      1 + 32 + 16 + secret.length,
    ]);
    expect(openSigningSecret(id, { keyId: live.secret_key_id, sealed: live.secret_sealed })).to.equal(secret);
    // Without it: the key file under the data folder, made on the embedded default, the same one the service reads.
    const dataDir = tempDir();
    const saved = { ...process.env };
    try {
      for (const name of ['FRS_SECRET_KEY', 'FRS_SECRET_KEY_PREVIOUS', 'FRS_SECRET_KEY_FILE', 'DATABASE_URL'])
        delete process.env[name];
      process.env.FRS_DATA_DIR = dataDir;
      const sealed = frozenSealing.sealedSecretColumns(id, secret);
      expect(fs.statSync(masterKeyFile(dataDir)).mode & 0o777).to.equal(0o600);
      expect(sealed.secret_key_id).to.equal(loadKeyring({ env: {}, dataDir, createIfMissing: false }).current.id);
      expect(
        frozenSealing.openSigningSecret(id, { keyId: sealed.secret_key_id, sealed: sealed.secret_sealed }),
      ).to.equal(secret);
    } finally {
      for (const name of Object.keys(process.env)) if (!(name in saved)) delete process.env[name];
      Object.assign(process.env, saved);
    }
  });
});

describe('fleet-admin secrets rotate-master-key and the migration that sealed stored secrets (a database of their own)', () => {
  let url: string;
  let admin: Knex;
  let own: Knex;
  let receiver: Receiver;
  const name = `fleet_secrets_${process.pid}`;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'frs-secrets-cli-'));
  const otherDirs: string[] = [];
  const tempDataDir = () => {
    otherDirs.push(fs.mkdtempSync(path.join(os.tmpdir(), 'frs-secrets-cli-')));
    return otherDirs.at(-1)!;
  };

  before(async () => {
    ({ db: admin, url } = await testDatabase());
    await admin.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [name]);
    await admin.raw('CREATE DATABASE ??', [name]);
    url = url.replace(/\/[^/?]+(\?|$)/, `/${name}$1`);
    own = createKnex(url, 2);
    receiver = await startReceiver(() => ({ status: 204 }));
  });
  after(async () => {
    await receiver.close();
    await own.destroy();
    await dropDatabase((await testDatabase()).url, name);
    for (const dir of [dataDir, ...otherDirs]) fs.rmSync(dir, { recursive: true, force: true });
  });

  /** The real CLI on this database, with the master key in `env` (none: the key file under the temp data folder). */
  const cli = async (env: Record<string, string>, ...args: string[]): Promise<any> => {
    const run = await fleetAdminOn(url, [...args, '--json'], {
      FRS_DATA_DIR: dataDir,
      FRS_SECRET_KEY: '',
      FRS_SECRET_KEY_PREVIOUS: '',
      ...env,
    });
    expect(run.stderr, `${args.join(' ')}: stderr`).to.equal('');
    expect(run.code).to.equal(0);
    return JSON.parse(run.stdout);
  };
  const storedKeyId = async (id: string) =>
    (await own('webhook_endpoints').where({ id }).first('secret_key_id')).secret_key_id;
  /** The key the second test moves to FRS_SECRET_KEY, the one the third rotates away from. */
  const envKey = crypto.randomBytes(32).toString('base64');
  const keyFileLines = () => fs.readFileSync(masterKeyFile(dataDir), 'utf8').trim().split('\n');
  /** Sends one event through `fleet-admin sweep` and checks its signature with `secret`. */
  const deliversSignedWith = async (env: Record<string, string>, slug: string, secret: string) => {
    receiver.reset();
    await cli(
      env,
      'publish',
      '--workspace',
      slug,
      '--event',
      'booking.confirmed',
      '--data',
      JSON.stringify(bookingConfirmedData()),
    );
    expect(await cli(env, 'sweep', '--deliveries')).to.deep.include({
      deliveries: { attempted: 1, accepted: 1, retrying: 0, failed: 0 },
    });
    expect(receiver.requests).to.have.length(1);
    const [request] = receiver.requests;
    expect(verifyIndependently(request.rawBody, request.signature, secret, Date.now() / 1000)).to.deep.equal({
      ok: true,
    });
  };

  it('the migration seals the secrets stored in plain text before it, under a key given on purpose (none is made by migrate)', async () => {
    const mine = '20261123000900_sealed_signing_secrets';
    await migrateUpTo(own, mine);
    const secret = newSigningSecret();
    const [workspace] = await own('workspaces').insert({ slug: 'legacy' }).returning('id');
    const [endpoint] = await own('webhook_endpoints')
      .insert({ workspace_id: workspace.id, name: 'old', url: `${receiver.url}/old`, secret })
      .returning('id');
    // Without a key migrate refuses, makes none, and changes nothing.
    const pending = await pendingNames(own);
    const refused = await fleetAdminOn(url, ['migrate', '--json'], {
      FRS_DATA_DIR: dataDir,
      FRS_SECRET_KEY: '',
      FRS_SECRET_KEY_PREVIOUS: '',
    });
    expect(refused).to.deep.equal({
      code: 1,
      stdout: '',
      stderr: `fleet-admin: the database holds signing secrets in plain text, which a migration seals, and this process has no master key: give it one (for a key file: fleet-admin secrets create-master-key) (${KEY_SETTINGS})\n`,
    });
    expect(fs.readdirSync(dataDir)).to.deep.equal([]);
    expect(await pendingNames(own)).to.deep.equal(pending);
    expect(await own('webhook_endpoints').where({ id: endpoint.id }).first('secret')).to.deep.equal({ secret });

    // The key made on purpose, in the key file: then migrate seals under it and records it.
    const created = await cli({}, 'secrets', 'create-master-key');
    expect(created).to.deep.equal({
      keyId: keyIdOf(fs.readFileSync(masterKeyFile(dataDir), 'utf8').trim()),
      file: masterKeyFile(dataDir),
    });
    expect(fs.statSync(masterKeyFile(dataDir)).mode & 0o777).to.equal(0o600);
    const applied = await cli({}, 'migrate');
    expect(applied.applied[0]).to.equal(mine);
    expect(await recordedKeyId(own)).to.equal(created.keyId);
    // A second key file would open none of the secrets now sealed: refused.
    const again = await fleetAdminOn(url, ['secrets', 'create-master-key', '--json'], {
      FRS_DATA_DIR: tempDataDir(),
      FRS_SECRET_KEY: '',
    });
    expect(again.stderr).to.equal(
      `fleet-admin: the database holds signing secrets sealed with master key ${created.keyId}: a new key would open none of them; give this process the key they were sealed with (${KEY_SETTINGS})\n`,
    );
    expect(again.code).to.equal(1);
    const row = await own('webhook_endpoints').where({ id: endpoint.id }).first();
    expect(row).not.to.have.property('secret');
    expect(row.secret_sealed.includes(Buffer.from(secret))).to.equal(false);
    // Not in the table's files either (old row versions), where a superuser can look.
    const [{ rolsuper }] = (await own.raw('SELECT rolsuper FROM pg_roles WHERE rolname = current_user')).rows;
    if (rolsuper) {
      await own.raw('CHECKPOINT');
      const [{ bytes }] = (
        await own.raw(`SELECT pg_read_binary_file(pg_relation_filepath('webhook_endpoints')) AS bytes`)
      ).rows;
      expect((bytes as Buffer).length).to.be.above(0);
      expect((bytes as Buffer).includes(Buffer.from(secret)), 'the plain secret in the table file').to.equal(false);
    }
    expect(keyFileLines()).to.have.length(1);
    await deliversSignedWith({}, 'legacy', secret);
  });

  it('re-seals every secret under a new key in the key file, and under FRS_SECRET_KEY with the old key in FRS_SECRET_KEY_PREVIOUS', async () => {
    await cli({}, 'workspace', 'create', '--slug', 'rotation');
    const created = await cli({}, 'endpoint', 'create', '--workspace', 'rotation', '--url', `${receiver.url}/rotation`);
    const [oldKey] = keyFileLines();
    const oldId = await storedKeyId(created.id);
    expect(await recordedKeyId(own)).to.equal(oldId);

    // With DATABASE_URL a key file may be this host's alone: the new key would reach no other. Refused unless the
    // operator says every process reads this file, changing nothing.
    const before = {
      file: fs.readFileSync(masterKeyFile(dataDir), 'utf8'),
      endpoints: await own('webhook_endpoints').orderBy('id').select(),
      recorded: await recordedKeyId(own),
    };
    const refused = await fleetAdminOn(url, ['secrets', 'rotate-master-key', '--json'], {
      FRS_DATA_DIR: dataDir,
      FRS_SECRET_KEY: '',
      FRS_SECRET_KEY_PREVIOUS: '',
    });
    expect(refused).to.deep.equal({
      code: 1,
      stdout: '',
      stderr:
        `fleet-admin: the master key is in the key file ${masterKeyFile(dataDir)} (FRS_SECRET_KEY_FILE) and DATABASE_URL is set: a new key would be written to this ` +
        `host's file only, and processes reading another copy could open none of the secrets re-sealed under it; if every process reads this same file, ` +
        `run again with --key-file-is-shared, else rotate with the new key in FRS_SECRET_KEY and the old one in FRS_SECRET_KEY_PREVIOUS on every process\n`,
    });
    expect({
      file: fs.readFileSync(masterKeyFile(dataDir), 'utf8'),
      endpoints: await own('webhook_endpoints').orderBy('id').select(),
      recorded: await recordedKeyId(own),
    }).to.deep.equal(before);
    expect(fs.readdirSync(dataDir), 'no temporary file left').to.deep.equal(['secret.key']);

    const rotated = await cli({}, 'secrets', 'rotate-master-key', '--key-file-is-shared');
    expect(rotated).to.deep.equal({ keyId: rotated.keyId, source: 'file', file: masterKeyFile(dataDir), resealed: 2 });
    expect(rotated.keyId)
      .to.match(/^mk_[0-9a-f]{16}$/)
      .and.not.equal(oldId);
    const lines = keyFileLines();
    expect(keyIdOf(lines[0])).to.equal(rotated.keyId);
    expect(lines).to.have.length(1);
    expect(lines[0]).not.to.equal(oldKey);
    expect(fs.statSync(masterKeyFile(dataDir)).mode & 0o777).to.equal(0o600);
    expect(await storedKeyId(created.id)).to.equal(rotated.keyId);
    expect(await recordedKeyId(own), 'the record follows the rotation').to.equal(rotated.keyId);
    // audited: the new key's id (never the key) and how many it re-sealed, as the CLI's OS user
    expect(
      await own('audit_entries')
        .whereNot({ actor_name: FIXTURE_ACTOR })
        .where({ action: 'master_key.rotate', target_id: rotated.keyId })
        .select('actor_type', 'target_type', 'workspace_id', 'changes'),
    ).to.deep.equal([
      // (no ed25519 endpoint here: no private key re-sealed)
      {
        actor_type: 'cli',
        target_type: 'master_key',
        workspace_id: null,
        changes: { resealed: 2, resealedPrivateKeys: 0 },
      },
    ]);
    expect(JSON.stringify(await own('audit_entries').whereNot({ actor_name: FIXTURE_ACTOR }).select())).not.to.include(
      keyFileLines()[0],
    );
    await deliversSignedWith({}, 'rotation', created.secret);
    // Without --json it says where the new key is, and that every host needs it.
    const again = await fleetAdminOn(url, ['secrets', 'rotate-master-key', '--key-file-is-shared'], {
      FRS_DATA_DIR: dataDir,
      FRS_SECRET_KEY: '',
      FRS_SECRET_KEY_PREVIOUS: '',
    });
    expect(again.stderr).to.equal('');
    const [againKey] = keyFileLines();
    expect(again.stdout).to.equal(
      `2 endpoint(s) re-sealed under master key ${keyIdOf(againKey)} (a new key, now the only one in the key file ${masterKeyFile(dataDir)}: ` +
        `every host that runs the service or fleet-admin must read this file as it is now; a copy taken before opens none of the signing secrets)\n`,
    );
    lines.splice(0, 1, againKey);
    expect(await recordedKeyId(own)).to.equal(keyIdOf(againKey));

    // Moving to FRS_SECRET_KEY: the new key there, the key file's key as the previous one.
    const moving = { FRS_SECRET_KEY: envKey, FRS_SECRET_KEY_PREVIOUS: lines[0] };
    const moved = await cli(moving, 'secrets', 'rotate-master-key');
    expect(moved).to.deep.equal({
      keyId: loadKeyring({ env: { FRS_SECRET_KEY: envKey } }).current.id,
      source: 'env',
      resealed: 2,
    });
    expect(await storedKeyId(created.id)).to.equal(moved.keyId);
    expect(await recordedKeyId(own), 'the record follows the rotation').to.equal(moved.keyId);
    // Nothing left to re-seal; the old key is no longer needed.
    expect(await cli({ FRS_SECRET_KEY: envKey }, 'secrets', 'rotate-master-key')).to.deep.equal({
      ...moved,
      resealed: 0,
    });
    await deliversSignedWith({ FRS_SECRET_KEY: envKey }, 'rotation', created.secret);

    // fleet-admin endpoint rotate-secret: the new secret shown once, and with --overlap-hours 0 the only one signing.
    const rotatedSecret = await cli(
      { FRS_SECRET_KEY: envKey },
      'endpoint',
      'rotate-secret',
      '--id',
      created.id,
      '--overlap-hours',
      '0',
    );
    expect(rotatedSecret).to.have.all.keys('id', 'secret', 'previousSecretExpiresAt');
    expect(rotatedSecret).to.include({ id: created.id, previousSecretExpiresAt: null });
    expect(rotatedSecret.secret)
      .to.match(/^whsec_[0-9A-Za-z]{40}$/)
      .and.not.equal(created.secret);
    await deliversSignedWith({ FRS_SECRET_KEY: envKey }, 'rotation', rotatedSecret.secret);
    expect(
      verifyIndependently(
        receiver.requests[0].rawBody,
        receiver.requests[0].signature,
        created.secret,
        Date.now() / 1000,
      ),
    ).to.deep.equal({ ok: false, reason: 'signature_mismatch' });
  });

  it('an FRS_SECRET_KEY rotation under way (new key, old in FRS_SECRET_KEY_PREVIOUS): endpoint create and rotate-secret seal under the recorded key; only rotate-master-key moves the secrets and the record', async () => {
    const oldId = keyIdOf(envKey);
    const newKey = crypto.randomBytes(32).toString('base64');
    const newId = keyIdOf(newKey);
    expect(await recordedKeyId(own), 'left by the test before').to.equal(oldId);
    const rotating = { FRS_SECRET_KEY: newKey, FRS_SECRET_KEY_PREVIOUS: envKey };
    await cli(rotating, 'workspace', 'create', '--slug', 'env-rotation');
    const created = await cli(
      rotating,
      'endpoint',
      'create',
      '--workspace',
      'env-rotation',
      '--url',
      `${receiver.url}/env-rotation`,
    );
    expect(await storedKeyId(created.id), 'sealed under the recorded key').to.equal(oldId);
    const rotatedSecret = await cli(rotating, 'endpoint', 'rotate-secret', '--id', created.id, '--overlap-hours', '0');
    expect(await storedKeyId(created.id), 'sealed under the recorded key').to.equal(oldId);
    expect(await recordedKeyId(own), 'the record stays').to.equal(oldId);
    // So a worker restarted with only the new key too early refuses at start, rather than starting and opening nothing.
    const early = await fleetAdminOn(url, ['sweep', '--deliveries', '--json'], {
      FRS_DATA_DIR: dataDir,
      FRS_SECRET_KEY: newKey,
      FRS_SECRET_KEY_PREVIOUS: '',
    });
    expect(early).to.deep.equal({
      code: 1,
      stdout: '',
      stderr: `fleet-admin: FRS_SECRET_KEY holds master key ${newId}, but the database's signing secrets are sealed with ${oldId}: give this process that key (${KEY_SETTINGS})\n`,
    });
    await deliversSignedWith(rotating, 'env-rotation', rotatedSecret.secret);

    // The re-seal moves every secret (the legacy, rotation and env-rotation endpoints) and the record.
    expect(await cli(rotating, 'secrets', 'rotate-master-key')).to.deep.equal({
      keyId: newId,
      source: 'env',
      resealed: 3,
    });
    expect(await storedKeyId(created.id)).to.equal(newId);
    expect(await recordedKeyId(own), 'the record follows the rotation').to.equal(newId);
    expect((await own('webhook_endpoints').distinct('secret_key_id')).map((row) => row.secret_key_id)).to.deep.equal([
      newId,
    ]);
    await deliversSignedWith({ FRS_SECRET_KEY: newKey }, 'env-rotation', rotatedSecret.secret);
  });
});

describe('the database records the master key: a release container without it, and processes given another (a database of their own)', () => {
  let url: string;
  let own: Knex;
  const name = `fleet_master_key_${process.pid}`;
  const mine = '20261125000200_master_key_record';
  const testKey = process.env.FRS_SECRET_KEY!;
  const otherKey = crypto.randomBytes(32).toString('base64');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'frs-release-'));
  let endpointId: string;

  before(async () => {
    const admin = await testDatabase();
    await admin.db.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [name]);
    await admin.db.raw('CREATE DATABASE ??', [name]);
    url = admin.url.replace(/\/[^/?]+(\?|$)/, `/${name}$1`);
    own = createKnex(url, 2);
    // The database as the previous release left it: signing secrets sealed under the service's key, no record yet.
    await migrateUpTo(own, mine);
    const [workspace] = await own('workspaces').insert({ slug: 'release' }).returning('id');
    endpointId = crypto.randomUUID();
    await own('webhook_endpoints').insert({
      id: endpointId,
      workspace_id: workspace.id,
      name: 'r',
      url: 'https://example.com/hook',
      ...sealedSecretColumns(endpointId, newSigningSecret()),
    });
  });
  after(async () => {
    await own.destroy();
    await dropDatabase((await testDatabase()).url, name);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  /** The environment of a process given no master key: no variable, and a data folder without a key file. */
  const noKey = { FRS_SECRET_KEY: '', FRS_SECRET_KEY_PREVIOUS: '', FRS_DATA_DIR: dataDir };

  it('fleet-admin migrate without the key refuses in one line, makes no key file and changes nothing; with it, records the key', async () => {
    const before = {
      pending: await pendingNames(own),
      endpoints: await own('webhook_endpoints').select(),
      applied: await own('knex_migrations').select('name'),
    };
    expect(before.pending[0]).to.equal(mine);
    const refused = await fleetAdminOn(url, ['migrate', '--json'], noKey);
    expect(refused).to.deep.equal({
      code: 1,
      stdout: '',
      stderr: `fleet-admin: the database holds signing secrets and this process has no master key: give it the key they were sealed with (${KEY_SETTINGS})\n`,
    });
    expect(fs.readdirSync(dataDir), 'no key file').to.deep.equal([]);
    expect({
      pending: await pendingNames(own),
      endpoints: await own('webhook_endpoints').select(),
      applied: await own('knex_migrations').select('name'),
    }).to.deep.equal(before);
    expect((await own.raw(`SELECT to_regclass('master_key_record') AS t`)).rows[0].t).to.equal(null);

    // Given the key, it migrates, and the migration records the key the stored secrets are sealed with.
    const migrated = await fleetAdminOn(url, ['migrate', '--json'], {
      FRS_SECRET_KEY: testKey,
      FRS_SECRET_KEY_PREVIOUS: '',
    });
    expect(migrated.stderr).to.equal('');
    expect(JSON.parse(migrated.stdout).applied).to.deep.equal(before.pending);
    expect(await recordedKeyId(own)).to.equal(keyIdOf(testKey));

    // On the migrated database too: nothing to apply, still refused without the key.
    const again = await fleetAdminOn(url, ['migrate', '--json'], noKey);
    expect(again.stderr).to.equal(
      `fleet-admin: the database holds signing secrets sealed with master key ${keyIdOf(testKey)} and this process has no master key: give it the key they were sealed with (${KEY_SETTINGS})\n`,
    );
    expect(again.code).to.equal(1);
    expect(fs.readdirSync(dataDir)).to.deep.equal([]);
  });

  it('the CLI, a worker or the API given another key refuses at start naming the setting; the API given none too (its cursor key)', async () => {
    expect(await recordedKeyId(own), 'recorded by the test before').to.equal(keyIdOf(testKey));
    const recorded = keyIdOf(testKey);
    const other = keyIdOf(otherKey);
    const sealedWith = `but the database's signing secrets are sealed with ${recorded}: give this process that key (${KEY_SETTINGS})`;
    const cliRefusal = async (env: NodeJS.ProcessEnv, ...args: string[]) => {
      const run = await fleetAdminOn(url, [...args, '--json'], {
        FRS_SECRET_KEY_PREVIOUS: '',
        FRS_DATA_DIR: dataDir,
        ...env,
      });
      expect(run.code, `${args.join(' ')}: exit code`).to.equal(1);
      expect(run.stdout).to.equal('');
      return run.stderr;
    };
    // Every command, whether or not it touches a secret.
    for (const args of [
      ['workspace', 'list'],
      ['endpoint', 'rotate-secret', '--id', endpointId],
      ['sweep', '--deliveries'],
    ]) {
      expect(await cliRefusal({ FRS_SECRET_KEY: otherKey }, ...args)).to.equal(
        `fleet-admin: FRS_SECRET_KEY holds master key ${other}, ${sealedWith}\n`,
      );
    }
    // A key file: named by its path and the setting.
    const file = path.join(dataDir, 'other.key');
    fs.writeFileSync(file, `${otherKey}\n`, { mode: 0o600 });
    expect(await cliRefusal({ FRS_SECRET_KEY: '', FRS_SECRET_KEY_FILE: file }, 'workspace', 'list')).to.equal(
      `fleet-admin: the key file ${file} (FRS_SECRET_KEY_FILE) holds master key ${other}, ${sealedWith}\n`,
    );
    fs.rmSync(file);
    // During a master-key rotation the recorded key may be the previous one, not any other.
    const newKey = crypto.randomBytes(32).toString('base64');
    expect(
      await cliRefusal({ FRS_SECRET_KEY: newKey, FRS_SECRET_KEY_PREVIOUS: otherKey }, 'workspace', 'list'),
    ).to.equal(
      `fleet-admin: FRS_SECRET_KEY with FRS_SECRET_KEY_PREVIOUS hold master keys ${keyIdOf(newKey)}, ${other}, ${sealedWith}\n`,
    );
    const rotating = await fleetAdminOn(url, ['workspace', 'list', '--json'], {
      FRS_SECRET_KEY: newKey,
      FRS_SECRET_KEY_PREVIOUS: testKey,
    });
    expect(rotating.stderr).to.equal('');
    expect(rotating.code).to.equal(0);

    // The service: `npm start`'s entry on this database, as a worker or the API alone.
    const service = (env: NodeJS.ProcessEnv) => {
      const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT_DIR, 'src', 'main.ts')], {
        cwd: ROOT_DIR,
        env: {
          ...process.env,
          DATABASE_URL: url,
          PORT: '0',
          HOST: '127.0.0.1',
          FRS_METRICS_PORT: '0',
          FRS_ADMIN_PORT: '0',
          LOG_LEVEL: 'warn',
          FRS_SECRET_KEY_PREVIOUS: '',
          FRS_DATA_DIR: dataDir,
          ...env,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const output = { stdout: '', stderr: '' };
      child.stdout.on('data', (chunk) => {
        output.stdout += chunk;
      });
      child.stderr.on('data', (chunk) => {
        output.stderr += chunk;
      });
      const exit = new Promise<number | null>((resolve) => child.on('exit', resolve));
      return { child, output, exit };
    };
    const refusedAtStart = async (env: NodeJS.ProcessEnv) => {
      const run = service(env);
      expect(await run.exit).to.equal(1);
      return run.output.stderr.split('\n').filter((line) => line.startsWith('fleet-rental: failed'));
    };
    expect(await refusedAtStart({ FRS_ROLE: 'worker', FRS_SECRET_KEY: otherKey })).to.deep.equal([
      `fleet-rental: failed to start: FRS_SECRET_KEY holds master key ${other}, ${sealedWith}`,
    ]);
    expect(await refusedAtStart({ FRS_ROLE: 'worker', FRS_SECRET_KEY: '' })).to.deep.equal([
      `fleet-rental: failed to start: the database holds signing secrets sealed with master key ${recorded} and this process has no master key: give it the key they were sealed with (${KEY_SETTINGS})`,
    ]);
    // The API process holds no master key at all: given one, whichever, it refuses at start, naming the variable.
    for (const key of [otherKey, testKey]) {
      expect(await refusedAtStart({ FRS_ROLE: 'api', FRS_SECRET_KEY: key })).to.deep.equal([
        'fleet-rental: failed to start: FRS_SECRET_KEY is set, but this process serves the API (FRS_ROLE=api), which holds no master key: unset it here and give it to the worker (FRS_ROLE=worker) only',
      ]);
    }
    // It signs its list cursors with a key derived from an API secret of its own (src/http/cursors.ts), the same in
    // every process: without one it refuses at start, naming the settings, and makes no key file.
    const [noKey] = await refusedAtStart({ FRS_ROLE: 'api', FRS_SECRET_KEY: '', FRS_API_SECRET: '' });
    expect(noKey).to.match(
      /^fleet-rental: failed to start: the API signs its list cursors with a key derived from its API secret, and there is no API secret: no FRS_API_SECRET and no key file .*api-secret.key; set FRS_API_SECRET, or FRS_API_SECRET_FILE to the key file \(make one with: openssl rand -base64 32; every API process needs the same\)$/,
    );
    expect(fs.readdirSync(dataDir), 'no key file').to.deep.equal([]);
  });
});
