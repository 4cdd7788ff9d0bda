/**
 * HTTP fuzzing at the boundary: random methods, paths, headers, query strings and JSON
 * bodies against a live service (Koa over SQLite in memory, in-process counter, real sockets).
 * Invariants, for every case:
 *   - never a 500 (nor any 5xx: the store is up);
 *   - every response in one of the contract's shapes (standard error, RFC 7807 429, or the
 *     success shape of the operation; validated with ajv, plus docs/openapi.yaml when present);
 *   - no state change after a 4xx, and none after a GET/HEAD/OPTIONS (every table compared);
 *   - Object.prototype never polluted.
 * Strings carry NUL and other control characters (names, labels, cursor ids), and one property
 * sends raw bytes with odd framing (Transfer-Encoding other than chunked, bad chunks, Expect other
 * than 100-continue, no Host): each such request is refused in the standard shape and changes
 * nothing.
 * On SQLite in memory, and on Postgres when the run has one (always in CI: Postgres cannot hold
 * NUL, so only there does a NUL that reaches the store show as a 500).
 * Seeded: the seed is printed, FUZZ_SEED=<seed> replays it, FUZZ_SCALE multiplies the case counts
 * (default: the full counts under CI=true, a quarter of them in a local run; see fuzz-seed.ts).
 */
import { expect } from 'chai';
import fc from 'fast-check';
import { UNAUTHORIZED_MESSAGE } from '@cos/core';
import { startStack, type Stack } from '../support/stack.js';
import { STORE_TARGETS, startStackOn } from '../support/targets.js';
import { parseRawAnswers, rawSocket, refusedByParser } from '../support/raw-http.js';
import { createCast, type Cast } from '../support/fixture.js';
import { StateProbe } from '../support/snapshot.js';
import { checkResponse } from '../support/shapes.js';
import { openApiProblems } from '../support/openapi.js';
import { announceSeed, FUZZ_SCALE, fuzzParameters, scaledRuns } from '../support/fuzz-seed.js';
import {
  authenticates,
  creationShape,
  authorization,
  authVariant,
  framingShape,
  renderRaw,
  requestShape,
  type FramingShape,
  renderBody,
  resolvePath,
  type RequestShape,
} from '../support/fuzz-arbitraries.js';
import type { Outgoing, Incoming } from '../support/http.js';

/** Triage aid only (never set in CI): FUZZ_IGNORE=<regex> drops matching problems to look past a known one. */
const IGNORE = process.env.FUZZ_IGNORE ? new RegExp(process.env.FUZZ_IGNORE) : null;
const PUBLIC_PATHS = new Set(['/v1/health', '/v1/version']);
const VISIBLE_ASCII_ID = /^[\x21-\x7e]{1,128}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function outgoing(shape: RequestShape, cast: Cast): Outgoing {
  const path = resolvePath(shape.path, cast, shape.randomA, shape.randomB, shape.pick) + shape.query;
  const headers: Record<string, string> = { ...shape.headers };
  const auth = authorization(shape.auth, cast);
  if (auth !== undefined) headers.authorization = auth;
  const body = renderBody(shape.body);
  if (shape.contentType !== undefined && body !== undefined) headers['content-type'] = shape.contentType;
  return { method: shape.method, path, headers, ...(body !== undefined ? { body } : {}) };
}

/** Invariants of one response beyond its shape. */
function behaviourProblems(shape: RequestShape, o: Outgoing, r: Incoming): string[] {
  const problems: string[] = [];
  const pathname = o.path.split('?')[0] ?? '';
  if (r.status === 401 && r.method !== 'HEAD') {
    const body = r.json<{ message?: string }>();
    if (body.message !== UNAUTHORIZED_MESSAGE) problems.push(`401 message ${JSON.stringify(body.message)} (spec §5.2)`);
  }
  // A 2xx on an authenticated operation needs a key that authenticates (C-32, C-36).
  if (r.status >= 200 && r.status < 300 && !PUBLIC_PATHS.has(pathname) && !authenticates(shape.auth))
    problems.push(`${r.status} without a valid key (auth ${shape.auth.kind}) (C-32)`);
  // HTTP strips leading and trailing spaces and tabs of a field value: the service sees the rest.
  const sentId = o.headers?.['x-request-id']?.replace(/^[ \t]+|[ \t]+$/g, '');
  const gotId = r.headers.get('x-request-id') ?? '';
  if (sentId !== undefined && VISIBLE_ASCII_ID.test(sentId)) {
    if (gotId !== sentId) problems.push(`X-Request-Id ${JSON.stringify(sentId)} not echoed (got ${gotId}) (C-15)`);
  } else if (!UUID.test(gotId)) problems.push(`X-Request-Id ${JSON.stringify(gotId)} is not a fresh UUID (C-15)`);
  return problems;
}

