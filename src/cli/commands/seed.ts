// `fleet-admin seed ...`: generated data (the demo workspace, a large data set).
import type { Command } from 'commander';
import { command, describeCounts, wholeNumber, type CliIo, type JsonOption } from '../io.js';

export function register(program: Command, { withDatabase, print }: CliIo): void {
  // The seed modules are loaded only when asked for: they are not needed by any other command.
  const seed = program.command('seed').description('load generated data');
  command(seed, 'demo', 'create (if missing) and fill the demo workspace; prints a new API key')
    .requiredOption('--workspace <slug>', 'the workspace')
    .action(async (o: JsonOption & { workspace: string }) => {
      const { seedDemo } = await import('../../../seeds/demo.js');
      const result = await withDatabase((db) => seedDemo(db, o.workspace));
      print(
        o,
        { workspace: result.workspace, key: result.key },
        (r) => `workspace ${r.workspace} is ready; API key, shown only this once:\n${r.key}`,
      );
    });
  command(seed, 'large', 'fill a workspace with a large generated data set')
    .requiredOption('--workspace <slug>', 'the workspace')
    .option('--vehicles <n>', 'number of vehicles', wholeNumber)
    .option('--bookings <n>', 'number of bookings', wholeNumber)
    .option('--invoices <n>', 'number of invoices', wholeNumber)
    .option('--payments <n>', 'number of payments', wholeNumber)
    .option('--customers <n>', 'number of customers', wholeNumber)
    .action(
      async (
        o: JsonOption & {
          workspace: string;
          vehicles?: number;
          bookings?: number;
          invoices?: number;
          payments?: number;
          customers?: number;
        },
      ) => {
        const { seedLarge } = await import('../../../seeds/large.js');
        const { vehicles, bookings, invoices, payments, customers } = o;
        // Progress goes to stderr: a bar on a terminal, else a line every 5 s (none for a run shorter than that).
        const counts = await withDatabase((db) =>
          seedLarge(db, o.workspace, { vehicles, bookings, invoices, payments, customers, progress: true }),
        );
        print(o, counts, (c) => `seeded ${describeCounts(c)}`);
      },
    );
}
