import { reachWorkspace } from '../../core/workspaces.js';
import type { Knex } from 'knex';
import { idempotent, type Answer } from '../idempotency.js';
import { apiKeyOperations } from './api-keys.js';
import { auditOperations } from './audit.js';
import { actorOf, type AdminAction, type AdminOperationContext } from './context.js';
import { deliveryOperations } from './deliveries.js';
import { endpointOperations } from './endpoints.js';
import { eventOperations } from './events.js';
import { importOperations } from './imports.js';
import { operationalEndpointOperations } from './operational-endpoints.js';
import { portalSessionOperations } from './portal-sessions.js';
import { workspaceOperations } from './workspaces.js';

export type { AdminCaller, AdminOperationContext } from './context.js';

// The admin API's operations, by operationId, one file per resource: each parses what the document already
// validated, calls the core function with the caller as the actor, and answers. No rule of the product lives here:
// the CLI calls the same functions. The actor is built once per request, here, and the path's workspace reached
// (another workspace is not found, as if it did not exist) before any operation runs.

type Handler = (c: AdminOperationContext) => Promise<Answer>;

const byResource: Record<string, AdminAction> = {
  ...workspaceOperations,
  ...apiKeyOperations,
  ...endpointOperations,
  ...auditOperations,
  ...deliveryOperations,
  ...eventOperations,
  ...importOperations,
  ...portalSessionOperations,
  ...operationalEndpointOperations,
};

export const adminOperations: Record<string, Handler> = Object.fromEntries(
  Object.entries(byResource).map(([operationId, action]) => [
    operationId,
    async (c: AdminOperationContext) => {
      const actor = actorOf(c);
      const { workspaceId } = c.params;
      const workspace = workspaceId === undefined ? undefined : await reachWorkspace(c.db, actor, workspaceId);
      const once = (body: unknown, change: (trx: Knex) => Promise<Answer>, db = c.db) =>
        idempotent(db, { tokenId: c.caller.id, key: c.idempotencyKey, operationId, path: c.path, body }, change);
      return action({ ...c, actor, workspace, once });
    },
  ]),
);
