/**
 * docs/openapi.yaml itself: OpenAPI 3.1 with no vendor extensions, every $ref resolves, every
 * schema compiles under ajv's strict mode; the twelve operations of spec §4 under /v1 (spec §9)
 * exactly as v1 defines them, and every other route the router answers under `paths` too, tagged
 * `extensions` (C-56); every event the service sends under `webhooks`.
 * (That every response of the suite matches it is checked by the test client on each exchange.)
 */
import { expect } from 'chai';
import { WEBHOOK_EVENT_TYPES } from '@cos/core';
import { apiKeyRoutes } from '../src/routes/api-keys.js';
import { auditEventRoutes } from '../src/routes/audit-events.js';
import { usageRoutes } from '../src/routes/usage.js';
import type { RouteKit } from '../src/routes/kit.js';
import { introspectRoutes } from '../src/routes/introspect.js';
import { memberRoutes } from '../src/routes/members.js';
import { metaRoutes } from '../src/routes/meta.js';
import { organisationRoutes } from '../src/routes/organisations.js';
import { secretScanningRoutes } from '../src/routes/secret-scanning.js';
import { webhookRoutes } from '../src/routes/webhooks.js';
import { EXTENSIONS_TAG, OpenApiDocument } from './support/openapi.js';

function walk(node: unknown, visit: (node: Record<string, unknown>, pointer: string) => void, pointer = '#'): void {
  if (node === null || typeof node !== 'object') return;
  if (!Array.isArray(node)) visit(node as Record<string, unknown>, pointer);
  for (const [k, v] of Object.entries(node)) walk(v, visit, `${pointer}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`);
}

/** The twelve operations of spec §4, relative to the /v1 server url. */
const V1_OPERATIONS = [
  'GET /health',
  'GET /version',
  'GET /organisations',
  'POST /organisations',
  'GET /organisations/{org_id}',
  'PUT /organisations/{org_id}',
  'PATCH /organisations/{org_id}',
  'GET /organisations/{org_id}/members',
  'GET /organisations/{org_id}/api-keys',
  'POST /organisations/{org_id}/api-keys',
  'GET /organisations/{org_id}/api-keys/{key_id}',
  'DELETE /organisations/{org_id}/api-keys/{key_id}',
];

/** The operations beyond v1 for organisation owners (tag self-service as well as extensions). */
const SELF_SERVICE_OPERATIONS = [
  'GET /me',
  'GET /organisations/{org_id}/webhook-endpoint',
  'PUT /organisations/{org_id}/webhook-endpoint',
  'DELETE /organisations/{org_id}/webhook-endpoint',
  'POST /organisations/{org_id}/webhook-endpoint/rotate-secret',
  'POST /organisations/{org_id}/webhook-endpoint/ping',
  'GET /organisations/{org_id}/webhook-endpoint/deliveries',
  'POST /organisations/{org_id}/webhook-endpoint/deliveries/{delivery_id}/redeliver',
];

/**
 * Every route the router can answer, as `METHOD /template` relative to /v1: the route tables of
 * createKoaApp with the optional secret-scanning alerts turned on. Building a table runs no handler,
 * so the kit is a stand-in that nothing reads.
 */
function routerOperations(): string[] {
  const kit = { core: {} } as unknown as RouteKit;
  const routes = [
    ...metaRoutes(kit, '0.0.0'),
    ...organisationRoutes(kit),
    ...memberRoutes(kit),
    ...auditEventRoutes(kit),
    ...usageRoutes(kit),
    ...apiKeyRoutes(kit),
    ...webhookRoutes(kit),
    ...introspectRoutes(kit),
    ...secretScanningRoutes(kit, { keys: () => ({ keys: new Map() }) } as never, () => '127.0.0.1', {} as never),
  ];
  return routes.map((r) => {
    expect(r.template.startsWith('/v1/'), r.template).to.equal(true);
    return `${r.method} ${r.template.slice('/v1'.length).replace(/:([a-z_]+)/g, '{$1}')}`;
  });
}

