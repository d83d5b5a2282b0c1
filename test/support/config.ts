import { configFrom, useConfig, type Config, type Env } from '../../src/config.js';

// The tests' configuration. The code under test in this process reads a Config built here (src/config.ts's
// processConfig()), never process.env; a test that needs other settings for a while builds another one
// (reconfigure). The child processes the tests start (the CLI's, the service's) are given theirs in their environment.

/** What every test runs with, besides the environment mocha was started with. */
export const TEST_SETTINGS: Env = {
  // The tests' receivers listen on 127.0.0.1, a private destination: allow those for the whole run. The
  // destination-policy tests pass the strict policy explicitly.
  FRS_ALLOW_PRIVATE_WEBHOOK_URLS: '1',
  // The tests' master key for sealing signing secrets (src/secrets.ts), so that no run writes a key file into the
  // checkout's .data/. A developer's own FRS_SECRET_KEY wins.
  FRS_SECRET_KEY: process.env.FRS_SECRET_KEY ?? 'bWFzdGVyIGtleSBvZiB0aGUgdGVzdCBydW5zIG9ubHk=',
  // The API process's own secret (cursors, CSRF tokens, the admin API's stored answers), likewise.
  FRS_API_SECRET: process.env.FRS_API_SECRET ?? 'QVBJIHNlY3JldCBvZiB0aGUgdGVzdCBydW5zIG9ubHk=',
};

const started: Env = { ...process.env };

/** The tests' configuration with `overrides` (a value of undefined unsets that variable). */
export function testConfig(overrides: Env = {}): Config {
  return configFrom({ ...started, ...TEST_SETTINGS, ...overrides });
}

/** Runs this process's code with the tests' configuration and `overrides` until the returned function is called. */
export function reconfigure(overrides: Env): () => void {
  const before = useConfig(testConfig(overrides));
  return () => {
    if (before) useConfig(before);
  };
}
