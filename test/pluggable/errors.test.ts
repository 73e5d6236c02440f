/** How component gRPC errors map to the errors building blocks understand (property-tested). */
import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EtagInvalidError, EtagMismatchError, StateRequestError } from '../../sidecar/src/components/state/errors.ts';
import { socketName } from '../../sidecar/src/pluggable/discovery.ts';
import { ComponentUnavailableError, ETAG_INVALID_REASON, ETAG_MISMATCH_REASON, errorInfos, statusDetails, toComponentError } from '../../sidecar/src/pluggable/errors.ts';

function serviceError(code: grpc.status, details: string, metadata = new grpc.Metadata()): grpc.ServiceError {
  return Object.assign(new Error(`${code} ${grpc.status[code]}: ${details}`), { code, details, metadata });
}

const codes = fc.constantFrom(...(Object.values(grpc.status).filter((v) => typeof v === 'number' && v !== 0) as grpc.status[]));
const ctx = { what: 'state component "s" (state.x)', path: '/tmp/s/x.sock', method: 'Set', key: 'k' };

describe('component error mapping', () => {
  it('property: every status maps to an Error; etag errors only for writes, by code or ErrorInfo reason', () => {
    fc.assert(
      fc.property(codes, fc.string(), fc.boolean(), fc.boolean(), fc.option(fc.constantFrom(ETAG_MISMATCH_REASON, ETAG_INVALID_REASON, 'OTHER')), (code, details, write, withEtag, reason) => {
        const md = reason ? statusDetails(code, details, { reason, domain: 'test', metadata: { key: 'k' } }) : undefined;
        const err = toComponentError(serviceError(code, details, md), { ...ctx, write, withEtag, badRequest: (m) => new StateRequestError(m) });
        expect(err).toBeInstanceOf(Error);
        const etagError = err instanceof EtagMismatchError || err instanceof EtagInvalidError;
        if (!write) expect(etagError).toBe(false);
        if (write && reason === ETAG_MISMATCH_REASON) expect(err).toBeInstanceOf(EtagMismatchError);
        if (write && reason === ETAG_INVALID_REASON) expect(err).toBeInstanceOf(EtagInvalidError);
        if (write && !reason && (code === grpc.status.FAILED_PRECONDITION || code === grpc.status.ABORTED)) expect(err).toBeInstanceOf(EtagMismatchError);
        if (write && code === grpc.status.INVALID_ARGUMENT && !reason) expect(err).toBeInstanceOf(withEtag ? EtagInvalidError : StateRequestError);
        if (code === grpc.status.UNAVAILABLE && !(write && reason?.startsWith('ETAG'))) {
          expect(err).toBeInstanceOf(ComponentUnavailableError);
          expect(err.message).toContain('/tmp/s/x.sock');
        }
        if (!etagError && !(err instanceof ComponentUnavailableError) && code !== grpc.status.DEADLINE_EXCEEDED) expect(err.message).toContain(details);
      }),
    );
  });

  it('ErrorInfo details round-trip through grpc-status-details-bin; garbage details are ignored', () => {
    const md = statusDetails(grpc.status.ABORTED, 'x', { reason: ETAG_MISMATCH_REASON, domain: 'rt', metadata: { key: 'k1' } });
    expect(errorInfos(serviceError(grpc.status.ABORTED, 'x', md))).toEqual([{ reason: ETAG_MISMATCH_REASON, domain: 'rt', metadata: { key: 'k1' } }]);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        const bad = new grpc.Metadata();
        bad.set('grpc-status-details-bin', Buffer.from(bytes));
        expect(() => errorInfos(serviceError(grpc.status.INTERNAL, 'x', bad))).not.toThrow();
      }),
    );
  });

  it('a socket file name gives the component name without its extension', () => {
    expect(socketName('memstore.sock')).toBe('memstore');
    expect(socketName('my.comp.sock')).toBe('my.comp');
    expect(socketName('plain')).toBe('plain');
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/), fc.stringMatching(/^[a-z]{1,5}$/), (name, ext) => {
        expect(socketName(`${name}.${ext}`)).toBe(name);
      }),
    );
  });
});
