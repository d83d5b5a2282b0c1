// The demo workspace: a believable UAE rental business (three owners, about 60 cars, 40 customers, six months of
// bookings, invoices, payments and expenses) laid out around a given "now" on the workspace's local calendar.
//
// buildDemoDocument is pure: the same (now, timeZone) always yields the same document. Ids are derived from a
// name (`demo:<kind>:<n>`), so importing again, even at another time, updates the same records instead of adding
// new ones; random choices come from fixed-seed PRNG streams that never depend on `now`.
import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import type {
  Booking,
  Customer,
  Expense,
  Extension,
  Fine,
  FleetImportDocument,
  Installment,
  Invoice,
  Maintenance,
  Payment,
  Vehicle,
  VehicleDocument,
} from '../generated/import-document.js';
import { importDocument } from '../src/core/import/import-document.js';
import { addDays, addMonths, daysBetween, localDate, localTime, startOfMonth, zonedInstant } from '../src/time.js';
import { createApiKey, createWorkspace, findWorkspace, type WorkspaceRecord } from '../src/core/workspaces.js';
import { InputError } from '../src/errors.js';
import { cliActor } from '../src/core/audit.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

// ---------------------------------------------------------------------------------------------------------------
// Deterministic ids and randomness

/**
 * A v4-shaped UUID derived from `demo:<kind>:<n>` (or `demo:<namespace>:<kind>:<n>`): stable across runs, distinct
 * per record. Ids are primary keys across all workspaces, so each demo workspace needs its own namespace.
 */
export function demoId(kind: string, n: number | string, namespace?: string): string {
  const name = namespace ? `demo:${namespace}:${kind}:${n}` : `demo:${kind}:${n}`;
  const h = createHash('sha256').update(name).digest();
  h[6] = (h[6] & 0x0f) | 0x40;
  h[8] = (h[8] & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

/** mulberry32: a tiny, fast 32-bit PRNG; good enough for demo data and fully reproducible. */
class Rng {
  private state: number;
  constructor(stream: string) {
    this.state = createHash('sha256').update(`demo-rng:${stream}`).digest().readUInt32LE(0);
  }
  next(): number {
    this.state = (this.state + 0x6d2b79f5) | 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** Integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)];
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1));
      [out[i], out[j]] = [out[j], out[i]];
    }
    return out;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Reference data

type Category = 'economy' | 'sedan' | 'suv' | 'luxury' | 'van';

/** make, model, daily rate in AED */
const CATALOG: Record<Category, Array<[string, string, number]>> = {
  economy: [
    ['Nissan', 'Sunny', 120],
    ['Toyota', 'Yaris', 130],
    ['Hyundai', 'Accent', 125],
    ['Kia', 'Pegas', 120],
    ['Mitsubishi', 'Attrage', 120],
    ['Chevrolet', 'Spark', 120],
  ],
  sedan: [
    ['Toyota', 'Camry', 200],
    ['Honda', 'Accord', 210],
    ['Hyundai', 'Sonata', 190],
    ['Nissan', 'Altima', 195],
    ['Kia', 'K5', 185],
  ],
  suv: [
    ['Kia', 'Sportage', 230],
    ['Toyota', 'RAV4', 250],
    ['Hyundai', 'Tucson', 235],
    ['Mitsubishi', 'Pajero', 300],
    ['Nissan', 'Patrol', 550],
    ['Toyota', 'Land Cruiser', 650],
  ],
  luxury: [
    ['Mercedes-Benz', 'E-Class', 750],
    ['BMW', '5 Series', 720],
    ['Mercedes-Benz', 'S-Class', 1300],
    ['Range Rover', 'Vogue', 1500],
    ['Porsche', 'Cayenne', 1100],
    ['Cadillac', 'Escalade', 1000],
  ],
  van: [
    ['Toyota', 'Hiace', 320],
    ['Nissan', 'Urvan', 300],
    ['Hyundai', 'H-1', 280],
    ['Mercedes-Benz', 'Sprinter', 450],
  ],
};

/** Security deposit per category, in fils. */
const DEPOSIT: Record<Category, number> = {
  economy: 100_000,
  sedan: 150_000,
  suv: 200_000,
  luxury: 500_000,
  van: 150_000,
};

interface FleetDef {
  key: 'dxb' | 'shj' | 'auh';
  owner: string;
  code: string;
  name: string;
  mix: Record<Category, number>;
  emirate: string;
}

const FLEETS: FleetDef[] = [
  {
    key: 'dxb',
    owner: 'Desert Falcon Rent A Car LLC',
    code: 'DXB',
    name: 'Dubai fleet (Desert Falcon)',
    mix: { economy: 8, sedan: 7, suv: 7, luxury: 4, van: 2 },
    emirate: 'Dubai',
  },
  {
    key: 'shj',
    owner: 'Al Qasba Motors Trading LLC',
    code: 'SHJ',
    name: 'Sharjah fleet (Al Qasba Motors)',
    mix: { economy: 6, sedan: 4, suv: 3, luxury: 0, van: 3 },
    emirate: 'Sharjah',
  },
  {
    key: 'auh',
    owner: 'Saadiyat Mobility Investments',
    code: 'AUH',
    name: 'Abu Dhabi fleet (Saadiyat Mobility)',
    mix: { economy: 4, sedan: 4, suv: 4, luxury: 2, van: 2 },
    emirate: 'Abu Dhabi',
  },
];

const PEOPLE = [
  'Ahmed Al Mansoori',
  'Fatima Al Hashimi',
  'Mohammed Al Ketbi',
  'Aisha Al Nuaimi',
  'Khalid Al Falasi',
  'Mariam Al Suwaidi',
  'Saeed Al Mazrouei',
  'Noura Al Dhaheri',
  'Hamdan Al Shamsi',
  'Latifa Al Marri',
  'Omar Haddad',
  'Layla Nasser',
  'Youssef El Amrani',
  'Rania Khoury',
  'Tarek Mansour',
  'Hiba Saleh',
  'Priya Nair',
  'Rahul Menon',
  'Arjun Sharma',
  'Ayesha Siddiqui',
  'Imran Qureshi',
  'Fahad Rahman',
  'Sarah Thompson',
  "James O'Connor",
  'Emily Clarke',
  'Daniel Becker',
  'Olga Ivanova',
  'Chen Wei',
  'Maria Santos',
  'Jose Reyes',
  'Grace Mwangi',
  'Ali Rezaei',
  'Zainab Hussain',
  'Kareem Abdullah',
  'Sofia Rossi',
];
const COMPANIES = [
  'Gulf Horizon Contracting LLC',
  'Blue Wave Logistics FZE',
  'Marina Events Management LLC',
  'Al Waha Facilities Management LLC',
  'Crescent Tech Solutions FZ-LLC',
];
const INSURERS = ['Orient Insurance', 'Sukoon Insurance', 'GIG Gulf', 'Tokio Marine Middle East', 'Dubai Insurance'];

// ---------------------------------------------------------------------------------------------------------------
// The builder

interface VehicleInfo {
  rec: Vehicle;
  category: Category;
  fleet: FleetDef;
  rate: number;
  /** Busy [start, end) intervals in ms: bookings that hold the car and maintenance blocks. */
  busy: Array<[number, number]>;
}

interface CustomerInfo {
  rec: Customer;
  company: boolean;
}

interface BookingInfo {
  rec: Booking;
  vehicle: VehicleInfo;
  customer: CustomerInfo;
  pickup: Date;
  dropoff: Date;
  returned: Date | null;
  rental: number;
}

