import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { ROOT_DIR } from '../src/config.js';

/** Starts `bench/<script>` under tsx in its own process and waits for its "listening <port>" line. */
export async function startBenchProcess(script: string, args: string[]): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT_DIR, 'bench', script), ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let buffer = '';
  for await (const chunk of child.stdout!) {
    buffer += chunk;
    const match = buffer.match(/listening (\d+)/);
    if (match) return { child, url: `http://127.0.0.1:${match[1]}` };
  }
  throw new Error(`bench/${script} exited before listening`);
}
