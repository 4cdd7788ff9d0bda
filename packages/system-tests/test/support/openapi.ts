/**
 * Validates live responses against docs/openapi.yaml (when the file exists): the status must be
 * documented for the operation and the body must match the documented schema of its media type.
 * OpenAPI 3.0 `nullable` is turned into a JSON Schema type union; 3.1 documents are used as is.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { parse } from 'yaml';
import type { ObservedResponse } from './shapes.js';

const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (a: Ajv) => void;

export const OPENAPI_PATH = fileURLToPath(new URL('../../../../docs/openapi.yaml', import.meta.url));

type Json = Record<string, unknown>;

interface Operation {
  readonly method: string;
  readonly pattern: RegExp;
  readonly template: string;
  readonly responses: Json;
}

interface Loaded {
  readonly ajv: Ajv;
  readonly doc: Json;
  readonly operations: readonly Operation[];
  readonly basePath: string;
  readonly cache: Map<string, ValidateFunction>;
}

function convert30(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(convert30);
  if (node === null || typeof node !== 'object') return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node as Json)) out[k] = convert30(v);
  if (out.nullable === true) {
    delete out.nullable;
    if (typeof out.type === 'string') out.type = [out.type, 'null'];
    else if (out.enum !== undefined && Array.isArray(out.enum)) out.enum = [...(out.enum as unknown[]), null];
    else if (out.$ref !== undefined || out.allOf !== undefined || out.oneOf !== undefined || out.anyOf !== undefined) {
      const copy = { ...out };
      for (const key of Object.keys(out)) delete out[key];
      out.anyOf = [copy, { type: 'null' }];
    }
  }
  return out;
}

let loaded: Loaded | null | undefined;

function load(): Loaded | null {
  if (loaded !== undefined) return loaded;
  if (!existsSync(OPENAPI_PATH)) {
    loaded = null;
    return null;
  }
  const raw = parse(readFileSync(OPENAPI_PATH, 'utf8')) as Json;
  const version = String(raw.openapi ?? '');
  const doc = (version.startsWith('3.0') ? convert30(raw) : raw) as Json;
  const ajv = (version.startsWith('3.1') ? new Ajv2020({ strict: false, allErrors: true }) : new Ajv({ strict: false, allErrors: true })) as Ajv;
  addFormats(ajv);
  ajv.addSchema({ ...doc, $id: 'openapi.json' } as Json);
  const servers = (doc.servers as { url?: string }[] | undefined) ?? [];
  let basePath = '';
  const serverUrl = servers[0]?.url ?? '';
  try {
    basePath = new URL(serverUrl, 'http://x').pathname.replace(/\/$/, '');
  } catch {
    basePath = '';
  }
  const operations: Operation[] = [];
  for (const [template, item] of Object.entries((doc.paths as Json | undefined) ?? {})) {
    for (const [method, op] of Object.entries(item as Json)) {
      if (!['get', 'put', 'post', 'patch', 'delete', 'head', 'options'].includes(method)) continue;
      const full = template.startsWith('/v1') ? template : basePath + template;
      const pattern = new RegExp(`^${full.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`);
      operations.push({ method: method.toUpperCase(), pattern, template, responses: ((op as Json).responses as Json | undefined) ?? {} });
    }
  }
  loaded = { ajv, doc, operations, basePath, cache: new Map() };
  return loaded;
}

export function openApiAvailable(): boolean {
  return load() !== null;
}

function pointer(parts: readonly string[]): string {
  return parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');
}

function deref(doc: Json, node: Json): { node: Json; path: string[] | null } {
  const ref = node.$ref;
  if (typeof ref !== 'string' || !ref.startsWith('#/')) return { node, path: null };
  const parts = ref
    .slice(2)
    .split('/')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  let cur: unknown = doc;
  for (const p of parts) cur = (cur as Json | undefined)?.[p];
  return { node: (cur ?? {}) as Json, path: parts };
}

/** Problems of this response against docs/openapi.yaml; empty when it conforms or the file is absent. */
export function openApiProblems(r: ObservedResponse): string[] {
  const l = load();
  if (l === null) return [];
  const pathname = r.path.split('?')[0] ?? r.path;
  const method = r.method.toUpperCase();
  const op = l.operations.find((o) => o.method === method && o.pattern.test(pathname));
  if (op === undefined) return [];
  const status = String(r.status);
  const key = [status, `${status[0]}XX`, `${status[0]}xx`, 'default'].find((k) => op.responses[k] !== undefined);
  if (key === undefined) return [`openapi: ${method} ${op.template} does not document status ${status}`];
  if (method === 'HEAD' || r.status === 204) return [];
  const base = ['paths', op.template, method.toLowerCase(), 'responses', key];
  const { node: response, path: responsePath } = deref(l.doc, op.responses[key] as Json);
  const content = response.content as Json | undefined;
  if (content === undefined) return r.text === '' ? [] : [`openapi: ${method} ${op.template} ${status} documents no body`];
  const contentType = (r.headers.get('content-type') ?? '').split(';')[0]?.trim() ?? '';
  const mediaKey = Object.keys(content).find((k) => k === contentType) ?? Object.keys(content).find((k) => k === '*/*');
  if (mediaKey === undefined) return [`openapi: ${method} ${op.template} ${status} does not document content type ${contentType}`];
  const schemaPath = [...(responsePath ?? base), 'content', mediaKey, 'schema'];
  const ref = `openapi.json#/${pointer(schemaPath)}`;
  let validate = l.cache.get(ref);
  if (validate === undefined) {
    validate = l.ajv.compile({ $ref: ref });
    l.cache.set(ref, validate);
  }
  let body: unknown;
  try {
    body = JSON.parse(r.text);
  } catch {
    return [`openapi: ${status} body is not JSON`];
  }
  if (validate(body)) return [];
  return [`openapi: ${method} ${op.template} ${status}: ${l.ajv.errorsText(validate.errors, { separator: '; ' })}`];
}
