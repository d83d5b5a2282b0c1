import crypto from 'node:crypto';
import { expect } from 'chai';
import YAML from 'yaml';
import type { Ajv2020 } from 'ajv/dist/2020.js';
import {
  createSchemaAjv,
  loadOpenApiDocument,
  schemaRef,
  strictOpenApiDocument,
  webhookPayloadSchemas,
} from '../../src/contract/document.js';

// The description's event list, copied here on purpose: the document must match it, not the other way round.
const DESCRIPTION_EVENTS = [
  'booking.confirmed',
  'booking.completed',
  'booking.delivery_due',
  'booking.return_due',
  'booking.extended',
  'booking.ending_soon',
  'payment.captured',
  'payment.refunded',
  'payment.deposit_held',
  'payment.canceled',
  'invoice.issued',
  'invoice.due_soon',
  'invoice.overdue',
  'installment.due_soon',
  'installment.overdue',
  'fine.created',
  'quote.sent',
  'quote.viewed',
  'quote.accepted',
  'quote.declined',
  'quote.expired',
  'lead.created',
  'deal.created',
  'deal.stage_changed',
  'vehicle.maintenance_due',
  'vehicle.document_expiring',
  'vehicle.idle',
  'delivery.assigned',
  'task.assigned',
  'task.due_soon',
  'task.overdue',
  'inbox.message_received',
  'inbox.assigned',
  'investor.payout_ready',
  'investor.payout_generated',
  'investor.report_due',
  'document.esign_timeout',
  'integration.failed',
];
const CALENDAR_EVENTS = [
  'invoice.issued',
  'invoice.due_soon',
  'invoice.overdue',
  'installment.due_soon',
  'installment.overdue',
  'booking.ending_soon',
  'booking.extended',
  'fine.created',
  'vehicle.document_expiring',
];

const document = loadOpenApiDocument();
const strict = strictOpenApiDocument();
const randomUuid = crypto.randomUUID();
const ajv = createSchemaAjv({ allErrors: true });
type Json = Record<string, unknown>;

function resolve(node: Json): Json {
  let current = node;
  while (typeof current.$ref === 'string') {
    const [, ...parts] = current.$ref.split('/');
    current = parts.reduce<Json>((acc, part) => acc[part] as Json, document as unknown as Json);
  }
  return current;
}

/** Every (schema, example) pair in the document: media types, parameters, headers and schemas' own examples. */
function examplePairs(): Array<{ where: string; schema: Json; example: unknown }> {
  const pairs: Array<{ where: string; schema: Json; example: unknown }> = [];
  const visit = (node: unknown, where: string): void => {
    if (Array.isArray(node)) return node.forEach((child, i) => visit(child, `${where}/${i}`));
    if (!node || typeof node !== 'object') return;
    const obj = node as Json;
    if (obj.schema && typeof obj.schema === 'object') {
      const schema = obj.schema as Json;
      if ('example' in obj) pairs.push({ where, schema, example: obj.example });
      for (const [name, ex] of Object.entries((obj.examples ?? {}) as Record<string, Json>)) {
        pairs.push({ where: `${where}/examples/${name}`, schema, example: resolve(ex).value });
      }
    }
    for (const [key, child] of Object.entries(obj)) {
      if (key === 'example' || key === 'examples') continue;
      visit(child, `${where}/${key}`);
    }
  };
  visit(document.paths, '#/paths');
  visit(document.webhooks, '#/webhooks');
  visit(document.components.parameters, '#/components/parameters');
  visit(document.components.headers, '#/components/headers');
  visit(document.components.responses, '#/components/responses');
  for (const [name, schema] of Object.entries(document.components.schemas as Record<string, Json>)) {
    if ('example' in schema)
      pairs.push({
        where: `#/components/schemas/${name}`,
        schema: { $ref: `#/components/schemas/${name}` },
        example: schema.example,
      });
  }
  return pairs;
}

