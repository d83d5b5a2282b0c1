import dgram from 'node:dgram';
import net from 'node:net';

// A DNS server of the tests' own on 127.0.0.1 (UDP, a free port), answering from a fixed zone with hand-written
// response bytes (RFC 1035 §4.1): the names of `records` get their A and AAAA records, the names of `silent` never
// get an answer, those of `silentAaaa` (names of `records`) get their A records and no answer to AAAA, any other name
// is NXDOMAIN. It counts every query it receives.

export interface DnsQuery {
  name: string;
  type: 'A' | 'AAAA' | number;
}

export interface TestDnsServer {
  /** host:port, as a resolver's server list takes it. */
  address: string;
  queries: DnsQuery[];
  /** The queries of one name. */
  queriesOf(name: string): DnsQuery[];
  close(): Promise<void>;
}

const TYPES: Record<number, 'A' | 'AAAA'> = { 1: 'A', 28: 'AAAA' };

/** The 16 bytes of an IPv6 address (or the 4 of an IPv4 one). */
function addressBytes(address: string): Buffer {
  if (net.isIPv4(address)) return Buffer.from(address.split('.').map(Number));
  const [head, tail = ''] = address.split('::');
  const groups = (part: string) => (part ? part.split(':') : []);
  const all = [...groups(head), ...Array(8 - groups(head).length - groups(tail).length).fill('0'), ...groups(tail)];
  return Buffer.from(all.flatMap((g) => [parseInt(g, 16) >> 8, parseInt(g, 16) & 0xff]));
}

export async function startDnsServer(zone: {
  records: Record<string, { addresses: string[]; ttl: number }>;
  silent: string[];
  silentAaaa?: string[];
}): Promise<TestDnsServer> {
  const queries: DnsQuery[] = [];
  const socket = dgram.createSocket('udp4');
  socket.on('message', (query, from) => {
    // The question: labels (length, bytes) up to a zero byte, then its type and class.
    let at = 12;
    const labels: string[] = [];
    while (query[at] !== 0) {
      labels.push(query.subarray(at + 1, at + 1 + query[at]).toString('latin1'));
      at += query[at] + 1;
    }
    const question = query.subarray(12, at + 5);
    const type = query.readUInt16BE(at + 1);
    const name = labels.join('.').toLowerCase();
    queries.push({ name, type: TYPES[type] ?? type });
    if (zone.silent.includes(name) || (type === 28 && zone.silentAaaa?.includes(name))) return;
    const record = zone.records[name];
    const answers = (record?.addresses ?? []).filter((a) =>
      type === 1 ? net.isIPv4(a) : type === 28 && net.isIPv6(a),
    );
    const header = Buffer.alloc(12);
    query.copy(header, 0, 0, 2); // the query's id
    // QR (a response), the query's RD, RA; RCODE 3 (NXDOMAIN) for a name outside the zone.
    header.writeUInt16BE(0x8080 | ((query[2] & 0x01) << 8) | (record ? 0 : 3), 2);
    header.writeUInt16BE(1, 4); // QDCOUNT
    header.writeUInt16BE(answers.length, 6); // ANCOUNT
    const records = answers.map((address) => {
      const rdata = addressBytes(address);
      const rr = Buffer.alloc(12);
      rr.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
      rr.writeUInt16BE(type, 2);
      rr.writeUInt16BE(1, 4); // class IN
      rr.writeUInt32BE(record!.ttl, 6);
      rr.writeUInt16BE(rdata.length, 10);
      return Buffer.concat([rr, rdata]);
    });
    socket.send(Buffer.concat([header, question, ...records]), from.port, from.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${socket.address().port}`,
    queries,
    queriesOf: (name) => queries.filter((q) => q.name === name),
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}
