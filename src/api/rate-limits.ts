import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { wholeNumberDefault, type WorkspaceLimitSettings } from '../config.js';
import { rateLimited, standingOf, type Standing } from '../http/standing.js';

// A fair share of the read API. Each workspace, across all its keys, gets a request rate (a quota of requests per
// one-second window) and a number of requests in flight; beyond either the answer is 429 `rate_limited` at once,
// before the operation touches the database. Every /v1 answer tells the caller where it stands, in the IETF
// RateLimit header fields (draft-ietf-httpapi-ratelimit-headers-10): `RateLimit-Policy: "workspace";q=100;w=1` and
// `RateLimit: "workspace";r=42;t=1`.
//
// The counts are per API process, in memory: a shared store would add a database write to every request. With N API
// processes behind a balancer a workspace may reach N times the setting; set FRS_API_RATE_LIMIT to the rate wanted
// for the whole service divided by N (the README says so).

export const RATE_LIMIT_ENV = 'FRS_API_RATE_LIMIT';
export const CONCURRENCY_ENV = 'FRS_API_CONCURRENCY';
/**
 * Requests a second per workspace. A dashboard polling every summary every few seconds makes a few a second, a BI
 * export paging through receivables one at a time some tens: far below.
 */
export const DEFAULT_RATE_LIMIT = wholeNumberDefault(RATE_LIMIT_ENV);
/** Requests in flight per workspace: a dashboard loading its six summaries at once has six. */
export const DEFAULT_CONCURRENCY = wholeNumberDefault(CONCURRENCY_ENV);
const WINDOW_S = 1;
/** 304s a second a workspace may have uncounted, as a multiple of its request rate. */
export const REVALIDATIONS_PER_REQUEST = 10;

export type { WorkspaceLimitSettings };

export interface Admission {
  /** Ends the request's share of the concurrency limit (call once, when the answer is made). */
  release(): void;
  /** The workspace's standing with the rate limit, for the answer's header fields; none when it is off. */
  standing: Standing | undefined;
  /**
   * Gives the request's share of the rate back (its standing updated) for a conditional GET answered 304, which cost
   * the service one look-up: as GitHub does, a 304 is not counted against the workspace's quota, up to
   * REVALIDATIONS_PER_REQUEST times the quota a second; beyond that a 304 counts like any request (it is not free: a
   * client revalidating in a loop still meets the limit).
   */
  revalidated(): Promise<void>;
}

export class WorkspaceLimits {
  private readonly rate: RateLimiterMemory | undefined;
  private readonly revalidations: RateLimiterMemory | undefined;
  private readonly inFlight = new Map<string, number>();

  constructor(private readonly settings: WorkspaceLimitSettings) {
    if (settings.ratePerSecond > 0) {
      this.rate = new RateLimiterMemory({ points: settings.ratePerSecond, duration: WINDOW_S });
      this.revalidations = new RateLimiterMemory({
        points: settings.ratePerSecond * REVALIDATIONS_PER_REQUEST,
        duration: WINDOW_S,
      });
    }
  }

  /** The workspace's standing without using any of it (an answer refused before admission still says it). */
  async standing(workspaceId: string): Promise<Standing | undefined> {
    if (!this.rate) return undefined;
    return standingOf('workspace', this.settings.ratePerSecond, WINDOW_S, await this.rate.get(workspaceId));
  }

  /** Admits one request of the workspace, or throws the 429 (which takes no share of the concurrency limit). */
  async admit(workspaceId: string): Promise<Admission> {
    const { concurrency, ratePerSecond } = this.settings;
    const inFlight = this.inFlight.get(workspaceId) ?? 0;
    if (concurrency > 0 && inFlight >= concurrency) {
      throw rateLimited(
        'concurrency',
        `This workspace has ${concurrency} requests in flight, its limit; send the next when one has been answered.`,
        1,
        await this.standing(workspaceId),
      );
    }
    // The slot is taken before the first await: requests that arrive together (pipelined on one socket, or on many)
    // each see the ones before them, instead of all reading the same count and all passing.
    this.inFlight.set(workspaceId, inFlight + 1);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      const left = (this.inFlight.get(workspaceId) ?? 1) - 1;
      if (left > 0) this.inFlight.set(workspaceId, left);
      else this.inFlight.delete(workspaceId);
    };
    let standing: Standing | undefined;
    if (this.rate) {
      try {
        standing = standingOf('workspace', ratePerSecond, WINDOW_S, await this.rate.consume(workspaceId));
      } catch (refused) {
        release(); // a refused request holds no share
        if (!(refused instanceof RateLimiterRes)) throw refused;
        standing = standingOf('workspace', ratePerSecond, WINDOW_S, refused);
        throw rateLimited(
          'rate',
          `This workspace made ${ratePerSecond} requests in the last second, its limit; try again in a second.`,
          standing.resetS,
          standing,
          refused.msBeforeNext,
        );
      }
    }
    const { rate, revalidations } = this;
    const admission: Admission = {
      standing,
      async revalidated() {
        if (!rate || !revalidations || !admission.standing) return;
        try {
          await revalidations.consume(workspaceId);
        } catch (refused) {
          if (refused instanceof RateLimiterRes) return; // beyond the uncounted share: this 304 counts
          throw refused;
        }
        admission.standing = standingOf('workspace', ratePerSecond, WINDOW_S, await rate.reward(workspaceId, 1));
      },
      release,
    };
    return admission;
  }
}
