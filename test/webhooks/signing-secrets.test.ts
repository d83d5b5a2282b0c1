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
import { loadKeyring, masterKeyFile, MasterKeyError, newSigningSecret } from '../../src/secrets.js';
import { InputError } from '../../src/workspaces.js';
import { publishEvent } from '../../src/webhooks/publish.js';
import { openSigningSecret, rotateSigningSecret } from '../../src/webhooks/signing-secrets.js';
import { bookingConfirmedData, dropTestWorkspaces, webhookWorkspace, type TestWorkspace } from './support.js';

const HOUR = 3_600_000;

const hmac = (secret: string, t: string, body: Buffer) => crypto.createHmac('sha256', secret).update(`${t}.`).update(body).digest('hex');

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
    await publishEvent(db, { workspaceId: ws.id, event: 'booking.confirmed', data: bookingConfirmedData(), source: 'publish' });
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
    expect(openSigningSecret(endpoint.id, { keyId: row.secret_key_id, sealed: row.secret_sealed })).to.equal(endpoint.secret);
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
    expect(() => openSigningSecret(b.id, { keyId: sealedA.secret_key_id, sealed: sealedA.secret_sealed })).to.throw(MasterKeyError, /failed authentication/);
    await db('webhook_endpoints').where({ id: a.id }).update({ is_active: false });
    await publishEvent(db, { workspaceId: ws.id, event: 'booking.confirmed', data: bookingConfirmedData(), source: 'publish' });
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
    const rotated = await rotateSigningSecret(db, endpoint.id, { now });
    expect(rotated.secret).to.match(/^whsec_[0-9A-Za-z]{40}$/).and.not.equal(endpoint.secret);
    expect(rotated.previousSecretExpiresAt).to.equal(new Date(now.getTime() + 24 * HOUR).toISOString());

    const during = await deliverOne();
    const { t, v1 } = signatureParts(during.signature);
    expect(during.signature).to.equal(`t=${t},v1=${v1[0]},v1=${v1[1]}`);
    expect(v1).to.deep.equal([hmac(rotated.secret, t, during.rawBody), hmac(endpoint.secret, t, during.rawBody)]);
    // A receiver on either secret accepts it.
    for (const secret of [rotated.secret, endpoint.secret]) expect(verifyIndependently(during.rawBody, during.signature, secret, Date.now() / 1000)).to.deep.equal({ ok: true });
    // The Standard Webhooks header carries the same two signatures, space-separated, the new one first.
    const standard = (secret: string) =>
      `v1,${crypto.createHmac('sha256', Buffer.from(secret.slice('whsec_'.length), 'base64')).update(`${during.deliveryId}.${t}.`).update(during.rawBody).digest('base64')}`;
    expect(during.headers['webhook-timestamp']).to.equal(t);
    expect(during.headers['webhook-signature']).to.equal(`${standard(rotated.secret)} ${standard(endpoint.secret)}`);

    const again = await rotateSigningSecret(db, endpoint.id, { overlapHours: 0 });
    expect(again.previousSecretExpiresAt).to.equal(null);
    const after = await deliverOne();
    const parts = signatureParts(after.signature);
    expect(parts.v1).to.deep.equal([hmac(again.secret, parts.t, after.rawBody)]);
    expect(verifyIndependently(after.rawBody, after.signature, rotated.secret, Date.now() / 1000)).to.deep.equal({ ok: false, reason: 'signature_mismatch' });
  });

  it('after the overlap only the new secret signs', async () => {
    const endpoint = await ws.endpoint({ url: receiver.endpointUrl() });
    // Rotated 3 hours ago with a 2-hour overlap: it ended an hour ago.
    const rotated = await rotateSigningSecret(db, endpoint.id, { overlapHours: 2, now: new Date(Date.now() - 3 * HOUR) });
    const request = await deliverOne();
    const { t, v1 } = signatureParts(request.signature);
    expect(v1).to.deep.equal([hmac(rotated.secret, t, request.rawBody)]);
  });

  it('refuses a bad id, an unknown endpoint, an overlap outside 0 to 720 hours and a missing master key, changing nothing', async () => {
    const endpoint = await ws.endpoint({ url: receiver.endpointUrl() });
    const before = await db('webhook_endpoints').where({ id: endpoint.id }).first();
    expect((await expectRejection(rotateSigningSecret(db, 'nope'), InputError)).message).to.equal('--id must be a UUID, got "nope"');
    const unknown = crypto.randomUUID();
    expect((await expectRejection(rotateSigningSecret(db, unknown), InputError)).message).to.equal(`no webhook endpoint with id ${unknown}`);
    for (const hours of [-1, 721, 1.5]) {
      expect((await expectRejection(rotateSigningSecret(db, endpoint.id, { overlapHours: hours }), InputError)).message)
        .to.equal(`--overlap-hours must be a whole number of hours from 0 to 720, got ${hours}`);
    }
    expect(await db('webhook_endpoints').where({ id: endpoint.id }).first()).to.deep.equal(before);
    // A secret sealed under a master key this process lacks: no new secret is sealed beside it.
    await db('webhook_endpoints').where({ id: endpoint.id }).update({ secret_key_id: 'mk_0000000000000000' });
    expect((await expectRejection(rotateSigningSecret(db, endpoint.id), MasterKeyError)).message).to.match(/^a secret is sealed with master key mk_0000000000000000, which this process does not have: set FRS_SECRET_KEY/);
    expect(await db('webhook_endpoints').where({ id: endpoint.id }).first()).to.deep.equal({ ...before, secret_key_id: 'mk_0000000000000000' });
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
    expect(() => loadKeyring({ env: {}, dataDir, createIfMissing: false })).to.throw(MasterKeyError, /^there is no master key: no FRS_SECRET_KEY and no key file /);
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

  it('FRS_SECRET_KEY wins over the key file, and a malformed one is refused naming the variable', () => {
    const dataDir = tempDir();
    const key = crypto.randomBytes(32).toString('base64');
    expect(loadKeyring({ env: { FRS_SECRET_KEY: key }, dataDir }).source).to.deep.equal({ kind: 'env' });
    expect(fs.existsSync(masterKeyFile(dataDir))).to.equal(false);
    for (const bad of ['short', crypto.randomBytes(16).toString('base64'), crypto.randomBytes(33).toString('base64')]) {
      expect(() => loadKeyring({ env: { FRS_SECRET_KEY: bad }, dataDir })).to.throw(MasterKeyError, 'FRS_SECRET_KEY must be the base64 of 32 random bytes');
    }
    expect(() => loadKeyring({ env: { FRS_SECRET_KEY: key, FRS_SECRET_KEY_PREVIOUS: 'x' }, dataDir })).to.throw(MasterKeyError, 'FRS_SECRET_KEY_PREVIOUS must be');
  });
});

