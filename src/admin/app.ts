// The admin API (openapi/admin.yaml): the second client of the core, beside the operator CLI. It has its own
// listener (FRS_ADMIN_PORT, 127.0.0.1 by default, never the public one), its own credential (admin tokens, `fra_`,
// src/admin/auth.ts) and its own database role (`admin`, src/db/roles.ts), so that nothing of it is reachable with a
// public key or through the public listener, and the public API stays read-only. It shares the public API's edge
// (request ids, the error body, 503 for outages, the HTTP limits, the failure limit on authentication, the reference
// page) through the helpers of src/api/app.ts; its operations only call core functions (src/admin/operations/).
import type { Knex } from 'knex';
import Koa from 'koa';
import Router from '@koa/router';
import type { Logger } from 'pino';
import type { Context as BackendContext } from 'openapi-backend';
import type { ErrorObject } from 'ajv';
import { loadOpenApiDocument, strictOpenApiDocument } from '../contract/document.js';
import {
  allowedMethods,
  contractBackend,
  decodablePath,
  memoiseOperations,
  requestEdge,
  requestGuard,
  unknownQuery,
  unknownQueryParameter,
  validationError,
  type Parameter,
} from '../api/app.js';
import { apiError, internalError, invalidRequest, sealingUnavailable } from '../api/errors.js';
import { NoSealingKeyError } from '../secrets.js';
import { AuthFailureLimits, type AuthFailureSettings } from '../api/auth-failures.js';
import { processConfig } from '../config.js';
import type { AuthGuard } from '../api/auth.js';
import { rateLimitHeaders } from '../api/rate-limits.js';
import { Cursors } from '../api/cursors.js';
import { registerDocs } from '../api/docs.js';
import { loadShedding } from '../api/load-shedding.js';
import type { ServiceMetrics } from '../observability/metrics.js';
import type { AuditContext } from '../core/audit.js';
import { authenticateAdmin } from './auth.js';
import { adminOperations, type AdminCaller } from './operations/index.js';
import { MAX_BATCH_BYTES } from '../core/import/records.js';

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

/** The largest request body read (a workspace or a key is a few hundred bytes). */
export const ADMIN_BODY_LIMIT = 64 * 1024;

export const noRoute = () => apiError('not_found', 'No such route. See /openapi.json for the operations.');

/**
 * The JSON body of a request that has one (at most ADMIN_BODY_LIMIT bytes), else undefined. A body must say it is
 * JSON and come uncompressed (415 otherwise): what is read is what the document describes, nothing to inflate.
 */
export async function readJsonBody(
  ctx: Koa.Context,
  limit = ADMIN_BODY_LIMIT,
  limitName = `${ADMIN_BODY_LIMIT} bytes`,
): Promise<unknown> {
  const declared = Number(ctx.get('content-length') || 0);
  if (declared === 0 && !ctx.get('transfer-encoding')) return undefined;
  const encoding = ctx.get('content-encoding').trim().toLowerCase();
  if ((encoding !== '' && encoding !== 'identity') || !ctx.is('application/json', '+json')) {
    throw apiError('unsupported_media_type', 'Send the request body as Content-Type application/json, not compressed.');
  }
  const tooLarge = () => apiError('payload_too_large', `The request body is over ${limitName}.`);
  if (declared > limit) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw tooLarge();
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return undefined;
  // Refused before JSON.parse, which would spend seconds on 8 MiB of `[[[[` or of one object's members.
  const shape = jsonShapeProblem(text);
  if (shape !== undefined) throw invalidRequest('body', shape);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw invalidRequest('body', 'The request body is not valid JSON.');
  }
  return body;
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

/** No body of the document nests nearly this deep; a deeper one is refused before anything walks it recursively. */
const MAX_BODY_DEPTH = 64;

/** No object of the document has nearly this many members (a record has a few dozen fields). */
const MAX_OBJECT_MEMBERS = 1000;

