import fs from 'node:fs';
import path from 'node:path';
import type { Knex } from 'knex';

// CPU time read from /proc (Linux): what a request or a delivery costs the server and the database, whatever else
// runs on the (shared) machine meanwhile. The benches and bench/explain.ts read it here.

/** A clock tick in µs: USER_HZ is 100 on Linux. */
const TICK_MICROS = 10_000;

/** The numbers of /proc/<pid>/stat after "pid (comm) ": utime, stime, cutime and cstime are [11] to [14], in ticks. */
function stat(pid: number): number[] {
  const line = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return line
    .slice(line.lastIndexOf(')') + 2)
    .split(' ')
    .map(Number);
}

/** CPU time (user + system) a live process has used so far, in µs; NaN when /proc cannot tell. */
export function processCpuMicros(pid: number): number {
  try {
    const f = stat(pid);
    return (f[11] + f[12]) * TICK_MICROS;
  } catch {
    return NaN;
  }
}

/**
 * A PostgreSQL cluster's CPU time so far, in µs: its postmaster, the processes it started that have ended (backends
 * of closed connections) and those still running. NaN when /proc cannot tell.
 */
export function clusterCpuMicros(postmasterPid: number): number {
  try {
    const f = stat(postmasterPid);
    const children = fs
      .readFileSync(`/proc/${postmasterPid}/task/${postmasterPid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean);
    return children.reduce(
      (sum, pid) => sum + (processCpuMicros(Number(pid)) || 0),
      (f[11] + f[12] + f[13] + f[14]) * TICK_MICROS,
    );
  } catch {
    return NaN;
  }
}

/** The postmaster of the cluster `db` is connected to, when it runs here and its data folder is readable; NaN otherwise. */
export async function postmasterPid(db: Knex): Promise<number> {
  try {
    const { rows } = await db.raw(`SELECT current_setting('data_directory') AS dir`);
    return Number(fs.readFileSync(path.join(rows[0].dir as string, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return NaN;
  }
}
