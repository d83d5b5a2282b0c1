import crypto from 'node:crypto';
import os from 'node:os';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { recordAttempts, type RecordSettings } from './attempt-records.js';
import { TEST_EVENT } from './catalogue.js';
import { claimDue, releaseClaims, type ClaimSettings } from './claims.js';
import { DeliveryListener } from './delivery-listener.js';
import type { DestinationPolicy } from './destination-policy.js';
import { send, type CompletedDispatch, type PendingDispatch, type SendSettings, type SweepCounts } from './dispatch.js';
import { defaultWorkspaceConcurrency, InFlightShares } from './fairness.js';
import { DEFAULT_ATTEMPT_TIMEOUT_MS } from './http-attempt.js';
import { SweepFailures } from './sweep-failures.js';
import { processConfig } from '../config.js';
import type { ServiceMetrics } from '../observability/metrics.js';
import { isDatabaseUnavailable } from '../db/outage.js';

// The delivery sweep. A dispatcher claims due deliveries (claims.ts: FOR NO KEY UPDATE SKIP LOCKED, then a lease,
// so several processes can run at once and the claims of a killed one are retried once its lease runs out), sends
// each one over HTTP (dispatch.ts), and records finished attempts in batches (attempt-records.ts): one statement
// each for the attempt rows, the deliveries and the endpoints' failure streaks, endpoints locked in id order. This
// class wires the stages together and holds what schedules them: the slots, the ready claims and the flush.

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
  /** The retries' random jitter (0 to 10% of each delay, retry-schedule.ts): a value in [0, 1]. Default Math.random. */
  random?: () => number;
  /** Which destinations may be reached, and how names are resolved. Default: the environment's (FRS_ALLOW_PRIVATE_WEBHOOK_URLS, FRS_WEBHOOK_ALLOWED_CIDRS, FRS_WEBHOOK_DNS_SERVERS), with its egress proxy (FRS_WEBHOOK_PROXY). */
  destinationPolicy?: DestinationPolicy;
}

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
/** Pause before claiming again when another dispatcher was locking some of the due rows. */
const CONTENTION_RETRY_MS = 5;
/**
 * The shortest wait for a throttled endpoint's next token (rate-limits.ts): at the highest rates a claim then takes a
 * few tokens at once rather than one a millisecond (the bucket holds a second's worth, so nothing is lost by it).
 */
