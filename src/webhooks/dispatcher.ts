import crypto from 'node:crypto';
import os from 'node:os';
import type { Knex } from 'knex';
import pg from 'pg';
import type { Logger } from 'pino';
import { TEST_EVENT } from './catalogue.js';
import { DELIVERY_CHANNEL } from './fanout.js';
import { workspacePolicy, type DestinationPolicy } from './destination-policy.js';
import { processConfig } from '../config.js';
import { column, defaultWorkspaceConcurrency, fairCandidates, InFlightShares } from './fairness.js';
import {
  attemptDelivery,
  DEFAULT_ATTEMPT_TIMEOUT_MS,
  type AttemptOutcome,
  type AttemptRequest,
} from './http-attempt.js';
import { nextAttemptAt } from './retry-schedule.js';
import { PENDING, SWITCH_OFF_AFTER_FAILURES } from './endpoint-lifecycle.js';
import type { ServiceMetrics } from '../observability/metrics.js';
import { rows } from '../queries/common.js';
import { backoffMs, isDatabaseUnavailable, OutageLog } from '../db/outage.js';
import { openSigningSecrets } from './sealing.js';

// The delivery sweep. A dispatcher claims due deliveries (FOR NO KEY UPDATE SKIP LOCKED, then a lease, so several
// processes can run at once and the claims of a killed one are retried once its lease runs out), attempts each
// one over HTTP, and records finished attempts in batches: one statement each for the attempt rows, the
// deliveries and the endpoints' failure streaks, endpoints locked in id order.

export interface DispatcherOptions {
  db: Knex;
  logger: Logger;
  /** Attempts in flight at once in this process. Default 64. */
  concurrency?: number;
  /** Attempts in flight at once to one endpoint, so a slow or dead endpoint cannot hold up the others. Default 8. */
  perEndpointConcurrency?: number;
  /**
   * Attempts in flight at once for one workspace, so one workspace cannot delay the others (see fairness.ts).
   * Default a quarter of `concurrency` (16 of 64).
   */
  perWorkspaceConcurrency?: number;
  /** How long a claim is held before another dispatcher may take the delivery over. Default 60 s. */
  leaseMs?: number;
  /** Time-out of one whole HTTP exchange. Default 10 s. */
  attemptTimeoutMs?: number;
  /** How often the queue is polled when no notification arrives. Default (and at most) 1 s. */
  pollIntervalMs?: number;
  /** The sweep's clock: which deliveries are due and when retries are scheduled. Signatures use the real clock. */
  clock?: () => Date;
  /** Only deliveries of these workspaces (a dispatcher per tenant, or a test's own). Default: every workspace. */
  workspaceIds?: string[];
  /** Where attempts, lag and switch-offs are counted. */
  metrics?: ServiceMetrics;
  /** Which destinations may be reached, and how names are resolved. Default: the environment's (FRS_ALLOW_PRIVATE_WEBHOOK_URLS, FRS_WEBHOOK_ALLOWED_CIDRS, FRS_WEBHOOK_DNS_SERVERS). */
  destinationPolicy?: DestinationPolicy;
}

export interface SweepCounts {
  attempted: number;
  accepted: number;
  retrying: number;
  failed: number;
}

interface Claim extends AttemptRequest {
  endpointId: string;
  workspaceId: string;
  /** The private ranges the workspace's own setting opens to its endpoints (workspacePolicy). */
  allowedCidrs: string[];
  /** This attempt's number, 1-based. */
  attempt: number;
}

/** A claim as the database returns it: the signing secrets still sealed (base64). */
type SealedClaim = Omit<Claim, 'secrets'> & {
  secretKeyId: string;
  secretSealed: string;
  previousSecretKeyId: string | null;
  previousSecretSealed: string | null;
};

interface Finished {
  claim: Claim;
  outcome: AttemptOutcome;
  /** The sweep clock when the attempt failed: retries are measured from it. */
  sweepAt: Date;
}

type DeliveryStatus = 'accepted' | 'retrying' | 'failed';

/** Database failures in a row after which unrecorded outcomes are given up (and a one-off sweep fails). */
const MAX_CONSECUTIVE_FAILURES = 5;
/**
 * How far ahead a dispatcher claims: it holds (in flight, or leased and ready) up to this many times its limits, overall,
 * per endpoint and per workspace, and sends within the limits themselves.
 */
const CLAIM_AHEAD = 2;
/**
 * How long a claim may wait ready before it is sent or given back. The claim checks the endpoint (switched off?), its
 * workspace (frozen?) and the secrets; a claim given back is claimed again with those checked afresh, so a switch-off,
 * a freeze or a rotation reaches what was claimed ahead within this time. It also keeps almost the whole lease for
 * the attempt and its record.
 */
