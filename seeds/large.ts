// A large generated workspace for benchmarks: by default 10,000 vehicles, 50,000 customers, 1,000,000 bookings,
// 1,000,000 invoices and 1,500,000 payments, generated inside PostgreSQL with INSERT ... SELECT over
// generate_series, 50,000 rows a statement, in one transaction (a failed run leaves nothing behind).
//
// The shape follows the demo at scale: bookings over the past three years and the next month, mostly completed,
// a few hundred out now (some late, some due back today), a few thousand confirmed ahead (never two on one car at
// once), pending and canceled ones; invoices mostly paid in full, 3-5% open across every ageing bucket, some void;
// charges linked to their booking and invoice, refunds, declined (canceled) charges, deposits and releases.
//
// Rows are planned first in temporary tables (so later entities can reference earlier ones by sequence number),
// then copied into the real tables chunk by chunk, invoices and bookings with their final paid, collected and
// balance due (bookings also with the copies of their customer and car, customer_json and vehicle_json); the
// rollup triggers leave the workspace alone and its running totals are computed once at the end
// (src/db/bulk-load.ts).
// Pseudo-random choices hash the row's sequence number, so the data set is the same for the same sizes and `now`;
// ids come from gen_random_uuid().
import type { Knex } from 'knex';
import { progressReporter, type ProgressOptions } from '../src/progress.js';
import { deferRollups, finishDeferredRollups } from '../src/db/bulk-load.js';
import { createWorkspace, findWorkspace, type WorkspaceRecord } from '../src/core/workspaces.js';
import { InputError } from '../src/errors.js';
import { cliActor } from '../src/core/audit.js';

export interface LargeSeedOptions extends ProgressOptions {
  vehicles?: number;
  bookings?: number;
  invoices?: number;
  payments?: number;
  customers?: number;
  /** The clock the data is laid out around (default: now). */
  now?: Date;
}

const CHUNK = 50_000;

const TABLES = [
  'owners',
  'fleets',
  'vehicles',
  'maintenance',
  'vehicle_documents',
  'customers',
  'bookings',
  'extensions',
  'invoices',
  'payments',
  'installments',
  'expenses',
  'fines',
  'integrations',
] as const;

function count(name: string, value: number | undefined, fallback: number, min: number): number {
  const n = value ?? fallback;
  if (!Number.isInteger(n) || n < min)
    throw new InputError(`--${name} must be a whole number of at least ${min}, got ${value}`);
  return n;
}

