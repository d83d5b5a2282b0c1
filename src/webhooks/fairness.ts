import type { Knex } from 'knex';
import { tenantOf } from './platform-events.js';
import { RATE_ALLOWANCE, rateBucketsSql } from './rate-limits.js';

// Fair shares of a dispatcher's attempt slots, so that one workspace with slow or dead endpoints cannot delay the
// deliveries of another (Svix and Hook0 hold the same line). Two bounds and one order:
//   - an endpoint holds at most `perEndpoint` attempts in flight, a workspace at most `perWorkspace` (by default a
//     quarter of the slots), counted in this process;
//   - the claim takes due deliveries round-robin: first across workspaces, the one with fewest attempts in flight
//     first, then across each workspace's endpoints, oldest due first within an endpoint. It is not one global
//     first-come queue, so a backlog of one workspace never stands in front of another's first delivery.
// A throttled endpoint (rate_limit) is given no more than its token bucket holds (rate-limits.ts): the rest of its
// backlog is not a candidate, so it takes no place from the other endpoints and workspaces.

/** Share of the slots one workspace may hold when no limit is given. */
export const DEFAULT_WORKSPACE_SHARE = 0.25;

export function defaultWorkspaceConcurrency(concurrency: number): number {
  return Math.max(1, Math.floor(concurrency * DEFAULT_WORKSPACE_SHARE));
}

export const WORKSPACE_CONCURRENCY_ENV = 'FRS_WEBHOOK_WORKSPACE_CONCURRENCY';

/** Deliveries held by this process (attempts in flight, or leased and waiting for a slot), per endpoint and per workspace. */
export class InFlightShares {
  private readonly byEndpoint = new Map<string, number>();
  private readonly byWorkspace = new Map<string, number>();

  add(slot: { endpointId: string; workspaceId: string }): void {
    bump(this.byEndpoint, slot.endpointId, 1);
    bump(this.byWorkspace, slot.workspaceId, 1);
  }

  remove(slot: { endpointId: string; workspaceId: string }): void {
    bump(this.byEndpoint, slot.endpointId, -1);
    bump(this.byWorkspace, slot.workspaceId, -1);
  }

  /** How many one endpoint holds. */
  endpoint(endpointId: string): number {
    return this.byEndpoint.get(endpointId) ?? 0;
  }

  /** How many one workspace holds. */
  workspace(workspaceId: string): number {
    return this.byWorkspace.get(workspaceId) ?? 0;
  }

  /** The counts as two pairs of columns, for unnest() in the claim. */
  columns(): { endpointIds: string[]; endpointCounts: number[]; workspaceIds: string[]; workspaceCounts: number[] } {
    return {
      endpointIds: [...this.byEndpoint.keys()],
      endpointCounts: [...this.byEndpoint.values()],
      workspaceIds: [...this.byWorkspace.keys()],
      workspaceCounts: [...this.byWorkspace.values()],
    };
  }
}

function bump(map: Map<string, number>, key: string, by: number): void {
  const n = (map.get(key) ?? 0) + by;
  if (n === 0) map.delete(key);
  else map.set(key, n);
}

/** A column of values bound as one Postgres array (for unnest); Knex's types do not admit nulls in arrays. */
export const column = (values: ReadonlyArray<string | number | boolean | null>): Knex.Value =>
  values as unknown as Knex.Value;

export interface FairClaim {
  shares: InFlightShares;
  /** The sweep clock: deliveries due at or before it. */
  now: Date;
  perEndpoint: number;
  perWorkspace: number;
  /** Only these workspaces; null for all. */
  workspaceIds: string[] | null;
  limit: number;
  /** The SQL condition of a pending delivery (alias d). */
  pending: string;
  testEvent: string;
}

/**
 * The CTEs that pick the fair candidates of a claim, ending in `candidates(id, next_attempt_at, claim_order)` (named
 * bindings; the throttled endpoints' locked buckets are `rate_buckets`, rate-limits.ts): at most `limit`
 * due deliveries, in claim order. Workspaces that are frozen are left out: their deliveries wait, and are sent
 * when the workspace is active again. So are endpoints throttled at `now`.
 */
