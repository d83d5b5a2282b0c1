import type { Knex } from 'knex';

// The workspace, its keys and endpoints, and every entity of the import document. Every workspace-owned row
// carries workspace_id; child rows reference their parent together with the workspace (composite foreign
// keys), so a row can never point into another workspace.
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE EXTENSION IF NOT EXISTS btree_gist;

    CREATE TABLE workspaces (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      slug text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
      status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'frozen')),
      timezone text NOT NULL DEFAULT 'Asia/Dubai',
      reminders_ahead integer NOT NULL DEFAULT 3 CHECK (reminders_ahead BETWEEN 1 AND 60),
      created_at timestamptz NOT NULL DEFAULT now()
    );

    CREATE TABLE api_keys (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      key_hash bytea NOT NULL UNIQUE CHECK (octet_length(key_hash) = 32),
      role text,
      expires_at timestamptz,
      revoked_at timestamptz,
      last_used_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX api_keys_workspace ON api_keys (workspace_id);

    CREATE TABLE webhook_endpoints (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
      url text NOT NULL CHECK (url ~ '^https\\?://'),
      events text[] NOT NULL DEFAULT '{}',
      secret text NOT NULL CHECK (secret ~ '^whsec_[A-Za-z0-9]{32,}$'),
      is_active boolean NOT NULL DEFAULT true,
      disabled_at timestamptz,
      last_success_at timestamptz,
      consecutive_failures integer NOT NULL DEFAULT 0 CHECK (consecutive_failures >= 0),
      created_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (workspace_id, id)
    );
    CREATE INDEX webhook_endpoints_workspace ON webhook_endpoints (workspace_id, created_at, id);

    CREATE TABLE owners (
      id uuid PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      name text NOT NULL,
      UNIQUE (workspace_id, id)
    );

    CREATE TABLE fleets (
      id uuid PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      owner_id uuid NOT NULL,
      code text NOT NULL,
      name text NOT NULL,
      UNIQUE (workspace_id, id),
      UNIQUE (workspace_id, code),
      FOREIGN KEY (workspace_id, owner_id) REFERENCES owners (workspace_id, id)
    );

    CREATE TABLE vehicles (
      id uuid PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      fleet_id uuid NOT NULL,
      make text NOT NULL,
      model text NOT NULL,
      plate text NOT NULL,
      -- plate without spaces, lower-cased: what search and uniqueness compare
      plate_key text GENERATED ALWAYS AS (lower(replace(plate, ' ', ''))) STORED,
      category text NOT NULL,
      daily_rate bigint NOT NULL CHECK (daily_rate >= 0),
      state text NOT NULL CHECK (state IN ('active', 'in_service', 'inactive')),
      UNIQUE (workspace_id, id),
      UNIQUE (workspace_id, plate_key),
      FOREIGN KEY (workspace_id, fleet_id) REFERENCES fleets (workspace_id, id)
    );
    CREATE INDEX vehicles_order ON vehicles (workspace_id, make, model, plate);
    CREATE INDEX vehicles_fleet ON vehicles (workspace_id, fleet_id);

    CREATE TABLE maintenance (
      id uuid PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      vehicle_id uuid NOT NULL,
      starts_at timestamptz NOT NULL,
      ends_at timestamptz NOT NULL,
      reason text,
      -- half-open [starts_at, ends_at): the availability window test is && on this range
      period tstzrange GENERATED ALWAYS AS (tstzrange(starts_at, ends_at, '[)')) STORED,
      CHECK (ends_at > starts_at),
      FOREIGN KEY (workspace_id, vehicle_id) REFERENCES vehicles (workspace_id, id)
    );
    CREATE INDEX maintenance_vehicle_period ON maintenance USING gist (vehicle_id, period);

    CREATE TABLE vehicle_documents (
      id uuid PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      vehicle_id uuid NOT NULL,
      doc_type text NOT NULL CHECK (doc_type IN ('registration', 'insurance', 'permit')),
      detail text,
      expires_at date NOT NULL,
      FOREIGN KEY (workspace_id, vehicle_id) REFERENCES vehicles (workspace_id, id)
    );
    CREATE INDEX vehicle_documents_expiry ON vehicle_documents (workspace_id, expires_at);

    CREATE TABLE customers (
      id uuid PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      name text NOT NULL,
      phone text,
      email text,
      id_document text,
      UNIQUE (workspace_id, id)
    );
    CREATE INDEX customers_name ON customers (workspace_id, name);

    CREATE TABLE bookings (
      id uuid PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      number text NOT NULL,
      customer_id uuid NOT NULL,
      vehicle_id uuid NOT NULL,
      type text NOT NULL CHECK (type IN ('daily', 'monthly', 'lease', 'rent_to_own')),
      status text NOT NULL CHECK (status IN ('pending', 'confirmed', 'active', 'completed', 'canceled')),
      pickup_at timestamptz NOT NULL,
      dropoff_at timestamptz NOT NULL,
      original_dropoff_at timestamptz,
      amount bigint NOT NULL CHECK (amount >= 0),
      monthly_amount bigint CHECK (monthly_amount >= 0),
      confirmed_at timestamptz,
      returned_at timestamptz,
      -- net collected (captured charges - refunds) on payments linked to this booking; kept by payment triggers
      collected bigint NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      CHECK (dropoff_at > pickup_at),
      UNIQUE (workspace_id, id),
      UNIQUE (workspace_id, number),
      FOREIGN KEY (workspace_id, customer_id) REFERENCES customers (workspace_id, id),
      FOREIGN KEY (workspace_id, vehicle_id) REFERENCES vehicles (workspace_id, id)
    );
    CREATE INDEX bookings_pickup ON bookings (workspace_id, pickup_at);
    CREATE INDEX bookings_dropoff ON bookings (workspace_id, dropoff_at);
    CREATE INDEX bookings_open_status ON bookings (workspace_id, status, pickup_at) WHERE status IN ('confirmed', 'active');
    CREATE INDEX bookings_vehicle ON bookings (vehicle_id);
    CREATE INDEX bookings_customer ON bookings (customer_id);
    -- availability: confirmed and active bookings only, as half-open [pickup, dropoff) ranges per vehicle
    CREATE INDEX bookings_vehicle_window ON bookings USING gist (vehicle_id, tstzrange(pickup_at, dropoff_at, '[)'))
      WHERE status IN ('confirmed', 'active');

    CREATE TABLE extensions (
      id uuid PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      booking_id uuid NOT NULL,
      added_days integer NOT NULL CHECK (added_days >= 1),
      amount bigint NOT NULL CHECK (amount >= 0),
      previous_dropoff_at timestamptz NOT NULL,
      new_dropoff_at timestamptz NOT NULL,
      created_at timestamptz NOT NULL,
      FOREIGN KEY (workspace_id, booking_id) REFERENCES bookings (workspace_id, id)
    );
    CREATE INDEX extensions_booking ON extensions (booking_id, created_at);

    CREATE TABLE invoices (
      id uuid PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      number text NOT NULL,
      customer_id uuid NOT NULL,
      booking_id uuid,
      purpose text NOT NULL CHECK (purpose IN ('rental', 'extension', 'installment', 'damage', 'fine', 'salik', 'other')),
      issue_date date NOT NULL,
      due_date date NOT NULL,
      total bigint NOT NULL CHECK (total >= 0),
      status text NOT NULL CHECK (status IN ('issued', 'void')),
      -- net collected allocated to this invoice; kept by payment triggers
      paid bigint NOT NULL DEFAULT 0,
      -- the open balance: total - paid, never below 0; void invoices have none
      balance bigint GENERATED ALWAYS AS (CASE WHEN status = 'issued' THEN greatest(total - paid, 0) ELSE 0 END) STORED,
      UNIQUE (workspace_id, id),
      UNIQUE (workspace_id, number),
      FOREIGN KEY (workspace_id, customer_id) REFERENCES customers (workspace_id, id),
      FOREIGN KEY (workspace_id, booking_id) REFERENCES bookings (workspace_id, id)
    );
    CREATE INDEX invoices_customer ON invoices (customer_id);
    CREATE INDEX invoices_booking ON invoices (booking_id);
    CREATE INDEX invoices_open ON invoices (workspace_id, due_date) INCLUDE (balance, customer_id) WHERE balance > 0;

    CREATE TABLE payments (
      id uuid PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      kind text NOT NULL CHECK (kind IN ('charge', 'refund', 'deposit', 'deposit_release')),
      status text NOT NULL DEFAULT 'captured' CHECK (status IN ('captured', 'canceled')),
      amount bigint NOT NULL CHECK (amount >= 0),
      customer_id uuid NOT NULL,
      booking_id uuid,
      invoice_id uuid,
      at timestamptz NOT NULL,
      -- what the payment adds to "collected": captured charges in, refunds out, deposits never
      net bigint GENERATED ALWAYS AS (CASE WHEN status = 'canceled' THEN 0 WHEN kind = 'charge' THEN amount WHEN kind = 'refund' THEN -amount ELSE 0 END) STORED,
      -- what it adds to deposits held
      deposit_net bigint GENERATED ALWAYS AS (CASE WHEN status = 'canceled' THEN 0 WHEN kind = 'deposit' THEN amount WHEN kind = 'deposit_release' THEN -amount ELSE 0 END) STORED,
      FOREIGN KEY (workspace_id, customer_id) REFERENCES customers (workspace_id, id),
      FOREIGN KEY (workspace_id, booking_id) REFERENCES bookings (workspace_id, id),
      FOREIGN KEY (workspace_id, invoice_id) REFERENCES invoices (workspace_id, id)
    );
    CREATE INDEX payments_at ON payments (workspace_id, at);
    CREATE INDEX payments_invoice ON payments (invoice_id) WHERE invoice_id IS NOT NULL;
    CREATE INDEX payments_booking ON payments (booking_id) WHERE booking_id IS NOT NULL;
    CREATE INDEX payments_customer ON payments (customer_id);

    CREATE TABLE installments (
      id uuid PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      booking_id uuid NOT NULL,
      number integer NOT NULL CHECK (number >= 1),
      "of" integer NOT NULL CHECK ("of" >= 1),
      due_date date NOT NULL,
      amount bigint NOT NULL CHECK (amount >= 0),
      invoice_id uuid,
      paid_at timestamptz,
      CHECK (number <= "of"),
      FOREIGN KEY (workspace_id, booking_id) REFERENCES bookings (workspace_id, id),
      FOREIGN KEY (workspace_id, invoice_id) REFERENCES invoices (workspace_id, id)
    );
    CREATE INDEX installments_due ON installments (workspace_id, due_date);

    CREATE TABLE expenses (
      id uuid PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      vehicle_id uuid,
      category text NOT NULL,
      amount bigint NOT NULL CHECK (amount >= 0),
      date date NOT NULL,
      FOREIGN KEY (workspace_id, vehicle_id) REFERENCES vehicles (workspace_id, id)
    );
    CREATE INDEX expenses_date ON expenses (workspace_id, date) INCLUDE (amount);

    CREATE TABLE fines (
      id uuid PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      kind text NOT NULL CHECK (kind IN ('fine', 'toll')),
      type text NOT NULL,
      date date NOT NULL,
      amount bigint NOT NULL CHECK (amount >= 0),
      authority text NOT NULL,
      violation text,
      number text NOT NULL,
      status text NOT NULL,
      vehicle_id uuid NOT NULL,
      booking_id uuid,
      customer_id uuid,
      recorded_at timestamptz NOT NULL,
      FOREIGN KEY (workspace_id, vehicle_id) REFERENCES vehicles (workspace_id, id),
      FOREIGN KEY (workspace_id, booking_id) REFERENCES bookings (workspace_id, id),
      FOREIGN KEY (workspace_id, customer_id) REFERENCES customers (workspace_id, id)
    );
    CREATE INDEX fines_recorded ON fines (workspace_id, recorded_at);

    CREATE TABLE integrations (
      id uuid PRIMARY KEY,
      workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
      integration text NOT NULL,
      status text NOT NULL CHECK (status IN ('ok', 'failing')),
      detail text,
      hint text,
      failing_since timestamptz,
      CHECK (status = 'ok' OR failing_since IS NOT NULL)
    );
    CREATE INDEX integrations_workspace ON integrations (workspace_id);
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TABLE IF EXISTS integrations, fines, expenses, installments, payments, invoices, extensions, bookings,
      customers, vehicle_documents, maintenance, vehicles, fleets, owners, webhook_endpoints, api_keys, workspaces CASCADE;
  `);
}
