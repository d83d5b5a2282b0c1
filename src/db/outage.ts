import type { Logger } from 'pino';

// A database outage as the rest of the code sees it: one test of whether an error means "the database cannot be
// reached or cannot serve now" (the edge answers 503 with Retry-After, the worker retries with backoff), one of
// whether a statement was cut short by its time limit (the edge answers 503 too), and one log of an outage that says
// so once when it starts and once when it ends, however many calls fail in between.

/** SQLSTATEs of a server that is going away, starting, or out of connections: try again later, not a bug. */
const UNAVAILABLE_STATES = new Set([
  '57P01', // admin_shutdown (a fast or smart stop terminated the backend)
  '57P02', // crash_shutdown (another backend crashed; the server restarts)
  '57P03', // cannot_connect_now (starting up, shutting down, in recovery)
  '53300', // too_many_connections
  '58030', // io_error
]);

/** Socket-level codes of a server that is not there (or a route to it that is not). */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/** What node-postgres and knex say, without a code, when a connection died or none could be had in time. */
const UNAVAILABLE_MESSAGES = [
  'Connection terminated',
  'Client has encountered a connection error and is not queryable',
  'timeout expired', // pg's connectionTimeoutMillis
  'Query read timeout', // pg's query_timeout: the server went silent
  'Knex: Timeout acquiring a connection',
];

/** Whether `err` says the database cannot serve now (unreachable, restarting, out of connections). */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (!err || typeof err !== 'object') return false;
  const { code, name, message } = err as { code?: unknown; name?: unknown; message?: unknown };
  if (
    typeof code === 'string' &&
    (code.startsWith('08') || UNAVAILABLE_STATES.has(code) || UNREACHABLE_CODES.has(code))
  )
    return true;
  if (name === 'KnexTimeoutError') return true;
  if (typeof message === 'string' && UNAVAILABLE_MESSAGES.some((text) => message.includes(text))) return true;
  // AggregateError (a connect to several addresses) and errors wrapping their cause
  const nested = err as { errors?: unknown[]; cause?: unknown };
  if (Array.isArray(nested.errors) && nested.errors.some(isDatabaseUnavailable)) return true;
  return nested.cause !== undefined && nested.cause !== err && isDatabaseUnavailable(nested.cause);
}

/**
 * Whether `err` is a statement cut short: SQLSTATE 57014 query_canceled, which the API's statement time limit raises
 * (src/db/database.ts, API_STATEMENT_TIMEOUT_MS), as does an operator's pg_cancel_backend(). Not an outage, and not
 * a defect either: the database is there but would not answer this statement in time, so the API answers 503 with
 * Retry-After. (The worker's statements have no time limit: there it can only be an operator's cancel.)
 */
export function isStatementCanceled(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '57014';
}

/** Whole seconds an API client is asked to wait during an outage (RFC 9110 Retry-After). */
export const UNAVAILABLE_RETRY_AFTER_S = 5;

/**
 * Logs an outage of the database as seen by one loop (a sweep, a listener): the first failure at error, the
 * failures after it at debug, and the first success after them at info with how long it lasted and how many calls
 * failed. Errors that are not an outage are logged at error every time: they are bugs, not weather.
 */
export class OutageLog {
  private since: number | undefined;
  private failures = 0;

  constructor(
    private readonly logger: Logger,
    private readonly what: string,
  ) {}

  /** Whether an outage is going on (a failure not yet followed by a success). */
  get ongoing(): boolean {
    return this.since !== undefined;
  }

  failed(err: unknown, retryInMs?: number): void {
    const message = { message: (err as Error)?.message };
    if (!isDatabaseUnavailable(err)) {
      this.logger.error({ err }, `${this.what} failed`);
      return;
    }
    this.failures++;
    if (this.since !== undefined) {
      this.logger.debug(
        { err: message, failures: this.failures, retryInMs },
        `${this.what}: database still unavailable`,
      );
      return;
    }
    this.since = Date.now();
    this.logger.error(
      { err: message, retryInMs },
      `${this.what}: database unavailable; retrying with backoff until it answers`,
    );
  }

  succeeded(): void {
    if (this.since === undefined) return;
    this.logger.info(
      { failures: this.failures, ms: Date.now() - this.since },
      `${this.what}: database available again`,
    );
    this.since = undefined;
    this.failures = 0;
  }
}

/** The wait before retry `n` (1-based) of a loop that failed: doubling from `firstMs` up to `maxMs`. */
export function backoffMs(n: number, firstMs: number, maxMs: number): number {
  return Math.min(maxMs, firstMs * 2 ** Math.max(0, n - 1));
}
