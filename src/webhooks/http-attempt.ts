import type { KeyObject } from 'node:crypto';
import type { Dispatcher as HttpDispatcher } from 'undici';
import { BlockedDestinationError, guardedAgent, type DestinationPolicy } from './destination-policy.js';
import { processConfig } from '../config.js';
import { GONE_STATUS, parseHttpDate, parseRetryAfter, THROTTLING_STATUSES } from './etiquette.js';
import { EgressProxyError } from './egress-proxy.js';
import { NameResolutionError } from './name-resolution.js';
import { asymmetricSignatures, signatureHeader, standardWebhooksHeaders } from './signing.js';

// One HTTP attempt of one delivery: sign with the real clock, POST the fixed body bytes, never follow a redirect,
// give up when the whole exchange (connect, headers, the first 4 KiB of the body) takes longer than the time-out.
// Requests go through the agent of the destination policy, whose connector refuses private addresses (through the
// egress proxy when one is set: egress-proxy.ts).

export const DEFAULT_ATTEMPT_TIMEOUT_MS = 10_000;
/** How much of the response body an attempt keeps. */
export const RESPONSE_BODY_LIMIT = 4096;
const ERROR_TEXT_LIMIT = 500;
const USER_AGENT = 'FleetRentalService-Webhooks/1.0';

export type AttemptErrorKind = 'timeout' | 'connection' | 'dns' | 'redirect' | 'status' | 'blocked_destination';

export interface AttemptRequest {
  url: string;
  /**
   * The endpoint's current signing secrets, newest first (two during a rotation's overlap); none for an ed25519
   * endpoint once its switch's overlap is over (then neither `v1` nor service-signature is sent).
   */
  secrets: string[];
  /** The endpoint's ed25519 private keys that sign `v1a`, newest first (two during a key rotation's overlap). */
  signingKeys?: KeyObject[];
  deliveryId: string;
  event: string;
  /** The delivery's body bytes, as created. */
  body: string;
}

export interface AttemptOutcome {
  /** True for a 2xx answer within the time-out. */
  ok: boolean;
  startedAt: Date;
  durationMs: number;
  statusCode: number | null;
  errorKind: AttemptErrorKind | null;
  /** Human-readable reason of a failure; never contains a signing secret. */
  error: string | null;
  /** The first 4 KiB of the response body (valid UTF-8, NUL characters dropped), when there was an answer. */
  responseBody: string | null;
  /**
   * What only the operator may read of the failure (for the log, never recorded): a refused destination's address
   * and the settings that would allow it, where `error` names its class only; the egress proxy's address.
   */
  detail?: string;
  /** The answer was 410 Gone: the receiver wants no more deliveries, and the endpoint is switched off (etiquette.ts). */
  gone?: boolean;
  /**
   * The answer was 429, 502, 503 or 504: the endpoint is throttled. `retryAfterMs`: what its `Retry-After` asked
   * (at most 24 h); null without a usable one.
   */
  throttle?: { retryAfterMs: number | null };
}

/** The first `limit` bytes of a body as text, cut at a character boundary, without NUL (Postgres text refuses it). */
export function firstBytes(raw: Buffer, limit = RESPONSE_BODY_LIMIT): string {
  const text = raw.subarray(0, limit).toString('utf8').replaceAll('\u0000', '');
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= limit) return text;
  // Invalid sequences became U+FFFD (3 bytes each): cut again, at the last character boundary within the limit.
  let end = limit;
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end).toString('utf8');
}

function describeError(err: unknown): string {
  const e = err as { code?: string; message?: string; cause?: { code?: string; message?: string } };
  const code = e?.cause?.code ?? e?.code;
  const message = e?.cause?.message ?? e?.message ?? String(err);
  return code && !message.includes(code) ? `${code}: ${message}` : message;
}

export interface AttemptOptions {
  timeoutMs?: number;
  /** Which destinations may be reached. Default: the environment's (strict unless switched). */
  policy?: DestinationPolicy;
  /** Another HTTP client to send through instead of the policy's agent (nock's, in tests that use it). */
  via?: HttpDispatcher;
}

/** A URL's origin and path as undici's dispatch() takes them, kept per URL text (an endpoint's deliveries share it). */
const targets = new Map<string, { origin: string; path: string }>();
const TARGETS_KEPT = 1000;

function target(url: string): { origin: string; path: string } {
  let found = targets.get(url);
  if (!found) {
    const parsed = new URL(url);
    found = { origin: parsed.origin, path: `${parsed.pathname}${parsed.search}` };
    if (targets.size >= TARGETS_KEPT) targets.clear();
    targets.set(url, found);
  }
  return found;
}

