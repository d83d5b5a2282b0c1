// npm run bench:webhooks: webhook delivery throughput and lag, beside a bare undici POST loop in the same run.
//
//  1. Baseline: a bare undici POST loop (no signing, no database), BENCH_CONCURRENCY requests at a time, to a local
//     receiver (its own process, node:http on 127.0.0.1, answers 204).
//  2. Throughput: BENCH_DELIVERIES deliveries are queued (events fanned out to BENCH_ENDPOINTS endpoints on that
//     receiver), then one Dispatcher drains them: deliveries/s from queued to accepted, every attempt recorded.
//     Repeated BENCH_RUNS times; the median is reported.
//  3. Lag: events published with publishEvent at a fixed BENCH_RATE deliveries/s for BENCH_SECONDS while the
//     dispatcher runs; p50/p99 of (accepted - queued) per delivery, both taken from the database clock.
//
// Database: DATABASE_URL, or the embedded cluster under .data/bench-pg (port 54359). Target: at least 1,000
// deliveries/s sustained on a 2-core machine.
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { request } from 'undici';
import pino from 'pino';
import type { Knex } from 'knex';
import { DATA_DIR } from '../src/config.js';
import { startBenchProcess } from './child.js';
import { openDatabase } from '../src/db/database.js';
import { createWorkspace } from '../src/workspaces.js';
import { createEndpoint } from '../src/webhooks/endpoints.js';
import { fanOutEvents } from '../src/webhooks/fanout.js';
import { publishEvent } from '../src/webhooks/publish.js';
import { Dispatcher, type DispatcherOptions } from '../src/webhooks/dispatcher.js';
import { loadOpenApiDocument } from '../src/contract/document.js';

const env = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const DELIVERIES = env('BENCH_DELIVERIES', 20_000);
const ENDPOINTS = env('BENCH_ENDPOINTS', 4);
const CONCURRENCY = env('BENCH_CONCURRENCY', 64);
const RUNS = env('BENCH_RUNS', 3);
const RATE = env('BENCH_RATE', 500);
const SECONDS = env('BENCH_SECONDS', 10);
const SLUG = 'bench-webhooks';

const startReceiver = () => startBenchProcess('webhooks.ts', ['receiver']);

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** Bare undici POSTs of the same body size, CONCURRENCY at a time: the ceiling of client + receiver here. */
async function baseline(url: string, count: number, body: string): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next++ < count) {
        const res = await request(`${url}/baseline`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
        await res.body.dump();
        if (res.statusCode !== 204) throw new Error(`baseline got ${res.statusCode}`);
      }
    }),
  );
  return count / ((performance.now() - started) / 1000);
}

/** Records `events` booking.confirmed events and fans them out, in chunks, without sending anything yet. */
async function queueBacklog(db: Knex, workspaceId: string, events: number, data: unknown): Promise<number> {
  let deliveries = 0;
  for (let done = 0; done < events; done += 1000) {
    const rows = Array.from({ length: Math.min(1000, events - done) }, () => ({ workspace_id: workspaceId, event: 'booking.confirmed', data: JSON.stringify(data), source: 'publish' }));
    deliveries += await db.transaction(async (trx) => fanOutEvents(trx, (await trx('events').insert(rows).returning('id')).map((r) => r.id)));
  }
  return deliveries;
}

