import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Knex } from 'knex';
import { ROOT_DIR } from '../config.js';
import { applyRolePrivileges, securePublicSchema } from './roles.js';

/**
 * Knex migration source reading migrations/ next to the running code (TypeScript under tsx, JavaScript from
 * dist/ after a build), loaded with import() so both module kinds work. A migration is a file of the folder itself
 * named `<14 digits>_<name>`; the helpers migrations share live in migrations/support/, which it never lists.
 */
class DirectoryMigrationSource implements Knex.MigrationSource<string> {
  constructor(private readonly dir: string) {}
  async getMigrations(): Promise<string[]> {
    return fs
      .readdirSync(this.dir)
      .filter((f) => /^\d{14}_[\w-]+\.(ts|js)$/.test(f) && !f.endsWith('.d.ts'))
      .sort();
  }
  getMigrationName(file: string): string {
    return file.replace(/\.(ts|js)$/, '');
  }
  async getMigration(file: string): Promise<Knex.Migration> {
    return import(pathToFileURL(path.join(this.dir, file)).href);
  }
}

function migrationsDir(): string {
  const compiled = path.join(ROOT_DIR, 'dist', 'migrations');
  return import.meta.url.includes('/dist/') && fs.existsSync(compiled) ? compiled : path.join(ROOT_DIR, 'migrations');
}

/** The project's migrations, for Knex's migrator. */
export function migrationSource(): Knex.MigrationSource<string> {
  return new DirectoryMigrationSource(migrationsDir());
}

/**
 * Applies the pending migrations, then the service roles' grants (src/db/roles.ts); returns what it applied. First the
 * schema public is made the owner's alone, or it refuses: the migrations run as the owner.
 */
export async function migrateLatest(db: Knex): Promise<string[]> {
  await securePublicSchema(db);
  const [, applied] = (await db.migrate.latest({ migrationSource: migrationSource() })) as [number, string[]];
  await applyRolePrivileges(db);
  return applied;
}

/** The database has migrations pending; only `fleet-admin migrate` applies them. */
export class SchemaBehindError extends Error {
  constructor(pending: string[]) {
    super(
      `the database schema is not up to date (${pending.length} migration(s) pending, first ${pending[0]}): run "npx fleet-admin migrate"`,
    );
  }
}

/** The migrations not yet applied to the database (names without extension). */
export async function pendingMigrations(db: Knex): Promise<string[]> {
  const source = migrationSource();
  const [, pending] = (await db.migrate.list({ migrationSource: source })) as [unknown[], string[]];
  return pending.map((file) => source.getMigrationName(file));
}
