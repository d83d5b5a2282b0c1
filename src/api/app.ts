// The public API (openapi/openapi.yaml) on the public listener: its operations (src/api/operations/, one file each),
// authenticated by API keys, each workspace held to its share of the API, answers revalidated by their ETag and kept
// by it, reads routed to replicas. The listener's edge, the contract adapter and the error answers are the HTTP kit's
// (src/http/); main mounts the settings screen beside the API on the same listener (publicListener's `beside`).
import Koa from 'koa';
import type { Context as BackendContext } from 'openapi-backend';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { loadOpenApiDocument, strictOpenApiDocument } from '../contract/document.js';
import { authenticate, type Caller } from './auth.js';
import { AuthFailureLimits, type AuthFailureSettings, type AuthGuard } from '../http/auth-failures.js';
import { WorkspaceLimits, type Admission, type WorkspaceLimitSettings } from './rate-limits.js';
import { rateLimitHeaders } from '../http/standing.js';
import { processConfig } from '../config.js';
import type { KeyCache } from './key-cache.js';
import { publicOperations } from './operations/index.js';
import type { OperationContext, PublicOperation } from './operation.js';
import type { ServiceMetrics } from '../observability/metrics.js';
import { loadShedding } from '../http/load-shedding.js';
import { entityTag, noneMatchAny, noneMatchHolds, REVALIDATED_CACHE_CONTROL } from './revalidation.js';
import type { ReadPool, ReadRouting } from '../db/read-routing.js';
import { AnswerCache } from './answer-cache.js';
import { Cursors } from '../http/cursors.js';
import type { EventArrivals } from './event-arrivals.js';
import { compression } from './compression.js';
import { DATA_STALENESS_HEADER, logAnswerErrors, requestEdge, requestGuard } from '../http/edge.js';
import { serveDocument, type Answer, type Operation } from '../http/serve-document.js';
import type { RequestContext, RequestMiddleware, RequestState } from '../http/request-state.js';

declare module '../http/request-state.js' {
  interface RequestState {
    /** The public API's caller, once its key is authenticated. */
    caller?: Caller;
    /** The caller's workspace's share of the API, taken before the operation (released when the answer is made). */
    admission?: Admission;
    /** The pool the operation's reads went to, chosen once per request when there are replicas. */
    readPool?: ReadPool;
  }
}

export { DATA_STALENESS_HEADER };

export interface AppOptions {
  db: Knex;
  logger: Logger;
  /** The clock the figures are computed by; tests pass a fixed one. */
  clock?: () => Date;
  /** Where request durations are counted; none in most tests. */
  metrics?: ServiceMetrics;
  /** Key lookups kept in memory, dropped on every key or workspace change (src/api/key-cache.ts); none: every request reads the key. */
  keyCache?: KeyCache;
  /**
   * Event-loop lag past which new requests are shed with 503 overloaded (src/http/load-shedding.ts). Off (0) unless
   * given: main passes FRS_SHED_EVENT_LOOP_LAG_MS (default 200 ms); a test shares its event loop with the app, and
   * its own work would be taken for overload.
   */
  shedEventLoopLagMs?: number;
  /** The per-workspace limits and the per-address limit of failed authentications; default: the environment's. */
  limits?: { workspace: WorkspaceLimitSettings; authFailures: AuthFailureSettings };
  /** Bytes of answers kept by their ETag (src/api/answer-cache.ts); 0: none. Default: FRS_ANSWER_CACHE_MB's. */
  answerCacheBytes?: number;
  /**
   * Signs and checks the lists' cursors; default: with the key derived from this process's master key, the same in
   * every API process and across restarts (src/http/cursors.ts). Without a master key the app does not start.
   */
  cursors?: Cursors;
  /**
   * Read replicas (src/db/read-routing.ts): the reads of an operation that only reads go to the pool it chooses, once
   * per request. None: every query on `db`.
   */
  reads?: ReadRouting;
  /**
   * The event feed's one LISTEN connection (src/api/event-arrivals.ts), which wakes its long polls; closing it ends
   * them. None: a long poll reads the feed again every second.
   */
  events?: EventArrivals;
}

/**
 * What the public listener lends a screen mounted beside the API: its clock and cursors, the failure limit, the
 * workspace's share.
 */
export interface ListenerEdge {
  clock: () => Date;
  cursors: Cursors;
  /** The client address's failure limit, as for API keys. */
  guard: (ctx: RequestContext) => AuthGuard;
  /** Takes the workspace's share of the API (its rate and concurrency limits) for the request. */
  admit: (ctx: RequestContext, workspaceId: string) => Promise<void>;
}

