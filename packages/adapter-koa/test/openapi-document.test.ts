/**
 * docs/openapi.yaml itself: OpenAPI 3.1, every $ref resolves, every schema compiles under ajv's
 * strict mode, and the document describes the twelve operations of spec §4 under /v1 (spec §9).
 * (That every response of the suite matches it is checked by the test client on each exchange.)
 */
import { expect } from 'chai';
import { OpenApiDocument } from './support/openapi.js';

function walk(node: unknown, visit: (node: Record<string, unknown>, pointer: string) => void, pointer = '#'): void {
  if (node === null || typeof node !== 'object') return;
  if (!Array.isArray(node)) visit(node as Record<string, unknown>, pointer);
  for (const [k, v] of Object.entries(node)) walk(v, visit, `${pointer}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`);
}

/** The operations beyond v1 that issue 28 lists under `paths` (tag self-service). */
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

describe('adapter-koa: docs/openapi.yaml', () => {
  const doc = OpenApiDocument.load();
  const isSelfService = (template: string, method: string): boolean => {
    const op = (doc.paths()[template] as Record<string, Record<string, unknown>>)[method.toLowerCase()]!;
    return (op['tags'] as string[]).includes('self-service');
  };

  it('is OpenAPI 3.1 with the JSON Schema 2020-12 dialect and the /v1 server (spec §9)', () => {
    expect(doc.doc['openapi']).to.match(/^3\.1\./);
    expect(doc.doc['jsonSchemaDialect']).to.equal('https://json-schema.org/draft/2020-12/schema');
    expect(doc.serverUrl).to.equal('/v1');
  });

  it('spec §4, §9: describes the twelve operations and, tagged self-service, the additive ones for organisation owners; /health and /version without security', () => {
    const all = doc.operations();
    const selfService = all.filter((o) => isSelfService(o.template, o.method));
    const ops = all.filter((o) => !isSelfService(o.template, o.method));
    expect(ops).to.have.length(12);
    expect(selfService.map((o) => `${o.method} ${o.template}`).sort()).to.deep.equal([...SELF_SERVICE_OPERATIONS].sort());
    expect(new Set(all.map((o) => o.operationId)).size).to.equal(all.length);
    for (const o of all) {
      const op = (doc.paths()[o.template] as Record<string, Record<string, unknown>>)[o.method.toLowerCase()]!;
      const isPublic = o.template === '/health' || o.template === '/version';
      expect(op['security'], o.operationId).to.deep.equal(isPublic ? [] : undefined);
    }
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
      if (!['#/paths', '#/components/responses', '#/components/headers', '#/x-unmatched-responses'].some((p) => pointer.startsWith(p))) return;
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
      if (o.template !== '/health' && o.template !== '/version') expect(codes, o.operationId).to.include.members(['400', '401', '403', '503']);
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

  it('C-56: the always-on extensions (components/pathItems with x-path) are outside `paths`, authenticated, and document 400, 401, 403, 404, 429, 500, 503 (writes also 409) with the standard headers', () => {
    const ops = doc.extensionOperations();
    expect(ops.map((o) => `${o.method} ${o.template}`).sort()).to.deep.equal([
      'GET /organisations/{org_id}/audit-events',
      'GET /organisations/{org_id}/key-policy',
      'POST /organisations/{org_id}/api-keys/{key_id}/roll',
      'PUT /organisations/{org_id}/key-policy',
    ]);
    for (const o of ops) {
      expect(doc.paths()[o.template], 'not in paths (spec §9)').to.equal(undefined);
      const example = o.template.replace('{org_id}', '3f2504e0-4f89-41d3-9a0c-0305e82c3301').replace('{key_id}', '3f2504e0-4f89-41d3-9a0c-0305e82c3302');
      expect(doc.templateOf(example)).to.equal(o.template);
      const op = (doc.extensionPaths()[o.template]!.item as Record<string, Record<string, unknown>>)[o.method.toLowerCase()]!;
      expect(op['security'], o.operationId).to.equal(undefined);
      const responses = op['responses'] as Record<string, { $ref?: string }>;
      const success = o.method === 'GET' || o.method === 'PUT' ? ['200'] : ['201', '409'];
      expect(Object.keys(responses), o.operationId).to.include.members([...success, '400', '401', '403', '404', '429', '500', '503']);
      for (const [code, r] of Object.entries(responses)) {
        expect(r.$ref, `${o.operationId} ${code} is a $ref`).to.be.a('string');
        const headers = doc.deref<Record<string, unknown>>(r)['headers'] as Record<string, unknown>;
        expect(Object.keys(headers), `${o.operationId} ${code}`).to.include.members(['X-Request-Id', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset']);
      }
    }
  });
});
