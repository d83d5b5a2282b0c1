// `fleet-admin migrate`: the database schema.
import type { Command } from 'commander';
import { migrateLatest } from '../../db/migrate.js';
import { recordPublicKey } from '../../webhooks/sealing.js';
import { command, type CliIo, type JsonOption } from '../io.js';

export function register(program: Command, { withDatabase, print }: CliIo): void {
  command(program, 'migrate', 'apply pending database migrations').action(async (o: JsonOption) => {
    // Given the master key, it also records the key's sealing public key, which the API process seals new secrets to.
    const applied = await withDatabase(
      async (db) => {
        const done = await migrateLatest(db);
        await recordPublicKey(db);
        return done;
      },
      { schema: 'as-is', masterKey: 'needed' },
    );
    print(o, { applied }, (r) =>
      r.applied.length ? `applied ${r.applied.join(', ')}` : 'database schema is up to date',
    );
  });
}
