import http from 'node:http';
import { once } from 'node:events';
import zlib from 'node:zlib';
import { expect } from 'chai';
import { testDatabase } from '../support/database.js';
import { startApi, type TestApi } from '../support/api.js';
import { expectDocumented, PUBLIC_API } from '../support/http.js';
import { fixture } from '../support/fixtures.js';
import { createApiKey } from '../../src/core/workspaces.js';
import { idOf, operator } from '../support/actors.js';

// Answers compressed on request (src/api/compression.ts), through a real server on a real database. Requests go
// through node:http, which hands over the bytes as sent (fetch would decompress them and hide the encoding).
// The clock: 2026-11-22T08:00:00Z, 12:00 in Asia/Dubai.
const NOW = new Date('2026-11-22T08:00:00.000Z');

interface RawAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  bytes: Buffer;
}

function rawGet(url: string, options: { method?: string; headers?: Record<string, string> } = {}): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: options.method ?? 'GET', headers: options.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, bytes: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

const DECODERS: Record<string, (b: Buffer) => Buffer> = { br: zlib.brotliDecompressSync, gzip: zlib.gunzipSync };

/** The body as the client reads it: decoded by its Content-Encoding (none: as sent). */
function decoded(answer: RawAnswer): string {
  const encoding = answer.headers['content-encoding'];
  return (encoding ? DECODERS[encoding](answer.bytes) : answer.bytes).toString('utf8');
}

const varies = (answer: RawAnswer) =>
  String(answer.headers.vary ?? '')
    .split(/,\s*/)
    .map((v) => v.toLowerCase())
    .includes('accept-encoding');

