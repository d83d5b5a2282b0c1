import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import nock from 'nock';
import { getGlobalDispatcher } from 'undici';
import {
  attemptDelivery,
  DEFAULT_ATTEMPT_TIMEOUT_MS,
  firstBytes,
  type AttemptOptions,
  type AttemptRequest,
} from '../../src/webhooks/http-attempt.js';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';
import { verifyWebhook } from '../../src/webhooks/signing.js';
import { testDatabase } from '../support/database.js';
import { verifyIndependently } from '../support/receiver.js';
import { quietLogger } from './support.js';

// nock switches itself on when imported; keep it on only while this file's nock tests run.
nock.restore();

const HOST = 'http://receiver.test';
const SECRET = 'whsec_abcdefghijklmnopqrstuvwxyzABCDEF0123456789';
const BODY =
  '{"id":"3f1c9a52-7d4e-4b8a-9c21-6e5f0d2b8a47","event":"webhook.test","createdAt":"2026-11-22T08:30:00.000Z","data":{"endpointId":"8d6f2c1e-4a3b-4c5d-8e9f-0a1b2c3d4e5f","message":"Zoë"}}';

const request = (path = '/hook'): AttemptRequest => ({
  url: HOST + path,
  secrets: [SECRET],
  deliveryId: '3f1c9a52-7d4e-4b8a-9c21-6e5f0d2b8a47',
  event: 'webhook.test',
  body: BODY,
});