describe('fleet-admin secrets rotate-master-key and the migration that sealed stored secrets (a database of their own)', () => {
  let url: string;
  let admin: Knex;
  let own: Knex;
  let receiver: Receiver;
  const name = `fleet_secrets_${process.pid}`;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'frs-secrets-cli-'));

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
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  /** The real CLI on this database, with the master key in `env` (none: the key file under the temp data folder). */
  const cli = async (env: Record<string, string>, ...args: string[]): Promise<any> => {
    const run = await fleetAdminOn(url, [...args, '--json'], { FRS_DATA_DIR: dataDir, FRS_SECRET_KEY: '', FRS_SECRET_KEY_PREVIOUS: '', ...env });
    expect(run.stderr, `${args.join(' ')}: stderr`).to.equal('');
    expect(run.code).to.equal(0);
    return JSON.parse(run.stdout);
  };
  const storedKeyId = async (id: string) => (await own('webhook_endpoints').where({ id }).first('secret_key_id')).secret_key_id;
  const keyFileLines = () => fs.readFileSync(masterKeyFile(dataDir), 'utf8').trim().split('\n');
  /** Sends one event through `fleet-admin sweep` and checks its signature with `secret`. */
  const deliversSignedWith = async (env: Record<string, string>, slug: string, secret: string) => {
    receiver.reset();
    await cli(env, 'publish', '--workspace', slug, '--event', 'booking.confirmed', '--data', JSON.stringify(bookingConfirmedData()));
    expect(await cli(env, 'sweep', '--deliveries')).to.deep.include({ deliveries: { attempted: 1, accepted: 1, retrying: 0, failed: 0 } });
    expect(receiver.requests).to.have.length(1);
    const [request] = receiver.requests;
    expect(verifyIndependently(request.rawBody, request.signature, secret, Date.now() / 1000)).to.deep.equal({ ok: true });
  };

  it('the migration seals the secrets stored in plain text before it', async () => {
    const mine = '20261123000900_sealed_signing_secrets';
    const source = migrationSource();
    for (;;) {
      const [, pending] = await own.migrate.list({ migrationSource: source });
      expect(pending, 'the migration is still pending').not.to.be.empty;
      if (source.getMigrationName(pending[0]) === mine) break;
      await own.migrate.up({ migrationSource: source });
    }
    const secret = newSigningSecret();
    const [workspace] = await own('workspaces').insert({ slug: 'legacy' }).returning('id');
    const [endpoint] = await own('webhook_endpoints')
      .insert({ workspace_id: workspace.id, name: 'old', url: `${receiver.url}/old`, secret })
      .returning('id');
    const applied = await cli({}, 'migrate');
    expect(applied.applied[0]).to.equal(mine);
    const row = await own('webhook_endpoints').where({ id: endpoint.id }).first();
    expect(row).not.to.have.property('secret');
    expect(row.secret_sealed.includes(Buffer.from(secret))).to.equal(false);
    // Not in the table's files either (old row versions), where a superuser can look.
    const [{ rolsuper }] = (await own.raw('SELECT rolsuper FROM pg_roles WHERE rolname = current_user')).rows;
    if (rolsuper) {
      await own.raw('CHECKPOINT');
      const [{ bytes }] = (await own.raw(`SELECT pg_read_binary_file(pg_relation_filepath('webhook_endpoints')) AS bytes`)).rows;
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

    const rotated = await cli({}, 'secrets', 'rotate-master-key');
    expect(rotated).to.deep.equal({ keyId: rotated.keyId, source: 'file', resealed: 2 });
    expect(rotated.keyId).to.match(/^mk_[0-9a-f]{16}$/).and.not.equal(oldId);
    const lines = keyFileLines();
    expect(lines).to.have.length(1);
    expect(lines[0]).not.to.equal(oldKey);
    expect(fs.statSync(masterKeyFile(dataDir)).mode & 0o777).to.equal(0o600);
    expect(await storedKeyId(created.id)).to.equal(rotated.keyId);
    await deliversSignedWith({}, 'rotation', created.secret);

    // Moving to FRS_SECRET_KEY: the new key there, the key file's key as the previous one.
    const envKey = crypto.randomBytes(32).toString('base64');
    const moving = { FRS_SECRET_KEY: envKey, FRS_SECRET_KEY_PREVIOUS: lines[0] };
    const moved = await cli(moving, 'secrets', 'rotate-master-key');
    expect(moved).to.deep.equal({ keyId: loadKeyring({ env: { FRS_SECRET_KEY: envKey } }).current.id, source: 'env', resealed: 2 });
    expect(await storedKeyId(created.id)).to.equal(moved.keyId);
    // Nothing left to re-seal; the old key is no longer needed.
    expect(await cli({ FRS_SECRET_KEY: envKey }, 'secrets', 'rotate-master-key')).to.deep.equal({ ...moved, resealed: 0 });
    await deliversSignedWith({ FRS_SECRET_KEY: envKey }, 'rotation', created.secret);

    // fleet-admin endpoint rotate-secret: the new secret shown once, and with --overlap-hours 0 the only one signing.
    const rotatedSecret = await cli({ FRS_SECRET_KEY: envKey }, 'endpoint', 'rotate-secret', '--id', created.id, '--overlap-hours', '0');
    expect(rotatedSecret).to.have.all.keys('id', 'secret', 'previousSecretExpiresAt');
    expect(rotatedSecret).to.include({ id: created.id, previousSecretExpiresAt: null });
    expect(rotatedSecret.secret).to.match(/^whsec_[0-9A-Za-z]{40}$/).and.not.equal(created.secret);
    await deliversSignedWith({ FRS_SECRET_KEY: envKey }, 'rotation', rotatedSecret.secret);
    expect(verifyIndependently(receiver.requests[0].rawBody, receiver.requests[0].signature, created.secret, Date.now() / 1000)).to.deep.equal({ ok: false, reason: 'signature_mismatch' });
  });
});