/**
 * What is wrong with a JSON text's shape, found in one pass over the text (strings skipped) before it is parsed:
 * arrays and objects nested more than MAX_BODY_DEPTH deep, or an object of more than MAX_OBJECT_MEMBERS members.
 * Text that is not JSON at all is left to JSON.parse.
 */
export function jsonShapeProblem(text: string): string | undefined {
  // Per open array or object: its members so far (an array: -1, not counted).
  const open: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // a string: to its closing quote, over escapes
      for (i++; i < text.length; i++) {
        const s = text.charCodeAt(i);
        if (s === 0x5c) i++;
        else if (s === 0x22) break;
      }
    } else if (c === 0x7b || c === 0x5b) {
      if (open.push(c === 0x7b ? 0 : -1) > MAX_BODY_DEPTH)
        return `The request body is nested more than ${MAX_BODY_DEPTH} levels deep.`;
    } else if (c === 0x7d || c === 0x5d) {
      open.pop();
    } else if (
      c === 0x3a &&
      open.length > 0 &&
      open[open.length - 1] >= 0 &&
      ++open[open.length - 1] > MAX_OBJECT_MEMBERS
    ) {
      return `An object in the request body has more than ${MAX_OBJECT_MEMBERS} members.`;
    }
  }
  return undefined;
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
  authenticate: (ctx: Koa.Context, operationId: string) => Promise<AdminRequester>;
  /** What stands before the document's paths on this listener ('' on the admin listener, '/portal/api' for the screen). */
  prefix?: string;
  /** The public listener's base URL, where the settings screen's links point. */
  portalUrl?: string;
  metrics?: ServiceMetrics;
}

/** The admin operations as one client serves them: its scheme, its authentication, its path prefix. */
export interface AdminRouter {
  /** Answers a request whose path is under the prefix. */
  handle: (ctx: Koa.Context) => Promise<void>;
}

/**
 * The admin document's operations served to one client (the admin listener, or the settings screen): routing,
 * validation by the document, the body read only after the route matched and the caller was authenticated, and the
 * core's refusals as documented errors. The operations themselves are src/admin/operations/.
 */
