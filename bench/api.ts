// npm run bench: every GET operation measured with autocannon (10 connections) on the large dataset, beside a
// plain-Koa baseline in the same run. Target: p99 under 100 ms for every operation.
//
// Dataset: the workspace `large` (10,000 vehicles, 1,000,000 bookings, 1,000,000 invoices, 1,500,000 payments,
// 50,000 customers) on DATABASE_URL, or on the embedded cluster under .data/large-pg (port FRS_BENCH_PG_PORT, default 54479). It is
// generated on first use with seedLarge (several minutes). Options: BENCH_SECONDS (default 10), BENCH_CONNECTIONS
// (default 10), BENCH_ONLY (measure only the operations whose path contains it).
import path from 'node:path';
import { once } from 'node:events';
import autocannon from 'autocannon';
import { DATA_DIR } from '../src/config.js';
import { openDatabase } from '../src/db/database.js';
import { createApiKey } from '../src/workspaces.js';
import { seedLarge } from '../seeds/large.js';
import { startBenchProcess } from './child.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const SLUG = 'large';

const startServer = (args: string[]) => startBenchProcess('server.ts', args);

async function measure(name: string, url: string, key?: string) {
  const result = await autocannon({
    url,
    connections: CONNECTIONS,
    duration: SECONDS,
    headers: key ? { authorization: `Bearer ${key}` } : {},
  });
  const non2xx = result.non2xx + result.errors;
  return { name, reqPerSec: Math.round(result.requests.average), p50: result.latency.p50, p99: result.latency.p99, non2xx };
}

const database = await openDatabase(
  process.env.DATABASE_URL
    ? { schema: 'migrate' }
    : { embeddedDir: path.join(DATA_DIR, 'large-pg'), embeddedPort: Number(process.env.FRS_BENCH_PG_PORT ?? 54479), schema: 'migrate' },
);
const { db } = database;
const existing = await db('workspaces').where({ slug: SLUG }).first('id');
if (!existing || !(await db('bookings').where({ workspace_id: existing.id }).first('id'))) {
  process.stderr.write('Generating the large dataset (first run only)...\n');
  await seedLarge(db, SLUG, { progress: true });
}
const ws = await db('workspaces').where({ slug: SLUG }).first('id');
const counts: Record<string, number> = Object.fromEntries(
  await Promise.all(
    ['vehicles', 'bookings', 'invoices', 'payments', 'customers'].map(async (t) => [
      t,
      Number((await db(t).where({ workspace_id: ws.id }).count({ n: '*' }))[0].n),
    ] as const),
  ),
);
const { key } = await createApiKey(db, { workspaceSlug: SLUG, role: 'bench' });

const baseline = await startServer(['baseline']);
const service = await startServer(['service', database.url]);
const results = [await measure('plain Koa baseline (fixed JSON, no database)', `${baseline.url}/`)];
const operations = [
  '/v1/me',
  '/v1/fleets',
  '/v1/fleet/summary',
  '/v1/vehicles?limit=20',
  '/v1/vehicles?q=toyota&from=2026-12-01T06:00:00Z&to=2026-12-04T06:00:00Z&limit=50',
  '/v1/operations/today',
  '/v1/bookings/summary',
  '/v1/finance/overview',
  '/v1/receivables?limit=50',
  '/v1/receivables?search=al&limit=200',
  '/v1/receivables?search=zzq',
  '/v1/webhooks',
];
// BENCH_ONLY=<substring> measures only the matching operations (the baseline always runs).
for (const op of operations.filter((o) => o.includes(process.env.BENCH_ONLY ?? ''))) {
  // A short warm-up so the first connections and plans are not what is measured.
  await autocannon({ url: service.url + op, connections: 2, amount: 20, headers: { authorization: `Bearer ${key}` } });
  results.push(await measure(`GET ${op}`, service.url + op, key));
}
for (const s of [baseline, service]) {
  s.child.kill('SIGTERM');
  await once(s.child, 'exit');
}
await database.close();

console.log(`\nDataset: workspace "${SLUG}": ${Object.entries(counts).map(([k, v]) => `${v.toLocaleString('en-US')} ${k}`).join(', ')}`);
console.log(`autocannon: ${CONNECTIONS} connections, ${SECONDS} s per operation, Node ${process.version}\n`);
console.log(['operation'.padEnd(92), 'req/s'.padStart(8), 'p50 ms'.padStart(8), 'p99 ms'.padStart(8), 'non-2xx'.padStart(8), '  p99<100ms'].join(''));
for (const r of results) {
  console.log(
    [r.name.padEnd(92), String(r.reqPerSec).padStart(8), String(r.p50).padStart(8), String(r.p99).padStart(8), String(r.non2xx).padStart(8), r.name.startsWith('GET') ? (r.p99 < 100 ? '  yes' : '  NO') : ''].join(''),
  );
}
const failed = results.filter((r) => r.name.startsWith('GET') && (r.p99 >= 100 || r.non2xx > 0));
if (failed.length) {
  console.error(`\n${failed.length} operation(s) missed the target or answered non-2xx.`);
  process.exitCode = 1;
}
