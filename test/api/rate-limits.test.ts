import net from 'node:net';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from '../support/database.js';
import { startApi, type TestApi } from '../support/api.js';
import { expectDocumented, PUBLIC_API, type ApiResponse } from '../support/http.js';
import { createApiKey, createWorkspace, revokeApiKey } from '../../src/core/workspaces.js';
import { hashApiKey, newApiKey } from '../../src/secrets.js';
import { AuthFailureLimits } from '../../src/http/auth-failures.js';
import { sleep } from '../webhooks/support.js';
import { idOf, operator } from '../support/actors.js';

// A fair share of the read API (src/api/rate-limits.ts, src/http/auth-failures.ts): each workspace's requests a second
// and in flight, across all its keys; failed authentications per client address, refused before the database; where
// the caller stands on every answer. Each test runs its own app with small limits and workspaces of its own.

const NO_AUTH_LIMIT = { perMinute: 0, trustedProxies: [] };

/**
 * Sends the GETs pipelined, in ONE write on one socket (HTTP/1.1 lets a client send requests without waiting for
 * answers; Node hands them all to the app at once), and returns the answers in order, each checked against the
 * document. `sent` resolves once the write has gone out.
 */
function pipelined(
  url: string,
  requests: Array<{ path: string; key?: string }>,
): { sent: Promise<void>; answers: Promise<ApiResponse[]> } {
  const { hostname, port } = new URL(url);
  const socket = net.connect({ host: hostname, port: Number(port) });
  const raw = requests
    .map(
      ({ path, key }) =>
        `GET ${path} HTTP/1.1\r\nHost: ${hostname}\r\n${key ? `Authorization: Bearer ${key}\r\n` : ''}\r\n`,
    )
    .join('');
  const sent = new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.once('connect', () => socket.write(raw, () => resolve()));
  });
  const answers = new Promise<ApiResponse[]>((resolve, reject) => {
    let buffer = Buffer.alloc(0);
    const parsed: ApiResponse[] = [];
    socket.on('error', reject);
    socket.on('close', () =>
      reject(new Error(`the socket closed after ${parsed.length} of ${requests.length} answers`)),
    );
    socket.on('data', (chunk) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        const end = buffer.indexOf('\r\n\r\n');
        if (end < 0) return;
        const [statusLine, ...lines] = buffer.subarray(0, end).toString('latin1').split('\r\n');
        const headers = new Headers(
          lines.map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()] as [string, string]),
        );
        const length = Number(headers.get('content-length'));
        expect(headers.get('content-length'), statusLine).to.match(/^\d+$/);
        if (buffer.length < end + 4 + length) return;
        const text = buffer.subarray(end + 4, end + 4 + length).toString('utf8');
        buffer = buffer.subarray(end + 4 + length);
        const response: ApiResponse = {
          status: Number(statusLine.split(' ')[1]),
          headers,
          text,
          body: text ? JSON.parse(text) : undefined,
        };
        expectDocumented(PUBLIC_API, 'GET', requests[parsed.length].path, response);
        parsed.push(response);
        if (parsed.length === requests.length) {
          socket.removeAllListeners('close');
          socket.destroy();
          resolve(parsed);
          return;
        }
      }
    });
  });
  return { sent, answers };
}