describe('adapter-koa: docs/openapi.yaml', () => {
  const doc = OpenApiDocument.load();
  const name = (o: { method: string; template: string }): string => `${o.method} ${o.template}`;

  it('is OpenAPI 3.1 with the JSON Schema 2020-12 dialect and the /v1 server (spec §9)', () => {
    expect(doc.doc['openapi']).to.match(/^3\.1\./);
    expect(doc.doc['jsonSchemaDialect']).to.equal('https://json-schema.org/draft/2020-12/schema');
    expect(doc.serverUrl).to.equal('/v1');
  });

  it('spec §4, §9: the operations without the `extensions` tag are exactly the twelve v1 operations; /health and /version without security', () => {
    expect(doc.v1Operations().map(name).sort()).to.deep.equal([...V1_OPERATIONS].sort());
    for (const o of doc.v1Operations()) {
      const isPublic = o.template === '/health' || o.template === '/version';
      expect(doc.operation(o)['security'], o.operationId).to.deep.equal(isPublic ? [] : undefined);
      expect(doc.operation(o)['tags'], o.operationId).to.not.include(EXTENSIONS_TAG);
    }
    expect(new Set(doc.operations().map((o) => o.operationId)).size).to.equal(doc.operations().length);
  });

  it('C-56: every route the router answers is an operation of `paths`, and every operation of `paths` is a route', () => {
    const routes = routerOperations();
    expect(new Set(routes).size).to.equal(routes.length);
    expect(doc.operations().map(name).sort()).to.deep.equal([...routes].sort());
    const tags = (doc.doc['tags'] as { name: string }[]).map((t) => t.name);
    expect(tags).to.include(EXTENSIONS_TAG);
  });

  it('C-56: the operations beyond v1 are tagged `extensions` (the self-service ones also `self-service`); every one but the signed alerts needs a key', () => {
    const extensions = doc.extensionOperations();
    expect(extensions.map(name).sort()).to.deep.equal(
      [
        ...SELF_SERVICE_OPERATIONS,
        'POST /secret-scanning/alerts',
        'POST /organisations/{org_id}/api-keys/{key_id}/roll',
        'PATCH /organisations/{org_id}/api-keys/{key_id}',
        'GET /organisations/{org_id}/key-policy',
        'PUT /organisations/{org_id}/key-policy',
        'GET /organisations/{org_id}/rate-limit',
        'PUT /organisations/{org_id}/rate-limit',
        'GET /organisations/{org_id}/audit-events',
        'POST /introspect',
        'GET /organisations/{org_id}/api-keys/{key_id}/usage',
        'GET /organisations/{org_id}/usage',
      ].sort(),
    );
    const selfService = extensions.filter((o) => (doc.operation(o)['tags'] as string[]).includes('self-service'));
    expect(selfService.map(name).sort()).to.deep.equal([...SELF_SERVICE_OPERATIONS].sort());
    for (const o of extensions) {
      const signed = o.template === '/secret-scanning/alerts';
      expect(doc.operation(o)['security'], o.operationId).to.deep.equal(signed ? [] : undefined);
      // Introspection names no organisation or key in its path: it answers 200 for any token (C-272).
      if (signed || selfService.includes(o) || o.template === '/introspect') continue;
      // The key's lifecycle and policy extensions: every answer a $ref, 404 for a missing organisation or key.
      const responses = doc.operation(o)['responses'] as Record<string, { $ref?: string }>;
      const success = o.method === 'GET' || o.method === 'PUT' ? ['200'] : o.method === 'PATCH' ? ['200', '409'] : ['201', '409'];
      expect(Object.keys(responses), o.operationId).to.include.members([...success, '400', '401', '403', '404', '429', '500', '503']);
      for (const [code, r] of Object.entries(responses)) expect(r.$ref, `${o.operationId} ${code} is a $ref`).to.be.a('string');
    }
  });

  it('C-59: every event the service sends is under `webhooks` (a POST with its own request schema)', () => {
    const webhooks = doc.doc['webhooks'] as Record<string, Record<string, Record<string, unknown>>>;
    expect(Object.keys(webhooks).sort()).to.deep.equal([...WEBHOOK_EVENT_TYPES].sort());
    for (const [event, item] of Object.entries(webhooks)) {
      const body = item['post']!['requestBody'] as { content: Record<string, { schema: { $ref: string } }> };
      const schema = doc.deref<{ properties: { type: { const: string } } }>(body.content['application/json']!.schema);
      expect(schema.properties.type.const, event).to.equal(event);
    }
  });

  it('is standard OpenAPI: no vendor extension (`x-…`) anywhere', () => {
    const found: string[] = [];
    walk(doc.doc, (node, pointer) => {
      for (const key of Object.keys(node)) if (key.startsWith('x-')) found.push(`${pointer}/${key}`);
    });
    expect(found).to.deep.equal([]);
  });

  it('every $ref resolves', () => {
    const refs: string[] = [];
    walk(doc.doc, (node) => {
      if (typeof node['$ref'] === 'string') refs.push(node['$ref']);
    });
    expect(refs.length).to.be.greaterThan(50);
    for (const ref of refs) expect(() => doc.pointer(ref), ref).to.not.throw();
  });

  it('every response schema and header schema compiles under ajv strict mode', () => {
    let compiled = 0;
    walk(doc.doc, (node, pointer) => {
      if (!['#/paths', '#/components/responses', '#/components/headers'].some((p) => pointer.startsWith(p))) return;
      if (node['schema'] !== undefined && typeof node['schema'] === 'object') {
        doc.validatorAt(`${pointer}/schema`);
        compiled++;
      }
    });
    expect(compiled).to.be.greaterThan(20);
  });

  it('spec §5, §7, C-52: every authenticated operation documents 401, 403, 429, 500; every response documents the rate-limit and request-id headers', () => {
    for (const o of doc.operations()) {
      const op = (doc.paths()[o.template] as Record<string, Record<string, unknown>>)[o.method.toLowerCase()]!;
      const responses = op['responses'] as Record<string, unknown>;
      const codes = Object.keys(responses);
      expect(codes, o.operationId).to.include.members(['429', '500']);
      if (o.template === '/secret-scanning/alerts') expect(codes, o.operationId).to.include.members(['400', '401', '404', '503']);
      else if (o.template !== '/health' && o.template !== '/version') expect(codes, o.operationId).to.include.members(['400', '401', '403', '503']);
      for (const [code, r] of Object.entries(responses)) {
        const headers = doc.deref<Record<string, unknown>>(r)['headers'] as Record<string, unknown>;
        expect(Object.keys(headers), `${o.operationId} ${code}`).to.include.members([
          'X-Request-Id',
          'X-RateLimit-Limit',
          'X-RateLimit-Remaining',
          'X-RateLimit-Reset',
        ]);
      }
    }
  });
});
