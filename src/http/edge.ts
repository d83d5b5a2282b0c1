// The edge every request of both listeners passes first, and the listening itself: request ids, the headers of every
// answer, the documented error body for whatever was thrown, and the documented answer to requests Node's HTTP parser
// refuses before any app sees them.
import crypto from 'node:crypto';
import http, { type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type Koa from 'koa';
import type { Logger } from 'pino';
import {
  ApiError,
  apiError,
  coreError,
  errorBody,
  internalError,
  invalidRequest,
  statementTimedOut,
  unavailable,
} from './error-catalogue.js';
import { isDatabaseUnavailable, isStatementCanceled } from '../db/outage.js';
import type { AuthFailureLimits, AuthGuard } from './auth-failures.js';
import { applyHttpLimits, DEFAULT_HTTP_LIMITS, type HttpLimits } from './http-limits.js';
import type { ServiceMetrics } from '../observability/metrics.js';
import { redactSecrets, redactUrlCredentials } from '../secrets.js';
import type { RequestContext, RequestMiddleware, RequestState } from './request-state.js';

/**
 * On every answer of the public listener: at most how many milliseconds old the data of the answer is (the replica's
 * bound when one answered; 0 when the primary did, or nothing was read). Here because the answers to refused requests
 * (answerClientErrors) carry it too.
 */
export const DATA_STALENESS_HEADER = 'Data-Max-Staleness-Ms';

/** The 404 of a path no operation (nor any other route) answers. */
export const noRoute = () => apiError('not_found', 'No such route. See /openapi.json for the operations.');

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

/**
 * What goes wrong after the chain, while Koa streams a body out (a compressed answer, the reference page's script),
 * reaches Koa's error event; without a listener Koa prints it to stderr. A client that hung up mid-answer is no
 * defect (debug); anything else is logged as one.
 */
export function logAnswerErrors(app: Koa<RequestState>, logger: Logger): void {
  app.on('error', (err: NodeJS.ErrnoException, ctx?: RequestContext) => {
    const log = ctx?.state.logger ?? logger;
    if (CLIENT_GONE.has(err.code ?? ''))
      log.debug({ err: { code: err.code } }, 'client closed the connection during the answer');
    else log.error({ err }, 'error while sending the answer');
  });
}

/** Headers on every response: API answers are per caller and per moment, and are never to be sniffed as HTML. */
const RESPONSE_HEADERS = { 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff' };

/** A request's client address and its failure limit, worked out once per request (both listeners' authentication). */
export function requestGuard(limits: AuthFailureLimits, ctx: RequestContext): AuthGuard {
  return (ctx.state.guard ??= {
    limits,
    address: limits.clientAddress(ctx.req.socket.remoteAddress, ctx.get('x-forwarded-for') || undefined),
  });
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
  finish?: (ctx: RequestContext) => Promise<void>;
}): RequestMiddleware {
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
      if (ctx.status === 404 && ctx.body === undefined) throw noRoute();
    } catch (caught) {
      let err: ApiError;
      const refusal = coreError(caught, ctx.state.logger);
      if (caught instanceof ApiError) {
        err = caught;
      } else if (refusal) {
        // A core function's refusal, as the documented error its kind maps to (src/http/error-catalogue.ts).
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
      const operation = ctx.state.operationId ?? 'none';
      ctx.state.logger.info({ method: ctx.method, path: ctx.path, operation, status: ctx.status, ms }, 'request');
      metrics?.httpRequestDuration.observe({ operation, status: String(ctx.status) }, ms / 1000);
    }
  };
}

/**
 * Requests Node's HTTP parser refuses before the app sees them (headers over the limit, bytes a URL may not
 * contain, broken framing) get the documented error body and an x-request-id too, not Node's bare 400/431; a request
 * not whole within the HTTP limits' time-outs (http-limits.ts) gets 408. The connection is closed after it.
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
 * Listens with the app on host:port, within the HTTP limits (http-limits.ts), answering client errors with
 * the documented body.
 */
export async function listen(
  app: { callback(): http.RequestListener },
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
