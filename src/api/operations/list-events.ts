import { eventFeed, feedEvents, type EventFeedPage, type EventPosition } from '../../webhooks/event-feed.js';
import type { CursorBinding } from '../../http/cursors.js';
import { invalidRequest } from '../../http/error-catalogue.js';
import type { EventWatch } from '../event-arrivals.js';
import { UNHEARD_WAIT_MS } from '../event-arrivals.js';
import { ok, type Handler, type OperationContext } from '../operation.js';

// GET /v1/events: the workspace's events, oldest first, each as the payload a receiver gets; with `wait`, a request
// with nothing to read is held until an event arrives (long polling). No ETag: a feed read by its cursor has nothing
// to revalidate, and a long poll must never be answered from a cache or with a 304 (its answer is built every time,
// on the primary: the answer cache and the read replicas are for tagged answers only).

/**
 * How soon a waiting request reads again after an announcement that it could not read yet: an older transaction still
 * running (of any workspace: src/webhooks/event-feed.ts) holds the event back. First soon (a short overlap), then every
 * HELD_BACK_REREAD_MS until the event can be read or the wait ends, so that it is answered within about a second of
 * that transaction ending (which announces nothing of this workspace).
 */
const HELD_BACK_FIRST_RECHECK_MS = 250;
const HELD_BACK_REREAD_MS = 1000;

/** The `types` asked for, each once, in the catalogue's order; every one is of the feed (the document's enum). */
function readTypes(types: string[] | undefined): string[] | undefined {
  if (types === undefined) return undefined;
  const known = feedEvents();
  const unknown = types.find((type) => !known.includes(type));
  if (unknown !== undefined)
    throw invalidRequest(
      'types',
      `Query parameter "types" names "${unknown.slice(0, 64)}", which is not an event of the feed; see the webhooks of /openapi.json (webhook.test is not in the feed).`,
    );
  return known.filter((event) => types.includes(event));
}

/**
 * The page, read again as events arrive until there is one to answer, the wait is over, or the client is gone. Each
 * read goes on from the previous one's `next` (past the events it read and left out), so a wait never reads the same
 * positions twice; a read that stopped at its scan limit (hasMore) is answered at once, even empty.
 */
async function pageAfterWait(
  c: OperationContext,
  read: (after: EventPosition | undefined) => Promise<EventFeedPage>,
  after: EventPosition | undefined,
  waitMs: number,
): Promise<EventFeedPage> {
  const deadline = Date.now() + waitMs;
  // Watching from before the first read: an event recorded between a read and the wait still ends the wait.
  const watch: EventWatch | undefined = waitMs > 0 ? c.events?.watch(c.caller.workspace.id) : undefined;
  try {
    let rechecks = 0;
    let page = await read(after);
    for (;;) {
      const left = deadline - Date.now();
      if (page.items.length > 0 || page.hasMore || left <= 0 || c.signal.aborted) return page;
      const ms = Math.min(left, heldBackRecheckMs(rechecks) ?? left);
      const end = watch ? await watch.next(ms, c.signal) : await sleep(Math.min(ms, UNHEARD_WAIT_MS), c.signal);
      if (end === 'aborted') return page;
      // once announced, read again every second until the wait ends: what was announced may be held back
      if (end === 'announced' || rechecks > 0) rechecks++;
      page = await read(page.next ?? undefined);
      // the feed closing (the server stops): what there is, read once more, is the answer
      if (end === 'closed') return page;
    }
  } finally {
    watch?.end();
  }
}

/** The wait before the next read after `rechecks` announced reads; undefined: none announced yet (wait it out). */
const heldBackRecheckMs = (rechecks: number): number | undefined =>
  rechecks === 0 ? undefined : rechecks === 1 ? HELD_BACK_FIRST_RECHECK_MS : HELD_BACK_REREAD_MS;

const sleep = (ms: number, signal: AbortSignal): Promise<'timeout' | 'aborted'> =>
  new Promise((resolve) => {
    const done = (end: 'timeout' | 'aborted') => {
      clearTimeout(timer);
      signal.removeEventListener('abort', aborted);
      resolve(end);
    };
    const aborted = () => done('aborted');
    const timer = setTimeout(() => done('timeout'), ms);
    signal.addEventListener('abort', aborted, { once: true });
  });

export const handle: Handler = async (c) => {
  const { caller, query, cursors, db } = c;
  const types = readTypes(query.types as string[] | undefined);
  // Bound: the types filter (a cursor of another filter would skip or repeat events), not limit or wait.
  const binding: CursorBinding = { workspaceId: caller.workspace.id, parameters: [types?.join(',') ?? null] };
  const after =
    query.after === undefined
      ? undefined
      : (cursors.decode('events', binding, query.after as string, 'after') as EventPosition);
  const limit = query.limit as number;
  const page = await pageAfterWait(
    c,
    (from) => eventFeed(db, caller.workspace.id, { types, limit, after: from }),
    after,
    (query.wait as number) * 1000,
  );
  // The items' JSON text as the database built it (the receivers' bytes), never parsed.
  const nextCursor = page.next === null ? 'null' : JSON.stringify(cursors.encode('events', binding, page.next));
  return ok(`{"rows":[${page.items.join(',')}],"nextCursor":${nextCursor},"hasMore":${page.hasMore}}`);
};
