import type { Knex } from 'knex';
import type { DeliveryAttempt, DeliveryDetail, DeliveryList, DeliveryRow } from '../../generated/strict/types.gen.js';

export type { DeliveryAttempt, DeliveryDetail, DeliveryList, DeliveryRow };

// The delivery log: an endpoint's deliveries, newest first, and one delivery with its attempts. The API scopes
// every read by the caller's workspace; the operator CLI reads without one.

/** Which endpoint, and (for the API) the workspace it must belong to. */
export interface DeliveryScope {
  endpointId: string;
  /** When set, an endpoint of another workspace is not found. */
  workspaceId?: string;
}

export interface DeliveryLogParams {
  status?: DeliveryRow['status'];
  event?: string;
  limit: number;
  /** The page after this delivery's place in the log (a page's `next`); none: the newest page. */
  after?: DeliveryPosition;
}

/**
 * A delivery's place in the log: its creation time in epoch microseconds (as text) and its id. Keyset paging on
 * (created_at, id) descending, exact to the microsecond Postgres stores, so rows arriving meanwhile (newer) never
 * shift later pages. (The API signs it into a cursor: src/http/cursors.ts.)
 */
export type DeliveryPosition = [createdMicros: string, id: string];

interface LogRow {
  id: string;
  event: DeliveryRow['event'];
  status: DeliveryRow['status'];
  attempts: number;
  created_at: Date;
  /** A bigint: text, as node-postgres reads it. */
  created_micros: string;
  last_attempt_at: Date | null;
  next_attempt_at: Date | null;
  last_status_code: number | null;
  last_error_kind: DeliveryRow['lastErrorKind'];
  last_error: string | null;
}

const iso = (d: Date | null) => d?.toISOString() ?? null;

/**
 * The row and the last attempt's start and error kind (a lateral look-up by the (delivery_id, number) key); a delivery
 * ended without an attempt of its own (its endpoint deleted) has its own kind.
 */
const LOG_COLUMNS = `d.id, d.event, d.status, d.attempts, d.created_at,
  (extract(epoch FROM d.created_at) * 1000000)::bigint AS created_micros,
  a.started_at AS last_attempt_at, d.next_attempt_at, d.last_status_code, coalesce(d.error_kind, a.error_kind) AS last_error_kind, d.last_error`;
const LAST_ATTEMPT = `LEFT JOIN LATERAL (
    SELECT started_at, error_kind FROM delivery_attempts WHERE delivery_id = d.id ORDER BY number DESC LIMIT 1
  ) a ON true`;

function toRow(r: LogRow): DeliveryRow {
  return {
    id: r.id,
    event: r.event,
    status: r.status,
    attempts: r.attempts,
    createdAt: r.created_at.toISOString(),
    lastAttemptAt: iso(r.last_attempt_at),
    nextAttemptAt: iso(r.next_attempt_at),
    lastStatusCode: r.last_status_code,
    lastErrorKind: r.last_error_kind,
  };
}

/** Whether the endpoint exists (in the workspace, when one is given). */
export async function endpointExists(db: Knex, scope: DeliveryScope): Promise<boolean> {
  const query = db('webhook_endpoints').where({ id: scope.endpointId });
  if (scope.workspaceId) query.where({ workspace_id: scope.workspaceId });
  return (await query.first('id')) !== undefined;
}

/** A page of the endpoint's deliveries, newest first; null when the endpoint is not found in the scope. */
export async function deliveryLog(
  db: Knex,
  scope: DeliveryScope,
  params: DeliveryLogParams,
): Promise<{ rows: Array<DeliveryRow & { lastError: string | null }>; next: DeliveryPosition | null } | null> {
  const { after } = params;
  if (!(await endpointExists(db, scope))) return null;
  const { rows } = await db.raw(
    `SELECT ${LOG_COLUMNS} FROM deliveries d ${LAST_ATTEMPT}
     WHERE d.endpoint_id = :endpoint
       AND (:status::text IS NULL OR d.status = :status)
       AND (:event::text IS NULL OR d.event = :event)
       AND (:micros::bigint IS NULL OR (d.created_at, d.id) < (timestamptz 'epoch' + :micros::bigint * interval '1 microsecond', :afterId::uuid))
     ORDER BY d.created_at DESC, d.id DESC
     LIMIT :take`,
    {
      endpoint: scope.endpointId,
      status: params.status ?? null,
      event: params.event ?? null,
      micros: after?.[0] ?? null,
      afterId: after?.[1] ?? null,
      take: params.limit + 1,
    },
  );
  const page = (rows as LogRow[]).slice(0, params.limit);
  const last = page.at(-1);
  return {
    rows: page.map((r) => ({ ...toRow(r), lastError: r.last_error })),
    next: rows.length > params.limit && last ? [String(last.created_micros), last.id] : null,
  };
}

/** The filters of a workspace's delivery log (the admin API's listDeliveries); each left out matches every delivery. */
export interface WorkspaceDeliveryFilters {
  endpointId?: string;
  status?: DeliveryRow['status'];
  event?: string;
  /** Created at or after. */
  since?: Date;
  /** Created before. */
  until?: Date;
}

/**
 * A page of the workspace's deliveries, newest first, with the endpoint of each: the same order, positions and
 * columns as an endpoint's log (deliveryLog), over every endpoint of the workspace.
 */
