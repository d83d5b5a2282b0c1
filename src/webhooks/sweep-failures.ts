import type { Logger } from 'pino';
import { backoffMs, OutageLog } from '../db/outage.js';

/** Database failures in a row after which unrecorded outcomes are given up (and a one-off sweep fails). */
const MAX_CONSECUTIVE_FAILURES = 5;
/** The longest wait between tries while the database is unavailable (the wait doubles from the poll interval). */
const MAX_BACKOFF_MS = 5000;

/** The dispatcher's two kinds of statement: a claim that works says nothing of the records, and the reverse. */
export type SweepStatement = 'claim' | 'flush';

/**
 * The database failures of a delivery sweep: how long to wait before the next try, when to give up, and the
 * outage's log lines (once when it starts and once when it ends, src/db/outage.ts).
 */
export class SweepFailures {
  /** Failures in a row, of claims and of flushes apart. */
  private readonly inRow = { claim: 0, flush: 0 };
  /** Failures in a row, of any statement: how long the next wait is. */
  private ofAnyKind = 0;
  private readonly outage: OutageLog;
  /** Set when a sweep gives up (the last error). */
  givenUp: unknown;

  constructor(
    logger: Logger,
    private readonly firstBackoffMs: number,
  ) {
    this.outage = new OutageLog(logger, 'delivery sweep');
  }

  /** A new sweep starts counting afresh. */
  reset(): void {
    this.inRow.claim = 0;
    this.inRow.flush = 0;
    this.givenUp = undefined;
  }

  /**
   * Counts a failed statement (the database is unreachable or refused it): how long to wait before the next try
   * (doubling from the poll interval up to MAX_BACKOFF_MS), and whether this one gives up: after
   * MAX_CONSECUTIVE_FAILURES in a row of the same kind, a one-off sweep fails (givenUp) and a running one starts
   * counting again (a flush gives up its batch). An outage is logged when it starts and when it ends, not on every try.
   */
  failed(err: unknown, kind: SweepStatement): { wait: number; giveUp: boolean } {
    const wait = backoffMs(++this.ofAnyKind, this.firstBackoffMs, MAX_BACKOFF_MS);
    this.outage.failed(err, wait);
    const giveUp = ++this.inRow[kind] >= MAX_CONSECUTIVE_FAILURES;
    if (giveUp) {
      this.inRow[kind] = 0;
      this.givenUp = err;
    }
    return { wait, giveUp };
  }

  answered(kind: SweepStatement): void {
    this.inRow[kind] = 0;
    this.ofAnyKind = 0;
    this.outage.succeeded();
  }
}
