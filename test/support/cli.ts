import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The CLI's launcher, as `npx fleet-admin` runs it. */
export const LAUNCHER = fileURLToPath(new URL('../../bin/fleet-admin.js', import.meta.url));

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the real CLI (bin/fleet-admin.js) as a child process on `databaseUrl`, with `env` over this process's. */
export async function fleetAdminOn(databaseUrl: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliRun> {
  const child = spawn(process.execPath, [LAUNCHER, ...args], {
    env: { ...process.env, DATABASE_URL: databaseUrl, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  return { code, stdout, stderr };
}