/** A standard key may only reach its own organisation (C-34, spec §5.3-5.4). */
function isolationProblems(shape: RequestShape, o: Outgoing, r: Incoming, cast: Cast): string[] {
  if (r.status < 200 || r.status >= 300 || !authenticates(shape.auth) || !('key' in shape.auth)) return [];
  const keyRef = shape.auth.key;
  if (keyRef === 'platform') return [];
  const pathname = o.path.split('?')[0] ?? '';
  if (PUBLIC_PATHS.has(pathname)) return [];
  const orgId = keyRef === 'own' ? cast.own.id : cast.other.id;
  const m = /^\/v1\/organisations\/([^/]+)/i.exec(pathname);
  if (m === null) return [`standard key got ${r.status} on platform-only ${o.method} ${pathname} (spec §5.3)`];
  if (m[1]?.toLowerCase() !== orgId) return [`standard key of ${keyRef} got ${r.status} on ${pathname} (C-34)`];
  return [];
}

function pollution(): string[] {
  const probe = {} as Record<string, unknown>;
  const keys = Object.getOwnPropertyNames(Object.prototype);
  const out: string[] = [];
  if (probe.polluted !== undefined) out.push('Object.prototype.polluted is set');
  if (keys.length !== BASELINE_PROTO_KEYS.length) out.push(`Object.prototype gained ${keys.filter((k) => !BASELINE_PROTO_KEYS.includes(k)).join(',')}`);
  return out;
}
const BASELINE_PROTO_KEYS = Object.getOwnPropertyNames(Object.prototype);

/** Status histogram of the main property: printed, and checked so the fuzz provably reaches every outcome. */
const statuses = new Map<number, number>();

function describeCase(o: Outgoing, r: Incoming | undefined): string {
  const body = o.body === undefined ? '' : ` body(${o.body.length})=${JSON.stringify(o.body.slice(0, 300))}`;
  const res = r === undefined ? '' : ` -> ${r.status} ${r.text.slice(0, 400)}`;
  return `${o.method} ${o.path.slice(0, 300)} headers=${JSON.stringify(o.headers).slice(0, 400)}${body}${res}`;
}

async function runCase(stack: Stack, cast: Cast, probe: StateProbe, shape: RequestShape, options: { rateLimited?: boolean } = {}): Promise<void> {
  const o = outgoing(shape, cast);
  await probe.mark();
  let r: Incoming;
  try {
    r = await stack.client.send(o);
  } catch (e) {
    throw new Error(`no HTTP answer (${(e as Error).message}) for ${describeCase(o, undefined)}`);
  }
  const diff = await probe.diff();
  statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
  const problems = [
    ...checkResponse(r),
    ...openApiProblems(r),
    ...behaviourProblems(shape, o, r),
    ...isolationProblems(shape, o, r, cast),
    ...pollution(),
  ];
  const readOnly = ['GET', 'HEAD', 'OPTIONS'].includes(o.method.toUpperCase());
  if ((r.status >= 400 || readOnly) && diff.length > 0) problems.push(`state changed after ${r.status}: ${diff.slice(0, 5).join(' | ')}`);
  // Self-check of the probe: a 201 created a record, so the probe must have seen it (C-2, C-41).
  if (r.status === 201 && diff.length === 0) problems.push('201 but no row changed (or the state probe is blind)');
  if (options.rateLimited !== true && r.status === 429) problems.push('429 although the limit is out of reach');
  if (IGNORE !== null) problems.splice(0, problems.length, ...problems.filter((p) => !IGNORE.test(p)));
  if (problems.length > 0) throw new Error(`${problems.join('\n')}\n  case: ${describeCase(o, r)}`);
}