export async function adminRouter({
  db,
  ingestDb,
  clock,
  cursors,
  scheme,
  authenticate,
  prefix = '',
  portalUrl,
  metrics,
}: AdminRouterOptions): Promise<AdminRouter> {
  const otherScheme = scheme === 'adminToken' ? 'portalSession' : 'adminToken';
  const backend = contractBackend({
    document: withoutCoreBodies(strictOpenApiDocument('admin')),
    handlers: {
      notFound: () => {
        throw noRoute();
      },
      methodNotAllowed: (c: BackendContext) => {
        // (a path whose operations are all another client's is no route here)
        const allowed = allowedMethods(reachableOperations(), c.request.path);
        if (allowed.length === 0) throw noRoute();
        throw apiError('method_not_allowed', `This path does not accept ${c.request.method.toUpperCase()}.`, {
          headers: { Allow: allowed.join(', ') },
        });
      },
      unauthorizedHandler: (c: BackendContext, ctx: Koa.Context) => {
        ctx.state.operationId = c.operation.operationId;
        throw (c.security?.[scheme] as { error?: unknown } | undefined)?.error ?? internalError();
      },
      validationFail: (c: BackendContext, ctx: Koa.Context) => {
        ctx.state.operationId = c.operation.operationId;
        throw validationError((c.operation.parameters ?? []) as Parameter[], c.validation.errors as ErrorObject[]);
      },
      notImplemented: () => {
        throw internalError();
      },
    },
    securityHandlers: {
      // (a request with a body was authenticated before its body was read: see below)
      [scheme]: async (c: BackendContext, ctx: Koa.Context) => {
        ctx.state.requester ??= await authenticate(ctx, c.operation.operationId!);
        return true;
      },
      [otherScheme]: () => false,
    },
  });
  for (const [operationId, handler] of Object.entries(adminOperations)) {
    backend.register(operationId, async (c: BackendContext, ctx: Koa.Context) => {
      ctx.state.operationId = operationId;
      const unknown = unknownQueryParameter(
        (c.operation.parameters ?? []) as Parameter[],
        c.request.query as Record<string, unknown>,
      );
      if (unknown !== undefined) throw unknownQuery(unknown);
      const { caller, audit, idempotencyKey } = ctx.state.requester as AdminRequester;
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
          logger: ctx.state.logger as Logger | undefined,
        });
      } catch (err) {
        // (the core's refusals are answered at the edge: src/api/errors.ts coreError)
        if (err instanceof NoSealingKeyError) {
          (ctx.state.logger as Logger | undefined)?.warn(
            { err: { message: err.message } },
            'cannot seal a signing secret',
          );
          throw sealingUnavailable();
        }
        throw err;
      }
    });
  }
  await backend.init();
  const operations = memoiseOperations(backend);
  /** Whether this client may call an operation: one of the admin operations, whose security lists this client's scheme. */
  const inReach = (operationId: string | undefined) => {
    const operation =
      operationId === undefined || !(operationId in adminOperations) ? undefined : backend.getOperation(operationId);
    return (operation?.security ?? []).some((requirement) => scheme in requirement);
  };
  const reachableOperations = () => operations.filter((op) => inReach(op.operationId));
  return {
    async handle(ctx) {
      const path = decodablePath(ctx.path.slice(prefix.length));
      if (ctx.method === 'OPTIONS') {
        const allowed = allowedMethods(reachableOperations(), path);
        if (allowed.length === 0) throw noRoute();
        ctx.set('Allow', allowed.join(', '));
        ctx.status = 204;
        return;
      }
      const request = {
        method: ctx.method === 'HEAD' ? 'GET' : ctx.method,
        path,
        query: ctx.querystring,
        headers: ctx.headers as Record<string, string>,
      };
      // An operation of another client is no route here. A body is read only for an operation that takes one, and only
      // once the caller holds: a request to no route is a 404 and an unauthenticated one a 401 (counted against its
      // address), whatever it sent.
      const operation = backend.router.matchOperation(request);
      if (operation && !inReach(operation.operationId)) throw noRoute();
      let body: unknown;
      if (operation && (ctx.method === 'POST' || ctx.method === 'PATCH')) {
        ctx.state.operationId = operation.operationId;
        ctx.state.requester = await authenticate(ctx, operation.operationId!);
        const own = CORE_BODIES[operation.operationId!];
        if (own && 'stream' in own) {
          // (the job reads it; an unknown workspace is refused before a byte is read)
        } else {
          body = own ? await readJsonBody(ctx, own.limit, own.limitName) : await readJsonBody(ctx);
        }
      }
      const result = await backend.handleRequest({ ...request, body }, ctx);
      ctx.status = result.status;
      ctx.body = result.body;
    },
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
}: AdminAppOptions): Promise<Koa> {
  const authFailures = new AuthFailureLimits(failureSettings ?? processConfig().authFailures);
  const document = loadOpenApiDocument('admin');
  const adminRoutes = await adminRouter({
    db,
    ingestDb,
    clock,
    cursors,
    scheme: 'adminToken',
    portalUrl,
    metrics,
    authenticate: async (ctx) => {
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
    },
  });
  const router = new Router();
  const openApiJson = JSON.stringify(document);
  router.get('/openapi.json', (ctx) => {
    ctx.type = 'application/json';
    ctx.body = openApiJson;
  });
  registerDocs(router, { title: 'Fleet Rental Service admin API', securityScheme: 'adminToken' });

  const app = new Koa();
  app.proxy = false;
  app.use(
    requestEdge({
      logger,
      metrics,
      // An answer to a request that asked the failure limit says where its address stands.
      finish: async (ctx) => {
        const standing = (ctx.state.guard as AuthGuard | undefined)?.standing;
        if (standing && !ctx.response.get('RateLimit')) ctx.set(rateLimitHeaders(standing));
      },
    }),
  );
  if (shedEventLoopLagMs > 0) app.use(loadShedding(shedEventLoopLagMs));
  app.use(router.routes());
  app.use(adminRoutes.handle);
  return app;
}
