// A server process for the benchmark: the real app on the given database, or one of two baselines with no database:
// `baseline`, plain Koa answering a fixed JSON body (the ceiling of Koa on this machine), and `framework`, Koa with
// openapi-backend configured as the app configures it (same document, routing, request validation, security
// handler) answering GET /v1/me with a fixed body (how much of /v1/me is the framework and how much is ours);
// `fixed <file>`, plain Koa answering GET /<i> with the i-th of the JSON strings in the file, as they are (the ceiling
// for an answer of that size and character mix).
// `service` runs with the rate limits off, `service-limited` with them as configured; a third argument, read replicas'
// URLs (as DATABASE_READ_URL takes them), routes the reads as src/main.ts does. Prints "listening <port>" when ready.
import fs from 'node:fs';
import Koa from 'koa';
import pino from 'pino';
import { createApp } from '../src/api/app.js';
import { contractBackend, memoiseOperations } from '../src/http/contract.js';
import { KeyCache } from '../src/api/key-cache.js';
import { processConfig, readUrlsFromEnv } from '../src/config.js';
import { openDatabase } from '../src/db/database.js';
import { ReadRouting } from '../src/db/read-routing.js';

// The second argument: the database URL (service modes) or the file of bodies (fixed).
const [mode, argument, readUrls] = process.argv.slice(2);
let app: Koa;
if (mode === 'baseline') {
  app = new Koa();
  const body = JSON.stringify({ total: 10000, byStatus: { available: 1, rented: 2, in_service: 3, inactive: 4 } });
  app.use((ctx) => {
    ctx.type = 'application/json';
    ctx.body = body;
  });
} else if (mode === 'fixed') {
  app = new Koa();
  const bodies = JSON.parse(fs.readFileSync(argument, 'utf8')) as string[];
  app.use((ctx) => {
    ctx.type = 'application/json';
    ctx.body = bodies[Number(ctx.path.slice(1))];
  });
} else if (mode === 'framework') {
  app = new Koa();
  const me = { workspace: { slug: 'large', status: 'active' }, role: 'bench' };
  const backend = contractBackend({
    handlers: {
      getMe: async () => ({ status: 200, body: me }),
      notFound: () => ({ status: 404, body: { error: 'not found' } }),
      validationFail: () => ({ status: 400, body: { error: 'invalid' } }),
      unauthorizedHandler: () => ({ status: 401, body: { error: 'unauthorized' } }),
    },
    securityHandlers: { bearerAuth: async () => true },
  });
  await backend.init();
  memoiseOperations(backend);
  app.use(async (ctx) => {
    const result = await backend.handleRequest(
      { method: ctx.method, path: ctx.path, query: ctx.querystring, headers: ctx.headers as Record<string, string> },
      ctx,
    );
    ctx.status = result.status;
    ctx.body = result.body;
  });
} else {
  const database = await openDatabase({ url: argument, poolMax: 20, schema: 'as-is' });
  // As in production: the API's connections run as its database role.
  const logger = pino({ level: 'warn' });
  // As in production (src/main.ts): key lookups cached, dropped on every announced key or workspace change, heartbeats
  // through the API's pool.
  const apiDb = database.forRole('api');
  const keyCache = await KeyCache.start(() => database.connectAs('api'), apiDb, logger);
  // `service`: the per-workspace and per-address limits off, so that a bench measures the operation, not the limiter
  // (FRS_API_RATE_LIMIT=0, FRS_API_CONCURRENCY=0, FRS_API_AUTH_FAILURE_LIMIT=0); `service-limited`: as configured
  // (the defaults), for the noisy-neighbour bench.
  const limits =
    mode === 'service-limited'
      ? undefined
      : { workspace: { ratePerSecond: 0, concurrency: 0 }, authFailures: { perMinute: 0, trustedProxies: [] } };
  // (service-limited also sheds load past FRS_SHED_EVENT_LOOP_LAG_MS, as src/main.ts does)
  const shedEventLoopLagMs = mode === 'service-limited' ? processConfig().shedEventLoopLagMs : 0;
  // `service` keeps no answers (a bench repeats one request, and is to measure building it); service-limited as configured.
  const answerCacheBytes = mode === 'service-limited' ? undefined : 0;
  const reads = await ReadRouting.start({
    database,
    primary: apiDb,
    urls: readUrlsFromEnv({ DATABASE_READ_URL: readUrls }),
    logger,
  });
  app = await createApp({ db: apiDb, logger, keyCache, limits, shedEventLoopLagMs, answerCacheBytes, reads });
}
const server = app.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`listening ${typeof address === 'object' && address ? address.port : 0}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
