import crypto from 'node:crypto';
import http, { type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
import Koa from 'koa';
import Router from '@koa/router';
import { OpenAPIBackend, OpenAPIValidator, type Context as BackendContext, type Document } from 'openapi-backend';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { ErrorObject } from 'ajv';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import YAML from 'yaml';
import { loadOpenApiDocument, strictOpenApiDocument, type OpenApiDocument } from '../contract/document.js';
import { documentFingerprint, generatedRequestValidators } from '../contract/request-validators.js';
import {
  ApiError,
  apiError,
  coreError,
  errorBody,
  internalError,
  invalidRequest,
  statementTimedOut,
  unavailable,
} from './errors.js';
import { isDatabaseUnavailable, isStatementCanceled } from '../db/outage.js';
import { authenticate, type AuthGuard, type Caller } from './auth.js';
import { AuthFailureLimits, type AuthFailureSettings } from './auth-failures.js';
import { rateLimitHeaders, WorkspaceLimits, type Admission, type WorkspaceLimitSettings } from './rate-limits.js';
import { processConfig } from '../config.js';
import type { KeyCache } from './key-cache.js';
import { operationHandlers, type OperationContext, type OperationResult } from './operations.js';
import type { ServiceMetrics } from '../observability/metrics.js';
import { registerDocs } from './docs.js';
import { loadShedding } from './load-shedding.js';
import { applyHttpLimits, DEFAULT_HTTP_LIMITS, type HttpLimits } from './http-limits.js';
import { ANSWER_INPUTS, entityTag, noneMatchAny, noneMatchHolds, REVALIDATED_CACHE_CONTROL } from './revalidation.js';
import type { ReadPool, ReadRouting } from '../db/read-routing.js';
import { AnswerCache } from './answer-cache.js';
import { Cursors } from './cursors.js';
import { compression } from './compression.js';
import { redactSecrets, redactUrlCredentials } from '../secrets.js';

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
   * Event-loop lag past which new requests are shed with 503 overloaded (src/api/load-shedding.ts). Off (0) unless
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
   * every API process and across restarts (src/api/cursors.ts). Without a master key the app does not start.
   */
  cursors?: Cursors;
  /**
   * The settings screen under /portal/ (src/portal/app.ts, made by main, which gives it the admin API's connections),
   * given what it shares with this listener; without it, /portal is no route.
   */
  portal?: (edge: ListenerEdge) => Promise<Koa.Middleware>;
  /**
   * Read replicas (src/db/read-routing.ts): the reads of an operation that only reads go to the pool it chooses, once
   * per request. None: every query on `db`.
   */
  reads?: ReadRouting;
}

/**
 * On every answer: at most how many milliseconds old the data of the answer is (the replica's bound when one answered;
 * 0 when the primary did, or nothing was read).
 */
export const DATA_STALENESS_HEADER = 'Data-Max-Staleness-Ms';

/**
 * openapi-backend checks documents against the OpenAPI 3.0 meta-schema and rejects 3.1; the document is guarded
 * by Redocly lint and the contract tests instead.
 */
class ContractBackend extends OpenAPIBackend {
  override validateDefinition(): Document {
    return this.document;
  }

  /**
   * @param fingerprint the document's (src/contract/request-validators.ts), whose request validators `npm run
   * generate` compiled; undefined: compile them here (what the generator itself does)
   */
  constructor(
    options: ConstructorParameters<typeof OpenAPIBackend>[0],
    private readonly fingerprint: string | undefined,
  ) {
    super(options);
  }

  /**
   * The request validators as openapi-backend builds them, generated ones when the document is the one they were
   * generated from; but not its response and response-header validators: nothing here checks an answer through
   * openapi-backend (the tests check them with generated/validators.cjs), and compiling them was about four fifths of
   * a start's time. One asked for is still compiled when first asked.
   */
  override async init(): Promise<this> {
    const validate = this.validate;
    this.validate = false;
    try {
      await super.init();
    } finally {
      this.validate = validate;
    }
    if (validate !== false) {
      const validator = new OpenAPIValidator({
        definition: this.definition,
        ajvOpts: this.ajvOpts,
        customizeAjv: this.customizeAjv,
        router: this.router,
        lazyCompileValidators: true,
        coerceTypes: this.coerceTypes,
      });
      const generated = this.fingerprint === undefined ? undefined : generatedRequestValidators(this.fingerprint);
      for (const operation of this.router.getOperations()) {
        const id = operation.operationId;
        if (id !== undefined)
          validator.requestValidators[id] = generated?.[id] ?? validator.buildRequestValidatorsForOperation(operation);
      }
      this.validator = validator;
    }
    return this;
  }
}

