// `fleet-admin admin-token ...`: tokens for the admin API.
import type { Command } from 'commander';
import { findWorkspace } from '../../core/workspaces.js';
import { createAdminToken, listAdminTokens, revokeAdminToken } from '../../core/admin-tokens.js';
import { cliActor } from '../../core/audit.js';
import { command, type CliIo, type JsonOption } from '../io.js';

export function register(program: Command, { withDatabase, print }: CliIo): void {
  const adminToken = program.command('admin-token').description('create, list and revoke admin API tokens');
  command(adminToken, 'create', 'create an admin API token (shown only this once)')
    .requiredOption('--name <name>', 'who or what holds it (recorded in the audit trail as the actor)')
    .option('--workspace <slug>', 'confine the token to this workspace (default: every workspace)')
    .option('--expires-at <iso>', 'ISO 8601 date-time after which the token is refused')
    .action(async (o: JsonOption & { name: string; workspace?: string; expiresAt?: string }) => {
      const created = await withDatabase(async (db) =>
        createAdminToken(db, cliActor(), {
          name: o.name,
          workspaceId: o.workspace === undefined ? 'every' : (await findWorkspace(db, o.workspace)).id,
          expiresAt: o.expiresAt,
        }),
      );
      print(
        o,
        created,
        (t) =>
          `admin token ${t.id} "${t.name}" (${t.workspace ? `workspace ${t.workspace} only` : 'every workspace'}, expires ${t.expiresAt ?? 'never'}), shown only this once:\n${t.token}`,
      );
    });
  command(
    adminToken,
    'list',
    'list the admin API tokens (never the tokens themselves: only their hashes are stored)',
  ).action(async (o: JsonOption) => {
    const result = await withDatabase((db) => listAdminTokens(db, cliActor()));
    print(
      o,
      result,
      (r) =>
        r.rows
          .map(
            (t) =>
              `${t.id} "${t.name}" workspace=${t.workspace ?? '*'} created=${t.createdAt} expires=${t.expiresAt ?? 'never'} revoked=${t.revokedAt ?? '-'} last-used=${t.lastUsedAt ?? '-'}`,
          )
          .join('\n') || 'no admin tokens',
    );
  });
  command(adminToken, 'revoke', 'revoke an admin API token (refused from its next request on)')
    .requiredOption('--id <id>', 'the token id')
    .action(async (o: JsonOption & { id: string }) => {
      const revoked = await withDatabase((db) => revokeAdminToken(db, cliActor(), { id: o.id }));
      print(o, revoked, (r) => `admin token ${r.id} revoked at ${r.revokedAt}`);
    });
}