describe('answers compressed on request', () => {
  let api: TestApi;
  let key: string;

  /** GET path with the key and an Accept-Encoding (none when undefined), checked against the document once decoded. */
  async function get(path: string, acceptEncoding?: string, method = 'GET'): Promise<RawAnswer & { text: string }> {
    const headers: Record<string, string> = { authorization: `Bearer ${key}` };
    if (acceptEncoding !== undefined) headers['accept-encoding'] = acceptEncoding;
    const answer = await rawGet(api.url + path, { method, headers });
    const text = method === 'HEAD' ? '' : decoded(answer);
    if (method === 'GET' && path.startsWith('/v1/')) {
      const fetchHeaders = new Headers(
        Object.entries(answer.headers).map(([k, v]) => [k, String(v)] as [string, string]),
      );
      expectDocumented(PUBLIC_API, 'GET', path, {
        status: answer.status,
        headers: fetchHeaders,
        text,
        body: JSON.parse(text),
      });
    }
    return { ...answer, text };
  }

  before(async () => {
    const { db } = await testDatabase();
    // 30 customers, each with a car picked up today and an invoice 10 days overdue: today's operations and the
    // receivables run to several kB; /v1/me stays under 1 kB.
    const f = await fixture(db, { timezone: 'Asia/Dubai' });
    for (let i = 0; i < 30; i++) {
      const customerId = await f.customer({ name: `Customer ${String(i).padStart(2, '0')} Al Mansoori` });
      const vehicleId = await f.vehicle({ plate: `Dubai Z ${1000 + i}` });
      const bookingId = await f.booking({
        vehicleId,
        customerId,
        status: 'confirmed',
        pickupAt: '2026-11-22T10:00:00Z',
        dropoffAt: '2026-11-25T10:00:00Z',
        amount: 45000,
      });
      await f.invoice({ customerId, bookingId, total: 45000 + i, dueDate: '2026-11-12' });
    }
    key = (await createApiKey(db, operator, { workspaceId: await idOf(db, f.slug) })).key;
    api = await startApi({ now: NOW });
  });
  after(() => api.close());

  for (const path of ['/v1/operations/today', '/v1/receivables?limit=50', '/v1/vehicles?limit=50']) {
    it(`GET ${path}: br and gzip decode to the uncompressed answer byte for byte, with Vary`, async () => {
      const plain = await get(path);
      expect(plain.status).to.equal(200);
      expect(plain.headers['content-encoding']).to.equal(undefined);
      expect(varies(plain), 'Vary on an answer sent as is because the client did not ask').to.equal(true);
      expect(plain.bytes.length, 'a fixture answer over the 1 kB threshold').to.be.above(3000);
      for (const encoding of ['br', 'gzip']) {
        const packed = await get(path, encoding);
        expect(packed.status).to.equal(200);
        expect(packed.headers['content-encoding'], encoding).to.equal(encoding);
        expect(varies(packed)).to.equal(true);
        expect(packed.headers['content-type']).to.match(/^application\/json/);
        expect(packed.bytes.length, `${encoding} is smaller`).to.be.below(plain.bytes.length / 2);
        expect(packed.text, encoding).to.equal(plain.text);
      }
    });
  }

  it('negotiates by Accept-Encoding: q-values, identity, *, br;q=0', async () => {
    const cases: Array<[string | undefined, string | undefined]> = [
      [undefined, undefined],
      ['identity', undefined],
      ['br', 'br'],
      ['gzip', 'gzip'],
      ['gzip, deflate, br', 'br'],
      ['br;q=0, gzip', 'gzip'],
      ['gzip;q=1, br;q=0.5', 'gzip'],
      ['gzip;q=0.2, br;q=0.8', 'br'],
      ['br;q=0, gzip;q=0', undefined],
      ['*', 'br'],
      ['*, br;q=0', 'gzip'],
      ['deflate', undefined],
      ['zstd', undefined],
    ];
    const plain = await get('/v1/receivables?limit=50');
    for (const [accept, expected] of cases) {
      const answer = await get('/v1/receivables?limit=50', accept);
      expect(answer.headers['content-encoding'], `Accept-Encoding: ${accept}`).to.equal(expected);
      expect(varies(answer), `Accept-Encoding: ${accept}`).to.equal(true);
      expect(answer.text, `Accept-Encoding: ${accept}`).to.equal(plain.text);
    }
  });

  it('sends a small answer (under 1 kB) as it is, with Vary', async () => {
    const me = await get('/v1/me', 'br, gzip');
    expect(me.status).to.equal(200);
    expect(me.bytes.length).to.be.below(1024);
    expect(me.headers['content-encoding']).to.equal(undefined);
    expect(varies(me)).to.equal(true);
    expect(JSON.parse(me.bytes.toString('utf8')).workspace).to.be.an('object');
  });

  it('answers HEAD with the Content-Encoding and Vary of GET and no body', async () => {
    for (const accept of ['br', 'gzip', 'identity']) {
      const got = await get('/v1/operations/today', accept);
      const head = await get('/v1/operations/today', accept, 'HEAD');
      expect(head.status, accept).to.equal(200);
      expect(head.headers['content-encoding'], accept).to.equal(got.headers['content-encoding']);
      expect(head.headers.vary, accept).to.equal(got.headers.vary);
      expect(head.headers['content-type'], accept).to.equal(got.headers['content-type']);
      expect(head.headers['content-length'], accept).to.equal(got.headers['content-length']);
      expect(head.bytes.length, accept).to.equal(0);
    }
  });

  it('sends an error answer uncompressed, its documented body whole', async () => {
    for (const [path, status] of [
      ['/v1/receivables?limit=0', 400],
      ['/v1/nothing', 404],
    ] as const) {
      const answer = await get(path, 'br, gzip');
      expect(answer.status, path).to.equal(status);
      expect(answer.headers['content-encoding'], path).to.equal(undefined);
      expect(JSON.parse(answer.bytes.toString('utf8')).error.requestId, path).to.equal(answer.headers['x-request-id']);
    }
    const unauthenticated = await rawGet(`${api.url}/v1/operations/today`, { headers: { 'accept-encoding': 'br' } });
    expect(unauthenticated.status).to.equal(401);
    expect(unauthenticated.headers['content-encoding']).to.equal(undefined);
    expect(JSON.parse(unauthenticated.bytes.toString('utf8')).error.code).to.equal('unauthorized');
  });

  it('logs a client that hangs up in the middle of a compressed answer at debug, not as an error', async () => {
    // The reference page's script (3.5 MB) is streamed through brotli for a while: the client goes after its first bytes.
    const req = http.request(`${api.url}/docs/scalar.js`, { headers: { 'accept-encoding': 'br' } });
    req.end();
    const [res] = (await once(req, 'response')) as [http.IncomingMessage];
    expect(res.headers['content-encoding']).to.equal('br');
    await once(res, 'data');
    req.destroy();
    const deadline = Date.now() + 5000;
    while (!api.logs.some((l) => l.msg === 'client closed the connection during the answer') && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    const line = api.logs.find((l) => l.msg === 'client closed the connection during the answer');
    expect(line, 'the debug line').to.include({ level: 20 });
    expect(line!.requestId).to.be.a('string');
    expect(api.logs.filter((l) => (l.level as number) >= 50)).to.deep.equal([]);
  });

  it('compresses the OpenAPI document and the reference page script', async () => {
    for (const path of ['/openapi.json', '/docs/scalar.js']) {
      const plain = await rawGet(api.url + path);
      const packed = await rawGet(api.url + path, { headers: { 'accept-encoding': 'br' } });
      expect(plain.headers['content-encoding'], path).to.equal(undefined);
      expect(packed.headers['content-encoding'], path).to.equal('br');
      expect(varies(packed), path).to.equal(true);
      expect(decoded(packed), path).to.equal(plain.bytes.toString('utf8'));
    }
  });
});
