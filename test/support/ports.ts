import net from 'node:net';

// Ports for tests that start processes of their own, so that no test relies on a fixed port another run may hold.

/** A port the system just handed out and took back: free now, and not another test's fixed port. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net
      .createServer()
      .listen(0, '127.0.0.1', () => {
        const { port } = server.address() as net.AddressInfo;
        server.close(() => resolve(port));
      })
      .on('error', reject);
  });
}

/** True when nothing listens on the port. */
export function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net
      .createServer()
      .listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
      .on('error', () => resolve(false));
  });
}