const READY_FOR_MS = 500;
/** The longest wait between tries while the database is unavailable (the wait doubles from the poll interval). */
const MAX_BACKOFF_MS = 5000;
/** The longest wait between tries to LISTEN again. */
const MAX_LISTEN_BACKOFF_MS = 30_000;
/** Pause before claiming again when another dispatcher was locking some of the due rows. */
const CONTENTION_RETRY_MS = 5;

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The flush of a batch of finished attempts, as one statement. Order of locks: the endpoints first, in id order
 * (`locked`: every other part reads them only through it, so a row is updated only after it was locked there), so
 * two dispatchers flushing the same endpoints cannot deadlock; NO KEY UPDATE, which does not conflict with the KEY
 * SHARE locks that inserting deliveries (fan-out) takes on their endpoints. `locked` returns each endpoint's newest
 * version (READ COMMITTED re-reads a row updated since the statement's snapshot), so the streaks add to the latest
 * count. The parts of one statement cannot see each other's changes, so the batch's own deliveries of an endpoint
 * switched off here are held by `recorded` itself and `held` takes the others.
 */
const RECORD_ATTEMPTS = `
  WITH attempt AS (
    SELECT * FROM unnest(:deliveryIds::uuid[], :endpointIds::uuid[], :numbers::int[], :startedAt::timestamptz[], :durations::int[], :statusCodes::int[],
                         :errorKinds::text[], :errors::text[], :responseBodies::text[], :statuses::text[], :nextAttempts::timestamptz[])
      AS v(delivery_id, endpoint_id, number, started_at, duration_ms, status_code, error_kind, error, response_body, status, next_attempt_at)
  ), streak AS (
    SELECT * FROM unnest(:streakEndpoints::uuid[], :successes::int[], :leading::int[], :trailing::int[], :longest::int[], :lastSuccessAt::timestamptz[])
      AS v(id, successes, leading_failures, trailing_failures, longest_failures, last_success_at)
  ), locked AS MATERIALIZED (
    SELECT e.id, e.is_active, e.consecutive_failures FROM webhook_endpoints e
    WHERE e.id IN (SELECT id FROM streak)
    ORDER BY e.id
    FOR NO KEY UPDATE
  ), streak_change AS MATERIALIZED (
    -- consecutive_failures counts failed attempts in a row; a run reaching the threshold switches the endpoint off
    SELECT s.*, (l.is_active AND ((s.leading_failures > 0 AND l.consecutive_failures + s.leading_failures >= :switchOffAfter) OR s.longest_failures >= :switchOffAfter)) AS switch_off
    FROM streak s JOIN locked l ON l.id = s.id
  ), endpoint AS (
    UPDATE webhook_endpoints w SET
      consecutive_failures = CASE WHEN s.successes > 0 THEN s.trailing_failures ELSE w.consecutive_failures + s.leading_failures END,
      last_success_at = CASE WHEN s.successes > 0 THEN greatest(w.last_success_at, s.last_success_at) ELSE w.last_success_at END,
      is_active = w.is_active AND NOT s.switch_off,
      disabled_at = CASE WHEN s.switch_off THEN now() ELSE w.disabled_at END
    FROM streak_change s
    WHERE w.id = s.id
    RETURNING w.id, s.switch_off
  ), attempt_row AS (
    -- (joined to deliveries: a delivery deleted meanwhile, with its endpoint or workspace, gets no attempt row)
    INSERT INTO delivery_attempts (delivery_id, endpoint_id, number, started_at, duration_ms, status_code, error_kind, error, response_body)
    SELECT v.delivery_id, v.endpoint_id, v.number, v.started_at, v.duration_ms, v.status_code, v.error_kind, v.error, v.response_body
    FROM attempt v JOIN deliveries d ON d.id = v.delivery_id
    ON CONFLICT (delivery_id, number) DO NOTHING
    RETURNING 1
  ), recorded AS (
    -- A delivery that was held while its attempt was in flight, or whose endpoint this batch switches off, is held
    -- (test deliveries are sent to a switched-off endpoint too).
    UPDATE deliveries d SET
      status = CASE WHEN v.status = 'retrying' AND (d.status = 'held' OR (s.switch_off AND d.event <> :testEvent)) THEN 'held' ELSE v.status END,
      next_attempt_at = CASE WHEN v.status = 'retrying' AND (d.status = 'held' OR (s.switch_off AND d.event <> :testEvent)) THEN NULL ELSE v.next_attempt_at END,
      attempts = greatest(d.attempts, v.number),
      last_status_code = v.status_code,
      last_error = v.error,
      finished_at = CASE WHEN v.status IN ('accepted', 'failed') THEN now() END,
      lease_owner = NULL,
      lease_until = NULL
    FROM attempt v JOIN streak_change s ON s.id = v.endpoint_id
    WHERE d.id = v.delivery_id AND d.lease_owner = :owner
    RETURNING d.id, d.created_at
  ), held AS (
    -- the pending deliveries of the endpoints switched off here (what holdPendingDeliveries in endpoint-lifecycle.ts does)
    UPDATE deliveries d SET status = 'held', next_attempt_at = NULL
    FROM streak_change s
    WHERE s.switch_off AND d.endpoint_id = s.id AND d.${PENDING} AND d.event <> :testEvent
      AND d.id NOT IN (SELECT id FROM recorded)
    RETURNING 1
  )
  SELECT (SELECT coalesce(json_agg(json_build_object('id', id, 'createdAt', created_at)), '[]') FROM recorded) AS recorded,
         (SELECT coalesce(json_agg(id ORDER BY id), '[]') FROM endpoint WHERE switch_off) AS switched,
         (SELECT count(*) FROM attempt_row) AS attempt_rows,
         (SELECT count(*) FROM held) AS held`;

/** Failure-streak summary of one endpoint's attempts in a flushed batch, in the order they finished. */
export interface Streak {
  endpointId: string;
  successes: number;
  /** Failures before the first success (all of them when there was none). */
  leading: number;
  /** Failures after the last success. */
  trailing: number;
  /** The longest run of failures after the first success. */
  longestAfterSuccess: number;
  lastSuccessAt: string | null;
}

export function summariseStreaks(
  batch: Array<{ claim: { endpointId: string }; outcome: Pick<AttemptOutcome, 'ok' | 'startedAt' | 'durationMs'> }>,
): Streak[] {
  const byEndpoint = new Map<string, Streak>();
  for (const { claim, outcome } of batch) {
    let s = byEndpoint.get(claim.endpointId);
    if (!s) {
      s = {
        endpointId: claim.endpointId,
        successes: 0,
        leading: 0,
        trailing: 0,
        longestAfterSuccess: 0,
        lastSuccessAt: null,
      };
      byEndpoint.set(claim.endpointId, s);
    }
    if (outcome.ok) {
      s.successes++;
      s.trailing = 0;
      s.lastSuccessAt = new Date(outcome.startedAt.getTime() + outcome.durationMs).toISOString();
    } else if (s.successes === 0) {
      s.leading++;
      s.trailing++;
    } else {
      s.trailing++;
      s.longestAfterSuccess = Math.max(s.longestAfterSuccess, s.trailing);
    }
  }
  // Locks are taken in id order, so two dispatchers flushing the same endpoints cannot deadlock.
  return [...byEndpoint.values()].sort((a, b) => (a.endpointId < b.endpointId ? -1 : 1));
}

export class Dispatcher {
  private readonly db: Knex;
  private readonly logger: Logger;
  private readonly concurrency: number;
  private readonly perEndpointConcurrency: number;
  private readonly perWorkspaceConcurrency: number;
  private readonly leaseMs: number;
  private readonly attemptTimeoutMs: number;
  private readonly pollIntervalMs: number;
  private readonly clock: () => Date;
  private readonly workspaceIds: string[] | null;
  private readonly metrics: ServiceMetrics | undefined;
  private readonly destinationPolicy: DestinationPolicy;
  /** Written into lease_owner; unique per instance. */
  readonly owner = `${os.hostname()}:${process.pid}:${crypto.randomUUID().slice(0, 8)}`;

  private inFlight = 0;
  /** Attempts in flight, per endpoint and workspace: what the concurrency limits bound. */
  private readonly shares = new InFlightShares();
  /**
   * Leased claims waiting for a slot, in the claim's fair order, each with the time (performance.now()) after which
   * its lease no longer covers a whole attempt. Claiming ahead keeps the slots full while the next claim is on its
   * way to the database.
   */
  private ready: Array<{ claim: Claim; launchBy: number }> = [];
  /** In flight or ready: what the claim counts, within CLAIM_AHEAD times the limits. */
  private readonly held = new InFlightShares();
  /**
   * Failed attempts not yet recorded, per endpoint. Such an endpoint gets nothing more from the ready claims until
   * they are recorded, so a streak reaching the switch-off is recorded before anything else is sent to it.
   */
  private readonly unrecordedFailures = new Map<string, number>();
  private finished: Finished[] = [];
  /** The flush in progress, if any. */
  private flushing: Promise<void> | undefined;
  /** Database failures in a row, of claims and of flushes apart (a claim that works says nothing of the records). */
  private readonly failures = { claim: 0, flush: 0 };
  /** A flush failed and its outcomes wait to be recorded: nothing is claimed until they are. */
  private waitingToRecord = false;
  /** Database failures in a row, of any statement: how long the next wait is. */
  private failuresInRow = 0;
  /** An outage is logged once when it starts and once when it ends (src/db/outage.ts). */
  private readonly outage: OutageLog;
  private readonly listenOutage: OutageLog;
  private listenFailures = 0;
  /** Endpoints this process's flushes switched off while a claim was on its way: what it returns for them is not sent. */
  private readonly switchedOffDuringClaim = new Set<string>();
  /** Leased deliveries this dispatcher will not send (expired, or for an endpoint switched off here): given back before the next claim. */
  private unsent: string[] = [];
  /** Set when a one-off sweep gives up (the last error). */
  private givenUp: unknown;
  private claimWanted = true;
  private woken = false;
  private wakeUp: (() => void) | undefined;
  private busy = false;
  private stopping = false;
  /** What this instance attempted since start(). */
  readonly totals: SweepCounts = { attempted: 0, accepted: 0, retrying: 0, failed: 0 };
  private loopDone: Promise<void> | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private listener: pg.Client | undefined;

  constructor(options: DispatcherOptions) {
    this.db = options.db;
    this.logger = options.logger.child({ component: 'dispatcher' });
    this.outage = new OutageLog(this.logger, 'delivery sweep');
    this.listenOutage = new OutageLog(this.logger, 'delivery notifications (LISTEN)');
    this.concurrency = options.concurrency ?? 64;
    this.perEndpointConcurrency = options.perEndpointConcurrency ?? 8;
    this.perWorkspaceConcurrency = options.perWorkspaceConcurrency ?? defaultWorkspaceConcurrency(this.concurrency);
    this.leaseMs = options.leaseMs ?? 60_000;
    this.attemptTimeoutMs = options.attemptTimeoutMs ?? DEFAULT_ATTEMPT_TIMEOUT_MS;
    this.pollIntervalMs = Math.min(options.pollIntervalMs ?? 1000, 1000);
    this.clock = options.clock ?? (() => new Date());
    this.workspaceIds = options.workspaceIds ?? null;
    this.metrics = options.metrics;
    this.destinationPolicy = options.destinationPolicy ?? processConfig().destinationPolicy;
    if (!(this.concurrency >= 1 && this.perEndpointConcurrency >= 1 && this.perWorkspaceConcurrency >= 1))
      throw new Error('concurrency limits must be at least 1');
    if (!(this.leaseMs > this.attemptTimeoutMs)) throw new Error('leaseMs must be longer than attemptTimeoutMs');
  }

  /** The time-out of one HTTP exchange, in milliseconds. */
  get attemptTimeout(): number {
    return this.attemptTimeoutMs;
  }

  /** Runs continuously: polls at least once a second and is woken by NOTIFY on the delivery channel. */
  async start(): Promise<void> {
    if (this.busy) throw new Error('dispatcher is already running');
    this.busy = true;
    this.stopping = false;
    this.claimWanted = true;
    await this.listen();
    this.pollTimer = setInterval(() => this.wake(true), this.pollIntervalMs);
    this.loopDone = this.loop(undefined, this.totals).finally(() => {
      this.busy = false;
    });
  }

  /** Stops claiming, finishes and records the attempts in flight, then returns. */
  async stop(): Promise<void> {
    if (!this.loopDone) return;
    this.stopping = true;
    clearInterval(this.pollTimer);
    this.wake(false);
    await this.loopDone;
    this.loopDone = undefined;
    const listener = this.listener;
    this.listener = undefined;
    await listener?.end().catch(() => undefined);
  }

  /**
   * One sweep: claims everything due at `now` (by the sweep clock), attempts it, records the outcomes and
   * returns the counts. Retries scheduled by this sweep are due after `now`, so they wait for a later sweep.
   */
  async runOnce(now: Date = this.clock()): Promise<SweepCounts> {
    if (this.busy) throw new Error('dispatcher is already running');
    this.busy = true;
    const counts: SweepCounts = { attempted: 0, accepted: 0, retrying: 0, failed: 0 };
    try {
      this.stopping = false;
      this.claimWanted = true;
      await this.loop(now, counts);
      return counts;
    } finally {
      this.busy = false;
    }
  }

  private wake(claim: boolean): void {
    if (claim) this.claimWanted = true;
    this.woken = true;
    const resolve = this.wakeUp;
    this.wakeUp = undefined;
    resolve?.();
  }

  private async sleep(): Promise<void> {
    if (!this.woken) await new Promise<void>((resolve) => (this.wakeUp = resolve));
    this.woken = false;
  }

  /**
   * Claim into free slots, record finished attempts, repeat. Recording runs beside the claim (one flush at a time, on
   * its own connection), so the slots refill without waiting for the last batch to be written. With a fixed `now`
   * (runOnce) it returns once nothing more is due and everything claimed is recorded; otherwise when stop() was
   * called and the attempts in flight are recorded.
   */
  private async loop(now: Date | undefined, counts: SweepCounts): Promise<void> {
    this.failures.claim = 0;
    this.failures.flush = 0;
    this.givenUp = undefined;
    for (;;) {
      this.startFlush(counts, now);
      if (this.givenUp !== undefined && now !== undefined) {
        // A one-off sweep fails after repeated database failures; what is unrecorded is left to its leases.
        this.dropReady();
        this.unsent = [];
        while (this.inFlight > 0 || this.flushing) await this.sleep();
        this.finished = [];
        this.unrecordedFailures.clear();
        throw this.givenUp;
      }
      if (this.stopping && this.ready.length > 0) await this.releaseReady();
      if (this.unsent.length > 0) await this.releaseLeases(this.unsent.splice(0));
      let claimAgain = false;
      const free = CLAIM_AHEAD * this.concurrency - this.inFlight - this.ready.length;
      // (while outcomes wait to be recorded the flush goes first: a claim could take their deliveries again)
      if (!this.stopping && this.claimWanted && free > 0 && !this.waitingToRecord) {
        this.claimWanted = false;
        try {
          // (taken before the lease is: its lease lasts at least leaseMs from here)
          const claimedAt = performance.now();
          this.switchedOffDuringClaim.clear();
          const { claims, contended } = await this.claim(free, now ?? this.clock());
          this.failures.claim = 0;
          this.databaseAnswered();
          const launchBy = claimedAt + Math.min(READY_FOR_MS, this.leaseMs - this.attemptTimeoutMs);
          for (const claim of claims) {
            this.held.add(claim);
            this.ready.push({ claim, launchBy });
          }
          this.giveBackSwitchedOff(this.switchedOffDuringClaim);
          this.launchReady(now);
          if (claims.length === free || contended) this.claimWanted = true;
          // Rows another dispatcher was claiming at that moment are leased (or free again) a moment later.
          if (contended && claims.length < free) await delay(CONTENTION_RETRY_MS);
          claimAgain = claims.length > 0 || contended;
        } catch (err) {
          const { wait } = this.databaseFailed(err, 'claim');
          if (this.givenUp === undefined || now === undefined) {
            await delay(wait);
            this.claimWanted = true;
          }
          continue;
        }
      }
      if (claimAgain) continue;
      const idle =
        this.inFlight === 0 &&
        this.ready.length === 0 &&
        this.finished.length === 0 &&
        this.unsent.length === 0 &&
        !this.flushing;
      if (idle && (this.stopping || (now !== undefined && !this.claimWanted))) return;
      await this.sleep();
    }
  }

  /** Records the finished attempts in the background, unless a flush is already running (it starts the next one). */
  private startFlush(counts: SweepCounts, now: Date | undefined): void {
    if (this.flushing || this.finished.length === 0) return;
    const batch = this.finished;
    this.finished = [];
    this.flushing = (async () => {
      try {
        const switchedOff = await this.flush(batch, counts);
        this.failures.flush = 0;
        this.waitingToRecord = false;
        this.databaseAnswered();
        for (const id of switchedOff) this.switchedOffDuringClaim.add(id);
        this.forgetFailures(batch);
        this.giveBackSwitchedOff(switchedOff);
        this.launchReady(now);
      } catch (err) {
        // Outcomes not yet recorded are kept and recorded on a later try; once given up, their leases run out and
        // those deliveries are attempted again (delivery is at least once). A running sweep keeps them through a
        // database outage, claiming nothing meanwhile (waitingToRecord), so that a short outage sends nothing twice;
        // it gives them up after repeated failures of another kind (a statement that cannot succeed), or when
        // stopping (stop() must not wait for the database). A one-off sweep gives them up after repeated failures.
        const { wait, giveUp } = this.databaseFailed(err, 'flush');
        const keep = !this.stopping && (now === undefined && isDatabaseUnavailable(err) ? true : !giveUp);
        if (keep) {
          this.finished = batch.concat(this.finished);
          this.waitingToRecord = true;
        } else {
          this.waitingToRecord = false;
          this.forgetFailures(batch);
          this.launchReady(now);
        }
        if (!this.stopping) await delay(wait);
      }
    })().finally(() => {
      this.flushing = undefined;
      this.wake(false);
    });
  }

  private forgetFailures(batch: Finished[]): void {
    for (const { claim, outcome } of batch) {
      if (outcome.ok) continue;
      const n = (this.unrecordedFailures.get(claim.endpointId) ?? 1) - 1;
      if (n > 0) this.unrecordedFailures.set(claim.endpointId, n);
      else this.unrecordedFailures.delete(claim.endpointId);
    }
  }

  /**
   * Counts a failed statement (the database is unreachable or refused it): how long to wait before the next try
   * (doubling from the poll interval up to MAX_BACKOFF_MS), and whether this one gives up: after
   * MAX_CONSECUTIVE_FAILURES in a row of the same kind, a one-off sweep fails (givenUp) and a running one starts
   * counting again (a flush gives up its batch). An outage is logged when it starts and when it ends, not on every try.
   */
  private databaseFailed(err: unknown, kind: 'claim' | 'flush'): { wait: number; giveUp: boolean } {
    const wait = backoffMs(++this.failuresInRow, this.pollIntervalMs, MAX_BACKOFF_MS);
    this.outage.failed(err, wait);
    const giveUp = ++this.failures[kind] >= MAX_CONSECUTIVE_FAILURES;
    if (giveUp) {
      this.failures[kind] = 0;
      this.givenUp = err;
    }
    return { wait, giveUp };
  }

  private databaseAnswered(): void {
    this.failuresInRow = 0;
    this.outage.succeeded();
  }

  /**
   * Starts the ready claims that fit: within `concurrency` in flight, and within the per-endpoint and per-workspace
   * limits, in the claim's order. A claim whose lease no longer covers a whole attempt is dropped unattempted: its
   * lease runs out and it is claimed again.
   */
  private launchReady(now: Date | undefined): void {
    if (this.stopping) return;
    const clock = performance.now();
    for (let i = 0; i < this.ready.length && this.inFlight < this.concurrency;) {
      const { claim, launchBy } = this.ready[i];
      if (clock > launchBy) {
        this.ready.splice(i, 1);
        this.held.remove(claim);
        this.unsent.push(claim.deliveryId);
        this.claimWanted = true;
      } else if (
        this.shares.endpoint(claim.endpointId) < this.perEndpointConcurrency &&
        this.shares.workspace(claim.workspaceId) < this.perWorkspaceConcurrency &&
        !this.unrecordedFailures.has(claim.endpointId)
      ) {
        this.ready.splice(i, 1);
        this.launch(claim, now);
      } else {
        i++;
      }
    }
  }

  /**
   * What is ready for an endpoint switched off here is held in the database: it is not sent (test deliveries are, to
   * a switched-off endpoint too), and its lease is given back before the next claim.
   */
  private giveBackSwitchedOff(endpoints: ReadonlySet<string>): void {
    if (endpoints.size === 0) return;
    this.ready = this.ready.filter(({ claim }) => {
      if (!endpoints.has(claim.endpointId) || claim.event === TEST_EVENT) return true;
      this.held.remove(claim);
      this.unsent.push(claim.deliveryId);
      return false;
    });
  }

  /** Forgets the ready claims (their leases run out, and they are claimed again). */
  private dropReady(): void {
    for (const { claim } of this.ready) this.held.remove(claim);
    this.ready = [];
  }

  /** On stop: gives the ready claims' leases back, so that another dispatcher may take them at once. */
  private async releaseReady(): Promise<void> {
    const ids = this.ready.map(({ claim }) => claim.deliveryId);
    this.dropReady();
    await this.releaseLeases(ids);
  }

  private async releaseLeases(ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    try {
      await this.db('deliveries')
        .whereIn('id', ids)
        .where({ lease_owner: this.owner })
        .update({ lease_owner: null, lease_until: null });
    } catch (err) {
      this.logger.warn(
        { err: { message: (err as Error).message } },
        'could not give back the leases of unsent claims; they run out',
      );
    }
  }

  private launch(claim: Claim, now: Date | undefined): void {
    this.inFlight++;
    this.shares.add(claim);
    void attemptDelivery(claim, {
      timeoutMs: this.attemptTimeoutMs,
      policy: workspacePolicy(this.destinationPolicy, claim.allowedCidrs),
    }).then((outcome) => {
      this.finished.push({ claim, outcome, sweepAt: now ?? this.clock() });
      if (!outcome.ok)
        this.unrecordedFailures.set(claim.endpointId, (this.unrecordedFailures.get(claim.endpointId) ?? 0) + 1);
      this.inFlight--;
      this.shares.remove(claim);
      this.held.remove(claim);
      // The freed slot is refilled from what is ready now, without waiting for the database.
      this.launchReady(now);
      this.wake(true);
    });
  }

  /**
   * Leases up to `limit` due deliveries in fair order (fairness.ts), within the free per-endpoint and per-workspace
   * slots. `contended`: some due candidates were skipped because another dispatcher was locking them.
   */
  private async claim(limit: number, now: Date): Promise<{ claims: Claim[]; contended: boolean }> {
    const fair = fairCandidates({
      shares: this.held,
      now,
      perEndpoint: CLAIM_AHEAD * this.perEndpointConcurrency,
      perWorkspace: CLAIM_AHEAD * this.perWorkspaceConcurrency,
      workspaceIds: this.workspaceIds,
      limit,
      pending: PENDING,
      testEvent: TEST_EVENT,
    });
    const [result] = await rows<{ claims: SealedClaim[]; contended: boolean }>(
      this.db,
      `WITH ${fair.sql}, locked AS (
         SELECT d.id FROM deliveries d
         WHERE d.id IN (SELECT id FROM candidates) AND d.${PENDING} AND d.next_attempt_at <= :now
           AND (d.lease_until IS NULL OR d.lease_until < now())
         FOR NO KEY UPDATE OF d SKIP LOCKED
       ), claimed AS (
         UPDATE deliveries d SET lease_owner = :owner, lease_until = now() + :leaseMs * interval '1 millisecond'
         FROM locked l, webhook_endpoints w
         WHERE d.id = l.id AND w.id = d.endpoint_id
         RETURNING d.id AS "deliveryId", d.endpoint_id AS "endpointId", d.workspace_id AS "workspaceId", d.event, d.body, w.url, d.attempts + 1 AS attempt,
           w.secret_key_id AS "secretKeyId", encode(w.secret_sealed, 'base64') AS "secretSealed",
           -- the previous secret signs too while a rotation's overlap lasts
           CASE WHEN w.previous_secret_expires_at > now() THEN w.previous_secret_key_id END AS "previousSecretKeyId",
           CASE WHEN w.previous_secret_expires_at > now() THEN encode(w.previous_secret_sealed, 'base64') END AS "previousSecretSealed",
           -- the destinations the workspace's own setting opens, checked at connect time
           (SELECT ws.webhook_allowed_cidrs FROM workspaces ws WHERE ws.id = d.workspace_id) AS "allowedCidrs"
       )
       -- in the fair order: the claims are sent in it
       SELECT coalesce((SELECT json_agg(c ORDER BY f.claim_order) FROM claimed c JOIN candidates f ON f.id = c."deliveryId"), '[]') AS claims,
              (SELECT count(*) FROM candidates) > (SELECT count(*) FROM claimed) AS contended`,
      { ...fair.bindings, owner: this.owner, leaseMs: this.leaseMs },
      { prepared: true, indexPlans: true },
    );
    // An endpoint's secrets are opened once per claim (its deliveries carry the same sealed values), and kept
    // nowhere else: a rotation or a master-key change is seen by the next claim.
    const opened = new Map<string, string[] | null>();
    return { claims: result.claims.flatMap((claim) => this.openSecrets(claim, opened)), contended: result.contended };
  }

  /**
   * The claim with its signing secrets opened. One whose secrets this process cannot open (its master key is
   * missing) is not attempted: its lease runs out and it is tried again, once the key is configured.
   */
  private openSecrets(
    { secretKeyId, secretSealed, previousSecretKeyId, previousSecretSealed, ...claim }: SealedClaim,
    opened: Map<string, string[] | null>,
  ): Claim[] {
    const known = opened.get(claim.endpointId);
    if (known !== undefined) return known ? [{ ...claim, secrets: known }] : [];
    try {
      const current = { keyId: secretKeyId, sealed: Buffer.from(secretSealed, 'base64') };
      const previous =
        previousSecretKeyId && previousSecretSealed
          ? { keyId: previousSecretKeyId, sealed: Buffer.from(previousSecretSealed, 'base64') }
          : null;
      const secrets = openSigningSecrets(claim.endpointId, current, previous);
      opened.set(claim.endpointId, secrets);
      return [{ ...claim, secrets }];
    } catch (err) {
      opened.set(claim.endpointId, null);
      this.logger.error(
        { endpointId: claim.endpointId, deliveryId: claim.deliveryId, err: { message: (err as Error).message } },
        "cannot open the endpoint's signing secret; the delivery waits",
      );
      return [];
    }
  }

  /**
   * Records a batch of finished attempts in one statement, in a transaction of its own (rows() indexPlans):
   * the attempt rows, the deliveries, the endpoints' failure streaks and switch-offs, and the pending deliveries of
   * endpoints switched off, held. The endpoints are locked first, in id order (see RECORD_ATTEMPTS).
   */
  private async flush(batch: Finished[], counts: SweepCounts): Promise<Set<string>> {
    const deliveries = batch.map(({ claim, outcome, sweepAt }) => {
      const next = outcome.ok ? null : nextAttemptAt(claim.attempt, sweepAt);
      const status: DeliveryStatus = outcome.ok ? 'accepted' : next ? 'retrying' : 'failed';
      return { id: claim.deliveryId, status, next: next?.toISOString() ?? null };
    });
    const perEndpoint = summariseStreaks(batch);
    const [result] = await rows<{ recorded: Array<{ id: string; createdAt: string }>; switched: string[] }>(
      this.db,
      RECORD_ATTEMPTS,
      {
        deliveryIds: column(deliveries.map((d) => d.id)),
        endpointIds: column(batch.map((f) => f.claim.endpointId)),
        numbers: column(batch.map((f) => f.claim.attempt)),
        startedAt: column(batch.map((f) => f.outcome.startedAt.toISOString())),
        durations: column(batch.map((f) => f.outcome.durationMs)),
        statusCodes: column(batch.map((f) => f.outcome.statusCode)),
        errorKinds: column(batch.map((f) => f.outcome.errorKind)),
        errors: column(batch.map((f) => f.outcome.error)),
        responseBodies: column(batch.map((f) => f.outcome.responseBody)),
        statuses: column(deliveries.map((d) => d.status)),
        nextAttempts: column(deliveries.map((d) => d.next)),
        streakEndpoints: column(perEndpoint.map((s) => s.endpointId)),
        successes: column(perEndpoint.map((s) => s.successes)),
        leading: column(perEndpoint.map((s) => s.leading)),
        trailing: column(perEndpoint.map((s) => s.trailing)),
        longest: column(perEndpoint.map((s) => s.longestAfterSuccess)),
        lastSuccessAt: column(perEndpoint.map((s) => s.lastSuccessAt)),
        switchOffAfter: SWITCH_OFF_AFTER_FAILURES,
        owner: this.owner,
        testEvent: TEST_EVENT,
      },
      { prepared: true, indexPlans: true },
    );
    this.report(batch, deliveries, new Map(result.recorded.map((r) => [r.id, new Date(r.createdAt)])));
    for (const id of result.switched) {
      this.logger.info(
        { endpointId: id, failures: SWITCH_OFF_AFTER_FAILURES },
        'webhook endpoint switched off after failed attempts in a row',
      );
    }
    this.metrics?.endpointSwitchOffs.inc(result.switched.length);
    for (const { status } of deliveries) counts[status]++;
    counts.attempted += batch.length;
    return new Set(result.switched);
  }

  /**
   * One log line per recorded attempt (failures at warn, successes at debug) and the attempt metrics. Ids, kinds
   * and numbers only: never the payload, the URL, the secret or the response body.
   */
  private report(
    batch: Finished[],
    deliveries: Array<{ status: DeliveryStatus; next: string | null }>,
    createdAt: Map<string, Date>,
  ): void {
    batch.forEach(({ claim, outcome }, i) => {
      const fields = {
        deliveryId: claim.deliveryId,
        endpointId: claim.endpointId,
        event: claim.event,
        attempt: claim.attempt,
        errorKind: outcome.errorKind,
        statusCode: outcome.statusCode,
        durationMs: outcome.durationMs,
        status: deliveries[i].status,
        nextAttemptAt: deliveries[i].next,
        // (the operator's detail of a refusal, which the record names by its class only)
        ...(outcome.detail !== undefined && { detail: outcome.detail }),
      };
      if (outcome.ok) this.logger.debug(fields, 'webhook delivery accepted');
      else
        this.logger.warn(
          fields,
          deliveries[i].status === 'failed'
            ? 'webhook delivery attempt failed; no retries left'
            : 'webhook delivery attempt failed',
        );
      this.metrics?.deliveryAttempts.inc({
        outcome: outcome.ok ? 'accepted' : 'failed',
        error_kind: outcome.errorKind ?? 'none',
      });
      const queuedAt = createdAt.get(claim.deliveryId);
      if (outcome.ok && queuedAt) {
        this.metrics?.deliveryLag.observe(
          Math.max(0, outcome.startedAt.getTime() + outcome.durationMs - queuedAt.getTime()) / 1000,
        );
      }
    });
  }

  /**
   * Listens for the delivery channel's notifications. Without them polling alone still sends everything, only up to
   * a poll interval later; a lost or refused connection is tried again with backoff for as long as the loop runs.
   */
  private async listen(): Promise<void> {
    const connection = (this.db.client as { config: { connection: string | pg.ClientConfig } }).config.connection;
    const client = new pg.Client(connection);
    client.on('notification', () => this.wake(true));
    client.on('error', (err) => this.listenerLost(client, err));
    client.on('end', () => this.listenerLost(client, new Error('Connection terminated')));
    try {
      await client.connect();
      await client.query(`LISTEN ${DELIVERY_CHANNEL}`);
      this.listener = client;
      this.listenFailures = 0;
      this.listenOutage.succeeded();
      // what was notified while no one listened
      this.wake(true);
    } catch (err) {
      await client.end().catch(() => undefined);
      this.listenAgain(err);
    }
  }

  private listenerLost(client: pg.Client, err: Error): void {
    if (this.listener !== client) return; // already handled, or never in service (or ended by stop())
    this.listener = undefined;
    void client.end().catch(() => undefined);
    this.listenAgain(err);
  }

  private listenAgain(err: unknown): void {
    if (this.stopping || !this.busy) return;
    const wait = backoffMs(++this.listenFailures, this.pollIntervalMs, MAX_LISTEN_BACKOFF_MS);
    this.listenOutage.failed(err, wait);
    setTimeout(() => {
      if (!this.stopping && this.busy && !this.listener) void this.listen();
    }, wait).unref();
  }
}
