import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from '../support/database.js';
import { expectRejection } from '../support/assertions.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { InputError } from '../../src/errors.js';
import { recoverEndpoint, resendDelivery } from '../../src/core/webhooks/recovery.js';
import { showDelivery } from '../../src/core/webhooks/deliveries.js';
import { MAX_ATTEMPTS } from '../../src/webhooks/retry-schedule.js';
import {
  buildAttempt,
  buildDelivery,
  delivery,
  dropTestWorkspaces,
  webhookWorkspace,
  type TestWorkspace,
} from './support.js';
import { operator } from '../support/actors.js';

describe('webhooks: recovery (show, resend, recover a window)', () => {
  let db: Knex;
  let ws: TestWorkspace;
  let receiver: Receiver;
  const now = new Date('2026-11-22T12:00:00.000Z');

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

  it('resends a failed delivery with the same id and body; its attempt count continues', async () => {
    const url = receiver.endpointUrl();
    const endpoint = await ws.endpoint({ url });
    receiver.setSecret(url, endpoint.secret);
    const failed = await buildDelivery(db, ws, endpoint, {
      status: 'failed',
      createdAt: '2026-11-20T08:00:00.000Z',
      attempts: MAX_ATTEMPTS,
      lastStatusCode: 500,
      lastError: 'HTTP 500',
    });
    await buildAttempt(db, endpoint, failed.id, {
      number: MAX_ATTEMPTS,
      startedAt: '2026-11-21T08:00:00.000Z',
      durationMs: 12,
      statusCode: 500,
      errorKind: 'status',
      error: 'HTTP 500',
      responseBody: 'oops',
    });

    expect(await resendDelivery(db, operator, { deliveryId: failed.id, workspaceId: 'every', now })).to.deep.equal({
      id: failed.id,
      status: 'queued',
      attempts: MAX_ATTEMPTS,
    });
    expect(await delivery(db, failed.id)).to.include({
      status: 'queued',
      attempts: MAX_ATTEMPTS,
      body: failed.body,
      finished_at: null,
    });
    expect((await delivery(db, failed.id)).next_attempt_at.toISOString()).to.equal(now.toISOString());

    expect(await ws.dispatcher().runOnce(now)).to.include({ attempted: 1, accepted: 1 });
    expect(receiver.requests).to.have.length(1);
    expect(receiver.requests[0].rawBody.toString('utf8')).to.equal(failed.body);
    expect(receiver.requests[0].deliveryId).to.equal(failed.id);
    expect(receiver.requests[0].verified).to.deep.equal({ ok: true });
    const shown = await showDelivery(db, operator, { deliveryId: failed.id, workspaceId: 'every' });
    expect(shown).to.include({ status: 'accepted', attemptCount: MAX_ATTEMPTS + 1 });
    expect(shown.attempts.map((a) => [a.number, a.errorKind])).to.deep.equal([
      [MAX_ATTEMPTS, 'status'],
      [MAX_ATTEMPTS + 1, null],
    ]);
    expect(shown.attempts[0]).to.include({ error: 'HTTP 500', responseBody: 'oops' });
  });

  it('refuses what is not failed, an unknown id, and a switched-off endpoint (naming the switch), changing nothing', async () => {
    const endpoint = await ws.endpoint({ url: 'https://hooks.example.ae/fleet' });
    const accepted = await buildDelivery(db, ws, endpoint, {
      status: 'accepted',
      createdAt: '2026-11-20T08:00:00.000Z',
      attempts: 1,
    });
    const pending = await buildDelivery(db, ws, endpoint, {
      status: 'retrying',
      createdAt: '2026-11-20T08:00:00.000Z',
      attempts: 2,
    });
    expect(
      (
        await expectRejection(
          resendDelivery(db, operator, { deliveryId: accepted.id, workspaceId: 'every', now }),
          InputError,
        )
      ).message,
    ).to.equal(`delivery ${accepted.id} is accepted; only a failed delivery can be resent`);
    expect(
      (
        await expectRejection(
          resendDelivery(db, operator, { deliveryId: pending.id, workspaceId: 'every', now }),
          InputError,
        )
      ).message,
    ).to.match(/is retrying; only a failed delivery/);
    expect(
      (
        await expectRejection(
          resendDelivery(db, operator, {
            deliveryId: '8d6f2c1e-4a3b-4c5d-8e9f-0a1b2c3d4e5f',
            workspaceId: 'every',
            now,
          }),
          InputError,
        )
      ).message,
    ).to.match(/^no delivery with id/);
    expect(
      (
        await expectRejection(
          resendDelivery(db, operator, { deliveryId: 'nope', workspaceId: 'every', now }),
          InputError,
        )
      ).message,
    ).to.equal('id must be a UUID, got "nope"');

    const off = await ws.endpoint({ url: 'https://off.example/hook', active: false });
    const failed = await buildDelivery(db, ws, off, {
      status: 'failed',
      createdAt: '2026-11-20T08:00:00.000Z',
      attempts: 9,
    });
    const err = await expectRejection(
      resendDelivery(db, operator, { deliveryId: failed.id, workspaceId: 'every', now }),
      InputError,
    );
    expect(err.message).to.include(`fleet-admin endpoint enable --id ${off.id}`);
    expect(await delivery(db, failed.id)).to.include({ status: 'failed' });
    await expectRejection(
      recoverEndpoint(db, operator, {
        endpointId: off.id,
        since: new Date('2026-11-01T00:00:00Z'),
        now,
        workspaceId: 'every',
      }),
      InputError,
    );
    expect(await delivery(db, failed.id)).to.include({ status: 'failed' });
  });

  it('recovers every failed delivery created in [since, until), and only those', async () => {
    const endpoint = await ws.endpoint({ url: 'https://hooks.example.ae/fleet' });
    const other = await ws.endpoint({ url: 'https://other.example/hook' });
    const build = (status: 'failed' | 'accepted', createdAt: string, to = endpoint) =>
      buildDelivery(db, ws, to, { status, createdAt, attempts: 9 });
    const before = await build('failed', '2026-11-21T05:59:59.999Z');
    const atSince = await build('failed', '2026-11-21T06:00:00.000Z');
    const inside = await build('failed', '2026-11-21T09:00:00.000Z');
    const acceptedInside = await build('accepted', '2026-11-21T09:30:00.000Z');
    const atUntil = await build('failed', '2026-11-21T12:00:00.000Z');
    const otherEndpoint = await build('failed', '2026-11-21T09:00:00.000Z', other);

    const since = new Date('2026-11-21T06:00:00.000Z');
    const until = new Date('2026-11-21T12:00:00.000Z');
    expect(
      await recoverEndpoint(db, operator, { endpointId: endpoint.id, since, until, now, workspaceId: 'every' }),
    ).to.deep.equal({
      endpointId: endpoint.id,
      since: since.toISOString(),
      until: until.toISOString(),
      queued: 2,
    });
    const status = async (d: { id: string }) => (await delivery(db, d.id)).status;
    expect(
      await Promise.all([before, atSince, inside, acceptedInside, atUntil, otherEndpoint].map(status)),
    ).to.deep.equal(['failed', 'queued', 'queued', 'accepted', 'failed', 'failed']);
    // without --until: everything failed since then, up to now
    expect(
      (await recoverEndpoint(db, operator, { endpointId: endpoint.id, since, now, workspaceId: 'every' })).queued,
    ).to.equal(1);
    expect(await status(atUntil)).to.equal('queued');
    await expectRejection(
      recoverEndpoint(db, operator, { endpointId: endpoint.id, since: until, until: since, now, workspaceId: 'every' }),
      InputError,
    );
  });
});
