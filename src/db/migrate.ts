import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Knex } from 'knex';
import { ROOT_DIR } from '../config.js';

/**
 * Knex migration source reading migrations/ next to the running code (TypeScript under tsx, JavaScript from
 * dist/ after a build), loaded with import() so both module kinds work.
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

export async function migrateLatest(db: Knex): Promise<string[]> {
  const [, applied] = (await db.migrate.latest({ migrationSource: migrationSource() })) as [number, string[]];
  return applied;
}

/** Names of the migrations this code has that the database has not applied yet. */
export async function pendingMigrations(db: Knex): Promise<string[]> {
  const [, pending] = (await db.migrate.list({ migrationSource: new DirectoryMigrationSource(migrationsDir()) })) as [unknown[], Array<{ file: string } | string>];
  return pending.map((m) => (typeof m === 'string' ? m : m.file));
}