/** The public API, made to be served on a listener (publicListener). */
export interface PublicApi {
  /** What it lends a screen mounted beside it (src/portal/app.ts). */
  edge: ListenerEdge;
  /**
   * Its bookkeeping on every answer of the listener: the workspace's share given back, the data's age (not for a route
   * served `beside` it, which reads no replica), where the caller stands in the RateLimit fields.
   */
  finish: (ctx: RequestContext, beside: boolean) => Promise<void>;
  /** Its routes and operations, compression included. */
  serve: RequestMiddleware;
}

/** The public API: its limits, its document's operations and the routes that publish the document. */
export async function publicApi({
  db,
  clock = () => new Date(),
  keyCache,
  limits,
  cursors = Cursors.fromApiSecret(),
  answerCacheBytes = processConfig().answerCacheBytes,
  reads,
  events,
}: AppOptions): Promise<PublicApi> {
  const workspaceLimits = new WorkspaceLimits(limits?.workspace ?? processConfig().workspaceLimits);
  const authFailures = new AuthFailureLimits(limits?.authFailures ?? processConfig().authFailures);
  /** The request's guard: made only when asked for (a key answered from memory never asks). */
  const guardOf = (ctx: RequestContext): AuthGuard => requestGuard(authFailures, ctx);
  const answers = answerCacheBytes > 0 ? new AnswerCache(answerCacheBytes) : undefined;
  const compress = compression();
  const served = await serveDocument({
    document: strictOpenApiDocument(),
    // Served as published (open to additions); requests are checked against the strict variant, so a parameter
    // takes only the values the document lists today.
    publish: { document: loadOpenApiDocument(), yaml: true },
    scheme: 'bearerAuth',
    authenticate: async (ctx) => {
      const caller = await authenticate(db, ctx.get('authorization') || undefined, clock(), keyCache, {
        limits: authFailures,
        guard: () => guardOf(ctx),
      });
      ctx.state.caller = caller;
      // The workspace's share, taken before the operation reads anything: a refusal costs a look-up in memory.
      ctx.state.admission = await workspaceLimits.admit(caller.workspace.id);
    },
    operations: Object.fromEntries(
      Object.entries(publicOperations).map(([id, op]) => [
        id,
        revalidated(id, op, { db, clock, cursors, answers, events }),
      ]),
    ),
    // An operation whose answer is built from a data version only reads (the GETs of the workspace's data): with
    // replicas, the pool for its reads is chosen once, so that its version and its answer come from one server. The
    // rest (the test operation, readiness), and authentication before any of them, run on the primary.
    around: (operationId, ctx, run) =>
      reads === undefined || publicOperations[operationId].etag?.inputs === undefined
        ? run()
        : reads.read((pool) => {
            ctx.state.readPool = pool;
            return run();
          }),
    namesRepeatedQuery: true,
  });
  return {
    edge: {
      clock,
      cursors,
      guard: guardOf,
      admit: async (ctx, workspaceId) => {
        ctx.state.admission = await workspaceLimits.admit(workspaceId);
      },
    },
    finish: answerBookkeeping(workspaceLimits, authFailures, guardOf),
    // Compression wraps the routes and the operation (authentication and the rate limiter run inside openapi-backend's
    // handling): it acts on the answer only, so a refusal by any step before the operation costs it nothing. No
    // request body is read: no operation of the document takes one (the test operation ignores its body).
    serve: (ctx, next) => compress(ctx, () => served(ctx, next)),
  };
}

/**
 * The public listener's bookkeeping on every answer: the workspace's share given back, the data's age (not for a route
 * served beside the API, which reads no replica), where the caller stands in the RateLimit fields.
 */
function answerBookkeeping(
  workspaceLimits: WorkspaceLimits,
  authFailures: AuthFailureLimits,
  guardOf: (ctx: RequestContext) => AuthGuard,
): PublicApi['finish'] {
  /** Where the caller stands: its workspace's rate limit once known, else its address's failure limit. */
  const standingOf = async (ctx: RequestContext) => {
    const { admission, caller } = ctx.state;
    if (admission) return admission.standing;
    if (caller) return workspaceLimits.standing(caller.workspace.id);
    const guard = guardOf(ctx);
    return guard.standing ?? authFailures.standing(guard.address);
  };
  return async (ctx, beside) => {
    const { admission } = ctx.state;
    admission?.release();
    if (!beside) ctx.set(DATA_STALENESS_HEADER, String(ctx.state.readPool?.maxStalenessMs() ?? 0));
    // Every answer says where the caller stands (a 429 already carries the standing that refused it).
    if (!ctx.response.get('RateLimit')) {
      // (admitted: its standing is at hand, with no await on the way out of every answered request)
      const standing = admission ? admission.standing : await standingOf(ctx).catch(() => undefined);
      if (standing) ctx.set(rateLimitHeaders(standing));
    }
  };
}