/** Fills `workspaceSlug` (created when missing; it must hold no fleet data yet) and returns the rows per table. */
export async function seedLarge(
  db: Knex,
  workspaceSlug: string,
  options: LargeSeedOptions = {},
): Promise<Record<string, number>> {
  const V = count('vehicles', options.vehicles, 10_000, 1);
  const B = count('bookings', options.bookings, 1_000_000, 0);
  const I = count('invoices', options.invoices, 1_000_000, 0);
  const P = count('payments', options.payments, 1_500_000, 0);
  const C = count('customers', options.customers, 50_000, 1);
  const now = options.now ?? new Date();

  let workspace: WorkspaceRecord;
  try {
    workspace = await findWorkspace(db, workspaceSlug);
  } catch (err) {
    if (!(err instanceof InputError)) throw err;
    workspace = await createWorkspace(db, cliActor(), { slug: workspaceSlug });
  }
  for (const table of ['owners', 'fleets', 'vehicles', 'customers', 'bookings', 'invoices', 'payments']) {
    const row = await db(table).where({ workspace_id: workspace.id }).first(db.raw('1 AS x'));
    if (row) throw new InputError(`workspace "${workspaceSlug}" already holds ${table}; seed a new or empty workspace`);
  }

  // Booking plan: history (completed and canceled, oldest first), then cars out now, confirmed ahead, pending.
  const A = B === 0 ? 0 : Math.min(Math.max(Math.round(B * 0.0004), 3), Math.floor(V / 10), B);
  const CF = Math.min(Math.max(Math.round(B * 0.003), 3), B - A);
  const PD = Math.min(Math.max(Math.round(B * 0.001), 2), B - A - CF);
  const H = B - A - CF - PD;
  const E = Math.max(60, Math.round(B / 10));
  const M = Math.max(10, Math.round(V * 0.3));
  const F = Math.round(B / 100);
  // Cars for confirmed bookings: numbers 5, 15, 25, ... (never in service, never retired, never out now).
  const S = V >= 5 ? Math.floor((V - 5) / 10) + 1 : 0;

  const progress = progressReporter(
    'seed large',
    'row steps',
    V + C + 2 * B + 2 * I + 2 * P + E + M + 2 * V + F,
    options,
  );
  try {
    await db.transaction(async (trx) => {
      const run = async (sql: string, bindings: readonly Knex.RawBinding[] = []) => trx.raw(sql, bindings);
      const rowCount = async (table: string) => Number((await run(`SELECT count(*) AS c FROM ${table}`)).rows[0].c);
      // Memory for the temporary tables; allowed only before the session touches one (else skipped).
      await trx.transaction(async (sp) => sp.raw(`SET LOCAL temp_buffers = '256MB'`)).catch(() => undefined);
      await run(`SET LOCAL work_mem = '128MB'`);
      await run(`SET LOCAL synchronous_commit = off`);
      // The running totals are computed once at the end, not by the triggers chunk by chunk (the rows are written
      // with their final paid, collected and balance due, which the triggers would add to a second time).
      if (!(await deferRollups(trx, workspace.id)))
        throw new InputError(`workspace "${workspaceSlug}" already holds data; seed a new or empty workspace`);

      await run(`CREATE OR REPLACE FUNCTION pg_temp.rnd(n bigint, salt bigint) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE
                 AS $$ SELECT (hashint8extended(n, salt) & 2147483647)::float8 / 2147483648.0 $$`);
      await run(
        `CREATE TEMP TABLE seed_params ON COMMIT DROP AS
         SELECT ?::uuid AS ws, ?::timestamptz AS now, ?::text AS tz, (?::timestamptz AT TIME ZONE ?)::date AS today`,
        [workspace.id, now.toISOString(), workspace.timezone, now.toISOString(), workspace.timezone],
      );
      // local midnight of day d, as an instant
      const midnight = (d: string) => `((${d})::timestamp AT TIME ZONE p.tz)`;

      // ---- owners, fleets
      await run(`
        CREATE TEMP TABLE seed_f ON COMMIT DROP AS
        SELECT f.k, gen_random_uuid() AS owner_id, gen_random_uuid() AS id, f.code, f.name, f.owner, f.emirate, f.codes
        FROM (VALUES
          (0, 'DXB', 'Dubai fleet', 'Desert Falcon Rent A Car LLC', 'Dubai',
             ARRAY['A','B','C','D','F','G','H','I','J','K','L','M','N','P','R','S','T','U','V','W','AA','BB','CC','DD']),
          (1, 'SHJ', 'Sharjah fleet', 'Al Qasba Motors Trading LLC', 'Sharjah', ARRAY['1','2','3']),
          (2, 'AUH', 'Abu Dhabi fleet', 'Saadiyat Mobility Investments', 'Abu Dhabi',
             ARRAY['1','4','5','6','7','8','11','12','13','14','15','16','17'])
        ) AS f(k, code, name, owner, emirate, codes)`);
      await run(
        `INSERT INTO owners (id, workspace_id, name) SELECT owner_id, p.ws, owner FROM seed_f, seed_params p ORDER BY k`,
      );
      await run(
        `INSERT INTO fleets (id, workspace_id, owner_id, code, name) SELECT id, p.ws, owner_id, code, name FROM seed_f, seed_params p ORDER BY k`,
      );

      // ---- vehicles: category by number, model by hash, plate unique by construction
      await run(`
        CREATE TEMP TABLE seed_models ON COMMIT DROP AS
        SELECT category, (row_number() OVER (PARTITION BY category ORDER BY ord) - 1)::int AS idx, make, model, aed,
               count(*) OVER (PARTITION BY category)::int AS models
        FROM (VALUES
          (1, 'economy', 'Nissan', 'Sunny', 120), (2, 'economy', 'Toyota', 'Yaris', 130), (3, 'economy', 'Hyundai', 'Accent', 125),
          (4, 'economy', 'Kia', 'Pegas', 120), (5, 'economy', 'Mitsubishi', 'Attrage', 120), (6, 'economy', 'Chevrolet', 'Spark', 120),
          (7, 'sedan', 'Toyota', 'Camry', 200), (8, 'sedan', 'Honda', 'Accord', 210), (9, 'sedan', 'Hyundai', 'Sonata', 190),
          (10, 'sedan', 'Nissan', 'Altima', 195), (11, 'sedan', 'Kia', 'K5', 185),
          (12, 'suv', 'Kia', 'Sportage', 230), (13, 'suv', 'Toyota', 'RAV4', 250), (14, 'suv', 'Hyundai', 'Tucson', 235),
          (15, 'suv', 'Mitsubishi', 'Pajero', 300), (16, 'suv', 'Nissan', 'Patrol', 550), (17, 'suv', 'Toyota', 'Land Cruiser', 650),
          (18, 'luxury', 'Mercedes-Benz', 'E-Class', 750), (19, 'luxury', 'BMW', '5 Series', 720), (20, 'luxury', 'Mercedes-Benz', 'S-Class', 1300),
          (21, 'luxury', 'Range Rover', 'Vogue', 1500), (22, 'luxury', 'Porsche', 'Cayenne', 1100), (23, 'luxury', 'Cadillac', 'Escalade', 1000),
          (24, 'van', 'Toyota', 'Hiace', 320), (25, 'van', 'Nissan', 'Urvan', 300), (26, 'van', 'Hyundai', 'H-1', 280),
          (27, 'van', 'Mercedes-Benz', 'Sprinter', 450)
        ) AS m(ord, category, make, model, aed)`);
      await run(`
        CREATE TEMP TABLE seed_v ON COMMIT DROP AS
        SELECT g.n, gen_random_uuid() AS id, f.id AS fleet_id, f.emirate || ' ' || f.codes[1 + (g.n / 3) % cardinality(f.codes)] || ' ' ||
                 (10000 + (((g.n / 3) / cardinality(f.codes))::bigint * 7919) % 90000)::text AS plate,
               c.category, m.make, m.model,
               least(150000, greatest(12000, round(m.aed * (0.95 + pg_temp.rnd(g.n, 2) * 0.12) / 5) * 500))::bigint AS rate,
               CASE WHEN g.n % 50 = 7 THEN 'in_service' WHEN g.n % 100 = 13 THEN 'inactive' ELSE 'active' END AS state
        FROM generate_series(1, ${V}) g(n)
        JOIN seed_f f ON f.k = g.n % 3
        CROSS JOIN LATERAL (SELECT CASE WHEN g.n % 20 < 7 THEN 'economy' WHEN g.n % 20 < 12 THEN 'sedan' WHEN g.n % 20 < 17 THEN 'suv'
                                        WHEN g.n % 20 < 19 THEN 'van' ELSE 'luxury' END AS category) c
        JOIN seed_models m ON m.category = c.category
          AND m.idx = floor(pg_temp.rnd(g.n, 1) * (SELECT count(*) FROM seed_models x WHERE x.category = c.category))::int`);
      await run(`ALTER TABLE seed_v ADD PRIMARY KEY (n)`);
      for (let a = 1; a <= V; a += CHUNK) {
        const b = Math.min(V, a + CHUNK - 1);
        await run(`INSERT INTO vehicles (id, workspace_id, fleet_id, make, model, plate, category, daily_rate, state)
                   SELECT id, p.ws, fleet_id, make, model, plate, category, rate, state FROM seed_v, seed_params p
                   WHERE n BETWEEN ${a} AND ${b} ORDER BY n`);
        progress.step('vehicles', b - a + 1);
      }

      // ---- customers
      await run(`
        CREATE TEMP TABLE seed_c ON COMMIT DROP AS
        SELECT g.n, gen_random_uuid() AS id, fn.first || ' ' || ln.last AS name, fn.first AS first, ln.last AS last
        FROM generate_series(1, ${C}) g(n)
        CROSS JOIN LATERAL (SELECT (ARRAY['Ahmed','Mohammed','Fatima','Aisha','Khalid','Mariam','Saeed','Noura','Hamdan','Latifa',
            'Omar','Layla','Youssef','Rania','Tarek','Hiba','Priya','Rahul','Arjun','Ayesha','Imran','Fahad','Sarah','James','Emily',
            'Daniel','Olga','Wei','Maria','Jose','Grace','Ali','Zainab','Kareem','Sofia','Hassan','Reem','Sultan','Amna','Yusuf',
            'Nadia','Vikram','Anjali','Thomas','Hannah','Ivan','Lina','Samir','Dina','Faisal'])[1 + floor(pg_temp.rnd(g.n, 3) * 50)::int] AS first) fn
        CROSS JOIN LATERAL (SELECT (ARRAY['Al Mansoori','Al Hashimi','Al Ketbi','Al Nuaimi','Al Falasi','Al Suwaidi','Al Mazrouei',
            'Al Dhaheri','Al Shamsi','Al Marri','Haddad','Nasser','El Amrani','Khoury','Mansour','Saleh','Nair','Menon','Sharma',
            'Siddiqui','Qureshi','Rahman','Thompson','O''Connor','Clarke','Becker','Ivanova','Chen','Santos','Reyes','Mwangi','Rezaei',
            'Hussain','Abdullah','Rossi','Al Zaabi','Al Kaabi','Al Ameri','Al Blooshi','Al Hammadi','Pillai','Kumar','Patel','Smith',
            'Müller','Petrov','Haddad','Farouk','Aziz','Karimi'])[1 + floor(pg_temp.rnd(g.n, 4) * 50)::int] AS last) ln`);
      await run(`ALTER TABLE seed_c ADD PRIMARY KEY (n)`);
      for (let a = 1; a <= C; a += CHUNK) {
        const b = Math.min(C, a + CHUNK - 1);
        await run(`INSERT INTO customers (id, workspace_id, name, phone, email, id_document)
                   SELECT id, p.ws, name,
                          '+971 5' || (ARRAY['0','2','4','5','6','8'])[1 + n % 6] || ' ' || lpad((100 + (n::bigint * 7919) % 900)::text, 3, '0') || ' ' || lpad(((n::bigint * 104729) % 10000)::text, 4, '0'),
                          lower(regexp_replace(first || '.' || last, '[^A-Za-z.]', '', 'g')) || n || '@example.ae',
                          '784-' || (1960 + n % 45) || '-' || lpad(((n::bigint * 7919) % 10000000)::text, 7, '0') || '-' || (n % 9 + 1)
                   FROM seed_c, seed_params p WHERE n BETWEEN ${a} AND ${b} ORDER BY n`);
        progress.step('customers', b - a + 1);
      }

      // ---- bookings
      await run(`
        CREATE TEMP TABLE seed_b (
          n int PRIMARY KEY, id uuid NOT NULL DEFAULT gen_random_uuid(), customer_id uuid, vehicle_id uuid, rate bigint,
          category text, type text, status text, pickup_at timestamptz, dropoff_at timestamptz, original_dropoff_at timestamptz,
          amount bigint, monthly_amount bigint, confirmed_at timestamptz, returned_at timestamptz
        ) ON COMMIT DROP`);
      // Each segment computes (vehicle number, customer number, type, status, pickup, dropoff, ...) for its range;
      // money follows from the vehicle's rate.
      const planBookings = (segment: string) => `
        INSERT INTO seed_b (n, customer_id, vehicle_id, rate, category, type, status, pickup_at, dropoff_at, original_dropoff_at,
                            amount, monthly_amount, confirmed_at, returned_at)
        SELECT s.n, c.id, v.id, v.rate, v.category, s.type, s.status, s.pickup, s.dropoff,
               coalesce(s.original, s.dropoff),
               CASE WHEN s.type = 'daily'
                    THEN round(greatest(1, ceil(extract(epoch FROM coalesce(s.original, s.dropoff) - s.pickup) / 86400 - 0.08)) * v.rate * 1.05 / 100) * 100
                    ELSE mo.monthly * greatest(1, round(extract(epoch FROM s.dropoff - s.pickup) / (30.4 * 86400))) END,
               CASE WHEN s.type = 'daily' THEN NULL ELSE mo.monthly END,
               s.confirmed, s.returned
        FROM (${segment}) s
        JOIN seed_v v ON v.n = s.vn
        JOIN seed_c c ON c.n = s.cn
        CROSS JOIN LATERAL (SELECT (round(v.rate * 30 * CASE s.type WHEN 'monthly' THEN 0.6 WHEN 'lease' THEN 0.5 ELSE 0.7 END * 1.05 / 100) * 100)::bigint AS monthly) mo`;
      // customers: skewed towards low numbers, so some are regulars
      const customerOf = (salt: number) => `1 + floor(${C} * pg_temp.rnd(g.n, ${salt}) ^ 2)::int`;
      const segments: Array<{ label: string; from: number; to: number; sql: (a: number, b: number) => string }> = [
        {
          label: 'bookings (history)',
          from: 1,
          to: H,
          sql: (a, b) => `
            SELECT g.n, x.vn, x.cn, t.type, st.status, pk.pickup, dr.dropoff,
                   CASE WHEN st.status = 'completed' AND t.type = 'daily' AND x.r8 < 0.04 AND dr.dropoff - pk.pickup > interval '3 days'
                        THEN dr.dropoff - (1 + floor(x.r8 * 50)) * interval '1 day' END AS original,
                   CASE WHEN st.status = 'completed' OR x.r6 < 0.5 THEN pk.pickup - (6 + x.r6 * 200) * interval '1 hour' END AS confirmed,
                   CASE WHEN st.status = 'completed' THEN least(dr.dropoff + (x.r7 - 0.5) * interval '90 minutes', p.now) END AS returned
            FROM generate_series(${a}, ${b}) g(n)
            CROSS JOIN seed_params p
            CROSS JOIN LATERAL (SELECT 1 + floor(pg_temp.rnd(g.n, 10) * ${V})::int AS vn, ${customerOf(11)} AS cn,
                                       pg_temp.rnd(g.n, 12) AS r1, pg_temp.rnd(g.n, 13) AS r2, pg_temp.rnd(g.n, 14) AS r3,
                                       pg_temp.rnd(g.n, 15) AS r4, pg_temp.rnd(g.n, 16) AS r5, pg_temp.rnd(g.n, 17) AS r6,
                                       pg_temp.rnd(g.n, 18) AS r7, pg_temp.rnd(g.n, 19) AS r8) x
            CROSS JOIN LATERAL (SELECT CASE WHEN x.r1 < 0.90 THEN 'daily' WHEN x.r1 < 0.96 THEN 'monthly' WHEN x.r1 < 0.99 THEN 'lease'
                                            ELSE 'rent_to_own' END AS type) t
            CROSS JOIN LATERAL (SELECT CASE WHEN x.r5 < 0.06 THEN 'canceled' ELSE 'completed' END AS status) st
            CROSS JOIN LATERAL (SELECT date_trunc('minute', p.now - interval '3 years'
                                  + ((g.n - 1 + x.r2) / ${Math.max(H, 1)}) * (interval '3 years' - interval '2 days')) AS pickup) pk
            -- returned by yesterday: the most recent rentals are cut short
            CROSS JOIN LATERAL (SELECT greatest(pk.pickup + interval '2 hours', least(p.now - interval '1 day',
                                  pk.pickup + CASE t.type WHEN 'daily' THEN (1 + floor(x.r3 ^ 2 * 14)) * interval '1 day'
                                                          WHEN 'monthly' THEN (1 + floor(x.r3 * 3)) * interval '1 month'
                                                          WHEN 'lease' THEN interval '1 year' ELSE interval '2 years' END
                                            + (x.r4 - 0.5) * interval '4 hours')) AS dropoff) dr`,
        },
        {
          label: 'bookings (out now)',
          from: H + 1,
          to: H + A,
          sql: (a, b) => `
            SELECT g.n, 1 + ((i.i * 10) % ${V}) AS vn, ${customerOf(21)} AS cn, t.type, 'active' AS status, tm.pickup, tm.dropoff,
                   NULL::timestamptz AS original, tm.pickup - (2 + x.r3 * 70) * interval '1 hour' AS confirmed, NULL::timestamptz AS returned
            FROM generate_series(${a}, ${b}) g(n)
            CROSS JOIN seed_params p
            CROSS JOIN LATERAL (SELECT g.n - ${H + 1} AS i) i
            CROSS JOIN LATERAL (SELECT pg_temp.rnd(g.n, 22) AS r1, pg_temp.rnd(g.n, 23) AS r2, pg_temp.rnd(g.n, 24) AS r3) x
            CROSS JOIN LATERAL (SELECT CASE WHEN i.i % 10 = 1 THEN 'monthly' WHEN i.i % 20 = 2 THEN 'lease' WHEN i.i % 40 = 3 THEN 'rent_to_own'
                                            ELSE 'daily' END AS type) t
            CROSS JOIN LATERAL (SELECT CASE
                WHEN t.type = 'daily' AND i.i % 7 = 0 THEN p.now - (1 + x.r1 * 70) * interval '1 hour' - (1 + floor(x.r2 * 7)) * interval '1 day'
                WHEN t.type = 'daily' THEN p.now - (0.1 + x.r2 * 10) * interval '1 day'
                WHEN t.type = 'monthly' THEN p.now - (1 + x.r2 * 25) * interval '1 day'
                WHEN t.type = 'lease' THEN p.now - (5 + x.r2 * 300) * interval '1 day'
                ELSE p.now - (5 + x.r2 * 500) * interval '1 day' END AS pickup) pk
            CROSS JOIN LATERAL (SELECT pk.pickup, CASE
                -- late: due back up to three days ago
                WHEN t.type = 'daily' AND i.i % 7 = 0 THEN p.now - (1 + x.r1 * 70) * interval '1 hour'
                -- due back later today
                WHEN t.type = 'daily' AND i.i % 5 = 4 THEN p.now + (${midnight('p.today + 1')} - p.now) * (0.1 + 0.8 * x.r1)
                WHEN t.type = 'daily' THEN p.now + (0.5 + x.r1 * 9) * interval '1 day'
                WHEN t.type = 'monthly' THEN pk.pickup + (1 + floor(x.r1 * 3)) * interval '1 month'
                WHEN t.type = 'lease' THEN pk.pickup + (1 + floor(x.r1 * 2)) * interval '1 year'
                ELSE pk.pickup + interval '3 years' END AS dropoff) tm`,
        },
        {
          label: 'bookings (confirmed)',
          from: H + A + 1,
          to: H + A + CF,
          // one car in every ten takes confirmed bookings in weekly rounds, so they never overlap
          sql: (a, b) => `
            SELECT g.n, ${S > 0 ? `5 + 10 * (j.j % ${S})` : `1 + j.j % ${V}`} AS vn, ${customerOf(31)} AS cn, 'daily' AS type, 'confirmed' AS status,
                   pk.pickup, pk.pickup + (1 + floor(x.r3 * 3)) * interval '1 day' AS dropoff, NULL::timestamptz AS original,
                   least(p.now - interval '10 minutes', p.now - (1 + x.r4 * 72) * interval '1 hour') AS confirmed, NULL::timestamptz AS returned
            FROM generate_series(${a}, ${b}) g(n)
            CROSS JOIN seed_params p
            CROSS JOIN LATERAL (SELECT g.n - ${H + A + 1} AS j) j
            CROSS JOIN LATERAL (SELECT pg_temp.rnd(g.n, 32) AS r1, pg_temp.rnd(g.n, 33) AS r2, pg_temp.rnd(g.n, 34) AS r3, pg_temp.rnd(g.n, 35) AS r4) x
            CROSS JOIN LATERAL (SELECT ${midnight(`p.today + (j.j / ${Math.max(S, 1)}) * 7 + 1 + floor(x.r1 * 4)::int`)}
                                       + (8 + floor(x.r2 * 12)) * interval '1 hour' AS pickup) pk`,
        },
        {
          label: 'bookings (pending)',
          from: H + A + CF + 1,
          to: B,
          sql: (a, b) => `
            SELECT g.n, 1 + floor(pg_temp.rnd(g.n, 40) * ${V})::int AS vn, ${customerOf(41)} AS cn, t.type, 'pending' AS status,
                   pk.pickup, CASE t.type WHEN 'daily' THEN pk.pickup + (1 + floor(x.r2 * 7)) * interval '1 day'
                                          WHEN 'monthly' THEN pk.pickup + interval '1 month' ELSE pk.pickup + interval '1 year' END AS dropoff,
                   NULL::timestamptz AS original, NULL::timestamptz AS confirmed, NULL::timestamptz AS returned
            FROM generate_series(${a}, ${b}) g(n)
            CROSS JOIN seed_params p
            CROSS JOIN LATERAL (SELECT pg_temp.rnd(g.n, 42) AS r1, pg_temp.rnd(g.n, 43) AS r2) x
            CROSS JOIN LATERAL (SELECT CASE WHEN g.n % 10 = 3 THEN 'monthly' WHEN g.n % 20 = 7 THEN 'lease' ELSE 'daily' END AS type) t
            CROSS JOIN LATERAL (SELECT date_trunc('minute', p.now + (1 + x.r1 * 30) * interval '1 day') AS pickup) pk`,
        },
      ];
      for (const seg of segments) {
        for (let a = seg.from; a <= seg.to; a += CHUNK) {
          const b = Math.min(seg.to, a + CHUNK - 1);
          await run(planBookings(seg.sql(a, b)));
          progress.step(seg.label, b - a + 1);
        }
      }
      // ---- invoices: spread over the bookings that can be billed (completed, out now, confirmed)
      await run(`CREATE TEMP TABLE seed_bk ON COMMIT DROP AS
                 SELECT (row_number() OVER (ORDER BY n))::int AS k, n FROM seed_b WHERE status IN ('completed', 'active', 'confirmed')`);
      await run(`ALTER TABLE seed_bk ADD PRIMARY KEY (k)`);
      const K = await rowCount('seed_bk');
      await run(`
        CREATE TEMP TABLE seed_i (
          n int PRIMARY KEY, id uuid NOT NULL DEFAULT gen_random_uuid(), booking_id uuid, customer_id uuid, purpose text,
          issue_date date, due_date date, total bigint, status text, plan text, first_at timestamptz, later_at timestamptz
        ) ON COMMIT DROP`);
      const invoiceCount = K === 0 ? 0 : I;
      for (let a = 1; a <= invoiceCount; a += CHUNK) {
        const b = Math.min(invoiceCount, a + CHUNK - 1);
        // invoice i belongs to billable booking k; j counts the invoices of one booking (0: the rental or first month)
        await run(`
          INSERT INTO seed_i (n, booking_id, customer_id, purpose, issue_date, due_date, total, status, plan, first_at, later_at)
          SELECT g.i, bk.id, bk.customer_id, pu.purpose, d.issue_date, d.due_date, tot.total, st.status,
                 CASE
                   WHEN st.status = 'void' OR tot.total < 200 THEN CASE WHEN st.status = 'void' THEN 'none' ELSE 'full' END
                   WHEN d.due_date >= p.today AND bk.status = 'confirmed' THEN CASE WHEN x.r5 < 0.5 THEN 'none' ELSE 'partial' END
                   WHEN d.due_date >= p.today THEN CASE WHEN x.r5 < 0.3 THEN 'partial' ELSE 'full' END
                   WHEN x.r5 < CASE WHEN p.today - d.due_date <= 90 THEN 0.15 ELSE 0.025 END THEN CASE WHEN x.r6 < 0.5 THEN 'partial' ELSE 'none' END
                   WHEN x.r7 < 0.05 THEN 'refund'
                   WHEN x.r7 < 0.07 THEN 'declined'
                   WHEN x.r7 < 0.17 THEN 'split'
                   ELSE 'full' END,
                 least(p.now - interval '1 minute', CASE WHEN ix.j > 0 THEN ${midnight('d.due_date - 7 + floor(x.r8 * 7)::int')} + interval '12 hours'
                                                        WHEN bk.status = 'confirmed' THEN bk.confirmed_at
                                                        ELSE bk.pickup_at + interval '10 minutes' END),
                 least(p.now - interval '1 minute', CASE WHEN ix.j > 0 THEN ${midnight('d.due_date')} + interval '3 days 12 hours'
                                                        ELSE greatest(bk.dropoff_at, bk.pickup_at + interval '1 hour') END)
          FROM generate_series(${a}, ${b}) g(i)
          CROSS JOIN seed_params p
          CROSS JOIN LATERAL (SELECT 1 + ((g.i - 1)::bigint * ${K} / ${I})::int AS k) kk
          CROSS JOIN LATERAL (SELECT (g.i - 1) - (((kk.k - 1)::bigint * ${I} + ${K} - 1) / ${K}) AS j) ix
          JOIN seed_bk USING (k)
          JOIN seed_b bk ON bk.n = seed_bk.n
          CROSS JOIN LATERAL (SELECT pg_temp.rnd(g.i, 51) AS r1, pg_temp.rnd(g.i, 52) AS r2, pg_temp.rnd(g.i, 53) AS r3,
                                     pg_temp.rnd(g.i, 54) AS r4, pg_temp.rnd(g.i, 55) AS r5, pg_temp.rnd(g.i, 56) AS r6,
                                     pg_temp.rnd(g.i, 57) AS r7, pg_temp.rnd(g.i, 58) AS r8) x
          CROSS JOIN LATERAL (SELECT CASE
              WHEN ix.j = 0 THEN CASE WHEN bk.type = 'daily' THEN 'rental' ELSE 'installment' END
              WHEN x.r1 < 0.35 THEN 'extension' WHEN x.r1 < 0.55 THEN 'damage' WHEN x.r1 < 0.70 THEN 'fine'
              WHEN x.r1 < 0.85 THEN 'salik' ELSE 'other' END AS purpose) pu
          CROSS JOIN LATERAL (SELECT CASE WHEN (ix.j > 0 AND x.r2 < 0.15) OR (ix.j = 0 AND x.r2 < 0.01) THEN 'void' ELSE 'issued' END AS status) st
          CROSS JOIN LATERAL (SELECT (CASE pu.purpose
              WHEN 'rental' THEN bk.amount
              WHEN 'installment' THEN bk.monthly_amount
              WHEN 'extension' THEN round((1 + floor(x.r3 * 3)) * bk.rate * 1.05 / 100) * 100
              WHEN 'damage' THEN (500 + floor(x.r3 * 4500)) * 100
              WHEN 'fine' THEN (300 + floor(x.r3 * 700)) * 100
              WHEN 'salik' THEN (4 + floor(x.r3 * 20)) * 500
              ELSE (50 + floor(x.r3 * 250)) * 100 END)::bigint AS total) tot
          CROSS JOIN LATERAL (SELECT iss.issue_date, CASE
              WHEN ix.j > 0 THEN iss.issue_date + 7
              WHEN bk.status = 'confirmed' THEN (bk.pickup_at AT TIME ZONE p.tz)::date
              WHEN x.r4 < 0.1 THEN iss.issue_date + 30
              ELSE iss.issue_date END AS due_date
            FROM (SELECT CASE
              WHEN ix.j > 0 THEN least(p.today, (bk.dropoff_at AT TIME ZONE p.tz)::date + 1)
              WHEN bk.status = 'confirmed' THEN (bk.confirmed_at AT TIME ZONE p.tz)::date
              ELSE (bk.pickup_at AT TIME ZONE p.tz)::date END AS issue_date) iss) d`);
        progress.step('invoices (planning)', b - a + 1);
      }
      // Make sure every ageing bucket holds an open balance, whatever the sizes: the latest paid invoice in each.
      for (const [lo, hi] of [
        [0, 100_000],
        [1, 30],
        [31, 60],
        [61, 100_000],
      ]) {
        const dueRange =
          lo === 0 && hi === 100_000 ? `due_date >= p.today` : `p.today - due_date BETWEEN ${lo} AND ${hi}`;
        await run(`UPDATE seed_i SET plan = 'partial'
                   WHERE n = (SELECT n FROM seed_i, seed_params p WHERE status = 'issued' AND total >= 200 AND ${dueRange}
                              AND NOT EXISTS (SELECT 1 FROM seed_i o, seed_params q WHERE o.status = 'issued' AND o.plan IN ('none', 'partial')
                                              AND ${dueRange.replace(/due_date/g, 'o.due_date').replace(/p\.today/g, 'q.today')})
                              ORDER BY due_date DESC, n LIMIT 1)`);
      }
      // ---- payments: what the invoices' plans call for, then deposits and releases up to the requested count
      await run(`
        CREATE TEMP TABLE seed_p (
          k bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, kind text, status text, amount bigint, customer_id uuid,
          booking_id uuid, invoice_id uuid, at timestamptz
        ) ON COMMIT DROP`);
      await run(`
        CREATE TEMP TABLE seed_money ON COMMIT DROP AS
        SELECT m.kind, m.status, m.amount, i.customer_id, i.booking_id, i.id AS invoice_id, m.at
        FROM seed_i i
        CROSS JOIN LATERAL (SELECT least(i.total - 100, greatest(100, round(i.total * (0.3 + pg_temp.rnd(i.n, 61) * 0.4) / 100) * 100))::bigint AS part,
                                   greatest(100, round(i.total * 0.2 / 100) * 100)::bigint AS extra) a
        CROSS JOIN LATERAL (
          SELECT 'charge' AS kind, 'captured' AS status, i.total AS amount, i.first_at AS at WHERE i.plan = 'full'
          UNION ALL SELECT 'charge', 'captured', a.part, i.first_at WHERE i.plan IN ('partial', 'split')
          UNION ALL SELECT 'charge', 'captured', i.total - a.part, greatest(i.first_at, i.later_at) WHERE i.plan = 'split'
          UNION ALL SELECT 'charge', 'captured', i.total + a.extra, i.first_at WHERE i.plan = 'refund'
          UNION ALL SELECT 'refund', 'captured', a.extra, greatest(i.first_at, i.later_at) WHERE i.plan = 'refund'
          UNION ALL SELECT 'charge', 'canceled', i.total, i.first_at - interval '5 minutes' WHERE i.plan = 'declined'
          UNION ALL SELECT 'charge', 'captured', i.total, i.first_at WHERE i.plan = 'declined'
        ) m`);
      const money = await rowCount('seed_money');
      const R = Math.max(0, P - money);
      progress.step('payments (planning)', Math.min(P, money));
      // deposits on cars out now first, then on finished rentals; a release 14 to 21 days after the return
      await run(`
        CREATE TEMP TABLE seed_dep ON COMMIT DROP AS
        WITH cand AS (
          SELECT b.n, b.id, b.customer_id, b.status, b.pickup_at,
                 CASE b.category WHEN 'economy' THEN 100000 WHEN 'sedan' THEN 150000 WHEN 'suv' THEN 200000 WHEN 'luxury' THEN 500000 ELSE 150000 END::bigint AS amount,
                 b.returned_at + (14 + floor(pg_temp.rnd(b.n, 71) * 8)) * interval '1 day' AS release_at,
                 (b.status = 'completed' AND b.returned_at + (14 + floor(pg_temp.rnd(b.n, 71) * 8)) * interval '1 day' <= p.now) AS released
          FROM seed_b b CROSS JOIN seed_params p WHERE b.status IN ('active', 'completed')
        )
        SELECT *, sum(1 + released::int) OVER (ORDER BY (status = 'active') DESC, hashint8extended(n, 72), n ROWS UNBOUNDED PRECEDING) AS cum
        FROM cand`);
      await run(`
        INSERT INTO seed_p (kind, status, amount, customer_id, booking_id, invoice_id, at)
        SELECT kind, status, amount, customer_id, booking_id, invoice_id, at FROM (
          (SELECT kind, status, amount, customer_id, booking_id, invoice_id, at FROM seed_money ORDER BY at LIMIT ${P})
          UNION ALL
          SELECT 'deposit', 'captured', amount, customer_id, id, NULL::uuid, least(pickup_at, (SELECT now FROM seed_params)) FROM seed_dep WHERE cum - released::int <= ${R}
          UNION ALL
          SELECT 'deposit_release', 'captured', amount, customer_id, id, NULL::uuid, release_at FROM seed_dep WHERE released AND cum <= ${R}
        ) x ORDER BY at`);
      const payments = await rowCount('seed_p');
      progress.step('payments (planning)', P - Math.min(P, money));
      // What the planned payments make of each invoice's paid and each booking's collected and balance due: the rows
      // are written with their final figures, so the running totals rebuilt at the end rewrite none of them.
      await run(`
        CREATE TEMP TABLE seed_invoice_paid ON COMMIT DROP AS
        SELECT invoice_id AS id, sum(CASE WHEN status = 'canceled' THEN 0 WHEN kind = 'charge' THEN amount WHEN kind = 'refund' THEN -amount ELSE 0 END) AS paid
        FROM seed_p WHERE invoice_id IS NOT NULL GROUP BY 1`);
      await run(`ALTER TABLE seed_invoice_paid ADD PRIMARY KEY (id)`);
      await run(`
        CREATE TEMP TABLE seed_booking_money ON COMMIT DROP AS
        SELECT id, sum(collected) AS collected, sum(balance_due) AS balance_due FROM (
          SELECT booking_id AS id, CASE WHEN status = 'canceled' THEN 0 WHEN kind = 'charge' THEN amount WHEN kind = 'refund' THEN -amount ELSE 0 END AS collected,
                 0 AS balance_due
          FROM seed_p WHERE booking_id IS NOT NULL
          UNION ALL
          SELECT i.booking_id, 0, CASE WHEN i.status = 'issued' THEN greatest(i.total - coalesce(m.paid, 0), 0) ELSE 0 END
          FROM seed_i i LEFT JOIN seed_invoice_paid m USING (id) WHERE i.booking_id IS NOT NULL
        ) x GROUP BY id`);
      await run(`ALTER TABLE seed_booking_money ADD PRIMARY KEY (id)`);
      for (let a = 1; a <= B; a += CHUNK) {
        const b = Math.min(B, a + CHUNK - 1);
        await run(`INSERT INTO bookings (id, workspace_id, number, customer_id, vehicle_id, type, status, pickup_at, dropoff_at,
                                         original_dropoff_at, amount, monthly_amount, confirmed_at, returned_at, created_at, updated_at,
                                         collected, balance_due, customer_json, vehicle_json)
                   SELECT seed_b.id, p.ws, 'LB-' || lpad(n::text, 7, '0'), customer_id, vehicle_id, type, status, pickup_at, dropoff_at,
                          original_dropoff_at, amount, monthly_amount, confirmed_at, returned_at,
                          least(p.now, coalesce(confirmed_at, pickup_at - interval '1 day')), least(p.now, coalesce(returned_at, confirmed_at, pickup_at)),
                          coalesce(m.collected, 0), coalesce(m.balance_due, 0), customer_ref_json(c.id, c.name), vehicle_ref_json(v.id, v.plate)
                   FROM seed_b LEFT JOIN seed_booking_money m USING (id)
                   JOIN customers c ON c.id = seed_b.customer_id JOIN vehicles v ON v.id = seed_b.vehicle_id, seed_params p
                   WHERE n BETWEEN ${a} AND ${b} ORDER BY n`);
        progress.step('bookings', b - a + 1);
      }
      await run(`INSERT INTO extensions (id, workspace_id, booking_id, added_days, amount, previous_dropoff_at, new_dropoff_at, created_at)
                 SELECT gen_random_uuid(), p.ws, id, d.days, (round(d.days * rate * 1.05 / 100) * 100)::bigint, original_dropoff_at, dropoff_at,
                        greatest(pickup_at + interval '1 hour', original_dropoff_at - interval '6 hours')
                 FROM seed_b CROSS JOIN seed_params p
                 CROSS JOIN LATERAL (SELECT greatest(1, round(extract(epoch FROM dropoff_at - original_dropoff_at) / 86400))::int AS days) d
                 WHERE original_dropoff_at < dropoff_at`);
      await run(`INSERT INTO installments (id, workspace_id, booking_id, number, "of", due_date, amount, paid_at)
                 SELECT gen_random_uuid(), p.ws, b.id, m.k, t.months, (b.pickup_at AT TIME ZONE p.tz)::date + (m.k - 1) * interval '1 month',
                        b.monthly_amount,
                        CASE WHEN (b.pickup_at + (m.k - 1) * interval '1 month') < p.now - interval '2 days' AND (b.n + m.k) % 9 <> 0
                             THEN b.pickup_at + (m.k - 1) * interval '1 month' + interval '2 hours' END
                 FROM seed_b b CROSS JOIN seed_params p
                 CROSS JOIN LATERAL (SELECT greatest(1, round(extract(epoch FROM b.dropoff_at - b.pickup_at) / (30.4 * 86400)))::int AS months) t
                 CROSS JOIN LATERAL generate_series(1, t.months) m(k)
                 WHERE b.type <> 'daily' AND (b.status IN ('active', 'confirmed') OR (b.status = 'completed' AND b.dropoff_at > p.now - interval '180 days'))`);

      for (let a = 1; a <= invoiceCount; a += CHUNK) {
        const b = Math.min(invoiceCount, a + CHUNK - 1);
        await run(`INSERT INTO invoices (id, workspace_id, number, customer_id, booking_id, purpose, issue_date, due_date, total, status, paid)
                   SELECT id, p.ws, 'LI-' || lpad(n::text, 7, '0'), customer_id, booking_id, purpose, issue_date, due_date, total, status,
                          coalesce(m.paid, 0)
                   FROM seed_i LEFT JOIN seed_invoice_paid m USING (id), seed_params p WHERE n BETWEEN ${a} AND ${b} ORDER BY n`);
        progress.step('invoices', b - a + 1);
      }

      for (let a = 1; a <= payments; a += CHUNK) {
        const b = Math.min(payments, a + CHUNK - 1);
        await run(`INSERT INTO payments (id, workspace_id, kind, status, amount, customer_id, booking_id, invoice_id, at)
                   SELECT gen_random_uuid(), p.ws, kind, status, amount, customer_id, booking_id, invoice_id, at
                   FROM seed_p, seed_params p WHERE k BETWEEN ${a} AND ${b} ORDER BY k`);
        progress.step('payments', b - a + 1);
      }

      // ---- expenses over three years
      await run(`
        INSERT INTO expenses (id, workspace_id, vehicle_id, category, amount, date)
        SELECT gen_random_uuid(), p.ws, CASE WHEN c.category IN ('insurance', 'salik') THEN NULL ELSE v.id END, c.category,
               (CASE c.category WHEN 'fuel' THEN 6000 + floor(x.r2 * 19000) WHEN 'maintenance' THEN 35000 + floor(x.r2 * 345000)
                                WHEN 'insurance' THEN 200000 + floor(x.r2 * 600000) WHEN 'salik' THEN 50000 + floor(x.r2 * 150000)
                                ELSE 3500 + floor(x.r2 * 11500) END)::bigint,
               p.today - floor(x.r3 * 1095)::int
        FROM generate_series(1, ${E}) g(n)
        CROSS JOIN seed_params p
        CROSS JOIN LATERAL (SELECT pg_temp.rnd(g.n, 81) AS r1, pg_temp.rnd(g.n, 82) AS r2, pg_temp.rnd(g.n, 83) AS r3) x
        CROSS JOIN LATERAL (SELECT CASE WHEN x.r1 < 0.45 THEN 'fuel' WHEN x.r1 < 0.65 THEN 'maintenance' WHEN x.r1 < 0.70 THEN 'insurance'
                                        WHEN x.r1 < 0.80 THEN 'salik' ELSE 'cleaning' END AS category) c
        JOIN seed_v v ON v.n = 1 + (g.n::bigint * 7919) % ${V}`);
      progress.step('expenses', E);

      // ---- maintenance: cars in the workshop now, services booked ahead (cars 9, 19, ...), past services
      await run(`
        INSERT INTO maintenance (id, workspace_id, vehicle_id, starts_at, ends_at, reason)
        SELECT gen_random_uuid(), p.ws, v.id, m.starts, m.starts + m.length, m.reason
        FROM (
          SELECT n, p.now - (1 + pg_temp.rnd(n, 91) * 4) * interval '1 day' AS starts, (3 + pg_temp.rnd(n, 92) * 6) * interval '1 day' AS length,
                 'Repair in progress' AS reason
          FROM seed_v, seed_params p WHERE state = 'in_service'
          UNION ALL
          SELECT n, ${midnight('p.today + 2 + floor(pg_temp.rnd(n, 93) * 28)::int')} + interval '8 hours', interval '1 day 4 hours', 'Scheduled service'
          FROM seed_v, seed_params p WHERE n % 10 = 9 AND n % 20 = 19
          UNION ALL
          SELECT 1 + floor(pg_temp.rnd(g.n, 94) * ${V})::int, p.now - (10 + pg_temp.rnd(g.n, 95) * 1080) * interval '1 day',
                 (1 + floor(pg_temp.rnd(g.n, 96) * 3)) * interval '1 day',
                 (ARRAY['Scheduled service', 'Brake pads and discs', 'Battery replacement', 'Tyre replacement', 'Body work', 'Oil change'])[1 + g.n % 6]
          FROM generate_series(1, ${M}) g(n), seed_params p
        ) m
        JOIN seed_v v USING (n)
        CROSS JOIN seed_params p`);
      progress.step('maintenance', M);
      await run(`
        INSERT INTO vehicle_documents (id, workspace_id, vehicle_id, doc_type, detail, expires_at)
        SELECT gen_random_uuid(), p.ws, v.id, d.doc_type, d.detail, p.today + floor(pg_temp.rnd(v.n * 2 + d.k, 97) * 380)::int - 10
        FROM seed_v v CROSS JOIN seed_params p
        CROSS JOIN LATERAL (VALUES (0, 'registration', 'Vehicle registration (mulkiya) ' || v.plate),
                                   (1, 'insurance', 'Comprehensive insurance policy ' || (1000000 + v.n))) d(k, doc_type, detail)
        WHERE v.state <> 'inactive'`);
      progress.step('vehicle documents', 2 * V);

      // ---- fines and tolls on finished rentals
      await run(`
        INSERT INTO fines (id, workspace_id, kind, type, date, amount, authority, violation, number, status, vehicle_id, booking_id, customer_id, recorded_at)
        SELECT gen_random_uuid(), p.ws, k.kind, k.type, (w.at AT TIME ZONE p.tz)::date, k.amount, k.authority, k.violation,
               upper(left(k.type, 3)) || lpad((g.n::bigint * 7919 % 100000000)::text, 8, '0'),
               CASE WHEN k.kind = 'toll' THEN 'charged' ELSE (ARRAY['unpaid', 'paid', 'paid', 'disputed'])[1 + g.n % 4] END,
               b.vehicle_id, b.id, b.customer_id, least(p.now, w.at + (1 + floor(pg_temp.rnd(g.n, 103) * 14)) * interval '1 day')
        FROM generate_series(1, ${F}) g(n)
        CROSS JOIN seed_params p
        JOIN seed_b b ON b.n = 1 + floor(pg_temp.rnd(g.n, 101) * ${Math.max(H, 1)})::int AND b.status = 'completed'
        CROSS JOIN LATERAL (SELECT b.pickup_at + pg_temp.rnd(g.n, 102) * (b.dropoff_at - b.pickup_at) AS at) w
        CROSS JOIN LATERAL (SELECT * FROM (VALUES
            (0, 'toll', 'salik', 400, 'Salik (RTA Dubai)', 'Al Garhoud Bridge gate'),
            (1, 'toll', 'salik', 600, 'Salik (RTA Dubai)', 'Al Maktoum Bridge gate'),
            (2, 'toll', 'darb', 400, 'Darb (ITC Abu Dhabi)', 'Sheikh Zayed Bridge gate'),
            (3, 'toll', 'salik', 400, 'Salik (RTA Dubai)', 'Business Bay Crossing gate'),
            (4, 'toll', 'salik', 400, 'Salik (RTA Dubai)', 'Al Safa gate'),
            (5, 'toll', 'salik', 400, 'Salik (RTA Dubai)', 'Jebel Ali gate'),
            (6, 'toll', 'darb', 400, 'Darb (ITC Abu Dhabi)', 'Al Maqta Bridge gate'),
            (7, 'fine', 'speeding', 30000, 'Dubai Police', 'Exceeding the speed limit by up to 20 km/h'),
            (8, 'fine', 'parking', 15000, 'RTA Dubai', 'Parking without paying the parking fee'),
            (9, 'fine', 'red_light', 100000, 'Sharjah Police', 'Jumping a red light')
          ) AS t(k, kind, type, amount, authority, violation) WHERE t.k = g.n % 10) k`);
      progress.step('fines', F);
      await run(`INSERT INTO integrations (id, workspace_id, integration, status, detail, hint, failing_since)
                 SELECT gen_random_uuid(), p.ws, 'payment_gateway', 'ok', NULL, NULL, NULL FROM seed_params p
                 UNION ALL
                 SELECT gen_random_uuid(), p.ws, 'accounting', 'failing', 'HTTP 401 Unauthorized: token expired',
                        'Reconnect the accounting integration under Settings > Integrations.', p.now - interval '30 hours' FROM seed_params p`);
      progress.step('running totals', 0);
      await finishDeferredRollups(trx, workspace.id);
    });
  } finally {
    progress.stop();
  }

  // Fresh statistics (and a visibility map, after the trigger updates) for the planner; outside the transaction.
  for (const table of [
    ...TABLES,
    'customer_ledger',
    'vehicle_revenue',
    'booking_status_counts',
    'payment_slots',
    'payment_days',
    'expense_months',
    'vehicle_state_counts',
    'vehicle_models',
    'payment_months',
  ]) {
    await db.raw(`VACUUM (ANALYZE) ${table}`);
  }

  const counts: Record<string, number> = {};
  for (const table of TABLES) {
    const { rows } = await db.raw(`SELECT count(*) AS c FROM ${table} WHERE workspace_id = ?`, [workspace.id]);
    counts[table] = Number(rows[0].c);
  }
  return counts;
}
