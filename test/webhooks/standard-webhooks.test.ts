import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { ROOT_DIR } from '../../src/config.js';
import { newSigningSecret } from '../../src/secrets.js';
import { signatureHeader, standardWebhooksHeaders, standardWebhooksKey } from '../../src/webhooks/signing.js';
import { recordEvent } from '../../src/webhooks/record-event.js';
import { queueTestDelivery } from '../../src/core/webhooks/test-delivery.js';
import { testDatabase } from '../support/database.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { bookingConfirmedData, dropTestWorkspaces, webhookWorkspace } from './support.js';

interface StandardVector {
  scheme: 'standard-webhooks';
  description: string;
  secret: string;
  id: string;
  body: string;
  timestamp: number;
  now: number;
  header: string;
  valid: boolean;
  reason?: string;
}

const vectors: StandardVector[] = JSON.parse(
  fs.readFileSync(path.join(ROOT_DIR, 'openapi', 'webhook-signature-vectors.json'), 'utf8'),
).filter((v: { scheme?: string }) => v.scheme === 'standard-webhooks');

/** Verifies with a library, its clock set to `now` (the libraries read Date.now()); returns whether it accepted. */
function acceptedBy(
  library: 'standardwebhooks' | 'svix',
  v: { secret: string; id: string; timestamp: number; header: string; body: string },
  now: number,
): boolean {
  const headers = { 'webhook-id': v.id, 'webhook-timestamp': String(v.timestamp), 'webhook-signature': v.header };
  const realNow = Date.now;
  Date.now = () => now * 1000;
  try {
    (library === 'svix' ? new SvixWebhook(v.secret) : new StandardWebhook(v.secret)).verify(v.body, headers);
    return true;
  } catch {
    return false;
  } finally {
    Date.now = realNow;
  }
}

describe('webhooks: Standard Webhooks headers', () => {
  it('the vectors cover valid signatures (rotation among them) and mismatches, times and ids', () => {
    expect(vectors.filter((v) => v.valid)).to.have.length.at.least(3);
    expect(vectors.some((v) => v.valid && v.header.split(' ').length === 2)).to.equal(true);
    expect(new Set(vectors.filter((v) => !v.valid).map((v) => v.reason))).to.deep.equal(
      new Set(['signature_mismatch', 'timestamp_out_of_tolerance']),
    );
  });

  for (const v of vectors) {
    it(`${v.valid ? 'accepts' : 'rejects'}: ${v.description}`, () => {
      expect(acceptedBy('standardwebhooks', v, v.now), 'standardwebhooks').to.equal(v.valid);
      expect(acceptedBy('svix', v, v.now), 'svix').to.equal(v.valid);
      if (v.valid && !v.header.includes(' ')) {
        // the service's signer produces exactly the vector's header
        expect(standardWebhooksHeaders([v.secret], v.id, v.body, v.timestamp)['webhook-signature']).to.equal(v.header);
      }
    });
  }

  it('signs with every secret given, in order, space-separated; the service signature likewise', () => {
    const [a, b] = ['whsec_5WbX5kEWLlfzsGNjH64I8lOOqUB6e8FH', 'whsec_Q7mK2pLx9vR4tN8bZc3Hj6Wd1Yf5Gs0A'];
    const body = '{"id":"x"}';
    const both = standardWebhooksHeaders([b, a], 'msg_1', body, 1795336201)['webhook-signature'].split(' ');
    expect(both).to.deep.equal([
      standardWebhooksHeaders([b], 'msg_1', body, 1795336201)['webhook-signature'],
      standardWebhooksHeaders([a], 'msg_1', body, 1795336201)['webhook-signature'],
    ]);
    expect(signatureHeader([b, a], body, 1795336201)).to.equal(
      `${signatureHeader(b, body, 1795336201)},${signatureHeader(a, body, 1795336201).split(',')[1]}`,
    );
  });

  it('every generated secret decodes strictly as base64 after whsec_ (40 base62 characters, 30 bytes)', () => {
    for (let i = 0; i < 200; i++) {
      const secret = newSigningSecret();
      expect(secret).to.match(/^whsec_[0-9A-Za-z]{40}$/);
      expect(standardWebhooksKey(secret)).to.have.length(30);
      // the libraries' strict decoder takes it (a length that is not a multiple of 4 would throw here)
      expect(() => new StandardWebhook(secret)).not.to.throw();
    }
  });

  describe('on real deliveries', () => {
    let db: Knex;
    let receiver: Receiver;

    before(async () => {
      ({ db } = await testDatabase());
      receiver = await startReceiver(() => ({ status: 204 }));
    });
    after(async () => {
      await receiver.close();
      await dropTestWorkspaces(db);
    });

    it('verify with the standardwebhooks and svix libraries, beside the unchanged service-signature', async () => {
      const ws = await webhookWorkspace(db);
      const url = receiver.endpointUrl();
      const endpoint = await ws.endpoint({ url });
      receiver.setSecret(url, endpoint.secret);
      await recordEvent(db, {
        workspaceId: ws.id,
        event: 'booking.confirmed',
        data: bookingConfirmedData(),
        source: 'publish',
      });
      await queueTestDelivery(db, {
        workspaceId: ws.id,
        endpointId: endpoint.id,
        idempotencyKey: 'sw',
        now: new Date(),
      });
      // the deliveries are due at the real clock's now (they were just created); the sweep runs at it too
      expect(await ws.dispatcher().runOnce(new Date(Date.now() + 1000))).to.include({ attempted: 2, accepted: 2 });
      expect(receiver.requests).to.have.length(2);
      for (const request of receiver.requests) {
        const headers = request.headers as Record<string, string>;
        const raw = request.rawBody.toString('utf8');
        expect(request.verified, 'service-signature').to.deep.equal({ ok: true });
        expect(headers['webhook-id']).to.equal(request.deliveryId);
        expect(headers['service-signature']).to.match(
          new RegExp(`^t=${headers['webhook-timestamp']},v1=[0-9a-f]{64}$`),
        );
        const sw = {
          'webhook-id': headers['webhook-id'],
          'webhook-timestamp': headers['webhook-timestamp'],
          'webhook-signature': headers['webhook-signature'],
        };
        expect(new StandardWebhook(endpoint.secret).verify(raw, sw)).to.deep.equal(JSON.parse(raw));
        expect(new SvixWebhook(endpoint.secret).verify(raw, sw)).to.deep.equal(JSON.parse(raw));
        // the description's four headers are all there, as before
        expect(Object.keys(headers)).to.include.members([
          'content-type',
          'service-event',
          'service-delivery',
          'service-signature',
        ]);
        expect(headers['content-type']).to.equal('application/json');
        expect(() => new StandardWebhook(newSigningSecret()).verify(raw, sw)).to.throw();
      }
    });
  });
});