type PayPlan =
  | 'full' // paid in full when issued / at pickup
  | 'partial' // part paid, the rest stays open
  | 'split' // part at pickup, the rest at return
  | 'none' // nothing paid
  | 'refund' // overpaid, the excess refunded at return
  | 'declined'; // first charge canceled (card declined), then paid in full

interface BookingSpec {
  type: Booking['type'];
  status: Booking['status'];
  category: Category;
  pickup: Date;
  dropoff: Date;
  /** Drop-off before an extension; the extension is created at `extendedAt`. */
  original?: Date;
  extendedAt?: Date;
  /** Months for monthly, lease and rent_to_own bookings. */
  months?: number;
  customer?: CustomerInfo;
  pay?: PayPlan;
  /** Due date of the rental invoice: pickup date unless given. */
  due?: string;
  /** Issue the rental invoice now (confirmed bookings); default: issued for active and completed ones. */
  invoice?: boolean;
  deposit?: boolean;
  /** Installments (by 0-based month) left unpaid, or half paid. */
  unpaid?: number[];
  halfPaid?: number[];
  /** Installments settled without an invoice (paidAt only). */
  noInvoice?: number[];
}

class DemoBuilder {
  readonly doc: Required<FleetImportDocument>;
  private readonly nowMs: number;
  private readonly today: string;
  private readonly counters = new Map<string, number>();
  private readonly vehicles: VehicleInfo[] = [];
  private readonly customers: CustomerInfo[] = [];
  private readonly bookings: BookingInfo[] = [];
  private readonly invoicesById = new Map<string, Invoice>();

  constructor(
    private readonly now: Date,
    private readonly tz: string,
    private readonly namespace?: string,
  ) {
    if (Number.isNaN(now.getTime())) throw new RangeError('buildDemoDocument: invalid now');
    this.nowMs = now.getTime();
    this.today = localDate(now, tz);
    this.doc = {
      owners: [],
      fleets: [],
      vehicles: [],
      maintenance: [],
      vehicleDocuments: [],
      customers: [],
      bookings: [],
      extensions: [],
      invoices: [],
      payments: [],
      installments: [],
      expenses: [],
      fines: [],
      integrations: [],
    };
  }

  private id(kind: string, n: number): string {
    return demoId(kind, n, this.namespace);
  }

  // ----- time helpers (local calendar of the workspace) -----

  private next(kind: string): number {
    const n = (this.counters.get(kind) ?? 0) + 1;
    this.counters.set(kind, n);
    return n;
  }

  /** Local wall time on today + dayOffset. */
  private at(dayOffset: number, time: string): Date {
    return zonedInstant(addDays(this.today, dayOffset), time, this.tz);
  }

  private date(d: Date): string {
    return localDate(d, this.tz);
  }

  /**
   * Strictly increasing instants earlier today (between the start of business, or of the day, and now), at the
   * given fractions of that span, on whole minutes where the span allows.
   */
  private earlierToday(...fracs: number[]): Date[] {
    const dayStart = this.at(0, '00:00').getTime();
    const open = this.at(0, '07:00').getTime();
    const lo = open < this.nowMs ? open : dayStart;
    return this.spread(lo, this.nowMs, fracs, 'floor');
  }

  /** Strictly increasing instants later today (from now to the close of business, or the end of the day). */
  private laterToday(...fracs: number[]): Date[] {
    const dayEnd = this.at(1, '00:00').getTime();
    const close = this.at(0, '22:00').getTime();
    const hi = close > this.nowMs ? close : dayEnd;
    return this.spread(this.nowMs, hi - 1, fracs, 'ceil');
  }

  private spread(lo: number, hi: number, fracs: number[], round: 'floor' | 'ceil'): Date[] {
    const raw = fracs.map((f) => lo + f * (hi - lo));
    const rounded = raw.map((t) => {
      const r = round === 'floor' ? Math.floor(t / 60_000) * 60_000 : Math.ceil(t / 60_000) * 60_000;
      return r >= lo && r <= hi ? r : t;
    });
    const increasing = (xs: number[]) => xs.every((x, i) => i === 0 || x > xs[i - 1]);
    let out = increasing(rounded) ? rounded : raw.map(Math.round);
    // A span of a few milliseconds (now is exactly the start of the day): step by a millisecond.
    if (!increasing(out)) out = fracs.map((_, i) => lo + i);
    return out.map((t) => new Date(t));
  }

  private iso(d: Date): string {
    return d.toISOString();
  }

  /** An instant no later than now. */
  private past(d: Date | number): Date {
    const t = typeof d === 'number' ? d : d.getTime();
    return new Date(Math.min(t, this.nowMs));
  }

  // ----- money -----

  /** fils including 5% VAT, rounded to whole dirhams. */
  private withVat(fils: number): number {
    return Math.round((fils * 1.05) / 100) * 100;
  }

  private rentalDays(pickup: Date, dropoff: Date): number {
    // two hours' grace on the return
    return Math.max(1, Math.ceil((dropoff.getTime() - pickup.getTime() - 2 * HOUR) / DAY));
  }

  // ----- records -----

  build(): FleetImportDocument {
    this.addFleets();
    this.addCustomers();
    this.addLongTermBookings();
    this.addCurrentBookings();
    this.addMaintenance();
    this.addHistory();
    this.addExtraInvoices();
    this.addTolls();
    this.addDocuments();
    this.addExpenses();
    this.addIntegrations();
    return this.doc;
  }

  private addFleets(): void {
    const rng = new Rng('fleet');
    const plates = new Set<string>();
    const dubaiLetters = [
      'A',
      'B',
      'C',
      'D',
      'F',
      'G',
      'H',
      'I',
      'J',
      'K',
      'L',
      'M',
      'N',
      'P',
      'R',
      'S',
      'T',
      'U',
      'V',
      'W',
      'AA',
      'BB',
      'CC',
      'DD',
    ];
    const plateFor = (f: FleetDef): string => {
      for (;;) {
        const digits = String(rng.int(10000, 99999));
        const code =
          f.key === 'dxb'
            ? rng.pick(dubaiLetters)
            : f.key === 'shj'
              ? String(rng.int(1, 3))
              : String(rng.pick([1, 4, 5, 6, 7, 8, 11, 12, 13, 14, 15, 16, 17]));
        const plate = `${f.emirate} ${code} ${digits}`;
        const key = plate.replace(/ /g, '').toLowerCase();
        if (!plates.has(key)) {
          plates.add(key);
          return plate;
        }
      }
    };
    let n = 0;
    for (const [i, f] of FLEETS.entries()) {
      const ownerId = this.id('owner', i + 1);
      const fleetId = this.id('fleet', i + 1);
      this.doc.owners.push({ id: ownerId, name: f.owner });
      this.doc.fleets.push({ id: fleetId, code: f.code, name: f.name, ownerId });
      for (const category of Object.keys(f.mix) as Category[]) {
        for (let k = 0; k < f.mix[category]; k++) {
          n++;
          const [make, model, aed] = rng.pick(CATALOG[category]);
          // a little spread between cars of one model (age, trim), in steps of AED 5
          const rate = Math.round((aed * (0.95 + rng.next() * 0.12)) / 5) * 500;
          const rec: Vehicle = {
            id: this.id('vehicle', n),
            fleetId,
            make,
            model,
            plate: plateFor(f),
            category,
            dailyRate: Math.min(150_000, Math.max(12_000, rate)),
            state: 'active',
          };
          this.doc.vehicles.push(rec);
          this.vehicles.push({ rec, category, fleet: f, rate: rec.dailyRate, busy: [] });
        }
      }
    }
    // Three cars in the workshop, two retired (sold).
    this.vehicleAt('dxb', 'suv', 6).rec.state = 'in_service';
    this.vehicleAt('shj', 'economy', 5).rec.state = 'in_service';
    this.vehicleAt('auh', 'van', 1).rec.state = 'in_service';
    this.vehicleAt('dxb', 'economy', 7).rec.state = 'inactive';
    this.vehicleAt('shj', 'sedan', 3).rec.state = 'inactive';
  }