/**
 * An operation of the public API with its conditional GET (src/api/revalidation.ts): the tag is decided before the
 * answer is built, from the data's version, and a current tag in If-None-Match is answered 304 without building it
 * (nor counting it against the workspace's rate). The tag and its Cache-Control go on the answer only once it is made:
 * an error has neither.
 */
function revalidated(
  operationId: string,
  { handle, etag }: PublicOperation,
  o: { db: Knex; clock: () => Date; cursors: Cursors; answers: AnswerCache | undefined; events?: EventArrivals },
): Operation {
  return async (c: BackendContext, ctx: RequestContext): Promise<Answer> => {
    // The client gone before its answer is made (the response closed unfinished): a long poll stops waiting.
    const gone = new AbortController();
    const closed = () => {
      if (!ctx.res.writableFinished) gone.abort();
    };
    ctx.res.once('close', closed);
    try {
      return await answer(c, ctx, gone.signal);
    } finally {
      ctx.res.off('close', closed);
    }
  };

  async function answer(c: BackendContext, ctx: RequestContext, signal: AbortSignal): Promise<Answer> {
    const context: OperationContext = {
      db: ctx.state.readPool?.db ?? o.db,
      caller: ctx.state.caller!,
      now: o.clock(),
      query: c.request.query as Record<string, unknown>,
      params: c.request.params as Record<string, string>,
      headers: ctx.headers,
      logger: ctx.state.logger,
      cursors: o.cursors,
      signal,
      events: o.events,
    };
    const tag = await entityTag(operationId, etag, context);
    if (tag === undefined) return handle(context);
    const answered = () => ctx.set({ ETag: tag, 'Cache-Control': REVALIDATED_CACHE_CONTROL });
    const ifNoneMatch = ctx.get('if-none-match') || undefined;
    if (noneMatchHolds(ifNoneMatch, tag)) {
      await ctx.state.admission!.revalidated();
      answered();
      return { status: 304, body: undefined };
    }
    // The answer of this tag, if this process made it (src/api/answer-cache.ts): it is the answer while the tag is.
    let body = o.answers?.get(tag);
    if (body === undefined) {
      const result = await handle(context);
      if (result.status !== 200) return result;
      body = typeof result.body === 'string' ? result.body : JSON.stringify(result.body);
      o.answers?.set(tag, body);
    }
    answered();
    // `*` holds for any answer there is: known once it is made (an unknown id is a 404, a bad cursor a 400), and counted.
    return noneMatchAny(ifNoneMatch) ? { status: 304, body: undefined } : { status: 200, body };
  }
}

/** A route served beside the API on its listener, under its own path prefix (main mounts the settings screen so). */
export interface BesideApi {
  prefix: string;
  serve: RequestMiddleware;
}

/**
 * The public listener's app: the edge (with the API's bookkeeping), the load shedder, the routes mounted beside the
 * API (before compression: the screen's answers carry keys and secrets once, no BREACH surface, as the admin API's
 * do), then the API.
 */
export function publicListener(
  api: PublicApi,
  {
    logger,
    metrics,
    shedEventLoopLagMs = 0,
    beside = [],
  }: Pick<AppOptions, 'logger' | 'metrics' | 'shedEventLoopLagMs'> & { beside?: BesideApi[] },
): Koa<RequestState> {
  const mountOf = (path: string) => beside.find(({ prefix }) => path === prefix || path.startsWith(`${prefix}/`));
  const app = new Koa<RequestState>();
  app.proxy = false;
  logAnswerErrors(app, logger);
  app.use(requestEdge({ logger, metrics, finish: (ctx) => api.finish(ctx, mountOf(ctx.path) !== undefined) }));
  if (shedEventLoopLagMs > 0) app.use(loadShedding(shedEventLoopLagMs));
  if (beside.length > 0) app.use((ctx, next) => mountOf(ctx.path)?.serve(ctx, next) ?? next());
  app.use(api.serve);
  return app;
}

/** The public API alone on a listener's app (the tests' and the bench's). */
export async function createApp(options: AppOptions): Promise<Koa<RequestState>> {
  return publicListener(await publicApi(options), options);
}
