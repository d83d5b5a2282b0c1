import { expect } from 'chai';

/** Awaits `promise`, expects it to reject with an instance of `type`, and returns the error. */
export async function expectRejection<T extends Error>(
  promise: Promise<unknown>,
  type: new (...args: never[]) => T,
): Promise<T> {
  let caught: unknown;
  try {
    await promise;
  } catch (err) {
    caught = err;
  }
  expect(caught, 'expected a rejection').to.be.instanceOf(type);
  return caught as T;
}
