import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { createAdminToken } from '../../src/core/admin-tokens.js';
import { recordEvent } from '../../src/webhooks/record-event.js';
import { openSigningSecret } from '../../src/webhooks/sealing.js';
import { dropDatabase, testDatabase } from '../support/database.js';
import { createKnex } from '../../src/db/database.js';
import { publicKeyText } from '../../src/webhooks/signing.js';
import { operatorWith } from '../support/actors.js';
import { startReceiver, verifyIndependently, type Receiver, type ReceivedRequest } from '../support/receiver.js';
import { startAdminApi, type TestAdminApi } from '../admin/support.js';
import { fleetAdminOn } from '../support/cli.js';
import { bookingConfirmedData, dropTestWorkspaces, webhookWorkspace, type TestWorkspace } from './support.js';

// Asymmetric signatures (issue 34 point 3): endpoints made or switched to ed25519 through the admin API, real
// deliveries through the real dispatcher (as the worker's database role) to a real receiver, each `v1a` checked by an
// independent ed25519 implementation (Node's crypto.verify) with the public key decoded from the `whpk_` text the
// admin API answered; during a switch's overlap `v1` and service-signature too, and during a key rotation's overlap
// both keys' `v1a`. No answer, log line or audit entry carries a private key.

const OPERATOR = { actor: { type: 'cli' as const, name: os.userInfo().username } };

/** The raw 32-byte key of a `whpk_` text, as a receiver decodes it (not the service's code). */
function publicKeyOf(text: string): crypto.KeyObject {
  expect(text).to.match(/^whpk_[A-Za-z0-9+/]{43}=$/);
  const raw = Buffer.from(text.slice('whpk_'.length), 'base64');
  return crypto.createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' });
}

/** The `v1a` entries of a request's webhook-signature, and whether each verifies with `publicKey`. */
function v1aVerdicts(request: ReceivedRequest, publicKey: string): boolean[] {
  const headers = request.headers as Record<string, string>;
  const signed = Buffer.concat([
    Buffer.from(`${headers['webhook-id']}.${headers['webhook-timestamp']}.`),
    request.rawBody,
  ]);
  return headers['webhook-signature']
    .split(' ')
    .filter((entry) => entry.startsWith('v1a,'))
    .map((entry) => crypto.verify(null, signed, publicKeyOf(publicKey), Buffer.from(entry.slice(4), 'base64')));
}

const versions = (request: ReceivedRequest) =>
  (request.headers['webhook-signature'] as string).split(' ').map((entry) => entry.split(',')[0]);

/** How many secrets signed a request's service-signature (its `v1=` values). */
const signatureCount = (request: ReceivedRequest) =>
  (request.signature ?? '').split(',').filter((part) => part.startsWith('v1=')).length;