  private vehicleAt(fleet: FleetDef['key'], category: Category, index: number): VehicleInfo {
    const v = this.vehicles.filter((x) => x.fleet.key === fleet && x.category === category)[index];
    if (!v) throw new Error(`demo: no ${category} #${index} in ${fleet}`);
    return v;
  }

  private addCustomers(): void {
    const rng = new Rng('customers');
    const prefixes = ['50', '52', '54', '55', '56', '58'];
    const phone = () => `+971 ${rng.pick(prefixes)} ${rng.int(100, 999)} ${rng.int(1000, 9999)}`;
    let n = 0;
    for (const name of PEOPLE) {
      n++;
      const slug = name
        .toLowerCase()
        .replace(/[^a-z ]/g, '')
        .replace(/\s+/g, '.');
      const tourist = rng.chance(0.2);
      const rec: Customer = {
        id: this.id('customer', n),
        name,
        phone: phone(),
        email: `${slug}@${rng.pick(['example.ae', 'mail.example', 'example.com'])}`,
        idDocument: tourist
          ? `Passport ${rng.pick(['GB', 'DE', 'RU', 'IN', 'FR', 'CN', 'PH'])}${rng.int(1_000_000, 9_999_999)}`
          : `784-${rng.int(1965, 2003)}-${rng.int(1_000_000, 9_999_999)}-${rng.int(1, 9)}`,
      };
      this.doc.customers.push(rec);
      this.customers.push({ rec, company: false });
    }
    for (const name of COMPANIES) {
      n++;
      const domain = name
        .toLowerCase()
        .split(' ')
        .slice(0, 2)
        .join('')
        .replace(/[^a-z]/g, '');
      const rec: Customer = {
        id: this.id('customer', n),
        name,
        phone: `+971 4 ${rng.int(200, 899)} ${rng.int(1000, 9999)}`,
        email: `accounts@${domain}.example.ae`,
        idDocument: `Trade licence ${rng.int(100_000, 999_999)}`,
      };
      this.doc.customers.push(rec);
      this.customers.push({ rec, company: true });
    }
  }

  private person(rng: Rng): CustomerInfo {
    return rng.pick(this.customers.filter((c) => !c.company));
  }

  private company(i: number): CustomerInfo {
    return this.customers.filter((c) => c.company)[i];
  }

  // ----- vehicle calendars -----

  private isFree(v: VehicleInfo, start: number, end: number): boolean {
    return v.busy.every(([s, e]) => end <= s || start >= e);
  }

  private reserve(v: VehicleInfo, start: number, end: number): void {
    if (!this.isFree(v, start, end)) throw new Error(`demo: calendar clash on ${v.rec.plate}`);
    v.busy.push([start, end]);
  }

  /** A free active car of the category for [start, end), reserved; cars of the order given by `rng`. */
  private takeVehicle(category: Category, start: number, end: number, rng: Rng, fleet?: FleetDef['key']): VehicleInfo {
    const candidates = rng.shuffle(
      this.vehicles.filter(
        (v) => v.rec.state === 'active' && v.category === category && (!fleet || v.fleet.key === fleet),
      ),
    );
    // a car keeps a couple of hours around each rental for the turnaround
    const found = candidates.find((v) => this.isFree(v, start - 2 * HOUR, end + 2 * HOUR));
    if (!found) throw new Error(`demo: no free ${category} car`);
    this.reserve(found, start, end);
    return found;
  }

  // ----- bookings and their money -----

  private addBooking(spec: BookingSpec, vehicle: VehicleInfo, rng: Rng): BookingInfo {
    const n = this.next('booking');
    const customer = spec.customer ?? this.person(rng);
    const longTerm = spec.type !== 'daily';
    const months = spec.months ?? 1;
    // monthly rates: a month of daily hire discounted by the commitment
    const discount = spec.type === 'monthly' ? 0.6 : spec.type === 'lease' ? 0.5 : 0.7;
    const monthlyAmount = longTerm ? this.withVat(Math.round((vehicle.rate * 30 * discount) / 100) * 100) : null;
    const baseDropoff = spec.original ?? spec.dropoff;
    const rental = longTerm
      ? monthlyAmount! * months
      : this.withVat(vehicle.rate * this.rentalDays(spec.pickup, baseDropoff));
    const addedDays = spec.original
      ? Math.max(1, Math.round((spec.dropoff.getTime() - spec.original.getTime()) / DAY))
      : 0;
    const extensionAmount = spec.original ? this.withVat(vehicle.rate * addedDays) : 0;

    const held = spec.status === 'confirmed' || spec.status === 'active' || spec.status === 'completed';
    const confirmedAt = held
      ? this.past(Math.min(spec.pickup.getTime() - rng.int(6, 240) * HOUR, this.nowMs - rng.int(1, 48) * HOUR))
      : null;
    let returned: Date | null = null;
    if (spec.status === 'completed') {
      const late = rng.int(-45, 40) * 60_000;
      const t = spec.dropoff.getTime() + late;
      returned = t > spec.pickup.getTime() && t <= this.nowMs ? new Date(t) : spec.dropoff;
      if (returned.getTime() > this.nowMs) returned = this.past(spec.dropoff);
    }
    const rec: Booking = {
      id: this.id('booking', n),
      number: `BK-${String(10_000 + n)}`,
      customerId: customer.rec.id,
      vehicleId: vehicle.rec.id,
      type: spec.type,
      status: spec.status,
      pickupAt: this.iso(spec.pickup),
      dropoffAt: this.iso(spec.dropoff),
      originalDropoffAt: spec.original ? this.iso(spec.original) : null,
      amount: rental + extensionAmount,
      monthlyAmount,
      confirmedAt: confirmedAt ? this.iso(confirmedAt) : null,
      returnedAt: returned ? this.iso(returned) : null,
    };
    this.doc.bookings.push(rec);
    const info: BookingInfo = { rec, vehicle, customer, pickup: spec.pickup, dropoff: spec.dropoff, returned, rental };
    this.bookings.push(info);

    const out = spec.status === 'active' || spec.status === 'completed';
    if (spec.original && spec.extendedAt) {
      // an extension is asked for while the car is out, before the original return
      if (spec.extendedAt.getTime() <= spec.pickup.getTime())
        spec.extendedAt = new Date((spec.pickup.getTime() + spec.original.getTime()) / 2);
      this.doc.extensions.push({
        id: this.id('extension', this.next('extension')),
        bookingId: rec.id,
        addedDays,
        amount: extensionAmount,
        previousDropoffAt: this.iso(spec.original),
        newDropoffAt: this.iso(spec.dropoff),
        createdAt: this.iso(spec.extendedAt),
      } satisfies Extension);
    }

    if (longTerm) {
      if (held) this.addInstallments(info, spec, monthlyAmount!, months, rng);
    } else if (held) {
      const issue = spec.invoice ?? out;
      if (issue) {
        const issueDate = out ? this.date(spec.pickup) : this.date(confirmedAt!);
        const dueDate = spec.due ?? this.date(spec.pickup);
        const inv = this.addInvoice(
          customer,
          rec.id,
          'rental',
          issueDate,
          dueDate < issueDate ? issueDate : dueDate,
          rental,
        );
        const firstAt = out ? spec.pickup : confirmedAt!;
        const laterAt = returned ?? this.now;
        // the rest of a split payment is taken on return; a car still out keeps it open
        const plan = spec.pay === 'split' && !returned ? 'partial' : (spec.pay ?? 'full');
        this.pay(inv, plan, customer, rec.id, firstAt, laterAt, rng);
      }
      if (spec.original && spec.extendedAt && out) {
        const d = this.date(spec.extendedAt);
        const inv = this.addInvoice(customer, rec.id, 'extension', d, d, extensionAmount);
        // extensions are settled on return; an active one is still open
        this.pay(
          inv,
          spec.status === 'completed' ? 'full' : 'none',
          customer,
          rec.id,
          returned ?? spec.extendedAt,
          returned ?? this.now,
          rng,
        );
      }
    }
    if (out && spec.deposit !== false) {
      const amount = DEPOSIT[vehicle.category];
      this.addPayment({
        kind: 'deposit',
        amount,
        customerId: customer.rec.id,
        bookingId: rec.id,
        at: this.iso(this.past(spec.pickup)),
      });
      if (returned) {
        // deposits are kept 14 to 21 days after the return, for fines and tolls that arrive late
        const release = returned.getTime() + rng.int(14, 21) * DAY;
        if (release <= this.nowMs) {
          this.addPayment({
            kind: 'deposit_release',
            amount,
            customerId: customer.rec.id,
            bookingId: rec.id,
            at: this.iso(new Date(release)),
          });
        }
      }
    }
    return info;
  }

