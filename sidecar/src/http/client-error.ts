/**
 * Requests Node's HTTP parser refuses before any route sees them (an HTTP method outside its
 * list, a malformed request line or header, headers over the size limit, a body that never
 * arrives), answered in the API's JSON error shape instead of fastify's or Node's bare 400, and
 * logged at debug. Node's parser (llhttp) knows a fixed list of methods (`http.METHODS`); a
 * method outside it, such as the Java SDK's `HttpExtension.NONE`, cannot be served at all, so the
 * answer names it and the methods that are accepted. The reference runtime's invocation route
 * passes any method on to the app; rt can pass on only those (see docs/compatibility.md).
 */
import { METHODS, STATUS_CODES, maxHeaderSize } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { errorBody } from './errors.ts';

/** What Node's http server hands its `clientError` listeners. */
export type ClientError = Error & { code?: string; reason?: string; rawPacket?: unknown; bytesParsed?: number };

/** The first bytes of a method name kept in a message; longer ones are cut. */
const METHOD_MAX = 40;

/** The method of the request line the parser stopped in, as sent (printable ASCII, cut to METHOD_MAX). */
function methodOf(err: ClientError): string {
  const raw = err.rawPacket;
  if (!Buffer.isBuffer(raw)) return '';
  const at = Math.min(Math.max(err.bytesParsed ?? 0, 0), raw.length);
  // the request line's start: after the last line break before where the parser stopped (a
  // connection's earlier, pipelined requests come before it in the same buffer)
  const start = at > 0 ? raw.lastIndexOf(0x0a, at - 1) + 1 : 0; // (a negative index would count from the end)
  let end = start;
  while (end < raw.length && end - start < METHOD_MAX && raw[end] !== 0x20 && raw[end] !== 0x0d && raw[end] !== 0x0a) end++;
  return raw.subarray(start, end).toString('latin1').replace(/[^\x21-\x7e]/g, '?');
}

/** The status, error code and message for a request the parser refused. */
export function clientErrorAnswer(err: ClientError): { status: number; errorCode: string; message: string } {
  switch (err.code) {
    case 'HPE_INVALID_METHOD': {
      const method = methodOf(err);
      return {
        status: 400,
        errorCode: 'ERR_MALFORMED_REQUEST',
        message: `HTTP method ${method ? `"${method}"` : 'of the request'} is not supported: Node's HTTP parser accepts only ${METHODS.join(', ')} (methods are case-sensitive); service invocation passes any of these on to the app`,
      };
    }
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, errorCode: 'ERR_REQUEST_TIMEOUT', message: 'the request did not arrive in full within the request timeout' };
    case 'HPE_HEADER_OVERFLOW':
      return { status: 431, errorCode: 'ERR_REQUEST_HEADERS_TOO_LARGE', message: `the request's headers are larger than the limit of ${maxHeaderSize} bytes` };
    case 'HPE_PAUSED_H2_UPGRADE':
      return { status: 400, errorCode: 'ERR_MALFORMED_REQUEST', message: 'this port speaks HTTP/1.1, not HTTP/2 with prior knowledge (gRPC is served on the gRPC port)' };
    default:
      return { status: 400, errorCode: 'ERR_MALFORMED_REQUEST', message: `malformed HTTP request: ${err.reason ?? err.message}${err.code ? ` (${err.code})` : ''}` };
  }
}

/**
 * A `clientError` listener (node:http) or fastify `clientErrorHandler` that answers in the API's
 * error shape, then closes the connection. Nothing is written on a connection already reset, nor
 * into an earlier (pipelined) request's answer already being sent.
 */
export function answerClientError(log: Logger): (err: ClientError, socket: Duplex) => void {
  return (err, socket) => {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    const answer = clientErrorAnswer(err);
    if (log.isLevelEnabled('debug')) log.debug({ errorCode: answer.errorCode, status: answer.status, parserError: err.code }, answer.message);
    // as Node's own answer: not into an earlier (pipelined) request's answer already under way
    const inFlight = (socket as { _httpMessage?: { _headerSent?: boolean } | null })._httpMessage;
    if (!socket.writable || inFlight?._headerSent) return void socket.destroy();
    const body = JSON.stringify(errorBody(answer.errorCode, answer.message));
    // closed once written, or after a second when the peer does not read
    const timer = setTimeout(() => socket.destroy(), 1000);
    timer.unref();
    socket.end(`HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`, () => {
      clearTimeout(timer);
      socket.destroy();
    });
  };
}
