import { request, type Dispatcher as HttpDispatcher } from 'undici';
import { BlockedDestinationError, destinationPolicyFromEnv, guardedAgent, type DestinationPolicy } from './destination-policy.js';
import { signatureHeader, standardWebhooksHeaders } from './signing.js';

// One HTTP attempt of one delivery: sign with the real clock, POST the fixed body bytes, never follow a redirect,
// give up when the whole exchange (connect, headers, the first 4 KiB of the body) takes longer than the time-out.
// Requests go through the agent of the destination policy, whose connector refuses private addresses.

export const DEFAULT_ATTEMPT_TIMEOUT_MS = 10_000;
/** How much of the response body an attempt keeps. */
export const RESPONSE_BODY_LIMIT = 4096;
const ERROR_TEXT_LIMIT = 500;
const USER_AGENT = 'FleetRentalService-Webhooks/1.0';

export type AttemptErrorKind = 'timeout' | 'connection' | 'redirect' | 'status' | 'blocked_destination';

export interface AttemptRequest {
  url: string;
  /** The endpoint's current signing secrets, newest first (two during a rotation's overlap). */
  secrets: string[];
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

class AttemptTimeout extends Error {}

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

let envPolicy: DestinationPolicy | undefined;

export async function attemptDelivery(req: AttemptRequest, options: AttemptOptions = {}): Promise<AttemptOutcome> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_ATTEMPT_TIMEOUT_MS;
  const via = options.via ?? guardedAgent(options.policy ?? (envPolicy ??= destinationPolicyFromEnv()));
  const startedAt = new Date();
  const started = performance.now();
  const abort = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(new AttemptTimeout(`no complete answer within ${timeoutMs} ms`));
      abort.abort();
    }, timeoutMs);
  });

  const exchange = async (): Promise<{ statusCode: number; location: string | undefined; body: Buffer }> => {
    // One timestamp for both schemes: the description's four headers, then the Standard Webhooks three. The body's
    // bytes are made once, for both signatures and the request.
    const timestamp = Math.floor(Date.now() / 1000);
    const body = Buffer.from(req.body, 'utf8');
    const response = await request(req.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'user-agent': USER_AGENT,
        'service-event': req.event,
        'service-delivery': req.deliveryId,
        'service-signature': signatureHeader(req.secrets, body, timestamp),
        ...standardWebhooksHeaders(req.secrets, req.deliveryId, body, timestamp),
      },
      body,
      signal: abort.signal,
      dispatcher: via,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    const chunks: Buffer[] = [];
    let size = 0;
    // Breaking out of the loop destroys the rest of a long body (and its connection) instead of reading it.
    for await (const chunk of response.body) {
      chunks.push(chunk as Buffer);
      size += (chunk as Buffer).length;
      if (size >= RESPONSE_BODY_LIMIT) break;
    }
    const location = response.headers.location;
    return { statusCode: response.statusCode, location: Array.isArray(location) ? location[0] : location, body: Buffer.concat(chunks) };
  };

  const finish = (fields: Omit<AttemptOutcome, 'startedAt' | 'durationMs'>): AttemptOutcome => ({
    ...fields,
    error: fields.error === null ? null : req.secrets.reduce((text, secret) => text.replaceAll(secret, '[redacted]'), fields.error).slice(0, ERROR_TEXT_LIMIT),
    startedAt,
    durationMs: Math.max(0, Math.round(performance.now() - started)),
  });

  try {
    const { statusCode, location, body } = await Promise.race([exchange(), deadline]);
    const responseBody = firstBytes(body);
    if (statusCode >= 200 && statusCode < 300) return finish({ ok: true, statusCode, errorKind: null, error: null, responseBody });
    if (statusCode >= 300 && statusCode < 400) {
      const target = location ? ` to ${location}` : '';
      return finish({ ok: false, statusCode, errorKind: 'redirect', error: `HTTP ${statusCode} redirect${target} (redirects are not followed)`, responseBody });
    }
    return finish({ ok: false, statusCode, errorKind: 'status', error: `HTTP ${statusCode}`, responseBody });
  } catch (err) {
    const blocked = err instanceof BlockedDestinationError ? err : (err as { cause?: unknown })?.cause;
    if (blocked instanceof BlockedDestinationError) {
      return finish({ ok: false, statusCode: null, errorKind: 'blocked_destination', error: blocked.recorded, responseBody: null });
    }
    const code = (err as { code?: string }).code;
    const timedOut = err instanceof AttemptTimeout || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT';
    return finish({
      ok: false,
      statusCode: null,
      errorKind: timedOut ? 'timeout' : 'connection',
      error: timedOut && err instanceof AttemptTimeout ? err.message : describeError(err),
      responseBody: null,
    });
  } finally {
    // (No abort here: only the time-out leaves an exchange unfinished, and it aborts it. An abort costs a DOMException
    // with its stack, a few percent of the dispatcher's CPU when done for every attempt.)
    clearTimeout(timer);
  }
}
