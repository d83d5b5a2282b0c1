import type { Logger } from 'pino';
import type { ErrorResponse as PublicErrorBody } from '../../generated/strict/types.gen.js';
import type { ErrorResponse as AdminErrorBody } from '../../generated/admin-strict/types.gen.js';
import { UNAVAILABLE_RETRY_AFTER_S } from '../db/outage.js';
import {
  BusyError,
  ConflictError,
  CredentialError,
  type CredentialFailure,
  FieldError,
  InputError,
  InvalidFieldError,
  KeyReusedError,
  LimitError,
  NotFoundError,
  TooLargeError,
} from '../errors.js';

/** The codes of both documents' error body (the same body: the admin API's has a few codes of its own). */
export type ErrorCode = PublicErrorBody['error']['code'] | AdminErrorBody['error']['code'];
type ErrorBody = { error: { code: ErrorCode; message: string; reason?: string; requestId: string } };

/**
 * The error catalogue: every code the documents declare for their error body, with its HTTP status, as their
 * descriptions give it. A code added to a document fails the type check until it has its status here;
 * test/api/error-catalogue.test.ts holds the table against the documents both ways.
 */
export const STATUS = {
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  workspace_frozen: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  idempotency_key_reused: 409,
  missing_reference: 409,
  dependent_records: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  expectation_failed: 417,
  rate_limited: 429,
  headers_too_large: 431,
  internal_error: 500,
  unavailable: 503,
  overloaded: 503,
  not_ready: 503,
} as const satisfies Record<ErrorCode, number>;

export interface ApiErrorOptions {
  /** The body's `reason`: on 400 and 409 the parameter, header or field at fault, on 401 and 429 which case. */
  reason?: string;
  /** Header fields of the answer (Retry-After, WWW-Authenticate, Allow). */
  headers?: Record<string, string>;
}

/** An error the API answers with the documented error body, its status its code's. Anything else thrown becomes a 500. */
export class ApiError extends Error {
  /** How long the answer is held before it is sent (a refusal of the rate limits: see src/api/rate-limits.ts). */
  holdMs = 0;
  readonly status: number;
  readonly reason?: string;
  readonly headers: Record<string, string>;

  constructor(
    readonly code: ErrorCode,
    message: string,
    options: ApiErrorOptions = {},
  ) {
    super(message);
    this.status = STATUS[code];
    this.reason = options.reason;
    this.headers = options.headers ?? {};
  }
}

/** The documented error of `code` (its status from the catalogue). */
export const apiError = (code: ErrorCode, message: string, options?: ApiErrorOptions) =>
  new ApiError(code, message, options);

export const invalidRequest = (parameter: string, message: string) =>
  apiError('invalid_request', message, { reason: parameter });

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
  apiError('internal_error', 'Something went wrong on our side. Quote the request id if it persists.');

const RETRY_LATER = { 'Retry-After': String(UNAVAILABLE_RETRY_AFTER_S) };

/** The database cannot serve now (src/db/outage.ts): the documented 503, with how long to wait. */
export const unavailable = () =>
  apiError(
    'unavailable',
    `The service cannot reach its database just now. Try again in ${UNAVAILABLE_RETRY_AFTER_S} seconds.`,
    { headers: RETRY_LATER },
  );

/**
 * A new signing secret cannot be sealed yet: no worker has recorded its master key's public key (the operator's
 * reason goes to the server log, never to the caller, who may be a workspace's staff). The documented 503.
 */
export const sealingUnavailable = () =>
  apiError(
    'unavailable',
    `The service cannot seal a new signing secret until its webhook worker has started. Try again in ${UNAVAILABLE_RETRY_AFTER_S} seconds.`,
    { headers: RETRY_LATER },
  );

/** A statement of the request ran past the API's time limit (src/db/outage.ts): the same documented 503. */
export const statementTimedOut = () =>
  apiError(
    'unavailable',
    `The database did not answer this request within the time the service allows. Try again in ${UNAVAILABLE_RETRY_AFTER_S} seconds.`,
    { headers: RETRY_LATER },
  );

/** How the HTTP APIs name a field inside a refusal, and the field a refusal is about. */
const quoted = (field: string) => `"${field}"`;
const fieldNamed = (field: string) => `Field "${field}"`;

/** The 401 of each credential a core function refuses: its message by failure, and the challenge of the admin token. */
const CREDENTIALS: Record<
  CredentialError['credential'],
  { messages: Partial<Record<CredentialFailure, string>>; realm?: string }
> = {
  admin_token: {
    realm: 'fleet-rental-admin',
    messages: {
      missing: 'Send an admin token as "Authorization: Bearer <ADMIN_TOKEN>".',
      unknown: 'This admin token is not known.',
      revoked: 'This admin token was revoked.',
      expired: 'This admin token has expired.',
    },
  },
  portal_session: {
    messages: {
      missing: 'No settings-screen session: open a new link from your platform.',
      unknown: 'This session is not known: open a new link.',
      ended: 'This session has ended: open a new link.',
      expired: 'This session has expired: open a new link.',
    },
  },
  portal_link: { messages: { unknown: 'This link has already been used or has expired. Ask for a new one.' } },
};

function credentialError(err: CredentialError): ApiError {
  const { messages, realm } = CREDENTIALS[err.credential];
  // (a link's refusal says nothing of why, so that a guess learns nothing: its reason is `link`)
  const reason = err.credential === 'portal_link' ? 'link' : err.failure;
  const headers =
    realm === undefined
      ? undefined
      : {
          'WWW-Authenticate':
            err.failure === 'missing'
              ? `Bearer realm="${realm}"`
              : `Bearer realm="${realm}", error="invalid_token", error_description="${err.failure}"`,
        };
  return apiError('unauthorized', messages[err.failure] ?? messages.unknown!, { reason, headers });
}

/**
 * A core function's refusal as the documented error, the one place the HTTP APIs (the public listener, the admin
 * listener and the settings screen's operations) map them: 400 naming the field (`Field "url" must be…`), 404, 409,
 * 413, 429 or 503 with Retry-After, 401 for a credential; undefined for anything else. What only the operator may read
 * of a refusal (the network, the settings) goes to `logger`, beside the request's id; the caller gets the rule.
 */
export function coreError(err: unknown, logger?: Logger): ApiError | undefined {
  if (err instanceof CredentialError) return credentialError(err);
  if (err instanceof BusyError)
    return apiError('overloaded', err.message, { headers: { 'Retry-After': String(err.retryAfterSeconds) } });
  if (!(err instanceof InputError)) return undefined;
  const message = err.say(quoted, fieldNamed);
  if (err instanceof InvalidFieldError && err.operatorDetail !== undefined)
    logger?.info({ field: err.field, detail: err.operatorDetail }, 'input refused');
  if (err instanceof TooLargeError) return apiError('payload_too_large', message);
  if (err instanceof NotFoundError) return apiError('not_found', message);
  if (err instanceof ConflictError) return apiError(err.kind, message, { reason: err.field });
  if (err instanceof KeyReusedError) return apiError('idempotency_key_reused', message, { reason: 'Idempotency-Key' });
  if (err instanceof FieldError) return invalidRequest(err.field, message);
  if (err instanceof LimitError)
    return apiError('rate_limited', message, { headers: { 'Retry-After': String(err.retryAfterSeconds) } });
  return invalidRequest('body', message);
}
