// What every fleet-admin command shares: the database it works on, how it prints its result, and how it reads its
// flags. Commands reach these through the `CliIo` they are registered with, so a test may give them its own.
import { Command, InvalidArgumentError } from 'commander';
import type { Knex } from 'knex';
import { openDatabase, type OpenOptions } from '../db/database.js';
import { checkMasterKey } from '../webhooks/sealing.js';
import type { Config } from '../config.js';
import { printable } from './printable.js';

export interface JsonOption {
  json?: boolean;
}

/** What a command group is registered with: the configuration read at start, the database, the output. */
export interface CliIo {
  config: Config;
  withDatabase: typeof withDatabase;
  print: typeof print;
}

export function cliIo(config: Config): CliIo {
  return { config, withDatabase, print };
}

/**
 * Runs `work` on the service's database (DATABASE_URL, else the embedded cluster) and always closes it. First the
 * master key is checked against the database's record (src/core/webhooks/signing-secrets.ts): a command that seals or
 * opens signing secrets, or may (`migrate`), needs the key they are sealed with; any other refuses only another key.
 */
export async function withDatabase<T>(
  work: (db: Knex) => Promise<T>,
  options: OpenOptions & { masterKey?: 'needed' } = {},
): Promise<T> {
  const database = await openDatabase(options);
  try {
    await checkMasterKey(database.db, options.masterKey ?? 'if-given');
    return await work(database.db);
  } finally {
    await database.close();
  }
}

export function print<T extends object>(options: JsonOption, result: T, text: (result: T) => string): void {
  process.stdout.write(`${options.json ? JSON.stringify(result) : printable(text(result))}\n`);
}

export function wholeNumber(value: string): number {
  if (!/^-?\d+$/.test(value)) throw new InvalidArgumentError('It must be a whole number.');
  return Number(value);
}

export function jsonObject(value: string): unknown {
  try {
    return JSON.parse(value);
  } catch {
    throw new InvalidArgumentError('It must be JSON, e.g. \'{"bookingId": "..."}\'.');
  }
}

export function isoInstant(value: string): Date {
  const date = new Date(value);
  if (!/^\d{4}-\d{2}-\d{2}T/.test(value) || Number.isNaN(date.getTime()))
    throw new InvalidArgumentError('It must be an ISO 8601 date-time.');
  return date;
}

export function commaList(value: string): string[] {
  return value
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
}

/** A leaf command: every one of them takes --json. */
export function command(parent: Command, name: string, description: string): Command {
  return parent.command(name).description(description).option('--json', 'print exactly one JSON object on stdout');
}

/**
 * Log records as a person reads them on stderr, one line each: `fleet-admin: warning: <message> (field=value, ...)`,
 * not pino's JSON (what a command's work logs, such as the failed attempts of `sweep`).
 */
export function readableLog(write: (line: string) => void = (line) => process.stderr.write(line)): {
  write(record: string): void;
} {
  const LEVELS: Record<number, string> = {
    10: 'trace',
    20: 'debug',
    30: 'info',
    40: 'warning',
    50: 'error',
    60: 'fatal',
  };
  const HIDDEN = new Set(['level', 'time', 'pid', 'hostname', 'service', 'component', 'msg']);
  return {
    write(record) {
      for (const text of record.split('\n').filter(Boolean)) {
        const fields = JSON.parse(text) as Record<string, unknown>;
        const details = Object.entries(fields)
          .filter(([name, value]) => !HIDDEN.has(name) && value !== null && value !== undefined)
          .map(([name, value]) => `${name}=${typeof value === 'object' ? JSON.stringify(value) : String(value)}`);
        write(
          `fleet-admin: ${LEVELS[fields.level as number] ?? 'log'}: ${String(fields.msg ?? '')}${details.length ? ` (${details.join(', ')})` : ''}\n`,
        );
      }
    },
  };
}

export const describeCounts = (counts: Record<string, number>) =>
  Object.entries(counts)
    .map(([key, count]) => `${key}: ${count}`)
    .join(', ') || 'nothing';
