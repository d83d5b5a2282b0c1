// `fleet-admin key ...`: a workspace's API keys.
import type { Command } from 'commander';
import { findWorkspace } from '../../core/workspaces.js';
import { createApiKey, listApiKeys, revokeApiKey } from '../../core/workspaces.js';
import { cliActor } from '../../core/audit.js';
import { command, type CliIo, type JsonOption } from '../io.js';

export function register(program: Command, { withDatabase, print }: CliIo): void {
  const key = program.command('key').description('create, list and revoke API keys');
  command(key, 'create', 'create an API key (shown only this once)')
    .requiredOption('--workspace <slug>', 'the workspace')
    .option('--role <role>', 'free-form role recorded with the key')
    .option('--expires-at <iso>', 'ISO 8601 date-time after which the key is refused')
    .action(async (o: JsonOption & { workspace: string; role?: string; expiresAt?: string }) => {
      const created = await withDatabase(async (db) =>
        createApiKey(db, cliActor(), {
          workspaceId: (await findWorkspace(db, o.workspace)).id,
          role: o.role,
          expiresAt: o.expiresAt,
        }),
      );
      print(
        o,
        created,
        (k) =>
          `API key ${k.id} (role ${k.role ?? 'none'}, expires ${k.expiresAt ?? 'never'}), shown only this once:\n${k.key}`,
      );
    });
  command(key, 'revoke', 'revoke an API key')
    .requiredOption('--id <id>', 'the key id')
    .action(async (o: JsonOption & { id: string }) => {
      const revoked = await withDatabase((db) => revokeApiKey(db, cliActor(), { keyId: o.id, workspaceId: 'every' }));
      print(o, revoked, (r) => `API key ${r.id} revoked at ${r.revokedAt}`);
    });

  command(key, 'list', "list a workspace's API keys (never the keys themselves: only their hashes are stored)")
    .requiredOption('--workspace <slug>', 'the workspace')
    .action(async (o: JsonOption & { workspace: string }) => {
      const result = await withDatabase(async (db) =>
        listApiKeys(db, cliActor(), { workspaceId: (await findWorkspace(db, o.workspace)).id }),
      );
      print(
        o,
        result,
        (r) =>
          r.rows
            .map(
              (k) =>
                `${k.id} role=${k.role ?? '-'} created=${k.createdAt} expires=${k.expiresAt ?? 'never'} revoked=${k.revokedAt ?? '-'} last-used=${k.lastUsedAt ?? '-'}`,
            )
            .join('\n') || 'no API keys',
      );
    });
}
