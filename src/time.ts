// Local-calendar helpers for workspace time zones (IANA names), built on Intl only.
// A "date" is a plain 'YYYY-MM-DD' string on the local calendar; an "instant" is a JS Date (UTC).

const DAY_MS = 86_400_000;
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

/** The wall-clock fields of `instant` in `timeZone`. */
function wallFields(
  instant: number,
  timeZone: string,
): { year: number; month: number; day: number; hour: number; minute: number; second: number } {
  const out: Record<string, number> = {};
  for (const p of formatter(timeZone).formatToParts(new Date(instant))) {
    if (p.type !== 'literal') out[p.type] = Number(p.value);
  }
  return {
    year: out.year,
    month: out.month,
    day: out.day,
    hour: out.hour % 24,
    minute: out.minute,
    second: out.second,
  };
}

/** Offset of `timeZone` from UTC at `instant`, in milliseconds (local = UTC + offset). */
export function zoneOffsetMs(instant: number | Date, timeZone: string): number {
  const t = typeof instant === 'number' ? instant : instant.getTime();
  const w = wallFields(t, timeZone);
  const wallAsUtc = Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second);
  // Intl drops milliseconds; compare with the instant truncated to whole seconds.
  return wallAsUtc - (t - (((t % 1000) + 1000) % 1000));
}

function pad(n: number, width = 2): string {
  return String(n).padStart(width, '0');
}

function parseDate(date: string): { year: number; month: number; day: number } {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(date);
  if (!m) throw new RangeError(`expected a date YYYY-MM-DD, got "${date}"`);
  return { year: Number(m[1]), month: Number(m[2]), day: Number(m[3]) };
}

function formatUtcDate(ms: number): string {
  const d = new Date(ms);
  return `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
}

/** The local calendar date (YYYY-MM-DD) of `instant` in `timeZone`. */
export function localDate(instant: Date, timeZone: string): string {
  const w = wallFields(instant.getTime(), timeZone);
  return `${pad(w.year, 4)}-${pad(w.month)}-${pad(w.day)}`;
}

/** The local wall time (HH:MM:SS) of `instant` in `timeZone`. */
export function localTime(instant: Date, timeZone: string): string {
  const w = wallFields(instant.getTime(), timeZone);
  return `${pad(w.hour)}:${pad(w.minute)}:${pad(w.second)}`;
}

/** `date` plus `n` calendar days (n may be negative). */
export function addDays(date: string, n: number): string {
  const { year, month, day } = parseDate(date);
  return formatUtcDate(Date.UTC(year, month - 1, day + n));
}

/** `date` plus `n` calendar months, the day clamped to the target month's length (Jan 31 + 1 month = Feb 28/29). */
export function addMonths(date: string, n: number): string {
  const { year, month, day } = parseDate(date);
  const lastDay = new Date(Date.UTC(year, month - 1 + n + 1, 0)).getUTCDate();
  return formatUtcDate(Date.UTC(year, month - 1 + n, Math.min(day, lastDay)));
}

/** Whole calendar days from `from` to `to` (positive when `to` is later). */
export function daysBetween(from: string, to: string): number {
  const a = parseDate(from);
  const b = parseDate(to);
  return Math.round((Date.UTC(b.year, b.month - 1, b.day) - Date.UTC(a.year, a.month - 1, a.day)) / DAY_MS);
}

/** First day of the month of `date`. */
export function startOfMonth(date: string): string {
  return `${date.slice(0, 7)}-01`;
}

/**
 * The UTC instant of the local wall time `time` (HH:MM or HH:MM:SS, optionally .mmm) on `date` in `timeZone`.
 * Like Temporal's "compatible" disambiguation: a wall time repeated by a backward shift resolves to the earlier
 * instant; one skipped by a forward shift is moved forward by the length of the gap.
 */
export function zonedInstant(date: string, time: string, timeZone: string): Date {
  const { year, month, day } = parseDate(date);
  const m = /^(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?$/.exec(time);
  if (!m) throw new RangeError(`expected a time HH:MM[:SS[.mmm]], got "${time}"`);
  const ms = m[4] ? Number(m[4].padEnd(3, '0')) : 0;
  const wall = Date.UTC(year, month - 1, day, Number(m[1]), Number(m[2]), Number(m[3] ?? 0), ms);
  // Offsets in force a day either side cover any transition near this wall time.
  const before = zoneOffsetMs(wall - DAY_MS, timeZone);
  const after = zoneOffsetMs(wall + DAY_MS, timeZone);
  const candidates = [...new Set([before, after, zoneOffsetMs(wall, timeZone)])]
    .map((offset) => wall - offset)
    .filter((t) => t + zoneOffsetMs(t, timeZone) === wall)
    .sort((a, b) => a - b);
  if (candidates.length > 0) return new Date(candidates[0]);
  // In a gap: read the wall time with the offset from before the shift, which lands after the gap.
  return new Date(wall - before);
}

/** The instant local `date` begins (usually its midnight) in `timeZone`. */
export function startOfLocalDay(date: string, timeZone: string): Date {
  return zonedInstant(date, '00:00', timeZone);
}
