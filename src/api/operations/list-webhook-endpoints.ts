import { workspaceEndpoints } from '../../core/webhooks/endpoints.js';
import { ok, type EtagInputs, type Handler } from '../operation.js';

// GET /v1/webhooks: the workspace's webhook endpoints.

export const handle: Handler = async ({ db, caller }) =>
  ok({ rows: await workspaceEndpoints(db, caller.workspace.id) });

export const etag: EtagInputs = { inputs: { area: 'webhooks' } };
