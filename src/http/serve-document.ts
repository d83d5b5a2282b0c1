// One document's operations served to one client: the public document on the public listener, the admin document on
// the admin listener and, with a session for a token, to the settings screen. Everything but the operations
// themselves and how a caller is authenticated has one author here: the 404, 405 and OPTIONS answers, the documented
// 400 of a request the document refuses, the 401 of its security scheme, the document at /openapi.json and its
// reference page, and the loop that registers each operation.
import Router from '@koa/router';
import type { ErrorObject } from 'ajv';
import type { Context as BackendContext } from 'openapi-backend';
import YAML from 'yaml';
import type { OpenApiDocument } from '../contract/document.js';
import {
  allowedMethods,
  contractBackend,
  decodablePath,
  memoiseOperations,
  unknownQueryParameter,
} from './contract.js';
import type { ContractBackend, Parameter } from './contract.js';
import { registerDocs, type DocsOptions } from './docs.js';
import { noRoute } from './edge.js';
import { apiError, internalError } from './error-catalogue.js';
import type { RequestContext, RequestMiddleware } from './request-state.js';
import { unknownQuery, validationError } from './validation-errors.js';

/** An operation's answer: its status and body (a string is JSON the handler serialised itself). */
export interface Answer {
  status: number;
  body: unknown;
}

/** An operation of the document: the request as openapi-backend parsed and validated it, and the request's context. */
export type Operation = (c: BackendContext, ctx: RequestContext) => Promise<Answer>;

export interface ServeDocumentOptions {
  /** The variant requests are routed and checked by (strict: a parameter takes only the values listed today). */
  document: OpenApiDocument;
  /** Served as published at /openapi.json (and /openapi.yaml when asked), with its reference page at /docs. */
  publish?: { document: OpenApiDocument; yaml?: true; docs?: DocsOptions };
  /** What stands before the document's paths on this listener ('' unless given: '/portal/api' for the screen). */
  prefix?: string;
  /** The security scheme this client authenticates its callers by. */
  scheme: string;
  /**
   * The document's schemes of other clients. Given, an operation whose security does not list `scheme` is no route
   * here (404), before anything else; not given, every operation of the table is this client's.
   */
  otherSchemes?: string[];
  /**
   * Authenticates the caller of an operation that lists `scheme`, leaving who it is in the request's state, or throws
   * the documented 401, 403 or 429. It may be asked twice for a request with a body (before the body is read, then by
   * the security check): what it found the first time stands.
   */
  authenticate: (ctx: RequestContext, operationId: string) => Promise<void>;
  /** The operations by operationId. */
  operations: Record<string, Operation>;
  /** Runs every operation (the public API chooses its read pool here); without it, each simply runs. */
  around?: (operationId: string, ctx: RequestContext, run: () => Promise<Answer>) => Promise<Answer>;
  /**
   * Reads the body of a POST or PATCH whose route matched, once its caller is authenticated (undefined: none).
   * Without it no body is read: a body that is malformed, compressed or huge cannot fail a request.
   */
  readBody?: (ctx: RequestContext, operationId: string) => Promise<unknown>;
  /** Whether a 400 names a single-valued query parameter given more than once as repeated (the public API's 400s). */
  namesRepeatedQuery?: true;
}

/**
 * The middleware that serves a document: its published routes, then its operations (a request the document does
 * not answer is its 404 or 405). Validation, authentication and the adapter's answers are openapi-backend's,
 * answered as the documents say.
 */
export async function serveDocument(o: ServeDocumentOptions): Promise<RequestMiddleware> {
  const backend = contractBackend({
    document: o.document,
    handlers: adapterHandlers(o, () => reach.reachable()),
    securityHandlers: {
      [o.scheme]: async (c: BackendContext, ctx: RequestContext) => {
        await o.authenticate(ctx, c.operation.operationId!);
        return true;
      },
      ...Object.fromEntries((o.otherSchemes ?? []).map((other) => [other, () => false])),
    },
  });
  for (const [operationId, operation] of Object.entries(o.operations))
    backend.register(operationId, (c: BackendContext, ctx: RequestContext) => {
      const run = () => {
        ctx.state.operationId = operationId;
        const unknown = unknownQueryParameter(
          (c.operation.parameters ?? []) as Parameter[],
          c.request.query as Record<string, unknown>,
        );
        if (unknown !== undefined) throw unknownQuery(unknown);
        return operation(c, ctx);
      };
      return o.around ? o.around(operationId, ctx, run) : run();
    });
  await backend.init();
  const reach = reachOf(backend, o);
  const handle = requestHandler(backend, o, reach);
  if (!o.publish) return (ctx) => handle(ctx);
  // (the operations come last: what the published routes do not answer is theirs, a 404 included)
  const routes = publishedRoutes(o.publish).routes();
  return (ctx) => routes(ctx as Parameters<typeof routes>[0], () => handle(ctx));
}