function validatorFor(schema: Json) {
  const ref = typeof schema.$ref === 'string' ? schema.$ref.match(/^#\/components\/schemas\/(\w+)$/)?.[1] : undefined;
  if (ref) return ajv.getSchema(schemaRef(ref))!;
  return ajv.compile(JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', `"${schemaRef('')}`)));
}

describe('the OpenAPI document', () => {
  it('is OpenAPI 3.1.0 at version 1.0.0', () => {
    expect(document.openapi).to.equal('3.1.0');
    expect(document.info.version).to.equal('1.0.0');
  });

  it('has the fifteen operations, each with an operationId', () => {
    const operations = Object.entries(document.paths).flatMap(([p, item]) =>
      Object.entries(item).map(([method, op]) => `${method.toUpperCase()} ${p} ${op.operationId}`),
    );
    expect(operations.sort()).to.deep.equal([
      'GET /healthz getHealth',
      'GET /readyz getReadiness',
      'GET /v1/bookings/summary getBookingSummary',
      'GET /v1/events listEvents',
      'GET /v1/finance/overview getFinanceOverview',
      'GET /v1/fleet/summary getFleetSummary',
      'GET /v1/fleets listFleets',
      'GET /v1/me getMe',
      'GET /v1/operations/today getOperationsToday',
      'GET /v1/receivables getReceivables',
      'GET /v1/vehicles searchVehicles',
      'GET /v1/webhooks listWebhookEndpoints',
      'GET /v1/webhooks/{id}/deliveries listWebhookDeliveries',
      'GET /v1/webhooks/{id}/deliveries/{deliveryId} getWebhookDelivery',
      'POST /v1/webhooks/{id}/test sendTestDelivery',
    ]);
  });

  it('lists the outage and overload answer, 503 unavailable or overloaded with Retry-After, on every operation that needs the database', () => {
    // Every operation behind an API key reads the database (the key itself is looked up there); /healthz never does,
    // and /readyz answers its own 503 not_ready.
    const needing = Object.entries(document.paths).flatMap(([p, item]) =>
      Object.entries(item)
        .filter(([, op]) => (op as { security?: unknown[] }).security?.length !== 0)
        .map(([method, op]) => [`${method.toUpperCase()} ${p}`, op] as const),
    );
    expect(needing.map(([name]) => name)).to.have.length(13);
    for (const [name, op] of needing) {
      const unavailable = resolve((op as { responses: Json }).responses['503'] as Json);
      expect(unavailable, name).to.deep.equal(resolve({ $ref: '#/components/responses/ServiceUnavailable' }));
    }
    const response = resolve({ $ref: '#/components/responses/ServiceUnavailable' }) as { headers: Json };
    expect(resolve(response.headers['Retry-After'] as Json)).to.include({ required: true });
    expect(
      ((document.components.schemas.ErrorResponse as Json).properties as { error: { properties: { code: Json } } })
        .error.properties.code['x-extensible-enum'],
    ).to.include.members(['unavailable', 'overloaded']);
    const examples = (
      (response as unknown as { content: Json }).content['application/json'] as {
        examples: Record<string, { value: { error: { code: string } } }>;
      }
    ).examples;
    expect(Object.values(examples).map((e) => e.value.error.code)).to.deep.equal(['unavailable', 'overloaded']);
  });

  it('lists the rate limits on every operation: 429 with Retry-After, and where the caller stands on every answer', () => {
    for (const [p, item] of Object.entries(document.paths)) {
      for (const [method, op] of Object.entries(item)) {
        const responses = (op as { responses: Record<string, Json> }).responses;
        const name = `${method.toUpperCase()} ${p}`;
        for (const [status, response] of Object.entries(responses).filter(([status]) => /^[24]/.test(status))) {
          const headers = resolve(response).headers as Json;
          expect(Object.keys(headers), `${name} ${status}`).to.include.members(['RateLimit', 'RateLimit-Policy']);
        }
        if (!p.startsWith('/v1/')) continue;
        const limited = resolve(responses['429']) as { headers: Json };
        expect(Object.keys(limited.headers), name).to.include.members(['Retry-After', 'RateLimit', 'RateLimit-Policy']);
      }
    }
  });

  it('has a valid example for every response, parameter, header, payload and schema example', () => {
    const pairs = examplePairs();
    // Every media type of every response and payload has an example: 16 success examples (vehicles has two),
    // 12 shared error examples (503 has two: unavailable and overloaded) and the event feed's own 400, 39 payloads; plus
    // parameters, headers and schemas.
    const mediaTypes = pairs.filter(
      (p) => p.where.includes('/content/application~1json') || p.where.includes('/content/application/json'),
    );
    expect(mediaTypes.length).to.equal(16 + 13 + 39);
    const failures = pairs.flatMap(({ where, schema, example }) => {
      const validate = validatorFor(schema);
      return validate(example) ? [] : [`${where}: ${ajv.errorsText(validate.errors)}`];
    });
    expect(failures).to.deep.equal([]);
  });

  it('a broken example is caught by the same check', () => {
    const validate = ajv.getSchema(schemaRef('FleetSummary'))!;
    const example = resolve(document.paths['/v1/fleet/summary'].get.responses['200'] as Json) as Json;
    const good = ((example.content as Json)['application/json'] as Json).example as Json;
    expect(validate(good)).to.equal(true);
    expect(validate({ ...good, utilization: 1.5 })).to.equal(false);
    expect(validate({ ...good, extra: 1 })).to.equal(false);
  });

  it("lists exactly the description's 38 events plus webhook.test", () => {
    expect(DESCRIPTION_EVENTS).to.have.length(38);
    expect(Object.keys(document.webhooks).sort()).to.deep.equal([...DESCRIPTION_EVENTS, 'webhook.test'].sort());
    const subscribable = (document.components.schemas.EventName as { 'x-extensible-enum': string[] })[
      'x-extensible-enum'
    ];
    expect([...subscribable].sort()).to.deep.equal([...DESCRIPTION_EVENTS].sort());
  });

  it('gives every payload the envelope, with event as a const and dedupeKey on the calendar events', () => {
    const schemas = document.components.schemas as Record<string, Json>;
    for (const [event, name] of webhookPayloadSchemas(document)) {
      const schema = schemas[name];
      const properties = schema.properties as Record<string, Json>;
      expect(properties.event.const, event).to.equal(event);
      // Open as published, closed in the strict variant the tests validate against.
      expect(schema.additionalProperties, event).to.equal(undefined);
      expect((strict.components.schemas[name] as Json).additionalProperties, event).to.equal(false);
      const withKey = CALENDAR_EVENTS.includes(event) || event === 'integration.failed';
      expect(schema.required, event).to.include.members(['id', 'event', 'createdAt', 'data']);
      expect((schema.required as string[]).includes('dedupeKey'), event).to.equal(withKey);
    }
  });

  it('is open to additions as published, and exact in its strict variant', () => {
    const published = createSchemaAjv({ allErrors: true }, 'published');
    const check = (instance: Ajv2020, name: string, value: unknown) => instance.getSchema(schemaRef(name))!(value);
    const example = (event: string) =>
      structuredClone(
        (document.webhooks[event].post.requestBody!.content['application/json'] as unknown as { example: Json })
          .example,
      );

    // A payload with a field added later (at the top and in data), and an endpoint subscribed to an event added later.
    const payload = example('booking.confirmed');
    const added = { ...payload, source: 'mobile', data: { ...(payload.data as Json), channel: 'walk-in' } };
    const endpoints = {
      rows: [
        {
          id: randomUuid,
          name: 'Ops',
          url: 'https://hooks.example.ae/f',
          events: ['booking.no_show'],
          isActive: true,
          disabledAt: null,
          disabledReason: null,
          lastSuccessAt: null,
          consecutiveFailures: 0,
          signatureScheme: 'hmac-sha256',
          publicKey: null,
          previousSchemeExpiresAt: null,
          rateLimit: null,
          throttledUntil: null,
        },
      ],
    };
    const teapot = { error: { code: 'teapot', message: 'A code added later.', requestId: 'req_1' } };
    for (const [name, value] of [
      ['BookingConfirmedEvent', payload],
      ['WebhookEndpointList', { ...endpoints, rows: [{ ...endpoints.rows[0], events: ['booking.confirmed'] }] }],
    ] as const) {
      expect(check(published, name, value), `${name} as it is today, published`).to.equal(true);
      expect(check(ajv, name, value), `${name} as it is today, strict`).to.equal(true);
    }
    for (const [name, value] of [
      ['BookingConfirmedEvent', added],
      ['WebhookEndpointList', endpoints],
      ['ErrorResponse', teapot],
    ] as const) {
      expect(check(published, name, value), `${name} with an addition, published`).to.equal(true);
      expect(check(ajv, name, value), `${name} with an addition, strict`).to.equal(false);
    }
  });

  it('keeps the data fields the description lists for the calendar events and integration.failed', () => {
    const dataOf = (event: string) => {
      const envelope = (document.components.schemas as Record<string, Json>)[
        webhookPayloadSchemas(document).get(event)!
      ];
      const data = resolve((envelope.properties as Record<string, Json>).data);
      return Object.keys(data.properties as Json).sort();
    };
    const invoiceIssued = [
      'invoiceId',
      'number',
      'purpose',
      'issueDate',
      'dueDate',
      'total',
      'balance',
      'customer',
      'booking',
      'vehicle',
      'fleet',
    ];
    const installmentDueSoon = [
      'installmentId',
      'bookingId',
      'bookingNumber',
      'number',
      'of',
      'dueDate',
      'amount',
      'invoice',
      'customer',
      'vehicle',
      'fleet',
      'daysToDue',
    ];
    const endingSoon = [
      'bookingId',
      'number',
      'type',
      'pickupAt',
      'dropoffAt',
      'originalDropoffAt',
      'extensionsCount',
      'monthlyAmount',
      'customer',
      'vehicle',
      'fleet',
      'daysLeft',
    ];
    expect(dataOf('invoice.issued')).to.deep.equal([...invoiceIssued].sort());
    expect(dataOf('invoice.due_soon')).to.deep.equal([...invoiceIssued, 'daysToDue'].sort());
    expect(dataOf('invoice.overdue')).to.deep.equal([...invoiceIssued, 'daysOverdue'].sort());
    expect(dataOf('installment.due_soon')).to.deep.equal([...installmentDueSoon].sort());
    expect(dataOf('installment.overdue')).to.deep.equal([...installmentDueSoon, 'daysOverdue'].sort());
    expect(dataOf('booking.ending_soon')).to.deep.equal([...endingSoon].sort());
    expect(dataOf('booking.extended')).to.deep.equal([...endingSoon, 'addedDays', 'extensionAmount'].sort());
    expect(dataOf('fine.created')).to.deep.equal(
      [
        'fineId',
        'kind',
        'type',
        'date',
        'amount',
        'authority',
        'violation',
        'number',
        'status',
        'customer',
        'booking',
        'vehicle',
        'fleet',
      ].sort(),
    );
    expect(dataOf('vehicle.document_expiring')).to.deep.equal(
      ['vehicleId', 'plate', 'make', 'model', 'docType', 'detail', 'expiresAt', 'daysLeft', 'fleet'].sort(),
    );
    expect(dataOf('integration.failed')).to.deep.equal(['integration', 'detail', 'hint', 'failingSince'].sort());
    expect(dataOf('booking.confirmed')).to.include.members([
      'bookingId',
      'customerId',
      'vehicleId',
      'fleet',
      'vehicle',
    ]);
  });

  it('never puts a phone, e-mail or identity document in a schema the API or a webhook returns', () => {
    const text = JSON.stringify({
      paths: document.paths,
      webhooks: document.webhooks,
      components: document.components,
    });
    expect(text).not.to.match(/"(phone|email|e-mail|idDocument|id_document)"\s*:/i);
  });

  it('types every money amount as an int64 integer', () => {
    const schemas = document.components.schemas as Record<string, Json>;
    expect(schemas.Fils).to.include({ type: 'integer', format: 'int64', minimum: 0 });
    expect(schemas.SignedFils).to.include({ type: 'integer', format: 'int64' });
    // No schema anywhere uses a decimal number except utilization.
    const numbers: string[] = [];
    const visit = (node: unknown, where: string): void => {
      if (Array.isArray(node)) return node.forEach((c, i) => visit(c, `${where}/${i}`));
      if (!node || typeof node !== 'object') return;
      const obj = node as Json;
      if (obj.type === 'number') numbers.push(where);
      for (const [k, v] of Object.entries(obj)) visit(v, `${where}/${k}`);
    };
    visit(schemas, '#/components/schemas');
    expect(numbers).to.deep.equal(['#/components/schemas/FleetSummary/properties/utilization']);
  });
});

describe('the signing example in the document', () => {
  it('recomputes to the header value the description shows', () => {
    const text = document.info.description;
    const secret = text.match(/- secret: `(whsec_[0-9A-Za-z]+)`/)![1];
    const body = text.match(/- body \(exact bytes, no trailing newline\):\n\s+`(.+)`\n/)![1];
    const timestamp = text.match(/- timestamp: `(\d+)`/)![1];
    const header = text.match(/service-signature: (t=\d+,v1=[0-9a-f]{64})`/)![1];
    const digest = crypto.createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex');
    expect(header).to.equal(`t=${timestamp},v1=${digest}`);
    // The example body is itself a valid webhook.test payload.
    expect(ajv.getSchema(schemaRef('WebhookTestEvent'))!(JSON.parse(body))).to.equal(true);
    expect(new Date(Number(timestamp) * 1000).toISOString()).to.equal('2026-11-22T08:30:01.000Z');
  });

  it('is the document as served: the YAML parses to the committed generated/openapi.json', async () => {
    const fs = await import('node:fs');
    const json = JSON.parse(fs.readFileSync(new URL('../../generated/openapi.json', import.meta.url), 'utf8'));
    const yaml = YAML.parse(fs.readFileSync(new URL('../../openapi/openapi.yaml', import.meta.url), 'utf8'));
    expect(json).to.deep.equal(yaml);
  });
});
