/**
 * POST /v1/secret-scanning/alerts over real HTTP (an extension beyond v1: C-56): the
 * scanner's ECDSA P-256 signature over the raw body (a key pair made here, in the programme's
 * public-key format), revocation of exposed keys committed before the answer (C-36), the audit
 * entries (C-58), the source-address and own rate scopes (C-50, C-52), the body rules (C-10), the
 * error shape (C-15) and the webhook events written in the same unit of work (C-59).
 *
 * Every response is validated against docs/openapi.yaml, where the operation is under `paths`
 * tagged `extensions`; without the option the path is unknown and its 404 is the one the operation
 * documents for that case (C-9).
 */
import { generateKeyPairSync, hash, sign, type KeyObject } from 'node:crypto';
import { expect } from 'chai';
import {
  ISSUE_ALERT_BODY,
  ISSUE_ALERT_MATCH,
  ISSUE_ALERT_SOURCE,
  ISSUE_ALERT_URL,
  ISSUE_FIELD_REQUIRED,
  ISSUE_TOKEN,
  ISSUE_TOKEN_TYPE,
  OPERATOR,
  parseScannerKeys,
  type ScannerKeySet,
  type Stores,
} from '@cos/core';
import { KEY_IDENTIFIER_HEADER, SIGNATURE_HEADER } from '@cos/adapter-koa';
import { createInMemoryStore, RecordingMetrics } from '@cos/core/testing';
import type { StoreHarness } from '@cos/core/testing';
import { Api, type ApiResponse } from './support/http.js';
import { UNKNOWN_KEY, createWorld, type World, type WorldOptions } from './support/world.js';

const ALERTS = '/v1/secret-scanning/alerts';
const KEY_ID = 'scanner-key-1';
const HOOK = 'https://receiver.example/hook';
const LEAK_URL = 'https://github.example/acme/app/blob/abc123/.env';
const PAGE = { after: null, limit: 1000 } as const;

function keyPair(): { publicKey: KeyObject; privateKey: KeyObject } {
  return generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
}
const scanner = keyPair();
const stranger = keyPair();
/** The programme's public-key document, as SECRET_SCANNING_PUBLIC_KEYS holds it. */
const keySet: ScannerKeySet = parseScannerKeys(
  JSON.stringify({
    public_keys: [{ key_identifier: KEY_ID, key: scanner.publicKey.export({ type: 'spki', format: 'pem' }), is_current: true }],
  }),
);

const signatureOf = (body: string | Uint8Array, key: KeyObject = scanner.privateKey): string =>
  sign('sha256', Buffer.from(body), { key, dsaEncoding: 'der' }).toString('base64');
const sha256Hex = (s: string): string => hash('sha256', s, 'hex');

interface Match {
  token: unknown;
  type?: unknown;
  url?: unknown;
  source?: unknown;
}
const match = (token: string, url: string | null = LEAK_URL): Match => ({ token, type: 'cos_api_key', url, source: 'content' });

interface AlertWorld extends World {
  /** A client whose exchanges are validated against the document. */
  readonly scan: Api;
}

async function alertWorld(options: WorldOptions = {}): Promise<AlertWorld> {
  const world = await createWorld({ ...options, http: { secretScanning: { keys: () => keySet }, ...options.http } });
  return { ...world, scan: new Api(world.listening.baseUrl, '', world.api.doc) };
}

interface SendOptions {
  /** Default: signed by the scanner's key over exactly the bytes sent. */
  signature?: string | null;
  identifier?: string | null;
  contentType?: string;
  headers?: Record<string, string>;
}

/** Sends `body` (a string as is, anything else as JSON) to the alert endpoint. */
function sendAlert(api: Api, body: unknown, options: SendOptions = {}): Promise<ApiResponse> {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  const headers: Record<string, string> = { 'content-type': options.contentType ?? 'application/json', ...options.headers };
  const identifier = options.identifier === undefined ? KEY_ID : options.identifier;
  const signature = options.signature === undefined ? signatureOf(text) : options.signature;
  if (identifier !== null) headers[KEY_IDENTIFIER_HEADER] = identifier;
  if (signature !== null) headers[SIGNATURE_HEADER] = signature;
  return api.post(ALERTS, { body: text, headers });
}

const feedback = (token: string, label: 'true_positive' | 'false_positive', type = 'cos_api_key') => ({
  token_hash: sha256Hex(token),
  token_type: type,
  label,
});

/** Everything an alert can change: keys, audit, exposures as audit entries, outbox. */
async function snapshot(w: World): Promise<string> {
  const s = w.tc.store.stores;
  // Keys without last_used_at: a request's own use is written in the background, whatever the alert did.
  const keys = (await Promise.all([w.platform, w.own, w.other].map((t) => s.apiKeys.list(t.orgId, PAGE)))).map((list) =>
    list.map(({ lastUsedAt: _, ...k }) => k),
  );
  return JSON.stringify({ keys, audit: await s.audit.list({}, PAGE), outbox: await s.outbox.list({}, PAGE) });
}