export function fairCandidates(c: FairClaim): { sql: string; bindings: Record<string, Knex.Value> } {
  const busy = c.shares.columns();
  const rateLimited = rateBucketsSql(
    `d.${c.pending} AND d.next_attempt_at <= :now AND (d.lease_until IS NULL OR d.lease_until < now())
        AND (w.is_active OR d.event = '${c.testEvent}')`,
    `(:workspaceIds::uuid[] IS NULL OR w.workspace_id = ANY(:workspaceIds::uuid[]))
        AND EXISTS (SELECT 1 FROM workspaces ws WHERE ws.id = w.workspace_id AND ws.status = 'active')`,
  );
  const sql = `${rateLimited}, busy_endpoints AS (
      SELECT * FROM unnest(:busyEndpointIds::uuid[], :busyEndpointCounts::int[]) AS b(endpoint_id, n)
    ), busy_workspaces AS (
      SELECT * FROM unnest(:busyWorkspaceIds::uuid[], :busyWorkspaceCounts::int[]) AS b(workspace_id, n)
    ), due AS (
      SELECT c.id, c.next_attempt_at, c.endpoint_rank, ${tenantOf('w')} AS workspace_id, coalesce(bw.n, 0) AS workspace_busy
      FROM webhook_endpoints w
      -- (the platform's operational endpoints have no workspace: a tenant of their own, never frozen; platform-events.ts)
      LEFT JOIN workspaces ws ON ws.id = w.workspace_id
      LEFT JOIN busy_endpoints b ON b.endpoint_id = w.id
      LEFT JOIN busy_workspaces bw ON bw.workspace_id = ${tenantOf('w')}
      LEFT JOIN rate_buckets rb ON rb.id = w.id
      CROSS JOIN LATERAL (
        SELECT d.id, d.next_attempt_at, row_number() OVER (ORDER BY d.next_attempt_at) AS endpoint_rank
        FROM deliveries d
        WHERE d.endpoint_id = w.id AND d.${c.pending} AND d.next_attempt_at <= :now
          AND (d.lease_until IS NULL OR d.lease_until < now())
          AND (w.is_active OR d.event = '${c.testEvent}')
        ORDER BY d.next_attempt_at
        LIMIT greatest(least(:perEndpoint::int - coalesce(b.n, 0), :perWorkspace::int - coalesce(bw.n, 0),
          ${RATE_ALLOWANCE}), 0)
      ) c
      -- (a deleted endpoint's deliveries are never sent: see deleteEndpointAndDeliveries in endpoint-lifecycle.ts)
      WHERE w.deleted_at IS NULL AND (ws.status = 'active' OR w.workspace_id IS NULL)
        AND (:workspaceIds::uuid[] IS NULL OR ${tenantOf('w')} = ANY(:workspaceIds::uuid[]))
        -- a throttled endpoint (429/502/503/504, etiquette.ts) is skipped until its throttle ends: its backlog takes no slot
        AND (w.throttled_until IS NULL OR w.throttled_until <= :now)
    ), ranked AS (
      SELECT id, next_attempt_at, workspace_busy,
             row_number() OVER (PARTITION BY workspace_id ORDER BY endpoint_rank, next_attempt_at) AS workspace_rank
      FROM due
    ), candidates AS (
      SELECT id, next_attempt_at, row_number() OVER (ORDER BY workspace_busy + workspace_rank, next_attempt_at) AS claim_order FROM ranked
      WHERE workspace_rank <= :perWorkspace::int - workspace_busy
      ORDER BY claim_order
      LIMIT :limit
    )`;
  return {
    sql,
    bindings: {
      busyEndpointIds: column(busy.endpointIds),
      busyEndpointCounts: column(busy.endpointCounts),
      busyWorkspaceIds: column(busy.workspaceIds),
      busyWorkspaceCounts: column(busy.workspaceCounts),
      now: c.now.toISOString(),
      perEndpoint: c.perEndpoint,
      perWorkspace: c.perWorkspace,
      workspaceIds: c.workspaceIds && column(c.workspaceIds),
      limit: c.limit,
    },
  };
}
