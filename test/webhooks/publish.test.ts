import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from '../support/database.js';
import { loadOpenApiDocument } from '../../src/contract/document.js';
import {
  eventDefinition,
  eventNames,
  eventsWithDedupeKey,
  subscribableEvents,
  TEST_EVENT,
} from '../../src/webhooks/catalogue.js';
import { fanOutEvents } from '../../src/webhooks/fanout.js';
import { InvalidEventError, recordEvent } from '../../src/webhooks/record-event.js';
import { InputError } from '../../src/errors.js';
import {
  bookingConfirmedData,
  dropTestWorkspaces,
  examplePayload,
  webhookWorkspace,
  type TestWorkspace,
} from './support.js';
import { validators } from '../../src/contract/validators.js';

describe('webhooks: catalogue, publish and fan-out', () => {
  let db: Knex;
  let ws: TestWorkspace;

  before(async () => {
    ({ db } = await testDatabase());
  });
  beforeEach(async () => {
    ws = await webhookWorkspace(db);
  });
  after(() => dropTestWorkspaces(db));

  const deliveriesOf = (eventId: string) => db('deliveries').where({ event_id: eventId }).orderBy('endpoint_id');

  describe('catalogue', () => {
    it("is the document's webhooks section: 38 subscribable events plus webhook.test", () => {
      expect(eventNames()).to.have.members(Object.keys(loadOpenApiDocument().webhooks));
      expect(subscribableEvents()).to.have.length(38).and.not.include(TEST_EVENT);
      expect(eventDefinition('booking.confirmed')!.schema).to.equal('BookingConfirmedEvent');
      expect(eventDefinition('nope.nothing')).to.equal(undefined);
    });

    it('puts dedupeKey on exactly the calendar events and integration.failed', () => {
      expect(eventsWithDedupeKey()).to.have.members([
        'invoice.issued',
        'invoice.due_soon',
        'invoice.overdue',
        'installment.due_soon',
        'installment.overdue',
        'booking.ending_soon',
        'booking.extended',
        'fine.created',
        'vehicle.document_expiring',
        'integration.failed',
      ]);
    });
  });

  describe('recordEvent', () => {
    it('records the event and queues one delivery per subscribed endpoint (empty list = all events)', async () => {
      const all = await ws.endpoint({ url: 'https://a.example/hook' });
      const listed = await ws.endpoint({
        url: 'https://b.example/hook',
        events: ['booking.confirmed', 'payment.captured'],
      });
      await ws.endpoint({ url: 'https://c.example/hook', events: ['payment.captured'] });
      const other = await webhookWorkspace(db);
      await other.endpoint({ url: 'https://d.example/hook' });

      const result = await recordEvent(db, {
        workspaceId: ws.id,
        event: 'booking.confirmed',
        data: bookingConfirmedData(),
        source: 'publish',
      });
      expect(result).to.include({ deliveries: 2, duplicate: false });
      const rows = await deliveriesOf(result.eventId);
      expect(rows.map((r) => r.endpoint_id)).to.have.members([all.id, listed.id]);
      for (const row of rows) {
        expect(row).to.include({ status: 'queued', attempts: 0, event: 'booking.confirmed', workspace_id: ws.id });
        expect(row.next_attempt_at).to.be.an.instanceOf(Date);
      }
      const event = await db('events').where({ id: result.eventId }).first();
      expect(event).to.include({
        workspace_id: ws.id,
        event: 'booking.confirmed',
        source: 'publish',
        dedupe_key: null,
      });
    });

    it('builds the body once, in the order id, event, createdAt, data, with the delivery id as id', async () => {
      await ws.endpoint({ url: 'https://a.example/hook' });
      const { eventId } = await recordEvent(db, {
        workspaceId: ws.id,
        event: 'booking.confirmed',
        data: bookingConfirmedData(),
        source: 'publish',
      });
      const [row] = await deliveriesOf(eventId);
      const event = await db('events').where({ id: eventId }).first();
      const body = JSON.parse(row.body);
      expect(Object.keys(body)).to.deep.equal(['id', 'event', 'createdAt', 'data']);
      expect(body).to.deep.equal({
        id: row.id,
        event: 'booking.confirmed',
        createdAt: event.created_at.toISOString(),
        data: bookingConfirmedData(),
      });
      expect(body.createdAt).to.match(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    });

    it('gives every endpoint its own delivery id', async () => {
      await ws.endpoint({ url: 'https://a.example/hook' });
      await ws.endpoint({ url: 'https://b.example/hook' });
      const { eventId } = await recordEvent(db, {
        workspaceId: ws.id,
        event: 'booking.confirmed',
        data: bookingConfirmedData(),
        source: 'publish',
      });
      const rows = await deliveriesOf(eventId);
      expect(new Set(rows.map((r) => r.id)).size).to.equal(2);
      for (const row of rows) expect(JSON.parse(row.body).id).to.equal(row.id);
    });

    it('records held deliveries, and sends nothing, for a switched-off endpoint', async () => {
      const off = await ws.endpoint({ url: 'https://a.example/hook', active: false });
      const { eventId, deliveries } = await recordEvent(db, {
        workspaceId: ws.id,
        event: 'booking.confirmed',
        data: bookingConfirmedData(),
        source: 'publish',
      });
      expect(deliveries).to.equal(1);
      const [row] = await deliveriesOf(eventId);
      expect(row).to.include({ endpoint_id: off.id, status: 'held', next_attempt_at: null });
    });

    it('refuses invalid data naming the first bad path, and records nothing', async () => {
      await ws.endpoint({ url: 'https://a.example/hook' });
      const cases: Array<[string, unknown, RegExp]> = [
        [
          'booking.confirmed',
          { ...bookingConfirmedData(), bookingId: 'not-a-uuid' },
          /^invalid booking\.confirmed event at \/data\/bookingId: must match format "uuid"$/,
        ],
        [
          'booking.confirmed',
          { ...bookingConfirmedData(), vehicle: undefined },
          /at \/data: must have required property 'vehicle'/,
        ],
        [
          'booking.confirmed',
          { ...bookingConfirmedData(), customerPhone: '+971500000000' },
          /at \/data: must NOT have additional properties \(customerPhone\)/,
        ],
        ['booking.confirmed', 'hello', /at \/data: must be object/],
      ];
      for (const [event, data, message] of cases) {
        let caught: unknown;
        await recordEvent(db, { workspaceId: ws.id, event, data, source: 'publish' }).catch((err) => (caught = err));
        expect(caught, JSON.stringify(data)).to.be.instanceOf(InvalidEventError).and.instanceOf(InputError);
        expect((caught as Error).message).to.match(message);
      }
      expect(await db('events').where({ workspace_id: ws.id })).to.deep.equal([]);
      expect(await db('deliveries').where({ workspace_id: ws.id })).to.deep.equal([]);
    });

    it('refuses unknown events and webhook.test', async () => {
      for (const event of ['booking.teleported', TEST_EVENT]) {
        let caught: unknown;
        await recordEvent(db, { workspaceId: ws.id, event, data: {}, source: 'publish' }).catch(
          (err) => (caught = err),
        );
        expect(caught, event).to.be.instanceOf(InvalidEventError);
        expect((caught as Error).message).to.include(event);
      }
      expect(await db('events').where({ workspace_id: ws.id })).to.deep.equal([]);
    });

    it('needs the dedupeKey on the events whose payload carries one', async () => {
      const { data } = examplePayload('integration.failed');
      let caught: unknown;
      await recordEvent(db, { workspaceId: ws.id, event: 'integration.failed', data, source: 'publish' }).catch(
        (err) => (caught = err),
      );
      expect((caught as Error).message).to.equal(
        `invalid integration.failed event at /: must have required property 'dedupeKey'`,
      );
    });

    it('records a dedupeKey once: a repeat returns the first event and queues nothing', async () => {
      await ws.endpoint({ url: 'https://a.example/hook' });
      const { data, dedupeKey } = examplePayload('integration.failed');
      const first = await recordEvent(db, {
        workspaceId: ws.id,
        event: 'integration.failed',
        data,
        dedupeKey,
        source: 'publish',
      });
      const again = await recordEvent(db, {
        workspaceId: ws.id,
        event: 'integration.failed',
        data,
        dedupeKey,
        source: 'outbox',
      });
      expect(first).to.include({ deliveries: 1, duplicate: false });
      expect(again).to.deep.equal({ eventId: first.eventId, deliveries: 0, duplicate: true });
      expect(await db('deliveries').where({ workspace_id: ws.id })).to.have.length(1);
      const [row] = await deliveriesOf(first.eventId);
      const body = JSON.parse(row.body);
      expect(Object.keys(body)).to.deep.equal(['id', 'event', 'createdAt', 'dedupeKey', 'data']);
      expect(body.dedupeKey).to.equal(dedupeKey);
    });

    it('records one event when the same dedupeKey is published concurrently', async () => {
      await ws.endpoint({ url: 'https://a.example/hook' });
      const { data, dedupeKey } = examplePayload('integration.failed');
      const results = await Promise.all(
        Array.from({ length: 5 }, () =>
          recordEvent(db, { workspaceId: ws.id, event: 'integration.failed', data, dedupeKey, source: 'publish' }),
        ),
      );
      expect(results.filter((r) => !r.duplicate)).to.have.length(1);
      expect(new Set(results.map((r) => r.eventId)).size).to.equal(1);
      expect(await db('deliveries').where({ workspace_id: ws.id })).to.have.length(1);
    });

    it('keeps a dedupeKey of an event without one in its payload out of the body', async () => {
      await ws.endpoint({ url: 'https://a.example/hook' });
      const { eventId } = await recordEvent(db, {
        workspaceId: ws.id,
        event: 'booking.confirmed',
        data: bookingConfirmedData(),
        dedupeKey: 'bk-1',
        source: 'derived',
      });
      const [row] = await deliveriesOf(eventId);
      expect(JSON.parse(row.body)).not.to.have.property('dedupeKey');
      expect(
        (
          await recordEvent(db, {
            workspaceId: ws.id,
            event: 'booking.confirmed',
            data: bookingConfirmedData(),
            dedupeKey: 'bk-1',
            source: 'derived',
          })
        ).duplicate,
      ).to.equal(true);
    });
  });

  describe('fanOutEvents', () => {
    it("creates deliveries for many events in one call, by each event's subscriptions, and never twice", async () => {
      const all = await ws.endpoint({ url: 'https://a.example/hook' });
      const invoices = await ws.endpoint({ url: 'https://b.example/hook', events: ['invoice.overdue'] });
      const off = await ws.endpoint({ url: 'https://c.example/hook', events: ['invoice.overdue'], active: false });
      const overdue = examplePayload('invoice.overdue');
      const idle = examplePayload('vehicle.idle');
      const rows = await db('events')
        .insert([
          {
            workspace_id: ws.id,
            event: 'invoice.overdue',
            data: JSON.stringify(overdue.data),
            dedupe_key: overdue.dedupeKey,
            source: 'calendar',
          },
          { workspace_id: ws.id, event: 'vehicle.idle', data: JSON.stringify(idle.data), source: 'calendar' },
          {
            workspace_id: ws.id,
            event: TEST_EVENT,
            data: JSON.stringify({ endpointId: all.id, message: 'x' }),
            source: 'test',
          },
        ])
        .returning('id');
      const ids = rows.map((r) => r.id);
      expect(await fanOutEvents(db, ids)).to.equal(4);
      expect(await fanOutEvents(db, ids)).to.equal(0);
      const created = await db('deliveries').whereIn('event_id', ids).select('event', 'endpoint_id', 'status');
      expect(created).to.have.deep.members([
        { event: 'invoice.overdue', endpoint_id: all.id, status: 'queued' },
        { event: 'invoice.overdue', endpoint_id: invoices.id, status: 'queued' },
        { event: 'invoice.overdue', endpoint_id: off.id, status: 'held' },
        { event: 'vehicle.idle', endpoint_id: all.id, status: 'queued' },
      ]);
    });
  });

  describe('payloads', () => {
    it('are valid against the document for every event (generated validators), with dedupeKey only where declared', async () => {
      await ws.endpoint({ url: 'https://a.example/hook' });
      for (const event of subscribableEvents()) {
        const { data, dedupeKey } = examplePayload(event);
        const { eventId } = await recordEvent(db, { workspaceId: ws.id, event, data, dedupeKey, source: 'publish' });
        const [row] = await deliveriesOf(eventId);
        const body = JSON.parse(row.body);
        const validate = validators[eventDefinition(event)!.schema];
        expect(validate(body), `${event}: ${JSON.stringify(validate.errors)}`).to.equal(true);
        expect('dedupeKey' in body, event).to.equal(eventDefinition(event)!.hasDedupeKey);
      }
    });

    it('declare no phone number, e-mail address or identity document anywhere', () => {
      const document = loadOpenApiDocument();
      const schemas = document.components.schemas as Record<string, unknown>;
      const forbidden = /phone|e-?mail|mobile|id_?doc|identity|passport|emirates_?id|national_?id|licen[cs]e_?number/i;
      const seen = new Set<string>();
      const names: string[] = [];
      const walk = (node: unknown): void => {
        if (Array.isArray(node)) return node.forEach(walk);
        if (!node || typeof node !== 'object') return;
        const record = node as Record<string, unknown>;
        if (typeof record.$ref === 'string') {
          const name = record.$ref.split('/').pop()!;
          if (!seen.has(name)) {
            seen.add(name);
            walk(schemas[name]);
          }
        }
        if (record.properties && typeof record.properties === 'object') names.push(...Object.keys(record.properties));
        Object.values(record).forEach(walk);
      };
      for (const event of eventNames()) walk({ $ref: `#/components/schemas/${eventDefinition(event)!.schema}` });
      expect(names.length).to.be.greaterThan(100);
      expect(names.filter((n) => forbidden.test(n))).to.deep.equal([]);
    });
  });
});
