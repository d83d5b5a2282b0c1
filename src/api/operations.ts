import type { IncomingHttpHeaders } from 'node:http';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Caller } from './auth.js';
import { describeCaller } from './auth.js';
import { apiError, invalidRequest } from './errors.js';
import { fleetSummary } from '../queries/fleet.js';
import { listFleets } from '../queries/fleets.js';
import { searchVehiclesJson, type VehiclePosition } from '../queries/vehicles.js';
import { operationsTodayJson } from '../queries/today.js';
import { bookingSummary } from '../queries/bookings.js';
import { financeOverview } from '../queries/finance.js';
import { receivablesJson, type ReceivablesPosition } from '../queries/receivables.js';
import { workspaceEndpoints } from '../core/webhooks/endpoints.js';
import { queueTestDelivery } from '../core/webhooks/test-delivery.js';
import {
  deliveryDetail,
  deliveryDetailJson,
  deliveryLog,
  type DeliveryLogParams,
  type DeliveryPosition,
} from '../queries/deliveries.js';
import type { CursorBinding, Cursors } from './cursors.js';
import { readiness } from '../observability/health.js';

/** What an operation handler gets: the caller (already authenticated) and the validated, coerced parameters. */
export interface OperationContext {
  db: Knex;
  caller: Caller;
  now: Date;
  query: Record<string, unknown>;
  params: Record<string, string>;
  headers: IncomingHttpHeaders;
  logger: Logger;
  /** Signs and checks the lists' cursors (src/api/cursors.ts). */
  cursors: Cursors;
}

export interface OperationResult {
  status: number;
  body: unknown;
}

type Handler = (c: OperationContext) => Promise<OperationResult>;

const ok = (body: unknown): OperationResult => ({ status: 200, body });

/** The availability window: `from` and `to` together or not at all, `from` earlier than `to`. */
function readWindow(query: Record<string, unknown>): { from?: Date; to?: Date } {
  const { from, to } = query as { from?: string; to?: string };
  if (from === undefined && to === undefined) return {};
  if (from === undefined)
    throw invalidRequest('from', 'Query parameter "from" is required when "to" is given: send both or neither.');
  if (to === undefined)
    throw invalidRequest('to', 'Query parameter "to" is required when "from" is given: send both or neither.');
  const window = { from: new Date(from), to: new Date(to) };
  // (the date-time format admits a leap second, :60, which no Date holds)
  for (const [name, at] of Object.entries(window)) {
    if (Number.isNaN(at.getTime()))
      throw invalidRequest(
        name,
        `Query parameter "${name}" must be an ISO 8601 date-time this service can hold (a leap second, :60, is not one).`,
      );
  }
  if (!(window.from < window.to)) throw invalidRequest('to', 'Query parameter "to" must be later than "from".');
  return window;
}

const endpointNotFound = () => apiError('not_found', 'No webhook endpoint with this id in your workspace.');

/** Handlers by the document's operationId. Parameters arrive validated against the document, defaults applied. */
export const operationHandlers: Record<string, Handler> = {
  getMe: async ({ caller }) => ok(describeCaller(caller)),
  listFleets: async ({ db, caller, now }) => ok(await listFleets(db, caller.workspace, now)),
  getFleetSummary: async ({ db, caller, now }) => ok(await fleetSummary(db, caller.workspace, now)),
  searchVehicles: async ({ db, caller, now, query, cursors }) => {
    const window = readWindow(query);
    const q = (query.q as string | undefined)?.trim() || undefined;
    // Bound: the term as it is searched for and the window's instants (they decide `available`), not `limit`.
    const binding: CursorBinding = {
      workspaceId: caller.workspace.id,
      parameters: [q ?? null, window.from?.toISOString() ?? null, window.to?.toISOString() ?? null],
    };
    const after =
      query.cursor === undefined
        ? undefined
        : (cursors.decode('vehicles', binding, query.cursor as string) as VehiclePosition);
    const page = await searchVehiclesJson(
      db,
      caller.workspace,
      { q, limit: query.limit as number, ...window, after },
      now,
    );
    return ok(cursors.pageJson('vehicles', binding, page));
  },
  getOperationsToday: async ({ db, caller, now }) => ok(await operationsTodayJson(db, caller.workspace, now)),
  getBookingSummary: async ({ db, caller, now }) => ok(await bookingSummary(db, caller.workspace, now)),
  getFinanceOverview: async ({ db, caller, now }) => ok(await financeOverview(db, caller.workspace, now)),
  getReceivables: async ({ db, caller, now, query, cursors }) => {
    const search = query.search as string | undefined;
    const binding: CursorBinding = { workspaceId: caller.workspace.id, parameters: [search ?? null] };
    const after =
      query.cursor === undefined
        ? undefined
        : (cursors.decode('receivables', binding, query.cursor as string) as ReceivablesPosition);
    return ok(
      cursors.pageJson(
        'receivables',
        binding,
        await receivablesJson(db, caller.workspace, { search, limit: query.limit as number, after }, now),
      ),
    );
  },
  listWebhookEndpoints: async ({ db, caller }) => ok({ rows: await workspaceEndpoints(db, caller.workspace.id) }),
  sendTestDelivery: async ({ db, caller, now, params, headers }) => {
    const idempotencyKey = headers['idempotency-key'] as string;
    // (its refusals are the core's errors: src/api/errors.ts coreError answers them, as on every listener)
    const { deliveryId } = await queueTestDelivery(db, {
      workspaceId: caller.workspace.id,
      endpointId: params.id,
      idempotencyKey,
      now,
    });
    return { status: 202, body: { deliveryId } };
  },
  listWebhookDeliveries: async ({ db, caller, params, query, cursors }) => {
    const { status, event, limit } = query as unknown as Omit<DeliveryLogParams, 'after'>;
    // Bound: the endpoint (a cursor of another endpoint's log is refused) and the filters.
    const binding: CursorBinding = {
      workspaceId: caller.workspace.id,
      parameters: [params.id, status ?? null, event ?? null],
    };
    const after =
      query.cursor === undefined
        ? undefined
        : (cursors.decode('deliveries', binding, query.cursor as string) as DeliveryPosition);
    const page = await deliveryLog(
      db,
      { endpointId: params.id, workspaceId: caller.workspace.id },
      { status, event, limit, after },
    );
    if (!page) throw endpointNotFound();
    // lastError is the operator CLI's; the API row is as documented.
    return ok({
      rows: page.rows.map(({ lastError: _lastError, ...row }) => row),
      nextCursor: page.next && cursors.encode('deliveries', binding, page.next),
    });
  },
  getWebhookDelivery: async ({ db, caller, params }) => {
    const detail = await deliveryDetail(
      db,
      { endpointId: params.id, workspaceId: caller.workspace.id },
      params.deliveryId,
    );
    if (!detail) throw apiError('not_found', 'No delivery with this id for this webhook endpoint in your workspace.');
    return ok(deliveryDetailJson(detail));
  },
  getHealth: async () => ok({ status: 'ok' }),
  getReadiness: async ({ db }) => {
    const result = await readiness(db);
    if (!result.ready) throw apiError('not_ready', result.message, { reason: result.check });
    return ok({ status: 'ready' });
  },
};
