/**
 * Turning any failure into the one line an operator sees on stderr. Domain errors carry the
 * contract's codes and details; the field names of those details are shown as the CLI's own
 * option and argument names. Domain errors are recognised by isDomainError (their cross-copy brand)
 * and their `code`, never by `instanceof`, so a store built against another copy of @cos/core still
 * gets its proper message.
 */
import { isDomainError, isDomainErrorWithCode } from '@cos/core';
import { ConfigError } from './config.js';
import { currentIo } from './io.js';

/** Exit status of a failed command: 2 when it was called wrongly (usage), 1 for any other failure. */
const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** A failure whose message is already meant for the operator. */
export class CliError extends Error {
  /** The `error` field of the --json form. */
  readonly code: string;
  /** True when the command line itself is wrong (exit status 2). */
  readonly usage: boolean;

  constructor(message: string, options: { readonly code?: string; readonly usage?: boolean } = {}) {
    super(message);
    this.name = 'CliError';
    this.usage = options.usage === true;
    this.code = options.code ?? (this.usage ? 'USAGE_ERROR' : 'COMMAND_FAILED');
  }
}

/** commander's own errors (unknown command or option, missing argument, ...): exitOverride throws them. */
interface CommanderLike {
  readonly code: string;
  readonly exitCode: number;
  readonly message: string;
}

function isCommanderError(e: unknown): e is CommanderLike {
  return e instanceof Error && e.name === 'CommanderError' && typeof (e as { code?: unknown }).code === 'string';
}

/** How a failure ends the process: the --json `error` code, the one-line message and the exit status. */
interface Failure {
  readonly error: string;
  readonly message: string;
  readonly exitCode: number;
}

/**
 * `labels`: how this run's operator wrote a request field, where that differs from FIELD_LABELS
 * (`key issue --expires-in 3h` sends `expires_at`, and is named `--expires-in`); by default the
 * run's own (CliIo.state.labels, set by the command).
 */
function failureOf(e: unknown, labels: Readonly<Record<string, string>> = currentIo().state.labels ?? {}): Failure {
  if (isCommanderError(e)) {
    return { error: 'USAGE_ERROR', message: oneLine(e.message.replace(/^error: /, '')), exitCode: EXIT_USAGE };
  }
  const message = describeError(e, labels);
  if (e instanceof CliError) return { error: e.code, message, exitCode: e.usage ? EXIT_USAGE : EXIT_FAILURE };
  if (e instanceof ConfigError) return { error: 'CONFIG_ERROR', message, exitCode: EXIT_FAILURE };
  if (isDomainError(e)) return { error: e.code, message, exitCode: isCommandLineValueError(e, labels) ? EXIT_USAGE : EXIT_FAILURE };
  const code = e instanceof Error ? (e as { code?: unknown }).code : undefined;
  if (typeof code === 'string' && NETWORK_CODES.has(code)) return { error: 'SERVICE_UNAVAILABLE', message, exitCode: EXIT_FAILURE };
  return { error: 'COMMAND_FAILED', message, exitCode: EXIT_FAILURE };
}

/**
 * A validation failure of values the operator typed (every detail names a flag, such as `--name`
 * or `--expires-at`, or an argument, such as `<org_id>`): the command line is wrong, exit status 2,
 * as for the values the CLI checks itself. A failure naming anything else stays exit status 1.
 */
function isCommandLineValueError(e: { readonly code: string; readonly details: readonly { readonly field: string }[] }, labels: Readonly<Record<string, string>>): boolean {
  return e.code === 'VALIDATION_ERROR' && e.details.length > 0 && e.details.every((d) => /^(--|<)/.test(labels[d.field] ?? FIELD_LABELS[d.field] ?? ''));
}

/** The failure on the run's stderr: `cos-admin: <message>`, or with --json one line `{"error":…,"message":…}`. */
export function reportFailure(e: unknown, json: boolean): number {
  const f = failureOf(e);
  currentIo().stderr.write(json ? `${JSON.stringify({ error: f.error, message: f.message })}\n` : `cos-admin: ${f.message}\n`);
  return f.exitCode;
}

/** Request field -> how the operator wrote it. */
const FIELD_LABELS: Readonly<Record<string, string>> = {
  org_id: '<org_id>',
  key_id: '<key_id>',
  member_id: '<member_id>',
  name: '--name',
  slug: '--slug',
  email: '--email',
  label: '--label',
  expires_at: '--expires-at',
  environment: '--test',
  section: '--section',
  industry_section: '--section',
  limit: '--limit',
  cursor: '--cursor',
  kind: '--kind',
  org: '--org',
  organisation_id: '--org',
  url: '--url',
  events: '--events',
  enabled: '--enabled',
  status: '--status',
  id: '<id>',
  scopes: '--scopes',
  max_lifetime_seconds: '--max-lifetime',
  allowed_environments: '--environments',
  exposure_response: '--exposure-response',
  expiry_notice_seconds: '--expiry-notice',
  expiring_within: '--expiring-within',
  grace_period_seconds: '--grace',
  overlap_seconds: '--overlap',
  since: '--since',
  until: '--until',
  metadata: '--metadata',
  allowed_cidrs: '--allowed-cidrs',
  granularity: '--granularity',
};

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'ECONNRESET', 'EHOSTUNREACH']);

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ').trim();
}

function causeMessage(e: unknown): string | undefined {
  const cause = (e as { cause?: unknown }).cause;
  return cause instanceof Error ? oneLine(cause.message) : undefined;
}

export function describeError(e: unknown, labels: Readonly<Record<string, string>> = {}): string {
  const label = (field: string): string => labels[field] ?? FIELD_LABELS[field] ?? field;
  if (e instanceof CliError || e instanceof ConfigError) return oneLine(e.message);
  if (isDomainError(e)) {
    const details = e.details.map((d) => `${label(d.field)}: ${d.issue}`).join('; ');
    switch (e.code) {
      case 'VALIDATION_ERROR':
        return `invalid input: ${details || oneLine(e.message)}`;
      case 'SERVICE_UNAVAILABLE': {
        // The credential fence: Redis, not the database.
        if (isDomainErrorWithCode(e, 'SERVICE_UNAVAILABLE') && e.reason === 'credential_fence') {
          // The command's own fence refused (core's CommandFence): its message names what to set.
          const cause = (e as { cause?: unknown }).cause;
          if (cause instanceof Error && cause.name === 'CommandFenceRefusal') return oneLine(cause.message);
          // Redis answered but its replicas did not confirm the change in time (REDIS_MIN_REPLICAS_ACKED).
          if (cause instanceof Error && (cause as { reason?: unknown }).reason === 'not-replicated') return `${oneLine(cause.message)}: the change is refused; nothing was changed`;
          return 'Redis (REDIS_URL) is unreachable: credential changes are refused while the instances cache credentials; nothing was changed';
        }
        const cause = causeMessage(e);
        return `the database is unavailable${cause ? ` (${cause})` : ''}; check DATABASE_URL and that the database is up`;
      }
      default:
        return details ? `${oneLine(e.message)} (${details})` : oneLine(e.message);
    }
  }
  if (e instanceof AggregateError && e.errors.length > 0 && e.message === '') return describeError(e.errors[0], labels);
  if (e instanceof Error) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && NETWORK_CODES.has(code)) {
      return `cannot reach the database or Redis: ${oneLine(e.message)}`;
    }
    return oneLine(e.message) || e.name;
  }
  return oneLine(String(e));
}
