// Where a GET operation's time goes in the database: runs each operation of `npm run bench` once through its
// handler, captures the SQL it sends, and prints EXPLAIN (ANALYZE, BUFFERS) of every statement, on the `large` and
// `small` workspaces of the bench database (DATABASE_URL, or the cluster under .data/large-pg on FRS_BENCH_PG_PORT).
// Usage: tsx bench/explain.ts [substring of the operation path] [slug]
// EXPLAIN_CPU=<n>: also runs each statement n times as the service sends it (extended protocol, prepared when the
// service prepares it) and prints the PostgreSQL backend's CPU per execution, read from /proc: EXPLAIN ANALYZE's
// own timing inflates per-row work, and this figure includes binding, building and sending the answer.
import crypto from 'node:crypto';
import path from 'node:path';
import pg from 'pg';
import pino from 'pino';
import { processConfig } from '../src/config.js';
import { openDatabase } from '../src/db/database.js';
import { publicOperations } from '../src/api/operations/index.js';
import { Cursors } from '../src/http/cursors.js';
import { processCpuMicros } from './proc-cpu.js';

const [only = '', slugArg] = process.argv.slice(2);
const OPERATIONS: Array<[string, string, Record<string, unknown>]> = [
  ['/v1/fleets', 'listFleets', {}],
  ['/v1/fleet/summary', 'getFleetSummary', {}],
  ['/v1/vehicles?limit=20', 'searchVehicles', { limit: 20 }],
  [
    '/v1/vehicles?q=toyota&from=...',
    'searchVehicles',
    { q: 'toyota', from: '2026-12-01T06:00:00Z', to: '2026-12-04T06:00:00Z', limit: 50 },
  ],
  ['/v1/operations/today', 'getOperationsToday', {}],
  ['/v1/bookings/summary', 'getBookingSummary', {}],
  ['/v1/finance/overview', 'getFinanceOverview', {}],
  ['/v1/receivables?limit=50', 'getReceivables', { limit: 50 }],
  ['/v1/receivables?search=al&limit=200', 'getReceivables', { search: 'al', limit: 200 }],
  ['/v1/receivables?search=zzq', 'getReceivables', { search: 'zzq', limit: 50 }],
  ['/v1/webhooks', 'listWebhookEndpoints', {}],
];

// Output piped into a reader that stops early (`| head`): the rest is dropped and the script runs on to its end, where it
// stops the cluster it started. Left to itself it would die of EPIPE with the cluster still running.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code !== 'EPIPE') throw err;
  process.stdout.write = (() => true) as typeof process.stdout.write;
});

const database = await openDatabase(
  process.env.DATABASE_URL
    ? { schema: 'as-is' }
    : {
        embeddedDir: path.join(processConfig().dataDir, 'large-pg'),
        embeddedPort: Number(process.env.FRS_BENCH_PG_PORT ?? 54479),
        embeddedDurable: false,
        schema: 'as-is',
      },
);
const { db } = database;
const captured: Array<{ sql: string; bindings: unknown[]; prepared?: boolean }> = [];
// The statements as sent (placeholders $1, $2, ... and their values), replayed on one connection under EXPLAIN.
db.on('query', (q: { sql: string; bindings?: unknown[] }) => captured.push({ sql: q.sql, bindings: q.bindings ?? [] }));
const connection = await db.client.acquireConnection();
// The query modules' statements (rows() in src/queries/common.ts) go to a pooled connection directly, not through
// knex's events: captured as { text, values } query configs (prepared ones carry a name too).
const clientQuery = pg.Client.prototype.query;
pg.Client.prototype.query = function (this: pg.Client, config: unknown, ...rest: unknown[]) {
  const statement = config as { name?: string; text?: string; values?: unknown[] };
  if (statement && typeof statement === 'object' && statement.text) {
    captured.push({ sql: statement.text, bindings: statement.values ?? [], prepared: statement.name !== undefined });
  }
  return (clientQuery as (...args: unknown[]) => unknown).call(this, config, ...rest);
} as typeof clientQuery;
const CPU_RUNS = Number(process.env.EXPLAIN_CPU ?? 0);
let cpuStatements = 0;
const backendPid = CPU_RUNS ? Number((await connection.query('SELECT pg_backend_pid() AS pid')).rows[0].pid) : 0;

const now = new Date();
// First pages only: a key of this run's own signs their nextCursor, and no cursor is ever checked.
const cursors = new Cursors([crypto.randomBytes(32)]);
for (const slug of slugArg ? [slugArg] : ['large', 'small']) {
  const ws = await db('workspaces').where({ slug }).first('id', 'slug', 'status', 'timezone');
  for (const [label, operationId, query] of OPERATIONS.filter(([l]) => l.includes(only))) {
    captured.length = 0;
    await publicOperations[operationId].handle({
      db,
      now,
      query,
      params: {},
      headers: {},
      logger: pino({ level: 'silent' }),
      cursors,
      signal: new AbortController().signal,
      caller: {
        keyId: '',
        role: null,
        workspace: { id: ws.id, slug: ws.slug, status: ws.status, timezone: ws.timezone },
      },
    });
    for (const { sql, bindings, prepared } of [...captured]) {
      let plan;
      if (prepared) {
        // As the service runs it: a prepared statement, explained after six executions, when PostgreSQL has chosen
        // between a generic plan (planned once) and planning every execution afresh; "Planning Time" tells which.
        // EXECUTE takes its arguments as literals (a bind parameter is not seen there)
        const literal = (v: unknown) =>
          v === null || v === undefined ? 'NULL' : (connection as pg.Client).escapeLiteral(String(v));
        const args = bindings.length ? `(${bindings.map(literal).join(', ')})` : '';
        await connection.query(`PREPARE frs_explain AS ${sql}`);
        for (let i = 0; i < 6; i++) await connection.query(`EXECUTE frs_explain${args}`);
        plan = await connection.query(`EXPLAIN (ANALYZE, BUFFERS) EXECUTE frs_explain${args}`);
        await connection.query(`DEALLOCATE frs_explain`);
      } else {
        plan = await connection.query(`EXPLAIN (ANALYZE, BUFFERS) ${sql}`, bindings);
      }
      const kind = prepared ? ' (prepared, 7th execution)' : '';
      console.log(
        `\n===== ${slug} ${label}${kind}\n${plan.rows.map((r: Record<string, string>) => r['QUERY PLAN']).join('\n')}`,
      );
      if (CPU_RUNS) {
        // A name of its own per statement: the client remembers which names this connection has prepared.
        const statement = {
          ...(prepared && { name: `frs_explain_cpu_${++cpuStatements}` }),
          text: sql,
          values: bindings,
        };
        for (let i = 0; i < 20; i++) await connection.query(statement);
        const [cpu, wall] = [processCpuMicros(backendPid), process.hrtime.bigint()];
        for (let i = 0; i < CPU_RUNS; i++) await connection.query(statement);
        const perRun = (processCpuMicros(backendPid) - cpu) / CPU_RUNS;
        const wallPerRun = Number(process.hrtime.bigint() - wall) / 1e3 / CPU_RUNS;
        console.log(
          `PostgreSQL CPU per execution: ${perRun.toFixed(0)} µs (${CPU_RUNS} runs; ${wallPerRun.toFixed(0)} µs round trip)`,
        );
      }
    }
  }
}
await db.client.releaseConnection(connection);
await database.close();