  private addInstallments(b: BookingInfo, spec: BookingSpec, monthly: number, months: number, rng: Rng): void {
    const first = this.date(b.pickup);
    const horizon = addDays(this.today, 7);
    const out = b.rec.status === 'active' || b.rec.status === 'completed';
    for (let k = 0; k < months; k++) {
      const due = addMonths(first, k);
      const rec: Installment = {
        id: this.id('installment', this.next('installment')),
        bookingId: b.rec.id,
        number: k + 1,
        of: months,
        dueDate: due,
        amount: monthly,
        invoiceId: null,
        paidAt: null,
      };
      this.doc.installments.push(rec);
      if (spec.noInvoice?.includes(k)) {
        const at = zonedInstant(due, '10:00', this.tz);
        if (at.getTime() <= this.nowMs) {
          rec.paidAt = this.iso(at);
          this.addPayment({
            kind: 'charge',
            amount: monthly,
            customerId: b.customer.rec.id,
            bookingId: b.rec.id,
            at: rec.paidAt,
          });
        }
        continue;
      }
      // invoices go out a week ahead of the due date
      if (due > horizon) continue;
      const issueDate = addDays(due, -7) > this.today ? this.today : addDays(due, -7);
      const inv = this.addInvoice(b.customer, b.rec.id, 'installment', issueDate, due, monthly);
      rec.invoiceId = inv.id;
      // the first month is paid at the handover; later ones on the due date give or take a few days (a payment
      // that would fall after now has not been made yet: the installment is open)
      const scheduled = zonedInstant(
        addDays(due, rng.int(-3, 2)),
        `${String(rng.int(9, 17)).padStart(2, '0')}:${rng.pick(['00', '15', '30', '45'])}`,
        this.tz,
      );
      if (spec.unpaid?.includes(k)) continue;
      const at = k === 0 && out ? this.past(b.pickup) : scheduled;
      if (at.getTime() > this.nowMs) continue;
      if (spec.halfPaid?.includes(k)) {
        this.addPayment({
          kind: 'charge',
          amount: Math.round(monthly / 200) * 100,
          customerId: b.customer.rec.id,
          bookingId: b.rec.id,
          invoiceId: inv.id,
          at: this.iso(at),
        });
        continue;
      }
      this.addPayment({
        kind: 'charge',
        amount: monthly,
        customerId: b.customer.rec.id,
        bookingId: b.rec.id,
        invoiceId: inv.id,
        at: this.iso(at),
      });
      rec.paidAt = this.iso(at);
    }
  }

  private addInvoice(
    customer: CustomerInfo,
    bookingId: string | null,
    purpose: Invoice['purpose'],
    issueDate: string,
    dueDate: string,
    total: number,
    status: Invoice['status'] = 'issued',
  ): Invoice {
    const n = this.next('invoice');
    const rec: Invoice = {
      id: this.id('invoice', n),
      number: `INV-${String(20_000 + n)}`,
      customerId: customer.rec.id,
      bookingId,
      purpose,
      issueDate,
      dueDate,
      total,
      status,
    };
    this.doc.invoices.push(rec);
    this.invoicesById.set(rec.id, rec);
    return rec;
  }

  private addPayment(p: Omit<Payment, 'id'>): Payment {
    if (Date.parse(p.at) > this.nowMs) throw new Error(`demo: payment in the future (${p.at})`);
    const rec: Payment = {
      id: this.id('payment', this.next('payment')),
      status: 'captured',
      bookingId: null,
      invoiceId: null,
      ...p,
    };
    this.doc.payments.push(rec);
    return rec;
  }

  /** Payments against an invoice by plan; `firstAt` is when the first charge happens, `laterAt` the rest. */
  private pay(
    inv: Invoice,
    plan: PayPlan,
    customer: CustomerInfo,
    bookingId: string | null,
    firstAt: Date,
    laterAt: Date,
    rng: Rng,
  ): void {
    const base = { customerId: customer.rec.id, bookingId, invoiceId: inv.id };
    const first = this.iso(this.past(firstAt));
    const later = this.iso(this.past(laterAt.getTime() < firstAt.getTime() ? firstAt : laterAt));
    const part = Math.max(100, Math.round((inv.total * rng.int(30, 70)) / 100 / 100) * 100);
    switch (plan) {
      case 'full':
        this.addPayment({ kind: 'charge', amount: inv.total, at: first, ...base });
        break;
      case 'partial':
        this.addPayment({ kind: 'charge', amount: Math.min(part, inv.total - 100), at: first, ...base });
        break;
      case 'split':
        this.addPayment({ kind: 'charge', amount: part, at: first, ...base });
        this.addPayment({ kind: 'charge', amount: inv.total - part, at: later, ...base });
        break;
      case 'refund': {
        // charged for more days than used: the difference goes back on return
        const extra = Math.round((inv.total * 0.25) / 100) * 100 || 100;
        this.addPayment({ kind: 'charge', amount: inv.total + extra, at: first, ...base });
        this.addPayment({ kind: 'refund', amount: extra, at: later, ...base });
        break;
      }
      case 'declined': {
        const t = this.past(new Date(Date.parse(first) - 5 * 60_000));
        this.addPayment({ kind: 'charge', status: 'canceled', amount: inv.total, at: this.iso(t), ...base });
        this.addPayment({ kind: 'charge', amount: inv.total, at: first, ...base });
        break;
      }
      case 'none':
        break;
    }
  }

