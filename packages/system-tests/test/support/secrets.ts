/**
 * Secret hygiene helpers: what counts as a key leaking (the raw key, its 48 random characters,
 * its SHA-256 digest) and a scripted client session that exercises every way a key could leak:
 * issuance, use, misuse, keys in paths, queries, request ids and bodies, revocation, self-revocation.
 */
import { createHash } from 'node:crypto';
import type { Client, Incoming, Outgoing } from './http.js';

export interface Secret {
  readonly raw: string;
  /** The 48 random characters: the actual secret. */
  readonly random: string;
  readonly digest: string;
}

export function secretOf(raw: string): Secret {
  return { raw, random: raw.slice(9), digest: createHash('sha256').update(raw, 'utf8').digest('hex') };
}

/** The forms of `secret` found in `text` (case-insensitive for the hex digest). */
export function leaksIn(text: string, secret: Secret): string[] {
  const out: string[] = [];
  if (text.includes(secret.random)) out.push(text.includes(secret.raw) ? 'raw key' : 'random part of a key');
  if (text.toLowerCase().includes(secret.digest)) out.push('key digest');
  return out;
}

export interface Exchange {
  readonly request: Outgoing;
  readonly response: Incoming;
  /** True for a successful key issuance: the one response that may carry the raw key. */
  readonly issuance: boolean;
}

function headerText(h: Headers): string {
  return [...h.entries()].map(([k, v]) => `${k}: ${v}`).join('\n');
}

export function responseText(r: Incoming): string {
  return `${r.status}\n${headerText(r.headers)}\n\n${r.text}`;
}

/** What the caller itself put into the request outside the Authorization header (it may be echoed back to it). */
export function reflectable(o: Outgoing): string {
  const headers = Object.entries(o.headers ?? {})
    .filter(([k]) => k.toLowerCase() !== 'authorization')
    .map(([, v]) => v)
    .join('\n');
  return `${o.path}\n${headers}\n${o.body === undefined ? '' : o.body.toString()}`;
}

function mutate(raw: string): string {
  const last = raw.at(-1) === 'A' ? 'B' : 'A';
  return raw.slice(0, -1) + last;
}

/**
 * A scripted session against a live service with a platform key. Returns every exchange and every
 * raw key issued during it.
 */
export async function keyLifecycleSession(client: Client, platformKey: string, platformOrgId: string): Promise<{ exchanges: Exchange[]; issued: string[] }> {
  const exchanges: Exchange[] = [];
  const issued: string[] = [];
  const send = async (request: Outgoing, issuance = false): Promise<Incoming> => {
    const response = await client.send(request);
    exchanges.push({ request, response, issuance: issuance && response.status === 201 });
    return response;
  };
  const json = (method: string, path: string, key: string | null, body?: unknown, extra: Record<string, string> = {}): Outgoing => ({
    method,
    path,
    headers: {
      ...(key === null ? {} : { authorization: `Bearer ${key}` }),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...extra,
    },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });

  const org = await send(json('POST', '/v1/organisations', platformKey, { name: 'Secretive', slug: `secretive-${Date.now().toString(36)}` }));
  if (org.status !== 201) throw new Error(`setup: create organisation -> ${org.status} ${org.text}`);
  const orgId = org.json<{ id: string }>().id;
  const issue = async (body: unknown, key = platformKey): Promise<{ id: string; key: string }> => {
    const r = await send(json('POST', `/v1/organisations/${orgId}/api-keys`, key, body), true);
    if (r.status !== 201) throw new Error(`setup: issue -> ${r.status} ${r.text}`);
    const issuedKey = r.json<{ id: string; key: string }>();
    issued.push(issuedKey.key);
    return issuedKey;
  };
  const k1 = await issue({ label: 'first' });
  const k2 = await issue({ label: 'second', environment: 'test', expires_at: new Date(Date.now() + 3_600_000).toISOString() });
  const k3 = await issue({ label: 'issued by a standard key' }, k1.key);

  // Ordinary use.
  await send(json('GET', `/v1/organisations/${orgId}`, k1.key));
  await send(json('GET', `/v1/organisations/${orgId}/api-keys`, k1.key));
  await send(json('GET', `/v1/organisations/${orgId}/api-keys?limit=1`, k2.key));
  await send(json('GET', `/v1/organisations/${orgId}/api-keys/${k2.id}`, k1.key));
  await send(json('GET', `/v1/organisations/${orgId}/members`, k1.key));
  await send(json('PATCH', `/v1/organisations/${orgId}`, k1.key, { name: 'Still secretive' }));

  // Misuse: every error path a key can travel through.
  await send(json('GET', `/v1/organisations/${orgId}`, mutate(k1.key)));
  await send(json('GET', `/v1/organisations/${orgId}`, k1.key.toLowerCase()));
  await send(json('GET', `/v1/organisations/${orgId}`, null, undefined, { authorization: `Basic ${Buffer.from(`${k1.key}:`).toString('base64')}` }));
  await send(json('GET', `/v1/organisations/${orgId}`, null, undefined, { authorization: `Bearer  ${k1.key}` }));
  await send(json('GET', `/v1/organisations/${orgId}`, null, undefined, { 'x-api-key': k1.key }));
  await send(json('GET', `/v1/organisations/${orgId}?api_key=${k1.key}`, null));
  await send(json('GET', `/v1/organisations/${platformOrgId}`, k1.key));
  await send(json('GET', '/v1/organisations', k1.key));
  await send(json('GET', `/v1/organisations/${k2.key}`, k1.key));
  await send(json('GET', `/v1/organisations/${orgId}/api-keys/${k2.key}`, k1.key));
  await send(json('GET', `/v1/${k1.key}`, k1.key));
  await send(json('DELETE', `/v1/organisations/${orgId}`, k1.key));
  await send(json('GET', `/v1/organisations/${orgId}`, k1.key, undefined, { 'x-request-id': k2.key }));
  await send(json('POST', `/v1/organisations/${orgId}/api-keys`, k1.key, { label: k2.key, bogus: k1.key, expires_at: k2.key }));
  await send(json('POST', `/v1/organisations/${orgId}/api-keys`, k1.key, `{"label": "${k2.key}"`));
  await send(json('PUT', `/v1/organisations/${orgId}`, k1.key, { name: 'x', slug: k2.key, key: k2.key }));
  await send({ method: 'POST', path: `/v1/organisations/${orgId}/api-keys`, headers: { authorization: `Bearer ${k1.key}`, 'content-type': 'text/plain' }, body: k2.key });

  // Revocation, its idempotent repeat, use of the revoked key, and self-revocation.
  await send(json('DELETE', `/v1/organisations/${orgId}/api-keys/${k2.id}`, k1.key));
  await send(json('DELETE', `/v1/organisations/${orgId}/api-keys/${k2.id}`, k1.key));
  await send(json('GET', `/v1/organisations/${orgId}`, k2.key));
  await send(json('DELETE', `/v1/organisations/${orgId}/api-keys/${k1.id}`, k1.key));
  await send(json('GET', `/v1/organisations/${orgId}`, k1.key));
  await send(json('GET', `/v1/organisations/${orgId}/api-keys/${k3.id}`, k3.key));
  await send(json('GET', '/v1/health', null));
  await send(json('GET', '/v1/version', null));
  return { exchanges, issued };
}