function readOnlyMethod(method: string): boolean {
  return ['GET', 'HEAD', 'OPTIONS'].includes(method.toUpperCase());
}

/** What the service must answer to a framing it refuses (C-15, C-52), or undefined when it is served. */
function framingRefusal(f: FramingShape): { status: number; field: string } | undefined {
  if (f.transferEncoding !== undefined && f.transferEncoding.trim().toLowerCase() !== 'chunked') return { status: 400, field: 'request' };
  if (f.host !== 'present') return { status: 400, field: 'host' };
  if (f.expect !== undefined && f.expect !== '100-continue') return { status: 417, field: 'expect' };
  return undefined;
}

async function runFramingCase(stack: Stack, cast: Cast, probe: StateProbe, shape: RequestShape, framing: FramingShape): Promise<void> {
  // No caller request id: every answer here must carry a fresh one (C-15; echoing is the main property's).
  const { 'x-request-id': _ignored, ...headers } = (outgoing(shape, cast).headers ?? {}) as Record<string, string>;
  const sent = outgoing(shape, cast);
  // HEAD answers have no body to check the shape of: sent as GET here.
  const o = { ...sent, method: sent.method === 'HEAD' ? 'GET' : sent.method, headers };
  await probe.mark();
  const bytes = renderRaw(o, framing);
  const raw = await rawSocket(stack.baseUrl, bytes);
  const diff = await probe.diff();
  const answers = parseRawAnswers(raw).filter((a) => a.status !== 100);
  const problems: string[] = [];
  const last = answers.at(-1);
  if (answers.length !== 1 || last === undefined) problems.push(`expected one answer, got ${answers.length}`);
  else {
    const r: Incoming = {
      method: o.method,
      path: o.path,
      status: last.status,
      headers: new Headers(Object.entries(last.headers)),
      text: last.body,
      elapsedMs: 0,
      json: <T>() => JSON.parse(last.body) as T,
    };
    const badChunk = framing.transferEncoding?.trim().toLowerCase() === 'chunked' && framing.badChunk;
    // A read is answered without its body (C-141): a malformed chunk is its 400 when it arrives with
    // the headers (one segment on loopback: a request well under the 64 KiB segment size); one
    // further on may come after the answer, which then closes the connection.
    const readWithLaterBody = readOnlyMethod(o.method) && Buffer.byteLength(bytes, 'latin1') > 16 * 1024;
    const answeredBeforeBody = readWithLaterBody && /close/i.test(last.headers['connection'] ?? '');
    // A malformed chunk is the parser's 400 unless the request was refused before its body was read
    // (401, 404, ...), or it is a read answered before the chunk arrived (its own 400, e.g. on `limit`).
    const parserAnswer = last.status === 400 && /"field":"request"/.test(last.body);
    const refusal =
      framingRefusal(framing) ?? (badChunk && last.status === 400 && (parserAnswer || !answeredBeforeBody) ? { status: 400, field: 'request' } : undefined);
    if (refusal !== undefined) {
      // Refused at the HTTP layer, whatever the operation: the standard shape with the C-15/C-52
      // headers (417 is no status of any operation in docs/openapi.yaml, which documents it in prose).
      try {
        refusedByParser(last, refusal.status, [{ field: refusal.field, issue: JSON.parse(last.body).details?.[0]?.issue }], 'framing');
      } catch (e) {
        problems.push(`expected ${refusal.status} on "${refusal.field}": ${(e as Error).message}`);
      }
    } else problems.push(...checkResponse(r), ...openApiProblems(r));
    if (last.status >= 500) problems.push(`${last.status} (never a 5xx)`);
    if ((last.headers['x-request-id'] ?? '') === '') problems.push('no X-Request-Id (C-15)');
    if (last.headers['x-ratelimit-remaining'] === undefined) problems.push('no X-RateLimit-Remaining (C-52)');
    if (badChunk && last.status < 300 && !answeredBeforeBody) {
      problems.push(`${last.status} for a malformed chunked body`);
    }
    if ((last.status >= 400 || readOnlyMethod(o.method)) && diff.length > 0) problems.push(`state changed after ${last.status}: ${diff.slice(0, 5).join(' | ')}`);
  }
  if (problems.length > 0) throw new Error(`${problems.join('\n')}\n  framing ${JSON.stringify(framing)}\n  case: ${describeCase(o, undefined)}\n  answer: ${raw.slice(0, 600)}`);
}

