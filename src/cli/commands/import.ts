// `fleet-admin import`: an import document loaded into a workspace, as an import job.
import { Option, type Command } from 'commander';
import { cliActor } from '../../core/audit.js';
import { importFile } from '../../core/import/jobs.js';
import { findWorkspace } from '../../core/workspaces.js';
import { command, describeCounts, type CliIo, type JsonOption } from '../io.js';

export function register(program: Command, { withDatabase, print }: CliIo): void {
  command(program, 'import', 'load an import document (JSON, or NDJSON) into a workspace, as an import job')
    .requiredOption('--workspace <slug>', 'the workspace')
    .requiredOption(
      '--file <path>',
      'the JSON document (schema: openapi/import.schema.json), or NDJSON (.ndjson: one {"key", "record"} a line)',
    )
    .addOption(new Option('--format <format>', "the file's format (default: by its name)").choices(['json', 'ndjson']))
    .action(async (o: JsonOption & { workspace: string; file: string; format?: 'json' | 'ndjson' }) => {
      // The same job as the admin API's createImport, streamed from the file. Progress goes to stderr: a bar on a
      // terminal, else a line every 5 s (none for a run shorter than that).
      const result = await withDatabase(async (db) =>
        importFile(db, cliActor(), {
          workspaceId: (await findWorkspace(db, o.workspace)).id,
          file: o.file,
          progress: true,
          format: o.format,
        }),
      );
      print(o, { imported: result.imported }, (r) => `imported ${describeCounts(r.imported)}`);
    });
}