  /** Leases, rent-to-own and monthly rentals: placed first, they hold their cars for months. */
  private addLongTermBookings(): void {
    const rng = new Rng('long-term');
    const T = this.today;
    const long = (
      spec: Omit<BookingSpec, 'pickup' | 'dropoff'> & { start: string; time: string; fleet?: FleetDef['key'] },
    ) => {
      const pickup = zonedInstant(spec.start, spec.time, this.tz);
      const dropoff = zonedInstant(addMonths(spec.start, spec.months!), spec.time, this.tz);
      const v = this.takeVehicle(spec.category, pickup.getTime(), dropoff.getTime(), rng, spec.fleet);
      return this.addBooking({ ...spec, pickup, dropoff }, v, rng);
    };
    // Lease of a van to a contractor: the next installment falls due in two days (invoiced, open).
    long({
      type: 'lease',
      status: 'active',
      category: 'van',
      fleet: 'shj',
      start: addMonths(addDays(T, 2), -8),
      time: '10:00',
      months: 24,
      customer: this.company(0),
    });
    // Lease of a van to a logistics firm: the latest installment is five days overdue.
    long({
      type: 'lease',
      status: 'active',
      category: 'van',
      fleet: 'dxb',
      start: addMonths(addDays(T, -5), -14),
      time: '09:00',
      months: 24,
      customer: this.company(1),
      unpaid: [14],
    });
    // Rent-to-own in arrears: three installments unpaid, about 5, 35 and 65 days overdue.
    long({
      type: 'rent_to_own',
      status: 'active',
      category: 'sedan',
      start: addMonths(addDays(T, -5), -10),
      time: '12:00',
      months: 36,
      customer: this.customers[20],
      unpaid: [8, 9, 10],
    });
    // Rent-to-own in good standing: next installment in twelve days, not yet invoiced.
    long({
      type: 'rent_to_own',
      status: 'active',
      category: 'suv',
      start: addMonths(addDays(T, 12), -4),
      time: '16:00',
      months: 48,
      customer: this.customers[16],
    });
    // Corporate lease of a luxury car.
    long({
      type: 'lease',
      status: 'active',
      category: 'luxury',
      fleet: 'auh',
      start: addMonths(addDays(T, 20), -3),
      time: '11:00',
      months: 12,
      customer: this.company(4),
    });
    // Monthly rentals: one paid up, one half paid (overdue), one finished.
    long({
      type: 'monthly',
      status: 'active',
      category: 'economy',
      start: addDays(T, -20),
      time: '10:30',
      months: 2,
      customer: this.customers[22],
    });
    long({
      type: 'monthly',
      status: 'active',
      category: 'sedan',
      start: addMonths(addDays(T, -3), -1),
      time: '18:00',
      months: 3,
      customer: this.customers[11],
      halfPaid: [1],
    });
    long({
      type: 'monthly',
      status: 'completed',
      category: 'suv',
      start: addDays(T, -100),
      time: '13:00',
      months: 2,
      customer: this.customers[25],
    });
    // A finished lease; its first two months were paid at signing, before invoicing went live.
    long({
      type: 'lease',
      status: 'completed',
      category: 'economy',
      start: addMonths(addDays(T, -61), -12),
      time: '09:30',
      months: 12,
      customer: this.company(2),
      noInvoice: [0, 1],
    });
    // A monthly rental that starts in five days; its first month is invoiced and not yet paid.
    long({
      type: 'monthly',
      status: 'confirmed',
      category: 'economy',
      start: addDays(T, 5),
      time: '09:00',
      months: 3,
      customer: this.company(3),
    });
    // A lease still awaiting approval, and a monthly rental the customer called off.
    const pendingLease = zonedInstant(addDays(T, 10), '10:00', this.tz);
    this.addBooking(
      {
        type: 'lease',
        status: 'pending',
        category: 'suv',
        pickup: pendingLease,
        dropoff: zonedInstant(addMonths(addDays(T, 10), 12), '10:00', this.tz),
        months: 12,
        customer: this.customers[1],
      },
      this.pickAny('suv', rng),
      rng,
    );
    this.addBooking(
      {
        type: 'monthly',
        status: 'canceled',
        category: 'sedan',
        pickup: this.at(15, '10:00'),
        dropoff: zonedInstant(addMonths(addDays(T, 15), 1), '10:00', this.tz),
        months: 1,
        customer: this.customers[27],
      },
      this.pickAny('sedan', rng),
      rng,
    );
  }

  /** Any car of the category, not reserved (pending and canceled bookings hold no car). */
  private pickAny(category: Category, rng: Rng): VehicleInfo {
    return rng.pick(this.vehicles.filter((v) => v.rec.state === 'active' && v.category === category));
  }