export type Parameter = { name: string; in: string; schema: Record<string, unknown> };

/** "an integer from 1 to 50", "an ISO 8601 date-time", ... from a parameter schema, for error messages. */
function describeSchema(schema: Record<string, unknown>): string {
  if (schema.type === 'integer') {
    return schema.minimum !== undefined && schema.maximum !== undefined
      ? `an integer from ${schema.minimum} to ${schema.maximum}`
      : 'an integer';
  }
  if (schema.format === 'date-time') return 'an ISO 8601 date-time with an offset, such as 2026-11-22T08:30:00.000Z';
  if (schema.format === 'uuid') return 'a UUID';
  const values = enumerated(schema);
  if (values.length > 0)
    return values.length <= 8
      ? `one of ${values.join(', ')}`
      : `one of the ${values.length} values the document lists for it`;
  if (schema.type === 'string' && schema.minLength !== undefined && schema.maxLength !== undefined) {
    const length = `a string of ${schema.minLength} to ${schema.maxLength} characters`;
    if (schema.pattern === '^[^\\u0000]*$') return `${length}, with no NUL character`;
    return schema.pattern ? `${length} matching ${String(schema.pattern)}` : length;
  }
  return `a valid ${String(schema.type ?? 'value')}`;
}

/** The values an enum, a const or an anyOf of them admits. */
function enumerated(schema: Record<string, unknown>): string[] {
  if (Array.isArray(schema.enum)) return schema.enum.map(String);
  if (schema.const !== undefined) return [String(schema.const)];
  if (Array.isArray(schema.anyOf)) return (schema.anyOf as Array<Record<string, unknown>>).flatMap(enumerated);
  return [];
}

const LOCATION_NAMES: Record<string, string> = { query: 'Query parameter', header: 'Header', path: 'Path parameter' };
const LOCATION_IN: Record<string, string> = { query: 'query', header: 'header', path: 'path' };

/** A name the caller sent, as an error repeats it: cut to 100 characters, within the documented bounds of `reason`. */
const echoed = (name: string) => (name.length > 100 ? `${name.slice(0, 100)}…` : name);

export const unknownQuery = (name: string) =>
  invalidRequest(
    echoed(name),
    `Query parameter "${echoed(name)}" is not known to this operation; see /openapi.json for its parameters.`,
  );

/** A date-time whose offset's `+` was sent unencoded: URL decoding made it a space (`…T06:00:00 04:00`). */
const PLUS_AS_SPACE = /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)? \d\d:?\d\d$/;

/**
 * The first request-validation error, as the documented 400 naming the parameter (or the body's field). A single-valued query parameter
 * given more than once arrives as a list and fails whatever check comes first: it is named as repeated, before that.
 */
export function validationError(
  parameters: Parameter[],
  errors: ErrorObject[],
  query: Record<string, unknown> = {},
): ApiError {
  const repeated = parameters.find(
    (p) => p.in === 'query' && p.schema.type !== 'array' && Array.isArray(query[p.name]),
  );
  if (repeated) {
    const times = (query[repeated.name] as unknown[]).length;
    return invalidRequest(
      repeated.name,
      `Query parameter "${repeated.name}" was given ${times === 2 ? 'twice' : `${times} times`}; send it once, as ${describeSchema(repeated.schema)}.`,
    );
  }
  const err = errors[0];
  const [, location = '', instanceName] = err.instancePath.split('/');
  if (location === 'requestBody' || (err.keyword === 'required' && err.params.missingProperty === 'requestBody'))
    return bodyValidationError(err);
  const name = err.keyword === 'required' ? String(err.params.missingProperty) : decodeURIComponent(instanceName ?? '');
  if (err.keyword === 'additionalProperties' && location === 'query')
    return unknownQuery(String(err.params.additionalProperty));
  const parameter = parameters.find(
    (p) => p.in === LOCATION_IN[location] && p.name.toLowerCase() === name.toLowerCase(),
  );
  if (!parameter)
    return invalidRequest(echoed(name) || 'request', `The request is invalid: ${err.message ?? 'unknown problem'}.`);
  const label = `${LOCATION_NAMES[location]} "${parameter.name}"`;
  if (err.keyword === 'required')
    return invalidRequest(parameter.name, `${label} is required; send ${describeSchema(parameter.schema)}.`);
  if (
    parameter.schema.format === 'date-time' &&
    location === 'query' &&
    PLUS_AS_SPACE.test(String(query[parameter.name]))
  ) {
    return invalidRequest(
      parameter.name,
      `${label} must be ${describeSchema(parameter.schema)}; its "+" arrived as a space, as an unencoded "+" in a URL does: encode "+" as %2B (…T06:00:00%2B04:00).`,
    );
  }
  return invalidRequest(parameter.name, `${label} must be ${describeSchema(parameter.schema)}.`);
}