const MIN_TOKEN_WAIT_MS = 10;

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class Dispatcher {
  private readonly concurrency: number;
  private readonly perEndpointConcurrency: number;
  private readonly perWorkspaceConcurrency: number;
  /** How long a claim may wait ready: READY_FOR_MS, within what its lease leaves beyond an attempt. */
  private readonly readyForMs: number;
  private readonly pollIntervalMs: number;
  private readonly clock: () => Date;
  /** What each stage works with: the claim, the send and the record. */
  private readonly claiming: ClaimSettings;
  private readonly sending: SendSettings;
  private readonly recording: RecordSettings;
  private readonly listener: DeliveryListener;
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
  private ready: Array<{ claim: PendingDispatch; launchBy: number }> = [];
  /** In flight or ready: what the claim counts, within CLAIM_AHEAD times the limits. */
  private readonly held = new InFlightShares();
  /**
   * Failed attempts not yet recorded, per endpoint. Such an endpoint gets nothing more from the ready claims until
   * they are recorded, so a streak reaching the switch-off is recorded before anything else is sent to it.
   */
  private readonly unrecordedFailures = new Map<string, number>();
  private finished: CompletedDispatch[] = [];
  /** The flush in progress, if any. */
  private flushing: Promise<void> | undefined;
  /** Database failures, their waits and their outage's log lines. */
  private readonly failures: SweepFailures;
  /** A flush failed and its outcomes wait to be recorded: nothing is claimed until they are. */
  private waitingToRecord = false;
  /** Endpoints this process's flushes switched off while a claim was on its way: what it returns for them is not sent. */
  private readonly switchedOffDuringClaim = new Set<string>();
  /** Endpoints this process's flushes throttled while a claim was on its way (etiquette.ts): likewise, tests too. */
  private readonly throttledDuringClaim = new Set<string>();
  /** Leased deliveries this dispatcher will not send (expired, or for an endpoint switched off here): given back before the next claim. */
  private unsent: string[] = [];
  private claimWanted = true;
  private woken = false;
  private wakeUp: (() => void) | undefined;
  private busy = false;
  private stopping = false;
  /** What this instance attempted since start(). */
  readonly totals: SweepCounts = { attempted: 0, accepted: 0, retrying: 0, failed: 0 };
  private loopDone: Promise<void> | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  /** Wakes the loop when a throttled endpoint's bucket has its next token, and when (performance.now()). */
  private tokenTimer: { timer: NodeJS.Timeout; at: number } | undefined;

  constructor(options: DispatcherOptions) {
    const logger = options.logger.child({ component: 'dispatcher' });
    this.concurrency = options.concurrency ?? 64;
    this.perEndpointConcurrency = options.perEndpointConcurrency ?? 8;
    this.perWorkspaceConcurrency = options.perWorkspaceConcurrency ?? defaultWorkspaceConcurrency(this.concurrency);
    const leaseMs = options.leaseMs ?? 60_000;
    const attemptTimeoutMs = options.attemptTimeoutMs ?? DEFAULT_ATTEMPT_TIMEOUT_MS;
    this.pollIntervalMs = Math.min(options.pollIntervalMs ?? 1000, 1000);
    this.clock = options.clock ?? (() => new Date());
    if (!(this.concurrency >= 1 && this.perEndpointConcurrency >= 1 && this.perWorkspaceConcurrency >= 1))
      throw new Error('concurrency limits must be at least 1');
    if (!(leaseMs > attemptTimeoutMs)) throw new Error('leaseMs must be longer than attemptTimeoutMs');
    this.readyForMs = Math.min(READY_FOR_MS, leaseMs - attemptTimeoutMs);
    this.claiming = {
      db: options.db,
      logger,
      owner: this.owner,
      leaseMs,
      perEndpoint: CLAIM_AHEAD * this.perEndpointConcurrency,
      perWorkspace: CLAIM_AHEAD * this.perWorkspaceConcurrency,
      workspaceIds: options.workspaceIds ?? null,
    };
    this.sending = {
      timeoutMs: attemptTimeoutMs,
      destinationPolicy: options.destinationPolicy ?? processConfig().deliveryPolicy,
    };
    this.recording = { db: options.db, logger, metrics: options.metrics, owner: this.owner, random: options.random };
    this.failures = new SweepFailures(logger, this.pollIntervalMs);
    this.listener = new DeliveryListener(options.db, logger, {
      notified: () => this.wake(true),
      wanted: () => !this.stopping && this.busy,
      firstBackoffMs: this.pollIntervalMs,
    });
  }

  /** The time-out of one HTTP exchange, in milliseconds. */
  get attemptTimeout(): number {
    return this.sending.timeoutMs;
  }

  /** Runs continuously: polls at least once a second and is woken by NOTIFY on the delivery channel. */
  async start(): Promise<void> {
    if (this.busy) throw new Error('dispatcher is already running');
    this.busy = true;
    this.stopping = false;
    this.claimWanted = true;
    await this.listener.listen();
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
    this.clearTokenTimer();
    this.wake(false);
    await this.loopDone;
    this.loopDone = undefined;
    await this.listener.stop();
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
    this.failures.reset();
    for (;;) {
      this.startFlush(counts, now);
      if (this.failures.givenUp !== undefined && now !== undefined) await this.giveUp();
      if (this.stopping && this.ready.length > 0) await this.releaseReady();
      if (this.unsent.length > 0) await releaseClaims(this.claiming, this.unsent.splice(0));
      const free = CLAIM_AHEAD * this.concurrency - this.inFlight - this.ready.length;
      // (while outcomes wait to be recorded the flush goes first: a claim could take their deliveries again)
      if (!this.stopping && this.claimWanted && free > 0 && !this.waitingToRecord) {
        this.claimWanted = false;
        if (await this.claimInto(free, now)) continue;
      }
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

  /** A one-off sweep fails after repeated database failures; what is unrecorded is left to its leases. */
  private async giveUp(): Promise<never> {
    this.dropReady();
    this.unsent = [];
    while (this.inFlight > 0 || this.flushing) await this.sleep();
    this.finished = [];
    this.unrecordedFailures.clear();
    throw this.failures.givenUp;
  }

  /**
   * Claims up to `free` deliveries into the ready claims and starts those that fit. True when the loop should claim
   * again at once: something was claimed, others were claiming the same rows, or the claim failed (after its wait).
   */
  private async claimInto(free: number, now: Date | undefined): Promise<boolean> {
    try {
      // (taken before the lease is: its lease lasts at least leaseMs from here)
      const claimedAt = performance.now();
      this.switchedOffDuringClaim.clear();
      this.throttledDuringClaim.clear();
      const { claims, contended, nextTokenInMs } = await claimDue(this.claiming, {
        limit: free,
        now: now ?? this.clock(),
        held: this.held,
      });
      this.failures.answered('claim');
      const launchBy = claimedAt + this.readyForMs;
      for (const claim of claims) {
        this.held.add(claim);
        this.ready.push({ claim, launchBy });
      }
      this.giveBackSwitchedOff(this.switchedOffDuringClaim);
      this.giveBackSwitchedOff(this.throttledDuringClaim, true);
      this.launchReady(now);
      if (nextTokenInMs !== null && now === undefined) this.wakeForTokens(nextTokenInMs);
      if (claims.length === free || contended) this.claimWanted = true;
      // Rows another dispatcher was claiming at that moment are leased (or free again) a moment later.
      if (contended && claims.length < free) await delay(CONTENTION_RETRY_MS);
      return claims.length > 0 || contended;
    } catch (err) {
      const { wait } = this.failures.failed(err, 'claim');
      if (this.failures.givenUp === undefined || now === undefined) {
        await delay(wait);
        this.claimWanted = true;
      }
      return true;
    }
  }

  /**
   * Claims again once a throttled endpoint's bucket has its next token (running continuously only: a one-off sweep
   * takes what the buckets hold when it runs). One timer, for the earliest such time.
   */
  private wakeForTokens(inMs: number): void {
    const wait = Math.max(inMs, MIN_TOKEN_WAIT_MS);
    const at = performance.now() + wait;
    if (this.tokenTimer && this.tokenTimer.at <= at) return;
    this.clearTokenTimer();
    const timer = setTimeout(() => {
      this.tokenTimer = undefined;
      this.wake(true);
    }, wait);
    this.tokenTimer = { timer, at };
  }

  private clearTokenTimer(): void {
    if (this.tokenTimer) clearTimeout(this.tokenTimer.timer);
    this.tokenTimer = undefined;
  }

  /** Records the finished attempts in the background, unless a flush is already running (it starts the next one). */
  private startFlush(counts: SweepCounts, now: Date | undefined): void {
    if (this.flushing || this.finished.length === 0) return;
    const batch = this.finished;
    this.finished = [];
    this.flushing = this.flush(batch, counts, now).finally(() => {
      this.flushing = undefined;
      this.wake(false);
    });
  }

  private async flush(batch: CompletedDispatch[], counts: SweepCounts, now: Date | undefined): Promise<void> {
    try {
      const { statuses, switchedOff, throttledUntil } = await recordAttempts(this.recording, batch);
      for (const status of statuses) counts[status]++;
      counts.attempted += batch.length;
      this.waitingToRecord = false;
      this.failures.answered('flush');
      for (const id of switchedOff) this.switchedOffDuringClaim.add(id);
      this.forgetFailures(batch);
      this.giveBackSwitchedOff(switchedOff);
      // (a throttled endpoint's claims wait in the database, not here: the claim skips it until the throttle ends)
      const sweepNow = now ?? this.clock();
      const throttled = new Set([...throttledUntil].filter(([, until]) => until > sweepNow).map(([id]) => id));
      for (const id of throttled) this.throttledDuringClaim.add(id);
      this.giveBackSwitchedOff(throttled, true);
      this.launchReady(now);
    } catch (err) {
      // Outcomes not yet recorded are kept and recorded on a later try; once given up, their leases run out and
      // those deliveries are attempted again (delivery is at least once). A running sweep keeps them through a
      // database outage, claiming nothing meanwhile (waitingToRecord), so that a short outage sends nothing twice;
      // it gives them up after repeated failures of another kind (a statement that cannot succeed), or when
      // stopping (stop() must not wait for the database). A one-off sweep gives them up after repeated failures.
      const { wait, giveUp } = this.failures.failed(err, 'flush');
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
  }

  private forgetFailures(batch: CompletedDispatch[]): void {
    for (const { claim, outcome } of batch) {
      if (outcome.ok) continue;
      const n = (this.unrecordedFailures.get(claim.endpointId) ?? 1) - 1;
      if (n > 0) this.unrecordedFailures.set(claim.endpointId, n);
      else this.unrecordedFailures.delete(claim.endpointId);
    }
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
   * a switched-off endpoint too), and its lease is given back before the next claim. `andTests`: for an endpoint
   * throttled here, whose test deliveries wait too.
   */
  private giveBackSwitchedOff(endpoints: ReadonlySet<string>, andTests = false): void {
    if (endpoints.size === 0) return;
    this.ready = this.ready.filter(({ claim }) => {
      if (!endpoints.has(claim.endpointId) || (claim.event === TEST_EVENT && !andTests)) return true;
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
    await releaseClaims(this.claiming, ids);
  }

  /** Sends one claim in a free slot; its outcome waits in `finished` for the next flush. */
  private launch(claim: PendingDispatch, now: Date | undefined): void {
    this.inFlight++;
    this.shares.add(claim);
    void send(claim, this.sending, () => now ?? this.clock()).then((completed) => {
      this.finished.push(completed);
      if (!completed.outcome.ok)
        this.unrecordedFailures.set(claim.endpointId, (this.unrecordedFailures.get(claim.endpointId) ?? 0) + 1);
      this.inFlight--;
      this.shares.remove(claim);
      this.held.remove(claim);
      // The freed slot is refilled from what is ready now, without waiting for the database.
      this.launchReady(now);
      this.wake(true);
    });
  }
}
