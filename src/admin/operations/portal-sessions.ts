import { createPortalLink, endPortalSessions, listPortalSessions, portalLinkView } from '../../core/portal-sessions.js';
import type { PortalSessionCreate } from '../../../generated/admin-strict/types.gen.js';
import { pathWorkspace, type AdminAction } from './context.js';

// The settings screen's links and sessions (src/core/portal-sessions.ts; src/portal/ serves the screen).

export const portalSessionOperations: Record<string, AdminAction> = {
  async createPortalSession(c) {
    const { id } = pathWorkspace(c);
    if (c.portalUrl === undefined) throw new Error('createPortalSession: no portalUrl given to the admin API');
    const input = (c.body ?? {}) as PortalSessionCreate;
    // (the token is kept with the link: revoking it ends the link and its session)
    const link = await createPortalLink(c.db, c.actor, {
      workspaceId: id,
      expiresInMinutes: input.expiresInMinutes,
      readOnly: input.readOnly,
      now: c.now,
      adminTokenId: c.caller.screen ? undefined : c.caller.id,
    });
    return { status: 201, body: portalLinkView(link, c.portalUrl) };
  },

  async listPortalSessions(c) {
    return {
      status: 200,
      body: await listPortalSessions(c.db, c.actor, { workspaceId: pathWorkspace(c).id, now: c.now }),
    };
  },

  async endPortalSession(c) {
    const input = { workspaceId: pathWorkspace(c).id, sessionId: c.params.sessionId, now: c.now };
    await endPortalSessions(c.db, c.actor, input);
    return { status: 204, body: undefined };
  },

  async endPortalSessions(c) {
    const input = { workspaceId: pathWorkspace(c).id, sessionId: 'every', now: c.now };
    const { ended } = await endPortalSessions(c.db, c.actor, input);
    return { status: 200, body: { ended: ended.length } };
  },
};
