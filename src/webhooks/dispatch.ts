import { workspacePolicy, type DestinationPolicy } from './destination-policy.js';
import { attemptDelivery, type AttemptOutcome, type AttemptRequest } from './http-attempt.js';

// What the dispatcher's stages hand each other: the claim (claims.ts) gives a PendingDispatch, sending it gives a
// CompletedDispatch, and recording (attempt-records.ts) turns a batch of them into rows. The types live here, below
// every stage, so that no stage imports another's file or the dispatcher's.

/** A claimed delivery, leased to this dispatcher, with its endpoint's signing secrets opened: ready to send. */
export interface PendingDispatch extends AttemptRequest {
  endpointId: string;
  workspaceId: string;
  /** The private ranges the workspace's own setting opens to its endpoints (workspacePolicy). */
  allowedCidrs: string[];
  /** This attempt's number, 1-based. */
  attempt: number;
}

/** A sent delivery and how its attempt went, waiting to be recorded. */
export interface CompletedDispatch {
  claim: PendingDispatch;
  outcome: AttemptOutcome;
  /** The sweep clock when the attempt failed: retries are measured from it. */
  sweepAt: Date;
}

/** What a recorded attempt makes of its delivery. */
export type DeliveryStatus = 'accepted' | 'retrying' | 'failed';

export interface SweepCounts {
  attempted: number;
  accepted: number;
  retrying: number;
  failed: number;
}

export interface SendSettings {
  /** Time-out of one whole HTTP exchange. */
  timeoutMs: number;
  /** The destinations that may be reached, before the workspace's own setting opens more. */
  destinationPolicy: DestinationPolicy;
}

/** The send stage: one HTTP attempt of a claim; `sweepClock` is read once it is over. Never rejects. */
export async function send(
  claim: PendingDispatch,
  settings: SendSettings,
  sweepClock: () => Date,
): Promise<CompletedDispatch> {
  const outcome = await attemptDelivery(claim, {
    timeoutMs: settings.timeoutMs,
    policy: workspacePolicy(settings.destinationPolicy, claim.allowedCidrs),
  });
  return { claim, outcome, sweepAt: sweepClock() };
}