export async function workspaceDeliveryLog(
  db: Knex,
  workspaceId: string,
  filters: WorkspaceDeliveryFilters,
  page: { limit: number; after?: DeliveryPosition },
): Promise<{
  rows: Array<DeliveryRow & { endpointId: string; lastError: string | null }>;
  next: DeliveryPosition | null;
}> {
  const { after } = page;
  const { rows } = await db.raw(
    `SELECT ${LOG_COLUMNS}, d.endpoint_id FROM deliveries d ${LAST_ATTEMPT}
     WHERE d.workspace_id = :ws
       AND (:endpoint::uuid IS NULL OR d.endpoint_id = :endpoint::uuid)
       AND (:status::text IS NULL OR d.status = :status)
       AND (:event::text IS NULL OR d.event = :event)
       AND (:since::timestamptz IS NULL OR d.created_at >= :since::timestamptz)
       AND (:until::timestamptz IS NULL OR d.created_at < :until::timestamptz)
       AND (:micros::bigint IS NULL OR (d.created_at, d.id) < (timestamptz 'epoch' + :micros::bigint * interval '1 microsecond', :afterId::uuid))
     ORDER BY d.created_at DESC, d.id DESC
     LIMIT :take`,
    {
      ws: workspaceId,
      endpoint: filters.endpointId ?? null,
      status: filters.status ?? null,
      event: filters.event ?? null,
      since: filters.since ?? null,
      until: filters.until ?? null,
      micros: after?.[0] ?? null,
      afterId: after?.[1] ?? null,
      take: page.limit + 1,
    },
  );
  const found = (rows as Array<LogRow & { endpoint_id: string }>).slice(0, page.limit);
  const last = found.at(-1);
  return {
    rows: found.map((r) => ({ ...toRow(r), endpointId: r.endpoint_id, lastError: r.last_error })),
    next: rows.length > page.limit && last ? [String(last.created_micros), last.id] : null,
  };
}

/**
 * The detail as JSON text with `payload` spliced in as the stored body bytes, so the answer carries the payload
 * exactly as it is POSTed (not re-serialised: key order and spacing as sent).
 */
export function deliveryDetailJson(detail: DeliveryDetail & { body: string }): string {
  const { body, ...fields } = detail;
  const marker = '"payload":null';
  return JSON.stringify({ ...fields, payload: null }).replace(marker, () => `"payload":${body}`);
}

/** One delivery of the endpoint with its payload and attempts, oldest first; null when not found in the scope. */
export async function deliveryDetail(
  db: Knex,
  scope: DeliveryScope,
  deliveryId: string,
): Promise<(DeliveryDetail & { body: string }) | null> {
  const { rows } = await db.raw(
    `SELECT ${LOG_COLUMNS}, d.body FROM deliveries d ${LAST_ATTEMPT}
     JOIN webhook_endpoints w ON w.id = d.endpoint_id
     WHERE d.id = :delivery AND d.endpoint_id = :endpoint AND (:ws::uuid IS NULL OR w.workspace_id = :ws::uuid)`,
    { delivery: deliveryId, endpoint: scope.endpointId, ws: scope.workspaceId ?? null },
  );
  const row = rows[0] as (LogRow & { body: string }) | undefined;
  if (!row) return null;
  const attempts = await db('delivery_attempts')
    .where({ delivery_id: deliveryId })
    .orderBy('number')
    .select('number', 'started_at', 'duration_ms', 'status_code', 'error_kind', 'error', 'response_body');
  const { attempts: attemptCount, ...fields } = toRow(row);
  return {
    ...fields,
    attemptCount,
    payload: JSON.parse(row.body),
    body: row.body,
    attempts: attempts.map((a) => ({
      number: a.number,
      startedAt: a.started_at.toISOString(),
      durationMs: a.duration_ms,
      statusCode: a.status_code,
      errorKind: a.error_kind,
      error: a.error,
      responseBody: a.response_body,
    })),
  };
}

/** An endpoint's attempts per bucket of `bucketSeconds` (aligned to the epoch) in [from, to), by outcome; empty buckets left out. */
export async function endpointAttemptCounts(
  db: Knex,
  endpointId: string,
  range: { from: Date; to: Date; bucketSeconds: number },
): Promise<Array<{ start: Date; succeeded: number; failedStatus: number; failedNoAnswer: number }>> {
  // An attempt with an error kind and a status code was answered (a non-2xx or a redirect); one without a code had
  // no answer (time-out, connection, name resolution, a refused destination).
  const { rows } = await db.raw(
    `SELECT date_bin(make_interval(secs => :bucket), started_at, timestamptz 'epoch') AS start,
            count(*) FILTER (WHERE error_kind IS NULL)::int AS succeeded,
            count(*) FILTER (WHERE error_kind IS NOT NULL AND status_code IS NOT NULL)::int AS failed_status,
            count(*) FILTER (WHERE error_kind IS NOT NULL AND status_code IS NULL)::int AS failed_no_answer
       FROM delivery_attempts
      WHERE endpoint_id = :endpoint AND started_at >= :from AND started_at < :to
      GROUP BY 1`,
    { bucket: range.bucketSeconds, endpoint: endpointId, from: range.from, to: range.to },
  );
  return rows.map((r: { start: Date; succeeded: number; failed_status: number; failed_no_answer: number }) => ({
    start: r.start,
    succeeded: r.succeeded,
    failedStatus: r.failed_status,
    failedNoAnswer: r.failed_no_answer,
  }));
}
