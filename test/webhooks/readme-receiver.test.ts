import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { once } from 'node:events';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { ROOT_DIR, processConfig } from '../../src/config.js';
import { createEndpoint } from '../../src/core/webhooks/endpoints.js';
import { standardWebhooksHeaders } from '../../src/webhooks/signing.js';
import { recordEvent } from '../../src/webhooks/record-event.js';
import { testDatabase } from '../support/database.js';
import { operator } from '../support/actors.js';
import { bookingConfirmedData, dropTestWorkspaces, webhookWorkspace } from './support.js';

// The receiver example of the receivers' guide (docs/webhooks.md) is runnable as written: extracted, started as
// processes of its own (one holding a secret, one a public key), and fed hand-signed and real deliveries.
describe("the receivers' guide: its example receiver (docs/webhooks.md)", () => {
  const secret = 'whsec_ReadmeReceiverSecret0123456789abcdef';
  const started: ChildProcess[] = [];
  let file: string;
  let db: Knex;

  interface Example {
    url: string;
    /** What it printed so far. */
    output(): string;
  }

  async function startExample(env: Record<string, string>): Promise<Example> {
    // PORT=0: the system picks a free port, which the example prints.
    const child = spawn(process.execPath, [file], { env: { ...process.env, PORT: '0', ...env } });
    started.push(child);
    let output = '';
    child.stdout!.on('data', (chunk) => {
      output += chunk;
    });
    while (!/listening on port \d+/.test(output)) await once(child.stdout!, 'data');
    return { url: `http://127.0.0.1:${output.match(/listening on port (\d+)/)![1]}/hooks`, output: () => output };
  }

  before(async () => {
    ({ db } = await testDatabase());
    const guide = fs.readFileSync(path.join(ROOT_DIR, 'docs', 'webhooks.md'), 'utf8');
    const code = guide.match(/```js\n(\/\/ receiver\.mjs[\s\S]*?)```/)![1];
    file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'readme-receiver-')), 'receiver.mjs');
    fs.writeFileSync(file, code);
  });
  after(async () => {
    for (const child of started) child.kill();
    await dropTestWorkspaces(db);
  });

  const post = (url: string, body: string, headers: Record<string, string>) =>
    fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });

  it('verifies v1 with the secret: a signed delivery accepted once, its repeat ignored, a tampered, foreign or stale one refused', async () => {
    const example = await startExample({ SIGNING_SECRET: secret });
    const id = '3f1c9a52-7d4e-4b8a-9c21-6e5f0d2b8a47';
    const body = JSON.stringify({
      id,
      event: 'webhook.test',
      createdAt: '2026-11-22T08:30:00.000Z',
      data: { endpointId: '8d6f2c1e-4a3b-4c5d-8e9f-0a1b2c3d4e5f', message: 'hi' },
    });
    const now = () => Math.floor(Date.now() / 1000);
    const signed = (key: string | string[], at = now(), bytes = body) => standardWebhooksHeaders(key, id, bytes, at);
    expect((await post(example.url, body, signed(secret))).status).to.equal(204);
    expect((await post(example.url, body, signed(secret))).status).to.equal(204);
    expect(example.output().match(/webhook\.test 3f1c9a52/g)).to.have.length(1);
    // a rotation's overlap: two signatures, the old secret's second; one valid is enough
    expect(
      (await post(example.url, body, signed(['whsec_NewerSecret0123456789abcdefghijklmn', secret]))).status,
    ).to.equal(204);
    const tampered = body.replace('hi', 'ho');
    expect((await post(example.url, tampered, signed(secret))).status).to.equal(400);
    expect((await post(example.url, body, signed('whsec_AnotherSecret0123456789abcdefghijk'))).status).to.equal(400);
    expect((await post(example.url, body, signed(secret, now() - 301))).status).to.equal(400);
    expect((await post(example.url, body, { ...signed(secret), 'webhook-id': 'another' })).status).to.equal(400);
    const { 'webhook-signature': _, ...unsigned } = signed(secret);
    expect((await post(example.url, body, unsigned)).status).to.equal(400);
  });

  it('takes real deliveries: v1 from an hmac-sha256 endpoint, v1a from an ed25519 one, whose receiver refuses v1', async () => {
    const ws = await webhookWorkspace(db);
    const policy = processConfig().destinationPolicy;
    // each endpoint made first (at a placeholder URL), its receiver then started with what it was given, and the
    // endpoint pointed at it
    const keyed = await createEndpoint(db, operator, {
      workspaceId: ws.id,
      url: 'http://127.0.0.1:9/keyed',
      signatureScheme: 'ed25519',
      policy,
    });
    expect(keyed.secret).to.equal(null);
    const shared = await createEndpoint(db, operator, { workspaceId: ws.id, url: 'http://127.0.0.1:9/shared', policy });
    const byKey = await startExample({ PUBLIC_KEY: keyed.publicKey! });
    const bySecret = await startExample({ SIGNING_SECRET: shared.secret });
    await db('webhook_endpoints').where({ id: keyed.id }).update({ url: byKey.url });
    await db('webhook_endpoints').where({ id: shared.id }).update({ url: bySecret.url });

    await recordEvent(db, {
      workspaceId: ws.id,
      event: 'booking.confirmed',
      data: bookingConfirmedData(),
      source: 'publish',
    });
    expect(await ws.dispatcher().runOnce(new Date(Date.now() + 1000))).to.deep.include({ attempted: 2, accepted: 2 });
    const deliveries = await db('deliveries').where({ workspace_id: ws.id }).select('id', 'endpoint_id', 'status');
    for (const [example, endpointId] of [
      [byKey, keyed.id],
      [bySecret, shared.id],
    ] as const) {
      const sent = deliveries.find((d) => d.endpoint_id === endpointId)!;
      expect(sent.status).to.equal('accepted');
      expect(example.output()).to.include(`booking.confirmed ${sent.id}`);
    }

    // the public key's receiver refuses a delivery signed with a secret (v1): it verifies v1a alone
    const body = JSON.stringify({ id: 'x', event: 'webhook.test', createdAt: '2026-11-22T08:30:00.000Z', data: {} });
    const v1 = standardWebhooksHeaders(shared.secret, 'x', body, Math.floor(Date.now() / 1000));
    expect((await post(byKey.url, body, v1)).status).to.equal(400);
  });
});