describe('webhooks: ed25519 signatures (v1a)', () => {
  let db: Knex;
  let admin: TestAdminApi;
  let token: string;
  let receiver: Receiver;

  before(async () => {
    ({ db } = await testDatabase());
    token = (await createAdminToken(db, operatorWith(OPERATOR), { name: 'ed25519 tests', workspaceId: 'every' })).token;
    admin = await startAdminApi();
    receiver = await startReceiver(() => ({ status: 204 }));
  });
  after(async () => {
    await admin?.close();
    await receiver?.close();
    await dropTestWorkspaces(db);
  });

  const base = (workspaceId: string) => `/admin/v1/workspaces/${workspaceId}/endpoints`;
  const post = (path: string, body?: unknown) => admin.request('POST', path, { token, body });

  /** Publishes one event and sends it; returns the one request the endpoint's path received. */
  async function deliverOne(ws: TestWorkspace, url: string): Promise<ReceivedRequest> {
    receiver.reset();
    await recordEvent(db, {
      workspaceId: ws.id,
      event: 'booking.confirmed',
      data: bookingConfirmedData(),
      source: 'publish',
    });
    expect(await ws.dispatcher().runOnce(new Date(Date.now() + 1000))).to.deep.include({ attempted: 1, accepted: 1 });
    const requests = receiver.requests.filter((r) => r.path === new URL(url).pathname);
    expect(requests).to.have.length(1);
    return requests[0];
  }

  it('an endpoint made with ed25519: its public key shown whenever asked, its deliveries signed v1a only', async () => {
    const ws = await webhookWorkspace(db);
    const url = receiver.endpointUrl();
    const made = await post(base(ws.id), { url, signatureScheme: 'ed25519' });
    expect(made.status).to.equal(201);
    // no secret handed out: the public key is all the receiver gets
    expect(made.body).to.include({ signatureScheme: 'ed25519', previousSchemeExpiresAt: null, secret: null });
    expect(made.body.publicKey).to.match(/^whpk_/);
    const shown = await admin.request('GET', `${base(ws.id)}/${made.body.id}`, { token });
    expect(shown.body.publicKey).to.equal(made.body.publicKey);
    const listed = await admin.request('GET', base(ws.id), { token });
    expect(listed.body.rows.map((r: { publicKey: string }) => r.publicKey)).to.deep.equal([made.body.publicKey]);

    const request = await deliverOne(ws, url);
    expect(versions(request)).to.deep.equal(['v1a']);
    expect(v1aVerdicts(request, made.body.publicKey)).to.deep.equal([true]);
    // no shared-secret signature at all: a receiver holds no secret
    expect(request.headers).not.to.have.property('service-signature');
    // another key does not verify it (the check is real)
    const other = crypto.generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' }).x!;
    expect(v1aVerdicts(request, `whpk_${Buffer.from(other, 'base64url').toString('base64')}`)).to.deep.equal([false]);
    // the private key is stored sealed: no column holds it in plain text
    const row = await db('webhook_endpoints').where({ id: made.body.id }).first();
    expect(JSON.stringify(row)).not.to.include('whsk_');
    expect(row.signing_private_key_sealed).to.be.an.instanceOf(Buffer);
    // the row's sealed secret (the schema's columns), never shown, signs nothing: the one signature is the key's
    const unshown = openSigningSecret(made.body.id, { keyId: row.secret_key_id, sealed: row.secret_sealed });
    expect(unshown).to.match(/^whsec_/);
    expect(verifyIndependently(request.rawBody, request.signature, unshown, Date.now() / 1000).ok).to.equal(false);
  });

  it('a switch from hmac-sha256: v1, service-signature and v1a during the overlap, v1a only after it', async () => {
    const ws = await webhookWorkspace(db);
    const url = receiver.endpointUrl();
    const made = await post(base(ws.id), { url });
    expect(made.body).to.include({ signatureScheme: 'hmac-sha256', publicKey: null });
    receiver.setSecret(url, made.body.secret);
    const switched = await post(`${base(ws.id)}/${made.body.id}/signature-scheme`, {
      scheme: 'ed25519',
      overlapHours: 2,
    });
    expect(switched.status).to.equal(200);
    expect(switched.body).to.include({ signatureScheme: 'ed25519' });
    const overlapEnd = new Date(switched.body.previousSchemeExpiresAt).getTime();
    expect(overlapEnd - Date.now()).to.be.within(2 * 3_600_000 - 60_000, 2 * 3_600_000);

    const during = await deliverOne(ws, url);
    expect(versions(during)).to.deep.equal(['v1', 'v1a']);
    expect(v1aVerdicts(during, switched.body.publicKey)).to.deep.equal([true]);
    // the receivers of before keep verifying: service-signature, and v1 with a Standard Webhooks library
    expect(during.verified).to.deep.equal({ ok: true });
    const headers = during.headers as Record<string, string>;
    const standard = {
      'webhook-id': headers['webhook-id'],
      'webhook-timestamp': headers['webhook-timestamp'],
      'webhook-signature': headers['webhook-signature'],
    };
    expect(new StandardWebhook(made.body.secret).verify(during.rawBody.toString(), standard)).to.deep.equal(
      JSON.parse(during.rawBody.toString()),
    );

    // the overlap over (moved into the past): v1a only
    await db('webhook_endpoints')
      .where({ id: made.body.id })
      .update({ previous_scheme_expires_at: new Date(Date.now() - 1000) });
    const after = await deliverOne(ws, url);
    expect(versions(after)).to.deep.equal(['v1a']);
    expect(after.headers).not.to.have.property('service-signature');
    expect(v1aVerdicts(after, switched.body.publicKey)).to.deep.equal([true]);

    // the same scheme again changes nothing (and shows no secret)
    const again = await post(`${base(ws.id)}/${made.body.id}/signature-scheme`, { scheme: 'ed25519' });
    expect(again.body).to.include({ publicKey: switched.body.publicKey, secret: null });
    // back to hmac-sha256 without an overlap: a fresh secret, shown this once, alone signs; the one of before, whose
    // overlap is over, does not come back
    const back = await post(`${base(ws.id)}/${made.body.id}/signature-scheme`, {
      scheme: 'hmac-sha256',
      overlapHours: 0,
    });
    expect(back.body).to.include({ signatureScheme: 'hmac-sha256', publicKey: null, previousSchemeExpiresAt: null });
    expect(back.body.secret)
      .to.match(/^whsec_[0-9A-Za-z]{40}$/)
      .and.not.equal(made.body.secret);
    const hmac = await deliverOne(ws, url);
    expect(versions(hmac)).to.deep.equal(['v1']);
    expect(verifyIndependently(hmac.rawBody, hmac.signature, back.body.secret, Date.now() / 1000)).to.deep.equal({
      ok: true,
    });
    expect(verifyIndependently(hmac.rawBody, hmac.signature, made.body.secret, Date.now() / 1000).ok).to.equal(false);
    const shown = await admin.request('GET', `${base(ws.id)}/${made.body.id}`, { token });
    expect(shown.body).not.to.have.property('secret');
  });

  it('an endpoint made with ed25519 switched to hmac-sha256: a fresh secret shown once (a repeat with its Idempotency-Key the same), the unshown one never signs', async () => {
    const ws = await webhookWorkspace(db);
    const url = receiver.endpointUrl();
    const made = await post(base(ws.id), { url, signatureScheme: 'ed25519' });
    expect(made.body.secret).to.equal(null);
    const before = await db('webhook_endpoints').where({ id: made.body.id }).first('secret_key_id', 'secret_sealed');
    const unshown = openSigningSecret(made.body.id, { keyId: before.secret_key_id, sealed: before.secret_sealed });

    const path = `${base(ws.id)}/${made.body.id}/signature-scheme`;
    const once = { 'Idempotency-Key': crypto.randomUUID() };
    const body = { scheme: 'hmac-sha256', overlapHours: 2 };
    const switched = await admin.request('POST', path, { token, body, headers: once });
    expect(switched.status).to.equal(200);
    expect(switched.body).to.include({ signatureScheme: 'hmac-sha256', publicKey: null });
    expect(switched.body.secret)
      .to.match(/^whsec_[0-9A-Za-z]{40}$/)
      .and.not.equal(unshown);
    // the same request again: the same answer, the same secret, and nothing switched or minted again
    const repeat = await admin.request('POST', path, { token, body, headers: once });
    expect([repeat.status, repeat.body]).to.deep.equal([200, switched.body]);
    const row = await db('webhook_endpoints')
      .where({ id: made.body.id })
      .first('secret_key_id', 'secret_sealed', 'previous_secret_sealed');
    expect(openSigningSecret(made.body.id, { keyId: row.secret_key_id, sealed: row.secret_sealed })).to.equal(
      switched.body.secret,
    );
    // the unshown secret is dropped, not kept as a previous one
    expect(row.previous_secret_sealed).to.equal(null);
    // the answer kept for the repeat is sealed: the secret is nowhere in plain text
    const kept = await db('admin_idempotency_keys')
      .where({ key: crypto.createHash('sha256').update(once['Idempotency-Key']).digest('hex') })
      .first('response_sealed');
    expect(kept.response_sealed.toString('latin1')).not.to.include(switched.body.secret.slice(6));
    // another request with the key: 409
    const reused = await admin.request('POST', path, { token, body: { scheme: 'ed25519' }, headers: once });
    expect([reused.status, reused.body.error.code]).to.deep.equal([409, 'idempotency_key_reused']);

    // during the overlap: v1 with the new secret (one signature only: the unshown secret signs nothing), and v1a
    const during = await deliverOne(ws, url);
    expect(versions(during)).to.deep.equal(['v1', 'v1a']);
    expect(v1aVerdicts(during, made.body.publicKey)).to.deep.equal([true]);
    const now = Date.now() / 1000;
    expect(verifyIndependently(during.rawBody, during.signature, switched.body.secret, now)).to.deep.equal({
      ok: true,
    });
    expect(verifyIndependently(during.rawBody, during.signature, unshown, now).ok).to.equal(false);
    expect(signatureCount(during)).to.equal(1);

    // back to ed25519 (its answer: a new public key, no secret), with its own Idempotency-Key repeated
    const toEd = { 'Idempotency-Key': crypto.randomUUID() };
    const edBody = { scheme: 'ed25519', overlapHours: 0 };
    const ed = await admin.request('POST', path, { token, body: edBody, headers: toEd });
    expect(ed.body).to.include({ signatureScheme: 'ed25519', secret: null, previousSchemeExpiresAt: null });
    expect(ed.body.publicKey)
      .to.match(/^whpk_/)
      .and.not.equal(made.body.publicKey);
    expect((await admin.request('POST', path, { token, body: edBody, headers: toEd })).body).to.deep.equal(ed.body);
    expect((await admin.request('GET', `${base(ws.id)}/${made.body.id}`, { token })).body.publicKey).to.equal(
      ed.body.publicKey,
    );

    // audited once per switch, the schemes and overlaps only: no secret, no key
    const entries = await db('audit_entries')
      .where({ target_id: made.body.id, action: 'endpoint.switch_signature_scheme' })
      .orderBy('at')
      .pluck('changes');
    expect(entries).to.deep.equal([
      {
        signatureScheme: { from: 'ed25519', to: 'hmac-sha256' },
        overlapHours: 2,
        previousSchemeExpiresAt: switched.body.previousSchemeExpiresAt,
      },
      { signatureScheme: { from: 'hmac-sha256', to: 'ed25519' }, overlapHours: 0, previousSchemeExpiresAt: null },
    ]);
    const trail = JSON.stringify(await db('audit_entries').where({ target_id: made.body.id }).select());
    for (const secret of [switched.body.secret, unshown]) expect(trail).not.to.include(secret.slice(6));
    expect(trail).not.to.include('whpk_');
    expect(JSON.stringify(admin.logs)).not.to.include(switched.body.secret.slice(6));
  });

  it('a key rotation: both keys sign v1a during the overlap (the new first), the new alone after', async () => {
    const ws = await webhookWorkspace(db);
    const url = receiver.endpointUrl();
    const made = await post(base(ws.id), { url, signatureScheme: 'ed25519' });
    const rotated = await post(`${base(ws.id)}/${made.body.id}/rotate-signing-key`, { overlapHours: 3 });
    expect(rotated.status).to.equal(200);
    expect(rotated.body).to.have.all.keys('id', 'publicKey', 'previousKeyExpiresAt');
    expect(rotated.body.publicKey).not.to.equal(made.body.publicKey);
    const shown = await admin.request('GET', `${base(ws.id)}/${made.body.id}`, { token });
    expect(shown.body.publicKey).to.equal(rotated.body.publicKey);

    const during = await deliverOne(ws, url);
    expect(versions(during)).to.deep.equal(['v1a', 'v1a']);
    expect(v1aVerdicts(during, rotated.body.publicKey)).to.deep.equal([true, false]);
    expect(v1aVerdicts(during, made.body.publicKey)).to.deep.equal([false, true]);

    const ended = await post(`${base(ws.id)}/${made.body.id}/rotate-signing-key`, { overlapHours: 0 });
    expect(ended.body.previousKeyExpiresAt).to.equal(null);
    const after = await deliverOne(ws, url);
    expect(v1aVerdicts(after, ended.body.publicKey)).to.deep.equal([true]);
  });

  it('bad input is a documented 400 or 409 and changes nothing; no answer, log line or audit entry holds a key', async () => {
    const ws = await webhookWorkspace(db);
    const url = receiver.endpointUrl();
    const made = await post(base(ws.id), { url });
    const path = `${base(ws.id)}/${made.body.id}`;
    const badScheme = await post(`${path}/signature-scheme`, { scheme: 'rsa' });
    expect(badScheme.status).to.equal(400);
    const badOverlap = await post(`${path}/signature-scheme`, { scheme: 'ed25519', overlapHours: 721 });
    expect(badOverlap.status).to.equal(400);
    const notEd = await post(`${path}/rotate-signing-key`, {});
    expect(notEd.status).to.equal(409);
    expect(notEd.body.error.reason).to.equal('signatureScheme');
    const unchanged = await admin.request('GET', path, { token });
    expect(unchanged.body).to.include({ signatureScheme: 'hmac-sha256', publicKey: null });

    const switched = await post(`${path}/signature-scheme`, { scheme: 'ed25519', overlapHours: 1 });
    await post(`${path}/rotate-signing-key`, {});
    // an ed25519 endpoint's secret signs nothing: rotating it (which would hand one out) is refused, nothing changed
    const sealedBefore = await db('webhook_endpoints').where({ id: made.body.id }).first('secret_sealed');
    const noSecret = await post(`${path}/rotate-secret`, { overlapHours: 0 });
    expect(noSecret.status).to.equal(409);
    expect(noSecret.body.error.reason).to.equal('signatureScheme');
    expect(noSecret.body).not.to.have.nested.property('secret');
    expect(await db('webhook_endpoints').where({ id: made.body.id }).first('secret_sealed')).to.deep.equal(
      sealedBefore,
    );
    const entries = await db('audit_entries')
      .where({ target_id: made.body.id })
      .orderBy('id')
      .select('action', 'changes');
    expect(entries.map((e) => e.action)).to.have.members([
      'endpoint.create',
      'endpoint.switch_signature_scheme',
      'endpoint.rotate_signing_key',
    ]);
    const switchEntry = entries.find((e) => e.action === 'endpoint.switch_signature_scheme')!;
    expect(switchEntry.changes).to.deep.include({
      signatureScheme: { from: 'hmac-sha256', to: 'ed25519' },
      overlapHours: 1,
    });
    const recorded = JSON.stringify(entries);
    expect(recorded).not.to.include('whsk_');
    expect(recorded).not.to.include('whpk_');
    expect(recorded).not.to.include(switched.body.publicKey.slice(5));
    expect(JSON.stringify(admin.logs)).not.to.include('whsk_');
  });

  it('the CLI: create with ed25519, show, switch and rotate; the public key shown, never a private key', async () => {
    const ws = await webhookWorkspace(db);
    const { url: databaseUrl } = await testDatabase();
    const cli = async (...args: string[]) => {
      const run = await fleetAdminOn(databaseUrl, [...args, '--json']);
      expect(run.stderr, args.join(' ')).to.equal('');
      expect(run.stdout).not.to.include('whsk_');
      return JSON.parse(run.stdout);
    };
    const url = receiver.endpointUrl();
    const made = await cli('endpoint', 'create', '--workspace', ws.slug, '--url', url, '--signature-scheme', 'ed25519');
    expect(made).to.include({ signatureScheme: 'ed25519', secret: null });
    expect(made.publicKey).to.match(/^whpk_/);
    // in words: the public key, and that no secret is handed out (another workspace's: this one's gets one delivery)
    const said = await fleetAdminOn(databaseUrl, [
      'endpoint',
      'create',
      '--workspace',
      (await webhookWorkspace(db)).slug,
      '--url',
      receiver.endpointUrl(),
      '--signature-scheme',
      'ed25519',
    ]);
    expect(said.stderr).to.equal('');
    expect(said.stdout).to.match(
      /; signed with ed25519 \(v1a\), no signing secret: receivers verify with the public key\nwhpk_[A-Za-z0-9+/]{43}=\n$/,
    );
    expect(said.stdout).not.to.include('whsec_');
    expect((await cli('endpoint', 'show', '--id', made.id)).publicKey).to.equal(made.publicKey);
    const rotated = await cli('endpoint', 'rotate-signing-key', '--id', made.id, '--overlap-hours', '0');
    expect(rotated).to.include({ id: made.id, previousKeyExpiresAt: null });
    const request = await deliverOne(ws, url);
    expect(v1aVerdicts(request, rotated.publicKey)).to.deep.equal([true]);
    const back = await cli('endpoint', 'switch-signature-scheme', '--id', made.id, '--scheme', 'hmac-sha256');
    expect(back).to.include({ signatureScheme: 'hmac-sha256', publicKey: null });
    expect(back.secret).to.match(/^whsec_[0-9A-Za-z]{40}$/);
    // during the overlap the key pair still signs beside the new secret
    const during = await deliverOne(ws, url);
    expect(versions(during)).to.deep.equal(['v1', 'v1a']);
    expect(v1aVerdicts(during, rotated.publicKey)).to.deep.equal([true]);
    expect(verifyIndependently(during.rawBody, during.signature, back.secret, Date.now() / 1000)).to.deep.equal({
      ok: true,
    });
    // in words, the new secret shown once; switching to ed25519 shows the public key and no secret
    const other = await cli('endpoint', 'create', '--workspace', ws.slug, '--url', receiver.endpointUrl());
    const toEd = await fleetAdminOn(databaseUrl, [
      'endpoint',
      'switch-signature-scheme',
      '--id',
      other.id,
      '--scheme',
      'ed25519',
    ]);
    expect(toEd.stdout).to.match(/signed with ed25519 \(public key whpk_[A-Za-z0-9+/]{43}=\)/);
    expect(toEd.stdout).not.to.include('whsec_');
    const toHmac = await fleetAdminOn(databaseUrl, [
      'endpoint',
      'switch-signature-scheme',
      '--id',
      other.id,
      '--scheme',
      'hmac-sha256',
    ]);
    expect(toHmac.stderr).to.equal('');
    expect(toHmac.stdout).to.match(/\nnew signing secret, shown only this once:\nwhsec_[0-9A-Za-z]{40}\n$/);
    const text = await fleetAdminOn(databaseUrl, ['endpoint', 'list', '--workspace', ws.slug]);
    expect(text.stdout).to.include('signed with hmac-sha256; the previous scheme signs too until');
  });
});

