import type { ErrorResponse as PublicErrorBody } from '../../generated/strict/types.gen.js';
import type { ErrorResponse as AdminErrorBody } from '../../generated/admin-strict/types.gen.js';
import { UNAVAILABLE_RETRY_AFTER_S } from '../db/outage.js';

/** The codes of both documents' error body (the same body: the admin API's has a few codes of its own). */
export type ErrorCode = PublicErrorBody['error']['code'] | AdminErrorBody['error']['code'];
type ErrorBody = { error: { code: ErrorCode; message: string; reason?: string; requestId: string } };

/** An error the API answers with the documented error body. Anything else thrown becomes a 500. */
export class ApiError extends Error {
  /** How long the answer is held before it is sent (a refusal of the rate limits: see src/api/rate-limits.ts). */
  holdMs = 0;

  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly reason?: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export const invalidRequest = (parameter: string, message: string) => new ApiError(400, 'invalid_request', message, parameter);

export function errorBody(err: ApiError, requestId: string): ErrorBody {
  return {
    error: {
      code: err.code,
      message: err.message,
      ...(err.reason !== undefined ? { reason: err.reason } : {}),
      requestId,
    },
  };
}

export const internalError = () =>
  new ApiError(500, 'internal_error', 'Something went wrong on our side. Quote the request id if it persists.');

const RETRY_LATER = { 'Retry-After': String(UNAVAILABLE_RETRY_AFTER_S) };

/** The database cannot serve now (src/db/outage.ts): the documented 503, with how long to wait. */
export const unavailable = () =>
  new ApiError(503, 'unavailable', `The service cannot reach its database just now. Try again in ${UNAVAILABLE_RETRY_AFTER_S} seconds.`, undefined, RETRY_LATER);

/**
 * A new signing secret cannot be sealed yet: no worker has recorded its master key's public key (the operator's
 * reason goes to the server log, never to the caller, who may be a workspace's staff). The documented 503.
 */
export const sealingUnavailable = () =>
  new ApiError(503, 'unavailable', `The service cannot seal a new signing secret until its webhook worker has started. Try again in ${UNAVAILABLE_RETRY_AFTER_S} seconds.`, undefined, RETRY_LATER);

/** A statement of the request ran past the API's time limit (src/db/outage.ts): the same documented 503. */
export const statementTimedOut = () =>
  new ApiError(503, 'unavailable', `The database did not answer this request within the time the service allows. Try again in ${UNAVAILABLE_RETRY_AFTER_S} seconds.`, undefined, RETRY_LATER);
