import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import pino from 'pino';
import { loadOpenApiDocument } from '../../src/contract/document.js';
import { createWorkspace } from '../../src/core/workspaces.js';
import { createEndpoint } from '../../src/core/webhooks/endpoints.js';
import { Dispatcher, type DispatcherOptions } from '../../src/webhooks/dispatcher.js';
import { testDatabase } from '../support/database.js';
import { idOf, operator } from '../support/actors.js';
import { processConfig } from '../../src/config.js';

// Shared set-up of the webhook delivery tests: a workspace of their own, endpoints, example event data from the
// document, and dispatchers restricted to the test's workspaces (the test database is shared with other suites).

export interface TestEndpoint {
  id: string;
  url: string;
  secret: string;
}

export interface TestWorkspace {
  id: string;
  slug: string;
  endpoint(options: { url: string; events?: string[]; active?: boolean }): Promise<TestEndpoint>;
  dispatcher(options?: Omit<DispatcherOptions, 'db' | 'logger' | 'workspaceIds'>): Dispatcher;
}

const workspaces: string[] = [];

export const quietLogger = () => pino({ level: 'silent' });

export async function webhookWorkspace(db: Knex): Promise<TestWorkspace> {
  // Dispatchers connect as the worker's database role (src/db/roles.ts), as in production.
  const workerDb = (await testDatabase()).forRole('worker');
  const slug = `wh-${randomUUID().slice(0, 12)}`;
  const { id } = await createWorkspace(db, operator, { slug });
  workspaces.push(id);
  return {
    id,
    slug,
    async endpoint({ url, events, active = true }) {
      const created = await createEndpoint(db, operator, {
        workspaceId: await idOf(db, slug),
        url,
        events,
        policy: processConfig().destinationPolicy,
      });
      if (!active)
        await db('webhook_endpoints')
          .where({ id: created.id })
          .update({ is_active: false, disabled_at: db.fn.now(), disabled_reason: 'manual' });
      return { id: created.id, url: created.url, secret: created.secret };
    },
    // (retries without jitter, so that tests work their instants out exactly; a jitter test passes its own `random`)
    dispatcher: (options = {}) =>
      new Dispatcher({ db: workerDb, logger: quietLogger(), workspaceIds: [id], random: () => 0, ...options }),
  };
}

/** Deletes the workspaces the tests made (with their events and deliveries), so no other suite's sweep meets them. */
export async function dropTestWorkspaces(db: Knex): Promise<void> {
  await db('workspaces').whereIn('id', workspaces.splice(0)).delete();
}

/** The document's example payload of an event (valid by the contract tests). */
export function examplePayload(event: string): { data: unknown; dedupeKey?: string } {
  const content = loadOpenApiDocument().webhooks[event].post.requestBody!.content['application/json'] as {
    example?: { data: unknown; dedupeKey?: string };
  };
  const { data, dedupeKey } = content.example!;
  return { data: structuredClone(data), dedupeKey };
}

export function bookingConfirmedData(): Record<string, unknown> {
  return examplePayload('booking.confirmed').data as Record<string, unknown>;
}

export async function delivery(db: Knex, id: string) {
  return db('deliveries').where({ id }).first();
}

export async function endpointRow(db: Knex, id: string) {
  return db('webhook_endpoints').where({ id }).first();
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` until it returns a truthy value or the time is up. */
export async function eventually<T>(check: () => Promise<T>, timeoutMs = 10_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

export interface BuiltDelivery {
  id: string;
  body: string;
}

/** Inserts (by hand, with fixed times) an event and its delivery to `endpoint` as given; the body is the payload as the fan-out writes it. */
export async function buildDelivery(
  db: Knex,
  ws: TestWorkspace,
  endpoint: TestEndpoint,
  d: {
    event?: string;
    status: 'queued' | 'retrying' | 'accepted' | 'failed' | 'held';
    createdAt: string;
    attempts?: number;
    nextAttemptAt?: string | null;
    lastStatusCode?: number | null;
    lastError?: string | null;
    id?: string;
  },
): Promise<BuiltDelivery> {
  const event = d.event ?? 'booking.confirmed';
  // A payload as the document declares it for the event (its example), so the delivery log shows a valid one.
  const { data, dedupeKey } = examplePayload(event);
  const [{ id: eventId }] = await db('events')
    .insert({ workspace_id: ws.id, event, data, source: 'publish', created_at: d.createdAt })
    .returning('id');
  const id = d.id ?? randomUUID();
  const body = JSON.stringify({
    id,
    event,
    createdAt: new Date(d.createdAt).toISOString(),
    ...(dedupeKey ? { dedupeKey } : {}),
    data,
  });
  const pending = d.status === 'queued' || d.status === 'retrying';
  await db('deliveries').insert({
    id,
    workspace_id: ws.id,
    event_id: eventId,
    endpoint_id: endpoint.id,
    event,
    body,
    status: d.status,
    attempts: d.attempts ?? 0,
    next_attempt_at: pending ? (d.nextAttemptAt ?? d.createdAt) : null,
    last_status_code: d.lastStatusCode ?? null,
    last_error: d.lastError ?? null,
    created_at: d.createdAt,
  });
  return { id, body };
}

export async function buildAttempt(
  db: Knex,
  endpoint: TestEndpoint,
  deliveryId: string,
  a: {
    number: number;
    startedAt: string;
    durationMs: number;
    statusCode: number | null;
    errorKind: string | null;
    error: string | null;
    responseBody: string | null;
  },
): Promise<void> {
  await db('delivery_attempts').insert({
    delivery_id: deliveryId,
    endpoint_id: endpoint.id,
    number: a.number,
    started_at: a.startedAt,
    duration_ms: a.durationMs,
    status_code: a.statusCode,
    error_kind: a.errorKind,
    error: a.error,
    response_body: a.responseBody,
  });
}
