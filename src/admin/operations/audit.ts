import { listAuditEntries } from '../../core/audit.js';
import { workspaceFilter } from '../../core/actor.js';
import { instant } from '../../errors.js';
import type { AdminAction } from './context.js';

// The audit trail (src/core/audit.ts): every workspace's the actor reaches, or one workspace's, newest first.

export const auditOperations: Record<string, AdminAction> = {
  async listAuditEntries(c) {
    // (a workspace out of the actor's reach is not found; none asked: every one it reaches)
    const workspaceId = workspaceFilter(c.actor, (c.query.workspace as string | undefined) ?? 'every');
    const since = c.query.since as string | undefined;
    const binding = { workspaceId: workspaceId ?? '*', parameters: [since ?? null] };
    const cursor = c.query.cursor as string | undefined;
    const after = cursor === undefined ? undefined : (c.cursors.decode('audit', binding, cursor) as [string, string]);
    const page = await listAuditEntries(c.db, c.actor, {
      workspaceId: workspaceId ?? 'every',
      since: since === undefined ? undefined : instant(since, 'since'),
      after,
      limit: c.query.limit as number,
    });
    return {
      status: 200,
      body: { rows: page.rows, nextCursor: page.next === null ? null : c.cursors.encode('audit', binding, page.next) },
    };
  },
};