/** The first header `name` (lower case) of a response's raw headers (name, value, name, value...). */
function headerOf(rawHeaders: Array<Buffer | string> | null, name: string): string | undefined {
  if (!rawHeaders) return undefined;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if (rawHeaders[i].toString().toLowerCase() === name) return rawHeaders[i + 1].toString('latin1');
  }
  return undefined;
}

/**
 * What a 410 or a throttling answer asks (etiquette.ts), read from its headers when they arrive. An HTTP-date in
 * `Retry-After` is measured from the answer's own `Date` when it has a valid one (the receiver's clock), else from ours.
 */
function askedBy(code: number, rawHeaders: Array<Buffer | string> | null): Pick<AttemptOutcome, 'gone' | 'throttle'> {
  if (code === GONE_STATUS) return { gone: true };
  if (!THROTTLING_STATUSES.has(code)) return {};
  const now = new Date();
  const dated = headerOf(rawHeaders, 'date');
  const answeredAt = (dated !== undefined && parseHttpDate(dated.trim(), now)) || now;
  return { throttle: { retryAfterMs: parseRetryAfter(headerOf(rawHeaders, 'retry-after'), answeredAt) } };
}

/**
 * The signature headers: service-signature and the `v1` entries while the endpoint's secret signs, the `v1a` entries
 * while its ed25519 keys do (both during a switch's overlap), in one `webhook-signature`, space-separated.
 */
function signatureHeaders(req: AttemptRequest, body: Buffer, timestamp: number): Record<string, string> {
  const keys = req.signingKeys ?? [];
  const symmetric =
    req.secrets.length > 0 ? standardWebhooksHeaders(req.secrets, req.deliveryId, body, timestamp) : null;
  const asymmetric = keys.length > 0 ? asymmetricSignatures(keys, req.deliveryId, body, timestamp) : null;
  return {
    ...(symmetric ? { 'service-signature': signatureHeader(req.secrets, body, timestamp) } : {}),
    'webhook-id': req.deliveryId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': [symmetric?.['webhook-signature'], asymmetric].filter(Boolean).join(' '),
  };
}

/** An outcome before its timing is added: what the exchange came to. */
type Result = Omit<AttemptOutcome, 'startedAt' | 'durationMs'>;

/**
 * One attempt. It goes through undici's dispatch() with a handler of its own rather than request(): no response
 * stream, abort signal or promise race per attempt (measured: about half the Node CPU of an attempt, beyond the bare
 * POST). One timer bounds the whole exchange: connect, headers and the first 4 KiB of the body.
 */
export function attemptDelivery(req: AttemptRequest, options: AttemptOptions = {}): Promise<AttemptOutcome> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_ATTEMPT_TIMEOUT_MS;
  const via = options.via ?? guardedAgent(options.policy ?? processConfig().deliveryPolicy);
  return new Promise<AttemptOutcome>((resolve) => {
    const exchange = new Exchange(req, timeoutMs, resolve);
    try {
      // (inside the try: a URL that does not parse is a failed attempt, never a rejected promise)
      via.dispatch(signedRequest(req, timeoutMs), exchange.handler());
    } catch (err) {
      exchange.failed(err);
    }
  });
}

/**
 * The POST of one attempt. One timestamp for both schemes: the description's four headers, then the Standard
 * Webhooks three. The body's bytes are made once, for both signatures and the request.
 */
function signedRequest(req: AttemptRequest, timeoutMs: number): HttpDispatcher.DispatchOptions {
  const timestamp = Math.floor(Date.now() / 1000);
  const body = Buffer.from(req.body, 'utf8');
  const { origin, path } = target(req.url);
  return {
    origin,
    path,
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'user-agent': USER_AGENT,
      'service-event': req.event,
      'service-delivery': req.deliveryId,
      ...signatureHeaders(req, body, timestamp),
    },
    body,
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  };
}