interface Reach {
  /** Whether this client may call an operation: one of its table, whose security lists its scheme. */
  inReach: (operationId: string | undefined) => boolean;
  /** The operations this client may call, for the methods a path allows. */
  reachable: () => Array<{ path: string; method: string; operationId?: string }>;
}

function reachOf(backend: ContractBackend, o: ServeDocumentOptions): Reach {
  const operations = memoiseOperations(backend);
  if (o.otherSchemes === undefined) return { inReach: () => true, reachable: () => operations };
  const inReach = (operationId: string | undefined): boolean => {
    const operation =
      operationId === undefined || !(operationId in o.operations) ? undefined : backend.getOperation(operationId);
    return (operation?.security ?? []).some((requirement) => o.scheme in requirement);
  };
  return { inReach, reachable: () => operations.filter((op) => inReach(op.operationId)) };
}

/** Answers a request under the prefix: OPTIONS, or the operation the document routes it to. */
function requestHandler(
  backend: ContractBackend,
  o: ServeDocumentOptions,
  { inReach, reachable }: Reach,
): (ctx: RequestContext) => Promise<void> {
  const prefix = o.prefix ?? '';
  return async (ctx) => {
    const path = decodablePath(ctx.path.slice(prefix.length));
    if (ctx.method === 'OPTIONS') {
      const allowed = allowedMethods(reachable(), path);
      if (allowed.length === 0) throw noRoute();
      ctx.set('Allow', allowed.join(', '));
      ctx.status = 204;
      return;
    }
    // HEAD answers like GET; Koa then sends the headers without the body.
    const request = {
      method: ctx.method === 'HEAD' ? 'GET' : ctx.method,
      path,
      query: ctx.querystring,
      headers: ctx.headers as Record<string, string>,
    };
    // An operation of another client is no route here. A body is read only for an operation that takes one, and only
    // once the caller holds: a request to no route is a 404 and an unauthenticated one a 401 (counted against its
    // address), whatever it sent.
    let body: unknown;
    if (o.otherSchemes !== undefined || o.readBody !== undefined) {
      const operation = backend.router.matchOperation(request);
      if (operation && !inReach(operation.operationId)) throw noRoute();
      if (operation && o.readBody && (ctx.method === 'POST' || ctx.method === 'PATCH')) {
        ctx.state.operationId = operation.operationId;
        await o.authenticate(ctx, operation.operationId!);
        body = await o.readBody(ctx, operation.operationId!);
      }
    }
    const result = await backend.handleRequest({ ...request, body }, ctx);
    ctx.status = result.status;
    ctx.body = result.body;
    // A handler that serialised its answer itself (to keep stored JSON bytes as they are) still answers JSON.
    if (typeof result.body === 'string') ctx.type = 'application/json';
  };
}

/** openapi-backend's answers to what is no operation's: the documented 404, 405, 400, 401 (and 500). */
function adapterHandlers(
  o: ServeDocumentOptions,
  reachable: () => Array<{ path: string; method: string }>,
): Record<string, unknown> {
  return {
    notFound: () => {
      throw noRoute();
    },
    methodNotAllowed: (c: BackendContext) => {
      // Only a 405 needs to know which path template matched, so it is worked out here, not on every request. (A path
      // whose operations are all another client's is no route here.)
      const allowed = allowedMethods(reachable(), c.request.path);
      if (allowed.length === 0) throw noRoute();
      throw apiError('method_not_allowed', `This path does not accept ${c.request.method.toUpperCase()}.`, {
        headers: { Allow: allowed.join(', ') },
      });
    },
    unauthorizedHandler: (c: BackendContext, ctx: RequestContext) => {
      ctx.state.operationId = c.operation.operationId;
      // The documented 401/403, or a failure of the lookup itself (an outage answers 503; anything else is logged, a 500).
      throw (c.security?.[o.scheme] as { error?: unknown } | undefined)?.error ?? internalError();
    },
    validationFail: (c: BackendContext, ctx: RequestContext) => {
      ctx.state.operationId = c.operation.operationId;
      throw validationError(
        (c.operation.parameters ?? []) as Parameter[],
        c.validation.errors as ErrorObject[],
        o.namesRepeatedQuery ? (c.request.query as Record<string, unknown>) : undefined,
      );
    },
    notImplemented: () => {
      throw internalError();
    },
  };
}

/** /openapi.json (and /openapi.yaml), and the reference page. */
function publishedRoutes({ document, yaml, docs }: NonNullable<ServeDocumentOptions['publish']>): Router {
  const router = new Router();
  const openApiJson = JSON.stringify(document);
  router.get('/openapi.json', (ctx) => {
    ctx.type = 'application/json';
    ctx.body = openApiJson;
  });
  if (yaml) {
    // (made when first asked for: writing the YAML took a tenth of a start)
    let openApiYaml: string | undefined;
    router.get('/openapi.yaml', (ctx) => {
      ctx.type = 'application/yaml';
      ctx.body = openApiYaml ??= YAML.stringify(document);
    });
  }
  registerDocs(router, docs);
  return router;
}
