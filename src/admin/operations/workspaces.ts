import { apiError } from '../../http/error-catalogue.js';
import {
  createWorkspace,
  listWorkspaces,
  platformOnlySetting,
  toWorkspaceView,
  updateWorkspace,
} from '../../core/workspaces.js';
import type { WorkspaceCreate, WorkspaceUpdate } from '../../../generated/admin-strict/types.gen.js';
import { pathWorkspace, type AdminAction } from './context.js';

// Workspaces (src/core/workspaces.ts): listed as the actor reaches them, created by the operator only, changed within
// the actor's reach (what only the platform may change is refused here in the client's own words).

export const workspaceOperations: Record<string, AdminAction> = {
  async listWorkspaces(c) {
    return { status: 200, body: await listWorkspaces(c.db, c.actor, { slug: c.query.slug as string | undefined }) };
  },

  async createWorkspace(c) {
    const { actor } = c;
    if (actor.kind !== 'operator') {
      throw apiError('forbidden', 'This admin token acts on one workspace only and cannot create workspaces.');
    }
    const input = c.body as WorkspaceCreate;
    return await c.once(input, async (trx) => ({
      status: 201,
      body: toWorkspaceView(actor, await createWorkspace(trx, actor, input)),
    }));
  },

  async getWorkspace(c) {
    return { status: 200, body: toWorkspaceView(c.actor, pathWorkspace(c)) };
  },

  async updateWorkspace(c) {
    const { id } = pathWorkspace(c);
    const changes = c.body as WorkspaceUpdate;
    const platformOnly = c.actor.kind === 'operator' ? undefined : platformOnlySetting(changes);
    if (platformOnly !== undefined) {
      throw apiError(
        'forbidden',
        c.caller.screen
          ? `The settings screen changes the workspace's time zone and reminders; its ${platformOnly} is the platform's to change.`
          : `This admin token acts on one workspace only and cannot change its ${platformOnly}: that takes a token for every workspace, or the CLI.`,
        { reason: platformOnly },
      );
    }
    const updated = await updateWorkspace(c.db, c.actor, { workspaceId: id, changes, now: c.now });
    return { status: 200, body: toWorkspaceView(c.actor, updated) };
  },
};