for (const target of STORE_TARGETS) {
  describe(`system: HTTP fuzzing of the live service on ${target.name} (C-6, C-10, C-13, C-15, C-23, C-32, C-33, C-34, C-51, C-52)`, function () {
    this.timeout(300_000);
    let stack: Stack;
    let cast: Cast;
    let probe: StateProbe;
    let running: Awaited<ReturnType<typeof startStackOn>>;
    // Postgres compares full snapshots around every case: fewer cases, the same invariants.
    const scale = target.name === 'SQLite' ? 1 : 0.25;
    const runs = (n: number): number => Math.round(n * scale);
    /** The number of cases a property draws in this run (FUZZ_SCALE applied), for the titles. */
    const drawn = (n: number): number => scaledRuns(runs(n));

    before(async function () {
      announceSeed();
      running = await startStackOn(target, 'fuzz', { config: { rateLimitPerMinute: 1_000_000_000, unauthRateLimitPerMinute: 1_000_000_000 } });
      if (running === undefined) {
        this.skip();
        return;
      }
      stack = running.stack;
      cast = await createCast(stack.core);
      probe = new StateProbe(stack.store.knex);
    });
    after(async () => {
      await running?.close();
    });

    it(`C-10/C-15/C-33: ${drawn(8000)} random requests (control characters in names, labels and cursors included): never a 500, every body in a contract shape, no state change after a 4xx or a read`, async function () {
      // The further rounds below stop once every outcome is seen; only a seed short of one draws them all.
      this.timeout(600_000);
      statuses.clear();
      // The generator must reach every outcome of the contract, not just bounce off validation.
      const expected = target.name === 'SQLite' ? [200, 201, 204, 400, 401, 403, 404, 405, 409, 413, 415] : [200, 201, 204, 400, 401, 403, 404, 405, 415];
      const unseen = () => expected.filter((status) => (statuses.get(status) ?? 0) === 0);
      // Rare outcomes (a 201 or 409 needs a valid creation: a few in a thousand cases) were missed
      // by some seeds; up to three more rounds of a quarter of the cases each, on seeds derived
      // from the run's, keep the check about the generator rather than one seed's luck. A run with
      // fewer cases (FUZZ_SCALE below 1, or Postgres's quarter) gets more rounds, so it may draw as
      // many cases as the full run on SQLite (8000 + 3 x 2000) before it calls an outcome
      // unreachable; the rounds stop once all are seen. (Counting Postgres's quarter as a full
      // run's four rounds missed the 201, about one case in a thousand, for about one seed in 30.)
      const rounds = 1 + Math.max(3, Math.ceil(7 / (FUZZ_SCALE * scale) - 4));
      // A further round mixes in one organisation's creation in ten (creationShape): a duplicate
      // slug's 409 needs two valid creations of one slug, which the first round alone may not draw.
      const further = fc.oneof({ arbitrary: requestShape, weight: 9 }, { arbitrary: creationShape, weight: 1 });
      for (let round = 0; round < rounds && (round === 0 || unseen().length > 0); round++) {
        await fc.assert(
          fc.asyncProperty(round === 0 ? requestShape : further, (shape) => runCase(stack, cast, probe, shape)),
          fuzzParameters(round === 0 ? runs(8000) : runs(2000), round === 0 ? 0 : 100 + round),
        );
      }
      const histogram = [...statuses.entries()].sort(([a], [b]) => a - b).map(([k, v]) => `${k}:${v}`);
      console.log(`      statuses ${histogram.join(' ')}`);
      for (const status of expected) expect(statuses.get(status) ?? 0, `status ${status} seen`).to.be.greaterThan(0);
    });

    it(`C-15/C-52 + HTTP layer: ${drawn(1500)} random requests with odd framing (Transfer-Encoding other than chunked, bad chunks, Expect other than 100-continue, no Host) are refused in the standard shape and change nothing`, async () => {
      await fc.assert(
        fc.asyncProperty(requestShape, framingShape, (shape, framing) => runFramingCase(stack, cast, probe, shape, framing)),
        fuzzParameters(runs(1500), 4),
      );
    });

    it(`C-32: ${drawn(1500)} Authorization variants: only "Bearer <active key>" (scheme in any case, one space) authenticates; all else is 401 "Missing or invalid API key"`, async () => {
      await fc.assert(
        fc.asyncProperty(authVariant, async (variant) => {
          const auth = authorization(variant, cast);
          await probe.mark();
          const r = await stack.client.send({
            method: 'GET',
            path: `/v1/organisations/${cast.own.id}`,
            headers: auth === undefined ? {} : { authorization: auth },
          });
          const problems = [...checkResponse(r), ...openApiProblems(r)];
          const expected = !authenticates(variant) ? 401 : 'key' in variant && variant.key === 'other' ? 403 : 200;
          if (r.status !== expected) problems.push(`expected ${expected}, got ${r.status}`);
          if (r.status === 401 && r.json<{ message: string }>().message !== UNAUTHORIZED_MESSAGE) problems.push('401 message');
          const diff = await probe.diff();
          if (diff.length > 0) problems.push(`state changed: ${diff.join(' | ')}`);
          if (problems.length > 0) throw new Error(`${problems.join('\n')}\n  Authorization: ${JSON.stringify(auth?.slice(0, 200))} -> ${r.text.slice(0, 300)}`);
        }),
        fuzzParameters(runs(1500), 1),
      );
    });

    it('C-10: bodies either side of 64 KiB: at most 65 536 bytes are read, more is 413 PAYLOAD_TOO_LARGE, and neither changes state when rejected', async () => {
      await fc.assert(
        fc.asyncProperty(fc.integer({ min: 65_536 - 64, max: 65_536 + 64 }), fc.constantFrom('POST', 'PUT', 'PATCH'), async (total, method) => {
          const prefix = '{"name":"';
          const suffix = '"}';
          const body = prefix + 'n'.repeat(total - prefix.length - suffix.length) + suffix;
          expect(Buffer.byteLength(body)).to.equal(total);
          const path = method === 'POST' ? '/v1/organisations' : `/v1/organisations/${cast.own.id}`;
          await probe.mark();
          const r = await stack.client.call(method, path, { key: cast.keys.platform, body });
          const problems = [...checkResponse(r), ...openApiProblems(r)];
          // Over the limit: 413. Within it: read and validated (the name is far over 200 characters: 400).
          const expected = total > 65_536 ? 413 : 400;
          if (r.status !== expected) problems.push(`${total} bytes: expected ${expected}, got ${r.status}`);
          if ((await probe.diff()).length > 0) problems.push('state changed');
          if (problems.length > 0) throw new Error(`${problems.join('\n')}\n  ${method} ${path} ${total} bytes -> ${r.text.slice(0, 300)}`);
        }),
        fuzzParameters(runs(200), 2),
      );
    });
  });

}

