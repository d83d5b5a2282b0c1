import type { Knex } from 'knex';
import { InvalidFieldError, isUuid, NotFoundError } from '../../errors.js';
import {
  deliveryDetail,
  deliveryLog,
  endpointAttemptCounts,
  workspaceDeliveryLog,
  type DeliveryDetail,
  type DeliveryPosition,
  type DeliveryRow,
  type WorkspaceDeliveryFilters,
} from '../../queries/deliveries.js';
import { mustReach, workspaceFilter, type Actor } from '../actor.js';

// The delivery records as operators read them: a workspace's deliveries (the admin API), an endpoint's (the CLI), one
// delivery with its payload as sent and every attempt. The changes (retry, recover) are in recovery.ts. Both clients
// call these with their actor: a delivery of a workspace out of its reach is not found.

/** A delivery of the operator's lists: the public row, the endpoint it goes to and the last error as recorded. */
export type OperatorDeliveryRow = DeliveryRow & { endpointId: string; lastError: string | null };

/** A page of the workspace's deliveries, newest first; `next` the position to go on from, null on the last page. */
export async function listWorkspaceDeliveries(
  db: Knex,
  actor: Actor,
  input: { workspaceId: string; filters: WorkspaceDeliveryFilters; page: { limit: number; after?: DeliveryPosition } },
): Promise<{ rows: OperatorDeliveryRow[]; next: DeliveryPosition | null }> {
  const { workspaceId, filters, page } = input;
  mustReach(actor, workspaceId);
  if (filters.since && filters.until && !(filters.since < filters.until))
    throw new InvalidFieldError('until', (name) => `must be later than ${name('since')}`);
  return workspaceDeliveryLog(db, workspaceId, filters, page);
}

/**
 * Whose rows a look-up by id reaches: a workspace's (undefined: every operator action), or the platform's operational
 * ones (workspace_id NULL), for operational-endpoints.ts alone. So no workspace action reaches the platform's rows,
 * even for the operator, and the operational API keeps its own paths.
 */
export type RowOwner = 'platform' | undefined;

const ownedBy = (owner: RowOwner) => (q: Knex.QueryBuilder) =>
  owner === 'platform' ? q.whereNull('workspace_id') : q.whereNotNull('workspace_id');

/** An endpoint's deliveries, newest first (at most `limit`, default 100), for `fleet-admin deliveries list`. */
export async function listDeliveries(
  db: Knex,
  actor: Actor,
  input: { endpointId: string; workspaceId: string | 'every'; limit?: number; owner?: RowOwner },
): Promise<{ rows: OperatorDeliveryRow[] }> {
  const { endpointId } = input;
  const workspaceId = workspaceFilter(actor, input.workspaceId);
  if (!isUuid(endpointId)) throw new InvalidFieldError('endpointId', `must be a UUID, got "${endpointId}"`);
  const notFound = new NotFoundError(`no webhook endpoint with id ${endpointId}`);
  // (a workspace's id in the scope already leaves the platform's out)
  if (
    workspaceId === undefined &&
    !(await db('webhook_endpoints').where({ id: endpointId }).modify(ownedBy(input.owner)).first('id'))
  )
    throw notFound;
  const page = await deliveryLog(db, { endpointId, workspaceId }, { limit: input.limit ?? 100 });
  if (!page) throw notFound;
  return { rows: page.rows.map((r) => ({ ...r, endpointId })) };
}

/** One delivery with its endpoint, its payload as sent and its attempts (with their answers' excerpts), oldest first. */
export type OperatorDeliveryDetail = DeliveryDetail & { endpointId: string };

/** One delivery of `workspaceId` (another workspace's is not found), or of any the actor reaches (`'every'`). */
export async function showDelivery(
  db: Knex,
  actor: Actor,
  input: { deliveryId: string; workspaceId: string | 'every'; owner?: RowOwner },
): Promise<OperatorDeliveryDetail> {
  const id = input.deliveryId;
  const scope = { workspaceId: workspaceFilter(actor, input.workspaceId) };
  if (!isUuid(id)) throw new InvalidFieldError('id', `must be a UUID, got "${id}"`);
  const query = db('deliveries').where({ id }).modify(ownedBy(input.owner));
  if (scope.workspaceId !== undefined) query.where({ workspace_id: scope.workspaceId });
  const row = await query.first('endpoint_id');
  const detail = row && (await deliveryDetail(db, { endpointId: row.endpoint_id, workspaceId: scope.workspaceId }, id));
  if (!detail) throw new NotFoundError(`no delivery with id ${id}`);
  const { body: _body, ...shown } = detail;
  return { ...shown, endpointId: row.endpoint_id };
}

/** The spans the attempt chart covers: 24 hourly buckets, or 28 of six hours. */
const ATTEMPT_PERIODS = {
  '24h': { buckets: 24, bucketSeconds: 3600 },
  '7d': { buckets: 28, bucketSeconds: 6 * 3600 },
} as const;

export interface AttemptStats {
  endpointId: string;
  period: keyof typeof ATTEMPT_PERIODS;
  bucketSeconds: number;
  buckets: Array<{ start: string; succeeded: number; failedStatus: number; failedNoAnswer: number }>;
}

/**
 * An endpoint's attempts by outcome per bucket over the period, oldest first, every bucket present (zeros included);
 * buckets are aligned to whole hours (UTC) and the last one holds `now`. Another workspace's endpoint, or a deleted
 * one, is not found.
 */
export async function endpointAttemptStats(
  db: Knex,
  actor: Actor,
  options: { endpointId: string; workspaceId: string; period: keyof typeof ATTEMPT_PERIODS; now: Date },
): Promise<AttemptStats> {
  const { endpointId } = options;
  mustReach(actor, options.workspaceId);
  const endpoint = await db('webhook_endpoints')
    .where({ id: endpointId, workspace_id: options.workspaceId })
    .whereNull('deleted_at')
    .first('id');
  if (!endpoint) throw new NotFoundError(`No webhook endpoint with id ${endpointId}.`);
  const { buckets: count, bucketSeconds } = ATTEMPT_PERIODS[options.period];
  const bucketMs = bucketSeconds * 1000;
  const lastStart = Math.floor(options.now.getTime() / bucketMs) * bucketMs;
  const from = lastStart - (count - 1) * bucketMs;
  const counted = new Map(
    (
      await endpointAttemptCounts(db, endpointId, {
        from: new Date(from),
        to: new Date(lastStart + bucketMs),
        bucketSeconds,
      })
    ).map((b) => [b.start.getTime(), b]),
  );
  const buckets = Array.from({ length: count }, (_, i) => {
    const start = from + i * bucketMs;
    const { succeeded = 0, failedStatus = 0, failedNoAnswer = 0 } = counted.get(start) ?? {};
    return { start: new Date(start).toISOString(), succeeded, failedStatus, failedNoAnswer };
  });
  return { endpointId, period: options.period, bucketSeconds, buckets };
}