/** One exchange in progress: what has come back so far, and its single outcome (the first of answer, error, time-out). */
class Exchange {
  private readonly startedAt = new Date();
  private readonly started = performance.now();
  private settled = false;
  private abort: ((reason?: Error) => void) | undefined;
  private statusCode = 0;
  private location: string | undefined;
  private asked: Pick<AttemptOutcome, 'gone' | 'throttle'> = {};
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly req: AttemptRequest,
    private readonly timeoutMs: number,
    private readonly resolve: (outcome: AttemptOutcome) => void,
  ) {
    this.timer = setTimeout(() => {
      this.finish({
        ok: false,
        statusCode: null,
        errorKind: 'timeout',
        error: `no complete answer within ${this.timeoutMs} ms`,
        responseBody: null,
      });
      this.abort?.(new Error('attempt timed out'));
    }, timeoutMs);
  }

  /** undici's first handler API (onConnect, onHeaders, ...): nock's undici interceptor calls only these. */
  handler(): HttpDispatcher.DispatchHandler {
    return {
      onConnect: (abortRequest: (reason?: Error) => void) => {
        this.abort = abortRequest;
        // (the time-out came first: give the connection up at once)
        if (this.settled) abortRequest(new Error('attempt timed out'));
      },
      onHeaders: (code: number, rawHeaders: Array<Buffer | string> | null) => {
        if (code < 200) return true; // an informational answer; the real one follows
        this.statusCode = code;
        if (code >= 300 && code < 400) this.location = headerOf(rawHeaders, 'location');
        this.asked = askedBy(code, rawHeaders);
        return true;
      },
      onData: (chunk: Buffer) => {
        this.chunks.push(chunk);
        this.size += chunk.length;
        if (this.size >= RESPONSE_BODY_LIMIT && !this.settled) {
          // Enough of the body: the rest (and its connection) is given up instead of read.
          this.answered();
          // Given up after this parser callback returns: a body that ends in this very chunk completes normally
          // (and keeps its connection); the abort then does nothing.
          queueMicrotask(() => this.abort?.(new Error('response body kept up to its limit')));
        }
        return true;
      },
      onComplete: () => {
        if (!this.settled) this.answered();
      },
      onError: (err: Error) => {
        this.failed(err);
      },
    };
  }

  failed(err: unknown): void {
    if (this.settled) return;
    this.finish(failureOf(err));
  }

  private answered(): void {
    const chunks = this.chunks;
    const responseBody = firstBytes(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
    this.finish(answerOf(this.statusCode, this.location, responseBody, this.asked));
  }

  private finish(fields: Result): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.timer);
    this.resolve({
      ...fields,
      error:
        fields.error === null
          ? null
          : this.req.secrets
              .reduce((text, secret) => text.replaceAll(secret, '[redacted]'), fields.error)
              .slice(0, ERROR_TEXT_LIMIT),
      startedAt: this.startedAt,
      durationMs: Math.max(0, Math.round(performance.now() - this.started)),
    });
  }
}

/**
 * What an answer comes to: 2xx accepted, a redirect (never followed) or another status, failed; a 410 or a throttling
 * answer says what it asked in its error text.
 */
function answerOf(
  statusCode: number,
  location: string | undefined,
  responseBody: string,
  asked: Pick<AttemptOutcome, 'gone' | 'throttle'>,
): Result {
  if (statusCode >= 200 && statusCode < 300)
    return { ok: true, statusCode, errorKind: null, error: null, responseBody };
  if (statusCode >= 300 && statusCode < 400) {
    const to = location ? ` to ${location}` : '';
    return {
      ok: false,
      statusCode,
      errorKind: 'redirect',
      error: `HTTP ${statusCode} redirect${to} (redirects are not followed)`,
      responseBody,
    };
  }
  const retryAfterMs = asked.throttle?.retryAfterMs;
  const why = asked.gone
    ? ' (gone: the receiver wants no more deliveries)'
    : !asked.throttle
      ? ''
      : retryAfterMs === null
        ? ' (throttled)'
        : ` (throttled: Retry-After ${Math.ceil(retryAfterMs! / 1000)} s)`;
  return { ok: false, statusCode, errorKind: 'status', error: `HTTP ${statusCode}${why}`, responseBody, ...asked };
}

/** What an exchange that got no answer comes to: a refused destination, a name that did not resolve, a time-out... */
function failureOf(err: unknown): Result {
  const blocked = err instanceof BlockedDestinationError ? err : (err as { cause?: unknown })?.cause;
  if (blocked instanceof BlockedDestinationError) {
    return {
      ok: false,
      statusCode: null,
      errorKind: 'blocked_destination',
      error: blocked.recorded,
      responseBody: null,
      detail: blocked.message,
    };
  }
  // The egress proxy could not be reached or refused the tunnel: a connection failure whose record names neither the
  // proxy's address nor its credentials (the log's detail names the address).
  const proxied = err instanceof EgressProxyError ? err : (err as { cause?: unknown })?.cause;
  if (proxied instanceof EgressProxyError) {
    return {
      ok: false,
      statusCode: null,
      errorKind: 'connection',
      error: proxied.recorded,
      responseBody: null,
      detail: proxied.message,
    };
  }
  // A name that did not resolve (within the lookup's deadline): its own kind, so a DNS outage reads as one.
  if (err instanceof NameResolutionError || (err as { cause?: unknown })?.cause instanceof NameResolutionError) {
    return { ok: false, statusCode: null, errorKind: 'dns', error: describeError(err), responseBody: null };
  }
  const code = (err as { code?: string }).code;
  const timedOut =
    code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT';
  return {
    ok: false,
    statusCode: null,
    errorKind: timedOut ? 'timeout' : 'connection',
    error: describeError(err),
    responseBody: null,
  };
}
