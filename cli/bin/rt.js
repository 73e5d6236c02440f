#!/usr/bin/env node
// `rt` on PATH (npm link / npx rt): Node 24 runs the TypeScript entry directly.
import '../rt.ts';
