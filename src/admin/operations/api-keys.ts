import { createApiKey, listApiKeys, revokeApiKey } from '../../core/workspaces.js';
import type { ApiKeyCreate } from '../../../generated/admin-strict/types.gen.js';
import { pathWorkspace, type AdminAction } from './context.js';

// A workspace's API keys (src/core/workspaces.ts): listed, made (shown once), revoked.

export const apiKeyOperations: Record<string, AdminAction> = {
  async listApiKeys(c) {
    return { status: 200, body: await listApiKeys(c.db, c.actor, { workspaceId: pathWorkspace(c).id }) };
  },

  async createApiKey(c) {
    const { id } = pathWorkspace(c);
    const input = c.body as ApiKeyCreate;
    return await c.once(input, async (trx) => ({
      status: 201,
      body: await createApiKey(trx, c.actor, { workspaceId: id, role: input.role, expiresAt: input.expiresAt }),
    }));
  },

  async revokeApiKey(c) {
    const workspaceId = pathWorkspace(c).id;
    return { status: 200, body: await revokeApiKey(c.db, c.actor, { keyId: c.params.keyId, workspaceId }) };
  },
};