  /** Today's handovers and returns, cars out now (some late, some extended), upcoming and pending bookings. */
  private addCurrentBookings(): void {
    const rng = new Rng('current');
    const [h5Pickup, r5Drop, h3Pickup, r3Drop, h4Pickup, r4Drop, h5Drop] = this.earlierToday(
      0.05,
      0.1,
      0.3,
      0.45,
      0.55,
      0.65,
      0.85,
    );
    const [h1Pickup, r1Drop, h2Pickup, r2Drop] = this.laterToday(0.15, 0.35, 0.55, 0.8);
    const at = (d: number, t: string) => this.at(d, t);
    const held: Array<BookingSpec & { hold?: number }> = [
      // handovers today
      {
        type: 'daily',
        status: 'confirmed',
        category: 'economy',
        pickup: h1Pickup,
        dropoff: at(3, '10:00'),
        invoice: true,
        pay: 'full',
      },
      {
        type: 'daily',
        status: 'confirmed',
        category: 'suv',
        pickup: h2Pickup,
        dropoff: at(7, '18:00'),
        invoice: true,
        pay: 'none',
      },
      {
        type: 'daily',
        status: 'active',
        category: 'sedan',
        pickup: h3Pickup,
        dropoff: at(2, '12:00'),
        pay: 'declined',
      },
      {
        type: 'monthly',
        status: 'active',
        category: 'van',
        pickup: h4Pickup,
        dropoff: zonedInstant(addMonths(this.today, 1), localTime(h4Pickup, this.tz), this.tz),
        months: 1,
      },
      { type: 'daily', status: 'completed', category: 'luxury', pickup: h5Pickup, dropoff: h5Drop, pay: 'full' },
      // returns today
      {
        type: 'daily',
        status: 'active',
        category: 'economy',
        pickup: at(-4, '09:30'),
        dropoff: r1Drop,
        pay: 'partial',
      },
      { type: 'daily', status: 'active', category: 'suv', pickup: at(-2, '14:00'), dropoff: r2Drop, pay: 'full' },
      { type: 'daily', status: 'completed', category: 'sedan', pickup: at(-3, '11:00'), dropoff: r3Drop, pay: 'split' },
      {
        type: 'daily',
        status: 'completed',
        category: 'economy',
        pickup: at(-6, '10:00'),
        original: at(-2, '10:00'),
        extendedAt: at(-3, '16:00'),
        dropoff: r4Drop,
        pay: 'refund',
      },
      // late: due back earlier today, yesterday, two days ago
      {
        type: 'daily',
        status: 'active',
        category: 'sedan',
        pickup: at(-3, '08:00'),
        dropoff: r5Drop,
        pay: 'full',
        hold: 2,
      },
      {
        type: 'daily',
        status: 'active',
        category: 'suv',
        pickup: at(-5, '10:00'),
        dropoff: at(-1, '18:00'),
        pay: 'partial',
        hold: 2,
      },
      {
        type: 'daily',
        status: 'active',
        category: 'economy',
        pickup: at(-9, '12:00'),
        dropoff: at(-2, '12:00'),
        pay: 'none',
        hold: 3,
      },
      // out now
      {
        type: 'daily',
        status: 'active',
        category: 'economy',
        pickup: at(-2, '10:00'),
        dropoff: at(5, '10:00'),
        pay: 'full',
      },
      {
        type: 'daily',
        status: 'active',
        category: 'sedan',
        pickup: at(-1, '19:00'),
        dropoff: at(1, '19:00'),
        pay: 'full',
      },
      {
        type: 'daily',
        status: 'active',
        category: 'suv',
        pickup: at(-6, '09:00'),
        original: at(-1, '09:00'),
        extendedAt: at(-2, '13:00'),
        dropoff: at(3, '09:00'),
        pay: 'full',
      },
      {
        type: 'daily',
        status: 'active',
        category: 'luxury',
        pickup: at(-3, '16:00'),
        dropoff: at(4, '16:00'),
        pay: 'full',
      },
      {
        type: 'daily',
        status: 'active',
        category: 'economy',
        pickup: at(-1, '08:30'),
        dropoff: at(1, '08:30'),
        pay: 'full',
      },
      {
        type: 'daily',
        status: 'active',
        category: 'sedan',
        pickup: at(-4, '13:00'),
        dropoff: at(10, '13:00'),
        pay: 'partial',
        due: addDays(this.today, 10),
        customer: this.company(3),
      },
      {
        type: 'daily',
        status: 'active',
        category: 'van',
        pickup: at(-2, '07:30'),
        dropoff: at(2, '19:00'),
        pay: 'full',
        customer: this.company(2),
      },
      // upcoming
      {
        type: 'daily',
        status: 'confirmed',
        category: 'economy',
        pickup: at(1, '10:00'),
        dropoff: at(4, '10:00'),
        invoice: true,
        pay: 'full',
      },
      { type: 'daily', status: 'confirmed', category: 'sedan', pickup: at(2, '15:00'), dropoff: at(5, '15:00') },
      {
        type: 'daily',
        status: 'confirmed',
        category: 'suv',
        pickup: at(3, '09:00'),
        dropoff: at(10, '09:00'),
        invoice: true,
        pay: 'partial',
      },
      {
        type: 'daily',
        status: 'confirmed',
        category: 'luxury',
        pickup: at(5, '20:00'),
        dropoff: at(8, '12:00'),
        invoice: true,
        pay: 'full',
      },
      { type: 'daily', status: 'confirmed', category: 'van', pickup: at(7, '08:00'), dropoff: at(9, '20:00') },
      { type: 'daily', status: 'confirmed', category: 'economy', pickup: at(12, '11:00'), dropoff: at(19, '11:00') },
      { type: 'daily', status: 'confirmed', category: 'suv', pickup: at(20, '10:00'), dropoff: at(27, '10:00') },
    ];
    for (const spec of held) {
      const end =
        spec.status === 'active' && spec.dropoff.getTime() < this.nowMs
          ? this.nowMs + (spec.hold ?? 2) * DAY
          : spec.dropoff.getTime();
      const v = this.takeVehicle(spec.category, spec.pickup.getTime(), end, rng);
      this.addBooking(spec, v, rng);
    }
    // Pending requests and cancellations hold no car.
    const loose: BookingSpec[] = [
      { type: 'daily', status: 'pending', category: 'economy', pickup: at(2, '09:00'), dropoff: at(6, '09:00') },
      { type: 'daily', status: 'pending', category: 'sedan', pickup: at(6, '12:00'), dropoff: at(9, '12:00') },
      { type: 'daily', status: 'pending', category: 'suv', pickup: at(14, '10:00'), dropoff: at(21, '10:00') },
      { type: 'daily', status: 'canceled', category: 'economy', pickup: at(-10, '10:00'), dropoff: at(-7, '10:00') },
      { type: 'daily', status: 'canceled', category: 'luxury', pickup: at(-60, '18:00'), dropoff: at(-58, '18:00') },
    ];
    for (const spec of loose) this.addBooking(spec, this.pickAny(spec.category, rng), rng);
    // A prepaid booking canceled yesterday: its invoice is void and the charge refunded in full.
    const c = this.addBooking(
      { type: 'daily', status: 'canceled', category: 'suv', pickup: at(4, '10:00'), dropoff: at(8, '10:00') },
      this.pickAny('suv', rng),
      rng,
    );
    const inv = this.addInvoice(
      c.customer,
      c.rec.id,
      'rental',
      addDays(this.today, -6),
      addDays(this.today, 4),
      c.rental,
      'void',
    );
    this.addPayment({
      kind: 'charge',
      amount: c.rental,
      customerId: c.customer.rec.id,
      bookingId: c.rec.id,
      invoiceId: inv.id,
      at: this.iso(this.past(at(-6, '15:20'))),
    });
    this.addPayment({
      kind: 'refund',
      amount: c.rental,
      customerId: c.customer.rec.id,
      bookingId: c.rec.id,
      invoiceId: inv.id,
      at: this.iso(this.past(at(-1, '11:05'))),
    });
  }

  /** Workshop time: current blocks for cars in service, a few booked services ahead, past services. */
  private addMaintenance(): void {
    const rng = new Rng('maintenance');
    const add = (v: VehicleInfo, start: Date, end: Date, reason: string) => {
      this.reserve(v, start.getTime(), end.getTime());
      this.doc.maintenance.push({
        id: this.id('maintenance', this.next('maintenance')),
        vehicleId: v.rec.id,
        startsAt: this.iso(start),
        endsAt: this.iso(end),
        reason,
      } satisfies Maintenance);
    };
    const reasons = [
      'Gearbox repair',
      'Accident repair: rear bumper and tail light',
      'Air conditioning compressor replacement',
    ];
    for (const [i, v] of this.vehicles.filter((x) => x.rec.state === 'in_service').entries()) {
      add(v, this.at(-1 - i, '08:00'), this.at(2 + i * 2, '17:00'), reasons[i % reasons.length]);
    }
    const active = rng.shuffle(this.vehicles.filter((v) => v.rec.state === 'active'));
    const ahead = [
      'Scheduled 40,000 km service',
      'Tyre replacement (4 tyres)',
      'Annual RTA inspection',
      'Windscreen replacement',
    ];
    let placed = 0;
    for (const v of active) {
      if (placed >= ahead.length) break;
      const d = 3 + placed * 4;
      const start = this.at(d, '08:00');
      const end = this.at(d + 1, '12:00');
      if (!this.isFree(v, start.getTime() - 2 * HOUR, end.getTime() + 2 * HOUR)) continue;
      add(v, start, end, ahead[placed]);
      placed++;
    }
    const pastReasons = [
      'Scheduled service',
      'Brake pads and discs',
      'Battery replacement',
      'Tyre puncture repair',
      'Body work: scratches',
      'Oil change',
    ];
    let done = 0;
    for (const v of rng.shuffle(active)) {
      if (done >= 12) break;
      const d = -rng.int(10, 170);
      const start = this.at(d, '08:00');
      const end = this.at(d + rng.int(1, 3), '16:00');
      if (!this.isFree(v, start.getTime() - 2 * HOUR, end.getTime() + 2 * HOUR)) continue;
      add(v, start, end, rng.pick(pastReasons));
      done++;
    }
  }

