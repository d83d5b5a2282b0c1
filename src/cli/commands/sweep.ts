// `fleet-admin sweep`: the calendar sweep and the delivery sweep, run once.
import type { Command } from 'commander';
import { findWorkspace } from '../../core/workspaces.js';
import { runCalendarSweep } from '../../webhooks/calendar.js';
import { Dispatcher } from '../../webhooks/dispatcher.js';
import { createLogger } from '../../logger.js';
import { command, isoInstant, readableLog, type CliIo, type JsonOption } from '../io.js';

export function register(program: Command, { withDatabase, print }: CliIo): void {
  command(program, 'sweep', 'run the calendar sweep and the delivery sweep once, wait for the attempts, and exit')
    .option('--now <iso>', 'the clock the sweeps decide by (signatures always use the real clock)', isoInstant)
    .option('--workspace <slug>', 'sweep this workspace only (default: every workspace)')
    .option('--calendar', 'run the calendar sweep')
    .option('--deliveries', 'run the delivery sweep')
    .action(async (o: JsonOption & { now?: Date; workspace?: string; calendar?: boolean; deliveries?: boolean }) => {
      const both = !o.calendar && !o.deliveries;
      const now = o.now ?? new Date();
      const result = await withDatabase(
        async (db) => {
          const workspaceIds = o.workspace ? [(await findWorkspace(db, o.workspace)).id] : undefined;
          const calendar = o.calendar || both ? await runCalendarSweep(db, now, { workspaceIds }) : { events: 0 };
          // Failed attempts are logged (warn) on stderr, a readable line each: stdout holds only the result.
          const dispatcher = new Dispatcher({
            db,
            logger: createLogger('warn', readableLog()),
            clock: () => now,
            workspaceIds,
          });
          const deliveries =
            o.deliveries || both
              ? await dispatcher.runOnce(now)
              : { attempted: 0, accepted: 0, retrying: 0, failed: 0 };
          return { calendar: { events: calendar.events }, deliveries };
        },
        { masterKey: o.deliveries || both ? 'needed' : undefined },
      );
      print(
        o,
        result,
        (r) =>
          `calendar: ${r.calendar.events} event(s); deliveries: ${r.deliveries.attempted} attempted, ${r.deliveries.accepted} accepted, ${r.deliveries.retrying} retrying, ${r.deliveries.failed} failed`,
      );
    });
}
