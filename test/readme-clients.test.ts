import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { ROOT_DIR } from '../src/config.js';
import { loadOpenApiDocument } from '../src/contract/document.js';
import { createApiKey } from '../src/core/workspaces.js';
import { startApi, type TestApi } from './support/api.js';
import { testDatabase } from './support/database.js';
import { fixture } from './support/fixtures.js';
import { idOf, operator } from './support/actors.js';

// The API guide's "Generate a client" section (docs/api.md) as a reader would use it: its hey-api command generates a client from the
// running server's /openapi.json, and its three examples type-check (the hey-api ones here; the openapi-fetch one
// against openapi-typescript's output in `npm run check:openapi-typescript`) and run against that server, printing
// figures worked out by hand: a Patrol out and a Picanto in service (1 of 2 cars out, utilisation 1); Alice owes
// AED 250 of a AED 450 invoice.
const run = promisify(execFile);
const BIN = path.join(ROOT_DIR, 'node_modules', '.bin');

function readmeBlock(language: string, firstLine: RegExp): string {
  const readme = fs.readFileSync(path.join(ROOT_DIR, 'docs', 'api.md'), 'utf8');
  const block = [...readme.matchAll(new RegExp('```' + language + '\\n([\\s\\S]*?)```', 'g'))]
    .map((m) => m[1])
    .find((code) => firstLine.test(code));
  expect(block, `a ${language} block starting ${firstLine}`).to.be.a('string');
  return block!;
}

describe('the API guide (docs/api.md): generating a client', function () {
  this.timeout(120_000);
  let api: TestApi;
  let key: string;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'frs-readme-clients-'));
  // The examples import their libraries as a project of the reader's would: from its node_modules.
  fs.symlinkSync(path.join(ROOT_DIR, 'node_modules'), path.join(dir, 'node_modules'));
  fs.writeFileSync(path.join(dir, 'package.json'), '{"type": "module"}\n');
  after(async () => {
    await api?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const tsx = async (file: string, ...args: string[]) =>
    (
      await run(process.execPath, ['--import', 'tsx', file, ...args], {
        cwd: dir,
        env: { ...process.env, FRS_URL: api.url, FRS_API_KEY: key },
      })
    ).stdout;

  before(async () => {
    const { db } = await testDatabase();
    const f = await fixture(db, { timezone: 'Asia/Dubai' });
    const fleet = await f.fleet({ code: 'DXB', name: 'Dubai Fleet' });
    const patrol = await f.vehicle({
      fleetId: fleet,
      make: 'Nissan',
      model: 'Patrol',
      plate: 'Dubai B 222',
      dailyRate: 60000,
    });
    await f.vehicle({ fleetId: fleet, make: 'Kia', model: 'Picanto', plate: 'Dubai C 333', state: 'in_service' });
    const alice = await f.customer({ name: 'Alice Mansoori' });
    const booking = await f.booking({
      vehicleId: patrol,
      customerId: alice,
      status: 'active',
      pickupAt: '2026-11-20T06:00:00Z',
      dropoffAt: '2026-11-24T06:00:00Z',
      amount: 45000,
    });
    const invoice = await f.invoice({ customerId: alice, bookingId: booking, total: 45000, dueDate: '2026-11-22' });
    await f.payment({ amount: 20000, bookingId: booking, invoiceId: invoice, at: '2026-11-20T06:00:00Z' });
    key = (await createApiKey(db, operator, { workspaceId: await idOf(db, f.slug) })).key;
    api = await startApi({ now: new Date('2026-11-22T08:00:00.000Z') });

    // The guide's command, pointed at this server: npx's package, run from the project's own installed copy.
    const command = readmeBlock('sh', /^npx @hey-api\/openapi-ts /)
      .trim()
      .replace('http://localhost:3000', api.url)
      .split(/\s+/)
      .slice(1);
    const { bin } = JSON.parse(
      fs.readFileSync(path.join(ROOT_DIR, 'node_modules', command[0], 'package.json'), 'utf8'),
    );
    await run(
      path.join(
        ROOT_DIR,
        'node_modules',
        command[0],
        typeof bin === 'string' ? bin : (Object.values(bin)[0] as string),
      ),
      command.slice(1),
      { cwd: dir },
    );
    for (const name of ['fleet-hey-api.ts', 'fleet-openapi-fetch.ts', 'fleet-webhook-types.ts']) {
      fs.writeFileSync(path.join(dir, name), readmeBlock('ts', new RegExp(`^// ${name.replace('.', '\\.')}`)));
    }
  });

  it('hey-api: the generated client and both hey-api examples type-check', async () => {
    expect(fs.existsSync(path.join(dir, 'fleet-client', 'sdk.gen.ts'))).to.equal(true);
    const args = [
      '--noEmit',
      '--strict',
      '--skipLibCheck',
      '--types',
      'node',
      '--target',
      'es2022',
      '--module',
      'esnext',
      '--moduleResolution',
      'bundler',
    ];
    const compiled = await run(path.join(BIN, 'tsc'), [...args, 'fleet-hey-api.ts', 'fleet-webhook-types.ts'], {
      cwd: dir,
    }).catch((err: { stdout: string }) => ({ stdout: err.stdout, failed: true }));
    expect(compiled, compiled.stdout).not.to.have.property('failed');
  });

  it('hey-api: the example prints the fleet and the Patrol', async () => {
    expect(await tsx('fleet-hey-api.ts')).to.equal('1 of 2 cars out, utilisation 1\nDubai B 222: AED 600 a day\n');
  });

  it('openapi-fetch: the example prints what Alice owes', async () => {
    expect(await tsx('fleet-openapi-fetch.ts')).to.equal('Alice Mansoori: AED 250 outstanding\n');
  });

  it("webhook types: the example tells the document's example deliveries apart", async () => {
    const document = loadOpenApiDocument();
    const example = (event: string) =>
      (document.webhooks[event].post.requestBody!.content['application/json'] as unknown as { example: unknown })
        .example;
    const deliveries = ['booking.confirmed', 'invoice.overdue', 'webhook.test'].map(example);
    fs.writeFileSync(
      path.join(dir, 'describe.ts'),
      "import { describeDelivery } from './fleet-webhook-types';\nfor (const d of JSON.parse(process.argv[2])) console.log(describeDelivery(d));\n",
    );
    const [confirmed, overdue] = deliveries as Array<{ data: Record<string, any> }>;
    expect(await tsx('describe.ts', JSON.stringify(deliveries))).to.equal(
      [
        `booking ${confirmed.data.bookingId} confirmed for ${confirmed.data.vehicle.plate}`,
        `invoice ${overdue.data.number} is ${overdue.data.daysOverdue} days overdue`,
        'webhook.test: not handled here, answered 2xx all the same',
        '',
      ].join('\n'),
    );
  });
});
