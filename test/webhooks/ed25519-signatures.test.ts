import crypto from 'node:crypto';
import os from 'node:os';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { createAdminToken } from '../../src/core/admin-tokens.js';
import { recordEvent } from '../../src/webhooks/record-event.js';
import { testDatabase } from '../support/database.js';
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
    expect(made.body).to.include({ signatureScheme: 'ed25519', previousSchemeExpiresAt: null });
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

    // the same scheme again changes nothing; back to hmac-sha256 without an overlap: the secret alone signs again
    const again = await post(`${base(ws.id)}/${made.body.id}/signature-scheme`, { scheme: 'ed25519' });
    expect(again.body.publicKey).to.equal(switched.body.publicKey);
    const back = await post(`${base(ws.id)}/${made.body.id}/signature-scheme`, {
      scheme: 'hmac-sha256',
      overlapHours: 0,
    });
    expect(back.body).to.include({ signatureScheme: 'hmac-sha256', publicKey: null, previousSchemeExpiresAt: null });
    const hmac = await deliverOne(ws, url);
    expect(versions(hmac)).to.deep.equal(['v1']);
    expect(verifyIndependently(hmac.rawBody, hmac.signature, made.body.secret, Date.now() / 1000)).to.deep.equal({
      ok: true,
    });
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
    expect(made).to.include({ signatureScheme: 'ed25519' });
    expect(made.publicKey).to.match(/^whpk_/);
    expect((await cli('endpoint', 'show', '--id', made.id)).publicKey).to.equal(made.publicKey);
    const rotated = await cli('endpoint', 'rotate-signing-key', '--id', made.id, '--overlap-hours', '0');
    expect(rotated).to.include({ id: made.id, previousKeyExpiresAt: null });
    const request = await deliverOne(ws, url);
    expect(v1aVerdicts(request, rotated.publicKey)).to.deep.equal([true]);
    const back = await cli('endpoint', 'switch-signature-scheme', '--id', made.id, '--scheme', 'hmac-sha256');
    expect(back).to.include({ signatureScheme: 'hmac-sha256', publicKey: null });
    // during the overlap the key pair still signs beside the secret
    const during = await deliverOne(ws, url);
    expect(versions(during)).to.deep.equal(['v1', 'v1a']);
    expect(v1aVerdicts(during, rotated.publicKey)).to.deep.equal([true]);
    const text = await fleetAdminOn(databaseUrl, ['endpoint', 'list', '--workspace', ws.slug]);
    expect(text.stdout).to.include('signed with hmac-sha256; the previous scheme signs too until');
  });
});