/** A body field's validation error (the admin API's bodies): the field, named as in the document, or `body`. */
function bodyValidationError(err: ErrorObject): ApiError {
  if (err.keyword === 'required' && err.params.missingProperty === 'requestBody')
    return invalidRequest('body', 'The request needs a JSON body; see /openapi.json for its fields.');
  const path = err.instancePath.split('/').slice(2).map(decodeURIComponent);
  if (err.keyword === 'required') path.push(String(err.params.missingProperty));
  if (err.keyword === 'additionalProperties') {
    const name = echoed(String(err.params.additionalProperty));
    return invalidRequest(name, `Field "${name}" is not known to this operation; see /openapi.json for its fields.`);
  }
  const field = echoed(path.join('.')) || 'body';
  if (err.keyword === 'required') return invalidRequest(field, `Field "${field}" is required.`);
  return invalidRequest(
    field,
    field === 'body'
      ? `The request body ${err.message ?? 'is invalid'}.`
      : `Field "${field}" ${err.message ?? 'is invalid'}.`,
  );
}

/** A path template of the document (`/v1/webhooks/{id}/test`) as a regular expression over request paths. */
export function pathPattern(template: string): RegExp {
  return new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}/?$`);
}

// Random bytes for request ids, drawn from the CSPRNG 4 KiB at a time: one call per request cost more than
// any other line of ours on the /v1/me path (measured with --cpu-prof).
let randomPool = Buffer.alloc(0);
let randomOffset = 0;

export function newRequestId(): string {
  if (randomOffset + 12 > randomPool.length) {
    randomPool = crypto.randomBytes(4096);
    randomOffset = 0;
  }
  randomOffset += 12;
  return `req_${randomPool.subarray(randomOffset - 12, randomOffset).toString('base64url')}`;
}

/** Error codes of a stream cut short because the client closed its connection. */
const CLIENT_GONE = new Set(['ERR_STREAM_PREMATURE_CLOSE', 'ECONNRESET', 'EPIPE']);

/** Headers on every response: API answers are per caller and per moment, and are never to be sniffed as HTML. */
const RESPONSE_HEADERS = { 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff' };

/** The methods a path answers: its operations', HEAD with GET, and OPTIONS. */
export function allowedMethods(operations: Array<{ path: string; method: string }>, path: string): string[] {
  const methods = operations.filter((op) => pathPattern(op.path).test(path)).map((op) => op.method.toUpperCase());
  if (methods.length === 0) return [];
  if (methods.includes('GET')) methods.push('HEAD');
  return [...methods, 'OPTIONS'];
}

/**
 * The path with every segment that does not percent-decode (`%zz`, a lone `%`, a cut UTF-8 sequence) escaped
 * as literal text: routing and validation then see a parameter that is simply invalid (a 400 naming it, after
 * authentication) instead of failing to decode it.
 */
export function decodablePath(path: string): string {
  if (!path.includes('%')) return path;
  return path
    .split('/')
    .map((segment) => {
      try {
        decodeURIComponent(segment);
        return segment;
      } catch {
        return encodeURIComponent(segment);
      }
    })
    .join('/');
}

/** Query parameters the operation does not declare: the first one is refused by name. */
export function unknownQueryParameter(parameters: Parameter[], query: Record<string, unknown>): string | undefined {
  const known = new Set(parameters.filter((p) => p.in === 'query').map((p) => p.name));
  return Object.keys(query).find((name) => !known.has(name));
}

type PathTemplate = (template: string, patterns?: unknown) => unknown;

/**
 * openapi-backend compiles the matched operation's path template (bath-es5) into regular expressions on every parse
 * of a request, three times per request (about 20 µs of the ~100 µs /v1/me costs, measured); the templates are the
 * document's, so each is compiled once and kept. bath-es5's compiled template is a set of pure functions.
 */
function compilePathTemplatesOnce(): void {
  const bath = createRequire(createRequire(import.meta.url).resolve('openapi-backend'))('bath-es5') as {
    default: PathTemplate;
    compiledOnce?: true;
  };
  if (bath.compiledOnce) return;
  const compile = bath.default;
  const compiled = new Map<string, unknown>();
  bath.default = (template, patterns) => {
    if (patterns !== undefined) return compile(template, patterns);
    let path = compiled.get(template);
    if (path === undefined) compiled.set(template, (path = compile(template)));
    return path;
  };
  bath.compiledOnce = true;
}

/**
 * openapi-backend over the strict variant of a document (the public one unless given): the HTTP operations only (the
 * webhooks section is for receivers), requests validated with Ajv 2020-12, formats and defaults on. Shared with the
 * bench's framework baseline, so that row measures exactly this configuration, and with the admin API (src/admin/).
 */
export function contractBackend(options: {
  handlers: Record<string, unknown>;
  securityHandlers: Record<string, unknown>;
  document?: OpenApiDocument;
  generating?: true;
}): ContractBackend {
  compilePathTemplatesOnce();
  const { webhooks: _webhooks, ...httpDocument } = options.document ?? strictOpenApiDocument();
  return new ContractBackend(
    {
      definition: structuredClone(httpDocument) as unknown as Document,
      strict: true,
      quick: false,
      validate: true,
      coerceTypes: true,
      customizeAjv: (_ajv, ajvOpts) => {
        // Ajv's default draft-07 ignores 2020-12 keywords; formats and defaults must be switched on explicitly.
        // (`npm run generate` keeps each validator's source, for Ajv's standalone code)
        const ajv = new Ajv2020({
          ...ajvOpts,
          strict: false,
          useDefaults: true,
          allErrors: false,
          ...(options.generating && { code: { source: true } }),
        });
        addFormats.default(ajv);
        return ajv as never;
      },
      handlers: options.handlers as never,
      securityHandlers: options.securityHandlers as never,
    },
    options.generating ? undefined : documentFingerprint(httpDocument),
  );
}

/** openapi-backend rebuilds its operation list on every lookup (twice per request); the document is fixed. */
export function memoiseOperations(backend: OpenAPIBackend): ReturnType<OpenAPIBackend['router']['getOperations']> {
  const operations = backend.router.getOperations();
  backend.router.getOperations = () => operations;
  return operations;
}

/** A request's client address and its failure limit, worked out once per request (both listeners' authentication). */
export function requestGuard(limits: AuthFailureLimits, ctx: Koa.Context): AuthGuard {
  return (ctx.state.guard ??= {
    limits,
    address: limits.clientAddress(ctx.req.socket.remoteAddress, ctx.get('x-forwarded-for') || undefined),
  });
}

/** Whether a path is the settings screen's (src/portal/app.ts). */
const underPortal = (path: string) => path === '/portal' || path.startsWith('/portal/');

/** What the public listener lends the settings screen it serves: its clock and cursors, the failure limit, the workspace's share. */
export interface ListenerEdge {
  clock: () => Date;
  cursors: Cursors;
  /** The client address's failure limit, as for API keys. */
  guard: (ctx: Koa.Context) => AuthGuard;
  /** Takes the workspace's share of the API (its rate and concurrency limits) for the request. */
  admit: (ctx: Koa.Context, workspaceId: string) => Promise<void>;
}

export async function createApp({
  db,
  logger,
  clock = () => new Date(),
  metrics,
  keyCache,
  shedEventLoopLagMs = 0,
  limits,
  cursors = Cursors.fromApiSecret(),
  answerCacheBytes = processConfig().answerCacheBytes,
  portal,
  reads,
}: AppOptions): Promise<Koa> {
  const answers = answerCacheBytes > 0 ? new AnswerCache(answerCacheBytes) : undefined;
  const workspaceLimits = new WorkspaceLimits(limits?.workspace ?? processConfig().workspaceLimits);
  const authFailures = new AuthFailureLimits(limits?.authFailures ?? processConfig().authFailures);
  /** The request's guard: made only when asked for (a key answered from memory never asks). */
  const guardOf = (ctx: Koa.Context): AuthGuard => requestGuard(authFailures, ctx);
  /** Where the caller stands: its workspace's rate limit once known, else its address's failure limit. */
  const standingOf = async (ctx: Koa.Context) => {
    const admission = ctx.state.admission as Admission | undefined;
    const caller = ctx.state.caller as Caller | undefined;
    if (admission) return admission.standing;
    if (caller) return workspaceLimits.standing(caller.workspace.id);
    const guard = guardOf(ctx);
    return guard.standing ?? authFailures.standing(guard.address);
  };
  // Served as published (open to additions); requests are checked against the strict variant, so a parameter
  // takes only the values the document lists today.
  const document = loadOpenApiDocument();
  const backend = contractBackend({
    handlers: {
      notFound: () => {
        throw apiError('not_found', 'No such route. See /openapi.json for the operations.');
      },
      methodNotAllowed: (c: BackendContext, ctx: Koa.Context) => {
        // Only a 405 needs to know which path template matched, so it is worked out here, not on every request.
        const allowed = allowedMethods(operations, ctx.path);
        throw apiError('method_not_allowed', `This path does not accept ${c.request.method.toUpperCase()}.`, {
          headers: { Allow: allowed.join(', ') },
        });
      },
      unauthorizedHandler: (c: BackendContext, ctx: Koa.Context) => {
        ctx.state.operationId = c.operation.operationId;
        // The documented 401/403, or a failure of the lookup itself (an outage answers 503; anything else is logged, a 500).
        throw (c.security?.bearerAuth as { error?: unknown } | undefined)?.error ?? internalError();
      },
      validationFail: (c: BackendContext, ctx: Koa.Context) => {
        ctx.state.operationId = c.operation.operationId;
        throw validationError(
          (c.operation.parameters ?? []) as Parameter[],
          c.validation.errors as ErrorObject[],
          c.request.query as Record<string, unknown>,
        );
      },
      notImplemented: () => {
        throw internalError();
      },
    },
    securityHandlers: {
      bearerAuth: async (_c: BackendContext, ctx: Koa.Context) => {
        const caller = await authenticate(db, ctx.get('authorization') || undefined, clock(), keyCache, {
          limits: authFailures,
          guard: () => guardOf(ctx),
        });
        ctx.state.caller = caller;
        // The workspace's share, taken before the operation reads anything: a refusal costs a look-up in memory.
        ctx.state.admission = await workspaceLimits.admit(caller.workspace.id);
        return true;
      },
    },
  });
  for (const [operationId, handler] of Object.entries(operationHandlers)) {
    const respond = async (c: BackendContext, ctx: Koa.Context, readDb: Knex): Promise<OperationResult> => {
      ctx.state.operationId = operationId;
      const unknown = unknownQueryParameter(
        (c.operation.parameters ?? []) as Parameter[],
        c.request.query as Record<string, unknown>,
      );
      if (unknown !== undefined) throw unknownQuery(unknown);
      const context: OperationContext = {
        db: readDb,
        caller: ctx.state.caller as Caller,
        now: clock(),
        query: c.request.query as Record<string, unknown>,
        params: c.request.params as Record<string, string>,
        headers: ctx.headers,
        logger: ctx.state.logger as Logger,
        cursors,
      };
      // Conditional GETs (src/api/revalidation.ts): the tag is decided before the answer is built, from the data's
      // version, and a current tag in If-None-Match is answered 304 without building it (nor counting it against the
      // workspace's rate). The tag and its Cache-Control go on the answer only once it is made: an error has neither.
      const tag = await entityTag(operationId, context);
      if (tag === undefined) return handler(context);
      const answered = () => ctx.set({ ETag: tag, 'Cache-Control': REVALIDATED_CACHE_CONTROL });
      const ifNoneMatch = ctx.get('if-none-match') || undefined;
      if (noneMatchHolds(ifNoneMatch, tag)) {
        await (ctx.state.admission as Admission).revalidated();
        answered();
        return { status: 304, body: undefined };
      }
      // The answer of this tag, if this process made it (src/api/answer-cache.ts): it is the answer while the tag is.
      let body = answers?.get(tag);
      if (body === undefined) {
        const result = await handler(context);
        if (result.status !== 200) return result;
        body = typeof result.body === 'string' ? result.body : JSON.stringify(result.body);
        answers?.set(tag, body);
      }
      answered();
      // `*` holds for any answer there is: known once it is made (an unknown id is a 404, a bad cursor a 400), and counted.
      return noneMatchAny(ifNoneMatch) ? { status: 304, body: undefined } : { status: 200, body };
    };
    // An operation whose answer is built from a data version only reads (the GETs of the workspace's data): with
    // replicas, the pool for its reads is chosen once, so that its version and its answer come from one server. The
    // rest (the test operation, readiness), and authentication before any of them, run on the primary.
    const routed = reads !== undefined && ANSWER_INPUTS[operationId]?.inputs !== undefined;
    backend.register(operationId, (c: BackendContext, ctx: Koa.Context) => {
      if (!routed) return respond(c, ctx, db);
      return reads.read((pool) => {
        ctx.state.readPool = pool;
        return respond(c, ctx, pool.db);
      });
    });
  }
  await backend.init();
  const operations = memoiseOperations(backend);
  const router = new Router();
  const openApiJson = JSON.stringify(document);
  // (made when first asked for: writing the YAML took a tenth of a start)
  let openApiYaml: string | undefined;
  router.get('/openapi.json', (ctx) => {
    ctx.type = 'application/json';
    ctx.body = openApiJson;
  });
  router.get('/openapi.yaml', (ctx) => {
    ctx.type = 'application/yaml';
    ctx.body = openApiYaml ??= YAML.stringify(document);
  });
  registerDocs(router);

  const app = new Koa();
  app.proxy = false;
  // What goes wrong after the chain, while Koa streams a body out (a compressed answer, the reference page's script),
  // reaches Koa's error event; without a listener Koa prints it to stderr. A client that hung up mid-answer is no
  // defect (debug); anything else is logged as one.
  app.on('error', (err: NodeJS.ErrnoException, ctx?: Koa.Context) => {
    const log = (ctx?.state.logger as Logger | undefined) ?? logger;
    if (CLIENT_GONE.has(err.code ?? ''))
      log.debug({ err: { code: err.code } }, 'client closed the connection during the answer');
    else log.error({ err }, 'error while sending the answer');
  });
  app.use(
    requestEdge({
      logger,
      metrics,
      finish: async (ctx) => {
        const admission = ctx.state.admission as Admission | undefined;
        admission?.release();
        // (the settings screen's answers are the admin document's, which reads no replica)
        if (!underPortal(ctx.path))
          ctx.set(DATA_STALENESS_HEADER, String((ctx.state.readPool as ReadPool | undefined)?.maxStalenessMs() ?? 0));
        // Every answer says where the caller stands (a 429 already carries the standing that refused it).
        if (!ctx.response.get('RateLimit')) {
          // (admitted: its standing is at hand, with no await on the way out of every answered request)
          const standing = admission ? admission.standing : await standingOf(ctx).catch(() => undefined);
          if (standing) ctx.set(rateLimitHeaders(standing));
        }
      },
    }),
  );
  if (shedEventLoopLagMs > 0) app.use(loadShedding(shedEventLoopLagMs));
  if (portal) {
    // Before compression: the screen's answers carry keys and secrets once (no BREACH surface), as the admin API's do.
    const screen = await portal({
      clock,
      cursors,
      guard: guardOf,
      admit: async (ctx, workspaceId) => {
        ctx.state.admission = await workspaceLimits.admit(workspaceId);
      },
    });
    app.use((ctx, next) => (underPortal(ctx.path) ? screen(ctx, next) : next()));
  }
  // Compression wraps the routes and the operation (authentication and the rate limiter run inside openapi-backend's
  // handling): it acts on the answer only, so a refusal by any step before the operation costs it nothing.
  app.use(compression());
  app.use(router.routes());
  // No request body is read: no operation of the document takes one (the test operation ignores its body). So a
  // body that is malformed, compressed or huge cannot fail a request, and a request no operation accepts (401,
  // 404, 405) never has its body read. An operation that gains a request body gets a parser of its own.
  app.use(async (ctx) => {
    if (ctx.method === 'OPTIONS') {
      const allowed = allowedMethods(operations, ctx.path);
      if (allowed.length === 0) throw apiError('not_found', 'No such route. See /openapi.json for the operations.');
      ctx.set('Allow', allowed.join(', '));
      ctx.status = 204;
      return;
    }
    const result = await backend.handleRequest(
      // HEAD answers like GET; Koa then sends the headers without the body.
      {
        method: ctx.method === 'HEAD' ? 'GET' : ctx.method,
        path: decodablePath(ctx.path),
        query: ctx.querystring,
        headers: ctx.headers as Record<string, string>,
      },
      ctx,
    );
    ctx.status = result.status;
    ctx.body = result.body;
    // A handler that serialised its answer itself (to keep stored JSON bytes as they are) still answers JSON.
    if (typeof result.body === 'string') ctx.type = 'application/json';
  });
  return app;
}

/**
 * The edge every request of both listeners passes first (the public API's and the admin API's): its request id
 * (always the server's own; the client's X-Request-Id kept beside it), the headers every answer carries, a request-scoped logger, the
 * documented error body for whatever was thrown (an outage or a statement cut short is 503 with Retry-After, a client
 * error of Koa 400, anything else a logged 500), then `finish` (the listener's own bookkeeping) and the request's
 * log line and duration.
 */
export function requestEdge({
  logger,
  metrics,
  finish,
}: {
  logger: Logger;
  metrics?: ServiceMetrics;
  finish?: (ctx: Koa.Context) => Promise<void>;
}): Koa.Middleware {
  return async (ctx, next) => {
    const started = process.hrtime.bigint();
    // The request's id is the server's own, always (the audit trail and the log name it); the one a client sent is kept
    // beside it, as given (ctx.state.clientRequestId: logged, and in an audit entry), never in its place.
    const requestId = newRequestId();
    // redacted before it is cut (a secret cut short would no longer look like one), so no log line or entry holds one
    const clientRequestId = redactUrlCredentials(redactSecrets(ctx.get('x-request-id'))).slice(0, 200) || undefined;
    ctx.state.clientRequestId = clientRequestId;
    ctx.set('x-request-id', requestId);
    ctx.set(RESPONSE_HEADERS);
    ctx.state.logger = logger.child(clientRequestId === undefined ? { requestId } : { requestId, clientRequestId });
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined)
        throw apiError('not_found', 'No such route. See /openapi.json for the operations.');
    } catch (caught) {
      let err: ApiError;
      const refusal = coreError(caught, ctx.state.logger);
      if (caught instanceof ApiError) {
        err = caught;
      } else if (refusal) {
        // A core function's refusal, as the documented error its kind maps to (src/api/errors.ts).
        err = refusal;
      } else if (
        caught &&
        typeof caught === 'object' &&
        'status' in caught &&
        (caught as { status: number }).status < 500
      ) {
        // Body parser and Koa client errors (malformed JSON, payload too large): the documented 400 body.
        err = invalidRequest('body', 'The request body is not valid JSON.');
      } else if (isDatabaseUnavailable(caught)) {
        // An outage, not a defect: the client waits and tries again (the request's log line says 503).
        err = unavailable();
      } else if (isStatementCanceled(caught)) {
        // Cut short by the statement time limit (src/db/database.ts): the database is there but busy, or the request
        // too heavy for now; the client waits and tries again, as in an outage. Logged, so that an operator sees it.
        ctx.state.logger.warn(
          { err: { code: '57014', message: (caught as Error).message } },
          'statement cut short by its time limit',
        );
        err = statementTimedOut();
      } else {
        ctx.state.logger.error({ err: caught }, 'unhandled error');
        err = internalError();
      }
      if (err.holdMs > 0) await new Promise((resolve) => setTimeout(resolve, err.holdMs));
      ctx.status = err.status;
      for (const [name, value] of Object.entries(err.headers)) ctx.set(name, value);
      ctx.body = errorBody(err, requestId);
    } finally {
      await finish?.(ctx);
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      const operation = (ctx.state.operationId as string | undefined) ?? 'none';
      ctx.state.logger.info({ method: ctx.method, path: ctx.path, operation, status: ctx.status, ms }, 'request');
      metrics?.httpRequestDuration.observe({ operation, status: String(ctx.status) }, ms / 1000);
    }
  };
}

/**
 * Requests Node's HTTP parser refuses before the app sees them (headers over the limit, bytes a URL may not
 * contain, broken framing) get the documented error body and an x-request-id too, not Node's bare 400/431; a request
 * not whole within the HTTP limits' time-outs (src/api/http-limits.ts) gets 408. The connection is closed after it.
 * A request whose `Expect` is not `100-continue` gets 417 in the documented body and its connection closed: Node
 * hands it to 'checkExpectation', never to 'request', so neither the app nor the body time-out would see it, and
 * its body could be sent for as long as its sender liked.
 */
export function answerClientErrors(server: Server): void {
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    const requestId = newRequestId();
    const error = apiError('expectation_failed', 'The only expectation this server meets is Expect: 100-continue.', {
      reason: 'Expect',
    });
    const body = req.method === 'HEAD' ? '' : JSON.stringify(errorBody(error, requestId));
    res.writeHead(417, {
      ...(body && { 'Content-Type': 'application/json; charset=utf-8' }),
      'Content-Length': Buffer.byteLength(body),
      'x-request-id': requestId,
      [DATA_STALENESS_HEADER]: '0',
      'Cache-Control': 'no-store',
      'X-Content-Type-Options': 'nosniff',
      Connection: 'close',
    });
    // (the body it announced is not read: the connection goes once the answer is out)
    res.end(body, () => req.socket.destroy());
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    // As Node does: nothing is written into an answer already under way (its bytes would corrupt it).
    const answering =
      (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
    if (err.code === 'ECONNRESET' || !socket.writable || answering) {
      socket.destroy();
      return;
    }
    const requestId = newRequestId();
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      // Nothing says which method the request had (it never arrived whole), so, as for HEAD below, no body.
      socket.end(
        `HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nx-request-id: ${requestId}\r\n${DATA_STALENESS_HEADER}: 0\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n`,
      );
      return;
    }
    const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
    const error = tooLarge
      ? apiError('headers_too_large', 'The request headers are too large.')
      : invalidRequest(
          'request',
          'The request is not valid HTTP/1.1 (for example a URL with unencoded bytes outside ASCII).',
        );
    // An answer to HEAD never has a body (RFC 9110 §9.3.2): a client reads none, and would take the bytes for the
    // next answer. The body goes only where the refused bytes plainly start with another method (a later chunk of a
    // request, such as the rest of an overlong header, does not say which method it was: no body then either).
    const method = /^([A-Z]+)(?:[ \r\n]|$)/.exec(
      (err as { rawPacket?: Buffer }).rawPacket?.toString('latin1', 0, 16) ?? '',
    )?.[1];
    const body = method !== undefined && method !== 'HEAD' ? JSON.stringify(errorBody(error, requestId)) : '';
    socket.end(
      `HTTP/1.1 ${error.status} ${tooLarge ? 'Request Header Fields Too Large' : 'Bad Request'}\r\n` +
        `${body ? 'Content-Type: application/json; charset=utf-8\r\n' : ''}Content-Length: ${Buffer.byteLength(body)}\r\n` +
        `x-request-id: ${requestId}\r\n${DATA_STALENESS_HEADER}: 0\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n${body}`,
    );
  });
}

/**
 * Listens with the app on host:port, within the HTTP limits (src/api/http-limits.ts), answering client errors with
 * the documented body.
 */
export async function listen(
  app: Koa,
  port: number,
  host: string,
  limits: HttpLimits = DEFAULT_HTTP_LIMITS,
): Promise<Server> {
  const server = http.createServer(app.callback());
  applyHttpLimits(server, limits);
  answerClientErrors(server);
  return new Promise<Server>((resolve, reject) => {
    server.listen(port, host, () => resolve(server)).on('error', reject);
  });
}
