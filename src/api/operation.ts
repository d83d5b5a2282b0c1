import type { IncomingHttpHeaders } from 'node:http';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Caller } from './auth.js';
import type { Cursors } from '../http/cursors.js';
import type { AnswerInputs } from '../queries/data-versions.js';
import type { EventArrivals } from './event-arrivals.js';

// What an operation of the public API is (one file each in src/api/operations/, named by its operationId): its handler,
// and for a GET of /v1 what its ETag is made of (src/api/revalidation.ts), side by side.

/** What an operation handler gets: the caller (already authenticated) and the validated, coerced parameters. */
export interface OperationContext {
  db: Knex;
  caller: Caller;
  now: Date;
  query: Record<string, unknown>;
  params: Record<string, string>;
  headers: IncomingHttpHeaders;
  logger: Logger;
  /** Signs and checks the lists' cursors (src/http/cursors.ts). */
  cursors: Cursors;
  /** Aborted when the client goes before its answer is made (a long poll stops waiting). */
  signal: AbortSignal;
  /** The event feed's long polls (src/api/event-arrivals.ts); none: a wait reads again every second. */
  events?: EventArrivals;
}

export interface OperationResult {
  status: number;
  body: unknown;
}

export type Handler = (c: OperationContext) => Promise<OperationResult>;

/**
 * What a GET operation's answer is made of beyond the caller, the operation and its parameters: the data version of
 * `inputs` (src/queries/data-versions.ts; none: no data, as getMe's), and what else of the clock decides it.
 */
export interface EtagInputs {
  inputs?: AnswerInputs;
  clock?: (query: Record<string, unknown>, now: Date) => string;
}

export interface PublicOperation {
  handle: Handler;
  /** For a GET of /v1: what its ETag depends on. Without: the answer carries no ETag. */
  etag?: EtagInputs;
}

export const ok = (body: unknown): OperationResult => ({ status: 200, body });
