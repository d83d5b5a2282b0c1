import type { CursorBinding } from '../../http/cursors.js';
import { instant } from '../../errors.js';
import { listWorkspaceDeliveries, showDelivery } from '../../core/webhooks/deliveries.js';
import { recoverEndpoint, retryDelivery } from '../../core/webhooks/recovery.js';
import type { DeliveryPosition, WorkspaceDeliveryFilters } from '../../queries/deliveries.js';
import type { RecoverRequest } from '../../../generated/admin-strict/types.gen.js';
import { pathWorkspace, type AdminAction } from './context.js';

// A workspace's deliveries (src/core/webhooks/deliveries.ts, recovery.ts): listed by filter and cursor, shown one at
// a time, retried, and an endpoint's failed window recovered.

export const deliveryOperations: Record<string, AdminAction> = {
  async listDeliveries(c) {
    const { id } = pathWorkspace(c);
    const q = c.query as {
      endpointId?: string;
      status?: WorkspaceDeliveryFilters['status'];
      event?: string;
      since?: string;
      until?: string;
      limit: number;
      cursor?: string;
    };
    // Bound: the workspace and every filter (a cursor of other filters is refused); not the page size.
    const binding: CursorBinding = {
      workspaceId: id,
      parameters: [q.endpointId ?? null, q.status ?? null, q.event ?? null, q.since ?? null, q.until ?? null],
    };
    const after =
      q.cursor === undefined
        ? undefined
        : (c.cursors.decode('workspaceDeliveries', binding, q.cursor) as DeliveryPosition);
    const filters = {
      endpointId: q.endpointId,
      status: q.status,
      event: q.event,
      since: q.since === undefined ? undefined : instant(q.since, 'since'),
      until: q.until === undefined ? undefined : instant(q.until, 'until'),
    };
    const page = await listWorkspaceDeliveries(c.db, c.actor, {
      workspaceId: id,
      filters,
      page: { limit: q.limit, after },
    });
    return {
      status: 200,
      body: {
        rows: page.rows,
        nextCursor: page.next === null ? null : c.cursors.encode('workspaceDeliveries', binding, page.next),
      },
    };
  },

  async getDelivery(c) {
    const input = { deliveryId: c.params.deliveryId, workspaceId: pathWorkspace(c).id };
    return { status: 200, body: await showDelivery(c.db, c.actor, input) };
  },

  async retryDelivery(c) {
    const input = { deliveryId: c.params.deliveryId, workspaceId: pathWorkspace(c).id, now: c.now };
    return { status: 200, body: await retryDelivery(c.db, c.actor, input) };
  },

  async recoverEndpoint(c) {
    const { since, until } = c.body as RecoverRequest;
    const input = {
      endpointId: c.params.endpointId,
      workspaceId: pathWorkspace(c).id,
      since: instant(since, 'since'),
      until: until === undefined ? undefined : instant(until, 'until'),
      now: c.now,
    };
    return { status: 200, body: await recoverEndpoint(c.db, c.actor, input) };
  },
};