async function waitForAccepted(dispatcher: Dispatcher, count: number): Promise<void> {
  while (dispatcher.totals.accepted < count) {
    if (dispatcher.totals.attempted > dispatcher.totals.accepted) throw new Error(`${dispatcher.totals.attempted - dispatcher.totals.accepted} attempts failed`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

interface Figures {
  rates: number[];
  baselines: number[];
  bodyBytes: number;
  lag: { rate: number; deliveries: number; p50: number; p99: number };
}

async function measure(db: Knex, receiverUrl: string, options: Omit<DispatcherOptions, 'db' | 'logger'>): Promise<Figures> {
  const logger = pino({ level: 'warn' });
  // A fresh bench workspace with ENDPOINTS endpoints on the receiver, subscribed to everything.
  await db('workspaces').where({ slug: SLUG }).delete();
  const workspace = await createWorkspace(db, { slug: SLUG });
  for (let i = 0; i < ENDPOINTS; i++) await createEndpoint(db, { workspaceSlug: SLUG, url: `${receiverUrl}/hooks/${i}`, name: `bench ${i}` });
  const content = loadOpenApiDocument().webhooks['booking.confirmed'].post.requestBody!.content['application/json'] as { example?: { data: unknown } };
  const data = content.example!.data;
  const clear = () => db('events').where({ workspace_id: workspace.id }).delete();

  // Warm-up: connections, plans, JIT.
  await baseline(receiverUrl, 2000, '{}');
  await queueBacklog(db, workspace.id, 500, data);
  await new Dispatcher({ db, logger, ...options }).runOnce();
  await clear();
  await queueBacklog(db, workspace.id, 1, data);
  const sampleBody: string = (await db('deliveries').where({ workspace_id: workspace.id }).first('body')).body;
  await clear();

  const baselines: number[] = [];
  const rates: number[] = [];
  for (let run = 1; run <= RUNS; run++) {
    baselines.push(await baseline(receiverUrl, DELIVERIES, sampleBody));
    const queued = await queueBacklog(db, workspace.id, Math.ceil(DELIVERIES / ENDPOINTS), data);
    const dispatcher = new Dispatcher({ db, logger, ...options });
    const started = performance.now();
    await dispatcher.start();
    await waitForAccepted(dispatcher, queued);
    const seconds = (performance.now() - started) / 1000;
    await dispatcher.stop();
    const recorded = Number((await db('delivery_attempts').join('deliveries', 'deliveries.id', 'delivery_attempts.delivery_id').where('deliveries.workspace_id', workspace.id).count({ n: '*' }).first())!.n);
    if (recorded !== queued) throw new Error(`${recorded} attempts recorded for ${queued} deliveries`);
    rates.push(queued / seconds);
    process.stderr.write(`run ${run}: ${queued} deliveries in ${seconds.toFixed(2)} s = ${Math.round(queued / seconds)}/s; baseline ${Math.round(baselines.at(-1)!)}/s\n`);
    await clear();
  }

  // Lag at a fixed rate: publishEvent (validation, one transaction, NOTIFY) every tick, the dispatcher running.
  const dispatcher = new Dispatcher({ db, logger, ...options });
  await dispatcher.start();
  const tickMs = 20;
  const eventsPerTick = RATE / ENDPOINTS / (1000 / tickMs);
  let published = 0;
  const started = performance.now();
  while (performance.now() - started < SECONDS * 1000) {
    const due = Math.floor(((performance.now() - started) / tickMs + 1) * eventsPerTick);
    for (; published < due; published++) await publishEvent(db, { workspaceId: workspace.id, event: 'booking.confirmed', data, source: 'publish' });
    await new Promise((resolve) => setTimeout(resolve, tickMs - ((performance.now() - started) % tickMs)));
  }
  const sent = published * ENDPOINTS;
  await waitForAccepted(dispatcher, sent);
  await dispatcher.stop();
  const { rows } = await db.raw(
    `SELECT percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - created_at) * 1000) AS ms, count(*) AS n
     FROM deliveries WHERE workspace_id = ? AND status = 'accepted'`,
    [workspace.id],
  );
  await db('workspaces').where({ id: workspace.id }).delete();
  return { rates, baselines, bodyBytes: Buffer.byteLength(sampleBody), lag: { rate: sent / SECONDS, deliveries: Number(rows[0].n), p50: rows[0].ms[0], p99: rows[0].ms[1] } };
}

async function main(): Promise<void> {
  const database = await openDatabase(process.env.DATABASE_URL ? {} : { embeddedDir: path.join(DATA_DIR, 'bench-pg'), embeddedPort: 54359, poolMax: 10 });
  const options: Omit<DispatcherOptions, 'db' | 'logger'> = { concurrency: CONCURRENCY, perEndpointConcurrency: Math.ceil(CONCURRENCY / ENDPOINTS) };
  let receiver: { child: ChildProcess; url: string } | undefined;
  let figures: Figures;
  try {
    receiver = await startReceiver();
    figures = await measure(database.db, receiver.url, options);
  } finally {
    if (receiver) {
      receiver.child.kill('SIGTERM');
      await once(receiver.child, 'exit');
    }
    await database.close();
  }

  const { rates, baselines, lag } = figures;
  console.log(`\nWebhook delivery, Node ${process.version}, ${os.cpus().length} CPUs, database ${process.env.DATABASE_URL ? 'DATABASE_URL' : 'embedded .data/bench-pg'}`);
  console.log(`Dataset: ${DELIVERIES.toLocaleString('en-US')} deliveries per run (${Math.ceil(DELIVERIES / ENDPOINTS).toLocaleString('en-US')} booking.confirmed events x ${ENDPOINTS} endpoints), body ${figures.bodyBytes} bytes, receiver answers 204`);
  console.log(`Dispatcher: concurrency ${options.concurrency}, ${options.perEndpointConcurrency} per endpoint; baseline: bare undici POST loop, ${CONCURRENCY} at a time\n`);
  console.log(`throughput, queued -> accepted (every attempt recorded): median ${Math.round(median(rates))}/s  [${rates.map((r) => Math.round(r)).join(', ')}]`);
  console.log(`baseline, bare undici POST loop:                       median ${Math.round(median(baselines))}/s  [${baselines.map((r) => Math.round(r)).join(', ')}]`);
  console.log(`ratio to baseline: ${((median(rates) / median(baselines)) * 100).toFixed(0)}%`);
  console.log(`lag at ${Math.round(lag.rate)} deliveries/s for ${SECONDS} s (${lag.deliveries} deliveries): p50 ${lag.p50.toFixed(1)} ms, p99 ${lag.p99.toFixed(1)} ms`);
  if (median(rates) < 1000) {
    console.error('\nBelow the target of 1,000 deliveries/s.');
    process.exitCode = 1;
  }
}

if (process.argv[2] === 'receiver') {
  // The receiver process: reads the body, answers 204.
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(204);
      res.end();
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    process.stdout.write(`listening ${typeof address === 'object' && address ? address.port : 0}\n`);
  });
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
  // Never outlive the bench process.
  const parent = process.ppid;
  setInterval(() => process.ppid !== parent && process.exit(0), 1000).unref();
} else {
  await main();
}
