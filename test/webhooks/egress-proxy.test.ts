import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { deliveryPolicyFromEnv, type DestinationPolicy } from '../../src/config.js';
import { queueTestDelivery } from '../../src/core/webhooks/test-delivery.js';
import { listDeliveries } from '../../src/core/webhooks/deliveries.js';
import { attemptDelivery, RESPONSE_BODY_LIMIT, type AttemptRequest } from '../../src/webhooks/http-attempt.js';
import { recordEvent } from '../../src/webhooks/record-event.js';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';
import { testDatabase } from '../support/database.js';
import { startConnectProxy, type ConnectProxy } from '../support/connect-proxy.js';
import { startDnsServer, type TestDnsServer } from '../support/dns-server.js';
import { capturedLogger } from '../support/logs.js';
import { startReceiver, type Receiver, type Reply } from '../support/receiver.js';
import { operator } from '../support/actors.js';
import { bookingConfirmedData, dropTestWorkspaces, webhookWorkspace, type TestWorkspace } from './support.js';

// Deliveries through an egress proxy (FRS_WEBHOOK_PROXY). The receiver listens on 127.0.0.1 and is reached only
// through the test's CONNECT proxy, under a name the service's resolver (the test's DNS server) gives a public address
// and the proxy's own table maps to 127.0.0.1, so the service runs with the strict destination policy: a private
// destination is refused by the service before the proxy hears of it.

const RECEIVER_NAME = 'hooks.receiver.example';
/** Where the service's resolver says the receiver is: a public address (nothing ever connects to it). */
const PUBLIC_ADDRESS = '93.184.215.14';
const INSIDE_NAME = 'inside.receiver.example';
const PROXY_USER = 'fleet';
const PROXY_PASSWORD = 'pr0xy-pa55word';

