/**
 * How many WRITEs an upload keeps in flight: no more than the server's channel window takes, so
 * that none waits inside ssh2 for a WINDOW_ADJUST (such packets outlive V8's young generation and
 * pile up as garbage: bench/results/sftp.md). Against a real OpenSSH sshd.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SftpConnection, type Session } from '../../../sidecar/src/components/bindings/sftp/connection.ts';
import { loadSsh2 } from '../../../sidecar/src/components/bindings/sftp/ssh2.ts';
import { parseMetadata } from '../../../sidecar/src/components/bindings/sftp/metadata.ts';
import { IN_FLIGHT, uploadStreamed, writesInFlight } from '../../../sidecar/src/components/bindings/sftp/transfer.ts';
import { startSshd, type SshdServer } from '../../services/sshd.ts';
import { baseMetadata, binary, sshdAvailable } from './helpers.ts';

describe('writesInFlight', () => {
  it('keeps the requests within the window, one to spare, between 1 and IN_FLIGHT', () => {
    expect(writesInFlight(255 * 1024, 2 * 1024 * 1024)).toBe(7); // OpenSSH
    expect(writesInFlight(32 * 1024, 2 * 1024 * 1024)).toBe(IN_FLIGHT);
    expect(writesInFlight(32 * 1024, 32 * 1024)).toBe(1);
    expect(writesInFlight(32 * 1024, 0)).toBe(1);
    for (const [len, window] of [[1000, 50_000], [255 * 1024, 4 * 1024 * 1024], [32 * 1024, 256 * 1024]] as const) {
      const n = writesInFlight(len, window);
      expect(n === 1 || n * len < window).toBe(true);
    }
  });
});

describe.skipIf(!sshdAvailable)('an upload against OpenSSH (real sshd)', () => {
  let s: SshdServer;
  let conn: SftpConnection;
  let session: Session;
  beforeAll(async () => {
    s = await startSshd();
    conn = new SftpConnection(await loadSsh2(), parseMetadata(baseMetadata(s)), pino({ level: 'silent' }));
    session = await conn.acquire();
  });
  afterAll(async () => {
    await conn?.close();
    await s?.close();
  });

  it('reads the server window and never leaves a WRITE waiting for it inside ssh2', async () => {
    expect(session.sendWindow).toBeGreaterThanOrEqual(session.maxWriteLen);
    const content = binary(12 * 1024 * 1024, 7);
    const text = Buffer.from(content.toString('base64'));
    // ssh2 queues a request that does not fit in the window in its SFTP stream's _buffer
    const queue = (session.sftp as unknown as { _buffer: Buffer[] })._buffer;
    const queued: number[] = [];
    async function* pieces(): AsyncGenerator<Buffer> {
      for (let i = 0; i < text.length; i += 64 * 1024) {
        queued.push(queue.length);
        yield text.subarray(i, i + 64 * 1024);
      }
    }
    await uploadStreamed(session, s.root, undefined, pieces(), async () => join(s.root, 'in-flight.bin'));
    expect(await readFile(join(s.root, 'in-flight.bin'))).toEqual(content);
    expect(queued.length).toBeGreaterThan(100);
    expect(Math.max(...queued)).toBe(0);
  });
});
