import type Koa from 'koa';
import type { Logger } from 'pino';
import type { AuthGuard } from './auth-failures.js';

/**
 * What a request carries from one step of a listener to the next (Koa's ctx.state), typed once. The kit's own fields
 * are here; a listener adds the ones only it sets by declaring them on this interface in its own module (src/api/app.ts:
 * the caller, its admission, the read pool; src/admin/app.ts: the requester), so the kit imports nothing of its clients.
 */
export interface RequestState {
  /** The request's logger, with its request id (the edge sets it before anything else runs). */
  logger: Logger;
  /** The X-Request-Id the client sent, redacted and cut to 200 characters: logged, and kept in an audit entry. */
  clientRequestId?: string;
  /** The operation the request reached, once known: the request's log line and its duration metric name it. */
  operationId?: string;
  /** The client address and the failure limit its authentication counts against, once asked for. */
  guard?: AuthGuard;
}

/** A request's Koa context, with its state typed. */
export type RequestContext = Koa.ParameterizedContext<RequestState>;

/** A middleware of a listener whose requests carry RequestState. */
export type RequestMiddleware = Koa.Middleware<RequestState>;
