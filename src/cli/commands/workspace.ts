// `fleet-admin workspace ...`: create, change and list workspaces.
import { Option, type Command } from 'commander';
import {
  createWorkspace,
  findWorkspace,
  listWorkspaces,
  updateWorkspace,
  type WorkspaceRecord,
} from '../../core/workspaces.js';
import { cliActor } from '../../core/audit.js';
import { command, wholeNumber, type CliIo, type JsonOption } from '../io.js';

const workspaceSummary = ({ id, slug, status }: WorkspaceRecord) => ({ id, slug, status });
const describeWorkspace = (w: { id: string; slug: string; status: string }) =>
  `workspace ${w.slug} (${w.id}) is ${w.status}`;

export function register(program: Command, { withDatabase, print }: CliIo): void {
  const workspace = program.command('workspace').description('create and change workspaces');
  command(workspace, 'create', 'create a workspace')
    .requiredOption('--slug <slug>', 'lower-case letters, digits and hyphens')
    .option('--timezone <tz>', 'IANA time zone (default Asia/Dubai)')
    .option('--reminders-ahead <days>', 'days ahead for due-soon reminders, 1 to 60 (default 3)', wholeNumber)
    .action(async (o: JsonOption & { slug: string; timezone?: string; remindersAhead?: number }) => {
      const created = await withDatabase((db) =>
        createWorkspace(db, cliActor(), { slug: o.slug, timezone: o.timezone, remindersAhead: o.remindersAhead }),
      );
      print(o, workspaceSummary(created), describeWorkspace);
    });
  command(workspace, 'set', 'change a workspace')
    .requiredOption('--slug <slug>', 'the workspace')
    .addOption(
      new Option('--status <status>', 'frozen workspaces get 403 on every API call').choices(['active', 'frozen']),
    )
    .option('--timezone <tz>', 'IANA time zone')
    .option('--reminders-ahead <days>', 'days ahead for due-soon reminders, 1 to 60', wholeNumber)
    .option(
      '--webhook-allowed-cidrs <cidrs>',
      'comma-separated private ranges (CIDR) this workspace\'s webhooks may reach, and no other\'s; "" closes them',
    )
    .action(
      async (
        o: JsonOption & {
          slug: string;
          status?: 'active' | 'frozen';
          timezone?: string;
          remindersAhead?: number;
          webhookAllowedCidrs?: string;
        },
      ) => {
        const webhookAllowedCidrs = o.webhookAllowedCidrs
          ?.split(',')
          .map((c) => c.trim())
          .filter(Boolean);
        const changes = {
          status: o.status,
          timezone: o.timezone,
          remindersAhead: o.remindersAhead,
          webhookAllowedCidrs,
        };
        const updated = await withDatabase(async (db) =>
          updateWorkspace(db, cliActor(), {
            workspaceId: (await findWorkspace(db, o.slug)).id,
            changes,
            now: new Date(),
          }),
        );
        print(o, workspaceSummary(updated), describeWorkspace);
      },
    );

  command(workspace, 'list', 'list the workspaces').action(async (o: JsonOption) => {
    const result = await withDatabase((db) => listWorkspaces(db, cliActor(), {}));
    print(
      o,
      result,
      (r) =>
        r.rows
          .map(
            (w) =>
              `${w.slug} ${w.id} ${w.status} ${w.timezone} reminders-ahead=${w.remindersAhead}${w.webhookAllowedCidrs?.length ? ` webhook-allowed-cidrs=${w.webhookAllowedCidrs.join(',')}` : ''}`,
          )
          .join('\n') || 'no workspaces',
    );
  });
}