describe('webhooks: deliveries through an egress proxy (FRS_WEBHOOK_PROXY)', () => {
  let db: Knex;
  let receiver: Receiver;
  let proxy: ConnectProxy;
  let dns: TestDnsServer;
  let ws: TestWorkspace;
  let answer: () => Reply;

  before(async () => {
    ({ db } = await testDatabase());
    receiver = await startReceiver(() => answer());
    proxy = await startConnectProxy({ [RECEIVER_NAME]: '127.0.0.1' });
    dns = await startDnsServer({
      records: {
        [RECEIVER_NAME]: { addresses: [PUBLIC_ADDRESS], ttl: 60 },
        [INSIDE_NAME]: { addresses: ['10.1.2.3'], ttl: 60 },
      },
      silent: [],
    });
  });
  beforeEach(async () => {
    ws = await webhookWorkspace(db);
    answer = () => ({ status: 204 });
    receiver.reset();
    proxy.reset();
    proxy.refuseWith(null);
  });
  after(async () => {
    await receiver?.close();
    await proxy?.close();
    await dns?.close();
    await dropTestWorkspaces(db);
  });

  const receiverPort = () => new URL(receiver.url).port;
  /** The proxy's URL with credentials, as an operator would set it. */
  const proxyUrl = (port = proxy.port) => `http://${PROXY_USER}:${PROXY_PASSWORD}@127.0.0.1:${port}`;
  /**
   * The production policy (strict, as the environment gives it) with the test's name server and the proxy: a new
   * object each time, so that each test has an agent (and connections) of its own.
   */
  const policy = (port = proxy.port): DestinationPolicy =>
    deliveryPolicyFromEnv({ FRS_WEBHOOK_DNS_SERVERS: dns.address, FRS_WEBHOOK_PROXY: proxyUrl(port) });
  /** An endpoint of the receiver, registered under the receiver's public name. */
  const proxiedEndpoint = async () => {
    const url = new URL(receiver.endpointUrl());
    url.hostname = RECEIVER_NAME;
    const endpoint = await ws.endpoint({ url: url.href });
    receiver.setSecret(url.href, endpoint.secret);
    return endpoint;
  };
  const publish = () =>
    recordEvent(db, {
      workspaceId: ws.id,
      event: 'booking.confirmed',
      data: bookingConfirmedData(),
      source: 'publish',
    });
  const attemptsOf = (endpointId: string) =>
    db('delivery_attempts as a')
      .join('deliveries as d', 'd.id', 'a.delivery_id')
      .where('d.endpoint_id', endpointId)
      .select('d.status', 'd.last_error', 'a.status_code', 'a.error_kind', 'a.error');

  it("sends a delivery through the proxy: one CONNECT to the URL's name and port, signed, recorded accepted", async () => {
    const endpoint = await proxiedEndpoint();
    await publish();
    const queries = dns.queriesOf(RECEIVER_NAME).length;
    const counts = await ws.dispatcher({ destinationPolicy: policy() }).runOnce();
    expect(counts).to.deep.equal({ attempted: 1, accepted: 1, retrying: 0, failed: 0 });
    // The proxy was asked for the name (not an address), with the credentials of FRS_WEBHOOK_PROXY.
    expect(proxy.connects).to.deep.equal([
      {
        target: `${RECEIVER_NAME}:${receiverPort()}`,
        authorization: `Basic ${Buffer.from(`${PROXY_USER}:${PROXY_PASSWORD}`).toString('base64')}`,
      },
    ]);
    // The service resolved the name itself first (the destination check), through its own resolver.
    expect(dns.queriesOf(RECEIVER_NAME).length).to.be.greaterThan(queries);
    expect(receiver.requests).to.have.length(1);
    const [request] = receiver.requests;
    expect(request.verified).to.deep.equal({ ok: true });
    expect(request.headers.host).to.equal(`${RECEIVER_NAME}:${receiverPort()}`);
    expect(request.headers).not.to.have.property('proxy-authorization');
    expect(await attemptsOf(endpoint.id)).to.deep.equal([
      { status: 'accepted', last_error: null, status_code: 204, error_kind: null, error: null },
    ]);
  });

  it("sends the test operation's delivery through the proxy as well", async () => {
    const endpoint = await proxiedEndpoint();
    const { deliveryId } = (await queueTestDelivery(db, {
      workspaceId: ws.id,
      endpointId: endpoint.id,
      idempotencyKey: 'through-the-proxy',
      now: new Date(),
    })) as { deliveryId: string };
    expect(await ws.dispatcher({ destinationPolicy: policy() }).runOnce()).to.include({ attempted: 1, accepted: 1 });
    expect(proxy.connects.map((c) => c.target)).to.deep.equal([`${RECEIVER_NAME}:${receiverPort()}`]);
    expect(receiver.requests.map((r) => [r.deliveryId, r.event, r.verified])).to.deep.equal([
      [deliveryId, 'webhook.test', { ok: true }],
    ]);
  });

  it('a proxy that refuses the tunnel (403) is a failed attempt naming the refusal, never the proxy', async () => {
    proxy.refuseWith(403);
    const endpoint = await proxiedEndpoint();
    await publish();
    const { logger, logs } = capturedLogger();
    // (a dispatcher of the test's workspace, as the worker's role, logging to the test)
    const dispatcher = new Dispatcher({
      db: (await testDatabase()).forRole('worker'),
      logger,
      workspaceIds: [ws.id],
      destinationPolicy: policy(),
    });
    const counts = await dispatcher.runOnce();
    expect(counts).to.deep.equal({ attempted: 1, accepted: 0, retrying: 1, failed: 0 });
    expect(proxy.connects.map((c) => c.target)).to.deep.equal([`${RECEIVER_NAME}:${receiverPort()}`]);
    expect(receiver.requests).to.deep.equal([]);
    const error = `the egress proxy refused the tunnel to ${RECEIVER_NAME}:${receiverPort()} (it answered 403); nothing was sent`;
    expect(await attemptsOf(endpoint.id)).to.deep.equal([
      { status: 'retrying', last_error: error, status_code: null, error_kind: 'connection', error },
    ]);
    // What the delivery log shows (the APIs' and the screen's rows) names neither the proxy nor its credentials.
    const shown = JSON.stringify(await listDeliveries(db, operator, { endpointId: endpoint.id, workspaceId: ws.id }));
    expect(shown).to.include(error);
    for (const secret of [String(proxy.port), PROXY_PASSWORD, PROXY_USER]) expect(shown).not.to.include(secret);
    // The operator's log line names the proxy's address, without its credentials.
    const line = logs.find((l) => l.endpointId === endpoint.id && l.msg === 'webhook delivery attempt failed');
    expect(line).to.include({
      errorKind: 'connection',
      detail: `egress proxy http://127.0.0.1:${proxy.port} answered 403 to CONNECT ${RECEIVER_NAME}:${receiverPort()}`,
    });
    expect(JSON.stringify(logs)).not.to.include(PROXY_PASSWORD);
  });

  it('a proxy that is down is a failed attempt of kind connection, without its address', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const outcome = await attemptDelivery(attempt(`http://${RECEIVER_NAME}:${receiverPort()}/down`), {
      policy: policy(port),
    });
    expect(outcome).to.include({
      ok: false,
      statusCode: null,
      errorKind: 'connection',
      error: `the egress proxy did not open a tunnel to ${RECEIVER_NAME}:${receiverPort()} (ECONNREFUSED); nothing was sent`,
      responseBody: null,
    });
    expect(outcome.detail).to.match(new RegExp(`^egress proxy http://127\\.0\\.0\\.1:${port} did not open a tunnel`));
    expect(outcome.detail).not.to.include(PROXY_PASSWORD);
    expect(receiver.requests).to.deep.equal([]);
  });

  it('a private destination is refused by the service: the proxy never hears of it', async () => {
    const endpoint = await ws.endpoint({ url: `http://127.0.0.1:${receiverPort()}/private` });
    await publish();
    expect(await ws.dispatcher({ destinationPolicy: policy() }).runOnce()).to.include({ attempted: 1, retrying: 1 });
    expect(await attemptsOf(endpoint.id)).to.deep.equal([
      {
        status: 'retrying',
        last_error:
          "127.0.0.1 is a loopback address; webhooks are not sent to private destinations unless the service's operator opens the range for this workspace",
        status_code: null,
        error_kind: 'blocked_destination',
        error:
          "127.0.0.1 is a loopback address; webhooks are not sent to private destinations unless the service's operator opens the range for this workspace",
      },
    ]);
    // Literal addresses, refused names, and a name the service's resolver gives a private address.
    const refused = [
      `http://[::1]:${receiverPort()}/`,
      `http://10.0.0.8/`,
      `http://169.254.169.254/latest/meta-data/`,
      `http://localhost:${receiverPort()}/`,
      `http://metadata.google.internal/`,
      `http://${INSIDE_NAME}:${receiverPort()}/`,
    ];
    for (const url of refused) {
      const outcome = await attemptDelivery(attempt(url), { policy: policy() });
      expect(outcome, url).to.include({ ok: false, errorKind: 'blocked_destination' });
    }
    expect(proxy.connects).to.deep.equal([]);
    expect(receiver.requests).to.deep.equal([]);
  });

  it('an https destination is tunnelled too: TLS runs through the tunnel to the receiver, not to the proxy', async () => {
    // The receiver speaks plain HTTP, so the TLS handshake it gets through the tunnel fails: a failure of the
    // destination (kind connection, in the TLS library's words), not of the proxy, which opened the tunnel.
    const outcome = await attemptDelivery(attempt(`https://${RECEIVER_NAME}:${receiverPort()}/tls`), {
      policy: policy(),
    });
    expect(outcome).to.include({ ok: false, statusCode: null, errorKind: 'connection' });
    expect(outcome.error)
      .not.to.match(/egress proxy/)
      .and.not.to.include(String(proxy.port));
    expect(outcome.detail).to.equal(undefined);
    expect(proxy.connects.map((c) => c.target)).to.deep.equal([`${RECEIVER_NAME}:${receiverPort()}`]);
    expect(receiver.requests).to.deep.equal([]);
  });

  it('the time-out, the no-redirect rule and the 4 KiB body rule hold through the proxy', async () => {
    const url = `http://${RECEIVER_NAME}:${receiverPort()}/rules`;
    const through = policy();
    answer = () => ({ status: 302, headers: { location: 'http://elsewhere.example/' } });
    expect(await attemptDelivery(attempt(url), { policy: through })).to.include({
      ok: false,
      statusCode: 302,
      errorKind: 'redirect',
      error: 'HTTP 302 redirect to http://elsewhere.example/ (redirects are not followed)',
    });
    answer = () => ({ status: 200, body: 'x'.repeat(3 * RESPONSE_BODY_LIMIT) });
    const big = await attemptDelivery(attempt(url), { policy: through });
    expect(big).to.include({ ok: true, statusCode: 200 });
    expect(big.responseBody).to.equal('x'.repeat(RESPONSE_BODY_LIMIT));
    answer = () => 'hang';
    expect(await attemptDelivery(attempt(url), { policy: through, timeoutMs: 300 })).to.include({
      ok: false,
      statusCode: null,
      errorKind: 'timeout',
      error: 'no complete answer within 300 ms',
    });
    expect(receiver.requests).to.have.length(3);
    expect(proxy.connects.length).to.be.at.least(1);
    expect(new Set(proxy.connects.map((c) => c.target))).to.deep.equal(new Set([`${RECEIVER_NAME}:${receiverPort()}`]));
  });
});

/** One attempt's request to `url` (the body and secret are the receiver's business only). */
function attempt(url: string): AttemptRequest {
  return {
    url,
    secrets: ['whsec_abcdefghijklmnopqrstuvwxyzABCDEF0123456789'],
    deliveryId: '3f1c9a52-7d4e-4b8a-9c21-6e5f0d2b8a47',
    event: 'webhook.test',
    body: '{"id":"3f1c9a52-7d4e-4b8a-9c21-6e5f0d2b8a47","event":"webhook.test","createdAt":"2026-11-22T08:30:00.000Z","data":{}}',
  };
}