  /** Six months of finished daily rentals filling the gaps of every car's calendar. */
  private addHistory(): void {
    const rng = new Rng('history');
    const times = [
      '09:00',
      '09:30',
      '10:00',
      '10:30',
      '11:00',
      '12:00',
      '13:30',
      '15:00',
      '16:00',
      '17:30',
      '18:00',
      '19:00',
      '20:00',
    ];
    for (const v of this.vehicles) {
      // retired cars stopped renting three months ago
      const stop = v.rec.state === 'inactive' ? addDays(this.today, -90) : addDays(this.today, -1);
      let d = addDays(this.today, -183 + rng.int(0, 6));
      for (;;) {
        const r = rng.next();
        const days =
          r < 0.15
            ? 1
            : r < 0.45
              ? rng.int(2, 3)
              : r < 0.8
                ? rng.int(4, 7)
                : r < 0.95
                  ? rng.int(8, 14)
                  : rng.int(15, 24);
        const t = rng.pick(times);
        const end = addDays(d, days);
        if (end > stop) break;
        const pickup = zonedInstant(d, t, this.tz);
        const dropoff = zonedInstant(end, rng.pick(times), this.tz);
        const roll = rng.next();
        const extended = rng.chance(0.06) && days >= 3;
        const planRoll = rng.next();
        const category = v.category;
        if (
          dropoff.getTime() > pickup.getTime() + HOUR &&
          this.isFree(v, pickup.getTime() - 2 * HOUR, dropoff.getTime() + 2 * HOUR)
        ) {
          if (roll < 0.04) {
            this.addBooking({ type: 'daily', status: 'canceled', category, pickup, dropoff }, v, rng);
          } else {
            this.reserve(v, pickup.getTime(), dropoff.getTime());
            const original = extended ? new Date(dropoff.getTime() - rng.int(1, 2) * DAY) : undefined;
            const plan: PayPlan =
              planRoll < 0.82
                ? 'full'
                : planRoll < 0.92
                  ? 'split'
                  : planRoll < 0.95
                    ? 'declined'
                    : planRoll < 0.97
                      ? 'refund'
                      : 'partial';
            this.addBooking(
              {
                type: 'daily',
                status: 'completed',
                category,
                pickup,
                dropoff,
                original,
                extendedAt: original ? new Date(original.getTime() - rng.int(3, 20) * HOUR) : undefined,
                pay: plan,
                deposit: !rng.chance(0.1),
              },
              v,
              rng,
            );
          }
        }
        d = addDays(end, rng.int(2, 16));
      }
    }
  }

  /** The finished rental ending latest on or before `date`. */
  private finishedBy(date: string, rng: Rng): BookingInfo {
    const found = this.bookings
      .filter((b) => b.rec.status === 'completed' && b.rec.type === 'daily' && this.date(b.dropoff) <= date)
      .sort((a, b) => b.dropoff.getTime() - a.dropoff.getTime())
      .slice(0, 4);
    if (found.length === 0) throw new Error(`demo: no finished rental by ${date}`);
    return rng.pick(found);
  }

  /** Damage, fines re-charged, Salik, extras: the invoices that put open balances in every ageing bucket. */
  private addExtraInvoices(): void {
    const rng = new Rng('extra-invoices');
    const T = this.today;
    const specs: Array<{
      purpose: Invoice['purpose'];
      due: number;
      plan: PayPlan;
      total?: number;
      status?: Invoice['status'];
    }> = [
      { purpose: 'damage', due: -95, plan: 'none', total: 420_000 }, // disputed, 61+
      { purpose: 'salik', due: -70, plan: 'none' }, // 61+
      { purpose: 'fine', due: -40, plan: 'none' }, // 31-60
      { purpose: 'damage', due: -48, plan: 'partial', total: 185_000 }, // 31-60
      { purpose: 'damage', due: -12, plan: 'partial', total: 95_000 }, // 1-30
      { purpose: 'other', due: 9, plan: 'none', total: 31_500 }, // not yet due: delivery and collection fee
      { purpose: 'damage', due: -130, plan: 'full', total: 260_000 },
      { purpose: 'fine', due: -150, plan: 'full' },
      { purpose: 'fine', due: -20, plan: 'full' },
      { purpose: 'salik', due: -100, plan: 'full' },
      { purpose: 'salik', due: -35, plan: 'full' },
      { purpose: 'salik', due: -8, plan: 'full' },
      { purpose: 'other', due: -75, plan: 'full', total: 21_000 },
      { purpose: 'other', due: -30, plan: 'none', total: 52_500, status: 'void' }, // issued in error
    ];
    for (const s of specs) {
      const dueDate = addDays(T, s.due);
      const issueDate = addDays(dueDate, -7) > T ? T : addDays(dueDate, -7);
      const b = this.finishedBy(issueDate, rng);
      let total = s.total ?? 0;
      const issuedAt = zonedInstant(issueDate, '09:00', this.tz).getTime();
      if (s.purpose === 'fine') total = this.addFine(b, rng, issuedAt).amount + 5_000; // AED 50 admin fee on re-charged fines
      if (s.purpose === 'salik') {
        const crossings = rng.int(4, 12);
        for (let i = 0; i < crossings; i++) this.addToll(b, rng, 'recharged');
        total = crossings * 500; // AED 4 toll + AED 1 service charge per crossing
      }
      const inv = this.addInvoice(b.customer, b.rec.id, s.purpose, issueDate, dueDate, total, s.status ?? 'issued');
      const paidAt = zonedInstant(addDays(issueDate, rng.int(0, 6)), '12:00', this.tz);
      this.pay(inv, s.plan, b.customer, b.rec.id, paidAt, paidAt, rng);
    }
    // Traffic fines not (yet) passed on to a customer.
    const recent = this.bookings.filter(
      (b) => (b.rec.status === 'completed' || b.rec.status === 'active') && b.pickup.getTime() < this.nowMs - 3 * DAY,
    );
    for (const b of rng.shuffle(recent).slice(0, 6)) this.addFine(b, rng);
  }

  private fineInstant(b: BookingInfo, rng: Rng): Date {
    const end = Math.min(b.dropoff.getTime(), this.nowMs - DAY);
    return new Date(b.pickup.getTime() + rng.next() * Math.max(HOUR, end - b.pickup.getTime()));
  }

  private addFine(b: BookingInfo, rng: Rng, recordedBy = this.nowMs): Fine {
    const when = this.fineInstant(b, rng);
    const kinds: Array<[string, string, number, string]> = [
      ['speeding', 'Exceeding the speed limit by up to 20 km/h', 30_000, 'Police'],
      ['speeding', 'Exceeding the speed limit by 30 to 40 km/h', 70_000, 'Police'],
      ['parking', 'Parking without paying the parking fee', 15_000, 'Municipality'],
      ['red_light', 'Jumping a red light', 100_000, 'Police'],
      ['lane', 'Sudden swerving', 100_000, 'Police'],
      ['mobile', 'Using a mobile phone while driving', 80_000, 'Police'],
    ];
    const [type, violation, amount, by] = rng.pick(kinds);
    const emirate = b.vehicle.fleet.emirate;
    const authority =
      by === 'Police' ? `${emirate} Police` : emirate === 'Dubai' ? 'RTA Dubai' : `${emirate} City Municipality`;
    const recorded = this.past(Math.min(when.getTime() + rng.int(2, 20) * DAY, recordedBy));
    const rec: Fine = {
      id: this.id('fine', this.next('fine')),
      kind: 'fine',
      type,
      date: this.date(when),
      amount,
      authority,
      violation,
      number: `${b.vehicle.fleet.code}-${rng.int(10_000_000, 99_999_999)}`,
      status: rng.pick(['unpaid', 'paid', 'paid', 'disputed']),
      vehicleId: b.vehicle.rec.id,
      bookingId: b.rec.id,
      customerId: b.customer.rec.id,
      recordedAt: this.iso(recorded.getTime() < when.getTime() ? when : recorded),
    };
    this.doc.fines.push(rec);
    return rec;
  }

