/**
 * HTTP API paths of the ecosystem's building blocks that rt does not have. A call to one is
 * answered 501 ERR_API_UNIMPLEMENTED naming the block, so a client learns what is missing
 * rather than a bare 404 (the gRPC API does the same, grpc/runtime/unsupported.ts).
 */
/** What this sidecar does serve, for the messages of both APIs (kept true to blocks.ts). */
export const SERVED_BLOCKS = 'state, pub/sub, service invocation, bindings, secrets, configuration, cryptography, distributed lock, metadata, jobs, workflows and actors';

const BLOCKS: [RegExp, string][] = [
  [/^\/v1\.0-alpha[12]\/conversation(\/|$)/, 'conversation'],
];

/** The building block a path belongs to, when rt does not have it. */
export function unimplementedBlock(path: string): string | undefined {
  return BLOCKS.find(([re]) => re.test(path))?.[1];
}
