// `fleet-admin secrets ...`: the master key that seals stored signing secrets.
import type { Command } from 'commander';
import { SECRET_KEY_FILE_ENV } from '../../secrets.js';
import { createMasterKey, resealSigningSecrets } from '../../core/webhooks/signing-secrets.js';
import { cliActor } from '../../core/audit.js';
import { command, type CliIo, type JsonOption } from '../io.js';

export function register(program: Command, { withDatabase, print }: CliIo): void {
  const secrets = program.command('secrets').description('the master key that seals stored signing secrets');
  command(
    secrets,
    'create-master-key',
    `write a new master key to the key file (${SECRET_KEY_FILE_ENV}, default secret.key in the data folder), for a database holding no signing secret yet`,
  ).action(async (o: JsonOption) => {
    // Also before `migrate`: the key a migration seals the plain secrets of an old version with.
    const created = await withDatabase((db) => createMasterKey(db, cliActor()), { schema: 'as-is' });
    print(
      o,
      created,
      (r) =>
        `master key ${r.keyId} written to ${r.file} (mode 0600); keep a copy in a secret store: without it no signing secret opens`,
    );
  });
  command(
    secrets,
    'rotate-master-key',
    're-seal every stored signing secret under a new master key, in one transaction',
  )
    .option(
      '--key-file-is-shared',
      `with DATABASE_URL and a key file: every process reads this same file (a shared volume or secret mount), so the new key written there reaches them all`,
    )
    .action(async (o: JsonOption & { keyFileIsShared?: boolean }) => {
      const result = await withDatabase(
        (db) => resealSigningSecrets(db, cliActor(), { keyFileIsShared: o.keyFileIsShared === true }),
        { masterKey: 'needed' },
      );
      print(
        o,
        result,
        (r) =>
          `${r.resealed} endpoint(s) re-sealed under master key ${r.keyId}` +
          (r.file
            ? ` (a new key, now the only one in the key file ${r.file}: every host that runs the service or fleet-admin must read this file as it is now; a copy taken before opens none of the signing secrets)`
            : ' (FRS_SECRET_KEY; FRS_SECRET_KEY_PREVIOUS is no longer needed)'),
      );
    });
}