  private addToll(b: BookingInfo, rng: Rng, status: string): Fine {
    const when = this.fineInstant(b, rng);
    const abuDhabi = b.vehicle.fleet.key === 'auh';
    const gates = abuDhabi
      ? ['Sheikh Zayed Bridge', 'Sheikh Khalifa Bridge', 'Al Maqta Bridge', 'Mussafah Bridge']
      : [
          'Al Garhoud Bridge',
          'Al Maktoum Bridge',
          'Al Safa',
          'Al Barsha',
          'Jebel Ali',
          'Airport Tunnel',
          'Al Mamzar North',
          'Business Bay Crossing',
        ];
    const rec: Fine = {
      id: this.id('fine', this.next('fine')),
      kind: 'toll',
      type: abuDhabi ? 'darb' : 'salik',
      date: this.date(when),
      amount: abuDhabi ? 400 : rng.pick([400, 400, 600]),
      authority: abuDhabi ? 'Darb (ITC Abu Dhabi)' : 'Salik (RTA Dubai)',
      violation: `${rng.pick(gates)} gate`,
      number: `${abuDhabi ? 'DRB' : 'SLK'}${rng.int(100_000_000, 999_999_999)}`,
      status,
      vehicleId: b.vehicle.rec.id,
      bookingId: b.rec.id,
      customerId: b.customer.rec.id,
      recordedAt: this.iso(this.past(when.getTime() + rng.int(1, 3) * DAY)),
    };
    this.doc.fines.push(rec);
    return rec;
  }

  /** Tolls on cars out now and recently returned, not yet invoiced. */
  private addTolls(): void {
    const rng = new Rng('tolls');
    const recent = this.bookings.filter(
      (b) =>
        (b.rec.status === 'active' || b.rec.status === 'completed') &&
        b.pickup.getTime() < this.nowMs - 2 * DAY &&
        b.dropoff.getTime() > this.nowMs - 20 * DAY,
    );
    for (const b of recent.slice(0, 12)) {
      const n = rng.int(1, 4);
      for (let i = 0; i < n; i++) this.addToll(b, rng, 'pending');
    }
  }

  /** Registration, insurance and (vans, luxury) permits; a few lapse today, in 7 days and within 30 days. */
  private addDocuments(): void {
    const rng = new Rng('documents');
    const soon = [0, 7, 30, 2, 12, 19, 26];
    let s = 0;
    for (const v of this.vehicles) {
      if (v.rec.state === 'inactive') continue;
      const docs: Array<[VehicleDocument['docType'], string]> = [
        ['registration', `${v.fleet.emirate} vehicle registration (mulkiya) ${v.rec.plate}`],
        ['insurance', `${rng.pick(INSURERS)} comprehensive policy ${rng.int(1_000_000, 9_999_999)}`],
      ];
      if (v.category === 'van' || v.category === 'luxury')
        docs.push(['permit', `${v.fleet.emirate} commercial passenger transport permit`]);
      for (const [docType, detail] of docs) {
        let days = rng.int(40, 360);
        // every fifth car has one document running out soon
        if (this.doc.vehicleDocuments.length % 5 === 1 && s < soon.length) days = soon[s++];
        this.doc.vehicleDocuments.push({
          id: this.id('document', this.next('document')),
          vehicleId: v.rec.id,
          docType,
          detail,
          expiresAt: addDays(this.today, days),
        });
      }
    }
  }

  /** Six months of running costs, the current month up to today. */
  private addExpenses(): void {
    const rng = new Rng('expenses');
    const month0 = startOfMonth(this.today);
    const cars = this.vehicles.filter((v) => v.rec.state !== 'inactive');
    for (let m = 5; m >= 0; m--) {
      const first = addMonths(month0, -m);
      const last = m === 0 ? this.today : addDays(addMonths(first, 1), -1);
      const span = daysBetween(first, last);
      const day = () => addDays(first, rng.int(0, span));
      const add = (category: string, amount: number, vehicleId: string | null, date: string) =>
        this.doc.expenses.push({
          id: this.id('expense', this.next('expense')),
          vehicleId,
          category,
          amount,
          date,
        } satisfies Expense);
      for (let i = 0; i < 3; i++) add('insurance', rng.int(380, 520) * 1000, null, first);
      add('salik', rng.int(150, 280) * 1000, null, day());
      for (let i = 0; i < 8; i++) add('fuel', rng.int(60, 250) * 100, rng.pick(cars).rec.id, day());
      for (let i = 0; i < 10; i++) add('maintenance', rng.int(25, 400) * 1000, rng.pick(cars).rec.id, day());
      for (let i = 0; i < 12; i++) add('cleaning', rng.int(35, 150) * 100, rng.pick(cars).rec.id, day());
    }
  }

  private addIntegrations(): void {
    this.doc.integrations.push(
      {
        id: this.id('integration', 1),
        integration: 'payment_gateway',
        status: 'ok',
        detail: null,
        hint: null,
        failingSince: null,
      },
      {
        id: this.id('integration', 2),
        integration: 'esignature',
        status: 'failing',
        detail: 'invalid_grant: The refresh token has expired or has been revoked by the account administrator.',
        hint: 'Reconnect the e-signature account under Settings > Integrations, signing in as an account administrator.',
        failingSince: this.iso(new Date(this.nowMs - 26 * HOUR - 17 * 60_000)),
      },
      {
        id: this.id('integration', 3),
        integration: 'whatsapp',
        status: 'ok',
        detail: null,
        hint: null,
        failingSince: null,
      },
    );
  }
}

/**
 * The demo import document laid out around `now` on the local calendar of `timeZone`. `namespace` (seedDemo passes
 * the workspace id) keeps the ids of one demo workspace apart from another's; the data is the same.
 */
export function buildDemoDocument(now: Date, timeZone: string, namespace?: string): FleetImportDocument {
  return new DemoBuilder(now, timeZone, namespace).build();
}

/** Creates the workspace when missing (Asia/Dubai), imports the demo document into it and makes a demo key. */
export async function seedDemo(
  db: Knex,
  workspaceSlug: string,
  now = new Date(),
): Promise<{ workspace: string; key: string }> {
  let workspace: WorkspaceRecord;
  try {
    workspace = await findWorkspace(db, workspaceSlug);
  } catch (err) {
    if (!(err instanceof InputError)) throw err;
    try {
      workspace = await createWorkspace(db, cliActor(), { slug: workspaceSlug, timezone: 'Asia/Dubai' });
    } catch (raced) {
      // another process created it in between
      if (!(raced instanceof InputError)) throw raced;
      workspace = await findWorkspace(db, workspaceSlug);
    }
  }
  await importDocument(db, cliActor(), {
    workspace: workspace.slug,
    document: buildDemoDocument(now, workspace.timezone, workspace.id),
  });
  const key = await createApiKey(db, cliActor(), {
    workspaceId: (await findWorkspace(db, workspace.slug)).id,
    role: 'demo',
  });
  return { workspace: workspace.slug, key: key.key };
}