describe('webhooks: one delivery attempt', () => {
  it('times out after 10 s by default', async () => {
    expect(DEFAULT_ATTEMPT_TIMEOUT_MS).to.equal(10_000);
    const { db } = await testDatabase();
    expect(new Dispatcher({ db, logger: quietLogger() }).attemptTimeout).to.equal(10_000);
    expect(new Dispatcher({ db, logger: quietLogger(), attemptTimeoutMs: 200, leaseMs: 1000 }).attemptTimeout).to.equal(
      200,
    );
  });

  describe('outcomes (nock)', () => {
    before(() => nock.activate());
    afterEach(() => nock.cleanAll());
    after(() => nock.restore());
    // nock replaces undici's global dispatcher; deliveries normally go through the destination policy's agent.
    const attemptViaNock = (req: AttemptRequest, options: AttemptOptions = {}) =>
      attemptDelivery(req, { ...options, via: getGlobalDispatcher() });

    it('POSTs the fixed body with content-type, service-event, service-delivery and a valid service-signature', async () => {
      let seen: { headers: Record<string, string>; body: string } | undefined;
      nock(HOST)
        .post('/hook')
        .reply(async (req: Request) => {
          seen = { headers: Object.fromEntries(req.headers), body: await req.text() };
          return [204];
        });
      const before = Math.floor(Date.now() / 1000);
      const outcome = await attemptViaNock(request());
      expect(outcome).to.include({ ok: true, statusCode: 204, errorKind: null, error: null, responseBody: '' });
      expect(seen!.body).to.equal(BODY);
      expect(seen!.headers).to.include({
        'content-type': 'application/json',
        'service-event': 'webhook.test',
        'service-delivery': '3f1c9a52-7d4e-4b8a-9c21-6e5f0d2b8a47',
      });
      const signature = seen!.headers['service-signature'];
      expect(signature).to.match(/^t=\d+,v1=[0-9a-f]{64}$/);
      const t = Number(/^t=(\d+)/.exec(signature)![1]);
      expect(t).to.be.within(before, Math.ceil(Date.now() / 1000));
      expect(verifyWebhook(seen!.body, signature, SECRET)).to.deep.equal({ ok: true, timestamp: t });
      expect(verifyIndependently(seen!.body, signature, SECRET, Date.now() / 1000)).to.deep.equal({ ok: true });
    });

    it('accepts 200 and keeps the response body', async () => {
      nock(HOST).post('/hook').reply(200, 'thanks');
      const outcome = await attemptViaNock(request());
      expect(outcome).to.include({ ok: true, statusCode: 200, errorKind: null, responseBody: 'thanks' });
      expect(outcome.durationMs).to.be.a('number').and.at.least(0);
      expect(outcome.startedAt).to.be.an.instanceOf(Date);
    });

    for (const status of [301, 302, 307]) {
      it(`treats ${status} as a failure and does not follow the redirect`, async () => {
        nock(HOST)
          .post('/hook')
          .reply(status, 'moved', { location: `${HOST}/moved` });
        const target = nock(HOST).post('/moved').reply(204);
        const outcome = await attemptViaNock(request());
        expect(outcome).to.include({ ok: false, statusCode: status, errorKind: 'redirect', responseBody: 'moved' });
        expect(outcome.error).to.equal(`HTTP ${status} redirect to ${HOST}/moved (redirects are not followed)`);
        expect(target.isDone(), 'redirect target was called').to.equal(false);
      });
    }

    it('never keeps the signing secret in the error text it records', async () => {
      nock(HOST)
        .post('/hook')
        .reply(302, 'moved', { location: `${HOST}/login?next=${SECRET}` });
      const outcome = await attemptViaNock(request());
      expect(outcome.error).to.equal(`HTTP 302 redirect to ${HOST}/login?next=[redacted] (redirects are not followed)`);
    });

    for (const status of [400, 500]) {
      it(`treats ${status} as a failure, keeping the status and the body`, async () => {
        nock(HOST).post('/hook').reply(status, { error: 'nope' });
        const outcome = await attemptViaNock(request());
        expect(outcome).to.include({
          ok: false,
          statusCode: status,
          errorKind: 'status',
          error: `HTTP ${status}`,
          responseBody: '{"error":"nope"}',
        });
      });
    }

    it('keeps only the first 4 KiB of the response body, cut at a character boundary', async () => {
      nock(HOST).post('/hook').reply(500, 'é'.repeat(5000));
      const outcome = await attemptViaNock(request());
      expect(Buffer.byteLength(outcome.responseBody!)).to.equal(4096);
      expect(outcome.responseBody).to.equal('é'.repeat(2048));
    });

    it('gives up on an endpoint that does not answer within the time-out', async () => {
      // (nock's .delay() is not applied to undici requests; a slow reply callback is.)
      nock(HOST)
        .post('/hook')
        .reply(async () => {
          await new Promise((resolve) => setTimeout(resolve, 1500));
          return [204];
        });
      const started = Date.now();
      const outcome = await attemptViaNock(request(), { timeoutMs: 200 });
      const elapsed = Date.now() - started;
      expect(outcome).to.include({ ok: false, statusCode: null, errorKind: 'timeout', responseBody: null });
      expect(outcome.error).to.equal('no complete answer within 200 ms');
      expect(elapsed).to.be.within(190, 1000);
      expect(outcome.durationMs).to.be.within(190, 1000);
    });

    it('records a refused connection as a connection failure', async () => {
      nock(HOST).post('/hook').replyWithError({ code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 10.0.0.1:80' });
      const outcome = await attemptViaNock(request());
      expect(outcome).to.include({ ok: false, statusCode: null, errorKind: 'connection', responseBody: null });
      expect(outcome.error).to.include('ECONNREFUSED');
    });
  });

  describe('outcomes (real sockets)', () => {
    it('records a refused connection on a closed local port', async () => {
      const server = http.createServer();
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const { port } = server.address() as AddressInfo;
      await new Promise((resolve) => server.close(resolve));
      const outcome = await attemptDelivery({ ...request(), url: `http://127.0.0.1:${port}/hook` });
      expect(outcome).to.include({ ok: false, statusCode: null, errorKind: 'connection' });
      expect(outcome.error).to.include('ECONNREFUSED');
      expect(outcome.error).not.to.include(SECRET);
    });

    it('times out a server that accepts the connection and never answers', async () => {
      const server = http.createServer(() => undefined);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const { port } = server.address() as AddressInfo;
      try {
        const outcome = await attemptDelivery(
          { ...request(), url: `http://127.0.0.1:${port}/hook` },
          { timeoutMs: 200 },
        );
        expect(outcome).to.include({ ok: false, errorKind: 'timeout' });
        expect(outcome.durationMs).to.be.within(190, 1000);
      } finally {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
    });

    it('records a URL that does not parse as a failed attempt (never a rejected promise)', async () => {
      const outcome = await attemptDelivery({ ...request(), url: 'http://[not-an-address/hook' }, { timeoutMs: 2000 });
      expect(outcome).to.include({ ok: false, statusCode: null, errorKind: 'connection', responseBody: null });
      expect(outcome.error).to.include('Invalid URL');
    });

    it('takes the first 4 KiB of a body that never ends and gives the rest up, without waiting for its end', async () => {
      const server = http.createServer((_req, res) => {
        res.writeHead(200);
        res.write('a'.repeat(8192));
        // never ends: an attempt that waited for the end would time out
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const { port } = server.address() as AddressInfo;
      try {
        const outcome = await attemptDelivery(
          { ...request(), url: `http://127.0.0.1:${port}/hook` },
          { timeoutMs: 5000 },
        );
        expect(outcome).to.include({
          ok: true,
          statusCode: 200,
          errorKind: null,
          error: null,
          responseBody: 'a'.repeat(4096),
        });
      } finally {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
    });

    it('times out a body that trickles in past the time-out (the whole exchange counts)', async () => {
      const server = http.createServer((_req, res) => {
        res.writeHead(200);
        res.write('a');
        // never ends
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const { port } = server.address() as AddressInfo;
      try {
        const outcome = await attemptDelivery(
          { ...request(), url: `http://127.0.0.1:${port}/hook` },
          { timeoutMs: 300 },
        );
        expect(outcome).to.include({ ok: false, errorKind: 'timeout' });
      } finally {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
    });
  });

  it('firstBytes keeps valid UTF-8 within the limit and drops NUL', () => {
    expect(firstBytes(Buffer.from('ab\u0000c'))).to.equal('abc');
    expect(firstBytes(Buffer.from('€€'), 4)).to.equal('€');
    const binary = Buffer.alloc(5000, 0xff);
    expect(Buffer.byteLength(firstBytes(binary))).to.be.at.most(4096);
  });
});