describe('webhooks: ed25519 private keys across a master-key rotation (a database of its own)', () => {
  let url: string;
  let own: Knex;
  let receiver: Receiver;
  const name = `fleet_ed25519_master_${process.pid}`;
  const dataDir = fs.mkdtempSync(`${os.tmpdir()}/frs-ed25519-master-`);
  const oldKey = crypto.randomBytes(32).toString('base64');
  const newKey = crypto.randomBytes(32).toString('base64');

  before(async () => {
    const admin = await testDatabase();
    await admin.db.raw('DROP DATABASE IF EXISTS ?? WITH (FORCE)', [name]);
    await admin.db.raw('CREATE DATABASE ??', [name]);
    url = admin.url.replace(/\/[^/?]+(\?|$)/, `/${name}$1`);
    own = createKnex(url, 2);
    receiver = await startReceiver(() => ({ status: 204 }));
  });
  after(async () => {
    await receiver?.close();
    await own?.destroy();
    await dropDatabase((await testDatabase()).url, name);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  /** The real CLI on this database, given only the master keys in `keys` (no key file: an empty data folder). */
  const cli = async (keys: { current: string; previous?: string }, ...args: string[]): Promise<any> => {
    const run = await fleetAdminOn(url, [...args, '--json'], {
      FRS_DATA_DIR: dataDir,
      FRS_SECRET_KEY: keys.current,
      FRS_SECRET_KEY_PREVIOUS: keys.previous ?? '',
    });
    expect(run.stderr, args.join(' ')).to.equal('');
    expect(run.code, args.join(' ')).to.equal(0);
    expect(run.stdout, args.join(' ')).not.to.match(/whsk_|whsec_/);
    return JSON.parse(run.stdout);
  };
  const keyColumns = (id: string) =>
    own('webhook_endpoints')
      .where({ id })
      .first(
        'signing_private_key_key_id',
        'signing_private_key_sealed',
        'previous_signing_public_key',
        'previous_signing_private_key_key_id',
        'previous_signing_private_key_sealed',
        'previous_signing_key_expires_at',
      );

  it('re-seals the current and previous private keys; a dispatcher holding only the new key signs v1a that verifies', async function () {
    this.timeout(180_000);
    const before = { current: oldKey };
    await cli(before, 'migrate');
    await cli(before, 'workspace', 'create', '--slug', 'ed25519-master');
    const endpoint = (route: string) =>
      cli(
        before,
        'endpoint',
        'create',
        '--workspace',
        'ed25519-master',
        '--url',
        `${receiver.url}/${route}`,
        '--signature-scheme',
        'ed25519',
      );
    const plain = await endpoint('plain');
    const rotating = await endpoint('rotating');
    // mid-rotation of its key pair: the previous pair signs beside the new one for 5 hours
    const rotated = await cli(before, 'endpoint', 'rotate-signing-key', '--id', rotating.id, '--overlap-hours', '5');
    const oldId = (await keyColumns(plain.id)).signing_private_key_key_id;
    const sealedBefore = { plain: await keyColumns(plain.id), rotating: await keyColumns(rotating.id) };
    expect(sealedBefore.rotating.previous_signing_private_key_key_id).to.equal(oldId);

    const moved = await cli({ current: newKey, previous: oldKey }, 'secrets', 'rotate-master-key');
    expect(moved).to.deep.equal({ keyId: moved.keyId, source: 'env', resealed: 2 });
    expect(moved.keyId).not.to.equal(oldId);
    for (const [id, was] of [
      [plain.id, sealedBefore.plain],
      [rotating.id, sealedBefore.rotating],
    ] as const) {
      const now = await keyColumns(id);
      expect(now.signing_private_key_key_id).to.equal(moved.keyId);
      expect(now.signing_private_key_sealed.equals(was.signing_private_key_sealed)).to.equal(false);
    }
    // the previous pair kept, sealed anew, its public key and overlap as they were
    const rotatingNow = await keyColumns(rotating.id);
    expect(rotatingNow.previous_signing_private_key_key_id).to.equal(moved.keyId);
    expect(
      rotatingNow.previous_signing_private_key_sealed.equals(sealedBefore.rotating.previous_signing_private_key_sealed),
    ).to.equal(false);
    expect(publicKeyText(rotatingNow.previous_signing_public_key)).to.equal(rotating.publicKey);
    expect(rotatingNow.previous_signing_key_expires_at.toISOString()).to.equal(rotated.previousKeyExpiresAt);
    expect(
      await own('webhook_endpoints').where({ id: plain.id }).first('previous_signing_private_key_sealed'),
    ).to.deep.equal({
      previous_signing_private_key_sealed: null,
    });
    // audited: how many, never a key
    const [entry] = await own('audit_entries')
      .where({ action: 'master_key.rotate', target_id: moved.keyId })
      .select('changes');
    expect(entry.changes).to.deep.equal({ resealed: 2, resealedPrivateKeys: 2 });

    // A dispatcher given only the new key (the old one forgotten) sends both endpoints' deliveries.
    const after = { current: newKey };
    await cli(
      after,
      'publish',
      '--workspace',
      'ed25519-master',
      '--event',
      'booking.confirmed',
      '--data',
      JSON.stringify(bookingConfirmedData()),
    );
    expect(await cli(after, 'sweep', '--deliveries')).to.deep.include({
      deliveries: { attempted: 2, accepted: 2, retrying: 0, failed: 0 },
    });
    const to = (route: string) => {
      const requests = receiver.requests.filter((request) => request.path === `/${route}`);
      expect(requests, route).to.have.length(1);
      return requests[0];
    };
    expect(versions(to('plain'))).to.deep.equal(['v1a']);
    expect(v1aVerdicts(to('plain'), plain.publicKey)).to.deep.equal([true]);
    // both pairs still sign during the rotation's overlap, the new key's first
    expect(versions(to('rotating'))).to.deep.equal(['v1a', 'v1a']);
    expect(v1aVerdicts(to('rotating'), rotated.publicKey)).to.deep.equal([true, false]);
    expect(v1aVerdicts(to('rotating'), rotating.publicKey)).to.deep.equal([false, true]);
  });
});
