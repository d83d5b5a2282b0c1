// The admin API (openapi/admin.yaml): the second client of the core, beside the operator CLI. It has its own
// listener (FRS_ADMIN_PORT, 127.0.0.1 by default, never the public one), its own credential (admin tokens, `fra_`,
// src/admin/auth.ts) and its own database role (`admin`, src/db/roles.ts), so that nothing of it is reachable with a
// public key or through the public listener, and the public API stays read-only. Its edge (request ids, the error
// body, 503 for outages, the HTTP limits, the failure limit on authentication, the reference page) is the HTTP kit's
// (src/http/); its operations only call core functions (src/admin/operations/).
import type { Knex } from 'knex';
import Koa from 'koa';
import type { Logger } from 'pino';
import type { Context as BackendContext } from 'openapi-backend';
import { loadOpenApiDocument, strictOpenApiDocument } from '../contract/document.js';
import { sealingUnavailable } from '../http/error-catalogue.js';
import { NoSealingKeyError } from '../secrets.js';
import { AuthFailureLimits, type AuthFailureSettings } from '../http/auth-failures.js';
import { processConfig } from '../config.js';
import { rateLimitHeaders } from '../http/standing.js';
import { Cursors } from '../http/cursors.js';
import { loadShedding } from '../http/load-shedding.js';
import type { ServiceMetrics } from '../observability/metrics.js';
import type { AuditContext } from '../core/audit.js';
import { authenticateAdmin } from './auth.js';
import { adminOperations, type AdminCaller } from './operations/index.js';
import { MAX_BATCH_BYTES } from '../core/import/records.js';
import { requestEdge, requestGuard } from '../http/edge.js';
import { readJsonBody } from '../http/json-body.js';
import { serveDocument, type Operation, type ServeDocumentOptions } from '../http/serve-document.js';
import type { Answer } from './idempotency.js';
import type { RequestContext, RequestMiddleware, RequestState } from '../http/request-state.js';

declare module '../http/request-state.js' {
  interface RequestState {
    /** Who calls an admin operation (an admin token, or the screen's session), once authenticated. */
    requester?: AdminRequester;
  }
}

export interface AdminAppOptions {
  /** Connections as the admin API's database role. */
  db: Knex;
  /** Connections as the ingest role: the platform's records (writeRecords, import jobs), on a small pool of their own. */
  ingestDb: Knex;
  logger: Logger;
  clock?: () => Date;
  metrics?: ServiceMetrics;
  shedEventLoopLagMs?: number;
  authFailures?: AuthFailureSettings;
  cursors?: Cursors;
  /** The public listener's base URL, where the settings screen's links point (FRS_PUBLIC_URL). */
  portalUrl?: string;
}

/**
 * The operations whose body the core reads and checks itself: a batch (up to 8 MiB, every bad record named, not only
 * the first as the request validation would) and an import job's body, streamed to the job as it arrives, never held.
 * The document describes them; the request validation leaves their bodies alone.
 */
const CORE_BODIES: Record<string, { stream: true } | { limit: number; limitName: string }> = {
  writeRecords: { limit: MAX_BATCH_BYTES, limitName: '8 MiB, the limit of a batch' },
  createImport: { stream: true },
};

export function withoutCoreBodies(
  document: ReturnType<typeof strictOpenApiDocument>,
): ReturnType<typeof strictOpenApiDocument> {
  // (the import document is a file of its own beside the admin document: the core checks against it, not the router)
  const copy = JSON.parse(JSON.stringify(document), (key, value) =>
    value && typeof value === 'object' && value.$ref === './import.schema.json'
      ? { type: 'object', description: value.description }
      : value,
  ) as typeof document;
  for (const item of Object.values(copy.paths)) {
    for (const operation of Object.values(item)) {
      if (
        operation &&
        typeof operation === 'object' &&
        (operation as { operationId?: string }).operationId! in CORE_BODIES
      )
        delete (operation as { requestBody?: unknown }).requestBody;
    }
  }
  return copy;
}

/** Who makes a request of the admin operations, as the client that serves them found out. */
export interface AdminRequester {
  caller: AdminCaller;
  audit: AuditContext;
  /** The request's Idempotency-Key, where this client honours one. */
  idempotencyKey?: string;
}

export interface AdminRouterOptions {
  db: Knex;
  /** The ingest role's connections, where this client reaches writeRecords and the import jobs. */
  ingestDb?: Knex;
  clock: () => Date;
  cursors: Cursors;
  /**
   * The security scheme of the document this client authenticates by: an operation whose security does not list it is
   * no route here (404), before anything else.
   */
  scheme: 'adminToken' | 'portalSession';
  /** Authenticates the request (throwing the documented 401, 403 or 429), before its body is read. */
  authenticate: (ctx: RequestContext, operationId: string) => Promise<AdminRequester>;
  /** What stands before the document's paths on this listener ('' on the admin listener, '/portal/api' for the screen). */
  prefix?: string;
  /** The public listener's base URL, where the settings screen's links point. */
  portalUrl?: string;
  metrics?: ServiceMetrics;
  /** The document as published at /openapi.json, with its reference page (the admin listener's; not the screen's). */
  publish?: ServeDocumentOptions['publish'];
}

