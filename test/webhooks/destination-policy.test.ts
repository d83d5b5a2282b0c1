import dns from 'node:dns';
import os from 'node:os';
import tls from 'node:tls';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from '../support/database.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { attemptDelivery, type AttemptRequest } from '../../src/webhooks/http-attempt.js';
import { createEndpoint } from '../../src/core/webhooks/endpoints.js';
import { recordEvent } from '../../src/webhooks/record-event.js';
import { createApiKey } from '../../src/core/workspaces.js';
import { InputError } from '../../src/errors.js';
import { startApi } from '../support/api.js';
import { blockedKind, STRICT_POLICY, type DestinationPolicy } from '../../src/webhooks/destination-policy.js';
import { bookingConfirmedData, delivery, dropTestWorkspaces, endpointRow, webhookWorkspace } from './support.js';
import { destinationPolicyFromEnv } from '../../src/config.js';
import { idOf, operator } from '../support/actors.js';

// The whole run allows private destinations (test/support/hooks.ts); these tests pass the strict policy, the
// default of a process without the switch, explicitly.

// A self-signed certificate for receiver.test, made for this test only, valid from 1990 to 2090 so that every clock a run
// may be moved to (npm run test:dates) finds it in date and it is refused for being self-signed only:
// faketime '1990-01-01 00:00:00' openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 36525 \
//   -subj /CN=receiver.test -addext subjectAltName=DNS:receiver.test -keyout key.pem -out cert.pem
const TEST_ONLY_KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgngGMbyEE1PEpOYuc
sx1kjGyM3WIbMmkk/5oPNMmfO4mhRANCAAR4vPClak4rKz0OZ6fPgz+a5SYEzyJp
dncV2Ej0X4dquWp62oM2KSfbKl50A2MLYFh72V9NZLA9hLer+Zvtil0H
-----END PRIVATE KEY-----`;
const TEST_ONLY_CERT = `-----BEGIN CERTIFICATE-----
MIIBoTCCAUegAwIBAgIUWsF9JGJhlXxhk4AMWCKqW6pe6OwwCgYIKoZIzj0EAwIw
GDEWMBQGA1UEAwwNcmVjZWl2ZXIudGVzdDAgFw05MDAxMDEwMDAwMDBaGA8yMDkw
MDEwMTAwMDAwMFowGDEWMBQGA1UEAwwNcmVjZWl2ZXIudGVzdDBZMBMGByqGSM49
AgEGCCqGSM49AwEHA0IABHi88KVqTisrPQ5np8+DP5rlJgTPIml2dxXYSPRfh2q5
anragzYpJ9sqXnQDYwtgWHvZX01ksD2Et6v5m+2KXQejbTBrMB0GA1UdDgQWBBTs
MfvhqZ+vl6bUv/oSEtvgz/ulsDAfBgNVHSMEGDAWgBTsMfvhqZ+vl6bUv/oSEtvg
z/ulsDAPBgNVHRMBAf8EBTADAQH/MBgGA1UdEQQRMA+CDXJlY2VpdmVyLnRlc3Qw
CgYIKoZIzj0EAwIDSAAwRQIhAKR35IukZUmJusRp6qe9CWKjE0p5Kipjbw7J4m1y
TeRjAiBT3MCCEDArV3/i6tb2nv4z7r4tg7+seiQiI+lgExDNZQ==
-----END CERTIFICATE-----`;

const SECRET = 'whsec_abcdefghijklmnopqrstuvwxyzABCDEF0123456789';
const SWITCH = 'FRS_ALLOW_PRIVATE_WEBHOOK_URLS=1';
/** Why, as a workspace's staff and the APIs are told it: no setting of the operator's. */
const TENANT_WHY =
  "webhooks are not sent to private destinations unless the service's operator opens the range for this workspace";
/** Why, as the operator is told it (the log, the CLI): the settings that would allow it. */
const OPERATOR_WHY = `webhooks are not sent to private destinations (set ${SWITCH}, list the range in FRS_WEBHOOK_ALLOWED_CIDRS for every workspace, or in the workspace's webhookAllowedCidrs for its endpoints only)`;

/** Names of our own: what a DNS server could answer, including one that changes its answer (rebinding). */
function lookupOf(answers: Record<string, string[]>): DestinationPolicy['lookup'] {
  return async (host) => (answers[host] ?? []).map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
}

describe('webhooks: destination policy', () => {
  let db: Knex;
  let receiver: Receiver;
  let port: number;

  before(async () => {
    ({ db } = await testDatabase());
    receiver = await startReceiver();
    port = Number(new URL(receiver.url).port);
  });
  beforeEach(() => receiver.reset());
  after(async () => {
    await receiver.close();
    await dropTestWorkspaces(db);
  });

  const attempt = (url: string, policy: DestinationPolicy) => {
    const req: AttemptRequest = {
      url,
      secrets: [SECRET],
      deliveryId: '3f1c9a52-7d4e-4b8a-9c21-6e5f0d2b8a47',
      event: 'webhook.test',
      body: '{}',
    };
    return attemptDelivery(req, { policy, timeoutMs: 2000 });
  };

  describe('address classes', () => {
    const refused: Array<[string, string, string?]> = [
      ['0.0.0.0', 'unspecified'],
      ['0.255.255.255', 'unspecified'],
      ['10.0.0.1', 'private'],
      ['10.255.255.255', 'private'],
      ['100.64.0.1', 'CGNAT (shared address space)'],
      ['100.127.255.254', 'CGNAT (shared address space)'],
      ['127.0.0.1', 'loopback'],
      ['127.255.0.9', 'loopback'],
      ['169.254.169.254', 'link-local'],
      ['172.16.0.1', 'private'],
      ['172.31.255.255', 'private'],
      ['192.0.0.8', 'reserved'],
      ['192.168.1.1', 'private'],
      ['198.18.0.1', 'reserved'],
      ['198.19.255.255', 'reserved'],
      ['224.0.0.1', 'multicast'],
      ['239.255.255.250', 'multicast'],
      ['240.0.0.1', 'reserved'],
      ['255.255.255.255', 'reserved'],
      ['::', 'unspecified'],
      ['::1', 'loopback'],
      ['::7f00:1', 'reserved'],
      ['192.0.2.10', 'reserved'],
      ['198.51.100.7', 'reserved'],
      ['203.0.113.200', 'reserved'],
      ['100::1', 'reserved'],
      ['2001:db8::1', 'reserved'],
      ['64:ff9b:1::a00:1', 'NAT64'],
      ['2002:7f00:1::1', 'IPv4-embedding tunnel'],
      ['2001:0:4136:e378::1', 'IPv4-embedding tunnel'],
      ['::ffff:127.0.0.1', 'loopback'],
      ['::ffff:10.1.2.3', 'private'],
      ['::ffff:8.8.8.8', 'IPv4-mapped IPv6'],
      ['64:ff9b::7f00:1', 'NAT64'],
      ['64:ff9b::808:808', 'NAT64'],
      ['fc00::1', 'private'],
      ['fd00::1', 'private'],
      ['fe80::1', 'link-local'],
      ['febf:ffff::1', 'link-local'],
      ['ff02::1', 'multicast'],
    ];
    for (const [address, kind] of refused) {
      it(`refuses ${address} (${kind})`, () => expect(blockedKind(address)).to.equal(kind));
    }
    // The neighbours of the ranges are public.
    for (const address of [
      '1.1.1.1',
      '8.8.8.8',
      '11.0.0.1',
      '100.63.255.255',
      '100.128.0.0',
      '172.15.255.255',
      '172.32.0.0',
      '169.253.255.255',
      '192.0.1.1',
      '198.17.255.255',
      '198.20.0.0',
      '223.255.255.255',
      '2606:4700:4700::1111',
      '2001:4860:4860::8888',
      '2003::1',
      '64:ff9c::1',
      'fec0::1',
      '192.0.3.1',
      '203.0.114.1',
    ]) {
      it(`allows the public address ${address}`, () => expect(blockedKind(address)).to.equal(null));
    }
  });

  describe('the switches', () => {
    it('is strict without them; FRS_ALLOW_PRIVATE_WEBHOOK_URLS=1 allows everything', () => {
      expect(destinationPolicyFromEnv({})).to.deep.equal({ allowPrivate: false, allowedCidrs: [] });
      const open = destinationPolicyFromEnv({ FRS_ALLOW_PRIVATE_WEBHOOK_URLS: '1' });
      expect(open.allowPrivate).to.equal(true);
      expect(blockedKind('127.0.0.1', open)).to.equal(null);
      expect(blockedKind('169.254.169.254', open)).to.equal(null);
      expect(destinationPolicyFromEnv({ FRS_ALLOW_PRIVATE_WEBHOOK_URLS: '0' }).allowPrivate).to.equal(false);
      expect(() => destinationPolicyFromEnv({ FRS_ALLOW_PRIVATE_WEBHOOK_URLS: 'yes' })).to.throw(
        'FRS_ALLOW_PRIVATE_WEBHOOK_URLS must be 1 or 0, got "yes"',
      );
    });

    it('FRS_WEBHOOK_ALLOWED_CIDRS allows the listed ranges only', () => {
      const policy = destinationPolicyFromEnv({ FRS_WEBHOOK_ALLOWED_CIDRS: '10.1.0.0/16, fd12:3456::/32' });
      expect(policy).to.deep.equal({ allowPrivate: false, allowedCidrs: ['10.1.0.0/16', 'fd12:3456::/32'] });
      expect(blockedKind('10.1.200.3', policy)).to.equal(null);
      expect(blockedKind('fd12:3456::9', policy)).to.equal(null);
      expect(blockedKind('10.2.0.1', policy)).to.equal('private');
      expect(blockedKind('127.0.0.1', policy)).to.equal('loopback');
      expect(blockedKind('fd12:3457::9', policy)).to.equal('private');
      expect(blockedKind('8.8.8.8', policy)).to.equal(null);
      expect(() => destinationPolicyFromEnv({ FRS_WEBHOOK_ALLOWED_CIDRS: '10.1.0.0/16,10.2.0.0' })).to.throw(
        'FRS_WEBHOOK_ALLOWED_CIDRS must be a comma-separated list of CIDR ranges such as 10.1.0.0/16, got "10.2.0.0"',
      );
      expect(() => destinationPolicyFromEnv({ FRS_WEBHOOK_ALLOWED_CIDRS: '10.0.0.0/33' })).to.throw(
        'got "10.0.0.0/33"',
      );
    });

    it('a listed range reaches a local receiver; the unlisted loopback form does not', async () => {
      const policy = destinationPolicyFromEnv({ FRS_WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8' });
      expect(await attempt(`http://127.0.0.1:${port}/hook`, policy)).to.include({ ok: true, statusCode: 204 });
      expect((await attempt(`http://[::1]:${port}/hook`, policy)).errorKind).to.equal('blocked_destination');
      expect(receiver.requests).to.have.length(1);
    });
  });

  describe('at connect time (switch off)', () => {
    const rebinding = lookupOf({ 'rebind.test': ['127.0.0.1'], 'mixed.test': ['93.184.215.14', '10.0.0.7'] });
    const strict: DestinationPolicy = { ...STRICT_POLICY, lookup: rebinding };
    // Every form from the security review, each of which reached the receiver on 127.0.0.1 before.
    const forms: Array<[string, string, string?]> = [
      ['127.0.0.1', '127.0.0.1 is a loopback address'],
      ['localhost', 'localhost is a loopback or metadata name'],
      ['[::1]', '::1 is a loopback address'],
      ['[::ffff:127.0.0.1]', '::ffff:7f00:1 is a loopback address'],
      ['2130706433', '127.0.0.1 is a loopback address'],
      ['0x7f.1', '127.0.0.1 is a loopback address'],
      ['127.1', '127.0.0.1 is a loopback address'],
      ['0.0.0.0', '0.0.0.0 is an unspecified address'],
      // The attempt record (which read-only keys can read) names the class, not the address a name resolved to.
      [
        'rebind.test',
        'rebind.test resolves to a loopback address',
        'rebind.test resolves to 127.0.0.1, a loopback address',
      ],
      ['mixed.test', 'mixed.test resolves to a private address', 'mixed.test resolves to 10.0.0.7, a private address'],
    ];
    for (const [host, reason, operatorReason = reason] of forms) {
      it(`never connects to http://${host}:<port> and records blocked_destination`, async () => {
        const outcome = await attempt(`http://${host}:${port}/hook`, strict);
        expect(outcome).to.include({
          ok: false,
          statusCode: null,
          errorKind: 'blocked_destination',
          responseBody: null,
        });
        // (the record, which a workspace's staff read, names no setting of the operator's either)
        expect(outcome.error).to.equal(`${reason}; ${TENANT_WHY}`);
        expect(outcome.detail).to.equal(`${operatorReason}; ${OPERATOR_WHY}`);
        expect(receiver.requests).to.deep.equal([]);
      });
    }

    it('a name the system resolver maps to a refused address is refused on that answer (no stub)', async function () {
      // This machine's own host name: /etc/hosts maps it to a loopback address on these machines.
      const name = os.hostname();
      const { address } = await dns.promises.lookup(name);
      if (!blockedKind(address, STRICT_POLICY)) this.skip();
      const outcome = await attempt(`http://${name}:${port}/hook`, STRICT_POLICY);
      expect(outcome).to.include({ ok: false, errorKind: 'blocked_destination' });
      expect(outcome.error).to.match(new RegExp(`^${name.replace(/[.]/g, '\\.')} resolves to an? [a-z -]+ address;`));
      expect(outcome.error).not.to.include(address);
      expect(receiver.requests).to.deep.equal([]);
    });

    it('with the switch on, the same forms reach the receiver', async () => {
      const open: DestinationPolicy = { allowPrivate: true, allowedCidrs: [], lookup: rebinding };
      for (const host of ['127.0.0.1', '2130706433', '0x7f.1', '127.1', 'rebind.test']) {
        expect(await attempt(`http://${host}:${port}/hook`, open), host).to.include({ ok: true, statusCode: 204 });
      }
      expect(receiver.requests).to.have.length(5);
    });

    it('a delivery refused at connect time fails as blocked_destination and counts toward the failure streak', async () => {
      const ws = await webhookWorkspace(db);
      // Registered while the name still pointed elsewhere (or under the switch); refused when the dispatcher connects.
      const endpoint = await ws.endpoint({ url: `http://rebind.test:${port}/hook` });
      await recordEvent(db, {
        workspaceId: ws.id,
        event: 'booking.confirmed',
        data: bookingConfirmedData(),
        source: 'publish',
      });
      const counts = await ws.dispatcher({ destinationPolicy: strict }).runOnce(new Date());
      expect(counts).to.deep.equal({ attempted: 1, accepted: 0, retrying: 1, failed: 0 });
      const [row] = await db('deliveries').where({ endpoint_id: endpoint.id });
      expect((await delivery(db, row.id)).status).to.equal('retrying');
      const [attemptRow] = await db('delivery_attempts').where({ delivery_id: row.id });
      expect(attemptRow).to.include({
        number: 1,
        status_code: null,
        error_kind: 'blocked_destination',
        response_body: null,
      });
      expect(attemptRow.error).to.match(/^rebind\.test resolves to a loopback address;/);
      expect(await endpointRow(db, endpoint.id)).to.include({ consecutive_failures: 1, last_success_at: null });
      expect(receiver.requests).to.deep.equal([]);
      // The delivery log shows it as the document describes it (every response is validated against it).
      const api = await startApi();
      try {
        const { key } = await createApiKey(db, operator, { workspaceId: await idOf(db, ws.slug) });
        const detail = await api.get(`/v1/webhooks/${endpoint.id}/deliveries/${row.id}`, key);
        expect(detail.status).to.equal(200);
        expect(detail.body).to.include({
          status: 'retrying',
          lastErrorKind: 'blocked_destination',
          lastStatusCode: null,
        });
        expect(detail.body.attempts).to.have.length(1);
        expect(detail.body.attempts[0]).to.include({
          number: 1,
          errorKind: 'blocked_destination',
          statusCode: null,
          responseBody: null,
          error: attemptRow.error,
        });
      } finally {
        await api.close();
      }
    });
  });

  describe('at registration', () => {
    let slug: string;
    beforeEach(async () => {
      slug = (await webhookWorkspace(db)).slug;
    });
    const strict: DestinationPolicy = {
      ...STRICT_POLICY,
      lookup: lookupOf({ 'rebind.test': ['127.0.0.1'], 'hooks.example.ae': ['93.184.215.14'] }),
    };
    const register = async (url: string, policy = strict) =>
      createEndpoint(db, operator, { workspaceId: await idOf(db, slug), url, policy });
    const endpointsOf = async () =>
      (
        await db('webhook_endpoints')
          .join('workspaces', 'workspaces.id', 'webhook_endpoints.workspace_id')
          .where('workspaces.slug', slug)
          .select('url')
      ).map((r) => r.url);

    const refused: Array<[string, string, string?]> = [
      ['http://127.0.0.1/hook', '127.0.0.1 is a loopback address'],
      ['http://localhost:8080/hook', 'localhost is a loopback or metadata name'],
      ['http://[::1]/hook', '::1 is a loopback address'],
      ['http://[::ffff:127.0.0.1]/hook', '::ffff:7f00:1 is a loopback address'],
      ['http://2130706433/hook', '127.0.0.1 is a loopback address'],
      ['http://0x7f.1/hook', '127.0.0.1 is a loopback address'],
      ['http://127.1/hook', '127.0.0.1 is a loopback address'],
      ['http://0.0.0.0/hook', '0.0.0.0 is an unspecified address'],
      ['http://169.254.169.254/latest/meta-data', '169.254.169.254 is a link-local address'],
      ['http://10.0.0.5/hook', '10.0.0.5 is a private address'],
      ['https://192.168.1.20/hook', '192.168.1.20 is a private address'],
      ['http://[fd00::1]/hook', 'fd00::1 is a private address'],
      [
        'http://metadata.google.internal/computeMetadata/v1/',
        'metadata.google.internal is a loopback or metadata name',
      ],
      // what a workspace's staff are told names the class, never the address the name resolved to
      [
        'https://rebind.test/hook',
        'rebind.test resolves to a loopback address',
        'rebind.test resolves to 127.0.0.1, a loopback address',
      ],
    ];
    for (const [url, reason, operatorReason = reason] of refused) {
      it(`refuses ${url} with a one-line reason, storing nothing`, async () => {
        const error = await register(url).then(
          () => null,
          (err) => err,
        );
        expect(error).to.be.an.instanceOf(InputError);
        expect(error.message).to.equal(`url refused: ${reason}; ${TENANT_WHY}`);
        expect(error.operatorDetail).to.equal(`url refused: ${operatorReason}; ${OPERATOR_WHY}`);
        expect(error.message).not.to.include('\n');
        expect(await endpointsOf()).to.deep.equal([]);
      });
    }

    it('refuses a URL with a user name or password, even with the switch on, without repeating it', async () => {
      for (const url of [
        'https://user:hunter2@hooks.example.ae/hook',
        'https://user@hooks.example.ae/hook',
        'https://:hunter2@hooks.example.ae/hook',
      ]) {
        for (const policy of [strict, { ...strict, allowPrivate: true }]) {
          const error = await register(url, policy).then(
            () => null,
            (err) => err,
          );
          expect(error?.message, url).to.equal(
            'url refused: the URL must not carry a user name or password (they would be shown to every API key and are never sent)',
          );
        }
      }
      expect(await endpointsOf()).to.deep.equal([]);
    });

    it('accepts public addresses, names that resolve to them and names that do not resolve now', async () => {
      for (const url of [
        'https://93.184.215.14/hook',
        'https://hooks.example.ae/fleet',
        'https://not-yet-in-dns.test/hook',
      ])
        await register(url);
      expect(await endpointsOf()).to.have.members([
        'https://93.184.215.14/hook',
        'https://hooks.example.ae/fleet',
        'https://not-yet-in-dns.test/hook',
      ]);
    });

    it('accepts a private URL under the switch', async () => {
      await register('http://127.0.0.1:9/hook', { ...strict, allowPrivate: true });
      expect(await endpointsOf()).to.deep.equal(['http://127.0.0.1:9/hook']);
    });
  });

  it("connects to the checked address but keeps TLS on the URL's name: SNI is the name, the certificate is verified", async () => {
    const names: string[] = [];
    const server = tls.createServer({
      key: TEST_ONLY_KEY,
      cert: TEST_ONLY_CERT,
      SNICallback: (name, done) => {
        names.push(name);
        done(null, tls.createSecureContext({ key: TEST_ONLY_KEY, cert: TEST_ONLY_CERT }));
      },
    });
    server.on('tlsClientError', () => undefined);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const tlsPort = (server.address() as AddressInfo).port;
      const policy: DestinationPolicy = {
        allowPrivate: true,
        allowedCidrs: [],
        lookup: lookupOf({ 'receiver.test': ['127.0.0.1'] }),
      };
      const outcome = await attempt(`https://receiver.test:${tlsPort}/hook`, policy);
      // The socket went to 127.0.0.1 (the looked-up address), the handshake named receiver.test, and the
      // self-signed certificate was refused: verification was not switched off by connecting to an address.
      expect(names).to.deep.equal(['receiver.test']);
      expect(outcome).to.include({ ok: false, errorKind: 'connection' });
      expect(outcome.error).to.match(/self-signed certificate/);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
