// fleet-admin: the operator CLI (`npx fleet-admin ...`, run by bin/fleet-admin.js). Every command takes --json and
// then prints exactly one JSON object on stdout; bad input exits 1 with one line on stderr and nothing on stdout.
import { Command, CommanderError } from 'commander';
import { SchemaBehindError } from '../db/migrate.js';
import { DatabaseRolesError } from '../db/roles.js';
import { MasterKeyError } from '../secrets.js';
import { InputError, InvalidFieldError } from '../errors.js';
import { ConfigError, loadConfig, SERVICE_VERSION, type Config } from '../config.js';
import { flagOf } from './flags.js';
import { cliIo, type CliIo } from './io.js';
import * as adminToken from './commands/admin-token.js';
import * as audit from './commands/audit.js';
import * as deliveries from './commands/deliveries.js';
import * as endpoint from './commands/endpoint.js';
import * as events from './commands/events.js';
import * as importCommand from './commands/import.js';
import * as key from './commands/key.js';
import * as migrate from './commands/migrate.js';
import * as portal from './commands/portal.js';
import * as publish from './commands/publish.js';
import * as secrets from './commands/secrets.js';
import * as seed from './commands/seed.js';
import * as sweep from './commands/sweep.js';
import * as workspace from './commands/workspace.js';

/** The command groups, in the order `fleet-admin --help` lists them. */
const GROUPS: { register(program: Command, io: CliIo): void }[] = [
  migrate,
  workspace,
  key,
  endpoint,
  adminToken,
  portal,
  secrets,
  importCommand,
  publish,
  sweep,
  deliveries,
  events,
  audit,
  seed,
];

export function buildProgram(config: Config): Command {
  const program = new Command('fleet-admin')
    .description(
      'Operator commands for the Fleet Rental Service (uses DATABASE_URL, else the embedded database under .data/)',
    )
    // Commander errors are thrown to main() instead of exiting, and printed on one line like every other error.
    .version(SERVICE_VERSION, '-V, --version', 'print the version')
    .exitOverride()
    .configureOutput({
      outputError: (message, write) => write(`fleet-admin: ${oneLine(message.replace(/^error: /, ''))}\n`),
    });
  const io = cliIo(config);
  for (const group of GROUPS) group.register(program, io);
  return program;
}

function oneLine(text: string): string {
  return text.trim().replace(/\s*\n\s*/g, ' ');
}

/** Runs the CLI and returns the exit code; errors are printed here, on one line, never as a stack trace. */
export async function main(argv: string[]): Promise<number> {
  try {
    await buildProgram(loadConfig()).parseAsync(argv);
    return 0;
  } catch (err) {
    // Commander has already printed its own errors (and help) through outputError.
    if (err instanceof CommanderError) return err.exitCode;
    // (the operator's own client: a refusal's detail for the operator, such as the address a name resolved to; the
    // core names fields, the CLI says them as its flags)
    const message =
      err instanceof InputError
        ? (err instanceof InvalidFieldError && err.sayToOperator(flagOf)) || err.say(flagOf)
        : err instanceof Error
          ? err.message
          : String(err);
    // The first line only: an unexpected error's message may carry logs (e.g. a database that failed to start).
    const expected = [InputError, ConfigError, SchemaBehindError, DatabaseRolesError, MasterKeyError].some(
      (type) => err instanceof type,
    );
    process.stderr.write(
      expected ? `fleet-admin: ${oneLine(message)}\n` : `fleet-admin: internal error: ${message.split('\n')[0]}\n`,
    );
    return 1;
  }
}
