import { expect } from 'chai';
import {
  addDays,
  addMonths,
  daysBetween,
  localDate,
  localTime,
  startOfLocalDay,
  startOfMonth,
  zonedInstant,
  zoneOffsetMs,
} from '../src/time.js';

describe('time: local calendar helpers', () => {
  it('localDate gives the calendar date in the time zone, not in UTC', () => {
    // 21:30 UTC is 01:30 the next day in Dubai (UTC+4), and 16:30 the same day in New York (EST).
    const instant = new Date('2026-11-22T21:30:00.000Z');
    expect(localDate(instant, 'Asia/Dubai')).to.equal('2026-11-23');
    expect(localDate(instant, 'UTC')).to.equal('2026-11-22');
    expect(localDate(instant, 'America/New_York')).to.equal('2026-11-22');
    expect(localDate(new Date('2026-12-31T20:00:00.000Z'), 'Asia/Dubai')).to.equal('2027-01-01');
    expect(localTime(instant, 'Asia/Dubai')).to.equal('01:30:00');
    expect(localTime(new Date('2026-11-22T20:00:00.000Z'), 'Asia/Dubai')).to.equal('00:00:00');
  });

  it('addDays crosses month, year and leap-day boundaries, both ways', () => {
    expect(addDays('2026-11-30', 1)).to.equal('2026-12-01');
    expect(addDays('2026-12-31', 1)).to.equal('2027-01-01');
    expect(addDays('2028-02-28', 1)).to.equal('2028-02-29');
    expect(addDays('2027-02-28', 1)).to.equal('2027-03-01');
    expect(addDays('2027-01-01', -1)).to.equal('2026-12-31');
    expect(addDays('2026-11-22', -365)).to.equal('2025-11-22');
    expect(addDays('2026-11-22', 0)).to.equal('2026-11-22');
    expect(() => addDays('2026-1-2', 1)).to.throw(RangeError);
  });

  it('addMonths clamps to the end of shorter months; daysBetween and startOfMonth', () => {
    expect(addMonths('2026-01-31', 1)).to.equal('2026-02-28');
    expect(addMonths('2028-01-31', 1)).to.equal('2028-02-29');
    expect(addMonths('2026-11-15', 3)).to.equal('2027-02-15');
    expect(addMonths('2026-03-31', -1)).to.equal('2026-02-28');
    expect(daysBetween('2026-11-22', '2026-12-22')).to.equal(30);
    expect(daysBetween('2026-11-22', '2026-11-01')).to.equal(-21);
    // across a DST change the count is still whole days
    expect(daysBetween('2026-03-07', '2026-03-09')).to.equal(2);
    expect(startOfMonth('2026-11-22')).to.equal('2026-11-01');
  });

  it('zonedInstant converts local wall time to the UTC instant', () => {
    expect(zonedInstant('2026-11-22', '08:30', 'Asia/Dubai').toISOString()).to.equal('2026-11-22T04:30:00.000Z');
    expect(zonedInstant('2026-11-23', '00:00', 'Asia/Dubai').toISOString()).to.equal('2026-11-22T20:00:00.000Z');
    expect(zonedInstant('2026-11-22', '08:30:15.250', 'UTC').toISOString()).to.equal('2026-11-22T08:30:15.250Z');
    expect(zonedInstant('2026-07-01', '12:00', 'America/New_York').toISOString()).to.equal('2026-07-01T16:00:00.000Z');
    expect(zonedInstant('2026-01-15', '12:00', 'America/New_York').toISOString()).to.equal('2026-01-15T17:00:00.000Z');
    expect(zonedInstant('2026-06-01', '09:00', 'Asia/Kolkata').toISOString()).to.equal('2026-06-01T03:30:00.000Z');
    expect(() => zonedInstant('2026-06-01', '9am', 'UTC')).to.throw(RangeError);
  });

  it('zonedInstant is the inverse of localDate/localTime', () => {
    for (const tz of ['Asia/Dubai', 'Europe/London', 'America/Los_Angeles', 'Australia/Lord_Howe', 'Pacific/Chatham']) {
      for (let t = Date.UTC(2026, 0, 1); t < Date.UTC(2027, 0, 1); t += 7 * 3_600_000 + 13 * 60_000) {
        const instant = new Date(t);
        const back = zonedInstant(localDate(instant, tz), localTime(instant, tz), tz);
        const repeated = back.getTime() !== t;
        // Only a wall time repeated by a backward shift may map to the other (earlier) instant.
        if (repeated) {
          expect(back.getTime()).to.be.below(t);
          expect(localTime(back, tz)).to.equal(localTime(instant, tz));
        }
      }
    }
  });

  it('zonedInstant resolves DST gaps forward and repeated hours to the earlier instant', () => {
    // New York 2026-03-08: 02:00 -> 03:00. 02:30 does not exist: moved forward by the hour to 03:30 EDT.
    expect(zonedInstant('2026-03-08', '02:30', 'America/New_York').toISOString()).to.equal('2026-03-08T07:30:00.000Z');
    expect(zonedInstant('2026-03-08', '03:00', 'America/New_York').toISOString()).to.equal('2026-03-08T07:00:00.000Z');
    // New York 2026-11-01: 02:00 -> 01:00. 01:30 happens twice: the earlier one (EDT) is chosen.
    expect(zonedInstant('2026-11-01', '01:30', 'America/New_York').toISOString()).to.equal('2026-11-01T05:30:00.000Z');
    // Day starts: Santiago skips midnight on its spring-forward day (2026-09-06), so the day starts at 01:00.
    const start = startOfLocalDay('2026-09-06', 'America/Santiago');
    expect(localDate(start, 'America/Santiago')).to.equal('2026-09-06');
    expect(localTime(start, 'America/Santiago')).to.equal('01:00:00');
  });

  it('zoneOffsetMs reports the offset in force', () => {
    expect(zoneOffsetMs(new Date('2026-11-22T00:00:00Z'), 'Asia/Dubai')).to.equal(4 * 3_600_000);
    expect(zoneOffsetMs(new Date('2026-07-01T00:00:00.999Z'), 'Europe/London')).to.equal(3_600_000);
    expect(zoneOffsetMs(Date.UTC(2026, 0, 1), 'UTC')).to.equal(0);
  });
});