describe('rate limits', () => {
  let db: Knex;
  let api: TestApi | undefined;
  let seq = 0;

  before(async () => {
    ({ db } = await testDatabase());
  });
  afterEach(async () => {
    await api?.close();
    api = undefined;
  });

  /** A workspace of this test's own with `keys` API keys. */
  const workspace = async (keys = 1) => {
    const slug = `rl-${process.pid}-${Date.now().toString(36)}-${++seq}`;
    await createWorkspace(db, operator, { slug });
    const made: string[] = [];
    for (let i = 0; i < keys; i++)
      made.push((await createApiKey(db, operator, { workspaceId: await idOf(db, slug) })).key);
    return made;
  };
  const standing = (res: ApiResponse) => [res.headers.get('ratelimit-policy'), res.headers.get('ratelimit')];

  it('counts a workspace across all its keys: beyond its rate a 429 with Retry-After, another workspace untouched', async () => {
    api = await startApi({ limits: { workspace: { ratePerSecond: 5, concurrency: 0 }, authFailures: NO_AUTH_LIMIT } });
    const [first, second] = await workspace(2);
    const [other] = await workspace(1);
    // One window of one second: five requests, alternating keys, then the sixth is refused. (Sequential requests
    // take milliseconds; the window starts with the first.)
    const answers: ApiResponse[] = [];
    for (let i = 0; i < 6; i++) answers.push(await api.get('/v1/me', i % 2 === 0 ? first : second));
    expect(answers.map((a) => a.status)).to.deep.equal([200, 200, 200, 200, 200, 429]);
    expect(answers.slice(0, 5).map((a) => standing(a)[1])).to.deep.equal(
      [4, 3, 2, 1, 0].map((r) => `"workspace";r=${r};t=1`),
    );
    expect(standing(answers[0])[0]).to.equal('"workspace";q=5;w=1');
    const refused = answers[5];
    expect(refused.body.error).to.include({ code: 'rate_limited', reason: 'rate' });
    expect(refused.headers.get('retry-after')).to.equal('1');
    expect(standing(refused)).to.deep.equal(['"workspace";q=5;w=1', '"workspace";r=0;t=1']);
    // Another workspace has its own share.
    const elsewhere = await api.get('/v1/me', other);
    expect([elsewhere.status, standing(elsewhere)[1]]).to.deep.equal([200, '"workspace";r=4;t=1']);
    // The next window serves again.
    await sleep(1100);
    expect((await api.get('/v1/me', second)).status).to.equal(200);
  });

  it("refuses a request beyond the workspace's requests in flight at once, without waiting for them", async () => {
    api = await startApi({ limits: { workspace: { ratePerSecond: 0, concurrency: 2 }, authFailures: NO_AUTH_LIMIT } });
    const [key] = await workspace(1);
    // Two requests held in flight: receivables wait for a lock the test holds on the ledger.
    const trx = await db.transaction();
    try {
      await trx.raw('LOCK TABLE customer_ledger IN ACCESS EXCLUSIVE MODE');
      const held = [api.get('/v1/receivables', key), api.get('/v1/receivables', key)];
      // both admitted and waiting for the lock in the database
      const waiting = async () =>
        Number(
          (
            await db.raw(
              `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
            )
          ).rows[0].n,
        );
      for (const deadline = Date.now() + 5000; (await waiting()) < 2 && Date.now() < deadline;) await sleep(20);
      expect(await waiting()).to.equal(2);
      // (refused while the two are still held: the refusal itself is held a second, what its Retry-After asks)
      const started = Date.now();
      const refused = await api.get('/v1/me', key);
      expect(Date.now() - started).to.be.within(900, 2500);
      expect(refused.status).to.equal(429);
      expect(refused.body.error).to.include({ code: 'rate_limited', reason: 'concurrency' });
      expect(refused.headers.get('retry-after')).to.equal('1');
      await trx.commit();
      // (admitted, both: 200 once the lock is gone; under a clock moved by faketime PostgreSQL's statement time limit
      // may cut their wait short as 503, see scripts/test-dates.ts; never a 429)
      const answered = (await Promise.all(held)).map((r) => r.status);
      expect(answered).to.deep.equal(
        process.env.FAKETIME ? answered.map((status) => (status === 503 ? 503 : 200)) : [200, 200],
      );
    } finally {
      if (!trx.isCompleted()) await trx.rollback();
    }
    // Their shares were given back.
    expect((await api.get('/v1/me', key)).status).to.equal(200);
  });

  it('holds the concurrency limit under pipelining: 50 requests in one write on one socket, a warm key, 4 admitted', async () => {
    // The rate limit on (its await sat between reading the count in flight and writing it back) and the key warm in the
    // key cache (authentication answered from memory), as a tenant would find it.
    api = await startApi({
      keyCache: true,
      limits: { workspace: { ratePerSecond: 1000, concurrency: 4 }, authFailures: NO_AUTH_LIMIT },
    });
    const [key] = await workspace(1);
    expect((await api.get('/v1/me', key)).status).to.equal(200);
    // Admitted requests are held in the database: receivables wait for a lock the test holds on the ledger, so the
    // server's count of statements waiting on it is the count of requests admitted and in flight.
    const waiting = async () =>
      Number(
        (
          await db.raw(
            `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
          )
        ).rows[0].n,
      );
    const trx = await db.transaction();
    let answers: ApiResponse[];
    try {
      await trx.raw('LOCK TABLE customer_ledger IN ACCESS EXCLUSIVE MODE');
      const sent = pipelined(
        api.url,
        Array.from({ length: 50 }, () => ({ path: '/v1/receivables', key })),
      );
      await sent.sent;
      for (const deadline = Date.now() + 5000; (await waiting()) < 4 && Date.now() < deadline;) await sleep(20);
      // (the rest had their refusal decided by now; a moment more in case any was admitted late)
      await sleep(500);
      expect(await waiting()).to.equal(4);
      await trx.commit();
      answers = await sent.answers;
    } finally {
      if (!trx.isCompleted()) await trx.rollback();
    }
    const statuses = answers.map((a) => (a.status === 429 ? `429 ${a.body.error.reason}` : String(a.status)));
    // Four are admitted and every other is refused for concurrency (none for the rate: 51 of 1000). Which four is not
    // fixed: the requests reach the limiter in the order their authentication ends, not always the order they came in.
    const admitted = process.env.FAKETIME ? (statuses.find((s) => s !== '429 concurrency') ?? '200') : '200';
    expect([...statuses].sort()).to.deep.equal(
      [...Array<string>(4).fill(admitted), ...Array<string>(46).fill('429 concurrency')].sort(),
    );
    // Their shares were given back.
    expect((await api.get('/v1/me', key)).status).to.equal(200);
  });

  it('holds the failed-authentication budget under pipelining: 50 bad keys in one write, 3 looked up, 47 refused', async () => {
    api = await startApi({
      limits: { workspace: { ratePerSecond: 0, concurrency: 0 }, authFailures: { perMinute: 3, trustedProxies: [] } },
    });
    // Count, from the server's side, the key look-ups that reached the database.
    const apiDb = (await testDatabase()).forRole('api');
    let lookups = 0;
    const counted = (query: { sql: string }) => {
      if (/from "api_keys" as "k"/.test(query.sql)) lookups++;
    };
    apiDb.on('query', counted);
    let answers: ApiResponse[];
    try {
      answers = await pipelined(
        api.url,
        Array.from({ length: 50 }, () => ({ path: '/v1/me', key: newApiKey() })),
      ).answers;
    } finally {
      apiDb.off('query', counted);
    }
    expect(answers.map((a) => `${a.status} ${a.body.error.reason}`)).to.deep.equal([
      ...Array<string>(3).fill('401 unknown'),
      ...Array<string>(47).fill('429 auth_failures'),
    ]);
    expect(lookups).to.equal(3);
    expect(answers.map((a) => a.headers.get('ratelimit')).slice(0, 3)).to.deep.equal(
      [2, 1, 0].map((r) => `"auth-failures";r=${r};t=60`),
    );
  });

  it('slows an address that fails authentication before the database, but never refuses a valid key', async () => {
    const [seen, unseen] = await workspace(2);
    const revokedSlug = `rl-revoked-${process.pid}-${++seq}`;
    await createWorkspace(db, operator, { slug: revokedSlug });
    const { id: revokedId, key: revoked } = await createApiKey(db, operator, {
      workspaceId: await idOf(db, revokedSlug),
    });
    await revokeApiKey(db, operator, { keyId: revokedId, workspaceId: 'every' });
    api = await startApi({
      keyCache: true,
      limits: { workspace: { ratePerSecond: 0, concurrency: 0 }, authFailures: { perMinute: 3, trustedProxies: [] } },
    });
    expect((await api.get('/v1/me', seen)).status).to.equal(200);
    // Every statement the app sends goes through the API role's pool: count the key look-ups among them (the key
    // cache's heartbeats and reads go there too).
    const apiDb = (await testDatabase()).forRole('api');
    let statements = 0;
    const counted = (query: { sql: string }) => {
      if (/from "api_keys" as "k"/.test(query.sql)) statements++;
    };
    apiDb.on('query', counted);
    // Three failures of three kinds use the address's three.
    const failures = [
      await api.get('/v1/me'),
      await api.get('/v1/me', newApiKey()),
      await api.get('/v1/fleets', newApiKey()),
    ];
    expect(failures.map((f) => [f.status, f.body.error.reason, standing(f)[1]])).to.deep.equal([
      [401, 'missing', '"auth-failures";r=2;t=60'],
      [401, 'unknown', '"auth-failures";r=1;t=60'],
      [401, 'unknown', '"auth-failures";r=0;t=60'],
    ]);
    expect(standing(failures[0])[0]).to.equal('"auth-failures";q=3;w=60');
    // Now a made-up key is refused before it is looked up: no transaction reaches the database for it.
    const before = statements;
    const refused = await Promise.all(Array.from({ length: 20 }, () => api!.get('/v1/me', newApiKey())));
    expect(statements - before).to.equal(0);
    apiDb.off('query', counted);
    expect(before).to.be.above(0); // (the count does see the app's statements: the failures above were looked up)
    for (const r of refused) {
      expect(r.status).to.equal(429);
      expect(r.body.error).to.include({ code: 'rate_limited', reason: 'auth_failures' });
      expect(Number(r.headers.get('retry-after'))).to.be.within(1, 60);
    }
    // A valid key still works from that address: one that worked before, and one this process never saw (the key
    // cache knows every key that can authenticate). A revoked key is refused with the made-up ones.
    expect((await api.get('/v1/me', seen)).status).to.equal(200);
    expect((await api.get('/v1/me', unseen)).status).to.equal(200);
    expect(api.keyCache!.isKnownKey(hashApiKey(unseen).toString('base64'))).to.equal(true);
    expect((await api.get('/v1/me', revoked)).body.error).to.include({ reason: 'auth_failures' });
  });

  it('remembers an unknown key briefly, and forgets it the moment a key with that value is made', async () => {
    api = await startApi({
      keyCache: true,
      limits: { workspace: { ratePerSecond: 0, concurrency: 0 }, authFailures: NO_AUTH_LIMIT },
    });
    const cache = api.keyCache!;
    const key = newApiKey();
    expect((await api.get('/v1/me', key)).body.error.reason).to.equal('unknown');
    expect(cache.isUnknown(hashApiKey(key).toString('base64'))).to.equal(true);
    // Made now (as `fleet-admin key create` writes it, from any process): the new key is announced.
    const { id: workspaceId } = await createWorkspace(db, operator, { slug: `rl-new-${process.pid}-${++seq}` });
    const generation = cache.generation;
    await db('api_keys').insert({ workspace_id: workspaceId, key_hash: hashApiKey(key) });
    for (const deadline = Date.now() + 2000; cache.generation === generation && Date.now() < deadline;) await sleep(10);
    expect(cache.isUnknown(hashApiKey(key).toString('base64'))).to.equal(false);
    expect((await api.get('/v1/me', key)).status).to.equal(200);
  });

  it('says where the caller stands on every answer: its workspace once the key is known, else its address', async () => {
    api = await startApi({
      limits: { workspace: { ratePerSecond: 50, concurrency: 8 }, authFailures: { perMinute: 30, trustedProxies: [] } },
    });
    const [key] = await workspace(1);
    const known = [
      await api.get('/v1/fleet/summary', key),
      await api.get('/v1/vehicles?limit=abc', key),
      await api.get(`/v1/webhooks/${'0'.repeat(8)}-0000-4000-8000-${'0'.repeat(12)}/deliveries`, key),
    ];
    expect(known.map((r) => r.status)).to.deep.equal([200, 400, 404]);
    for (const r of known) expect(standing(r)[0]).to.equal('"workspace";q=50;w=1');
    const unknown = [await api.get('/v1/nothing'), await api.get('/v1/me'), await api.get('/healthz')];
    expect(unknown.map((r) => r.status)).to.deep.equal([404, 401, 200]);
    for (const r of unknown) expect(standing(r)[0]).to.equal('"auth-failures";q=30;w=60');
  });
});

describe('the client address the failure limit counts', () => {
  it('is the peer, unless a trusted proxy names the client; an IPv6 client by its /64', () => {
    const plain = new AuthFailureLimits({ perMinute: 30, trustedProxies: [] });
    expect(plain.clientAddress('203.0.113.9', '198.51.100.7')).to.equal('203.0.113.9');
    expect(plain.clientAddress('::ffff:203.0.113.9', undefined)).to.equal('203.0.113.9');
    expect(plain.clientAddress('2001:db8:1:2:3:4:5:6', undefined)).to.equal('2001:db8:1:2::/64');
    expect(plain.clientAddress('2001:db8::1', undefined)).to.equal('2001:db8:0:0::/64');
    const proxied = new AuthFailureLimits({ perMinute: 30, trustedProxies: ['10.0.0.0/8'] });
    // the rightmost address that is not a trusted proxy; what a client wrote further left is not believed
    expect(proxied.clientAddress('10.1.2.3', '192.0.2.1, 198.51.100.7, 10.9.9.9')).to.equal('198.51.100.7');
    expect(proxied.clientAddress('203.0.113.9', '198.51.100.7')).to.equal('203.0.113.9');
    expect(proxied.clientAddress('10.1.2.3', 'nonsense')).to.equal('10.1.2.3');
  });
});
