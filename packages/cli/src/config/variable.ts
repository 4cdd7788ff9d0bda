/**
 * What one configuration variable is (its AppConfig field, documented default, meaning and parser),
 * and the parsers its value goes through: each message names the variable and what is wrong.
 */
import { availableParallelism } from 'node:os';
import { z } from 'zod';
import { parseCidr, parseWebhookSecretKey } from '@cos/core';
import { DURATION_GRAMMAR, parseDuration } from '../values.js';

export const INT_MAX = 2_147_483_647;

/** true/false (also 1/0, yes/no, any case): zod's string-to-boolean coercion with this word list. */
export function bool(name: string) {
  return z.stringbool({ truthy: ['true', '1', 'yes'], falsy: ['false', '0', 'no'], error: `${name} must be true or false` });
}

/**
 * An integer variable in [min, max], written as plain decimal digits: the pattern keeps out what
 * zod's number coercion (`Number()`) would also take, such as `1e3`, `0x10`, `1.0` or `+5`.
 */
export function int(name: string, min: number, max: number) {
  const error = max === INT_MAX ? `${name} must be an integer of at least ${min}` : `${name} must be an integer from ${min} to ${max}`;
  return z
    .string()
    .regex(/^\d{1,10}$/, { error })
    .pipe(z.coerce.number<string>().min(min, { error }).max(max, { error }));
}

export function url(name: string, protocols: readonly string[], what: string) {
  return z.string().refine(
    (s) => {
      try {
        const u = new URL(s);
        return protocols.includes(u.protocol) && (u.protocol === 'sqlite:' || u.host !== '');
      } catch {
        return false;
      }
    },
    { message: `${name} must be ${what}` },
  );
}

/** A comma-separated list of redis:// or rediss:// URLs naming a host and a port. */
export function clusterNodes(name: string) {
  return z
    .string()
    .refine(
      (s) =>
        s.split(',').every((part) => {
          try {
            const u = new URL(part.trim());
            return ['redis:', 'rediss:'].includes(u.protocol) && u.hostname !== '' && u.port !== '';
          } catch {
            return false;
          }
        }),
      { message: `${name} must be a comma-separated list of redis://host:port (or rediss://) URLs` },
    )
    .transform((s): readonly string[] => s.split(',').map((part) => part.trim()));
}

/** A comma-separated list of IPv4 or IPv6 CIDRs (a bare address is one host), each in canonical form. */
export function cidrList(name: string) {
  return z
    .string()
    .superRefine((s, ctx) => {
      for (const part of s.split(',')) {
        const parsed = parseCidr(part);
        if (!parsed.ok) ctx.addIssue({ code: 'custom', message: `${name}: ${part.trim()} ${parsed.issue}` });
      }
    })
    .transform((s): readonly string[] => s.split(',').map((part) => (parseCidr(part) as { cidr: string }).cidr));
}

export function host(name: string) {
  return z
    .string()
    .default('127.0.0.1')
    .refine((s) => /^[A-Za-z0-9.:\-[\]]+$/.test(s), { message: `${name} must be a host name or an IP address` });
}

/**
 * A secret key (32 bytes, hex or base64), or a comma-separated list of them: the message names the
 * variable and never repeats the value.
 */
export function secretKeys(name: string, list: boolean) {
  return z
    .string()
    .optional()
    .transform((s, ctx) => {
      if (s === undefined) return [];
      const parts = list ? s.split(',').map((p) => p.trim()).filter((p) => p !== '') : [s];
      const keys: Uint8Array[] = [];
      for (const [i, part] of parts.entries()) {
        try {
          keys.push(parseWebhookSecretKey(part));
        } catch (e) {
          ctx.addIssue({ code: 'custom', message: `${name}${list ? ` (key ${i + 1})` : ''} ${(e as Error).message}` });
          return z.NEVER;
        }
      }
      return keys;
    });
}

/** Most worker processes `serve` runs (WORKERS, --workers). */
const MAX_WORKERS = 64;

/** A number of workers, `1` to MAX_WORKERS, or `auto`: the cores available to this process. */
export function parseWorkers(text: string): number | null {
  const s = text.trim().toLowerCase();
  if (s === 'auto') return Math.min(MAX_WORKERS, Math.max(1, availableParallelism()));
  if (!/^\d{1,3}$/.test(s)) return null;
  const n = Number(s);
  return n >= 1 && n <= MAX_WORKERS ? n : null;
}

export function workersMessage(name: string): string {
  return `${name} must be a whole number from 1 to ${MAX_WORKERS}, or auto`;
}

export function workers(name: string) {
  return z
    .string()
    .refine((s) => parseWorkers(s) !== null, { error: workersMessage(name) })
    .transform((s) => parseWorkers(s) as number);
}

/** The CLI's duration grammar (values.ts, as every duration option), more than zero -> milliseconds. */
export function duration(name: string, d: string) {
  const error = `${name} must be more than zero and ${DURATION_GRAMMAR}`;
  const parse = (s: string): number | null => {
    try {
      return parseDuration(s);
    } catch {
      return null;
    }
  };
  return z
    .string()
    .default(d)
    .refine((s) => parse(s) !== null, { error })
    .transform((s) => parse(s) as number);
}

/**
 * One configuration variable: the AppConfig field it gives, its default as documented (`unset` when
 * it has none), what it means (Markdown: `code` in backticks), and its parser (default applied,
 * message naming the variable), whose output is the field's value and type.
 */
export interface Variable<F extends string, S extends z.ZodType> {
  readonly field: F;
  readonly default: string;
  readonly meaning: string;
  readonly schema: S;
}

export const variable = <const F extends string, S extends z.ZodType>(field: F, d: string, meaning: string, schema: S): Variable<F, S> => ({ field, default: d, meaning, schema });

/** An unset optional variable is null in AppConfig. */
export const orNull = <T>(value: T | undefined): T | null => value ?? null;
