// `fleet-admin audit list`: who changed what.
import type { Command } from 'commander';
import { findWorkspace } from '../../core/workspaces.js';
import { cliActor, listAuditEntries } from '../../core/audit.js';
import { command, isoInstant, wholeNumber, type CliIo, type JsonOption } from '../io.js';

export function register(program: Command, { withDatabase, print }: CliIo): void {
  const audit = program.command('audit').description('who changed what, through the admin API or this CLI');
  command(audit, 'list', 'audit entries, newest first')
    .option('--workspace <slug>', 'only this workspace')
    .option('--since <iso>', 'only entries made at or after this instant (ISO 8601)', isoInstant)
    .option('--limit <n>', 'at most this many entries (default 50)', wholeNumber)
    .action(async (o: JsonOption & { workspace?: string; since?: Date; limit?: number }) => {
      const result = await withDatabase(async (db) => {
        const workspaceId = o.workspace === undefined ? 'every' : (await findWorkspace(db, o.workspace)).id;
        const { rows } = await listAuditEntries(db, cliActor(), { workspaceId, since: o.since, limit: o.limit ?? 50 });
        return { rows };
      });
      print(
        o,
        result,
        (r) =>
          r.rows
            .map(
              (e) =>
                `${e.at} ${e.actor.type === 'cli' ? `cli (${e.actor.name})` : `token "${e.actor.name}"`} ${e.action} ${e.target.type} ${e.target.id} ${JSON.stringify(e.changes)}`,
            )
            .join('\n') || 'no audit entries',
      );
    });
}