/** The entries written by secret scanning. Entries of one instant are ordered by their random ids. */
async function auditBySecretScanning(w: World) {
  return (await w.tc.store.stores.audit.list({}, PAGE)).filter((e) => e.actor.type === 'secret_scanning');
}

/** The outbox; notifications of one instant are ordered by their random ids. */
async function outbox(w: World) {
  return w.tc.store.stores.outbox.list({}, PAGE);
}

const kinds = async (w: World): Promise<string[]> => (await auditBySecretScanning(w)).map((e) => e.kind).sort();
const types = async (w: World): Promise<string[]> => (await outbox(w)).map((n) => n.type).sort();

function expectStandardError(res: ApiResponse, status: number, error: string): void {
  expect(res.status, res.text).to.equal(status);
  expect(res.body.error).to.equal(error);
  expect(res.body.message).to.be.a('string');
  expect(res.headers.get('x-request-id')).to.be.a('string').and.not.equal('');
  for (const h of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) expect(res.headers.get(h), h).to.match(/^\d+$/);
}

describe('adapter-koa: POST /v1/secret-scanning/alerts (C-56)', () => {
  it('C-56, C-9: without the option the path is unknown: 404 in the standard shape, nothing read or changed', async () => {
    const world = await createWorld();
    try {
      const before = await snapshot(world);
      const res = await sendAlert(world.api, [match(world.own.key)]);
      expectStandardError(res, 404, 'NOT_FOUND');
      expect(res.body.details).to.deep.equal([]);
      expect((await world.api.get(`/v1/organisations/${world.own.orgId}`, { key: world.own.key })).status).to.equal(200);
      expect(await snapshot(world)).to.equal(before);
    } finally {
      await world.close();
    }
  });

  describe('with the option (scanner keys configured)', () => {
    let w: AlertWorld;
    beforeEach(async () => {
      w = await alertWorld();
    });
    afterEach(async () => {
      await w.close();
    });

    describe('a signed alert', () => {
      it('C-36, C-58: a live key of `own` is a true positive, revoked before the answer: 401 on the very next request', async () => {
        const res = await sendAlert(w.scan, [match(w.own.key)]);
        expect(res.status).to.equal(200);
        expect(res.body).to.deep.equal([feedback(w.own.key, 'true_positive')]);
        expect(res.text).to.not.include(w.own.key);
        expect(res.text).to.not.include('token_raw');

        const next = await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key });
        expect(next.status).to.equal(401);
        const record = await w.api.get(`/v1/organisations/${w.own.orgId}/api-keys/${w.own.keyId}`, { key: w.platform.key });
        expect(record.body).to.include({ is_active: false, status: 'revoked' });
        // Other organisations' keys are untouched.
        expect((await w.api.get(`/v1/organisations/${w.other.orgId}`, { key: w.other.key })).status).to.equal(200);
      });

      it('C-58: audit gets api_key_exposed (type, url, source; actor secret_scanning) and api_key_revoked, never the token or its digest', async () => {
        await sendAlert(w.scan, [match(w.own.key)]);
        const entries = await auditBySecretScanning(w);
        expect(entries.map((e) => e.kind).sort()).to.deep.equal(['api_key_exposed', 'api_key_revoked']);
        const exposed = entries.find((e) => e.kind === 'api_key_exposed');
        const revoked = entries.find((e) => e.kind === 'api_key_revoked');
        expect(exposed).to.deep.include({
          organisationId: w.own.orgId,
          keyId: w.own.keyId,
          keyPrefix: w.own.key.slice(0, 12),
          actor: { type: 'secret_scanning' },
          exposure: { type: 'cos_api_key', url: LEAK_URL, source: 'content' },
        });
        expect(revoked).to.deep.include({ organisationId: w.own.orgId, keyId: w.own.keyId, actor: { type: 'secret_scanning' } });
        expect(revoked!.exposure).to.equal(undefined);
        const all = JSON.stringify(await w.tc.store.stores.audit.list({}, PAGE));
        expect(all).to.not.include(w.own.key);
        expect(all).to.not.include(sha256Hex(w.own.key));
      });

      it('C-121, C-122: a lone surrogate or U+0000 in a match\'s url, source or type costs no match its revocation; the fields are kept with U+FFFD', async () => {
        const text = JSON.stringify([
          { token: w.own.key, type: 'cos_api_key', url: 'https://github.example/\u0000\ud800', source: '\udc00' },
          { token: w.other.key, type: 'cos\u0000key', url: LEAK_URL, source: 'content' },
        ]);
        const res = await sendAlert(w.scan, text);
        expect(res.status, res.text).to.equal(200);
        for (const t of [w.own, w.other]) expect((await w.api.get(`/v1/organisations/${t.orgId}`, { key: t.key })).status).to.equal(401);
        const exposures = (await auditBySecretScanning(w)).filter((e) => e.kind === 'api_key_exposed').map((e) => [e.organisationId, e.exposure]);
        expect(exposures).to.have.deep.members([
          [w.own.orgId, { type: 'cos_api_key', url: 'https://github.example/\ufffd\ufffd', source: '\ufffd' }],
          [w.other.orgId, { type: 'cos\ufffdkey', url: LEAK_URL, source: 'content' }],
        ]);
      });

      it('C-58: already revoked and expired keys are true positives with only api_key_exposed recorded', async () => {
        const res = await sendAlert(w.scan, [match(w.revokedKey), match(w.expiredKey)]);
        expect(res.status).to.equal(200);
        expect(res.body).to.deep.equal([feedback(w.revokedKey, 'true_positive'), feedback(w.expiredKey, 'true_positive')]);
        const entries = await auditBySecretScanning(w);
        expect(entries.map((e) => [e.kind, e.keyId])).to.have.deep.members([
          ['api_key_exposed', w.revokedKeyId],
          ['api_key_exposed', w.expiredKeyId],
        ]);
        const expired = await w.api.get(`/v1/organisations/${w.own.orgId}/api-keys/${w.expiredKeyId}`, { key: w.own.key });
        expect(expired.body).to.include({ status: 'expired', revoked_at: null });
      });

      it('an unknown well-formed token and malformed tokens are false positives; nothing is stored', async () => {
        const before = await snapshot(w);
        const tokens = [UNKNOWN_KEY, 'svc_live_short', 'not a key at all', `${w.own.key}x`, w.own.key.toUpperCase()];
        const res = await sendAlert(w.scan, tokens.map((t) => match(t)));
        expect(res.status).to.equal(200);
        expect(res.body).to.deep.equal(tokens.map((t) => feedback(t, 'false_positive')));
        expect(await snapshot(w)).to.equal(before);
        expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key })).status).to.equal(200);
      });

      it('C-58, C-59: a redelivered alert (same token, same url) gets the same answer and records nothing twice', async () => {
        await w.tc.core.webhooks.set(OPERATOR, w.own.orgId, HOOK);
        const body = [match(w.own.key), match(UNKNOWN_KEY)];
        const first = await sendAlert(w.scan, body);
        const after = await snapshot(w);
        const again = await sendAlert(w.scan, body);
        expect(again.status).to.equal(200);
        expect(again.body).to.deep.equal(first.body);
        expect(await snapshot(w)).to.equal(after);
        expect(await kinds(w)).to.deep.equal(['api_key_exposed', 'api_key_revoked']);
        expect(await types(w)).to.deep.equal(['api_key.exposed', 'api_key.revoked']);
      });

      it('C-58: the same token at another url is a second api_key_exposed but no second revocation', async () => {
        await sendAlert(w.scan, [match(w.own.key)]);
        const res = await sendAlert(w.scan, [match(w.own.key, 'https://gist.example/leak')]);
        expect(res.body).to.deep.equal([feedback(w.own.key, 'true_positive')]);
        const entries = await auditBySecretScanning(w);
        expect(entries.map((e) => [e.kind, e.exposure?.url])).to.have.deep.members([
          ['api_key_exposed', LEAK_URL],
          ['api_key_revoked', undefined],
          ['api_key_exposed', 'https://gist.example/leak'],
        ]);
      });

      it('C-10: an alert of 1000 matches over 64 KiB is accepted (the alert limit is 1 MiB)', async () => {
        const body = Array.from({ length: 1000 }, (_, i) => match(UNKNOWN_KEY, `${LEAK_URL}?line=${i}&${'p'.repeat(60)}`));
        expect(JSON.stringify(body).length).to.be.greaterThan(64 * 1024);
        const res = await sendAlert(w.scan, body);
        expect(res.status).to.equal(200);
        expect(res.body).to.have.length(1000);
      });

      it('the documented request schema accepts the alerts sent here', () => {
        const check = w.scan.doc.validatorAt('#/components/schemas/SecretScanningAlert');
        expect(check([match(w.own.key)]), JSON.stringify(check.errors)).to.equal(true);
        expect(check([{ token: 't', type: 'x', extra: 1 }])).to.equal(true);
        expect(check([])).to.equal(false);
        expect(check({})).to.equal(false);
      });
    });

    describe('C-36, C-50, C-15, C-52: signatures', () => {
      const signed = (body: string) => signatureOf(body);
      const badRequests: [string, (body: string) => SendOptions & { send?: string }][] = [
        ['no identifier header', () => ({ identifier: null })],
        ['no signature header', () => ({ signature: null })],
        ['an unknown key identifier', (b) => ({ identifier: 'another-key', signature: signed(b) })],
        ['a signature by another key', (b) => ({ signature: signatureOf(b, stranger.privateKey) })],
        ['a tampered body (one byte changed after signing)', (b) => ({ signature: signed(b), send: b.replace('content', 'contenT') })],
        ['a signature that is not base64', () => ({ signature: '!!not*base64!!' })],
        ['an empty signature', () => ({ signature: '' })],
      ];

      it('C-50, C-15, C-52: every bad signature is 401 in the standard shape, counted per source address, nothing changed', async () => {
        const before = await snapshot(w);
        const body = JSON.stringify([match(w.own.key)]);
        let remaining = Number.POSITIVE_INFINITY;
        for (const [name, make] of badRequests) {
          const { send, ...options } = make(body);
          const res = await sendAlert(w.scan, send ?? body, options);
          expectStandardError(res, 401, 'UNAUTHORIZED');
          expect(res.body.message, name).to.equal('Missing or invalid secret-scanning signature');
          expect(res.body.details).to.deep.equal([]);
          expect(res.headers.get('x-ratelimit-limit'), name).to.equal('60');
          const now = Number(res.headers.get('x-ratelimit-remaining'));
          expect(now, `${name}: counted`).to.be.lessThan(remaining);
          remaining = now;
        }
        expect(await snapshot(w)).to.equal(before);
        expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key })).status).to.equal(200);
      });

      it('C-50: each refused alert is logged with its reason and counted in cos_auth_failures_total under it; the answer is the same for every reason', async () => {
        const metrics = new RecordingMetrics();
        const m = await alertWorld({ metrics });
        try {
          const body = JSON.stringify([match(m.own.key)]);
          const reasons: Record<string, string> = {
            'no identifier header': 'scanner_signature_missing',
            'no signature header': 'scanner_signature_missing',
            'an unknown key identifier': 'scanner_unknown_key_identifier',
            'a signature by another key': 'scanner_bad_signature',
            'a tampered body (one byte changed after signing)': 'scanner_bad_signature',
            'a signature that is not base64': 'scanner_bad_signature',
            'an empty signature': 'scanner_signature_missing',
          };
          for (const [name, make] of badRequests) {
            const { send, ...options } = make(body);
            expect((await sendAlert(m.scan, send ?? body, options)).status, name).to.equal(401);
          }
          const expected = badRequests.map(([name]) => reasons[name]);
          expect(metrics.events.filter((e) => e.kind === 'authFailure').map((e) => (e as { reason: string }).reason)).to.deep.equal(expected);
          const lines = m.httpLogger.entries.filter((e) => e.message === 'secret-scanning alert refused (401)');
          expect(lines.map((e) => [e.level, e.fields['reason']])).to.deep.equal(expected.map((r) => ['warn', r]));
          expect(lines.find((e) => e.fields['reason'] === 'scanner_unknown_key_identifier')?.fields['key_identifier']).to.equal('another-key');
        } finally {
          await m.close();
        }
      });

      it('C-50: after rateLimitPerMinute bad signatures from one address the next is 429, a good one still passes', async () => {
        const small = await alertWorld({ config: { rateLimitPerMinute: 3 } });
        try {
          const body = JSON.stringify([match(UNKNOWN_KEY)]);
          for (let i = 1; i <= 3; i++) {
            const res = await sendAlert(small.scan, body, { signature: signatureOf(body, stranger.privateKey) });
            expect(res.status).to.equal(401);
            expect(res.headers.get('x-ratelimit-remaining')).to.equal(String(3 - i));
          }
          const refused = await sendAlert(small.scan, body, { identifier: null });
          expect(refused.status).to.equal(429);
          expect(refused.body.svc_error_code).to.equal('RATE_LIMIT_EXCEEDED');
          expect(refused.headers.get('retry-after')).to.match(/^\d+$/);
          // Key guessing from the same address is throttled by the same counter.
          expect((await small.api.get(`/v1/organisations/${small.own.orgId}`, { key: UNKNOWN_KEY })).status).to.equal(429);
          const good = await sendAlert(small.scan, body);
          expect(good.status).to.equal(200);
        } finally {
          await small.close();
        }
      });

      it('C-50, C-52: valid alerts count in their own scope: a burst beyond the unauthenticated limit passes while bad signatures are refused', async () => {
        const burst = await alertWorld({
          config: { rateLimitPerMinute: 2, unauthRateLimitPerMinute: 2, secretScanningRateLimitPerMinute: 8 },
        });
        try {
          const body = JSON.stringify([match(UNKNOWN_KEY)]);
          for (let i = 0; i < 3; i++) await burst.api.get('/v1/health');
          expect((await burst.api.get('/v1/version')).status).to.equal(429);
          for (let i = 0; i < 3; i++) await sendAlert(burst.scan, body, { signature: signatureOf(body, stranger.privateKey) });
          expect((await sendAlert(burst.scan, body, { signature: signatureOf(body, stranger.privateKey) })).status).to.equal(429);
          for (let i = 1; i <= 8; i++) {
            const res = await sendAlert(burst.scan, body);
            expect(res.status, `alert ${i}`).to.equal(200);
            expect(res.headers.get('x-ratelimit-limit')).to.equal('8');
            expect(res.headers.get('x-ratelimit-remaining')).to.equal(String(8 - i));
          }
          const ninth = await sendAlert(burst.scan, body);
          expect(ninth.status).to.equal(429);
          expect(ninth.body.instance).to.equal(ALERTS);
        } finally {
          await burst.close();
        }
      });
    });

    describe('C-10, C-11: the body', () => {
      const tooMany = (): Match[] => Array.from({ length: 1001 }, () => ({ token: 'x', type: 't' }));
      const cases: [string, () => unknown, { field: string; issue: string }[]][] = [
        ['an object, not an array', () => ({ token: 'x', type: 't' }), [{ field: 'body', issue: ISSUE_ALERT_BODY }]],
        ['an empty array', () => [], [{ field: 'body', issue: ISSUE_ALERT_BODY }]],
        ['1001 matches', tooMany, [{ field: 'body', issue: ISSUE_ALERT_BODY }]],
        ['a string', () => 'svc', [{ field: 'body', issue: ISSUE_ALERT_BODY }]],
        [
          'a match without token and type, and one that is no object',
          () => [{ url: LEAK_URL }, 'svc_live_x'],
          [
            { field: '[0].token', issue: ISSUE_FIELD_REQUIRED },
            { field: '[0].type', issue: ISSUE_FIELD_REQUIRED },
            { field: '[1]', issue: ISSUE_ALERT_MATCH },
          ],
        ],
        [
          'wrong types',
          () => [{ token: 42, type: '', url: 7, source: ['x'] }],
          [
            { field: '[0].token', issue: ISSUE_TOKEN },
            { field: '[0].type', issue: ISSUE_TOKEN_TYPE },
            { field: '[0].url', issue: ISSUE_ALERT_URL },
            { field: '[0].source', issue: ISSUE_ALERT_SOURCE },
          ],
        ],
      ];

      for (const [name, body, details] of cases) {
        it(`C-11: ${name} is 400 with details; nothing changed`, async () => {
          const before = await snapshot(w);
          const res = await sendAlert(w.scan, JSON.stringify(body()));
          expectStandardError(res, 400, 'VALIDATION_ERROR');
          expect(res.body.details).to.have.deep.members(details);
          expect(res.body.details).to.have.length(details.length);
          expect(await snapshot(w)).to.equal(before);
        });
      }

      it('C-11, C-36: one bad match refuses the whole alert: the live key in it is not revoked', async () => {
        const res = await sendAlert(w.scan, [match(w.own.key), { token: w.other.key }]);
        expect(res.status).to.equal(400);
        expect(res.body.details).to.deep.equal([{ field: '[1].type', issue: ISSUE_FIELD_REQUIRED }]);
        expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key })).status).to.equal(200);
        expect(await auditBySecretScanning(w)).to.deep.equal([]);
      });

      it('C-10: malformed JSON, correctly signed, is 400 body "malformed JSON"', async () => {
        const res = await sendAlert(w.scan, `[{"token":"${w.own.key}",`);
        expectStandardError(res, 400, 'VALIDATION_ERROR');
        expect(res.body.details).to.deep.equal([{ field: 'body', issue: 'malformed JSON' }]);
        expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key })).status).to.equal(200);
      });

      it('C-132: an alert nested more than 64 levels deep, correctly signed, is 400 body "must not nest…"; nothing changed', async () => {
        const before = await snapshot(w);
        const source = `${'['.repeat(63)}${']'.repeat(63)}`;
        const res = await sendAlert(w.scan, `[{"token":"${w.own.key}","type":"cos_api_key","source":${source}}]`);
        expectStandardError(res, 400, 'VALIDATION_ERROR');
        expect(res.body.details).to.deep.equal([{ field: 'body', issue: 'must not nest objects or arrays more than 64 levels deep' }]);
        expect(await snapshot(w)).to.equal(before);
        expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key })).status).to.equal(200);
      });

      it('C-10: a non-JSON content type is 415, even correctly signed', async () => {
        const res = await sendAlert(w.scan, [match(w.own.key)], { contentType: 'text/plain' });
        expectStandardError(res, 415, 'UNSUPPORTED_MEDIA_TYPE');
        expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key })).status).to.equal(200);
      });

      it('C-10: a 2 MiB body is 413 (the alert limit is 1 MiB)', async () => {
        const before = await snapshot(w);
        const body = JSON.stringify([{ ...match(w.own.key), source: 's'.repeat(2 * 1024 * 1024) }]);
        const res = await sendAlert(w.scan, body);
        expectStandardError(res, 413, 'PAYLOAD_TOO_LARGE');
        expect(await snapshot(w)).to.equal(before);
      });
    });

    describe('C-61, C-62: lineage and the exposure response', () => {
      /** A key issued by `parent` over HTTP (so created_by_key_id names it); returns raw key and id. */
      async function child(parent: string, label: string): Promise<{ key: string; id: string }> {
        const res = await w.api.post(`/v1/organisations/${w.own.orgId}/api-keys`, { key: parent, json: { label } });
        expect(res.status, res.text).to.equal(201);
        return { key: res.body.key as string, id: res.body.id as string };
      }

      /** own key -> a -> a1 (revoked later) -> a1x; own key -> b, rolled by own key into b2; an unrelated operator key. */
      async function family() {
        const a = await child(w.own.key, 'a');
        const a1 = await child(a.key, 'a1');
        const a1x = await child(a1.key, 'a1x');
        const b = await child(w.own.key, 'b');
        const b2res = await w.api.post(`/v1/organisations/${w.own.orgId}/api-keys/${b.id}/roll`, { key: w.own.key });
        const b2 = { key: b2res.body.key as string, id: b2res.body.id as string };
        await w.tc.core.apiKeys.revoke(OPERATOR, w.own.orgId, a1.id);
        const unrelated = await w.tc.core.apiKeys.issue(OPERATOR, w.own.orgId, { label: 'unrelated' });
        return { a, a1, a1x, b, b2, unrelated: unrelated.rawKey };
      }

      async function putPolicy(exposure_response: string): Promise<void> {
        const res = await w.api.put(`/v1/organisations/${w.own.orgId}/key-policy`, {
          key: w.platform.key,
          json: { max_lifetime_seconds: null, allowed_environments: ['live', 'test'], exposure_response },
        });
        expect(res.status, res.text).to.equal(200);
      }

      it('C-61: the api_key_exposed entry and the api_key.exposed event list the active descendants (through a revoked key too); by default only the reported key is revoked', async () => {
        await w.tc.core.webhooks.set(OPERATOR, w.own.orgId, HOOK);
        const f = await family();
        await sendAlert(w.scan, [match(w.own.key)]);
        const expected = [f.a.id, f.a1x.id, f.b2.id].sort();
        const exposed = (await auditBySecretScanning(w)).find((e) => e.kind === 'api_key_exposed')!;
        expect(exposed.descendantKeyIds).to.deep.equal(expected);
        const event = (await outbox(w)).find((n) => n.type === 'api_key.exposed')!;
        expect((JSON.parse(event.payload) as { data: { descendant_key_ids: string[] } }).data.descendant_key_ids).to.deep.equal(expected);
        expect(await kinds(w)).to.deep.equal(['api_key_exposed', 'api_key_revoked']);
        for (const k of [f.a, f.a1x, f.b2]) expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: k.key })).status).to.equal(200);
      });

      it('C-61: the descendants of a key that issued nothing are an empty list', async () => {
        const f = await family();
        await sendAlert(w.scan, [match(f.a1x.key)]);
        const exposed = (await auditBySecretScanning(w)).find((e) => e.kind === 'api_key_exposed')!;
        expect(exposed.descendantKeyIds).to.deep.equal([]);
      });

      it('C-62: revoke_key_and_descendants revokes the key and every active descendant in the same unit of work, each with its own api_key_revoked entry and api_key.revoked event (actor secret scanning)', async () => {
        await w.tc.core.webhooks.set(OPERATOR, w.own.orgId, HOOK);
        const f = await family();
        await putPolicy('revoke_key_and_descendants');
        const earlier = new Set((await outbox(w)).map((n) => n.id));
        const res = await sendAlert(w.scan, [match(w.own.key)]);
        expect(res.status).to.equal(200);
        for (const k of [w.own.key, f.a.key, f.a1x.key, f.b2.key]) {
          expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: k })).status, 'revoked before the answer').to.equal(401);
        }
        expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: f.unrelated })).status, 'not a descendant').to.equal(200);
        const revoked = (await auditBySecretScanning(w)).filter((e) => e.kind === 'api_key_revoked').map((e) => e.keyId);
        expect(revoked.sort()).to.deep.equal([w.own.keyId, f.a.id, f.a1x.id, f.b2.id].sort());
        const events = (await outbox(w)).filter((n) => n.type === 'api_key.revoked' && !earlier.has(n.id)).map((n) => (JSON.parse(n.payload) as { data: { key_id: string } }).data.key_id);
        expect(events.sort()).to.deep.equal([w.own.keyId, f.a.id, f.a1x.id, f.b2.id].sort());
        // A redelivered alert changes nothing more.
        const before = await snapshot(w);
        await sendAlert(w.scan, [match(w.own.key)]);
        expect(await snapshot(w)).to.equal(before);
      });

      it("C-100, C-101: a platform key under its organisation's revoke_key_and_descendants takes KB (it issued in another organisation) and KB2 (KB issued) with it: both 401 after the 200, KB issues nothing more, each revocation audited and announced in that organisation", async () => {
        for (const orgId of [w.platform.orgId, w.own.orgId]) await w.tc.core.webhooks.set(OPERATOR, orgId, HOOK);
        const p2 = await w.tc.core.apiKeys.issue(OPERATOR, w.platform.orgId, { label: 'p2' });
        const kbRes = await w.api.post(`/v1/organisations/${w.own.orgId}/api-keys`, { key: p2.rawKey, json: { label: 'kb' } });
        expect(kbRes.status, kbRes.text).to.equal(201);
        const kb = { key: kbRes.body.key as string, id: kbRes.body.id as string };
        expect(kbRes.body.created_by_key_id).to.equal(p2.key.id);
        const kb2 = await child(kb.key, 'kb2');
        const policy = await w.api.put(`/v1/organisations/${w.platform.orgId}/key-policy`, {
          key: w.platform.key,
          json: { max_lifetime_seconds: null, allowed_environments: ['live', 'test'], exposure_response: 'revoke_key_and_descendants' },
        });
        expect(policy.status, policy.text).to.equal(200);
        const earlier = new Set((await outbox(w)).map((n) => n.id));

        const res = await sendAlert(w.scan, [match(p2.rawKey)]);
        expect(res.status).to.equal(200);
        expect(res.body).to.deep.equal([feedback(p2.rawKey, 'true_positive')]);
        for (const [name, key] of [['P2', p2.rawKey], ['KB', kb.key], ['KB2', kb2.key]] as const) {
          expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key })).status, name).to.equal(401);
        }
        const issue = await w.api.post(`/v1/organisations/${w.own.orgId}/api-keys`, { key: kb.key, json: { label: 'after the leak' } });
        expect(issue.status, 'KB can no longer issue').to.equal(401);
        expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key })).status, 'not a descendant').to.equal(200);

        const entries = await auditBySecretScanning(w);
        expect(entries.find((e) => e.kind === 'api_key_exposed')).to.deep.include({ organisationId: w.platform.orgId, keyId: p2.key.id, descendantKeyIds: [kb.id, kb2.id].sort() });
        expect(entries.filter((e) => e.kind === 'api_key_revoked').map((e) => [e.organisationId, e.keyId]).sort()).to.deep.equal(
          [[w.platform.orgId, p2.key.id], [w.own.orgId, kb.id], [w.own.orgId, kb2.id]].sort(),
        );
        const notes = (await outbox(w)).filter((n) => !earlier.has(n.id));
        const data = (n: (typeof notes)[number]) => (JSON.parse(n.payload) as { data: { organisation_id: string; key_id: string; descendant_key_ids?: string[] } }).data;
        expect(notes.map((n) => [n.type, n.organisationId, data(n).organisation_id, data(n).key_id]).sort()).to.deep.equal(
          [
            ['api_key.exposed', w.platform.orgId, w.platform.orgId, p2.key.id],
            ['api_key.revoked', w.platform.orgId, w.platform.orgId, p2.key.id],
            ['api_key.revoked', w.own.orgId, w.own.orgId, kb.id],
            ['api_key.revoked', w.own.orgId, w.own.orgId, kb2.id],
          ].sort(),
        );
        expect(data(notes.find((n) => n.type === 'api_key.exposed')!).descendant_key_ids).to.deep.equal([kb.id, kb2.id].sort());
      });

      it('C-62: under revoke_key_and_descendants an already revoked reported key still takes its active descendants with it', async () => {
        const f = await family();
        await putPolicy('revoke_key_and_descendants');
        await w.tc.core.apiKeys.revoke(OPERATOR, w.own.orgId, f.a.id);
        await sendAlert(w.scan, [match(f.a.key)]);
        expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: f.a1x.key })).status).to.equal(401);
        expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: f.b2.key })).status, 'b2 descends from the own key, not from a').to.equal(200);
        expect(await kinds(w)).to.deep.equal(['api_key_exposed', 'api_key_revoked']);
      });
    });

    describe('C-59: webhook events in the outbox', () => {
      it('C-59: an exposure enqueues exactly one api_key.exposed and one api_key.revoked, without the key or its digest', async () => {
        await w.tc.core.webhooks.set(OPERATOR, w.own.orgId, HOOK);
        await sendAlert(w.scan, [match(w.own.key)]);
        const notes = await outbox(w);
        expect(notes.map((n) => [n.type, n.organisationId, n.status])).to.have.deep.members([
          ['api_key.exposed', w.own.orgId, 'pending'],
          ['api_key.revoked', w.own.orgId, 'pending'],
        ]);
        const data = { organisation_id: w.own.orgId, key_id: w.own.keyId, key_prefix: w.own.key.slice(0, 12), label: 'acme key', cause: { type: 'secret_scanning' } };
        const payload = (type: string): unknown => JSON.parse(notes.find((n) => n.type === type)!.payload);
        const [exposed, revoked] = [payload('api_key.exposed'), payload('api_key.revoked')];
        expect(exposed).to.deep.equal({
          type: 'api_key.exposed',
          timestamp: w.tc.clock.now().toISOString(),
          data: { ...data, url: LEAK_URL, source: 'content', descendant_key_ids: [] },
        });
        expect(revoked).to.deep.equal({ type: 'api_key.revoked', timestamp: w.tc.clock.now().toISOString(), data });
        for (const n of notes) {
          expect(n.payload).to.not.include(w.own.key);
          expect(n.payload).to.not.include(sha256Hex(w.own.key));
        }
      });

      it('C-59: issuing a key enqueues api_key.issued (no raw key, no digest)', async () => {
        await w.tc.core.webhooks.set(OPERATOR, w.own.orgId, HOOK);
        const issued = await w.api.post(`/v1/organisations/${w.own.orgId}/api-keys`, { key: w.own.key, json: { label: 'ci' } });
        expect(issued.status).to.equal(201);
        const notes = await outbox(w);
        expect(notes.map((n) => n.type)).to.deep.equal(['api_key.issued']);
        expect(JSON.parse(notes[0]!.payload).data).to.deep.equal({
          organisation_id: w.own.orgId,
          key_id: issued.body.id,
          key_prefix: issued.body.key_prefix,
          label: 'ci',
          cause: { type: 'api_key', key_id: w.own.keyId },
        });
        expect(notes[0]!.payload).to.not.include(issued.body.key);
        expect(notes[0]!.payload).to.not.include(sha256Hex(issued.body.key));
      });

      it('C-59: an organisation without endpoint gets nothing enqueued (the exposure is still audited)', async () => {
        await w.tc.core.webhooks.set(OPERATOR, w.other.orgId, HOOK);
        await sendAlert(w.scan, [match(w.own.key)]);
        await w.api.post(`/v1/organisations/${w.own.orgId}/api-keys`, { key: w.platform.key, json: { label: 'x' } });
        expect(await outbox(w)).to.deep.equal([]);
        expect(await kinds(w)).to.deep.equal(['api_key_exposed', 'api_key_revoked']);
      });
    });

  });

  it('C-59, C-36: a unit of work that fails enqueues nothing: no event, no audit entry, the key stays active; 500 without details', async () => {
    let failRevocations = false;
    const store = revocationFailingStore(createInMemoryStore(), () => failRevocations);
    const w = await alertWorld({ store });
    try {
      await w.tc.core.webhooks.set(OPERATOR, w.own.orgId, HOOK);
      const before = await snapshot(w);
      failRevocations = true;
      const res = await sendAlert(w.scan, [match(w.own.key)]);
      expectStandardError(res, 500, 'INTERNAL_ERROR');
      expect(res.text).to.not.include('revoke failed');
      expect(await snapshot(w)).to.equal(before);
      expect((await w.api.get(`/v1/organisations/${w.own.orgId}`, { key: w.own.key })).status).to.equal(200);
      // The scanner retries: with the store healthy again the whole exposure commits once.
      failRevocations = false;
      expect((await sendAlert(w.scan, [match(w.own.key)])).body).to.deep.equal([feedback(w.own.key, 'true_positive')]);
      expect(await types(w)).to.deep.equal(['api_key.exposed', 'api_key.revoked']);
    } finally {
      await w.close();
    }
  });
});

/**
 * The in-memory store, except that `apiKeys.revoke` inside a unit of work rejects while `failing()`:
 * the exposure's audit entry and its webhook event are written in that unit of work before it fails.
 */
function revocationFailingStore(inner: StoreHarness, failing: () => boolean): StoreHarness {
  const wrap = (stores: Stores): Stores => ({
    ...stores,
    apiKeys: new Proxy(stores.apiKeys, {
      get(target, prop, receiver) {
        if (prop === 'revoke' && failing()) return () => Promise.reject(new Error('revoke failed'));
        const value = Reflect.get(target, prop, receiver) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    }),
  });
  return {
    ...inner,
    unitOfWork: {
      run: (work) => inner.unitOfWork.run(work),
      changeCredentials: (organisationIds, work) => inner.unitOfWork.changeCredentials(organisationIds, (stores) => work(wrap(stores))),
    },
  };
}