/**
 * The admin document's operations served to one client (the admin listener, or the settings screen): routing,
 * validation by the document, the body read only after the route matched and the caller was authenticated, and the
 * core's refusals as documented errors. The operations themselves are src/admin/operations/.
 */
export async function adminRouter(o: AdminRouterOptions): Promise<RequestMiddleware> {
  const { scheme, authenticate } = o;
  return serveDocument({
    document: withoutCoreBodies(strictOpenApiDocument('admin')),
    publish: o.publish,
    prefix: o.prefix,
    scheme,
    otherSchemes: [scheme === 'adminToken' ? 'portalSession' : 'adminToken'],
    // (a request with a body was authenticated before its body was read)
    authenticate: async (ctx, operationId) => {
      ctx.state.requester ??= await authenticate(ctx, operationId);
    },
    operations: Object.fromEntries(
      Object.entries(adminOperations).map(([operationId, handler]) => [operationId, adminOperation(handler, o)]),
    ),
    readBody: async (ctx, operationId) => {
      const own = CORE_BODIES[operationId];
      // (a streamed body is the job's to read; an unknown workspace is refused before a byte is read)
      if (own && 'stream' in own) return undefined;
      return own ? readJsonBody(ctx, own.limit, own.limitName) : readJsonBody(ctx);
    },
  });
}

/** An admin operation as the router calls it: its context made of the request and of who asks. */
function adminOperation(
  handler: (typeof adminOperations)[string],
  { db, ingestDb, clock, cursors, portalUrl, metrics }: AdminRouterOptions,
): Operation {
  return async (c: BackendContext, ctx: RequestContext): Promise<Answer> => {
    const { caller, audit, idempotencyKey } = ctx.state.requester!;
    try {
      return await handler({
        db,
        ingestDb,
        caller,
        audit,
        now: clock(),
        params: c.request.params as Record<string, string>,
        query: c.request.query as Record<string, unknown>,
        body: c.request.requestBody,
        idempotencyKey,
        path: c.request.path,
        cursors,
        portalUrl,
        request: ctx.req,
        contentType: ctx.get('content-type'),
        metrics: metrics?.records,
        logger: ctx.state.logger,
      });
    } catch (err) {
      // (the core's refusals are answered at the edge: src/http/error-catalogue.ts coreError)
      if (err instanceof NoSealingKeyError) {
        ctx.state.logger.warn({ err: { message: err.message } }, 'cannot seal a signing secret');
        throw sealingUnavailable();
      }
      throw err;
    }
  };
}

/** The admin listener's authentication: the bearer's admin token, under the address's failure limit. */
function adminTokenRequester(db: Knex, clock: () => Date, authFailures: AuthFailureLimits) {
  return async (ctx: RequestContext): Promise<AdminRequester> => {
    const holder = await authenticateAdmin(
      db,
      ctx.get('authorization') || undefined,
      clock(),
      requestGuard(authFailures, ctx),
    );
    return {
      caller: holder,
      audit: {
        actor: { type: 'admin_token', id: holder.id, name: holder.name },
        requestId: ctx.response.get('x-request-id'),
        clientRequestId: ctx.state.clientRequestId,
      },
      idempotencyKey: ctx.get('idempotency-key') || undefined,
    };
  };
}

export async function createAdminApp({
  db,
  ingestDb,
  logger,
  clock = () => new Date(),
  metrics,
  shedEventLoopLagMs = 0,
  authFailures: failureSettings,
  cursors = Cursors.fromApiSecret(),
  portalUrl,
}: AdminAppOptions): Promise<Koa<RequestState>> {
  const authFailures = new AuthFailureLimits(failureSettings ?? processConfig().authFailures);
  const serve = await adminRouter({
    db,
    ingestDb,
    clock,
    cursors,
    scheme: 'adminToken',
    portalUrl,
    metrics,
    authenticate: adminTokenRequester(db, clock, authFailures),
    publish: {
      document: loadOpenApiDocument('admin'),
      docs: { title: 'Fleet Rental Service admin API', securityScheme: 'adminToken' },
    },
  });
  const app = new Koa<RequestState>();
  app.proxy = false;
  app.use(
    requestEdge({
      logger,
      metrics,
      // An answer to a request that asked the failure limit says where its address stands.
      finish: async (ctx) => {
        const standing = ctx.state.guard?.standing;
        if (standing && !ctx.response.get('RateLimit')) ctx.set(rateLimitHeaders(standing));
      },
    }),
  );
  if (shedEventLoopLagMs > 0) app.use(loadShedding(shedEventLoopLagMs));
  app.use(serve);
  return app;
}
