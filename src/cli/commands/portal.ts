// `fleet-admin portal ...`: one-time links to a workspace's settings screen, and ending its sessions.
import type { Command } from 'commander';
import { findWorkspace } from '../../core/workspaces.js';
import { cliActor } from '../../core/audit.js';
import {
  createPortalLink,
  endPortalSessions,
  PORTAL_SESSION_MINUTES,
  portalLinkView,
} from '../../core/portal-sessions.js';
import { cliLinkBase } from '../../portal/link-base.js';
import { command, wholeNumber, type CliIo, type JsonOption } from '../io.js';

export function register(program: Command, { config, withDatabase, print }: CliIo): void {
  const portal = program
    .command('portal')
    .description("links to a workspace's settings screen, and ending its sessions");
  command(
    portal,
    'link',
    "make a one-time link to a workspace's settings screen on FRS_PUBLIC_URL (shown only this once; open it once)",
  )
    .requiredOption('--workspace <slug>', 'the workspace')
    .option(
      '--minutes <n>',
      `minutes until the link, and the session it starts, end (${PORTAL_SESSION_MINUTES.min} to ${PORTAL_SESSION_MINUTES.max}; default ${PORTAL_SESSION_MINUTES.default})`,
      wholeNumber,
    )
    .option('--read-only', 'a session that shows everything and changes nothing')
    .action(async (o: JsonOption & { workspace: string; minutes?: number; readOnly?: boolean }) => {
      // (without FRS_PUBLIC_URL: the port the service on this data folder listens on, not only this shell's PORT)
      const publicUrl = cliLinkBase(config.portal, config.dataDir);
      const link = await withDatabase(async (db) => {
        const { id } = await findWorkspace(db, o.workspace);
        return createPortalLink(db, cliActor(), {
          workspaceId: id,
          expiresInMinutes: o.minutes,
          readOnly: o.readOnly === true,
          now: new Date(),
        });
      });
      const shown = portalLinkView(link, publicUrl);
      print(
        o,
        shown,
        (l) =>
          `settings-screen link ${l.id}${l.readOnly ? ' (read-only)' : ''}, shown only this once; open it once before ${l.linkExpiresAt} (its session lasts until ${l.expiresAt} at the latest):\n${l.url}`,
      );
    });
  command(portal, 'end', 'end every settings-screen session of a workspace now (and spend its unopened links)')
    .requiredOption('--workspace <slug>', 'the workspace')
    .action(async (o: JsonOption & { workspace: string }) => {
      const { ended } = await withDatabase(async (db) =>
        endPortalSessions(db, cliActor(), {
          workspaceId: (await findWorkspace(db, o.workspace)).id,
          sessionId: 'every',
          now: new Date(),
        }),
      );
      print(o, { ended: ended.length }, (r) => `${r.ended} settings-screen session(s) ended`);
    });
}