describe('system: HTTP fuzzing under a tiny rate limit (C-51, C-52, C-33)', function () {
  this.timeout(120_000);
  let stack: Stack;
  let cast: Cast;
  let probe: StateProbe;

  before(async () => {
    announceSeed();
    // The cast is made through the core (no HTTP), so the tiny limit does not hinder the setup.
    stack = await startStack({ config: { rateLimitPerMinute: 3, unauthRateLimitPerMinute: 3 } });
    cast = await createCast(stack.core);
    probe = new StateProbe(stack.store.knex);
  });
  after(async () => {
    await stack?.close();
  });

  it(`C-51/C-52: ${scaledRuns(800)} random requests against limit 3: every 429 is RFC 7807 with Retry-After, and nothing changes after one`, async () => {
    let limited = 0;
    await fc.assert(
      fc.asyncProperty(requestShape, async (shape) => {
        await runCase(stack, cast, probe, shape, { rateLimited: true });
      }),
      fuzzParameters(800, 3),
    );
    // Count 429s on a fixed probe so the suite proves it saw the limit at work.
    for (let i = 0; i < 5; i += 1) {
      const r = await stack.client.call('GET', `/v1/organisations/${cast.own.id}`, { key: cast.own.key });
      if (r.status === 429) limited += 1;
      expect(checkResponse(r)).to.deep.equal([]);
    }
    expect(limited).to.be.greaterThan(0);
  });
});
